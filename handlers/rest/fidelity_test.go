package rest_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/sbgate/sbgate/broker"
)

// restTypes are user properties of the types only AMQP senders give, with the header value
// and the extensions' JSON value REST shows for each.
var restTypes = []struct {
	name   string
	value  any
	header string
	json   any // json.Number for numbers (the tests decode with UseNumber)
}{
	{"binary", []byte{0, 1, 2, 0xff}, `"AAEC/w=="`, "AAEC/w=="},
	{"byte", uint8(255), "255", json.Number("255")},
	{"char", broker.Char('Z'), `"Z"`, "Z"},
	{"datetimeoffset", broker.DateTimeOffsetOf(time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC)), `"Fri, 04 Mar 2011 08:49:37 GMT"`, "Fri, 04 Mar 2011 08:49:37 GMT"},
	// 12.50 as the .NET SDK sends a decimal (Microsoft.Azure.Amqp's encoding).
	{"decimal", broker.Decimal128{0x0c, 0x3c, 14: 0x04, 15: 0xe2}, "12.50", json.Number("12.50")},
	{"decimal-nan", broker.Decimal32{0x7c}, `"NaN"`, "NaN"},
	{"float", float32(0.1), "0.1", json.Number("0.1")},
	{"float-whole", float32(2), "2.0", json.Number("2.0")},
	{"int", int32(math.MinInt32), "-2147483648", json.Number("-2147483648")},
	{"null", nil, "null", nil}, // an AMQP property present without a value
	{"sbyte", int8(-128), "-128", json.Number("-128")},
	{"short", int16(-300), "-300", json.Number("-300")},
	{"symbol", broker.Symbol("sym"), `"sym"`, "sym"},
	{"timespan", broker.TimeSpan(-(((1*24+2)*3600+3*60+4)*10_000_000 + 5)), `"-1.02:03:04.0000005"`, "-1.02:03:04.0000005"},
	{"uint", uint32(math.MaxUint32), "4294967295", json.Number("4294967295")},
	{"ulong", uint64(math.MaxUint64), "18446744073709551615", json.Number("18446744073709551615")},
	{"uri", broker.URI(`https://x/y?z="1"`), `"https://x/y?z=\"1\""`, `https://x/y?z="1"`},
	{"ushort", uint16(65535), "65535", json.Number("65535")},
	{"uuid", uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e"), `"0f8fad5b-d9cb-469f-a165-70867728950e"`, "0f8fad5b-d9cb-469f-a165-70867728950e"},
}

func restProps() broker.UserProperties {
	var props broker.UserProperties
	for _, p := range restTypes {
		props = append(props, broker.Property{Name: p.name, Value: p.value})
	}
	return props
}

// restBodies are AMQP bodies (their encoded sections) with what REST shows of each.
var restBodies = []struct {
	name string
	raw  string // the sections
	rest string // what a REST receive's body is
}{
	{"value string", "\x00\x53\x77\xa1\x05hello", "hello"},
	{"value binary", "\x00\x53\x77\xa0\x03\x01\x02\xff", "\x01\x02\xff"},
	{"data sections", "\x00\x53\x75\xa0\x02ab\x00\x53\x75\xa0\x00\x00\x53\x75\xa0\x01c", "abc"},
	{"value long", "\x00\x53\x77\x81\x00\x00\x00\x00\x00\x00\x00\x01", "\x00\x53\x77\x81\x00\x00\x00\x00\x00\x00\x00\x01"},
	{"sequence", "\x00\x53\x76\xc0\x03\x01\xa1\x00", "\x00\x53\x76\xc0\x03\x01\xa1\x00"},
}

