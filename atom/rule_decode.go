package atom

import (
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
)

// Bounds of the rule codec, besides the body size and nesting depth every decoder has. The
// expression bound is generous on purpose: the store enforces Service Bus's own limit
// (broker.MaxExpressionLength) with the service's message; this one only keeps hostile input small.
const (
	maxKeyValues      = 1000     // entries in one Parameters or Properties list
	maxExpressionText = 64 << 10 // bytes of one SqlExpression
)

// Namespaces of the xsi:type QNames of typed values (protocol.md §4.8).
const (
	nsXSD           = "http://www.w3.org/2001/XMLSchema"
	nsSerialization = "http://schemas.microsoft.com/2003/10/Serialization/"
)

const ruleDescriptionName = "RuleDescription"

// DecodeSubscription parses a PUT body for a subscription: its properties (like DecodeProperties with
// broker.KindSubscription) and the DefaultRuleDescription if the body has one (nil otherwise). A default rule
// without a Name gets broker.DefaultRuleName; a default rule without Action (Go omits it) has Action nil.
//
// The default rule is read as DecodeRule reads a RuleDescription. It returns the errors of
// DecodeProperties and DecodeRule, and a *broker.Error with CodeBadRequest for a description with
// more than one DefaultRuleDescription. An xsi:nil DefaultRuleDescription counts as absent.
func DecodeSubscription(body []byte) (broker.Properties, *broker.Rule, error) {
	p := broker.DefaultProperties(broker.KindSubscription)
	var rule *broker.Rule
	d := descDecoder{kind: broker.KindSubscription, fields: kindFields[broker.KindSubscription], props: &p,
		onDefaultRule: func(r *reader, _ xml.StartElement) error {
			if rule != nil {
				return broker.BadRequest("The SubscriptionDescription holds more than one DefaultRuleDescription.")
			}
			got, name, err := readRule(r)
			if err != nil {
				return err
			}
			got.Name = name
			if got.Name == "" {
				got.Name = broker.DefaultRuleName
			}
			rule = &got
			return nil
		}}
	if err := d.decode(body); err != nil {
		return broker.Properties{}, nil, err
	}
	return p, rule, nil
}

