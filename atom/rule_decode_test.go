package atom

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// Rule bodies in the shapes real clients send (protocol.md §4.8, §8; the SDK sources cited
// there). They double as the seed corpus of FuzzDecodeRule.

// azure-sb (npm): xmlbuilder entry with <title>, <updated> and an empty <id>, xmlns:i declared
// before xmlns, SqlFilter with CompatibilityLevel 20, no <Name>, an explicit EmptyRuleAction.
const azureSBRuleBody = `<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><title type="text">big-orders</title><updated>2026-11-22T04:25:02.171Z</updated><id></id><content type="application/xml"><RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Filter i:type="SqlFilter"><SqlExpression>sys.Label = 'order' AND amount &gt; 100</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter><Action i:type="EmptyRuleAction"/></RuleDescription></content></entry>`

// azure-sb with a SQL action: it names the action type SqlFilterExpression.
const azureSBActionRuleBody = `<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><title type="text">tag</title><updated>2026-11-22T04:25:02.171Z</updated><id></id><content type="application/xml"><RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter><Action i:type="SqlFilterExpression"><SqlExpression>SET sys.Label = 'seen'</SqlExpression></Action></RuleDescription></content></entry>`

// Older azure-sb releases and the legacy REST docs: SqlFilterExpression as the filter type, an
// empty <author>.
const legacyRuleBody = `<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><title></title><updated>2014-10-25T00:56:05Z</updated><author><name></name></author><id></id><content type="application/xml"><RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Filter i:type="SqlFilterExpression"><SqlExpression>color = 'blue'</SqlExpression></Filter></RuleDescription></content></entry>`

// @azure/service-bus: p4:type with xmlns:p4 declared on Filter and Action only, so the values'
// p4:type resolves through the enclosing Filter; numbers as l28:double.
const jsCorrelationRuleBody = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml"><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><Filter p4:type="CorrelationFilter" xmlns:p4="http://www.w3.org/2001/XMLSchema-instance"><CorrelationId>abc</CorrelationId><Label>order</Label><ContentType>application/json</ContentType><Properties><KeyValueOfstringanyType><Key>amount</Key><Value p4:type="l28:double" xmlns:l28="http://www.w3.org/2001/XMLSchema">100</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>ratio</Key><Value p4:type="l28:double" xmlns:l28="http://www.w3.org/2001/XMLSchema">0.25</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>rush</Key><Value p4:type="l28:boolean" xmlns:l28="http://www.w3.org/2001/XMLSchema">true</Value></KeyValueOfstringanyType></Properties></Filter><Action p4:type="EmptyRuleAction" xmlns:p4="http://www.w3.org/2001/XMLSchema-instance"/><Name>big-orders</Name></RuleDescription></content></entry>`

// @azure/service-bus SqlFilter with a Date parameter (toJSON form) and a SqlRuleAction.
const jsSQLRuleBody = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml"><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><Filter p4:type="SqlFilter" xmlns:p4="http://www.w3.org/2001/XMLSchema-instance"><SqlExpression>sys.EnqueuedTimeUtc &gt; @since</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@since</Key><Value p4:type="l28:dateTime" xmlns:l28="http://www.w3.org/2001/XMLSchema">2024-01-02T03:04:05.000Z</Value></KeyValueOfstringanyType></Parameters></Filter><Action p4:type="SqlRuleAction" xmlns:p4="http://www.w3.org/2001/XMLSchema-instance"><SqlExpression>SET priority = @p</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@p</Key><Value p4:type="l28:double" xmlns:l28="http://www.w3.org/2001/XMLSchema">1.5</Value></KeyValueOfstringanyType></Parameters></Action><Name>recent</Name></RuleDescription></content></entry>`

// azservicebus/admin (Go): no declaration, _XMLSchema-instance prefix declared on each element
// that uses it, parameters as l28:int and l28:double ("%f"), no Action when there is none.
const goRuleBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><Filter xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" _XMLSchema-instance:type="SqlFilter"><SqlExpression>amount &gt; @min AND ratio &lt; @max</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@min</Key><Value xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" _XMLSchema-instance:type="l28:int" xmlns:l28="http://www.w3.org/2001/XMLSchema">100</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>@max</Key><Value xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" _XMLSchema-instance:type="l28:double" xmlns:l28="http://www.w3.org/2001/XMLSchema">0.750000</Value></KeyValueOfstringanyType></Parameters></Filter><Name>big-orders</Name></RuleDescription></content></entry>`