// TestRESTShowsEveryTypeAndBody: a message an AMQP sender gave properties and a body REST has
// no form for is received over REST with each property in the header form its nearest REST
// type has, and the body as its bytes where it has bytes to show.
func TestRESTShowsEveryTypeAndBody(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	q, err := b.store.Resolve(t.Context(), "q")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range restBodies {
		if err := b.store.Send(t.Context(), q, []broker.Message{{Body: []byte(body.raw), BodyType: broker.BodyAMQP,
			MessageID: body.name, UserProperties: restProps(), HasSessionID: true}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, body := range restBodies {
		r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive "+body.name, http.StatusOK)
		if r.body != body.rest {
			t.Errorf("%s: REST body %q; want %q", body.name, r.body, body.rest)
		}
		bp := brokerProperties(t, r.header.Get("BrokerProperties"))
		if bp["MessageId"] != body.name {
			t.Fatalf("received %v; want %s (in order)", bp["MessageId"], body.name)
		}
		if sid, ok := bp["SessionId"]; !ok || sid != "" {
			t.Errorf("%s: BrokerProperties SessionId %v (present %v); want \"\"", body.name, sid, ok)
		}
		for _, p := range restTypes {
			if got := r.header.Get(p.name); got != p.header {
				t.Errorf("%s: header %s = %s; want %s", body.name, p.name, got, p.header)
			}
		}
	}
}

// TestRESTLeavesMessagesExact: whatever REST does with a message (peek-lock, abandon, renew,
// defer, receive the deferred message, dead-letter, browse, resubmit), the stored body and
// property types stay as the AMQP sender gave them. The extensions' JSON shows each property as
// its header does.
func TestRESTLeavesMessagesExact(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	q, err := b.store.Resolve(t.Context(), "q")
	if err != nil {
		t.Fatal(err)
	}
	sent := broker.Message{Body: []byte(restBodies[4].raw), BodyType: broker.BodyAMQP, MessageID: "m", UserProperties: restProps()}
	if err := b.store.Send(t.Context(), q, []broker.Message{sent}); err != nil {
		t.Fatal(err)
	}
	exact := func(where string, sq broker.SubQueue) {
		t.Helper()
		msgs, err := b.store.Browse(t.Context(), q, sq, 0, 10)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("%s: %d messages, %v", where, len(msgs), err)
		}
		m := msgs[0]
		if string(m.Body) != string(sent.Body) || m.BodyType != sent.BodyType {
			t.Errorf("%s: body %q (type %d); want %q (type %d)", where, m.Body, m.BodyType, sent.Body, sent.BodyType)
		}
		if diff := cmp.Diff(sent.UserProperties, m.UserProperties); diff != "" {
			t.Errorf("%s: properties changed (-sent +stored):\n%s", where, diff)
		}
	}
	lock := func(what string) (location string, seq string) {
		t.Helper()
		r := b.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=0"}).want(t, what, http.StatusCreated)
		n := brokerProperties(t, r.header.Get("BrokerProperties"))["SequenceNumber"]
		return settlePath(t, r.header.Get("Location")), string(n.(json.Number))
	}
	loc, seq := lock("peek-lock")
	b.do(t, call{method: http.MethodPut, path: loc}).want(t, "abandon", http.StatusOK)
	exact("after an abandon", broker.SubQueueMain)
	loc, _ = lock("peek-lock again")
	b.do(t, call{method: http.MethodPost, path: loc}).want(t, "renew", http.StatusOK)
	b.do(t, call{method: http.MethodPost, path: loc + "/$defer"}).want(t, "defer", http.StatusOK)
	exact("deferred", broker.SubQueueMain)
	r := b.do(t, call{method: http.MethodPost, path: "/q/messages/$deferred/" + seq}).want(t, "receive deferred", http.StatusCreated)
	b.do(t, call{method: http.MethodPost, path: settlePath(t, r.header.Get("Location")) + "/$deadletter"}).want(t, "dead-letter", http.StatusOK)
	exact("dead-lettered", broker.SubQueueDeadLetter)

	msgs := b.do(t, call{method: http.MethodGet, path: "/q/$DeadLetterQueue/messages/$browse"}).messages(t, "browse", http.StatusOK)
	if len(msgs) != 1 {
		t.Fatalf("browsed %d messages", len(msgs))
	}
	if msgs[0].Body != nil || string(msgs[0].BodyBase64) != restBodies[4].rest {
		t.Errorf("browsed body %v, base64 %q; want the sections' bytes %q, in base64 (not UTF-8)", msgs[0].Body, msgs[0].BodyBase64, restBodies[4].rest)
	}
	for _, p := range restTypes {
		if got := msgs[0].UserProperties[p.name]; got != p.json {
			t.Errorf("JSON property %s = %#v; want %#v", p.name, got, p.json)
		}
	}
	b.do(t, call{method: http.MethodPost, path: "/q/$DeadLetterQueue/messages/$resubmit"}).want(t, "resubmit", http.StatusOK)
	exact("resubmitted", broker.SubQueueMain)
}

// "SessionId":"" in BrokerProperties names the session "": a session queue takes the message,
// the session "" gives it, and its BrokerProperties say so; null names no session.
func TestRESTEmptySessionID(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "sq", "<RequiresSession>true</RequiresSession>")
	b.send(t, "sq", "in the session", map[string]string{"BrokerProperties": `{"SessionId":""}`})
	b.do(t, call{method: http.MethodPost, path: "/sq/messages", body: "no session", key: "sender",
		header: map[string]string{"BrokerProperties": `{"SessionId":null}`}}).
		wantError(t, "send with SessionId null", http.StatusBadRequest, "SessionId was not set")
	sq, err := b.store.Resolve(t.Context(), "sq")
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.store.AcceptSession(t.Context(), sq, "")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := b.store.Receive(t.Context(), broker.ReceiveRequest{Target: broker.Target{Entity: sq,
		Session: &broker.SessionLock{SessionID: s.ID, Token: s.LockToken}}, Max: 10})
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "in the session" || !msgs[0].HasSessionID {
		t.Fatalf("session \"\" gave %+v, %v", msgs, err)
	}

	b.createQueue(t, "q", "")
	b.send(t, "q", "x", map[string]string{"BrokerProperties": `{"SessionId":""}`})
	b.send(t, "q", "y", nil)
	r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive", http.StatusOK)
	if !strings.Contains(r.header.Get("BrokerProperties"), `"SessionId":""`) {
		t.Errorf("BrokerProperties %s; want \"SessionId\":\"\"", r.header.Get("BrokerProperties"))
	}
	r = b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive", http.StatusOK)
	if strings.Contains(r.header.Get("BrokerProperties"), "SessionId") {
		t.Errorf("BrokerProperties %s of a message without a session name one", r.header.Get("BrokerProperties"))
	}
}

// The sessions extension addresses the session "" as any other: its URL segment is empty.
func TestRESTSessionExtensionEmptySession(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "sq", "<RequiresSession>true</RequiresSession>")
	b.send(t, "sq", "in the session", map[string]string{"BrokerProperties": `{"SessionId":""}`})
	r := b.do(t, call{method: http.MethodPost, path: "/sq/sessions/$accept?timeout=0"}).want(t, "accept next", http.StatusCreated)
	loc := settlePath(t, r.header.Get("Location"))
	if !strings.Contains(loc, "/sessions//") {
		t.Errorf("Location %s; want the empty session's empty segment", loc)
	}
	m := b.do(t, call{method: http.MethodPost, path: loc + "/messages/head?timeout=0"}).want(t, "peek-lock in session \"\"", http.StatusCreated)
	if m.body != "in the session" {
		t.Errorf("body %q", m.body)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, m.header.Get("Location"))}).want(t, "complete in session \"\"", http.StatusOK)
	b.do(t, call{method: http.MethodPut, path: loc + "/state", body: "st"}).want(t, "set state of \"\"", http.StatusOK)
	if st := b.do(t, call{method: http.MethodGet, path: loc + "/state"}).want(t, "get state", http.StatusOK); st.body != "st" {
		t.Errorf("state %q", st.body)
	}
	b.do(t, call{method: http.MethodPost, path: "/sq/sessions//$accept"}).want(t, "accept \"\" by name while held", http.StatusConflict)
}
