// Package nsconfig reads, checks, applies and writes the Service Bus emulator's Config.json: one
// namespace's queues, topics, subscriptions and rules declared in one file
// (UserConfig.Namespaces[].Queues[] / Topics[].Subscriptions[].Rules[], each with Properties), in
// the form Microsoft's emulator reads it, // comments included, and .NET Aspire and the
// Testcontainers modules write it.
//
// Parse reads a file and checks everything that needs no namespace: the JSON, every property's
// name, type and value, names, rules (they must compile). Apply then makes a namespace match it
// declaratively: it reads the namespace, checks what depends on it (forward targets exist and
// make no loop, no property that cannot change would change), and only then creates, updates
// and, when asked, deletes, forward targets before the entities that forward to them. Applying a
// file twice changes nothing the second time. Export writes a namespace back as such a file.
//
// A namespace is anything that implements Namespace: the store directly (StoreNamespace, at
// sbgate's start) or the Atom management API of a running broker (sbgate config apply).
package nsconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailscale/hujson"

	"github.com/sbgate/sbgate/atom"
	"github.com/sbgate/sbgate/broker"
)

// File is a checked configuration: one namespace's entities, every property resolved (the
// file's value, or the emulator's default for one it omits).
type File struct {
	// Name is the file's name as given to Parse, for messages.
	Name string
	// Namespace is the namespace's Name; sbgate serves one namespace whatever it is called.
	Namespace string
	Queues    []Queue
	Topics    []Topic
	// Logging is the Logging.Type the file gives ("File", "Console", …; "" when absent): the
	// emulator's choice of log sink, which sbgate accepts and ignores (it logs to its output).
	Logging string

	pos map[string]position // JSON path → where its value starts
}

// Queue is a declared queue.
type Queue struct {
	Name  string
	Props Properties
	at    string // JSON path
}

// Topic is a declared topic and its subscriptions.
type Topic struct {
	Name          string
	Props         Properties
	Subscriptions []Subscription
	at            string
}

// Subscription is a declared subscription. Rules nil means the file declares none: a new
// subscription gets the $Default rule (every message) and an existing one keeps its rules. When
// the file lists rules they are the subscription's rules, exactly.
type Subscription struct {
	Name  string
	Props Properties
	Rules []Rule
	at    string
}

// Rule is a declared rule.
type Rule struct {
	Rule broker.Rule
	at   string
}

// Properties are the entity properties of the emulator's format. Each kind has some of them
// (queueProps, topicProps, subscriptionProps); the others stay zero.
type Properties struct {
	DeadLetteringOnMessageExpiration    bool
	DefaultMessageTimeToLive            time.Duration
	DuplicateDetectionHistoryTimeWindow time.Duration
	ForwardDeadLetteredMessagesTo       string
	ForwardTo                           string
	LockDuration                        time.Duration
	MaxDeliveryCount                    int32
	RequiresDuplicateDetection          bool
	RequiresSession                     bool
}

// The emulator's defaults for a property the file omits, from its published schema
// (Config-schema.json). They differ from a Service Bus namespace's (where TTL is unbounded,
// MaxDeliveryCount 10 and the duplicate window 10 minutes): a file means what it meant to the
// emulator.
const (
	DefaultLockDuration       = time.Minute
	DefaultMaxDeliveryCount   = 3
	DefaultMessageTimeToLive  = time.Hour
	DefaultDuplicateWindow    = 20 * time.Second
	emulatorNamespace         = "sbemulatorns"
	maxRulesPerSubscription   = broker.MaxRulesPerSub
	maxEntitiesPerFileSection = 100000
)

// defaultProperties are the resolved properties of an entity whose file entry sets none.
func defaultProperties() Properties {
	return Properties{
		DefaultMessageTimeToLive:            DefaultMessageTimeToLive,
		DuplicateDetectionHistoryTimeWindow: DefaultDuplicateWindow,
		LockDuration:                        DefaultLockDuration,
		MaxDeliveryCount:                    DefaultMaxDeliveryCount,
	}
}

// propKind says which kinds of entity a property belongs to in the emulator's schema.
type propKind struct {
	queue, topic, subscription bool
}