// DecodeRule parses a PUT body whose content is a RuleDescription (entry-wrapped or bare, every client variant).
// name is the rule name from the URL (used when the body has no <Name>; a body <Name> that differs is a bad request).
// Filter: SqlFilter (SqlExpression, CompatibilityLevel ignored, Parameters, RequiresPreprocessing ignored), TrueFilter, FalseFilter,
// CorrelationFilter (CorrelationId, MessageId, To, ReplyTo, Label, SessionId, ReplyToSessionId, ContentType, Properties),
// legacy names SqlFilterExpression → SqlFilter; a missing Filter → TrueFilter. Action: EmptyRuleAction or missing → nil;
// SqlRuleAction (SqlExpression, Parameters); legacy SqlFilterAction → SqlRuleAction. xsi:type resolved by namespace URI
// (i:, p4:, _XMLSchema-instance:, xsi:), never by prefix. Parameter/property values: <Value i:type="d5p1:int"> with
// prefixes resolving to http://www.w3.org/2001/XMLSchema → string, int/long/short/byte/unsignedByte/unsignedShort/
// unsignedInt/unsignedLong → int64, double/float/decimal → float64, boolean → bool, dateTime → time.Time (ISO 8601),
// duration → time.Duration (XML duration); in the http://schemas.microsoft.com/2003/10/Serialization/ namespace
// duration → time.Duration and guid → string; anything else → bad request. Each value keeps the type it was declared
// with in broker.Property.Type ("long", "ser:guid"; "string" without xsi:type), which AppendRuleEntry writes back. Keys keep their spelling
// (with the leading @ for SQL parameters). Errors: *broker.Error CodeBadRequest naming the element. No semantic validation of the
// SQL (the store compiles it). Limits: body ≤ 1 MiB, depth ≤ 32, ≤ 1000 parameters/properties, expression text ≤ 64 KiB here.
//
// Details beyond the above:
//   - Names compare case-insensitively, as entity paths do; the result carries name as given.
//     With name empty the body's <Name> is used (the Go SDK PUTs a nameless rule to
//     .../Rules/ with <Name>$Default</Name>); with neither it is a bad request.
//   - An empty body, an entry without content and an empty RuleDescription give a TrueFilter
//     rule without action, as `curl -X PUT .../Rules/r` means.
//   - A Filter without xsi:type is a CorrelationFilter if it has correlation elements, else a
//     SqlFilter if it has a non-blank SqlExpression, else a TrueFilter; an Action without one is
//     a SqlRuleAction if it has a non-blank SqlExpression, else none. azure-sb's SQL action type
//     SqlFilterExpression and the old CorrelationFilterExpression are accepted too.
//   - TrueFilter and FalseFilter always get "1=1" and "1=0"; their other children are ignored.
//   - A SqlFilter or SqlRuleAction needs a non-blank SqlExpression. Expressions, correlation
//     fields, keys and string values are kept exactly, white space included.
//   - A Value without xsi:type is a string (as the .NET client reads one); an xsi:nil Value, an
//     empty key, a repeated key within one list, and a repeated Filter, Action, Name, Parameters or
//     Properties element are bad requests. A QName without prefix, or with the undeclared
//     prefixes xs or xsd, is read in the XML Schema namespace. Numbers must be finite, and
//     durations may be negative ("-PT1M").
//   - int and long take any 64-bit value (the Go SDK declares every integer int, however
//     large); short, byte and the unsigned types their XML Schema range (unsignedLong up to
//     2^63-1); float the range of a float; a decimal has no exponent and at most the digits a
//     double keeps (it is evaluated as one); a guid is any GUID form and is kept as sent.
//   - CreatedAt and other read-only or unknown elements are ignored; the result's CreatedAt is
//     zero.
func DecodeRule(body []byte, name string) (broker.Rule, error) {
	rule := broker.Rule{Filter: trueFilter()}
	var bodyName string
	err := decodeEnvelope(body, ruleDescriptionName, func(r *reader, start xml.StartElement) error {
		if start.Name.Local != ruleDescriptionName {
			return broker.BadRequest("The request body contains a %s, but a %s was expected.", broker.Clip(start.Name.Local), ruleDescriptionName)
		}
		var err error
		rule, bodyName, err = readRule(r)
		return err
	})
	if err != nil {
		return broker.Rule{}, err
	}
	switch {
	case name == "" && bodyName == "":
		return broker.Rule{}, broker.BadRequest("The rule has no name: give it in the URL or in the Name element.")
	case name == "":
		rule.Name = bodyName
	case bodyName != "" && !strings.EqualFold(bodyName, name):
		return broker.Rule{}, broker.BadRequest("The Name element '%s' does not match the rule name '%s' in the URL.", broker.Clip(bodyName), broker.Clip(name))
	default:
		rule.Name = name
	}
	return rule, nil
}

func trueFilter() broker.RuleFilter {
	return broker.RuleFilter{Kind: broker.FilterTrue, SQLExpression: "1=1"}
}

// readRule reads the children of a RuleDescription or DefaultRuleDescription whose start tag was
// just read, through its end tag. It returns the rule without its name and the trimmed text of
// the <Name> element ("" when absent).
func readRule(r *reader) (broker.Rule, string, error) {
	rule := broker.Rule{Filter: trueFilter()}
	var (
		name                             string
		seenFilter, seenAction, seenName bool
	)
	for {
		tok, err := r.next()
		if err != nil {
			return broker.Rule{}, "", err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch {
			case isNil(t.Attr):
				err = r.skip()
			case t.Name.Local == "Filter":
				if err = once(&seenFilter, "Filter", "rule"); err == nil {
					rule.Filter, err = readFilter(r, t)
				}
			case t.Name.Local == "Action":
				if err = once(&seenAction, "Action", "rule"); err == nil {
					rule.Action, err = readAction(r, t)
				}
			case t.Name.Local == "Name":
				if err = once(&seenName, "Name", "rule"); err == nil {
					var v string
					v, err = r.text("Name")
					name = strings.TrimSpace(v)
				}
			default: // CreatedAt (Python echoes it), and anything unknown
				err = r.skip()
			}
			if err != nil {
				return broker.Rule{}, "", err
			}
		case xml.EndElement:
			return rule, name, nil
		}
	}
}