// Go with a FalseFilter and a SqlRuleAction.
const goActionRuleBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><Filter xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" _XMLSchema-instance:type="FalseFilter"><SqlExpression>1=0</SqlExpression></Filter><Action xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" _XMLSchema-instance:type="SqlRuleAction"><SqlExpression>SET checked = TRUE</SqlExpression></Action><Name>none</Name></RuleDescription></content></entry>`

// azure-servicebus (Python): prefixed Atom with every declaration on the root (ElementTree),
// xsi:type, values as d6p1:T with d6p1 declared on the Value, long above int32, an isodate
// duration and offset timestamp, CompatibilityLevel after Parameters, CreatedAt echoed back.
const pythonRuleBody = `<?xml version='1.0' encoding='utf-8'?>
<ns0:entry xmlns:ns0="http://www.w3.org/2005/Atom" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ns0:content type="application/xml"><RuleDescription><Filter xsi:type="SqlFilter"><SqlExpression>color = @color</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@color</Key><Value xsi:type="d6p1:string" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">blue </Value></KeyValueOfstringanyType></Parameters><CompatibilityLevel>20</CompatibilityLevel></Filter><Action xsi:type="SqlRuleAction"><SqlExpression>SET quantity = @q; SET wait = @wait; SET at = @at</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@q</Key><Value xsi:type="d6p1:long" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">3000000000</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>@wait</Key><Value xsi:type="d6p1:duration" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">P1DT2H</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>@at</Key><Value xsi:type="d6p1:dateTime" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">2021-01-01T10:20:30.123456+02:00</Value></KeyValueOfstringanyType></Parameters><CompatibilityLevel>20</CompatibilityLevel></Action><CreatedAt>2021-01-01T00:00:00.000Z</CreatedAt><Name>rule1</Name></RuleDescription></ns0:content></ns0:entry>`

// .NET ServiceBusAdministrationClient (XDocument): no declaration, i: on the description, l28:
// values including long, an empty <Parameters /> on a filter without any, and a TimeSpan in
// the DataContract Serialization namespace as older .NET clients write it.
const dotnetRuleBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Filter i:type="CorrelationFilter"><MessageId>m-1</MessageId><To>warehouse</To><ReplyTo>back</ReplyTo><SessionId>s1</SessionId><ReplyToSessionId>s2</ReplyToSessionId><Properties><KeyValueOfstringanyType><Key>size</Key><Value i:type="l28:long" xmlns:l28="http://www.w3.org/2001/XMLSchema">5000000000</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>count</Key><Value i:type="l28:int" xmlns:l28="http://www.w3.org/2001/XMLSchema">-7</Value></KeyValueOfstringanyType></Properties></Filter><Action i:type="SqlRuleAction"><SqlExpression>SET ttl = @ttl; SET back = @back</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@ttl</Key><Value i:type="d5p1:duration" xmlns:d5p1="http://schemas.microsoft.com/2003/10/Serialization/">PT1H30M</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>@back</Key><Value i:type="l28:duration" xmlns:l28="http://www.w3.org/2001/XMLSchema">-PT0.5S</Value></KeyValueOfstringanyType></Parameters></Action><Name>big</Name></RuleDescription></content></entry>`

const dotnetEmptyParamsRuleBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Filter i:type="SqlFilter"><SqlExpression>a = 1</SqlExpression><Parameters /></Filter><Name>a</Name></RuleDescription></content></entry>`

// A bare RuleDescription, as curl users write it.
const bareRuleBody = `<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Filter xsi:type="SqlFilter"><SqlExpression>a = @a</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@a</Key><Value xsi:type="xs:int">1</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>@b</Key><Value>text</Value></KeyValueOfstringanyType></Parameters></Filter></RuleDescription>`

// props builds properties from name, value pairs; a value given as x(type, v) is declared with
// that type.
func props(kv ...any) []broker.Property {
	var out []broker.Property
	for i := 0; i < len(kv); i += 2 {
		p := broker.Property{Name: kv[i].(string), Value: kv[i+1]}
		if d, ok := p.Value.(declared); ok {
			p.Value, p.Type = d.v, d.typ
		}
		out = append(out, p)
	}
	return out
}

type declared struct {
	typ string
	v   any
}

// x declares v with the type typ, as broker.Property.Type spells it.
func x(typ string, v any) declared { return declared{typ, v} }

func sqlFilter(expr string, params ...any) broker.RuleFilter {
	return broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: expr, Parameters: props(params...)}
}

func sqlAction(expr string, params ...any) *broker.RuleAction {
	return &broker.RuleAction{SQLExpression: expr, Parameters: props(params...)}
}

var ruleBodies = []struct {
	name, body, urlName string
	want                broker.Rule
}{
	{"azure-sb sql filter", azureSBRuleBody, "big-orders", broker.Rule{Name: "big-orders",
		Filter: sqlFilter("sys.Label = 'order' AND amount > 100")}},
	{"azure-sb sql action", azureSBActionRuleBody, "tag", broker.Rule{Name: "tag",
		Filter: trueFilter(), Action: sqlAction("SET sys.Label = 'seen'")}},
	{"legacy SqlFilterExpression", legacyRuleBody, "blue", broker.Rule{Name: "blue", Filter: sqlFilter("color = 'blue'")}},
	{"js correlation", jsCorrelationRuleBody, "big-orders", broker.Rule{Name: "big-orders",
		Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{
			CorrelationID: "abc", Label: "order", ContentType: "application/json",
			Properties: props("amount", x("double", 100.0), "ratio", x("double", 0.25), "rush", x("boolean", true))}}}},
	{"js sql with action", jsSQLRuleBody, "Recent", broker.Rule{Name: "Recent",
		Filter: sqlFilter("sys.EnqueuedTimeUtc > @since", "@since", x("dateTime", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))),
		Action: sqlAction("SET priority = @p", "@p", x("double", 1.5))}},
	{"go sql parameters", goRuleBody, "big-orders", broker.Rule{Name: "big-orders",
		Filter: sqlFilter("amount > @min AND ratio < @max", "@min", x("int", int64(100)), "@max", x("double", 0.75))}},
	{"go false filter with action", goActionRuleBody, "none", broker.Rule{Name: "none",
		Filter: broker.RuleFilter{Kind: broker.FilterFalse, SQLExpression: "1=0"}, Action: sqlAction("SET checked = TRUE")}},
	{"go nameless to Rules/", goActionRuleBody, "", broker.Rule{Name: "none",
		Filter: broker.RuleFilter{Kind: broker.FilterFalse, SQLExpression: "1=0"}, Action: sqlAction("SET checked = TRUE")}},
	{"python", pythonRuleBody, "rule1", broker.Rule{Name: "rule1",
		Filter: sqlFilter("color = @color", "@color", x("string", "blue ")),
		Action: sqlAction("SET quantity = @q; SET wait = @wait; SET at = @at",
			"@q", x("long", int64(3000000000)), "@wait", x("duration", 26*time.Hour), "@at", x("dateTime", time.Date(2021, 1, 1, 8, 20, 30, 123456000, time.UTC)))}},
	{"dotnet", dotnetRuleBody, "big", broker.Rule{Name: "big",
		Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{
			MessageID: "m-1", To: "warehouse", ReplyTo: "back", SessionID: "s1", ReplyToSessionID: "s2",
			Properties: props("size", x("long", int64(5000000000)), "count", x("int", int64(-7)))}},
		Action: sqlAction("SET ttl = @ttl; SET back = @back", "@ttl", x("ser:duration", 90*time.Minute), "@back", x("duration", -500*time.Millisecond))}},
	{"dotnet empty parameters", dotnetEmptyParamsRuleBody, "a", broker.Rule{Name: "a", Filter: sqlFilter("a = 1")}},
	{"bare, xs: prefix, untyped value", bareRuleBody, "r", broker.Rule{Name: "r",
		Filter: sqlFilter("a = @a", "@a", x("int", int64(1)), "@b", x("string", "text"))}},
	{"empty body", "", "r", broker.TrueRule("r")},
	{"entry without content", `<entry xmlns="http://www.w3.org/2005/Atom"><title>r</title></entry>`, "r", broker.TrueRule("r")},
	{"empty description", `<RuleDescription/>`, "r", broker.TrueRule("r")},
}

func TestDecodeRuleClientBodies(t *testing.T) {
	for _, tt := range ruleBodies {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeRule([]byte(tt.body), tt.urlName)
			if err != nil {
				t.Fatalf("DecodeRule: %v", err)
			}
			if diff := ruleDiff(got, tt.want); diff != "" {
				t.Errorf("DecodeRule: %s\ngot  %s\nwant %s", diff, fmtRule(got), fmtRule(tt.want))
			}
		})
	}
}

// TestDecodeRuleVariants covers spellings no single client above uses.
func TestDecodeRuleVariants(t *testing.T) {
	const head = `<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">`
	value := func(typ, text string) string {
		return head + `<Filter i:type="SqlFilter"><SqlExpression>x</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@v</Key><Value ` + typ + `>` + text + `</Value></KeyValueOfstringanyType></Parameters></Filter></RuleDescription>`
	}
	tests := []struct {
		name, body string
		want       broker.Rule
	}{
		{"untyped filter with correlation fields", head + `<Filter><CorrelationId>c</CorrelationId></Filter></RuleDescription>`,
			broker.Rule{Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{CorrelationID: "c"}}}},
		{"untyped filter with expression", head + `<Filter><SqlExpression>a=1</SqlExpression></Filter></RuleDescription>`,
			broker.Rule{Filter: sqlFilter("a=1")}},
		{"untyped empty filter", head + `<Filter/></RuleDescription>`, broker.Rule{Filter: trueFilter()}},
		{"untyped action with expression", head + `<Action><SqlExpression>SET a=1</SqlExpression></Action></RuleDescription>`,
			broker.Rule{Filter: trueFilter(), Action: sqlAction("SET a=1")}},
		{"untyped empty action", head + `<Action/></RuleDescription>`, broker.Rule{Filter: trueFilter()}},
		{"nil filter and action", head + `<Filter i:nil="true"/><Action i:nil="true"/></RuleDescription>`, broker.Rule{Filter: trueFilter()}},
		{"TrueFilter ignores its expression", head + `<Filter i:type="TrueFilter"><SqlExpression>a=1</SqlExpression></Filter></RuleDescription>`,
			broker.Rule{Filter: trueFilter()}},
		{"legacy correlation and action names", head + `<Filter i:type="CorrelationFilterExpression"><CorrelationId>c</CorrelationId></Filter><Action i:type="SqlFilterAction"><SqlExpression>SET a=1</SqlExpression></Action></RuleDescription>`,
			broker.Rule{Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{CorrelationID: "c"}}, Action: sqlAction("SET a=1")}},
		{"typed filter name with prefix", head + `<Filter i:type="d2p1:SqlFilter" xmlns:d2p1="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><SqlExpression>a=1</SqlExpression></Filter></RuleDescription>`,
			broker.Rule{Filter: sqlFilter("a=1")}},
		{"expression kept verbatim", head + `<Filter i:type="SqlFilter"><SqlExpression>  a = 'x&amp;y'&#xD;</SqlExpression><RequiresPreprocessing>false</RequiresPreprocessing></Filter></RuleDescription>`,
			broker.Rule{Filter: sqlFilter("  a = 'x&y'\r")}},
		{"prefix declared on an ancestor", `<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns:q="http://www.w3.org/2001/XMLSchema"><Filter i:type="SqlFilter"><SqlExpression>x</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@v</Key><Value i:type="q:short">12</Value></KeyValueOfstringanyType></Parameters></Filter></RuleDescription>`,
			broker.Rule{Filter: sqlFilter("x", "@v", x("short", int64(12)))}},
		{"prefix shadowed, then restored", `<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns:d="http://www.w3.org/2001/XMLSchema"><Filter i:type="SqlFilter"><SqlExpression>x</SqlExpression><Parameters><KeyValueOfstringanyType xmlns:d="urn:other"><Key>@a</Key><Value i:type="e:long" xmlns:e="http://www.w3.org/2001/XMLSchema">1</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>@b</Key><Value i:type="d:long">2</Value></KeyValueOfstringanyType></Parameters></Filter></RuleDescription>`,
			broker.Rule{Filter: sqlFilter("x", "@a", x("long", int64(1)), "@b", x("long", int64(2)))}},
		{"Value before Key", head + `<Filter i:type="SqlFilter"><SqlExpression>x</SqlExpression><Parameters><KeyValueOfstringanyType><Value i:type="d:boolean" xmlns:d="http://www.w3.org/2001/XMLSchema">1</Value><Key>@v</Key></KeyValueOfstringanyType></Parameters></Filter></RuleDescription>`,
			broker.Rule{Filter: sqlFilter("x", "@v", x("boolean", true))}},
		{"byte", value(`i:type="d:byte" xmlns:d="http://www.w3.org/2001/XMLSchema"`, " +5 "), broker.Rule{Filter: sqlFilter("x", "@v", x("byte", int64(5)))}},
		{"float", value(`i:type="d:float" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "1E-07"), broker.Rule{Filter: sqlFilter("x", "@v", x("float", 1e-7))}},
		{"decimal", value(`i:type="d:decimal" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "-12.50"), broker.Rule{Filter: sqlFilter("x", "@v", x("decimal", -12.5))}},
		{"boolean False", value(`i:type="d:boolean" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "False"), broker.Rule{Filter: sqlFilter("x", "@v", x("boolean", false))}},
		{"dateTime without zone", value(`i:type="d:dateTime" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "2020-09-29T08:36:11.3692415"),
			broker.Rule{Filter: sqlFilter("x", "@v", x("dateTime", time.Date(2020, 9, 29, 8, 36, 11, 369241500, time.UTC)))}},
		{"infinite duration", value(`i:type="d:duration" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "P10675199DT2H48M5.4775807S"),
			broker.Rule{Filter: sqlFilter("x", "@v", x("duration", broker.Infinite))}},
		{"empty string", value(`i:type="d:string" xmlns:d="http://www.w3.org/2001/XMLSchema"`, ""), broker.Rule{Filter: sqlFilter("x", "@v", x("string", ""))}},
		{"CDATA string", value(`i:type="d:string" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "<![CDATA[<a>]]>"), broker.Rule{Filter: sqlFilter("x", "@v", x("string", "<a>"))}},
		{"unprefixed type", value(`i:type="int"`, "3"), broker.Rule{Filter: sqlFilter("x", "@v", x("int", int64(3)))}},
		// The Go SDK declares every integer int, however large.
		{"int beyond 32 bits", value(`i:type="d:int" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "5000000000"),
			broker.Rule{Filter: sqlFilter("x", "@v", x("int", int64(5000000000)))}},
		{"unsignedInt", value(`i:type="d:unsignedInt" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "+4294967295"),
			broker.Rule{Filter: sqlFilter("x", "@v", x("unsignedInt", int64(4294967295)))}},
		{"unsignedLong", value(`i:type="d:unsignedLong" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "9223372036854775807"),
			broker.Rule{Filter: sqlFilter("x", "@v", x("unsignedLong", int64(math.MaxInt64)))}},
		{"decimal with 17 digits", value(`i:type="d:decimal" xmlns:d="http://www.w3.org/2001/XMLSchema"`, "+0012345678.901234560"),
			broker.Rule{Filter: sqlFilter("x", "@v", x("decimal", 12345678.90123456))}},
		{"guid kept as sent", value(`i:type="s:guid" xmlns:s="http://schemas.microsoft.com/2003/10/Serialization/"`, " {6F9619FF-8B86-D011-B42D-00CF4FC964FF} "),
			broker.Rule{Filter: sqlFilter("x", "@v", x(broker.TypeSerGUID, "{6F9619FF-8B86-D011-B42D-00CF4FC964FF}"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeRule([]byte(tt.body), "r")
			if err != nil {
				t.Fatalf("DecodeRule: %v\n%s", err, tt.body)
			}
			tt.want.Name = "r"
			if diff := ruleDiff(got, tt.want); diff != "" {
				t.Errorf("DecodeRule: %s\ngot  %s\nwant %s", diff, fmtRule(got), fmtRule(tt.want))
			}
		})
	}
}

func TestDecodeRuleRejects(t *testing.T) {
	const head = `<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">`
	param := func(kv string) string {
		return head + `<Filter i:type="SqlFilter"><SqlExpression>x</SqlExpression><Parameters>` + kv + `</Parameters></Filter></RuleDescription>`
	}
	value := func(attrs, text string) string {
		return param(`<KeyValueOfstringanyType><Key>@v</Key><Value ` + attrs + `>` + text + `</Value></KeyValueOfstringanyType>`)
	}
	const xsd = ` xmlns:d="http://www.w3.org/2001/XMLSchema"`
	const one = `<KeyValueOfstringanyType><Key>@k</Key><Value>v</Value></KeyValueOfstringanyType>`
	var big strings.Builder
	for i := range maxKeyValues + 1 {
		fmt.Fprintf(&big, `<KeyValueOfstringanyType><Key>@k%d</Key><Value>v</Value></KeyValueOfstringanyType>`, i)
	}
	tests := []struct {
		name, body, urlName string
		wantInMsg           string
	}{
		{"unknown filter type", head + `<Filter i:type="BloomFilter"/></RuleDescription>`, "r", "Filter type 'BloomFilter'"},
		{"unknown action type", head + `<Action i:type="CompositeAction"/></RuleDescription>`, "r", "Action type 'CompositeAction'"},
		{"unknown value type", value(`i:type="d:guid"`+xsd, "6f9619ff-8b86-d011-b42d-00cf4fc964ff"), "r", "Value of key '@v' in the Parameters of the Filter has an unsupported type 'd:guid'"},
		{"char in the serialization namespace", value(`i:type="s:char" xmlns:s="http://schemas.microsoft.com/2003/10/Serialization/"`, "65"), "r", "type 's:char'"},
		{"XSD type in a foreign namespace", value(`i:type="d:int" xmlns:d="urn:other"`, "1"), "r", "type 'd:int'"},
		{"undeclared value prefix", value(`i:type="l28:int"`, "1"), "r", "prefix is not declared"},
		{"prefix shadowed by a foreign namespace", `<RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns:d="http://www.w3.org/2001/XMLSchema"><Filter i:type="SqlFilter"><SqlExpression>x</SqlExpression><Parameters><KeyValueOfstringanyType xmlns:d="urn:other"><Key>@a</Key><Value i:type="d:int">1</Value></KeyValueOfstringanyType></Parameters></Filter></RuleDescription>`, "r", "unsupported type 'd:int'"},
		{"prefix out of scope", param(`<KeyValueOfstringanyType><Key>@a</Key><Value i:type="d:int"` + xsd + `>1</Value></KeyValueOfstringanyType><KeyValueOfstringanyType><Key>@b</Key><Value i:type="d:int">2</Value></KeyValueOfstringanyType>`), "r", "prefix is not declared"},
		{"bad int", value(`i:type="d:int"`+xsd, "1.5"), "r", "'1.5' is not a 64-bit integer"},
		{"int overflow", value(`i:type="d:long"`+xsd, "9223372036854775808"), "r", "not a 64-bit integer"},
		{"short out of range", value(`i:type="d:short"`+xsd, "40000"), "r", "'40000' is not a short (a signed 16-bit integer)"},
		{"byte is signed", value(`i:type="d:byte"`+xsd, "200"), "r", "is not a byte (a signed 8-bit integer)"},
		{"negative unsignedInt", value(`i:type="d:unsignedInt"`+xsd, "-1"), "r", "is not an unsignedInt"},
		{"unsignedInt out of range", value(`i:type="d:unsignedInt"`+xsd, "4294967296"), "r", "is not an unsignedInt"},
		{"unsignedLong beyond int64", value(`i:type="d:unsignedLong"`+xsd, "9223372036854775808"), "r", "sbgate keeps integers in 64 signed bits"},
		{"float beyond float32", value(`i:type="d:float"`+xsd, "1e39"), "r", "beyond the range of a float"},
		{"decimal with exponent", value(`i:type="d:decimal"`+xsd, "1E+3"), "r", "is not a decimal"},
		{"decimal without digits", value(`i:type="d:decimal"`+xsd, "-."), "r", "is not a decimal"},
		{"decimal beyond a double", value(`i:type="d:decimal"`+xsd, "12345678901234567890.5"), "r", "more significant digits than sbgate keeps"},
		{"bad guid", value(`i:type="s:guid" xmlns:s="http://schemas.microsoft.com/2003/10/Serialization/"`, "not-a-guid"), "r", "is not a GUID"},
		{"bad double", value(`i:type="d:double"`+xsd, "abc"), "r", "not a finite number"},
		{"infinite double", value(`i:type="d:double"`+xsd, "INF"), "r", "not a finite number"},
		{"NaN", value(`i:type="d:double"`+xsd, "NaN"), "r", "not a finite number"},
		{"bad boolean", value(`i:type="d:boolean"`+xsd, "yes"), "r", "not a boolean"},
		{"bad dateTime", value(`i:type="d:dateTime"`+xsd, "yesterday"), "r", "not an ISO 8601 timestamp"},
		{"empty dateTime", value(`i:type="d:dateTime"`+xsd, ""), "r", "not an ISO 8601 timestamp"},
		{"bad duration", value(`i:type="d:duration"`+xsd, "T1M"), "r", "not an XML duration"},
		{"nil value", value(`i:nil="true"`, ""), "r", "is null"},
		{"missing key", param(`<KeyValueOfstringanyType><Value>v</Value></KeyValueOfstringanyType>`), "r", "has no Key"},
		{"empty key", param(`<KeyValueOfstringanyType><Key></Key><Value>v</Value></KeyValueOfstringanyType>`), "r", "has no Key"},
		{"missing value", param(`<KeyValueOfstringanyType><Key>@k</Key></KeyValueOfstringanyType>`), "r", "key '@k' in the Parameters of the Filter has no Value"},
		{"duplicate key", param(one + one), "r", "key '@k' appears more than once"},
		{"too many parameters", param(big.String()), "r", "more than 1000 entries"},
		{"value with children", value(`i:type="d:string"`+xsd, "<b>x</b>"), "r", "must hold a value"},
		{"name mismatch", head + `<Name>other</Name></RuleDescription>`, "r", "'other' does not match the rule name 'r'"},
		{"no name anywhere", head + `</RuleDescription>`, "", "has no name"},
		{"sql filter without expression", head + `<Filter i:type="SqlFilter"><SqlExpression> </SqlExpression></Filter></RuleDescription>`, "r", "SqlFilter has no SqlExpression"},
		{"sql action without expression", head + `<Action i:type="SqlRuleAction"/></RuleDescription>`, "r", "SqlRuleAction has no SqlExpression"},
		{"expression too long", head + `<Filter i:type="SqlFilter"><SqlExpression>` + strings.Repeat("a", maxExpressionText+1) + `</SqlExpression></Filter></RuleDescription>`, "r", "longer than 65536 bytes"},
		{"two filters", head + `<Filter/><Filter/></RuleDescription>`, "r", "more than one Filter"},
		{"two actions", head + `<Action/><Action/></RuleDescription>`, "r", "more than one Action"},
		{"two expressions", head + `<Filter><SqlExpression>a</SqlExpression><SqlExpression>b</SqlExpression></Filter></RuleDescription>`, "r", "Filter has more than one SqlExpression"},
		{"two parameter lists", head + `<Action><SqlExpression>a</SqlExpression><Parameters/><Parameters/></Action></RuleDescription>`, "r", "Action has more than one Parameters"},
		{"wrong description", `<SubscriptionDescription/>`, "r", "contains a SubscriptionDescription, but a RuleDescription was expected"},
		{"wrong root", `<Rule/>`, "r", "must be an Atom entry or a RuleDescription"},
		{"two descriptions", `<entry><content><RuleDescription/><RuleDescription/></content></entry>`, "r", "more than one description"},
		{"malformed", head + `<Filter i:type="SqlFilter"><SqlExpression>a</Filter></RuleDescription>`, "r", "not well-formed"},
		{"truncated", head + `<Filter i:type="SqlFilter">`, "r", "not well-formed"},
		{"trailing element", `<RuleDescription/><RuleDescription/>`, "r", "more than one root"},
		{"too deep", head + strings.Repeat("<Filter>", 40) + strings.Repeat("</Filter>", 40) + `</RuleDescription>`, "r", "deeper than 32"},
		{"too large", head + strings.Repeat(" ", maxBodySize) + `</RuleDescription>`, "r", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRule([]byte(tt.body), tt.urlName)
			assertBadRequest(t, err, tt.wantInMsg)
		})
	}
}

