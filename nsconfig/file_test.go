package nsconfig_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/nsconfig"
)

func readSample(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/emulator/Config.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseEmulatorSample reads the emulator's published sample, comments and all.
func TestParseEmulatorSample(t *testing.T) {
	f, err := nsconfig.Parse("Config.json", readSample(t))
	if err != nil {
		t.Fatal(err)
	}
	if f.Namespace != "sbemulatorns" || f.Logging != "File" || len(f.Queues) != 1 || len(f.Topics) != 1 {
		t.Fatalf("Parse(sample) = namespace %q logging %q, %d queues, %d topics", f.Namespace, f.Logging, len(f.Queues), len(f.Topics))
	}
	q := f.Queues[0]
	want := nsconfig.Properties{DefaultMessageTimeToLive: time.Hour, DuplicateDetectionHistoryTimeWindow: 20 * time.Second,
		LockDuration: time.Minute, MaxDeliveryCount: 3}
	if q.Name != "queue.1" || q.Props != want {
		t.Errorf("queue = %q %+v; want queue.1 %+v", q.Name, q.Props, want)
	}
	subs := f.Topics[0].Subscriptions
	if len(subs) != 4 {
		t.Fatalf("%d subscriptions; want 4", len(subs))
	}
	if r := subs[0].Rules; len(r) != 1 || r[0].Rule.Filter.Kind != broker.FilterCorrelation || r[0].Rule.Filter.Correlation.ContentType != "application/json" {
		t.Errorf("subscription.1 rules = %+v", r)
	}
	if r := subs[1].Rules; len(r) != 1 || len(r[0].Rule.Filter.Correlation.Properties) != 1 || r[0].Rule.Filter.Correlation.Properties[0] != (broker.Property{Name: "prop1", Value: "value1"}) {
		t.Errorf("subscription.2 rules = %+v", r)
	}
	if subs[2].Rules != nil {
		t.Errorf("subscription.3 declares no rules, got %+v", subs[2].Rules)
	}
	if r := subs[3].Rules; len(r) != 1 || r[0].Rule.Filter.SQLExpression != "sys.MessageId = '123456' AND userProp1 = 'value1'" || r[0].Rule.Action == nil || r[0].Rule.Action.SQLExpression != "SET sys.To = 'Entity'" {
		t.Errorf("subscription.4 rules = %+v", r)
	}
}

// TestParseAspireAndTestcontainersForms reads what .NET Aspire and the Testcontainers modules
// write: an empty CorrelationFilter beside a SQL filter, RequiresPreprocessing, typed
// correlation values, fractional and day durations, another namespace name, empty lists.
func TestParseAspireAndTestcontainersForms(t *testing.T) {
	const doc = `{"UserConfig":{"Namespaces":[{"Name":"namespace","Queues":[
	  {"Name":"q","Properties":{"DefaultMessageTimeToLive":"P1DT0.5S","LockDuration":"PT1M30S"}}],
	  "Topics":[{"Name":"t","Properties":{},"Subscriptions":[
	    {"Name":"s","Properties":{"MaxDeliveryCount":10},"Rules":[
	      {"Name":"sql","Properties":{"FilterType":"Sql","CorrelationFilter":{},"SqlFilter":{"SqlExpression":"a > 1"}}},
	      {"Name":"corr","Properties":{"FilterType":"Correlation","CorrelationFilter":{"Properties":{"n":3,"d":2.5,"whole":2.0,"b":true,"s":"x"},"Label":"l","RequiresPreprocessing":false}}}]},
	    {"Name":"none","Rules":[]}]},
	  {"Name":"empty","Subscriptions":[]}]}]}}`
	f, err := nsconfig.Parse("aspire.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if q := f.Queues[0].Props; q.DefaultMessageTimeToLive != 24*time.Hour+500*time.Millisecond || q.LockDuration != 90*time.Second {
		t.Errorf("durations = %v, %v", q.DefaultMessageTimeToLive, q.LockDuration)
	}
	corr := f.Topics[0].Subscriptions[0].Rules[1].Rule.Filter.Correlation
	got := map[string]any{}
	for _, p := range corr.Properties {
		got[p.Name] = p.Value
	}
	want := map[string]any{"n": int64(3), "d": 2.5, "whole": 2.0, "b": true, "s": "x"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("correlation property %s = %#v; want %#v", k, got[k], v)
		}
	}
	if len(f.Topics[0].Subscriptions[1].Rules) != 0 {
		t.Errorf("an empty Rules list declares no rules")
	}
}

