package atom

import (
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// Bounds on hostile input, so that memory and time stay proportional to a small body. Real
// descriptions are a few kilobytes; the deepest real path is seven elements (entry, content,
// description, AuthorizationRules, AuthorizationRule, Rights, AccessRights), and a
// DefaultRuleDescription with correlation properties reaches about eight.
const (
	maxBodySize = 1 << 20
	maxDepth    = 32
)

// DecodeProperties parses a PUT body for an entity of kind k and returns its properties: every
// element the body omits keeps its value from broker.DefaultProperties(k) (an update replaces the
// whole description, so omitted elements revert to defaults). An empty body, an entry without
// content and an empty description all give the defaults.
//
// The body may be an Atom entry (any prefix, with or without an XML declaration) or the bare
// description element. Elements are matched by local name; read-only elements clients echo back
// (SizeInBytes, CountDetails, CreatedAt, EntityAvailabilityStatus, ...) and unknown ones are
// ignored, as are empty or xsi:nil typed elements. ForwardTo and ForwardDeadLetteredMessagesTo
// are read as entity paths (an sb://, http:// or https:// host prefix is stripped), and one
// given as such a URL is kept as written too (ForwardToURL, ForwardDeadLetteredMessagesToURL),
// for descriptions to echo. A subscription's DefaultRuleDescription is skipped;
// DecodeSubscription reads it.
//
// It returns a *broker.Error with Code broker.CodeBadRequest (the message names the element and the
// bad value) for malformed XML, a body over 1 MiB or nested deeper than 32 elements, a root that
// is neither an entry nor a description, a description of the wrong kind (e.g. TopicDescription
// when a queue is being created), or an unparseable value, including a Status that is not one of
// the broker.Status values and an unknown access right. Range validation is not done here
// (broker.Properties.Validate does it). An unknown k is a programming error and gives a plain error.
func DecodeProperties(body []byte, k broker.Kind) (broker.Properties, error) {
	fields, ok := kindFields[k]
	if !ok {
		return broker.Properties{}, fmt.Errorf("atom: cannot decode a description of kind %v", k)
	}
	p := broker.DefaultProperties(k)
	d := descDecoder{kind: k, fields: fields, props: &p}
	if err := d.decode(body); err != nil {
		return broker.Properties{}, err
	}
	return p, nil
}

// descDecoder walks one PUT body and fills props.
type descDecoder struct {
	kind   broker.Kind
	fields map[string]field
	props  *broker.Properties
	// onDefaultRule is the seam for the rule codec: when set, it is called for a subscription's
	// <DefaultRuleDescription> with the reader just past the start tag and must consume through
	// the matching end tag. It shares the document's decoder, so the xsi:type prefixes declared
	// on the description or the entry still resolve. nil skips the element.
	onDefaultRule func(r *reader, start xml.StartElement) error
}

// field reads one description element. Exactly one of text and elem is set: text receives the
// element's character data, elem the reader positioned after the start tag.
type field struct {
	text func(p *broker.Properties, v string) error
	elem func(d *descDecoder, r *reader, start xml.StartElement) error
}

// Element names of each kind's settable properties (protocol.md §4.5–4.7 request orders).
// Topics do not read ForwardTo: the service cannot forward from a topic and never writes it back.
var kindFields = map[broker.Kind]map[string]field{
	broker.KindQueue: {
		"LockDuration":                        durationField(func(p *broker.Properties) *time.Duration { return &p.LockDuration }),
		"MaxSizeInMegabytes":                  int64Field(func(p *broker.Properties) *int64 { return &p.MaxSizeInMegabytes }),
		"RequiresDuplicateDetection":          boolField(func(p *broker.Properties) *bool { return &p.RequiresDuplicateDetection }),
		"RequiresSession":                     boolField(func(p *broker.Properties) *bool { return &p.RequiresSession }),
		"DefaultMessageTimeToLive":            durationField(func(p *broker.Properties) *time.Duration { return &p.DefaultMessageTimeToLive }),
		"DeadLetteringOnMessageExpiration":    boolField(func(p *broker.Properties) *bool { return &p.DeadLetteringOnMessageExpiration }),
		"DuplicateDetectionHistoryTimeWindow": durationField(func(p *broker.Properties) *time.Duration { return &p.DuplicateDetectionHistoryTimeWindow }),
		"MaxDeliveryCount":                    int32Field(func(p *broker.Properties) *int32 { return &p.MaxDeliveryCount }),
		"EnableBatchedOperations":             boolField(func(p *broker.Properties) *bool { return &p.EnableBatchedOperations }),
		"IsAnonymousAccessible":               boolField(func(p *broker.Properties) *bool { return &p.IsAnonymousAccessible }),
		"AuthorizationRules":                  {elem: (*descDecoder).authorizationRules},
		"Status":                              {text: setStatus},
		"ForwardTo":                           forwardField(forwardTo, forwardToURL),
		"UserMetadata":                        {text: setUserMetadata},
		"SupportOrdering":                     boolField(func(p *broker.Properties) *bool { return &p.SupportOrdering }),
		"AutoDeleteOnIdle":                    durationField(func(p *broker.Properties) *time.Duration { return &p.AutoDeleteOnIdle }),
		"EnablePartitioning":                  boolField(func(p *broker.Properties) *bool { return &p.EnablePartitioning }),
		"ForwardDeadLetteredMessagesTo":       forwardField(forwardDeadLetters, forwardDeadLettersURL),
		"EnableExpress":                       boolField(func(p *broker.Properties) *bool { return &p.EnableExpress }),
		"MaxMessageSizeInKilobytes":           int64Field(func(p *broker.Properties) *int64 { return &p.MaxMessageSizeInKilobytes }),
	},
	broker.KindTopic: {
		"DefaultMessageTimeToLive":            durationField(func(p *broker.Properties) *time.Duration { return &p.DefaultMessageTimeToLive }),
		"MaxSizeInMegabytes":                  int64Field(func(p *broker.Properties) *int64 { return &p.MaxSizeInMegabytes }),
		"RequiresDuplicateDetection":          boolField(func(p *broker.Properties) *bool { return &p.RequiresDuplicateDetection }),
		"DuplicateDetectionHistoryTimeWindow": durationField(func(p *broker.Properties) *time.Duration { return &p.DuplicateDetectionHistoryTimeWindow }),
		"EnableBatchedOperations":             boolField(func(p *broker.Properties) *bool { return &p.EnableBatchedOperations }),
		"FilteringMessagesBeforePublishing":   boolField(func(p *broker.Properties) *bool { return &p.FilteringMessagesBeforePublishing }),
		"IsAnonymousAccessible":               boolField(func(p *broker.Properties) *bool { return &p.IsAnonymousAccessible }),
		"AuthorizationRules":                  {elem: (*descDecoder).authorizationRules},
		"Status":                              {text: setStatus},
		"UserMetadata":                        {text: setUserMetadata},
		"SupportOrdering":                     boolField(func(p *broker.Properties) *bool { return &p.SupportOrdering }),
		"AutoDeleteOnIdle":                    durationField(func(p *broker.Properties) *time.Duration { return &p.AutoDeleteOnIdle }),
		"EnablePartitioning":                  boolField(func(p *broker.Properties) *bool { return &p.EnablePartitioning }),
		"EnableSubscriptionPartitioning":      boolField(func(p *broker.Properties) *bool { return &p.EnableSubscriptionPartitioning }),
		"EnableExpress":                       boolField(func(p *broker.Properties) *bool { return &p.EnableExpress }),
		"MaxMessageSizeInKilobytes":           int64Field(func(p *broker.Properties) *int64 { return &p.MaxMessageSizeInKilobytes }),
	},
	broker.KindSubscription: {
		"LockDuration":                              durationField(func(p *broker.Properties) *time.Duration { return &p.LockDuration }),
		"RequiresSession":                           boolField(func(p *broker.Properties) *bool { return &p.RequiresSession }),
		"DefaultMessageTimeToLive":                  durationField(func(p *broker.Properties) *time.Duration { return &p.DefaultMessageTimeToLive }),
		"DeadLetteringOnMessageExpiration":          boolField(func(p *broker.Properties) *bool { return &p.DeadLetteringOnMessageExpiration }),
		"DeadLetteringOnFilterEvaluationExceptions": boolField(func(p *broker.Properties) *bool { return &p.DeadLetteringOnFilterEvaluation }),
		"DefaultRuleDescription":                    {elem: (*descDecoder).defaultRuleDescription},
		"MaxDeliveryCount":                          int32Field(func(p *broker.Properties) *int32 { return &p.MaxDeliveryCount }),
		"EnableBatchedOperations":                   boolField(func(p *broker.Properties) *bool { return &p.EnableBatchedOperations }),
		"Status":                                    {text: setStatus},
		"ForwardTo":                                 forwardField(forwardTo, forwardToURL),
		"UserMetadata":                              {text: setUserMetadata},
		"ForwardDeadLetteredMessagesTo":             forwardField(forwardDeadLetters, forwardDeadLettersURL),
		"AutoDeleteOnIdle":                          durationField(func(p *broker.Properties) *time.Duration { return &p.AutoDeleteOnIdle }),
	},
}

// descriptionName is the element that carries a description of kind k.
func descriptionName(k broker.Kind) string {
	return k.String() + "Description"
}

func (d *descDecoder) decode(body []byte) error {
	return decodeEnvelope(body, descriptionName(d.kind), d.description)
}

// description reads the children of a description element. Order does not matter (the real
// service is order-sensitive and silently drops misplaced elements; clients disagree on order).
func (d *descDecoder) description(r *reader, start xml.StartElement) error {
	if want := descriptionName(d.kind); start.Name.Local != want {
		return broker.BadRequest("The request body contains a %s, but a %s was expected.", broker.Clip(start.Name.Local), want)
	}
	for {
		tok, err := r.next()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			f, ok := d.fields[t.Name.Local]
			switch {
			case !ok || isNil(t.Attr):
				err = r.skip()
			case f.elem != nil:
				err = f.elem(d, r, t)
			default:
				var v string
				if v, err = r.text(t.Name.Local); err == nil {
					if ferr := f.text(d.props, v); ferr != nil {
						err = broker.BadRequest("The value '%s' of element %s is not valid: %v.", broker.Clip(v), t.Name.Local, ferr)
					}
				}
			}
			if err != nil {
				return err
			}
		case xml.EndElement:
			return nil
		}
	}
}

