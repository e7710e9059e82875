package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sbgate/sbgate/broker"
)

func TestParsePropertyValue(t *testing.T) {
	date := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	tests := []struct {
		in   string
		want any
	}{
		{`"quoted"`, "quoted"},
		{`"a b"`, "a b"},
		{`"12345,ABC"`, "12345,ABC"},
		{`""`, ""},
		{`"say \"hi\""`, `say "hi"`},
		{`"back\\slash"`, `back\slash`},
		{`"lone \ backslash"`, `lone \ backslash`},
		{`"Fri, 04 Mar 2011 08:49:37 GMT"`, date("2011-03-04T08:49:37Z")},
		{`"Tue, 02 Jan 2024 03:04:05 GMT+0000"`, date("2024-01-02T03:04:05Z")}, // azure-sb
		{`"Tue, 02 Jan 2024 03:04:05 GMT+0100"`, date("2024-01-02T02:04:05Z")},
		{`"Tue, 02 Jan 2024 03:04:05 +0000"`, date("2024-01-02T03:04:05Z")},
		// RFC 822 zone names: the service itself once answered in PST (protocol.md §2.11).
		{`"Wed, 07 Mar 2012 14:27:00 PST"`, date("2012-03-07T22:27:00Z")},
		{`"Wed, 07 Mar 2012 14:27:00 EDT"`, date("2012-03-07T18:27:00Z")},
		{`"Wed, 07 Mar 2012 14:27:00 UTC"`, date("2012-03-07T14:27:00Z")},
		{`"2024-01-02T03:04:05Z"`, date("2024-01-02T03:04:05Z")},
		{`"2024-01-02T03:04:05.5+02:00"`, date("2024-01-02T01:04:05.5Z")},
		{`"2024-01-02T03:04:05"`, date("2024-01-02T03:04:05Z")},
		{`"2024"`, "2024"},
		{`"1"`, "1"},
		{`"true"`, "true"},
		{`"Tue, 02 Jan 2024"`, "Tue, 02 Jan 2024"},
		{`true`, true},
		{`false`, false},
		{`True`, "True"},
		{`1`, int64(1)},
		{`-42`, int64(-42)},
		{`007`, int64(7)},
		{`-9223372036854775808`, int64(math.MinInt64)},
		{`9223372036854775808`, 9223372036854775808.0},
		{`2.5`, 2.5},
		{`-0.5`, -0.5},
		{`1e3`, 1000.0},
		{`1.5E-2`, 0.015},
		{`1e400`, "1e400"},
		{`.5`, ".5"},
		{`1.`, "1."},
		{`+1`, "+1"},
		{`0x10`, "0x10"},
		{`NaN`, "NaN"},
		{`Infinity`, "Infinity"},
		{`High`, "High"},
		{`12345,ABC`, "12345,ABC"},
		{` 5 `, int64(5)},
		{`"unterminated`, `"unterminated`},
		{`"`, `"`},
		{``, ""},
	}
	for _, tc := range tests {
		got := parsePropertyValue(tc.in)
		if tw, ok := tc.want.(time.Time); ok {
			if g, ok := got.(time.Time); !ok || !g.Equal(tw) {
				t.Errorf("parsePropertyValue(%q) = %#v; want %v", tc.in, got, tw)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("parsePropertyValue(%q) = %#v; want %#v", tc.in, got, tc.want)
		}
	}
}

func TestFormatPropertyValue(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{"x", `"x"`},
		{"", `""`},
		{`a"b`, `"a\"b"`},
		{`a\b`, `"a\\b"`},
		{"12345,ABC", `"12345,ABC"`},
		{time.Date(2011, 3, 4, 8, 49, 37, 900, time.UTC), `"Fri, 04 Mar 2011 08:49:37 GMT"`},
		{time.Date(2024, 1, 2, 4, 4, 5, 0, time.FixedZone("CET", 3600)), `"Tue, 02 Jan 2024 03:04:05 GMT"`},
		{true, "true"},
		{false, "false"},
		{int64(1), "1"},
		{int64(-9), "-9"},
		{2.5, "2.5"},
		{3.0, "3.0"},
		{-0.25, "-0.25"},
		{1e21, "1000000000000000000000.0"},
		{1e-7, "0.0000001"},
	}
	for _, tc := range tests {
		if got := formatPropertyValue(tc.in); got != tc.want {
			t.Errorf("formatPropertyValue(%#v) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// sameValue compares property values as the wire keeps them: dates to the second.
func sameValue(a, b any) bool {
	ta, okA := a.(time.Time)
	tb, okB := b.(time.Time)
	if okA || okB {
		return okA && okB && ta.Truncate(time.Second).Equal(tb.Truncate(time.Second))
	}
	return a == b
}

func TestPropertyValueRoundTrip(t *testing.T) {
	for _, v := range []any{
		"plain", "", " padded ", `"already quoted"`, `a\"b`, `\`, "true", "1", "2.5", "High", "ünïcödé", "a,b;c=d",
		true, false, int64(0), int64(math.MaxInt64), int64(math.MinInt64),
		0.0, 2.5, -1.75, 1e21, 1e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, 3.0,
		time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	} {
		wire := formatPropertyValue(v)
		if got := parsePropertyValue(wire); !sameValue(got, v) {
			t.Errorf("parsePropertyValue(formatPropertyValue(%#v) = %q) = %#v; want the value back", v, wire, got)
		}
	}
	// A string that reads as a date comes back as a date: the wire form cannot tell them apart
	// (protocol.md §2.11).
	if got := parsePropertyValue(formatPropertyValue("Fri, 04 Mar 2011 08:49:37 GMT")); reflect.TypeOf(got) != reflect.TypeOf(time.Time{}) {
		t.Errorf("a date-like string round-trips as %T; the wire makes it a date", got)
	}
}

func FuzzPropertyValue(f *testing.F) {
	for _, s := range []string{`"x"`, `"a\"b"`, `true`, `1`, `2.5`, `1e5`, `High`, `"Fri, 04 Mar 2011 08:49:37 GMT"`,
		`"Tue, 02 Jan 2024 03:04:05 GMT+0000"`, `"2024-01-02T03:04:05.123Z"`, `"\\"`, `-0`, `99999999999999999999`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v := parsePropertyValue(in)
		switch v.(type) {
		case string, bool, int64, float64, time.Time:
		default:
			t.Fatalf("parsePropertyValue(%q) = %T", in, v)
		}
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			t.Fatalf("parsePropertyValue(%q) = %v; want a finite number", in, f)
		}
		// What the gateway writes back reads as the same value.
		wire := formatPropertyValue(v)
		if s, ok := v.(string); ok && !strings.HasPrefix(strings.TrimSpace(in), `"`) {
			if _, isDate := parseDate(s); isDate && looksLikeDate(s) {
				// An unquoted date text is a string (protocol.md, parsing rule 3), but the
				// protocol writes strings and dates alike in quotes, so it reads back as the
				// date it spells: the wire cannot carry it as a string. The service has the
				// same ambiguity.
				return
			}
		}
		if again := parsePropertyValue(wire); !sameValue(again, v) {
			t.Fatalf("parsePropertyValue(%q) = %#v, written as %q, read back as %#v", in, v, wire, again)
		}
	})
}

func TestParseBrokerProperties(t *testing.T) {
	sched := time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC)
	tests := []struct {
		in        string
		batch     bool
		want      broker.Message
		wantError string // substring of the error message; "" for success
	}{
		{``, false, broker.Message{}, ""},
		{`   `, false, broker.Message{}, ""},
		{`{}`, false, broker.Message{}, ""},
		{`null`, false, broker.Message{}, ""},
		{`{"MessageId":"m","CorrelationId":"c","SessionId":"s","ReplyToSessionId":"r","Label":"l","To":"t","ReplyTo":"rt","PartitionKey":"s"}`, false,
			broker.Message{MessageID: "m", CorrelationID: "c", SessionID: "s", HasSessionID: true, ReplyToSessionID: "r", Label: "l", To: "t", ReplyTo: "rt", PartitionKey: "s"}, ""},
		// "SessionId":"" names the session ""; null names none.
		{`{"SessionId":""}`, false, broker.Message{HasSessionID: true}, ""},
		{`{"SessionId":null}`, false, broker.Message{}, ""},
		{`{"messageid":"m","LABEL":"l"}`, false, broker.Message{MessageID: "m", Label: "l"}, ""},
		{`{"Label":null}`, false, broker.Message{}, ""},
		{`{"Label":5}`, false, broker.Message{Label: "5"}, ""},
		{`{"Label":"\u00e9\n"}`, false, broker.Message{Label: "é\n"}, ""},
		// Numbers as numbers or as strings (legacy Python).
		{`{"TimeToLive":10}`, false, broker.Message{TimeToLive: 10 * time.Second}, ""},
		{`{"TimeToLive":"10"}`, false, broker.Message{TimeToLive: 10 * time.Second}, ""},
		{`{"TimeToLive":10.5}`, false, broker.Message{TimeToLive: 10500 * time.Millisecond}, ""},
		{`{"TimeToLive":"1e2"}`, false, broker.Message{TimeToLive: 100 * time.Second}, ""},
		{`{"TimeToLive":1e-12}`, false, broker.Message{TimeToLive: time.Nanosecond}, ""},
		{`{"TimeToLive":922337203685.47754}`, false, broker.Message{TimeToLive: broker.Infinite}, ""},
		{`{"TimeToLive":1e300}`, false, broker.Message{TimeToLive: broker.Infinite}, ""},
		{`{"TimeToLive":0}`, false, broker.Message{}, "TimeToLive must be a positive number"},
		{`{"TimeToLive":-1}`, false, broker.Message{}, "TimeToLive must be a positive number"},
		{`{"TimeToLive":"abc"}`, false, broker.Message{}, "TimeToLive must be a positive number"},
		{`{"TimeToLive":"NaN"}`, false, broker.Message{}, "TimeToLive must be a positive number"},
		{`{"TimeToLive":true}`, false, broker.Message{}, "TimeToLive must be a positive number"},
		{`{"TimeToLive":null}`, false, broker.Message{}, "TimeToLive must be a number of seconds"},
		{`{"TimeToLive":[1]}`, false, broker.Message{}, "TimeToLive must be a number of seconds"},
		// .NET TimeSpans.
		{`{"TimeToLiveTimeSpan":"0.00:00:40"}`, false, broker.Message{TimeToLive: 40 * time.Second}, ""},
		{`{"TimeToLiveTimeSpan":"00:01:00"}`, false, broker.Message{TimeToLive: time.Minute}, ""},
		{`{"TimeToLiveTimeSpan":"1.02:03:04.5"}`, false, broker.Message{TimeToLive: 26*time.Hour + 3*time.Minute + 4500*time.Millisecond}, ""},
		{`{"TimeToLiveTimeSpan":"00:00:00.0000001"}`, false, broker.Message{TimeToLive: 100 * time.Nanosecond}, ""},
		{`{"TimeToLiveTimeSpan":"10675199.02:48:05.4775807"}`, false, broker.Message{TimeToLive: broker.Infinite}, ""},
		{`{"TimeToLiveTimeSpan":"24:00:00"}`, false, broker.Message{}, "TimeToLiveTimeSpan must be a positive"},
		{`{"TimeToLiveTimeSpan":"00:00:00"}`, false, broker.Message{}, "TimeToLiveTimeSpan must be a positive"},
		{`{"TimeToLiveTimeSpan":"40"}`, false, broker.Message{}, "TimeToLiveTimeSpan must be a positive"},
		{`{"TimeToLiveTimeSpan":40}`, false, broker.Message{}, "TimeToLiveTimeSpan must be a positive"},
		{`{"TimeToLiveTimeSpan":{}}`, false, broker.Message{}, "TimeToLiveTimeSpan must be a string"},
		// Dates: RFC 1123 as the service writes them, ISO 8601 as some clients do.
		{`{"ScheduledEnqueueTimeUtc":"Sun, 06 Nov 1994 08:49:37 GMT"}`, false, broker.Message{ScheduledEnqueueTime: sched}, ""},
		{`{"ScheduledEnqueueTimeUtc":"1994-11-06T08:49:37Z"}`, false, broker.Message{ScheduledEnqueueTime: sched}, ""},
		{`{"ScheduledEnqueueTimeUtc":"Sun, 06 Nov 1994 00:49:37 PST"}`, false, broker.Message{ScheduledEnqueueTime: sched}, ""},
		{`{"ScheduledEnqueueTimeUtc":"1994-11-06T09:49:37+01:00"}`, false, broker.Message{ScheduledEnqueueTime: sched}, ""},
		{`{"ScheduledEnqueueTimeUtc":"1994-11-06T08:49:37"}`, false, broker.Message{ScheduledEnqueueTime: sched}, ""},
		{`{"ScheduledEnqueueTimeUtc":"1994-11-06T08:49:37.1234567"}`, false, broker.Message{ScheduledEnqueueTime: sched.Add(123456700)}, ""},
		{`{"ScheduledEnqueueTimeUtc":""}`, false, broker.Message{}, ""},
		{`{"ScheduledEnqueueTimeUtc":"tomorrow"}`, false, broker.Message{}, "'tomorrow' is not an RFC 1123 or ISO 8601 date"},
		{`{"ScheduledEnqueueTimeUtc":5}`, false, broker.Message{}, "is not an RFC 1123 or ISO 8601 date"},
		{`{"ScheduledEnqueueTimeUtc":{}}`, false, broker.Message{}, "must be a date string"},
		// ContentType only in batches.
		{`{"ContentType":"application/json"}`, false, broker.Message{}, ""},
		{`{"ContentType":"application/json"}`, true, broker.Message{ContentType: "application/json"}, ""},
		{`{"ContentType":[]}`, true, broker.Message{}, "ContentType must be a string"},
		{`{"ContentType":"text/plain\u0000"}`, true, broker.Message{}, "ContentType contains control characters"},
		{`{"ContentType":"text/plain\r\nX: y"}`, true, broker.Message{}, "ContentType contains control characters"},
		{`{"ContentType":"text/plain;\tcharset=utf-8"}`, true, broker.Message{ContentType: "text/plain;\tcharset=utf-8"}, ""},
		// Read-only and unknown keys are ignored, whatever their type.
		{`{"DeliveryCount":"x","LockToken":{},"SequenceNumber":[1],"ForcePersistence":true,"ExpiresAtUtc":1,"EnqueuedSequenceNumber":"x","Whatever":null}`, false, broker.Message{}, ""},
		// ViaPartitionKey is kept, to be returned as sent.
		{`{"ViaPartitionKey":"v"}`, false, broker.Message{ViaPartitionKey: "v"}, ""},
		// Wrong types and malformed JSON.
		{`{"Label":{}}`, false, broker.Message{}, "BrokerProperties.Label must be a string."},
		{`{"MessageId":["m"]}`, false, broker.Message{}, "BrokerProperties.MessageId must be a string."},
		{`[]`, false, broker.Message{}, "not a valid JSON object"},
		{`"x"`, false, broker.Message{}, "not a valid JSON object"},
		{`5`, false, broker.Message{}, "not a valid JSON object"},
		{`{`, false, broker.Message{}, "not a valid JSON object"},
		{`{"Label":"l",}`, false, broker.Message{}, "not a valid JSON object"},
		{`{} {}`, false, broker.Message{}, "not a valid JSON object"},
		{`{} x`, false, broker.Message{}, "not a valid JSON object"},
		{`{"Label":"l"}}`, false, broker.Message{}, "not a valid JSON object"},
		{`{"Label":"l"}]`, false, broker.Message{}, "not a valid JSON object"},
		// A property given twice, in any casing, is ambiguous.
		{`{"MessageId":"a","messageid":"b"}`, false, broker.Message{}, "more than once"},
		{`{"TimeToLive":10,"TimeToLiveTimeSpan":"0.00:00:40"}`, false, broker.Message{}, "more than once"},
	}
	for _, tc := range tests {
		var got broker.Message
		err := parseBrokerProperties([]byte(tc.in), &got, tc.batch)
		switch {
		case tc.wantError == "" && err != nil:
			t.Errorf("parseBrokerProperties(%q) = %v; want no error", tc.in, err)
		case tc.wantError != "" && err == nil:
			t.Errorf("parseBrokerProperties(%q) = %+v; want an error with %q", tc.in, got, tc.wantError)
		case tc.wantError != "":
			if !strings.Contains(err.Error(), tc.wantError) || !errors.Is(err, broker.ErrBadRequest) {
				t.Errorf("parseBrokerProperties(%q) = %v; want a bad request with %q", tc.in, err, tc.wantError)
			}
		case !got.ScheduledEnqueueTime.Equal(tc.want.ScheduledEnqueueTime):
			t.Errorf("parseBrokerProperties(%q).ScheduledEnqueueTime = %v; want %v", tc.in, got.ScheduledEnqueueTime, tc.want.ScheduledEnqueueTime)
		default:
			got.ScheduledEnqueueTime, tc.want.ScheduledEnqueueTime = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseBrokerProperties(%q) = %+v; want %+v", tc.in, got, tc.want)
			}
		}
	}
}

