package atom

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
)

// docDefaultRule is the real $Default rule of protocol.md §4.8, verbatim.
const docDefaultRule = `<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
  <Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>
  <Action i:type="EmptyRuleAction"/>
  <CreatedAt>2020-09-29T08:36:11.3692415Z</CreatedAt>
  <Name>$Default</Name>
</RuleDescription>`

// ruleContent returns the RuleDescription inside an entry written by AppendRuleEntry.
func ruleContent(t *testing.T, entry []byte) string {
	t.Helper()
	s := string(entry)
	const open, close = `<content type="application/xml">`, `</content></entry>`
	i, j := strings.Index(s, open), strings.LastIndex(s, close)
	if i < 0 || j < i {
		t.Fatalf("no content in %s", s)
	}
	return s[i+len(open) : j]
}

func TestAppendRuleEntryDefaultMatchesService(t *testing.T) {
	rule := broker.TrueRule(broker.DefaultRuleName)
	rule.CreatedAt = t0
	info := EntryInfo{
		ID:    "https://h/events/Subscriptions/audit/Rules/$Default?api-version=2021-05",
		Title: "$Default", Published: t0, Updated: t1, Author: "ns",
		SelfHref: "rules/$Default?api-version=2021-05",
	}
	out := AppendRuleEntry(nil, info, &rule)

	// Element for element, attributes and text included, except the CreatedAt value.
	want := regexp.MustCompile(`>\s+<`).ReplaceAllString(docDefaultRule, "><")
	want = strings.Replace(want, "2020-09-29T08:36:11.3692415Z", FormatTime(t0), 1)
	if got := ruleContent(t, out); got != want {
		t.Errorf("RuleDescription =\n%s\nwant\n%s", got, want)
	}
	wantEntry := `<entry xmlns="http://www.w3.org/2005/Atom">` +
		`<id>https://h/events/Subscriptions/audit/Rules/$Default?api-version=2021-05</id><title type="text">$Default</title>` +
		`<published>2014-10-25T00:56:23Z</published><updated>2014-10-25T00:56:23Z</updated>` +
		`<link rel="self" href="rules/$Default?api-version=2021-05"/><content type="application/xml">` + want + `</content></entry>`
	if string(out) != wantEntry {
		t.Errorf("AppendRuleEntry =\n%s\nwant\n%s", out, wantEntry)
	}
}