// TestParseRefusals checks that each mistake is refused with the file, line, JSON path and what
// is wrong.
func TestParseRefusals(t *testing.T) {
	ns := func(body string) string {
		return `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns",` + body + `}],"Logging":{"Type":"File"}}}`
	}
	queue := func(props string) string {
		return ns(`"Queues":[{"Name":"q","Properties":{` + props + `}}],"Topics":[]`)
	}
	rule := func(props string) string {
		return ns(`"Queues":[],"Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{` + props + `}}]}]}]`)
	}
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"syntax", "{\n  \"UserConfig\": {,\n}", []string{"f.json:2:", "not valid JSON"}},
		{"unknown property", queue(`"LockDuraton":"PT1M"`), []string{"f.json:1:", "UserConfig.Namespaces[0].Queues[0].Properties.LockDuraton", `unknown property "LockDuraton"`, "LockDuration"}},
		{"topic has no LockDuration", ns(`"Queues":[],"Topics":[{"Name":"t","Properties":{"LockDuration":"PT1M"},"Subscriptions":[]}]`), []string{"Topics[0].Properties.LockDuration", "unknown property"}},
		{"bad duration", queue(`"LockDuration":"1 minute"`), []string{"Queues[0].Properties.LockDuration", "not an ISO 8601 duration"}},
		{"lock too long", queue(`"LockDuration":"PT10M"`), []string{"Queues[0].Properties", "5"}},
		{"bool as string", queue(`"RequiresSession":"true"`), []string{"Properties.RequiresSession", "want true or false"}},
		{"MaxDeliveryCount zero", queue(`"MaxDeliveryCount":0`), []string{"Properties.MaxDeliveryCount", "at least 1"}},
		{"MaxDeliveryCount fraction", queue(`"MaxDeliveryCount":2.5`), []string{"Properties.MaxDeliveryCount", "whole number"}},
		{"repeated property", queue(`"LockDuration":"PT1M","lockduration":"PT2M"`), []string{"Properties.LockDuration", "given twice"}},
		{"forward target name", queue(`"ForwardTo":"sb://x/q"`), []string{"Properties.ForwardTo", "not a queue or topic name"}},
		{"queue forwards to itself", queue(`"ForwardTo":"Q"`), []string{"Properties.ForwardTo", "itself"}},
		{"two namespaces", `{"UserConfig":{"Namespaces":[{"Name":"a","Queues":[],"Topics":[]},{"Name":"b","Queues":[],"Topics":[]}]}}`, []string{"UserConfig.Namespaces[1]", "2 namespaces", "serves one"}},
		{"no namespace", `{"UserConfig":{"Namespaces":[]}}`, []string{"UserConfig.Namespaces", "no namespace"}},
		{"no UserConfig", `{"Namespaces":[]}`, []string{`unknown property "Namespaces"`}},
		{"queue twice", ns(`"Queues":[{"Name":"q"},{"Name":"Q"}],"Topics":[]`), []string{"Queues[1].Name", "declared twice", "Queues[0]"}},
		{"queue and topic", ns(`"Queues":[{"Name":"x"}],"Topics":[{"Name":"x","Subscriptions":[]}]`), []string{"Topics[0].Name", "declared twice"}},
		{"bad name", ns(`"Queues":[{"Name":"-q"}],"Topics":[]`), []string{"Queues[0].Name", "start and end"}},
		{"FilterType SqlFilter", rule(`"FilterType":"SqlFilter","SqlFilter":{"SqlExpression":"1=1"}`), []string{"Rules[0].Properties.FilterType", `"SqlFilter"`, `"Sql"`}},
		{"SQL does not compile", rule(`"FilterType":"Sql","SqlFilter":{"SqlExpression":"a = = 1"}`), []string{"Rules[0]", "not valid"}},
		{"empty correlation", rule(`"FilterType":"Correlation","CorrelationFilter":{}`), []string{"Rules[0]", "sets no property"}},
		{"correlation beside sql", rule(`"FilterType":"Sql","CorrelationFilter":{"Label":"x"},"SqlFilter":{"SqlExpression":"1=1"}`), []string{"Properties.CorrelationFilter", "must be empty"}},
		{"action does not compile", rule(`"FilterType":"Sql","SqlFilter":{"SqlExpression":"1=1"},"Action":{"SqlExpression":"SET"}`), []string{"Rules[0]", "action"}},
		{"correlation value", rule(`"FilterType":"Correlation","CorrelationFilter":{"Properties":{"a":[1]}}`), []string{"CorrelationFilter.Properties.a", "string, number or boolean"}},
		{"subscription to own topic", ns(`"Queues":[],"Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Properties":{"ForwardTo":"t"}}]}]`), []string{"Subscriptions[0].Properties.ForwardTo", "own topic"}},
		{"logging type", `{"UserConfig":{"Namespaces":[{"Name":"a","Queues":[],"Topics":[]}],"Logging":{"Type":"Syslog"}}}`, []string{"UserConfig.Logging.Type", "Syslog"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nsconfig.Parse("f.json", []byte(tc.doc))
			wantErrors(t, "Parse", err, tc.want)
		})
	}
}