func TestParseTimeSpan(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"00:00:01", time.Second, true},
		{"0:0:1", time.Second, true},
		{" 01:00:00 ", time.Hour, true},
		{"2.00:00:00", 48 * time.Hour, true},
		{"23:59:59.9999999", 24*time.Hour - 100*time.Nanosecond, true},
		{"00:60:00", 0, false},
		{"00:00:60", 0, false},
		{"1:2", 0, false},
		{"-00:00:01", 0, false},
		{"00:00:01.12345678", 0, false},
		{"P1D", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		got, err := parseTimeSpan(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseTimeSpan(%q) = %v, %v; want %v, ok %t", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestUserPropertiesFromHeaders(t *testing.T) {
	h := http.Header{}
	for k, v := range map[string]string{
		// Set aside on every request: the protocol's, the connection's, and what clients add.
		"Authorization": "SharedAccessSignature x", "Servicebusauthorization": "x", "Brokerproperties": "{}",
		"Content-Type": "text/plain", "User-Agent": "ua", "Accept-Charset": "UTF-8", "X-Ms-Client-Request-Id": "1",
		"X-Ms-Retrypolicy": "NoRetry", "Traceparent": "00-x", "Expect": "100-continue", "Proxy-Authorization": "x",
		"Content-Encoding": "identity",
		// Proxies' headers: set aside only from a trusted proxy.
		"X-Forwarded-For": "1.2.3.4", "Forwarded": "proto=https", "Via": "1.1 lb",
		// User properties, however much they look like HTTP headers.
		"Origin": `"web"`, "Date": `"Sun, 01 Mar 2026 12:00:00 GMT"`, "Referer": `"r"`, "Pragma": `"p"`,
		"Cache-Control": `"c"`, "If-Match": `"*"`, "Cookie": `"k"`, "Sec-Fetch-Mode": `"cors"`,
		"Priority": `"High"`, "Pint": "1", "Myprop": "true",
	} {
		h.Set(k, v)
	}
	props := func(fromProxy bool) map[string]any {
		t.Helper()
		props, err := userPropertiesFromHeaders(h, fromProxy)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]any{}
		for _, p := range props {
			got[p.Name] = p.Value
		}
		return got
	}
	want := map[string]any{"priority": "High", "pint": int64(1), "myprop": true, "origin": "web",
		"date": time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "referer": "r", "pragma": "p", "cache-control": "c",
		"if-match": "*", "cookie": "k", "sec-fetch-mode": "cors"}
	if got := props(true); !reflect.DeepEqual(got, want) {
		t.Errorf("userPropertiesFromHeaders from a trusted proxy = %v; want %v", got, want)
	}
	want["x-forwarded-for"], want["forwarded"], want["via"] = "1.2.3.4", "proto=https", "1.1 lb"
	if got := props(false); !reflect.DeepEqual(got, want) {
		t.Errorf("userPropertiesFromHeaders from a client = %v; want %v", got, want)
	}
	h.Add("Pint", "2")
	if _, err := userPropertiesFromHeaders(h, false); err == nil || !strings.Contains(err.Error(), "given 2 times") {
		t.Errorf("userPropertiesFromHeaders with a repeated header = %v; want an error", err)
	}
	for header, wantErr := range map[string]string{
		"Location":         "'Location' cannot be a user property name",
		"DeadLetterReason": "'Deadletterreason' cannot be a user property name",
		"Content-Encoding": "Content-Encoding 'gzip' is not supported",
	} {
		h := http.Header{}
		h.Set(header, "gzip")
		if _, err := userPropertiesFromHeaders(h, false); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("userPropertiesFromHeaders with %s = %v; want %q", header, err, wantErr)
		}
	}
}