func TestAppendRuleEntryShapes(t *testing.T) {
	const xsd = `" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">`
	kv := func(key, typ, text string) string {
		return `<KeyValueOfstringanyType><Key>` + key + `</Key><Value i:type="d6p1:` + typ + xsd + text + `</Value></KeyValueOfstringanyType>`
	}
	at := time.Date(2024, 1, 2, 3, 4, 5, 600000000, time.FixedZone("x", 3600))
	tests := []struct {
		name       string
		rule       broker.Rule
		filter, ac string
	}{
		{"sql filter with every value type",
			broker.Rule{Filter: sqlFilter("a < @i AND b = @s", "@i", int64(-3000000000), "@f", 0.5, "@g", 1e21, "@b", false,
				"@t", at, "@d", 90*time.Second, "@s", `<&>`)},
			`<Filter i:type="SqlFilter"><SqlExpression>a &lt; @i AND b = @s</SqlExpression><CompatibilityLevel>20</CompatibilityLevel><Parameters>` +
				kv("@i", "long", "-3000000000") + kv("@f", "double", "0.5") + kv("@g", "double", "1E+21") + kv("@b", "boolean", "false") +
				kv("@t", "dateTime", "2024-01-02T02:04:05.6Z") + kv("@d", "duration", "PT1M30S") + kv("@s", "string", "&lt;&amp;&gt;") +
				`</Parameters></Filter>`,
			`<Action i:type="EmptyRuleAction"/>`},
		{"false filter, sql action without parameters",
			broker.Rule{Filter: broker.RuleFilter{Kind: broker.FilterFalse}, Action: sqlAction("SET a = 'x'")},
			`<Filter i:type="FalseFilter"><SqlExpression>1=0</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>`,
			`<Action i:type="SqlRuleAction"><SqlExpression>SET a = 'x'</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Action>`},
		{"zero filter is the true filter, action parameters",
			broker.Rule{Action: sqlAction("SET a = @n", "@n", int64(1), "@inf", broker.Infinite, "@ninf", -broker.Infinite)},
			`<Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>`,
			`<Action i:type="SqlRuleAction"><SqlExpression>SET a = @n</SqlExpression><CompatibilityLevel>20</CompatibilityLevel><Parameters>` +
				kv("@n", "int", "1") + kv("@inf", "duration", infiniteText) + kv("@ninf", "duration", "-"+infiniteText) + `</Parameters></Action>`},
		{"correlation: only set fields, in order, Properties always",
			broker.Rule{Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{
				ContentType: "ct", ReplyToSessionID: "rs", SessionID: "s", Label: "l", ReplyTo: "rt", To: "to", MessageID: "m", CorrelationID: "c"}}},
			`<Filter i:type="CorrelationFilter"><CorrelationId>c</CorrelationId><MessageId>m</MessageId><To>to</To><ReplyTo>rt</ReplyTo>` +
				`<Label>l</Label><SessionId>s</SessionId><ReplyToSessionId>rs</ReplyToSessionId><ContentType>ct</ContentType><Properties></Properties></Filter>`,
			`<Action i:type="EmptyRuleAction"/>`},
		{"correlation with properties only",
			broker.Rule{Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{
				Label: "l", Properties: props("n", 2.0, "x", int64(7))}}},
			`<Filter i:type="CorrelationFilter"><Label>l</Label><Properties>` + kv("n", "double", "2") + kv("x", "int", "7") + `</Properties></Filter>`,
			`<Action i:type="EmptyRuleAction"/>`},
		{"declared types are written back as declared",
			broker.Rule{Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{
				Properties: props("go", x("int", int64(5000000000)), "net", x("long", int64(5)), "js", x("double", 5.0), "s", x("short", int64(-2)),
					"f", x("float", 0.1), "m", x("decimal", 1e21), "g", x(broker.TypeSerGUID, "{6F9619FF-8B86-D011-B42D-00CF4FC964FF}"),
					"t", x(broker.TypeSerDuration, 90*time.Minute), "u", x("unsignedLong", int64(math.MaxInt64)),
					"wrong", x("long", "text"))}}}, // a type that cannot hold the value: by the value
			`<Filter i:type="CorrelationFilter"><Properties>` + kv("go", "int", "5000000000") + kv("net", "long", "5") + kv("js", "double", "5") +
				kv("s", "short", "-2") + kv("f", "float", "0.1") + kv("m", "decimal", "1000000000000000000000") +
				`<KeyValueOfstringanyType><Key>g</Key><Value i:type="d6p1:guid" xmlns:d6p1="http://schemas.microsoft.com/2003/10/Serialization/">{6F9619FF-8B86-D011-B42D-00CF4FC964FF}</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>t</Key><Value i:type="d6p1:duration" xmlns:d6p1="http://schemas.microsoft.com/2003/10/Serialization/">PT1H30M</Value></KeyValueOfstringanyType>` +
				kv("u", "unsignedLong", "9223372036854775807") + kv("wrong", "string", "text") + `</Properties></Filter>`,
			`<Action i:type="EmptyRuleAction"/>`},
		{"correlation without fields",
			broker.Rule{Filter: broker.RuleFilter{Kind: broker.FilterCorrelation}},
			`<Filter i:type="CorrelationFilter"><Properties></Properties></Filter>`,
			`<Action i:type="EmptyRuleAction"/>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rule.Name = "r"
			out := AppendRuleEntry(nil, EntryInfo{Title: "r"}, &tt.rule)
			if err := wellFormed(out); err != nil {
				t.Fatalf("not well-formed: %v\n%s", err, out)
			}
			want := `<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
				tt.filter + tt.ac + `<CreatedAt>0001-01-01T00:00:00Z</CreatedAt><Name>r</Name></RuleDescription>`
			if got := ruleContent(t, out); got != want {
				t.Errorf("RuleDescription =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestAppendRuleEntryOddValues(t *testing.T) {
	// Types outside broker.Property's contract still give a valid document.
	rule := broker.Rule{Name: "r", Filter: sqlFilter("x", "@a", 3, "@b", int32(4), "@c", float32(0.5), "@d", nil, "@e", uint8(9),
		"@f", math.NaN(), "@g", math.Inf(1), "@h", math.Inf(-1))}
	out := AppendRuleEntry(nil, EntryInfo{}, &rule)
	if err := wellFormed(out); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, out)
	}
	for _, want := range []string{`int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">3<`, `int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">4<`,
		`double" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">0.5<`, `string" xmlns:d6p1="http://www.w3.org/2001/XMLSchema"></Value>`,
		`string" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">9<`, `>NaN<`, `>INF<`, `>-INF<`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// The structs below mirror how the Go SDK (azservicebus internal/atom models.go and
// admin_client_rules.go) reads a rule entry.
type goRuleEntry struct {
	Title   string `xml:"title"`
	Content struct {
		Rule struct {
			Filter *struct {
				Type          string          `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
				SQLExpression *string         `xml:"SqlExpression"`
				CorrelationID *string         `xml:"CorrelationId"`
				Label         *string         `xml:"Label"`
				Parameters    *goKeyValueList `xml:"Parameters"`
				Properties    *goKeyValueList `xml:"Properties"`
			} `xml:"Filter"`
			Action *struct {
				Type          string          `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
				SQLExpression string          `xml:"SqlExpression"`
				Parameters    *goKeyValueList `xml:"Parameters"`
			} `xml:"Action"`
			CreatedAt string `xml:"CreatedAt"`
			Name      string `xml:"Name"`
		} `xml:"RuleDescription"`
	} `xml:"content"`
}

type goKeyValueList struct {
	KeyValues []struct {
		Key   string `xml:"Key"`
		Value struct {
			Type string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
			Text string `xml:",chardata"`
		} `xml:"Value"`
	} `xml:"KeyValueOfstringanyType"`
}

func TestAppendRuleEntryUnmarshalsLikeGoSDK(t *testing.T) {
	rule := broker.Rule{Name: "r&1", CreatedAt: t0,
		Filter: sqlFilter("a = @i", "@i", int64(5), "@f", 2.5, "@s", "x", "@b", true, "@t", t1),
		Action: sqlAction("SET b = @x", "@x", int64(1))}
	out := AppendRuleEntry(nil, EntryInfo{Title: rule.Name}, &rule)
	var got goRuleEntry
	if err := xml.Unmarshal(out, &got); err != nil {
		t.Fatalf("xml.Unmarshal: %v\n%s", err, out)
	}
	d := got.Content.Rule
	if got.Title != "r&1" || d.Filter == nil || d.Action == nil {
		t.Fatalf("entry = %+v", got)
	}
	if d.Filter.Type != "SqlFilter" || d.Filter.SQLExpression == nil || *d.Filter.SQLExpression != "a = @i" || d.Filter.Parameters == nil {
		t.Errorf("Filter = %+v", d.Filter)
	}
	// Go switches on the whole attribute value, prefix included.
	var types []string
	for _, kv := range d.Filter.Parameters.KeyValues {
		types = append(types, kv.Key+"="+kv.Value.Type+":"+kv.Value.Text)
	}
	want := []string{"@i=d6p1:int:5", "@f=d6p1:double:2.5", "@s=d6p1:string:x", "@b=d6p1:boolean:true", "@t=d6p1:dateTime:" + FormatTime(t1)}
	if !slices.Equal(types, want) {
		t.Errorf("parameters = %v; want %v", types, want)
	}
	if _, err := time.Parse(time.RFC3339Nano, d.Filter.Parameters.KeyValues[4].Value.Text); err != nil {
		t.Errorf("dateTime value does not parse as Go does: %v", err)
	}
	if _, err := strconv.ParseInt(d.Filter.Parameters.KeyValues[0].Value.Text, 10, 64); err != nil {
		t.Errorf("int value does not parse as Go does: %v", err)
	}
	if d.Action.Type != "SqlRuleAction" || d.Action.SQLExpression != "SET b = @x" || d.Action.Parameters == nil ||
		d.Action.Parameters.KeyValues[0].Value.Type != "d6p1:int" {
		t.Errorf("Action = %+v", d.Action)
	}
	if _, err := time.Parse(time.RFC3339, d.CreatedAt); err != nil || d.Name != "r&1" {
		t.Errorf("CreatedAt %q (%v), Name %q", d.CreatedAt, err, d.Name)
	}

	// A rule without action still has an <Action> with a type: Go dereferences it unchecked.
	plain := broker.TrueRule("p")
	if err := xml.Unmarshal(AppendRuleEntry(nil, EntryInfo{}, &plain), &got); err != nil {
		t.Fatal(err)
	}
	if got.Content.Rule.Action == nil || got.Content.Rule.Action.Type != "EmptyRuleAction" || got.Content.Rule.Filter.Type != "TrueFilter" {
		t.Errorf("plain rule = %+v", got.Content.Rule)
	}
}

// TestAppendRuleEntryJSValueShape checks what the JS SDK relies on without a namespace-aware
// parser: the attribute is literally "i:type", its value loses exactly five characters before
// the type name, and the name is one of int, double, string, boolean, dateTime. CorrelationFilter
// has no SqlExpression (JS tells filter kinds apart by it).
func TestAppendRuleEntryJSValueShape(t *testing.T) {
	rule := broker.Rule{Name: "r", Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{
		CorrelationID: "c", Properties: props("a", int64(1), "b", 1.5, "c", "s", "d", true, "e", t0)}}}
	out := AppendRuleEntry(nil, EntryInfo{}, &rule)
	d := xml.NewDecoder(bytes.NewReader(out))
	var types []string
	for {
		tok, err := d.RawToken()
		if err != nil {
			break
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local == "SqlExpression" {
			t.Errorf("CorrelationFilter output has a SqlExpression")
		}
		if se.Name.Local != "Value" {
			continue
		}
		for _, a := range se.Attr {
			if a.Name.Space == "i" && a.Name.Local == "type" {
				types = append(types, a.Value[5:])
			}
		}
	}
	if !slices.Equal(types, []string{"int", "double", "string", "boolean", "dateTime"}) {
		t.Errorf("JS reads value types %v", types)
	}
}

// TestRuleRoundTrip writes random rules with AppendRuleEntry and reads them back with DecodeRule.
func TestRuleRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 2000 {
		want := randomRule(rng)
		out := AppendRuleEntry(nil, EntryInfo{ID: "https://gw/t/Subscriptions/s/Rules/x", Title: want.Name}, &want)
		if err := wellFormed(out); err != nil {
			t.Fatalf("#%d: not well-formed: %v\n%s", i, err, out)
		}
		got, err := DecodeRule(out, want.Name)
		if err != nil {
			t.Fatalf("#%d: DecodeRule: %v\n%s", i, err, out)
		}
		want.CreatedAt = time.Time{} // read-only: a PUT does not set it
		if diff := ruleDiff(got, want); diff != "" {
			t.Fatalf("#%d: %s\n%s", i, diff, out)
		}
	}
}

func randomRule(rng *rand.Rand) broker.Rule {
	r := broker.Rule{Name: "rule-" + strconv.Itoa(rng.IntN(1000)), CreatedAt: randomTime(rng)}
	switch rng.IntN(4) {
	case 0:
		r.Filter = trueFilter()
	case 1:
		r.Filter = broker.RuleFilter{Kind: broker.FilterFalse, SQLExpression: "1=0"}
	case 2:
		r.Filter = broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: "x" + randomText(rng), Parameters: randomValues(rng, "@")}
	case 3:
		c := &broker.CorrelationFilter{}
		for _, f := range []*string{&c.CorrelationID, &c.MessageID, &c.To, &c.ReplyTo, &c.Label, &c.SessionID, &c.ReplyToSessionID, &c.ContentType} {
			if rng.IntN(2) == 0 {
				*f = randomText(rng)
			}
		}
		c.Properties = randomValues(rng, "")
		r.Filter = broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: c}
	}
	if rng.IntN(2) == 0 {
		r.Action = &broker.RuleAction{SQLExpression: "SET " + randomText(rng), Parameters: randomValues(rng, "@")}
	}
	return r
}