// schemaProps are the Properties keys the emulator's schema allows, by kind: how each is read
// into Properties, copied from one Properties to another (keep) and set on an entity's
// broker.Properties (apply).
var schemaProps = map[string]struct {
	kinds propKind
	read  func(p *Properties, r *reader, n *node, path string)
	keep  func(dst *Properties, src Properties)
	apply func(sp *broker.Properties, p Properties)
}{
	"DeadLetteringOnMessageExpiration": {propKind{true, false, true},
		func(p *Properties, r *reader, n *node, path string) {
			p.DeadLetteringOnMessageExpiration = r.boolean(n, path)
		},
		func(dst *Properties, src Properties) {
			dst.DeadLetteringOnMessageExpiration = src.DeadLetteringOnMessageExpiration
		},
		func(sp *broker.Properties, p Properties) {
			sp.DeadLetteringOnMessageExpiration = p.DeadLetteringOnMessageExpiration
		}},
	"DefaultMessageTimeToLive": {propKind{true, true, true},
		func(p *Properties, r *reader, n *node, path string) { p.DefaultMessageTimeToLive = r.duration(n, path) },
		func(dst *Properties, src Properties) { dst.DefaultMessageTimeToLive = src.DefaultMessageTimeToLive },
		func(sp *broker.Properties, p Properties) { sp.DefaultMessageTimeToLive = p.DefaultMessageTimeToLive }},
	"DuplicateDetectionHistoryTimeWindow": {propKind{true, true, false},
		func(p *Properties, r *reader, n *node, path string) {
			p.DuplicateDetectionHistoryTimeWindow = r.duration(n, path)
		},
		func(dst *Properties, src Properties) {
			dst.DuplicateDetectionHistoryTimeWindow = src.DuplicateDetectionHistoryTimeWindow
		},
		func(sp *broker.Properties, p Properties) {
			// The emulator allows 5 seconds; a Service Bus namespace, and sbgate, 20. A shorter
			// window detects fewer duplicates than asked, so it is raised (Apply says so).
			sp.DuplicateDetectionHistoryTimeWindow = max(p.DuplicateDetectionHistoryTimeWindow, broker.MinDuplicateWindow)
		}},
	"ForwardDeadLetteredMessagesTo": {propKind{true, false, true},
		func(p *Properties, r *reader, n *node, path string) {
			p.ForwardDeadLetteredMessagesTo = r.target(n, path)
		},
		func(dst *Properties, src Properties) {
			dst.ForwardDeadLetteredMessagesTo = src.ForwardDeadLetteredMessagesTo
		},
		func(sp *broker.Properties, p Properties) {
			sp.ForwardDeadLetteredMessagesTo, sp.ForwardDeadLetteredMessagesToURL = p.ForwardDeadLetteredMessagesTo, ""
		}},
	"ForwardTo": {propKind{true, false, true},
		func(p *Properties, r *reader, n *node, path string) { p.ForwardTo = r.target(n, path) },
		func(dst *Properties, src Properties) { dst.ForwardTo = src.ForwardTo },
		func(sp *broker.Properties, p Properties) { sp.ForwardTo, sp.ForwardToURL = p.ForwardTo, "" }},
	"LockDuration": {propKind{true, false, true},
		func(p *Properties, r *reader, n *node, path string) { p.LockDuration = r.duration(n, path) },
		func(dst *Properties, src Properties) { dst.LockDuration = src.LockDuration },
		func(sp *broker.Properties, p Properties) { sp.LockDuration = p.LockDuration }},
	"MaxDeliveryCount": {propKind{true, false, true},
		func(p *Properties, r *reader, n *node, path string) {
			v := r.integer(n, path)
			if v < 1 || v > math.MaxInt32 {
				r.errorf(path, "MaxDeliveryCount must be at least 1, got %d", v)
				return
			}
			p.MaxDeliveryCount = int32(v)
		},
		func(dst *Properties, src Properties) { dst.MaxDeliveryCount = src.MaxDeliveryCount },
		func(sp *broker.Properties, p Properties) { sp.MaxDeliveryCount = p.MaxDeliveryCount }},
	"RequiresDuplicateDetection": {propKind{true, true, false},
		func(p *Properties, r *reader, n *node, path string) {
			p.RequiresDuplicateDetection = r.boolean(n, path)
		},
		func(dst *Properties, src Properties) { dst.RequiresDuplicateDetection = src.RequiresDuplicateDetection },
		func(sp *broker.Properties, p Properties) {
			sp.RequiresDuplicateDetection = p.RequiresDuplicateDetection
		}},
	"RequiresSession": {propKind{true, false, true},
		func(p *Properties, r *reader, n *node, path string) { p.RequiresSession = r.boolean(n, path) },
		func(dst *Properties, src Properties) { dst.RequiresSession = src.RequiresSession },
		func(sp *broker.Properties, p Properties) { sp.RequiresSession = p.RequiresSession }},
}