func TestHeaderSafe(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"", true}, {"plain", true}, {"a\tb", true}, {"héllo ✓", true}, {`"quoted" \ back`, true},
		{"a\nb", false}, {"a\rb", false}, {"\x00", false}, {"\x01", false}, {"\x1f", false}, {"\x7f", false},
	} {
		if got := headerSafe(tc.s); got != tc.want {
			t.Errorf("headerSafe(%q) = %t; want %t", tc.s, got, tc.want)
		}
	}
}

func TestValidPropertyName(t *testing.T) {
	for _, tc := range []struct {
		name           string
		want, viaProxy bool
	}{
		{"Priority", true, true}, {"order-time", true, true}, {"a.b_c~d!", true, true},
		{"origin", true, true}, {"Date", true, true}, {"referer", true, true}, {"Cache-Control", true, true},
		{"Via", true, false}, {"forwarded", true, false}, {"X-Forwarded-Proto", true, false},
		{"", false, false}, {"a b", false, false}, {"a:b", false, false}, {"a\tb", false, false}, {"é", false, false},
		{"a\x7f", false, false}, {"Content-Type", false, false}, {"content-length", false, false},
		{"BrokerProperties", false, false}, {"Location", false, false}, {"x-ms-anything", false, false},
		{"Transfer-Encoding", false, false}, {"User-Agent", false, false}, {"Content-Encoding", false, false},
		{"DeadLetterReason", false, false},
	} {
		if got := validPropertyName(tc.name, false); got != tc.want {
			t.Errorf("validPropertyName(%q, false) = %t; want %t", tc.name, got, tc.want)
		}
		if got := validPropertyName(tc.name, true); got != tc.viaProxy {
			t.Errorf("validPropertyName(%q, true) = %t; want %t", tc.name, got, tc.viaProxy)
		}
	}
}

