package rest_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestUserPropertiesNamedLikeHeaders: a user property arrives whatever HTTP header it looks
// like, unless HTTP clients or proxies add that header on their own; a name that could not come
// back is refused, never dropped.
func TestUserPropertiesNamedLikeHeaders(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	sent := map[string]string{
		"origin": `"web"`, "via": `"gateway-2"`, "forwarded": `"yes"`, "referer": `"page"`, "pragma": `"p"`,
		"cache-control": `"c"`, "if-match": `"*"`, "date": `"Sun, 01 Mar 2026 11:00:00 GMT"`,
	}
	b.send(t, "q", "m", sent)
	// Read off the wire: every property once, the date one in place of the server's own Date.
	w := b.raw(t, http.MethodDelete, "/q/messages/head?timeout=0", "")
	if w.statusLine != "HTTP/1.1 200 OK" {
		t.Fatalf("receive: %s %v %s", w.statusLine, w.header, w.body)
	}
	for name, want := range sent {
		if name == "date" {
			name = "Date"
		}
		if got := w.header[name]; got != want {
			t.Errorf("receive: header %s = %q; want %q (headers %v)", name, got, want, w.header)
		}
	}

	// A header a received message carries itself cannot be a user property: refused, not lost.
	b.do(t, call{method: http.MethodPost, path: "/q/messages", body: "x", key: "sender", header: map[string]string{"Location": `"x"`}}).
		wantError(t, "send with a Location property", http.StatusBadRequest, "'Location' cannot be a user property name")
	b.do(t, call{method: http.MethodPost, path: "/q/messages", body: "x", key: "sender", header: map[string]string{"Content-Encoding": "gzip"}}).
		wantError(t, "send a compressed body", http.StatusBadRequest, "Content-Encoding 'gzip' is not supported")

	// In a batch, the same names arrive; reserved ones are refused with the message's number.
	batch := func(props string) result {
		return b.do(t, call{method: http.MethodPost, path: "/q/messages", key: "sender",
			header: map[string]string{"Content-Type": "application/vnd.microsoft.servicebus.json"},
			body:   `[{"Body":"a"},{"Body":"b","UserProperties":` + props + `}]`})
	}
	batch(`{"origin":"web","Date":"Sun, 01 Mar 2026 11:00:00 GMT","via":"v"}`).want(t, "batch with header-like names", http.StatusCreated)
	b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive a", http.StatusOK)
	r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive b", http.StatusOK)
	if r.header.Get("origin") != `"web"` || r.header.Get("via") != `"v"` || r.header.Get("Date") != `"Sun, 01 Mar 2026 11:00:00 GMT"` {
		t.Errorf("batch message b: headers %v; want origin, via and Date as sent", r.header)
	}
	for _, name := range []string{"User-Agent", "x-ms-client-request-id", "traceparent", "Location", "Content-Length"} {
		batch(`{"`+name+`":"x"}`).wantError(t, "batch with "+name, http.StatusBadRequest,
			fmt.Sprintf("Message 2 of the batch: '%s' cannot be a user property name.", name))
	}
	batch(`{"Origin":"a","origin":"b"}`).wantError(t, "batch with names differing in case", http.StatusBadRequest,
		"Message 2 of the batch: the user properties 'Origin' and 'origin' differ only in case")
	if c := b.counts(t, "q"); c.Active != 0 {
		t.Errorf("counts after refused batches = %+v; want nothing stored", c)
	}
}

// TestReadOnlyBrokerProperties: ExpiresAtUtc in every response that carries a message, a past
// ScheduledEnqueueTimeUtc echoed as sent, ViaPartitionKey returned.
func TestReadOnlyBrokerProperties(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	// Sent at 12:00:00, scheduled in the past: receivable at once, enqueued now, the schedule
	// returned as sent.
	b.send(t, "q", "past", map[string]string{"BrokerProperties": `{"MessageId":"past","TimeToLive":90,` +
		`"ScheduledEnqueueTimeUtc":"Sun, 01 Mar 2026 11:00:00 GMT","ViaPartitionKey":"vpk"}`})
	b.send(t, "q", "forever", map[string]string{"BrokerProperties": `{"MessageId":"forever"}`})

	want := map[string]map[string]string{
		"past": {"EnqueuedTimeUtc": "Sun, 01 Mar 2026 12:00:00 GMT", "ExpiresAtUtc": "Sun, 01 Mar 2026 12:01:30 GMT",
			"ScheduledEnqueueTimeUtc": "Sun, 01 Mar 2026 11:00:00 GMT", "ViaPartitionKey": "vpk", "State": "Active"},
		// A message that never expires has no ExpiresAtUtc, as the service answers.
		"forever": {"EnqueuedTimeUtc": "Sun, 01 Mar 2026 12:00:00 GMT", "ExpiresAtUtc": "<nil>",
			"ScheduledEnqueueTimeUtc": "<nil>", "ViaPartitionKey": "<nil>", "State": "Active"},
	}
	check := func(what string, bp map[string]any) {
		t.Helper()
		id := fmt.Sprint(bp["MessageId"])
		for k, v := range want[id] {
			if got := fmt.Sprint(bp[k]); got != v {
				t.Errorf("%s %s: %s = %s; want %s", what, id, k, got, v)
			}
		}
	}
	// Browse (extension JSON).
	for _, m := range b.browseAll(t, "q") {
		bp := map[string]any{"MessageId": *m.BrokerProperties.MessageId, "EnqueuedTimeUtc": show(m.BrokerProperties.EnqueuedTimeUtc),
			"ExpiresAtUtc": show(m.BrokerProperties.ExpiresAtUtc), "ScheduledEnqueueTimeUtc": show(m.BrokerProperties.ScheduledEnqueueTimeUtc),
			"ViaPartitionKey": show(m.BrokerProperties.ViaPartitionKey), "State": show((*string)(m.BrokerProperties.State))}
		check("browse", bp)
	}
	// Peek-lock (REST).
	_, bp := b.peekLockHead(t, "q")
	check("peek-lock", bp)
	// Receive and delete (REST), after the lock above has lapsed.
	b.clock.Advance(2 * time.Minute)
	r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive forever", http.StatusOK)
	check("receive", brokerProperties(t, r.header.Get("BrokerProperties")))
}