func (k propKind) has(kind broker.Kind) bool {
	switch kind {
	case broker.KindQueue:
		return k.queue
	case broker.KindTopic:
		return k.topic
	case broker.KindSubscription:
		return k.subscription
	}
	return false
}

// propNames lists the schema's property names of kind, in the order Export writes them.
func propNames(kind broker.Kind) []string {
	var names []string
	for name, p := range schemaProps {
		if p.kinds.has(kind) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Error is one problem with a configuration file: where it is and what is wrong.
type Error struct {
	File string
	// Line and Column locate the value (1-based); 0 when the problem has no place in the file
	// (an entity the namespace holds, say).
	Line, Column int
	// Path is the JSON path of the value, e.g. UserConfig.Namespaces[0].Queues[2].Properties.LockDuration.
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	if e.Path != "" {
		b.WriteString(": " + e.Path)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Errors are the problems found in one file, in the order of the file. Its message is one line
// per problem.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// maxErrors bounds the problems reported for one file: past it, more are not worth reading.
const maxErrors = 50

// position is a place in the file.
type position struct{ line, col int }

// Parse reads a Config.json. name names the file in messages. It returns an Errors listing every
// problem found (at most 50), each with the file, line, column, JSON path and what is wrong:
// JSON that does not parse (// and /* */ comments and trailing commas are allowed, as in the
// emulator's published sample), an unknown or repeated property (names match case-insensitively),
// a value of the wrong type, a duration that is not ISO 8601, a value out of range, an invalid
// entity, subscription or rule name, a name used twice, a rule whose filter or action does not
// compile, other than exactly one namespace.
func Parse(name string, data []byte) (*File, error) {
	std, err := hujson.Standardize(data)
	if err != nil {
		e := &Error{File: name, Msg: "not valid JSON: " + err.Error()}
		if m := hujsonPlace.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Column, _ = strconv.Atoi(m[2])
			e.Msg = "not valid JSON: " + m[3]
		}
		return nil, Errors{e}
	}
	root, err := parseTree(std)
	if err != nil {
		var se *syntaxError
		if errors.As(err, &se) {
			p := lineColIn(lineStarts(data), se.off)
			return nil, Errors{{File: name, Line: p.line, Column: p.col, Msg: "not valid JSON: " + se.msg}}
		}
		return nil, Errors{{File: name, Msg: "not valid JSON: " + err.Error()}}
	}
	r := &reader{file: &File{Name: name, pos: map[string]position{}}, data: data, lines: lineStarts(data)}
	r.readRoot(root)
	if len(r.errs) > 0 {
		// Members are read from maps: put the problems back in the order of the file.
		slices.SortStableFunc(r.errs, func(a, b *Error) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Column - b.Column
		})
		return nil, r.errs
	}
	return r.file, nil
}

// hujsonPlace is where hujson's errors say they are.
var hujsonPlace = regexp.MustCompile(`^hujson: line (\d+), column (\d+): (.*)$`)

// reader turns the JSON tree into a File, collecting every problem.
type reader struct {
	file  *File
	data  []byte
	lines []int64 // offsets where lines start
	errs  Errors
}

func (r *reader) errorf(path string, format string, args ...any) {
	if len(r.errs) >= maxErrors {
		return
	}
	r.errs = append(r.errs, r.file.errorAt(path, fmt.Sprintf(format, args...)))
}

// errorAt is a problem at a JSON path of f.
func (f *File) errorAt(path, msg string) *Error {
	e := &Error{File: f.Name, Path: path, Msg: msg}
	if p, ok := f.pos[path]; ok {
		e.Line, e.Column = p.line, p.col
	}
	return e
}

// object returns the members of n, an object, by their canonical names from allowed (matched
// case-insensitively), after recording their positions; it reports unknown and repeated
// members and a value that is not an object (nil then).
func (r *reader) object(n *node, path string, allowed ...string) map[string]*node {
	if n.kind != '{' {
		r.errorf(path, "want an object, got %s", n.describe())
		return nil
	}
	out := make(map[string]*node, len(n.keys))
	for i, k := range n.keys {
		canon := ""
		for _, a := range allowed {
			if strings.EqualFold(a, k) {
				canon = a
				break
			}
		}
		child := join(path, k)
		if canon == "" {
			r.file.pos[child] = r.lineCol(n.vals[i].off)
			r.errorf(child, "unknown property %q (allowed here: %s)", k, strings.Join(allowed, ", "))
			continue
		}
		child = join(path, canon)
		r.file.pos[child] = r.lineCol(n.vals[i].off)
		if _, dup := out[canon]; dup {
			r.errorf(child, "%s is given twice", canon)
			continue
		}
		out[canon] = n.vals[i]
	}
	return out
}

// array returns the items of n, an array (or nothing for null), recording their positions.
func (r *reader) array(n *node, path string) []*node {
	if n.kind == 'z' {
		return nil
	}
	if n.kind != '[' {
		r.errorf(path, "want an array, got %s", n.describe())
		return nil
	}
	for i, it := range n.items {
		r.file.pos[fmt.Sprintf("%s[%d]", path, i)] = r.lineCol(it.off)
	}
	return n.items
}

func (r *reader) str(n *node, path string) string {
	if n.kind != 's' {
		r.errorf(path, "want a string, got %s", n.describe())
		return ""
	}
	return n.str
}

func (r *reader) boolean(n *node, path string) bool {
	if n.kind != 'b' {
		r.errorf(path, "want true or false, got %s", n.describe())
		return false
	}
	return n.b
}

func (r *reader) integer(n *node, path string) int64 {
	if n.kind != 'n' {
		r.errorf(path, "want a whole number, got %s", n.describe())
		return 0
	}
	v, err := strconv.ParseInt(string(n.num), 10, 64)
	if err != nil {
		r.errorf(path, "want a whole number, got %s", n.num)
		return 0
	}
	return v
}

// duration reads an ISO 8601 duration (PT1M, PT30S, P1D, PT0.5S), as .NET's XmlConvert writes
// TimeSpans (Aspire does).
func (r *reader) duration(n *node, path string) time.Duration {
	s := r.str(n, path)
	if n.kind != 's' {
		return 0
	}
	d, err := atom.ParseDuration(s)
	if err != nil {
		r.errorf(path, "%q is not an ISO 8601 duration such as PT30S, PT1M, PT1H or P1D: %v", s, err)
		return 0
	}
	return d
}

// target reads a ForwardTo or ForwardDeadLetteredMessagesTo: an entity name, or "" for none.
func (r *reader) target(n *node, path string) string {
	s := strings.TrimSpace(r.str(n, path))
	if s == "" {
		return ""
	}
	if err := broker.ValidateEntityPath(s); err != nil {
		r.errorf(path, "not a queue or topic name: %s", storeMessage(err))
		return ""
	}
	return s
}

func (r *reader) readRoot(root *node) {
	top := r.object(root, "", "UserConfig", "$schema")
	if top == nil {
		return
	}
	uc, ok := top["UserConfig"]
	if !ok {
		r.errorf("", "UserConfig is missing")
		return
	}
	const ucPath = "UserConfig"
	m := r.object(uc, ucPath, "Namespaces", "Logging")
	if m == nil {
		return
	}
	if lg, ok := m["Logging"]; ok {
		path := join(ucPath, "Logging")
		if lm := r.object(lg, path, "Type"); lm != nil {
			if t, ok := lm["Type"]; ok {
				v := r.str(t, join(path, "Type"))
				switch strings.ReplaceAll(strings.ToLower(v), " ", "") {
				case "file", "console", "file,console", "console,file":
					r.file.Logging = v
				default:
					if t.kind == 's' {
						r.errorf(join(path, "Type"), "want File, Console or File,Console, got %q", v)
					}
				}
			}
		}
	}
	nsPath := join(ucPath, "Namespaces")
	nsNode, ok := m["Namespaces"]
	if !ok {
		r.errorf(ucPath, "Namespaces is missing: declare one namespace")
		return
	}
	namespaces := r.array(nsNode, nsPath)
	switch {
	case nsNode.kind == '[' && len(namespaces) == 0:
		r.errorf(nsPath, "no namespace: declare one")
		return
	case len(namespaces) > 1:
		r.errorf(fmt.Sprintf("%s[1]", nsPath), "%d namespaces, but sbgate serves one: declare its entities in a single namespace", len(namespaces))
		return
	case len(namespaces) == 0:
		return
	}
	r.readNamespace(namespaces[0], nsPath+"[0]")
}

func (r *reader) readNamespace(n *node, path string) {
	m := r.object(n, path, "Name", "Queues", "Topics")
	if m == nil {
		return
	}
	if v, ok := m["Name"]; ok {
		r.file.Namespace = r.str(v, join(path, "Name"))
	} else {
		r.errorf(path, "Name is missing")
	}
	names := map[string]string{} // canonical key → JSON path of the first use
	claim := func(name, at string) bool {
		k := broker.Key(name)
		if first, dup := names[k]; dup {
			r.errorf(join(at, "Name"), "%q is declared twice (first at %s)", name, first)
			return false
		}
		names[k] = at
		return true
	}
	if qs, ok := m["Queues"]; ok {
		qpath := join(path, "Queues")
		for i, qn := range r.array(qs, qpath) {
			at := fmt.Sprintf("%s[%d]", qpath, i)
			q := Queue{at: at}
			var ok bool
			if q.Name, q.Props, ok = r.readEntity(qn, at, broker.KindQueue, "Name", "Properties"); ok && claim(q.Name, at) {
				r.file.Queues = append(r.file.Queues, q)
			}
		}
	}
	if ts, ok := m["Topics"]; ok {
		tpath := join(path, "Topics")
		for i, tn := range r.array(ts, tpath) {
			at := fmt.Sprintf("%s[%d]", tpath, i)
			t := Topic{at: at}
			name, props, ok := r.readEntity(tn, at, broker.KindTopic, "Name", "Properties", "Subscriptions")
			if !ok {
				continue
			}
			t.Name, t.Props = name, props
			t.Subscriptions = r.readSubscriptions(tn, at, name)
			if claim(name, at) {
				r.file.Topics = append(r.file.Topics, t)
			}
		}
	}
}

// readEntity reads the Name and Properties of a queue, topic or subscription at path; ok is
// false when it has no usable name.
func (r *reader) readEntity(n *node, path string, kind broker.Kind, allowed ...string) (string, Properties, bool) {
	props := defaultProperties()
	m := r.object(n, path, allowed...)
	if m == nil {
		return "", props, false
	}
	nameNode, ok := m["Name"]
	if !ok {
		r.errorf(path, "Name is missing")
		return "", props, false
	}
	namePath := join(path, "Name")
	name := r.str(nameNode, namePath)
	if nameNode.kind != 's' {
		return "", props, false
	}
	var err error
	if kind == broker.KindSubscription {
		err = broker.ValidateSubscriptionName(name)
	} else {
		err = broker.ValidateEntityPath(name)
	}
	if err != nil {
		r.errorf(namePath, "%s", storeMessage(err))
		return "", props, false
	}
	if pn, ok := m["Properties"]; ok && pn.kind != 'z' {
		ppath := join(path, "Properties")
		for key, v := range r.object(pn, ppath, propNames(kind)...) {
			schemaProps[key].read(&props, r, v, join(ppath, key))
		}
		r.checkProperties(kind, name, props, ppath)
	}
	return name, props.only(kind), true
}

// checkProperties checks resolved properties against sbgate's limits (those of a Service Bus
// namespace), which a new entity of kind must meet.
func (r *reader) checkProperties(kind broker.Kind, name string, p Properties, path string) {
	if p.ForwardTo != "" && broker.Key(p.ForwardTo) == broker.Key(name) && kind == broker.KindQueue {
		r.errorf(join(path, "ForwardTo"), "a queue cannot forward to itself")
	}
	sp := broker.DefaultProperties(kind)
	p.applyTo(kind, &sp)
	sp.ForwardTo, sp.ForwardDeadLetteredMessagesTo = "", "" // checked against the namespace by Apply
	if err := sp.Validate(kind); err != nil {
		r.errorf(path, "%s", storeMessage(err))
	}
}

func (r *reader) readSubscriptions(tn *node, topicPath, topic string) []Subscription {
	m := tn.member("Subscriptions")
	if m == nil {
		return nil
	}
	spath := join(topicPath, "Subscriptions")
	var subs []Subscription
	seen := map[string]string{}
	for i, sn := range r.array(m, spath) {
		at := fmt.Sprintf("%s[%d]", spath, i)
		name, props, ok := r.readEntity(sn, at, broker.KindSubscription, "Name", "Properties", "Rules")
		if !ok {
			continue
		}
		if first, dup := seen[broker.Key(name)]; dup {
			r.errorf(join(at, "Name"), "%q is declared twice on topic %q (first at %s)", name, topic, first)
			continue
		}
		seen[broker.Key(name)] = at
		if props.ForwardTo != "" && broker.Key(props.ForwardTo) == broker.Key(topic) {
			r.errorf(join(at, "Properties.ForwardTo"), "a subscription cannot forward to its own topic")
		}
		subs = append(subs, Subscription{Name: name, Props: props, Rules: r.readRules(sn, at), at: at})
	}
	return subs
}

func (r *reader) readRules(sn *node, subPath string) []Rule {
	m := sn.member("Rules")
	if m == nil {
		return nil
	}
	rpath := join(subPath, "Rules")
	items := r.array(m, rpath)
	if len(items) > maxRulesPerSubscription {
		r.errorf(rpath, "%d rules; a subscription holds at most %d", len(items), maxRulesPerSubscription)
		return nil
	}
	var rules []Rule
	seen := map[string]string{}
	for i, rn := range items {
		at := fmt.Sprintf("%s[%d]", rpath, i)
		rule, ok := r.readRule(rn, at)
		if !ok {
			continue
		}
		if first, dup := seen[broker.Key(rule.Name)]; dup {
			r.errorf(join(at, "Name"), "rule %q is declared twice (first at %s)", rule.Name, first)
			continue
		}
		seen[broker.Key(rule.Name)] = at
		rules = append(rules, Rule{Rule: rule, at: at})
	}
	return rules
}

// correlationFields are the system properties of a CorrelationFilter in the emulator's format.
var correlationFields = []string{"ContentType", "CorrelationId", "Label", "MessageId", "ReplyTo", "ReplyToSessionId", "SessionId", "To"}

func (r *reader) readRule(n *node, path string) (broker.Rule, bool) {
	var rule broker.Rule
	m := r.object(n, path, "Name", "Properties")
	if m == nil {
		return rule, false
	}
	if v, ok := m["Name"]; ok {
		rule.Name = r.str(v, join(path, "Name"))
	} else {
		r.errorf(path, "Name is missing")
		return rule, false
	}
	pn, ok := m["Properties"]
	if !ok {
		r.errorf(path, "Properties is missing: a rule needs its FilterType and filter")
		return rule, false
	}
	ppath := join(path, "Properties")
	pm := r.object(pn, ppath, "FilterType", "CorrelationFilter", "SqlFilter", "Action")
	if pm == nil {
		return rule, false
	}
	before := len(r.errs)
	ft, ok := pm["FilterType"]
	if !ok {
		r.errorf(ppath, "FilterType is missing: want \"Sql\" or \"Correlation\"")
		return rule, false
	}
	ftPath := join(ppath, "FilterType")
	switch kind := r.str(ft, ftPath); {
	case ft.kind != 's':
	case strings.EqualFold(kind, "Sql"):
		rule.Filter.Kind = broker.FilterSQL
		rule.Filter.SQLExpression = r.readSQLFilter(pm, ppath)
	case strings.EqualFold(kind, "Correlation"):
		rule.Filter.Kind = broker.FilterCorrelation
		rule.Filter.Correlation = r.readCorrelationFilter(pm, ppath)
	default:
		r.errorf(ftPath, "FilterType %q: want \"Sql\" or \"Correlation\"", kind)
	}
	rule.Action = r.readAction(pm, ppath)
	if len(r.errs) > before {
		return rule, false
	}
	if err := broker.ValidateRule(rule); err != nil {
		r.errorf(path, "%s", storeMessage(err))
		return rule, false
	}
	return rule, true
}

// readSQLFilter reads a Sql rule's expression from the rule's Properties pm (at ppath); ""
// when it is missing.
func (r *reader) readSQLFilter(pm map[string]*node, ppath string) string {
	if cf, ok := pm["CorrelationFilter"]; ok && !(cf.kind == 'z' || cf.kind == '{' && len(cf.keys) == 0) {
		// .NET Aspire writes an empty CorrelationFilter beside every filter; anything else in
		// it would be ignored, so it is a mistake.
		r.errorf(join(ppath, "CorrelationFilter"), "a Sql rule takes its filter from SqlFilter; CorrelationFilter must be empty")
	}
	sf, ok := pm["SqlFilter"]
	if !ok {
		r.errorf(ppath, "SqlFilter is missing: a Sql rule needs SqlFilter.SqlExpression")
		return ""
	}
	sfPath := join(ppath, "SqlFilter")
	sm := r.object(sf, sfPath, "SqlExpression")
	if sm == nil {
		return ""
	}
	e, ok := sm["SqlExpression"]
	if !ok {
		r.errorf(sfPath, "SqlExpression is missing")
		return ""
	}
	expr := r.str(e, join(sfPath, "SqlExpression"))
	if e.kind == 's' && strings.TrimSpace(expr) == "" {
		r.errorf(join(sfPath, "SqlExpression"), "the expression is empty")
	}
	return expr
}

// readCorrelationFilter reads a Correlation rule's filter from the rule's Properties pm (at
// ppath); nil when it is missing.
func (r *reader) readCorrelationFilter(pm map[string]*node, ppath string) *broker.CorrelationFilter {
	if _, ok := pm["SqlFilter"]; ok {
		r.errorf(join(ppath, "SqlFilter"), "a Correlation rule takes its filter from CorrelationFilter; remove SqlFilter or make FilterType \"Sql\"")
	}
	cf, ok := pm["CorrelationFilter"]
	if !ok {
		r.errorf(ppath, "CorrelationFilter is missing: a Correlation rule needs at least one of %s or Properties", strings.Join(correlationFields, ", "))
		return nil
	}
	return r.readCorrelation(cf, join(ppath, "CorrelationFilter"))
}

// readAction reads a rule's action from the rule's Properties pm (at ppath); nil when there is
// none.
func (r *reader) readAction(pm map[string]*node, ppath string) *broker.RuleAction {
	an, ok := pm["Action"]
	if !ok || an.kind == 'z' {
		return nil
	}
	apath := join(ppath, "Action")
	am := r.object(an, apath, "SqlExpression")
	if am == nil {
		return nil
	}
	e, ok := am["SqlExpression"]
	if !ok {
		r.errorf(apath, "SqlExpression is missing")
		return nil
	}
	return &broker.RuleAction{SQLExpression: r.str(e, join(apath, "SqlExpression"))}
}

func (r *reader) readCorrelation(n *node, path string) *broker.CorrelationFilter {
	allowed := append(slices.Clone(correlationFields), "Properties", "RequiresPreprocessing")
	m := r.object(n, path, allowed...)
	c := &broker.CorrelationFilter{}
	if m == nil {
		return c
	}
	fields := map[string]*string{
		"ContentType": &c.ContentType, "CorrelationId": &c.CorrelationID, "Label": &c.Label, "MessageId": &c.MessageID,
		"ReplyTo": &c.ReplyTo, "ReplyToSessionId": &c.ReplyToSessionID, "SessionId": &c.SessionID, "To": &c.To,
	}
	for name, dst := range fields {
		if v, ok := m[name]; ok {
			*dst = r.str(v, join(path, name))
		}
	}
	if v, ok := m["RequiresPreprocessing"]; ok {
		// An ARM property .NET Aspire writes; Atom has no counterpart and filters need none.
		r.boolean(v, join(path, "RequiresPreprocessing"))
	}
	if pn, ok := m["Properties"]; ok && pn.kind != 'z' {
		ppath := join(path, "Properties")
		if pn.kind != '{' {
			r.errorf(ppath, "want an object of user property names and values, got %s", pn.describe())
		} else {
			seen := map[string]bool{}
			for i, k := range pn.keys {
				vpath := join(ppath, k)
				r.file.pos[vpath] = r.lineCol(pn.vals[i].off)
				if seen[k] {
					r.errorf(vpath, "%s is given twice", k)
					continue
				}
				seen[k] = true
				if v, ok := r.propertyValue(pn.vals[i], vpath); ok {
					c.Properties = append(c.Properties, broker.Property{Name: k, Value: v})
				}
			}
		}
	}
	return c
}

// propertyValue reads a correlation property's value: a string, a whole number (a long), a
// number with a fraction or exponent (a double) or a boolean.
func (r *reader) propertyValue(n *node, path string) (any, bool) {
	switch n.kind {
	case 's':
		return n.str, true
	case 'b':
		return n.b, true
	case 'n':
		s := string(n.num)
		if !strings.ContainsAny(s, ".eE") {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil {
				return v, true
			}
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(v, 0) {
			r.errorf(path, "the number %s does not fit a double", s)
			return nil, false
		}
		return v, true
	}
	r.errorf(path, "want a string, number or boolean, got %s", n.describe())
	return nil, false
}

// applyTo sets the properties of kind that the emulator's format has on sp, leaving the others.
func (p Properties) applyTo(kind broker.Kind, sp *broker.Properties) {
	for _, prop := range schemaProps {
		if prop.kinds.has(kind) {
			prop.apply(sp, p)
		}
	}
}

// propertiesOf reads the emulator-format properties of kind from sp.
func propertiesOf(kind broker.Kind, sp broker.Properties) Properties {
	return Properties{
		DeadLetteringOnMessageExpiration:    sp.DeadLetteringOnMessageExpiration,
		DefaultMessageTimeToLive:            sp.DefaultMessageTimeToLive,
		DuplicateDetectionHistoryTimeWindow: sp.DuplicateDetectionHistoryTimeWindow,
		ForwardDeadLetteredMessagesTo:       sp.ForwardDeadLetteredMessagesTo,
		ForwardTo:                           sp.ForwardTo,
		LockDuration:                        sp.LockDuration,
		MaxDeliveryCount:                    sp.MaxDeliveryCount,
		RequiresDuplicateDetection:          sp.RequiresDuplicateDetection,
		RequiresSession:                     sp.RequiresSession,
	}.only(kind)
}

// only keeps the properties kind has in the emulator's format and zeroes the others, so that two
// descriptions of one entity compare equal.
func (p Properties) only(kind broker.Kind) Properties {
	var out Properties
	for _, prop := range schemaProps {
		if prop.kinds.has(kind) {
			prop.keep(&out, p)
		}
	}
	return out
}

// storeMessage is the text of a store refusal without the sentinel's prefix.
func storeMessage(err error) string {
	var se *broker.Error
	if errors.As(err, &se) && se.Message != "" {
		return se.Message
	}
	return err.Error()
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// lineStarts lists the offsets where data's lines start.
func lineStarts(data []byte) []int64 {
	starts := []int64{0}
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, int64(i)+1)
		}
	}
	return starts
}

// lineCol is the 1-based line and column of byte offset off (columns count bytes).
func (r *reader) lineCol(off int64) position {
	return lineColIn(r.lines, off)
}

func lineColIn(starts []int64, off int64) position {
	i, found := slices.BinarySearch(starts, off)
	if !found {
		i--
	}
	return position{i + 1, int(off-starts[i]) + 1}
}

// node is a JSON value with its members in file order (encoding/json's maps would lose the order
// and hide repeated names).
type node struct {
	kind  byte // '{' object, '[' array, 's' string, 'n' number, 'b' boolean, 'z' null
	off   int64
	keys  []string
	vals  []*node
	items []*node
	str   string
	num   json.Number
	b     bool
}

func (n *node) member(key string) *node {
	if n == nil || n.kind != '{' {
		return nil
	}
	for i, k := range n.keys {
		if strings.EqualFold(k, key) {
			return n.vals[i]
		}
	}
	return nil
}

func (n *node) describe() string {
	switch n.kind {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 's':
		return strconv.Quote(n.str)
	case 'n':
		return "the number " + string(n.num)
	case 'b':
		return strconv.FormatBool(n.b)
	}
	return "null"
}

type syntaxError struct {
	off int64
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// parseTree reads standard JSON (comments already blanked out, offsets unchanged) into nodes.
func parseTree(data []byte) (*node, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	n, err := readNode(d, data, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, &syntaxError{off: d.InputOffset(), msg: "more than one JSON value in the file"}
	}
	return n, nil
}

// maxDepth bounds nesting: a real file is eight levels deep.
const maxDepth = 64

func readNode(d *json.Decoder, data []byte, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, &syntaxError{off: d.InputOffset(), msg: "nested too deeply"}
	}
	start := valueStart(data, d.InputOffset())
	tok, err := d.Token()
	if err != nil {
		return nil, tokenError(d, err)
	}
	n := &node{off: start}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = '{'
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, tokenError(d, err)
				}
				k, _ := kt.(string)
				v, err := readNode(d, data, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
				if len(n.keys) > maxEntitiesPerFileSection {
					return nil, &syntaxError{off: v.off, msg: "too many members in one object"}
				}
			}
		case '[':
			n.kind = '['
			for d.More() {
				v, err := readNode(d, data, depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
				if len(n.items) > maxEntitiesPerFileSection {
					return nil, &syntaxError{off: v.off, msg: "too many items in one array"}
				}
			}
		}
		if _, err := d.Token(); err != nil { // the closing delimiter
			return nil, tokenError(d, err)
		}
	case string:
		n.kind, n.str = 's', t
	case json.Number:
		n.kind, n.num = 'n', t
	case bool:
		n.kind, n.b = 'b', t
	case nil:
		n.kind = 'z'
	}
	return n, nil
}

func tokenError(d *json.Decoder, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &syntaxError{off: se.Offset, msg: se.Error()}
	}
	if err == io.EOF {
		return &syntaxError{off: d.InputOffset(), msg: "the file ends before the JSON does"}
	}
	return &syntaxError{off: d.InputOffset(), msg: err.Error()}
}

// valueStart skips the white space, colons and commas after off: where the next value begins.
func valueStart(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n:,", data[off]) >= 0 {
		off++
	}
	return off
}