// randomValues returns up to five properties with distinct non-empty keys and one value of each
// type broker.Property and rule parameters carry.
func randomValues(rng *rand.Rand, prefix string) []broker.Property {
	n := rng.IntN(6)
	if n == 0 {
		return nil
	}
	pick := func(types ...string) string { return types[rng.IntN(len(types))] }
	out := make([]broker.Property, n)
	for i := range out {
		var (
			v   any
			typ string
		)
		switch rng.IntN(6) {
		case 0:
			v, typ = randomText(rng), "string"
			if rng.IntN(4) == 0 {
				var u uuid.UUID
				for j := range u {
					u[j] = byte(rng.Uint32())
				}
				v, typ = u.String(), broker.TypeSerGUID
				if rng.IntN(2) == 0 { // kept as sent
					v = "{" + strings.ToUpper(u.String()) + "}"
				}
			}
		case 1:
			switch typ = pick("int", "long", "short", "byte", "unsignedByte", "unsignedShort", "unsignedInt", "unsignedLong"); typ {
			case "short":
				v = int64(int16(rng.Uint32()))
			case "byte":
				v = int64(int8(rng.Uint32()))
			case "unsignedByte":
				v = int64(uint8(rng.Uint32()))
			case "unsignedShort":
				v = int64(uint16(rng.Uint32()))
			case "unsignedInt":
				v = int64(rng.Uint32())
			case "unsignedLong":
				v = rng.Int64()
			default:
				v = rng.Int64() - rng.Int64()
			}
		case 2:
			typ = pick("double", "float", "decimal")
			for {
				f := math.Float64frombits(rng.Uint64())
				if typ == "float" {
					f = float64(float32(f))
				}
				if !math.IsNaN(f) && !math.IsInf(f, 0) {
					v = f
					break
				}
			}
		case 3:
			v, typ = rng.IntN(2) == 0, "boolean"
		case 4:
			v, typ = randomTime(rng), "dateTime"
		case 5:
			d := randomDuration(rng)
			if rng.IntN(2) == 0 {
				d = -d
			}
			v, typ = d, pick("duration", broker.TypeSerDuration)
		}
		out[i] = broker.Property{Name: fmt.Sprintf("%s%d%s", prefix, i, randomText(rng)), Value: v, Type: typ}
	}
	return out
}