func show(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestEnqueuedSequenceNumber: an auto-forwarded message carries the sequence number it was first
// given where it was sent; others 0.
func TestEnqueuedSequenceNumber(t *testing.T) {
	b := setup(t)
	b.namespaceWide = true // the namespace's owner may forward anywhere without supplementary tokens
	b.createQueue(t, "target", "")
	b.createQueue(t, "fwd", "<ForwardTo>target</ForwardTo>")
	b.createQueue(t, "dlq-target", "")
	b.createQueue(t, "poison", "<MaxDeliveryCount>1</MaxDeliveryCount><ForwardDeadLetteredMessagesTo>dlq-target</ForwardDeadLetteredMessagesTo>")
	b.createTopic(t, "t", "")
	b.createSubscription(t, "t", "direct", "")
	b.createSubscription(t, "t", "onward", "<ForwardTo>target</ForwardTo>")

	b.send(t, "target", "plain", nil)
	b.send(t, "fwd", "via-queue", nil)
	b.send(t, "t", "via-topic", nil)
	b.send(t, "poison", "dead", nil)

	seqOf := func(bp map[string]any) (seq, enq int64) {
		t.Helper()
		if _, err := fmt.Sscan(fmt.Sprint(bp["SequenceNumber"]), &seq); err != nil {
			t.Fatalf("SequenceNumber %v", bp["SequenceNumber"])
		}
		if _, err := fmt.Sscan(fmt.Sprint(bp["EnqueuedSequenceNumber"]), &enq); err != nil {
			t.Fatalf("EnqueuedSequenceNumber %v", bp["EnqueuedSequenceNumber"])
		}
		return seq, enq
	}
	// The poison message's sequence number in its own queue, before its last delivery fails.
	loc, bp := b.peekLockHead(t, "poison")
	poisonSeq, _ := seqOf(bp)
	b.do(t, call{method: http.MethodPut, path: loc}).want(t, "abandon the poison message", http.StatusOK)

	got := map[string]bool{}
	for _, m := range b.drain(t, "target") {
		seq, enq := seqOf(m.bp)
		got[m.body] = true
		switch m.body {
		case "plain":
			if enq != 0 {
				t.Errorf("plain: EnqueuedSequenceNumber %d; want 0 (not forwarded)", enq)
			}
		case "via-queue", "via-topic":
			if enq <= 0 || enq >= seq {
				t.Errorf("%s: EnqueuedSequenceNumber %d, SequenceNumber %d; want the earlier number of its send", m.body, enq, seq)
			}
		}
	}
	if !got["plain"] || !got["via-queue"] || !got["via-topic"] {
		t.Errorf("target received %v; want plain, via-queue, via-topic", got)
	}
	// The direct subscription's copy was not forwarded.
	for _, m := range b.drain(t, "t/Subscriptions/direct") {
		if _, enq := seqOf(m.bp); enq != 0 {
			t.Errorf("direct copy: EnqueuedSequenceNumber %d; want 0", enq)
		}
	}
	// A forwarded dead letter carries its sequence number in the queue it died in.
	dead := b.drain(t, "dlq-target")
	if len(dead) != 1 {
		t.Fatalf("dlq-target has %d messages; want the dead letter", len(dead))
	}
	if _, enq := seqOf(dead[0].bp); enq != poisonSeq {
		t.Errorf("forwarded dead letter: EnqueuedSequenceNumber %d; want %d, its number in poison", enq, poisonSeq)
	}
}

// TestRenewLockOfExpiredMessage: a message whose time to live ends while it is locked stays with
// its receiver until the lock ends, but the lock is not renewed; then it expires (here into the
// dead-letter queue).
func TestRenewLockOfExpiredMessage(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "<LockDuration>PT1M</LockDuration><DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration>")
	b.send(t, "q", "short", map[string]string{"BrokerProperties": `{"TimeToLive":30}`})
	b.send(t, "q", "done", map[string]string{"BrokerProperties": `{"TimeToLive":30}`})
	short, _ := b.peekLockHead(t, "q")
	done, _ := b.peekLockHead(t, "q")

	b.clock.Advance(20 * time.Second)
	r := b.do(t, call{method: http.MethodPost, path: short}).want(t, "renew before expiry", http.StatusOK)
	if bp := brokerProperties(t, r.header.Get("BrokerProperties")); bp["LockedUntilUtc"] != "Sun, 01 Mar 2026 12:01:20 GMT" {
		t.Errorf("renew before expiry: LockedUntilUtc %v; want 12:01:20", bp["LockedUntilUtc"])
	}
	b.clock.Advance(20 * time.Second) // 12:00:40: both expired, both still locked
	b.do(t, call{method: http.MethodPost, path: short}).wantError(t, "renew after expiry", http.StatusNotFound,
		"is not renewed: the message's time to live ended while it was locked. It stays locked until 2026-03-01T12:01:20Z")
	// The lock still holds: the receiver may still settle the message it has.
	b.do(t, call{method: http.MethodDelete, path: done}).want(t, "complete an expired message under lock", http.StatusOK)
	b.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=0"}).want(t, "peek-lock while locked", http.StatusNoContent)

	// When the lock ends, the expiry takes effect.
	b.clock.Advance(41 * time.Second)
	b.do(t, call{method: http.MethodPost, path: short}).want(t, "renew after the lock ended", http.StatusNotFound)
	b.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=0"}).want(t, "peek-lock after the lock ended", http.StatusNoContent)
	if err := b.store.Maintain(t.Context()); err != nil { // the expiry sweep
		t.Fatal(err)
	}
	dead := b.drain(t, "q/$DeadLetterQueue")
	if len(dead) != 1 || dead[0].body != "short" || dead[0].header.Get("DeadLetterReason") != `"TTLExpiredException"` {
		t.Errorf("dead letters = %+v; want short, TTLExpiredException", dead)
	}
}