func assertBadRequest(t *testing.T, err error, wantInMsg string) {
	t.Helper()
	var se *broker.Error
	if !errors.As(err, &se) || se.Code != broker.CodeBadRequest {
		t.Fatalf("error = %#v; want a *store.Error with CodeBadRequest", err)
	}
	if !strings.Contains(se.Message, wantInMsg) {
		t.Errorf("message %q does not contain %q", se.Message, wantInMsg)
	}
}

// azure-sb shape with a default rule: i: declared on the description, SqlFilter with
// CompatibilityLevel, EmptyRuleAction, no Name.
const azureSBSubscriptionRuleBody = `<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml"><SubscriptionDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT45S</LockDuration><DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>region = 'eu'</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter><Action i:type="EmptyRuleAction"/></DefaultRuleDescription><MaxDeliveryCount>5</MaxDeliveryCount></SubscriptionDescription></content></entry>`

func TestDecodeSubscription(t *testing.T) {
	tests := []struct {
		name, body string
		want       *broker.Rule
	}{
		{"azure-sb with default rule", azureSBSubscriptionRuleBody, &broker.Rule{Name: broker.DefaultRuleName, Filter: sqlFilter("region = 'eu'")}},
		{"azure-sb without", azureSBSubscriptionBody, nil},
		{"js with default rule", jsSubscriptionBody, &broker.Rule{Name: "only-red", Filter: broker.RuleFilter{Kind: broker.FilterCorrelation,
			Correlation: &broker.CorrelationFilter{CorrelationID: "abc", Properties: props("color", x("string", "red"))}}}},
		{"go with default rule, no Action", goSubscriptionBody, &broker.Rule{Name: "$Default", Filter: sqlFilter("a = 1")}},
		{"python without", pythonSubscriptionBody, nil},
		{"empty body", "", nil},
		{"nil default rule", `<SubscriptionDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><DefaultRuleDescription i:nil="true"/></SubscriptionDescription>`, nil},
		{"empty default rule", `<SubscriptionDescription><DefaultRuleDescription/></SubscriptionDescription>`, &broker.Rule{Name: broker.DefaultRuleName, Filter: trueFilter()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, rule, err := DecodeSubscription([]byte(tt.body))
			if err != nil {
				t.Fatalf("DecodeSubscription: %v", err)
			}
			// The properties are exactly what DecodeProperties reads, default rule or not.
			want, err := DecodeProperties([]byte(tt.body), broker.KindSubscription)
			if err != nil {
				t.Fatalf("DecodeProperties: %v", err)
			}
			assertProps(t, p, want)
			switch {
			case tt.want == nil && rule != nil:
				t.Errorf("rule = %s; want none", fmtRule(*rule))
			case tt.want != nil && rule == nil:
				t.Errorf("rule = nil; want %s", fmtRule(*tt.want))
			case tt.want != nil:
				if diff := ruleDiff(*rule, *tt.want); diff != "" {
					t.Errorf("rule: %s\ngot  %s\nwant %s", diff, fmtRule(*rule), fmtRule(*tt.want))
				}
			}
		})
	}
	// The properties around the rule are read too.
	p, _, err := DecodeSubscription([]byte(azureSBSubscriptionRuleBody))
	if err != nil || p.LockDuration != 45*time.Second || p.MaxDeliveryCount != 5 {
		t.Errorf("DecodeSubscription properties = %v, %v, %v", p.LockDuration, p.MaxDeliveryCount, err)
	}
}