// defaultRuleDescription is where a subscription's default rule enters; see onDefaultRule.
func (d *descDecoder) defaultRuleDescription(r *reader, start xml.StartElement) error {
	if d.onDefaultRule != nil {
		return d.onDefaultRule(r, start)
	}
	return r.skip()
}

// authorizationRules replaces the rule list with the rules in the element, so that an update
// sending <AuthorizationRules></AuthorizationRules> (as Go always does) clears them.
func (d *descDecoder) authorizationRules(r *reader, _ xml.StartElement) error {
	var rules []broker.AuthorizationRule
	for {
		tok, err := r.next()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local != "AuthorizationRule" && t.Name.Local != "SharedAccessAuthorizationRule" {
				if err := r.skip(); err != nil {
					return err
				}
				continue
			}
			rule, err := authorizationRule(r, t)
			if err != nil {
				return err
			}
			rules = append(rules, rule)
		case xml.EndElement:
			d.props.AuthorizationRules = rules
			return nil
		}
	}
}

func authorizationRule(r *reader, start xml.StartElement) (broker.AuthorizationRule, error) {
	var rule broker.AuthorizationRule
	// A rule without xsi:type is read as a shared access rule, the only kind the service still
	// issues; any other type (the retired ACS AllowRule) cannot be honoured.
	if typ, ok := xsiType(start.Attr); ok && typ != "SharedAccessAuthorizationRule" {
		return rule, broker.BadRequest("The authorization rule type '%s' is not supported; use SharedAccessAuthorizationRule.", broker.Clip(typ))
	}
	for {
		tok, err := r.next()
		if err != nil {
			return rule, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			var dst *string
			var when *time.Time
			switch name {
			case "KeyName":
				dst = &rule.KeyName
			case "PrimaryKey":
				dst = &rule.PrimaryKey
			case "SecondaryKey":
				dst = &rule.SecondaryKey
			case "CreatedTime":
				when = &rule.CreatedTime
			case "ModifiedTime":
				when = &rule.ModifiedTime
			case "Rights":
				if rule.Rights, err = accessRights(r); err != nil {
					return rule, err
				}
				continue
			default: // ClaimType and ClaimValue are fixed for shared access rules
				if err := r.skip(); err != nil {
					return rule, err
				}
				continue
			}
			v, err := r.text(name)
			if err != nil {
				return rule, err
			}
			if dst != nil {
				*dst = strings.TrimSpace(v)
				continue
			}
			if *when, err = ParseTime(v); err != nil {
				return rule, broker.BadRequest("The value '%s' of element %s is not valid: %v.", broker.Clip(v), name, err)
			}
		case xml.EndElement:
			return rule, nil
		}
	}
}