// TestLocationBehindTrustedProxy: settlement URLs name the scheme and host the client used when
// a trusted proxy says what they were, and only then.
func TestLocationBehindTrustedProxy(t *testing.T) {
	b := setup(t, setupOptions{trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	b.createQueue(t, "q", "")
	for i := 0; i < 4; i++ {
		b.send(t, "q", "m", nil)
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"X-Forwarded-Proto", map[string]string{"X-Forwarded-Proto": "https"}, "https://" + b.host + "/q/messages/"},
		{"X-Forwarded-Proto and -Host", map[string]string{"X-Forwarded-Proto": "http, https", "X-Forwarded-Host": "sb.example.com"},
			"https://sb.example.com/q/messages/"},
		// The element our peer added says proto=http, but it came from a trusted proxy (for=)
		// whose own element says https: the client's view is the outermost trusted one.
		{"Forwarded", map[string]string{"Forwarded": `for=203.0.113.7;proto=https;host="sb.example.com:8443", for=127.0.0.2;proto=http`},
			"https://sb.example.com:8443/q/messages/"},
		{"Forwarded from an untrusted client", map[string]string{"Forwarded": `for=198.51.100.1;proto=http, for=203.0.113.7;proto=https;host=sb.example.com`},
			"https://sb.example.com/q/messages/"},
	} {
		r := b.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=0", header: tc.header}).want(t, tc.name, http.StatusCreated)
		if loc := r.header.Get("Location"); !strings.HasPrefix(loc, tc.want) {
			t.Errorf("%s: Location %q; want it to start with %q", tc.name, loc, tc.want)
		}
	}
	// Through a trusted proxy the proxy's headers are not user properties.
	b.send(t, "q", "p", map[string]string{"X-Forwarded-For": "203.0.113.7", "Via": "1.1 lb", "origin": `"o"`})
	b.clock.Advance(2 * time.Minute)
	for {
		r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"})
		if r.status == http.StatusNoContent {
			t.Fatal("the message sent through the proxy was not received")
		}
		if r.body == "p" {
			if r.header.Get("x-forwarded-for") != "" || r.header.Get("via") != "" || r.header.Get("origin") != `"o"` {
				t.Errorf("message through a trusted proxy: headers %v; want origin only", r.header)
			}
			break
		}
	}
}

// TestLocationWithoutTrustedProxy: from a peer that is not a trusted proxy, forwarding headers
// change nothing.
func TestLocationWithoutTrustedProxy(t *testing.T) {
	plain := setup(t)
	plain.createQueue(t, "q", "")
	plain.send(t, "q", "m", nil)
	r := plain.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=0",
		header: map[string]string{"X-Forwarded-Proto": "https", "Forwarded": "proto=https;host=evil.example"}}).want(t, "untrusted", http.StatusCreated)
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "http://"+plain.host+"/q/messages/") {
		t.Errorf("untrusted peer: Location %q; want the connection's own http://%s", loc, plain.host)
	}
}