func FuzzParseBrokerProperties(f *testing.F) {
	for _, s := range []string{`{"MessageId":"m","TimeToLive":"10"}`, `{"TimeToLiveTimeSpan":"1.02:03:04.5"}`,
		`{"ScheduledEnqueueTimeUtc":"Sun, 06 Nov 1994 08:49:37 GMT"}`, `{"Label":5}`, `null`, `{}}`, `{"a":1} `,
		`{"TimeToLive":1e308}`, `{"messageid":"a","MessageId":"b"}`, `{"ContentType":"x","SessionId":"s","PartitionKey":"p"}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, batch bool) {
		var m broker.Message
		err := parseBrokerProperties(raw, &m, batch)
		if err != nil {
			var se *broker.Error
			if !errors.As(err, &se) || se.Code != broker.CodeBadRequest || se.Message == "" {
				t.Fatalf("parseBrokerProperties(%q) = %#v; want a bad request with a message", raw, err)
			}
			return
		}
		if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && !json.Valid(trimmed) {
			t.Fatalf("parseBrokerProperties(%q) accepted invalid JSON", raw)
		}
		if m.TimeToLive < 0 {
			t.Fatalf("parseBrokerProperties(%q): TimeToLive %v", raw, m.TimeToLive)
		}
		if !batch && m.ContentType != "" {
			t.Fatalf("parseBrokerProperties(%q): ContentType %q outside a batch", raw, m.ContentType)
		}
		if !headerSafe(m.ContentType) {
			t.Fatalf("parseBrokerProperties(%q): ContentType %q cannot be sent as a header", raw, m.ContentType)
		}
		// The same input always gives the same message.
		for range 3 {
			var again broker.Message
			if err := parseBrokerProperties(raw, &again, batch); err != nil || !reflect.DeepEqual(again, m) {
				t.Fatalf("parseBrokerProperties(%q) gave %+v, then %+v, %v", raw, m, again, err)
			}
		}
	})
}

// TestFormatBrokerPropertiesMatchesJSONEncoding: the hand-written BrokerProperties header is
// byte for byte what encoding/json writes for the same keys (sorted, HTML-escaped), for every
// property set or not and strings with every kind of character that needs escaping.
func TestFormatBrokerPropertiesMatchesJSONEncoding(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tricky := "q\"b\\s/<a>&\x00\x01\b\f\n\r\t\u2028\u2029é😀\x7f"
	full := broker.Message{
		MessageID: "id " + tricky, CorrelationID: tricky, SessionID: "s", ReplyToSessionID: "rs", Label: tricky,
		To: "to", ReplyTo: "rt", PartitionKey: "s", TimeToLive: 90 * time.Second, SequenceNumber: 1 << 40,
		EnqueuedTime: now, DeliveryCount: 3, LockToken: uuid.MustParse("acccce0e-7596-4e0c-b216-2d18638ac0dd"),
		LockedUntil: now.Add(time.Minute), ScheduledEnqueueTime: now.Add(time.Hour), DeadLetterSource: "src",
		State: broker.StateDeferred,
	}
	emptySession := broker.Message{MessageID: "in the session \"\"", EnqueuedTime: now, HasSessionID: true}
	for _, m := range []broker.Message{{MessageID: "plain", EnqueuedTime: now, TimeToLive: broker.Infinite}, full, emptySession} {
		want := map[string]any{
			"DeliveryCount": m.DeliveryCount, "EnqueuedSequenceNumber": 0, "EnqueuedTimeUtc": m.EnqueuedTime.Format(rfc1123),
			"MessageId": m.MessageID, "SequenceNumber": m.SequenceNumber, "State": stateName(&m, now), "TimeToLive": ttlNumber(m.TimeToLive),
		}
		for k, v := range map[string]string{"CorrelationId": m.CorrelationID, "ReplyToSessionId": m.ReplyToSessionID,
			"Label": m.Label, "To": m.To, "ReplyTo": m.ReplyTo, "PartitionKey": m.PartitionKey, "DeadLetterSource": m.DeadLetterSource} {
			if v != "" {
				want[k] = v
			}
		}
		if m.InSession() {
			want["SessionId"] = m.SessionID // "" too: it is a session
		}
		if !m.ScheduledEnqueueTime.IsZero() {
			want["ScheduledEnqueueTimeUtc"] = m.ScheduledEnqueueTime.Format(rfc1123)
		}
		if !m.LockedUntil.IsZero() {
			want["LockToken"], want["LockedUntilUtc"] = m.LockToken.String(), m.LockedUntil.Format(rfc1123)
		}
		wantJSON, _ := json.Marshal(want)
		if got := formatBrokerProperties(&m, now); string(got) != string(wantJSON) {
			t.Errorf("formatBrokerProperties =\n%s\nwant\n%s", got, wantJSON)
		}
	}
}