// wantErrors fails unless err, returned by op (Parse, Apply), is nsconfig.Errors whose text
// holds each of want.
func wantErrors(t *testing.T, op string, err error, want []string) {
	t.Helper()
	var errs nsconfig.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("%s = %v; want nsconfig.Errors", op, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s error %q does not contain %q", op, err, w)
		}
	}
}

// TestParseCommentsAndTrailingCommas reads // and /* */ comments (a URL in a string stays whole)
// and trailing commas, and places errors on the lines of the file as written.
func TestParseCommentsAndTrailingCommas(t *testing.T) {
	doc := `// the emulator's sample has comments
{
  /* block */ "UserConfig": {
    "Namespaces": [
      {
        "Name": "sbemulatorns", // trailing comment
        "Queues": [ { "Name": "a//b", }, ],
        "Topics": [],
      },
    ],
  },
}`
	if _, err := nsconfig.Parse("c.json", []byte(doc)); err == nil || !strings.Contains(err.Error(), "c.json:7:") || !strings.Contains(err.Error(), "Queues[0].Name") {
		t.Fatalf("Parse = %v; want the name a//b refused at line 7 (a comment marker inside a string is text)", err)
	}
	fixed := strings.Replace(doc, "a//b", "a-b", 1)
	f, err := nsconfig.Parse("c.json", []byte(fixed))
	if err != nil || f.Queues[0].Name != "a-b" {
		t.Fatalf("Parse = %+v, %v", f, err)
	}
}

// FuzzParse: Parse never panics, and what it accepts survives Marshal and Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add(readSample(f))
	f.Add([]byte(`{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"LockDuration":"PT1M30.5S","ForwardTo":"r"}},{"Name":"r"}],"Topics":[]}]}}`))
	f.Add([]byte(`{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"c","Properties":{"FilterType":"Correlation","CorrelationFilter":{"Properties":{"a":1,"b":1.5,"c":"x","d":false}}}}]}]}]}]} // c`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		file, err := nsconfig.Parse("fuzz.json", doc)
		if err != nil {
			return
		}
		out, err := nsconfig.Marshal(file)
		if err != nil {
			t.Fatalf("Marshal of a parsed file: %v", err)
		}
		again, err := nsconfig.Parse("again.json", out)
		if err != nil {
			t.Fatalf("Parse(Marshal(Parse(doc))) = %v\n%s", err, out)
		}
		if out2, _ := nsconfig.Marshal(again); string(out2) != string(out) {
			t.Fatalf("Marshal is not stable:\n%s\n---\n%s", out, out2)
		}
	})
}
