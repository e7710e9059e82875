package rest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/textproto"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// These fuzz targets cover the parsers of the send path: BrokerProperties (see also
// FuzzParseBrokerProperties), user-property headers and batch JSON. `make fuzz` (part of
// `make test`) runs each for a few seconds; the seeds and whatever the fuzzer once found are
// under testdata/fuzz/FuzzX/ and run with every `go test`.

// badRequestOf fails unless err is a bad request with a short message, which is all the
// parsers of client input may answer.
func badRequestOf(t *testing.T, what string, err error) {
	t.Helper()
	var se *broker.Error
	if !errors.As(err, &se) || se.Code != broker.CodeBadRequest || se.Message == "" {
		t.Fatalf("%s error = %#v; want a bad request with a message", what, err)
	}
	if len(se.Message) > 1024 {
		t.Fatalf("%s: a message of %d bytes echoes too much input: %.200s…", what, len(se.Message), se.Message)
	}
}

// senderFields is what a sender sets through BrokerProperties and a receiver reads back, in
// the form the wire carries: TimeToLive as its JSON number and the schedule at whole seconds.
type senderFields struct {
	MessageID, CorrelationID, SessionID, ReplyToSessionID, Label, To, ReplyTo, PartitionKey string
	TTL                                                                                     string
	Scheduled                                                                               time.Time
}

func senderFieldsOf(m *broker.Message) senderFields {
	return senderFields{m.MessageID, m.CorrelationID, m.SessionID, m.ReplyToSessionID, m.Label, m.To, m.ReplyTo,
		m.PartitionKey, string(ttlNumber(m.TimeToLive)), m.ScheduledEnqueueTime.Truncate(time.Second)}
}

// FuzzBrokerPropertiesRoundTrip: what a sender set is what a receiver reads. Whatever
// parseBrokerProperties accepts, formatBrokerProperties writes as a header that parses back
// to the same sender fields.
func FuzzBrokerPropertiesRoundTrip(f *testing.F) {
	for _, s := range []string{`{"MessageId":"m","TimeToLive":"10","Label":"l\u2028<&>"}`,
		`{"TimeToLiveTimeSpan":"1.02:03:04.5","CorrelationId":"\u0000\"\\"}`,
		`{"ScheduledEnqueueTimeUtc":"2024-01-02T03:04:05.678Z","SessionId":"s","PartitionKey":"s"}`,
		`{"TimeToLive":123456789.123456789}`, `{"To":"t","ReplyTo":"r","ReplyToSessionId":"x"}`} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m broker.Message
		if err := parseBrokerProperties(raw, &m, false); err != nil {
			badRequestOf(t, "parseBrokerProperties", err)
			return
		}
		m.EnqueuedTime, m.SequenceNumber = now, 1
		wire := formatBrokerProperties(&m, now)
		if !json.Valid(wire) {
			t.Fatalf("formatBrokerProperties wrote invalid JSON: %s", wire)
		}
		var back broker.Message
		if err := parseBrokerProperties(wire, &back, false); err != nil {
			t.Fatalf("parseBrokerProperties(formatBrokerProperties(...)) = %v\n%s", err, wire)
		}
		if got, want := senderFieldsOf(&back), senderFieldsOf(&m); got != want {
			t.Fatalf("round trip of %q through %s:\n got %+v\nwant %+v", raw, wire, got, want)
		}
	})
}

// validHeader reports whether a server would hand name: value to a handler at all: a token
// name and a value without control characters other than tab (net/http refuses the rest).
func validHeader(name, value string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return headerSafe(value) && value == strings.TrimSpace(value)
}

// FuzzUserPropertyHeaders: every non-reserved header becomes a typed user property, and the
// header the gateway writes for it on receive reads back as the same value.
func FuzzUserPropertyHeaders(f *testing.F) {
	f.Add("Priority", "1", "Region", `"eu"`)
	f.Add("X-Custom", "true", "When", `"Fri, 04 Mar 2011 08:49:37 GMT"`)
	f.Add("Amount", "2.5e3", "Quote", `"say \"hi\""`)
	f.Add("Content-Type", "text/plain", "x-ms-foo", "1")
	f.Add("a", "High", "A", "low")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		if !validHeader(n1, v1) || !validHeader(n2, v2) {
			return
		}
		h := http.Header{}
		h.Add(textproto.CanonicalMIMEHeaderKey(n1), v1)
		h.Add(textproto.CanonicalMIMEHeaderKey(n2), v2)
		props, err := userPropertiesFromHeaders(h, false)
		if err != nil {
			badRequestOf(t, "userPropertiesFromHeaders", err)
			return
		}
		names := map[string]bool{}
		out := http.Header{}
		for _, p := range props {
			if p.Name != strings.ToLower(p.Name) || skippedHeader(p.Name, false) || names[p.Name] {
				t.Fatalf("property name %q: want lower case, not reserved, once (%+v)", p.Name, props)
			}
			names[p.Name] = true
			wire := formatPropertyValue(p.Value)
			if !headerSafe(wire) {
				t.Fatalf("property %s = %#v is written as %q, which is no header value", p.Name, p.Value, wire)
			}
			out.Set(p.Name, wire)
		}
		for name := range h {
			if l := strings.ToLower(name); !skippedHeader(l, false) && l != "content-encoding" && !names[l] {
				t.Fatalf("header %s was dropped (%+v)", name, props)
			}
		}
		back, err := userPropertiesFromHeaders(out, false)
		if err != nil || len(back) != len(props) {
			t.Fatalf("reading back %v: %+v, %v; want %+v", out, back, err, props)
		}
		for _, p := range back {
			i := slices.IndexFunc(props, func(q broker.Property) bool { return q.Name == p.Name })
			if i < 0 || !sameValue(p.Value, props[i].Value) {
				t.Fatalf("property %s read back as %#v; sent %+v", p.Name, p.Value, props)
			}
		}
	})
}