// once reports a repeated element: the last copy silently winning would hide a client's mistake.
func once(seen *bool, elem, owner string) error {
	if *seen {
		return broker.BadRequest("The %s has more than one %s element.", owner, elem)
	}
	*seen = true
	return nil
}

// sqlParts collects the children that SQL filters and SQL actions share.
type sqlParts struct {
	owner      string // "Filter" or "Action", for errors
	expr       string
	params     []broker.Property
	seenExpr   bool
	seenParams bool
}

// read consumes child if it is one of the shared elements and reports whether it was.
func (s *sqlParts) read(r *reader, child xml.StartElement) (bool, error) {
	switch child.Name.Local {
	case "SqlExpression":
		if err := once(&s.seenExpr, "SqlExpression", s.owner); err != nil {
			return true, err
		}
		v, err := r.text("SqlExpression")
		if err != nil {
			return true, err
		}
		if len(v) > maxExpressionText {
			return true, broker.BadRequest("The SqlExpression of the %s is longer than %d bytes.", s.owner, maxExpressionText)
		}
		s.expr = v
		return true, nil
	case "Parameters":
		if err := once(&s.seenParams, "Parameters", s.owner); err != nil {
			return true, err
		}
		var err error
		s.params, err = readKeyValues(r, "Parameters of the "+s.owner)
		return true, err
	case "CompatibilityLevel", "RequiresPreprocessing":
		// Always 20 and a service-side optimisation hint; nothing to keep.
		return true, r.skip()
	}
	return false, nil
}

func (s *sqlParts) hasExpr() bool { return strings.TrimSpace(s.expr) != "" }

// readFilter reads a <Filter> whose start tag was just read.
func readFilter(r *reader, start xml.StartElement) (broker.RuleFilter, error) {
	typ, _ := xsiType(start.Attr)
	sql := sqlParts{owner: "Filter"}
	var (
		corr                broker.CorrelationFilter
		hasCorr, seenCProps bool
	)
	for {
		tok, err := r.next()
		if err != nil {
			return broker.RuleFilter{}, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			handled, err := sql.read(r, t)
			if err != nil {
				return broker.RuleFilter{}, err
			}
			if handled {
				continue
			}
			name := t.Name.Local
			if dst := correlationField(&corr, name); dst != nil {
				if *dst, err = r.text(name); err != nil {
					return broker.RuleFilter{}, err
				}
				hasCorr = true
				continue
			}
			if name == "Properties" {
				if err := once(&seenCProps, "Properties", "Filter"); err != nil {
					return broker.RuleFilter{}, err
				}
				if corr.Properties, err = readKeyValues(r, "Properties of the Filter"); err != nil {
					return broker.RuleFilter{}, err
				}
				hasCorr = true
				continue
			}
			if err := r.skip(); err != nil {
				return broker.RuleFilter{}, err
			}
		case xml.EndElement:
			return buildFilter(typ, &sql, &corr, hasCorr)
		}
	}
}

// correlationField returns the field of c that element name sets, or nil.
func correlationField(c *broker.CorrelationFilter, name string) *string {
	switch name {
	case "CorrelationId":
		return &c.CorrelationID
	case "MessageId":
		return &c.MessageID
	case "To":
		return &c.To
	case "ReplyTo":
		return &c.ReplyTo
	case "Label":
		return &c.Label
	case "SessionId":
		return &c.SessionID
	case "ReplyToSessionId":
		return &c.ReplyToSessionID
	case "ContentType":
		return &c.ContentType
	}
	return nil
}