func TestDecodeSubscriptionRejects(t *testing.T) {
	const head = `<SubscriptionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">`
	tests := []struct{ name, body, wantInMsg string }{
		{"two default rules", head + `<DefaultRuleDescription/><DefaultRuleDescription/></SubscriptionDescription>`, "more than one DefaultRuleDescription"},
		{"bad default rule filter", head + `<DefaultRuleDescription><Filter i:type="Nope"/></DefaultRuleDescription></SubscriptionDescription>`, "Filter type 'Nope'"},
		{"bad property", head + `<LockDuration>soon</LockDuration></SubscriptionDescription>`, "LockDuration"},
		{"queue description", `<QueueDescription/>`, "but a SubscriptionDescription was expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rule, err := DecodeSubscription([]byte(tt.body))
			assertBadRequest(t, err, tt.wantInMsg)
			if rule != nil {
				t.Errorf("rule = %s on error; want nil", fmtRule(*rule))
			}
		})
	}
}

// ruleDiff describes the first difference between two rules, or returns "". Times compare by
// instant; values must have the same Go type.
func ruleDiff(got, want broker.Rule) string {
	switch {
	case got.Name != want.Name:
		return fmt.Sprintf("Name %q; want %q", got.Name, want.Name)
	case !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Sprintf("CreatedAt %v; want %v", got.CreatedAt, want.CreatedAt)
	case got.Filter.Kind != want.Filter.Kind:
		return fmt.Sprintf("Filter.Kind %q; want %q", got.Filter.Kind, want.Filter.Kind)
	case got.Filter.SQLExpression != want.Filter.SQLExpression:
		return fmt.Sprintf("Filter.SQLExpression %q; want %q", got.Filter.SQLExpression, want.Filter.SQLExpression)
	}
	if d := propsDiff("Filter.Parameters", got.Filter.Parameters, want.Filter.Parameters); d != "" {
		return d
	}
	gc, wc := got.Filter.Correlation, want.Filter.Correlation
	if (gc == nil) != (wc == nil) {
		return fmt.Sprintf("Filter.Correlation %v; want %v", gc, wc)
	}
	if gc != nil {
		g, w := *gc, *wc
		if [8]string{g.CorrelationID, g.MessageID, g.To, g.ReplyTo, g.Label, g.SessionID, g.ReplyToSessionID, g.ContentType} !=
			[8]string{w.CorrelationID, w.MessageID, w.To, w.ReplyTo, w.Label, w.SessionID, w.ReplyToSessionID, w.ContentType} {
			return fmt.Sprintf("Filter.Correlation %+v; want %+v", g, w)
		}
		if d := propsDiff("Filter.Correlation.Properties", gc.Properties, wc.Properties); d != "" {
			return d
		}
	}
	if (got.Action == nil) != (want.Action == nil) {
		return fmt.Sprintf("Action %v; want %v", got.Action, want.Action)
	}
	if got.Action != nil {
		if got.Action.SQLExpression != want.Action.SQLExpression {
			return fmt.Sprintf("Action.SQLExpression %q; want %q", got.Action.SQLExpression, want.Action.SQLExpression)
		}
		return propsDiff("Action.Parameters", got.Action.Parameters, want.Action.Parameters)
	}
	return ""
}

