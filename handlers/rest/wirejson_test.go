package rest_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// uuidRE finds the lock tokens a JSON answer carries, which differ from run to run.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestExtensionJSONBytes pins the exact bytes of the extensions' JSON answers (messages and
// session locks): the order of their keys, which keys are left out when empty, the numbers'
// spelling. The handlers encode the models generated from openapi.yaml; this is what proves that
// the generated structs write what the server always wrote.
func TestExtensionJSONBytes(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.createQueue(t, "sq", "<RequiresSession>true</RequiresSession>")
	json := map[string]string{"Content-Type": "application/vnd.microsoft.servicebus.json"}
	b.do(t, call{method: http.MethodPost, path: "/q/messages", key: "sender", header: json, body: `[
		{"Body": "one", "BrokerProperties": {"MessageId": "m1", "Label": "L", "ContentType": "text/plain", "TimeToLive": 60},
		 "UserProperties": {"i": 7, "d": 2.0, "s": "x", "b": true}},
		{"BodyBase64": "/w==", "BrokerProperties": {"MessageId": "m2"}}]`}).want(t, "send a batch", http.StatusCreated)
	b.do(t, call{method: http.MethodPost, path: "/sq/messages", key: "sender", header: json,
		body: `[{"Body": "s", "BrokerProperties": {"SessionId": "s1", "MessageId": "m3"}}]`}).want(t, "send to a session", http.StatusCreated)

	normal := func(s string) string {
		return uuidRE.ReplaceAllString(strings.ReplaceAll(s, b.host, "HOST"), "TOKEN")
	}
	check := func(what string, r result, want string) {
		t.Helper()
		if got := normal(r.body); got != want+"\n" {
			t.Errorf("%s:\n got %s\nwant %s", what, got, want)
		}
	}

	r := b.do(t, call{method: http.MethodPost, path: "/q/messages/$batch?count=1&timeout=0", key: "listener"}).want(t, "peek-lock m1", http.StatusCreated)
	check("peek-locked m1", r, `[{"Body":"one","ContentType":"text/plain","BrokerProperties":{"DeliveryCount":1,"EnqueuedSequenceNumber":0,`+
		`"EnqueuedTimeUtc":"Sun, 01 Mar 2026 12:00:00 GMT","ExpiresAtUtc":"Sun, 01 Mar 2026 12:01:00 GMT","Label":"L",`+
		`"LockToken":"TOKEN","LockedUntilUtc":"Sun, 01 Mar 2026 12:01:00 GMT","MessageId":"m1","SequenceNumber":1,"State":"Active","TimeToLive":60},`+
		`"UserProperties":{"b":true,"d":2.0,"i":7,"s":"x"},"Location":"http://HOST/q/messages/1/TOKEN"}]`)
	loc := uuidRE.FindAllString(r.body, -1)
	b.do(t, call{method: http.MethodPost, path: "/q/messages/1/" + loc[len(loc)-1] + "/$deadletter", key: "listener",
		header: map[string]string{"Content-Type": "application/json"}, body: `{"DeadLetterReason": "R", "DeadLetterErrorDescription": "D"}`}).
		want(t, "dead-letter m1", http.StatusOK)

	r = b.do(t, call{method: http.MethodGet, path: "/q/messages/$browse", key: "listener"}).want(t, "browse q", http.StatusOK)
	check("browsed m2", r, `[{"BodyBase64":"/w==","BrokerProperties":{"DeliveryCount":0,"EnqueuedSequenceNumber":0,`+
		`"EnqueuedTimeUtc":"Sun, 01 Mar 2026 12:00:00 GMT","MessageId":"m2","SequenceNumber":2,"State":"Active","TimeToLive":922337203685.47754}}]`)
	r = b.do(t, call{method: http.MethodGet, path: "/q/$DeadLetterQueue/messages/$browse", key: "listener"}).want(t, "browse the dead letters", http.StatusOK)
	check("browsed dead-lettered m1", r, `[{"Body":"one","ContentType":"text/plain","BrokerProperties":{"DeadLetterErrorDescription":"D","DeadLetterReason":"R",`+
		`"DeliveryCount":0,"EnqueuedSequenceNumber":0,"EnqueuedTimeUtc":"Sun, 01 Mar 2026 12:00:00 GMT","ExpiresAtUtc":"Sun, 01 Mar 2026 12:01:00 GMT",`+
		`"Label":"L","MessageId":"m1","SequenceNumber":1,"State":"Active","TimeToLive":60},"UserProperties":{"b":true,"d":2.0,"i":7,"s":"x"}}]`)

	r = b.do(t, call{method: http.MethodPost, path: "/sq/sessions/$accept?timeout=0", key: "listener"}).want(t, "accept s1", http.StatusCreated)
	check("accepted s1", r, `{"SessionId":"s1","LockToken":"TOKEN","LockedUntilUtc":"Sun, 01 Mar 2026 12:01:00 GMT"}`)
}