func buildFilter(typ string, sql *sqlParts, corr *broker.CorrelationFilter, hasCorr bool) (broker.RuleFilter, error) {
	if typ == "" {
		switch {
		case hasCorr:
			typ = string(broker.FilterCorrelation)
		case sql.hasExpr():
			typ = string(broker.FilterSQL)
		default:
			typ = string(broker.FilterTrue)
		}
	}
	switch {
	case strings.EqualFold(typ, "SqlFilter"), strings.EqualFold(typ, "SqlFilterExpression"):
		if !sql.hasExpr() {
			return broker.RuleFilter{}, broker.BadRequest("The SqlFilter has no SqlExpression.")
		}
		return broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: sql.expr, Parameters: sql.params}, nil
	case strings.EqualFold(typ, "TrueFilter"):
		return trueFilter(), nil
	case strings.EqualFold(typ, "FalseFilter"):
		return broker.RuleFilter{Kind: broker.FilterFalse, SQLExpression: "1=0"}, nil
	case strings.EqualFold(typ, "CorrelationFilter"), strings.EqualFold(typ, "CorrelationFilterExpression"):
		c := *corr
		return broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &c}, nil
	}
	return broker.RuleFilter{}, broker.BadRequest("The Filter type '%s' is not supported; use SqlFilter, TrueFilter, FalseFilter or CorrelationFilter.", broker.Clip(typ))
}

// readAction reads an <Action> whose start tag was just read; nil is EmptyRuleAction.
func readAction(r *reader, start xml.StartElement) (*broker.RuleAction, error) {
	typ, _ := xsiType(start.Attr)
	sql := sqlParts{owner: "Action"}
	for {
		tok, err := r.next()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			handled, err := sql.read(r, t)
			if err != nil {
				return nil, err
			}
			if !handled {
				if err := r.skip(); err != nil {
					return nil, err
				}
			}
		case xml.EndElement:
			return buildAction(typ, &sql)
		}
	}
}

func buildAction(typ string, sql *sqlParts) (*broker.RuleAction, error) {
	switch {
	case typ == "":
		if !sql.hasExpr() {
			return nil, nil
		}
	case strings.EqualFold(typ, "EmptyRuleAction"):
		return nil, nil
	case strings.EqualFold(typ, "SqlRuleAction"), strings.EqualFold(typ, "SqlFilterAction"),
		strings.EqualFold(typ, "SqlFilterExpression"): // azure-sb's name for a SQL action
		if !sql.hasExpr() {
			return nil, broker.BadRequest("The SqlRuleAction has no SqlExpression.")
		}
	default:
		return nil, broker.BadRequest("The Action type '%s' is not supported; use SqlRuleAction or EmptyRuleAction.", broker.Clip(typ))
	}
	return &broker.RuleAction{SQLExpression: sql.expr, Parameters: sql.params}, nil
}

// readKeyValues reads a list of <KeyValueOfstringanyType> (Parameters or Properties) whose start
// tag was just read. list names it in errors. Other children are ignored.
func readKeyValues(r *reader, list string) ([]broker.Property, error) {
	var (
		props []broker.Property
		keys  map[string]struct{}
	)
	for {
		tok, err := r.next()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local != "KeyValueOfstringanyType" {
				if err := r.skip(); err != nil {
					return nil, err
				}
				continue
			}
			if len(props) == maxKeyValues {
				return nil, broker.BadRequest("The %s hold more than %d entries.", list, maxKeyValues)
			}
			p, err := readKeyValue(r, list)
			if err != nil {
				return nil, err
			}
			if keys == nil {
				keys = make(map[string]struct{})
			}
			if _, dup := keys[p.Name]; dup {
				return nil, broker.BadRequest("The key '%s' appears more than once in the %s.", broker.Clip(p.Name), list)
			}
			keys[p.Name] = struct{}{}
			props = append(props, p)
		case xml.EndElement:
			return props, nil
		}
	}
}

// readKeyValue reads one <KeyValueOfstringanyType> whose start tag was just read.
func readKeyValue(r *reader, list string) (broker.Property, error) {
	var (
		p                  broker.Property
		seenKey, seenValue bool
	)
	for {
		tok, err := r.next()
		if err != nil {
			return broker.Property{}, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "Key":
				if err = once(&seenKey, "Key", "KeyValueOfstringanyType in the "+list); err == nil {
					p.Name, err = r.text("Key")
				}
			case "Value":
				if err = once(&seenValue, "Value", "KeyValueOfstringanyType in the "+list); err == nil {
					var v broker.Property
					v, err = readValue(r, t, p.Name, list)
					p.Value, p.Type = v.Value, v.Type
				}
			default:
				err = r.skip()
			}
			if err != nil {
				return broker.Property{}, err
			}
		case xml.EndElement:
			switch {
			case p.Name == "":
				return broker.Property{}, broker.BadRequest("A KeyValueOfstringanyType in the %s has no Key.", list)
			case !seenValue:
				return broker.Property{}, broker.BadRequest("The key '%s' in the %s has no Value.", broker.Clip(p.Name), list)
			}
			return p, nil
		}
	}
}

