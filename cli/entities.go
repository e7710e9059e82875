package cli

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sbgate/sbgate/api/client"
)

// entityKind is one of the four kinds the management commands work on.
type entityKind struct {
	cmd         string   // queue, topic, subscription, rule
	description string   // QueueDescription, ...
	args        []string // names of the positional arguments that locate one entity
}

var (
	queueKind        = &entityKind{"queue", "QueueDescription", []string{"NAME"}}
	topicKind        = &entityKind{"topic", "TopicDescription", []string{"NAME"}}
	subscriptionKind = &entityKind{"subscription", "SubscriptionDescription", []string{"TOPIC", "NAME"}}
	ruleKind         = &entityKind{"rule", "RuleDescription", []string{"TOPIC", "SUBSCRIPTION", "NAME"}}
)

func (k *entityKind) usage() string {
	loc := strings.Join(k.args, " ")
	parent := strings.Join(k.args[:len(k.args)-1], " ")
	create := fmt.Sprintf("  sbgate %s create %s [-p Property=Value ...]   properties of the %s, e.g. -p LockDuration=PT1M", k.cmd, loc, k.description)
	if k == ruleKind {
		create = fmt.Sprintf("  sbgate rule create %s (-sql EXPR | -correlation Field=Value ... | -true | -false) [-param @name=value ...] [-action 'SET ...']", loc)
	}
	return strings.Join([]string{
		"usage:",
		create,
		fmt.Sprintf("  sbgate %s list %s", k.cmd, parent),
		fmt.Sprintf("  sbgate %s show %s", k.cmd, loc),
		fmt.Sprintf("  sbgate %s delete %s", k.cmd, loc),
		"flags everywhere: -connection-string ($SBGATE_CONNECTION_STRING), -o table|json, -insecure",
	}, "\n")
}