func propsDiff(what string, got, want []broker.Property) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%s has %d entries; want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || fmt.Sprintf("%T", g.Value) != fmt.Sprintf("%T", w.Value) || g.Type != w.Type {
			return fmt.Sprintf("%s[%d] = %q: %T %q; want %q: %T %q", what, i, g.Name, g.Value, g.Type, w.Name, w.Value, w.Type)
		}
		equal := g.Value == w.Value
		if gt, ok := g.Value.(time.Time); ok {
			equal = gt.Equal(w.Value.(time.Time))
		}
		if !equal {
			return fmt.Sprintf("%s[%d] %q = %#v; want %#v", what, i, g.Name, g.Value, w.Value)
		}
	}
	return ""
}

func fmtRule(r broker.Rule) string {
	s := fmt.Sprintf("{Name:%q Filter:{%s %q %v", r.Name, r.Filter.Kind, r.Filter.SQLExpression, r.Filter.Parameters)
	if r.Filter.Correlation != nil {
		s += fmt.Sprintf(" %+v", *r.Filter.Correlation)
	}
	s += "}"
	if r.Action != nil {
		s += fmt.Sprintf(" Action:%+v", *r.Action)
	}
	return s + "}"
}

func FuzzDecodeRule(f *testing.F) {
	for _, b := range ruleBodies {
		f.Add([]byte(b.body))
	}
	for _, b := range []string{jsSubscriptionBody, goSubscriptionBody, azureSBSubscriptionRuleBody,
		`<RuleDescription><Filter><Properties><KeyValueOfstringanyType><Key>k</Key><Value i:type="p:duration" xmlns:p="http://schemas.microsoft.com/2003/10/Serialization/" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">-P1D</Value></KeyValueOfstringanyType></Properties></Filter></RuleDescription>`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkErr := func(what string, err error) {
			var se *broker.Error
			if !errors.As(err, &se) || se.Code != broker.CodeBadRequest {
				t.Fatalf("%s(%q) error = %#v; want a bad request", what, body, err)
			}
			// Messages quote client text clipped, so an error stays small whatever the body.
			if len(se.Message) > 512 {
				t.Fatalf("%s: message of %d bytes: %.200s...", what, len(se.Message), se.Message)
			}
		}
		if _, rule, err := DecodeSubscription(body); err != nil {
			checkErr("DecodeSubscription", err)
		} else if rule != nil {
			roundTripRule(t, *rule)
		}
		rule, err := DecodeRule(body, "fuzz")
		if err != nil {
			checkErr("DecodeRule", err)
			return
		}
		if rule.Name != "fuzz" {
			t.Fatalf("Name = %q; want the URL's", rule.Name)
		}
		roundTripRule(t, rule)
	})
}

// roundTripRule checks that an accepted rule is written back as well-formed XML that decodes to
// the same rule: a GET after a PUT must show what was stored.
func roundTripRule(t *testing.T, rule broker.Rule) {
	t.Helper()
	out := AppendRuleEntry(nil, EntryInfo{ID: "https://gw/t/Subscriptions/s/Rules/r", Title: rule.Name}, &rule)
	if err := wellFormed(out); err != nil {
		t.Fatalf("AppendRuleEntry output is not well-formed (%v):\n%s", err, out)
	}
	back, err := DecodeRule(out, rule.Name)
	if err != nil {
		t.Fatalf("DecodeRule(AppendRuleEntry(...)) = %v\n%s", err, out)
	}
	if diff := ruleDiff(back, rule); diff != "" {
		t.Fatalf("round trip: %s\n%s", diff, out)
	}
}