// valueKind is the Go type a typed value becomes.
type valueKind int

const (
	valueString valueKind = iota
	valueInt
	valueDouble
	valueBool
	valueDateTime
	valueDuration
	valueGUID
)

// xsdValueKinds maps the XML Schema types a value may be declared with. Every integer type
// becomes int64, every floating-point type float64; the declared type is kept beside the value
// (broker.Property.Type) and written back.
var xsdValueKinds = map[string]valueKind{
	"string":        valueString,
	"int":           valueInt,
	"long":          valueInt,
	"short":         valueInt,
	"byte":          valueInt,
	"unsignedByte":  valueInt,
	"unsignedShort": valueInt,
	"unsignedInt":   valueInt,
	"unsignedLong":  valueInt,
	"double":        valueDouble,
	"float":         valueDouble,
	"decimal":       valueDouble,
	"boolean":       valueBool,
	"dateTime":      valueDateTime,
	"duration":      valueDuration,
}

// serValueKinds maps the .NET DataContract types of the Serialization namespace: TimeSpan is
// ser:duration, Guid ser:guid.
var serValueKinds = map[string]valueKind{
	"duration": valueDuration,
	"guid":     valueGUID,
}

// readValue reads a <Value> whose start tag was just read and converts it by its xsi:type. key
// (possibly still unknown, when Value precedes Key) and list name it in errors. The result
// carries the declared type ("string" when there is no xsi:type) but no name.
func readValue(r *reader, start xml.StartElement, key, list string) (broker.Property, error) {
	elem := "Value"
	if key != "" {
		elem = "Value of key '" + broker.Clip(key) + "'"
	}
	if isNil(start.Attr) {
		return broker.Property{}, broker.BadRequest("The %s in the %s is null; values must be set.", elem, list)
	}
	declared, kind := "string", valueString
	if typ, ok := rawXSIType(start.Attr); ok {
		// Resolve now: the Value's own declarations go out of scope with its end tag.
		var err error
		if declared, kind, err = r.valueTypeOf(typ); err != nil {
			return broker.Property{}, broker.BadRequest("The %s in the %s has an unsupported type '%s': %v.", elem, list, broker.Clip(typ), err)
		}
	}
	text, err := r.text("Value")
	if err != nil {
		return broker.Property{}, err
	}
	v, err := convertValue(declared, kind, text)
	if err != nil {
		return broker.Property{}, broker.BadRequest("The %s in the %s is not valid: '%s' %v.", elem, list, broker.Clip(text), err)
	}
	return broker.Property{Value: v, Type: declared}, nil
}

// rawXSIType returns the xsi:type attribute's value as written, prefix included.
func rawXSIType(attrs []xml.Attr) (string, bool) {
	for _, a := range attrs {
		if a.Name.Local == "type" && isXSI(a.Name.Space) {
			return strings.TrimSpace(a.Value), true
		}
	}
	return "", false
}

// valueTypeOf resolves a QName such as "d6p1:int" by the namespace its prefix is bound to here,
// and returns the declared type as broker.Property.Type spells it ("int", "ser:duration").
// An unprefixed name and the conventional prefixes xs and xsd, when undeclared, are read in the
// XML Schema namespace: hand-written bodies use them, and nothing else could be meant.
func (r *reader) valueTypeOf(qname string) (string, valueKind, error) {
	prefix, local, ok := strings.Cut(qname, ":")
	if !ok {
		prefix, local = "", qname
	}
	uri := nsXSD
	if prefix != "" {
		var declared bool
		if uri, declared = r.lookupPrefix(prefix); !declared {
			if prefix != "xs" && prefix != "xsd" {
				return "", 0, errors.New("its prefix is not declared")
			}
			uri = nsXSD
		}
	}
	switch uri {
	case nsXSD:
		if k, ok := xsdValueKinds[local]; ok {
			return local, k, nil
		}
	case nsSerialization:
		if k, ok := serValueKinds[local]; ok {
			return "ser:" + local, k, nil
		}
	}
	return "", 0, errors.New("use the XML Schema types string, int, long, short, byte, unsignedByte, unsignedShort, " +
		"unsignedInt, unsignedLong, double, float, decimal, boolean, dateTime or duration, or the Serialization types duration or guid")
}