// accessRights reads <Rights><AccessRights>Send</AccessRights>...</Rights>, canonicalising the
// case of each right and dropping repeats.
func accessRights(r *reader) ([]string, error) {
	var rights []string
	for {
		tok, err := r.next()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local != "AccessRights" {
				if err := r.skip(); err != nil {
					return nil, err
				}
				continue
			}
			v, err := r.text("AccessRights")
			if err != nil {
				return nil, err
			}
			right, ok := canonicalRight(strings.TrimSpace(v))
			if !ok {
				return nil, broker.BadRequest("The value '%s' of element AccessRights is not valid: use Manage, Send or Listen.", broker.Clip(v))
			}
			dup := false
			for _, have := range rights {
				dup = dup || have == right
			}
			if !dup {
				rights = append(rights, right)
			}
		case xml.EndElement:
			return rights, nil
		}
	}
}

func canonicalRight(s string) (string, bool) {
	for _, r := range [...]string{"Manage", "Send", "Listen"} {
		if strings.EqualFold(s, r) {
			return r, true
		}
	}
	return "", false
}

// xsiType returns the local part of an xsi:type attribute, resolving the prefix by namespace URI:
// clients use i:, xsi:, p4: and _XMLSchema-instance:. The undeclared prefixes "i" and "xsi" are
// accepted too, since a client that forgets the declaration still means the schema instance.
func xsiType(attrs []xml.Attr) (string, bool) {
	for _, a := range attrs {
		if a.Name.Local == "type" && isXSI(a.Name.Space) {
			v := strings.TrimSpace(a.Value)
			if i := strings.LastIndexByte(v, ':'); i >= 0 {
				v = v[i+1:]
			}
			return v, true
		}
	}
	return "", false
}