// TestSubscriptionRoundTripWithoutRule: the service does not echo DefaultRuleDescription, so a
// subscription entry read back gives its properties and no rule.
func TestSubscriptionRoundTripWithoutRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	for i := range 300 {
		p := randomProps(rng)
		e := broker.Entity{Kind: broker.KindSubscription, Props: p, CreatedAt: randomTime(rng), UpdatedAt: randomTime(rng)}
		out := AppendEntry(nil, EntryInfo{ID: "https://gw/t/Subscriptions/s", Title: "s"}, &e, EncodeOptions{Runtime: i%2 == 0, Host: "gw"})
		got, rule, err := DecodeSubscription(out)
		if err != nil {
			t.Fatalf("#%d: DecodeSubscription: %v\n%s", i, err, out)
		}
		if rule != nil {
			t.Fatalf("#%d: rule = %s; the entry has none", i, fmtRule(*rule))
		}
		assertProps(t, got, echoed(project(broker.KindSubscription, p), "gw"))
		if t.Failed() {
			t.Fatalf("#%d:\n%s", i, out)
		}
	}
}

func TestAppendEntrySubscriptionCount(t *testing.T) {
	for _, tt := range []struct {
		kind    broker.Kind
		runtime bool
		want    string
	}{
		{broker.KindTopic, true, "<SubscriptionCount>42</SubscriptionCount>"},
		{broker.KindTopic, false, ""},
		{broker.KindQueue, true, ""},
		{broker.KindSubscription, true, ""},
	} {
		e := broker.Entity{Kind: tt.kind, Props: broker.DefaultProperties(tt.kind)}
		out := string(AppendEntry(nil, EntryInfo{}, &e, EncodeOptions{Runtime: tt.runtime, SubscriptionCount: 42}))
		n := strings.Count(out, "SubscriptionCount")
		switch {
		case tt.want == "" && n != 0:
			t.Errorf("%v runtime=%v: SubscriptionCount written:\n%s", tt.kind, tt.runtime, out)
		case tt.want != "" && !strings.Contains(out, "</CountDetails>"+tt.want+"<AutoDeleteOnIdle>"):
			t.Errorf("%v runtime=%v: want %s between CountDetails and AutoDeleteOnIdle:\n%s", tt.kind, tt.runtime, tt.want, out)
		}
	}
	// Read-only: a client echoing it back (Python does) changes nothing.
	e := broker.Entity{Kind: broker.KindTopic, Props: broker.DefaultProperties(broker.KindTopic)}
	out := AppendEntry(nil, EntryInfo{}, &e, EncodeOptions{Runtime: true, SubscriptionCount: 3})
	p, err := DecodeProperties(out, broker.KindTopic)
	if err != nil {
		t.Fatal(err)
	}
	assertProps(t, p, broker.DefaultProperties(broker.KindTopic))
}

func TestAppendRuleEntryOmitsAuthor(t *testing.T) {
	rule := broker.TrueRule("r")
	out := string(AppendRuleEntry([]byte("x"), EntryInfo{Author: "ns", XMLBase: "https://h/t/Subscriptions/s/Rules"}, &rule))
	if strings.Contains(out, "<author>") || !strings.HasPrefix(out, `x<entry xmlns="http://www.w3.org/2005/Atom" xml:base="https://h/t/Subscriptions/s/Rules">`) {
		t.Errorf("AppendRuleEntry = %s", out)
	}
}

func BenchmarkDecodeRule(b *testing.B) {
	body := []byte(pythonRuleBody)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRule(body, "rule1"); err != nil {
			b.Fatal(err)
		}
	}
}