// intBits gives the range of the integer types besides int and long, which take any 64-bit
// value: the Go SDK declares every integer "int", however large.
var intBits = map[string]struct {
	bits     int
	unsigned bool
}{
	"short": {16, false}, "byte": {8, false},
	"unsignedByte": {8, true}, "unsignedShort": {16, true}, "unsignedInt": {32, true}, "unsignedLong": {63, true},
}

func convertValue(declared string, kind valueKind, text string) (any, error) {
	s := strings.TrimSpace(text)
	switch kind {
	case valueInt:
		r, ranged := intBits[declared]
		if !ranged {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, errors.New("is not a 64-bit integer")
			}
			return n, nil
		}
		if r.unsigned {
			u, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, r.bits)
			if err != nil {
				if declared == "unsignedLong" {
					return nil, errors.New("is not an unsignedLong up to 9223372036854775807 (sbgate keeps integers in 64 signed bits)")
				}
				return nil, fmt.Errorf("is not an %s", declared)
			}
			return int64(u), nil
		}
		n, err := strconv.ParseInt(s, 10, r.bits)
		if err != nil {
			return nil, fmt.Errorf("is not a %s (a signed %d-bit integer)", declared, r.bits)
		}
		return n, nil
	case valueDouble:
		if declared == "decimal" {
			return parseDecimal(s)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, errors.New("is not a finite number")
		}
		if declared == "float" && math.Abs(f) > math.MaxFloat32 {
			return nil, errors.New("is beyond the range of a float")
		}
		return f, nil
	case valueBool:
		b, err := parseBool(s)
		if err != nil {
			return nil, errors.New("is not a boolean")
		}
		return b, nil
	case valueDateTime:
		if s == "" {
			return nil, errors.New("is not an ISO 8601 timestamp")
		}
		t, err := ParseTime(s)
		if err != nil {
			return nil, errors.New("is not an ISO 8601 timestamp")
		}
		return t, nil
	case valueDuration:
		d, err := parseSignedDuration(s)
		if err != nil {
			return nil, errors.New("is not an XML duration")
		}
		return d, nil
	case valueGUID:
		if _, err := uuid.Parse(s); err != nil {
			return nil, errors.New("is not a GUID")
		}
		return s, nil // as sent, so that it reads back the same
	}
	return text, nil // a string keeps its white space
}

// parseDecimal reads an xs:decimal (digits with an optional sign and point, no exponent). The
// value is evaluated as a double, as every non-integer number is, so a decimal with more digits
// than a double holds is refused rather than silently rounded.
func parseDecimal(s string) (float64, error) {
	norm, ok := normalizeDecimal(s)
	if !ok {
		return 0, errors.New("is not a decimal")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, errors.New("is not a decimal")
	}
	if back, _ := normalizeDecimal(strconv.FormatFloat(f, 'f', -1, 64)); back != norm {
		return 0, errors.New("has more significant digits than sbgate keeps (a double's 15 to 17)")
	}
	return f, nil
}

// normalizeDecimal returns the canonical form of an xs:decimal literal (no "+", no leading or
// trailing zeros, "0" for zero) and whether s is one.
func normalizeDecimal(s string) (string, bool) {
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return "", false
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	intPart = strings.TrimLeft(intPart, "0")
	frac = strings.TrimRight(frac, "0")
	if intPart == "" && frac == "" {
		return "0", true
	}
	out := intPart
	if out == "" {
		out = "0"
	}
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out, true
}

// parseSignedDuration is ParseDuration that also takes a leading '-': entity durations are never
// negative, but a TimeSpan parameter may be. A negative infinite value is -broker.Infinite.
func parseSignedDuration(s string) (time.Duration, error) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	d, err := ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if neg {
		d = -d
	}
	return d, nil
}