// isNil reports an xsi:nil="true" element, which .NET writes for a null value.
func isNil(attrs []xml.Attr) bool {
	for _, a := range attrs {
		if a.Name.Local == "nil" && isXSI(a.Name.Space) {
			v, err := parseBool(a.Value)
			return err == nil && v
		}
	}
	return false
}

func isXSI(space string) bool {
	return space == nsXSI || space == "i" || space == "xsi"
}

// The field constructors below treat an empty element as absent: .NET and some XML builders write
// <X></X> or <X/> for a value they have not got, and the default is the only sensible reading.

func durationField(ptr func(*broker.Properties) *time.Duration) field {
	return field{text: func(p *broker.Properties, v string) error {
		if v = strings.TrimSpace(v); v == "" {
			return nil
		}
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		*ptr(p) = d
		return nil
	}}
}

func boolField(ptr func(*broker.Properties) *bool) field {
	return field{text: func(p *broker.Properties, v string) error {
		if v = strings.TrimSpace(v); v == "" {
			return nil
		}
		b, err := parseBool(v)
		if err != nil {
			return err
		}
		*ptr(p) = b
		return nil
	}}
}

func int64Field(ptr func(*broker.Properties) *int64) field {
	return intField(64, "not an integer in range", func(p *broker.Properties, n int64) { *ptr(p) = n })
}