// FuzzParseBatch: a batch is refused with a bad request or every message in it is one a
// receiver can read, and writing the parsed messages out as a batch again gives the same
// messages.
func FuzzParseBatch(f *testing.F) {
	for _, s := range []string{
		`[{"Body":"a"},{"Body":"b","BrokerProperties":{"Label":"l","TimeToLive":10},"UserProperties":{"p":1,"q":"x","r":true,"s":2.5}}]`,
		`[{"BodyBase64":"AAEC","BrokerProperties":{"ContentType":"application/octet-stream","SessionId":"s"}}]`,
		`[{"Body":"x","UserProperties":{"A":1,"a":2}}]`,
		`[{"Body":"x","UserProperties":{"Content-Type":"x"}}]`,
		`[]`, `{}`, `[{"Body":null}]`, `[{"Body":"a","BodyBase64":"AA=="}]`, `[{"Body":"a"}] x`,
		`[{"Body":"a","BrokerProperties":"nope"}]`, `[{"Body":"a","UserProperties":{"p":"\n"}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := parseBatch(body, false)
		if err != nil {
			badRequestOf(t, "parseBatch", err)
			return
		}
		if len(msgs) == 0 || len(msgs) > maxBatchMessages {
			t.Fatalf("parseBatch accepted %d messages", len(msgs))
		}
		items := make([]map[string]any, len(msgs))
		for i := range msgs {
			m := &msgs[i]
			if m.Body == nil {
				t.Fatalf("message %d has a nil body", i+1)
			}
			if !headerSafe(m.ContentType) {
				t.Fatalf("message %d: content type %q cannot be sent as a header", i+1, m.ContentType)
			}
			names := map[string]bool{}
			user := map[string]any{}
			for _, p := range m.UserProperties {
				l := strings.ToLower(p.Name)
				if !validPropertyName(p.Name, false) || names[l] {
					t.Fatalf("message %d: property name %q is not a header name of its own (%+v)", i+1, p.Name, m.UserProperties)
				}
				names[l] = true
				if s, ok := p.Value.(string); ok && !headerSafe(s) {
					t.Fatalf("message %d: property %s = %q cannot be sent as a header", i+1, p.Name, s)
				}
				user[p.Name] = p.Value
				if x, ok := p.Value.(float64); ok {
					// Written so that it stays a double: 2.0, not 2.
					s := strconv.FormatFloat(x, 'g', -1, 64)
					if !strings.ContainsAny(s, ".eE") {
						s += ".0"
					}
					user[p.Name] = json.Number(s)
				}
			}
			bp := map[string]any{"MessageId": m.MessageID, "CorrelationId": m.CorrelationID,
				"ReplyToSessionId": m.ReplyToSessionID, "Label": m.Label, "To": m.To, "ReplyTo": m.ReplyTo,
				"PartitionKey": m.PartitionKey, "ContentType": m.ContentType}
			if m.InSession() {
				bp["SessionId"] = m.SessionID
			}
			if m.TimeToLive != 0 {
				bp["TimeToLive"] = ttlNumber(m.TimeToLive)
			}
			if !m.ScheduledEnqueueTime.IsZero() {
				bp["ScheduledEnqueueTimeUtc"] = m.ScheduledEnqueueTime.Format(time.RFC3339Nano)
			}
			items[i] = map[string]any{"BodyBase64": base64.StdEncoding.EncodeToString(m.Body),
				"BrokerProperties": bp, "UserProperties": user}
		}
		again, err := json.Marshal(items)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseBatch(again, false)
		if err != nil {
			t.Fatalf("parseBatch of the batch written back: %v\n%s", err, again)
		}
		for i := range msgs {
			a, b := msgs[i], back[i]
			byName := func(x, y broker.Property) int { return strings.Compare(x.Name, y.Name) }
			slices.SortFunc(a.UserProperties, byName)
			slices.SortFunc(b.UserProperties, byName)
			if string(ttlNumber(a.TimeToLive)) == string(ttlNumber(b.TimeToLive)) {
				b.TimeToLive = a.TimeToLive // the wire carries seconds as a double
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("message %d of %q written back as %s reads as\n%+v\nwant\n%+v", i+1, body, again, b, a)
			}
		}
	})
}