// entityCommand runs `sbgate queue|topic|subscription|rule VERB ...`.
func entityCommand(ctx context.Context, k *entityKind, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Fprintln(stdout, k.usage())
		return nil
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet("sbgate "+k.cmd+" "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	mk := cliFlags(fs, getenv, stdout)
	var props, corr, params keyValues
	var sqlExpr, action *string
	var trueF, falseF *bool
	if verb == "create" {
		if k == ruleKind {
			sqlExpr = fs.String("sql", "", "SQL filter expression")
			fs.Var(&corr, "correlation", "correlation filter field, repeatable: CorrelationId, MessageId, To, ReplyTo, Label (Subject), SessionId, ReplyToSessionId, ContentType, or a user property name (its value typed like send -p)")
			trueF = fs.Bool("true", false, "a TrueFilter (every message)")
			falseF = fs.Bool("false", false, "a FalseFilter (no message)")
			fs.Var(&params, "param", "a parameter of the SQL filter, @name=value (repeatable)")
			action = fs.String("action", "", "SQL rule action, e.g. \"SET sys.Label = 'x'\"")
		} else {
			fs.Var(&props, "p", "a property of the "+k.description+", Name=Value (repeatable), as the Atom description spells it")
		}
	}
	pos, c, err := parseCLI(fs, mk, args)
	if err != nil {
		return err
	}
	want := len(k.args)
	if verb == "list" {
		want--
	}
	if verb != "create" && verb != "list" && verb != "show" && verb != "delete" {
		return usageError(k.usage(), "%s: unknown command %q", k.cmd, verb)
	}
	if len(pos) != want {
		return usageError(k.usage(), "%s %s: want %d argument(s), got %d", k.cmd, verb, want, len(pos))
	}
	for _, p := range pos {
		if p == "" {
			return usageError(k.usage(), "%s %s: an empty name", k.cmd, verb)
		}
	}
	err = func() error {
		switch verb {
		case "list":
			return c.listEntities(ctx, k, pos)
		case "show":
			return c.showEntity(ctx, k, pos)
		case "delete":
			return c.deleteEntity(ctx, k, pos)
		}
		var body []byte
		if k == ruleKind {
			body, err = ruleXML(pos[2], *sqlExpr, corr, params, *trueF, *falseF, *action)
			if err != nil {
				return err
			}
		} else {
			body = descriptionXML(k.description, props)
		}
		return c.createEntity(ctx, k, pos, body, props)
	}()
	if err != nil {
		return fmt.Errorf("%s %s %s: %w", k.cmd, verb, strings.Join(pos, " "), err)
	}
	return nil
}

const (
	atomNS = "http://www.w3.org/2005/Atom"
	sbNS   = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
	xsiNS  = "http://www.w3.org/2001/XMLSchema-instance"
)

// descriptionXML is an Atom entry holding a description with the given elements, in order.
func descriptionXML(description string, props keyValues) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<entry xmlns=%q><content type="application/xml"><%s xmlns=%q xmlns:i=%q>`, atomNS, description, sbNS, xsiNS)
	for _, p := range props.pairs {
		b.WriteString("<" + p[0] + ">")
		_ = xml.EscapeText(&b, []byte(p[1]))
		b.WriteString("</" + p[0] + ">")
	}
	fmt.Fprintf(&b, `</%s></content></entry>`, description)
	return b.Bytes()
}

// correlationFields are the system properties a CorrelationFilter matches; any other name is a
// user property.
var correlationFields = map[string]string{
	"correlationid": "CorrelationId", "messageid": "MessageId", "to": "To", "replyto": "ReplyTo",
	"label": "Label", "subject": "Label", "sessionid": "SessionId", "replytosessionid": "ReplyToSessionId",
	"contenttype": "ContentType",
}

// ruleXML builds the RuleDescription of `sbgate rule create`.
func ruleXML(name, sqlExpr string, corr, params keyValues, trueF, falseF bool, action string) ([]byte, error) {
	n := 0
	for _, set := range []bool{sqlExpr != "", len(corr.pairs) > 0, trueF, falseF} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("give exactly one filter: -sql, -correlation, -true or -false")
	}
	if len(params.pairs) > 0 && sqlExpr == "" {
		return nil, errors.New("-param needs -sql")
	}
	var b bytes.Buffer
	esc := func(s string) { _ = xml.EscapeText(&b, []byte(s)) }
	fmt.Fprintf(&b, `<entry xmlns=%q><content type="application/xml"><RuleDescription xmlns=%q xmlns:i=%q xmlns:d=%q>`,
		atomNS, sbNS, xsiNS, "http://www.w3.org/2001/XMLSchema")
	keyValue := func(k, v string) {
		b.WriteString("<KeyValueOfstringanyType><Key>")
		esc(k)
		typ, text := xsdValue(v)
		fmt.Fprintf(&b, `</Key><Value i:type="d:%s">`, typ)
		esc(text)
		b.WriteString("</Value></KeyValueOfstringanyType>")
	}
	switch {
	case sqlExpr != "":
		b.WriteString(`<Filter i:type="SqlFilter"><SqlExpression>`)
		esc(sqlExpr)
		b.WriteString("</SqlExpression>")
		if len(params.pairs) > 0 {
			b.WriteString("<Parameters>")
			for _, p := range params.pairs {
				keyValue(p[0], p[1])
			}
			b.WriteString("</Parameters>")
		}
		b.WriteString("</Filter>")
	case trueF:
		b.WriteString(`<Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression></Filter>`)
	case falseF:
		b.WriteString(`<Filter i:type="FalseFilter"><SqlExpression>1=0</SqlExpression></Filter>`)
	default:
		b.WriteString(`<Filter i:type="CorrelationFilter">`)
		var user [][2]string
		for _, p := range corr.pairs {
			if f, ok := correlationFields[strings.ToLower(p[0])]; ok {
				b.WriteString("<" + f + ">")
				esc(p[1])
				b.WriteString("</" + f + ">")
			} else {
				user = append(user, p)
			}
		}
		if len(user) > 0 {
			b.WriteString("<Properties>")
			for _, p := range user {
				keyValue(p[0], p[1])
			}
			b.WriteString("</Properties>")
		}
		b.WriteString("</Filter>")
	}
	if action != "" {
		b.WriteString(`<Action i:type="SqlRuleAction"><SqlExpression>`)
		esc(action)
		b.WriteString("</SqlExpression></Action>")
	} else {
		b.WriteString(`<Action i:type="EmptyRuleAction"/>`)
	}
	b.WriteString("<Name>")
	esc(name)
	b.WriteString("</Name></RuleDescription></content></entry>")
	return b.Bytes(), nil
}

// xsdValue types a value given on the command line as send's -p does: a number, true/false, or
// text ("quoted" to force text).
func xsdValue(v string) (typ, text string) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return "string", v[1 : len(v)-1]
	}
	if v == "true" || v == "false" {
		return "boolean", v
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return "long", v
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return "double", v
	}
	return "string", v
}

// xnode is an element of a description, kept generically so that every property the broker
// sends is shown, including ones this command has never heard of.
type xnode struct {
	name string
	typ  string // xsi:type, when given
	text string
	kids []*xnode
}

func parseXNode(d *xml.Decoder, start xml.StartElement) (*xnode, error) {
	n := &xnode{name: start.Name.Local}
	for _, a := range start.Attr {
		if a.Name.Local == "type" && a.Name.Space == xsiNS {
			n.typ = a.Value
		}
	}
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			k, err := parseXNode(d, t)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, k)
		case xml.CharData:
			text.Write(t)
		case xml.EndElement:
			if len(n.kids) == 0 {
				n.text = text.String()
			}
			return n, nil
		}
	}
}

// entityEntry is one Atom entry: the entity's name and its description.
type entityEntry struct {
	name string
	desc *xnode
}

// parseEntries reads an Atom feed or entry and returns its entries that hold a description.
func parseEntries(body []byte) ([]entityEntry, error) {
	var out []entityEntry
	err := forEachEntry(body, func(d *xml.Decoder, st xml.StartElement, _ int64) error {
		e, err := parseXNode(d, st)
		if err != nil {
			return err
		}
		var ent entityEntry
		for _, k := range e.kids {
			switch k.name {
			case "title":
				ent.name = k.text
			case "content":
				if len(k.kids) == 1 {
					ent.desc = k.kids[0]
				}
			}
		}
		if ent.desc != nil {
			out = append(out, ent)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// forEachEntry calls read for each <entry> of an Atom feed or entry, in order, with the decoder
// just past the entry's start tag st and the offset in body at which that tag begins; read
// consumes the entry through its end tag. An error of the decoder or of read is the broker's
// answer not being Atom XML.
func forEachEntry(body []byte, read func(d *xml.Decoder, st xml.StartElement, start int64) error) error {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		start := d.InputOffset()
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the broker's answer is not Atom XML: %w", err)
		}
		st, ok := tok.(xml.StartElement)
		if !ok || st.Name.Local != "entry" {
			continue
		}
		if err := read(d, st, start); err != nil {
			return fmt.Errorf("the broker's answer is not Atom XML: %w", err)
		}
	}
}

// child returns the first child named name, or nil.
func (n *xnode) child(name string) *xnode {
	if n == nil {
		return nil
	}
	for _, k := range n.kids {
		if k.name == name {
			return k
		}
	}
	return nil
}

// get returns the text of the descendant at the path of names, or "".
func (n *xnode) get(path ...string) string {
	for _, p := range path {
		n = n.child(p)
	}
	if n == nil {
		return ""
	}
	return n.text
}

// value is n as JSON: text for a leaf; an object of its children otherwise (an array for
// repeated names, a Key→Value object for KeyValueOfstringanyType lists), with "Type" for an
// element that has an xsi:type.
func (n *xnode) value() any {
	if len(n.kids) == 0 {
		if n.typ != "" {
			return map[string]any{"Type": n.typ}
		}
		return n.text
	}
	if n.kids[0].name == "KeyValueOfstringanyType" {
		m := map[string]any{}
		for _, kv := range n.kids {
			m[kv.get("Key")] = kv.get("Value")
		}
		return m
	}
	allSame := len(n.kids) > 1
	for _, k := range n.kids {
		allSame = allSame && k.name == n.kids[0].name
	}
	if allSame {
		var a []any
		for _, k := range n.kids {
			a = append(a, k.value())
		}
		return a
	}
	m := map[string]any{}
	if n.typ != "" {
		m["Type"] = n.typ
	}
	for _, k := range n.kids {
		m[k.name] = k.value()
	}
	return m
}

// flatten lists the leaves of n as dotted names and their text, in document order.
func (n *xnode) flatten(prefix string, out *[][2]string) {
	name := prefix + n.name
	if n.typ != "" {
		*out = append(*out, [2]string{name + ".Type", n.typ})
	}
	if len(n.kids) == 0 {
		if n.typ == "" {
			*out = append(*out, [2]string{name, n.text})
		}
		return
	}
	if n.kids[0].name == "KeyValueOfstringanyType" {
		for _, kv := range n.kids {
			*out = append(*out, [2]string{name + "." + kv.get("Key"), kv.get("Value")})
		}
		return
	}
	for i, k := range n.kids {
		p := name + "."
		if len(n.kids) > 1 && k.name == n.kids[0].name && (i > 0 || n.kids[1].name == k.name) {
			p = fmt.Sprintf("%s[%d].", name, i)
		}
		k.flatten(p, out)
	}
}

// entityJSON is an entity as -o json shows it.
func entityJSON(e entityEntry) map[string]any {
	m := map[string]any{"Name": e.name}
	if v, ok := e.desc.value().(map[string]any); ok {
		for k, x := range v {
			m[k] = x
		}
	}
	return m
}

func (c *command) listEntities(ctx context.Context, k *entityKind, parent []string) error {
	const top = 100
	var all []entityEntry
	for skip := 0; ; skip += top {
		status, body, err := c.listPage(ctx, k, parent, skip, top)
		if err != nil {
			return err
		}
		if err := expect(status, body, http.StatusOK); err != nil {
			return err
		}
		page, err := parseEntries(body)
		if err != nil {
			return err
		}
		all = append(all, page...)
		if len(page) < top {
			break
		}
	}
	if c.json {
		list := make([]map[string]any, 0, len(all))
		for _, e := range all {
			list = append(list, entityJSON(e))
		}
		return c.emitJSON(list)
	}
	if len(all) == 0 {
		fmt.Fprintf(c.out, "no %ss\n", k.cmd)
		return nil
	}
	return c.table(entityRows(k, all))
}

// listPage asks for the page of top entities of kind k (under parent) that begins after skip.
func (c *command) listPage(ctx context.Context, k *entityKind, parent []string,
	skip, top int) (status int, body []byte, err error) {
	s, t := skip, top
	switch k {
	case queueKind:
		r, err := c.api.ListQueuesWithResponse(ctx, &client.ListQueuesParams{Skip: &s, Top: &t})
		if err != nil {
			return 0, nil, err
		}
		status, body = r.StatusCode(), r.Body
	case topicKind:
		r, err := c.api.ListTopicsWithResponse(ctx, &client.ListTopicsParams{Skip: &s, Top: &t})
		if err != nil {
			return 0, nil, err
		}
		status, body = r.StatusCode(), r.Body
	case subscriptionKind:
		r, err := c.api.ListSubscriptionsWithResponse(ctx, parent[0], &client.ListSubscriptionsParams{Skip: &s, Top: &t})
		if err != nil {
			return 0, nil, err
		}
		status, body = r.StatusCode(), r.Body
	case ruleKind:
		r, err := c.api.ListRulesWithResponse(ctx, parent[0], parent[1], &client.ListRulesParams{Skip: &s, Top: &t})
		if err != nil {
			return 0, nil, err
		}
		status, body = r.StatusCode(), r.Body
	}
	return status, body, nil
}

// entityRows is the table sbgate lists entities of kind k in: its header and a row per entity.
func entityRows(k *entityKind, all []entityEntry) (header []string, rows [][]string) {
	counts := func(d *xnode, names ...string) []string {
		var r []string
		for _, n := range names {
			r = append(r, d.get("CountDetails", n))
		}
		return r
	}
	for _, e := range all {
		d := e.desc
		switch k {
		case queueKind:
			header = []string{"NAME", "ACTIVE", "DEAD-LETTER", "SCHEDULED", "SIZE", "STATUS"}
			rows = append(rows, append(append([]string{e.name}, counts(d, "ActiveMessageCount", "DeadLetterMessageCount", "ScheduledMessageCount")...), d.get("SizeInBytes"), d.get("Status")))
		case topicKind:
			header = []string{"NAME", "SUBSCRIPTIONS", "SCHEDULED", "SIZE", "STATUS"}
			rows = append(rows, append([]string{e.name, d.get("SubscriptionCount")}, counts(d, "ScheduledMessageCount")[0], d.get("SizeInBytes"), d.get("Status")))
		case subscriptionKind:
			header = []string{"NAME", "ACTIVE", "DEAD-LETTER", "SCHEDULED", "STATUS"}
			rows = append(rows, append(append([]string{e.name}, counts(d, "ActiveMessageCount", "DeadLetterMessageCount", "ScheduledMessageCount")...), d.get("Status")))
		case ruleKind:
			header = []string{"NAME", "FILTER", "ACTION"}
			rows = append(rows, []string{e.name, describeFilter(d.child("Filter")), describeAction(d.child("Action"))})
		}
	}
	return header, rows
}

// describeFilter is a rule's filter on one line.
func describeFilter(f *xnode) string {
	if f == nil {
		return ""
	}
	typ := f.typ
	if i := strings.IndexByte(typ, ':'); i >= 0 {
		typ = typ[i+1:]
	}
	switch typ {
	case "CorrelationFilter":
		var parts []string
		for _, k := range f.kids {
			if k.name == "Properties" {
				for _, kv := range k.kids {
					parts = append(parts, kv.get("Key")+"="+kv.get("Value"))
				}
			} else if k.text != "" {
				parts = append(parts, k.name+"="+k.text)
			}
		}
		return "correlation: " + strings.Join(parts, ", ")
	default:
		s := f.get("SqlExpression")
		if p := f.child("Parameters"); p != nil {
			var ps []string
			for _, kv := range p.kids {
				ps = append(ps, kv.get("Key")+"="+kv.get("Value"))
			}
			if len(ps) > 0 {
				s += " (" + strings.Join(ps, ", ") + ")"
			}
		}
		return s
	}
}

func describeAction(a *xnode) string {
	if a == nil {
		return ""
	}
	return a.get("SqlExpression")
}

// fetchEntity reads one entity; a name the broker does not know is an error.
func (c *command) fetchEntity(ctx context.Context, k *entityKind, loc []string) (entityEntry, error) {
	var status int
	var body []byte
	switch k {
	case queueKind, topicKind:
		r, err := c.api.GetEntityWithResponse(ctx, loc[0], nil)
		if err != nil {
			return entityEntry{}, err
		}
		status, body = r.StatusCode(), r.Body
	case subscriptionKind:
		r, err := c.api.GetSubscriptionWithResponse(ctx, loc[0], loc[1], nil)
		if err != nil {
			return entityEntry{}, err
		}
		status, body = r.StatusCode(), r.Body
	case ruleKind:
		r, err := c.api.GetRuleWithResponse(ctx, loc[0], loc[1], loc[2], nil)
		if err != nil {
			return entityEntry{}, err
		}
		status, body = r.StatusCode(), r.Body
	}
	if err := expect(status, body, http.StatusOK); err != nil {
		return entityEntry{}, err
	}
	es, err := parseEntries(body)
	if err != nil {
		return entityEntry{}, err
	}
	// A missing queue or topic is answered 200 with an empty feed, as the service does.
	if len(es) == 0 {
		return entityEntry{}, fmt.Errorf("no %s of that name (the broker answered with an empty feed)", k.cmd)
	}
	if es[0].desc.name != k.description {
		return entityEntry{}, fmt.Errorf("it is not a %s but a %s", k.cmd, strings.TrimSuffix(es[0].desc.name, "Description"))
	}
	return es[0], nil
}

func (c *command) showEntity(ctx context.Context, k *entityKind, loc []string) error {
	e, err := c.fetchEntity(ctx, k, loc)
	if err != nil {
		return err
	}
	return c.printEntity(e)
}

func (c *command) printEntity(e entityEntry) error {
	if c.json {
		return c.emitJSON(entityJSON(e))
	}
	rows := [][]string{{"Name", e.name}}
	var flat [][2]string
	for _, k := range e.desc.kids {
		k.flatten("", &flat)
	}
	for _, f := range flat {
		rows = append(rows, []string{f[0], f[1]})
	}
	return c.table([]string{"PROPERTY", "VALUE"}, rows)
}

func (c *command) createEntity(ctx context.Context, k *entityKind, loc []string, body []byte, props keyValues) error {
	const ct = "application/atom+xml;type=entry;charset=utf-8"
	var status int
	var resp []byte
	switch k {
	case queueKind, topicKind:
		r, err := c.api.PutEntityWithBodyWithResponse(ctx, loc[0], nil, ct, bytes.NewReader(body))
		if err != nil {
			return err
		}
		status, resp = r.StatusCode(), r.Body
	case subscriptionKind:
		r, err := c.api.PutSubscriptionWithBodyWithResponse(ctx, loc[0], loc[1], nil, ct, bytes.NewReader(body))
		if err != nil {
			return err
		}
		status, resp = r.StatusCode(), r.Body
	case ruleKind:
		r, err := c.api.PutRuleWithBodyWithResponse(ctx, loc[0], loc[1], loc[2], nil, ct, bytes.NewReader(body))
		if err != nil {
			return err
		}
		status, resp = r.StatusCode(), r.Body
	}
	if err := expect(status, resp, http.StatusCreated); err != nil {
		return err
	}
	es, err := parseEntries(resp)
	if err != nil {
		return err
	}
	if len(es) == 0 {
		return fmt.Errorf("the broker answered 201 without the new %s", k.cmd)
	}
	if err := c.printEntity(es[0]); err != nil {
		return err
	}
	// The protocol ignores elements it does not know; a mistyped -p must not pass unnoticed.
	var unknown []string
	for _, p := range props.pairs {
		if es[0].desc.child(p[0]) == nil {
			unknown = append(unknown, p[0])
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("created, but the broker ignored -p %s: not a property of a %s (see sbgate %s show)", strings.Join(unknown, ", -p "), k.description, k.cmd)
	}
	return nil
}

func (c *command) deleteEntity(ctx context.Context, k *entityKind, loc []string) error {
	var status int
	var body []byte
	switch k {
	case queueKind, topicKind:
		// A queue command must not delete a topic of that name, nor the other way round.
		if _, err := c.fetchEntity(ctx, k, loc); err != nil {
			return err
		}
		r, err := c.api.DeleteEntityWithResponse(ctx, loc[0], nil)
		if err != nil {
			return err
		}
		status, body = r.StatusCode(), r.Body
	case subscriptionKind:
		r, err := c.api.DeleteSubscriptionWithResponse(ctx, loc[0], loc[1], nil)
		if err != nil {
			return err
		}
		status, body = r.StatusCode(), r.Body
	case ruleKind:
		r, err := c.api.DeleteRuleWithResponse(ctx, loc[0], loc[1], loc[2], nil)
		if err != nil {
			return err
		}
		status, body = r.StatusCode(), r.Body
	}
	if err := expect(status, body, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.emitJSON(map[string]any{"Deleted": strings.Join(loc, "/"), "Kind": k.cmd})
	}
	fmt.Fprintf(c.out, "deleted %s %s\n", k.cmd, strings.Join(loc, " "))
	return nil
}