func int32Field(ptr func(*broker.Properties) *int32) field {
	return intField(32, "not a 32-bit integer", func(p *broker.Properties, n int64) { *ptr(p) = int32(n) })
}

// intField reads a decimal integer that fits in bits bits; an empty element keeps the default.
func intField(bits int, complaint string, set func(*broker.Properties, int64)) field {
	return field{text: func(p *broker.Properties, v string) error {
		if v = strings.TrimSpace(v); v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return errors.New(complaint)
		}
		set(p, n)
		return nil
	}}
}

// forwardField reads a forwarding target into the entity path ptr gives, and the URL it was
// written as, if any, into the one url gives (descriptions echo it).
func forwardField(ptr, url func(*broker.Properties) *string) field {
	return field{text: func(p *broker.Properties, v string) error {
		path, err := entityPath(v)
		if err != nil {
			return err
		}
		*ptr(p), *url(p) = path, ""
		if v = strings.TrimSpace(v); path != "" && v != path {
			if len(v) > maxForwardURL {
				return fmt.Errorf("the URL is longer than %d bytes", maxForwardURL)
			}
			*url(p) = v
		}
		return nil
	}}
}

// maxForwardURL bounds a forwarding target given as a URL, which is stored as written: an
// entity path (at most 260 characters) under a host name (at most 253) fits many times over.
const maxForwardURL = 2048

// The forwarding fields of broker.Properties, for forwardField.
func forwardTo(p *broker.Properties) *string             { return &p.ForwardTo }
func forwardToURL(p *broker.Properties) *string          { return &p.ForwardToURL }
func forwardDeadLetters(p *broker.Properties) *string    { return &p.ForwardDeadLetteredMessagesTo }
func forwardDeadLettersURL(p *broker.Properties) *string { return &p.ForwardDeadLetteredMessagesToURL }

// setUserMetadata keeps the text exactly, white space included: it is the owner's free text.
func setUserMetadata(p *broker.Properties, v string) error {
	p.UserMetadata = v
	return nil
}

func setStatus(p *broker.Properties, v string) error {
	if v = strings.TrimSpace(v); v == "" {
		return nil
	}
	for _, s := range [...]broker.Status{broker.StatusActive, broker.StatusDisabled, broker.StatusSendDisabled, broker.StatusReceiveDisabled} {
		if strings.EqualFold(v, string(s)) {
			p.Status = s
			return nil
		}
	}
	return errors.New("use Active, Disabled, SendDisabled or ReceiveDisabled")
}

// parseBool reads xs:boolean ("true", "false", "1", "0"), ignoring case as .NET clients'
// hand-written bodies sometimes capitalise it.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errors.New("use true or false")
}

// entityPath turns a forwarding target into the entity path it names. Clients send an absolute
// sb://host/path (JS, Python, the service's own echo) or a bare name (Go); the host is whatever
// the client called the gateway and carries no meaning here.
func entityPath(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	for _, scheme := range [...]string{"sb://", "http://", "https://"} {
		if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
			continue
		}
		rest := v[len(scheme):]
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			return "", errors.New("the URL names no entity")
		}
		path := strings.TrimSpace(rest[slash+1:])
		if path == "" {
			return "", errors.New("the URL names no entity")
		}
		return path, nil
	}
	return v, nil
}
