package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/api/client"
)

// The sbgate extensions ($browse, $batch, $defer, $deferred, $deadletter, $scheduled, $resubmit
// and purge), driven over HTTP. The generated client covers the operations whose typed answers
// prove openapi.yaml matches the server; raw requests cover the rest and the exact headers.

// counted is what a queue's CountDetails should say.
type counted struct{ active, scheduled, dead int64 }

// wantCounts reads the queue's Atom entry, as a management client does, and checks its
// CountDetails and MessageCount.
func (b *bundle) wantCounts(t *testing.T, what, queue string, want counted) {
	t.Helper()
	e := b.do(t, call{method: http.MethodGet, path: "/" + queue}).entry(t, what+": GET /"+queue, http.StatusOK)
	cd := e.Queue.CountDetails
	if cd == nil {
		t.Fatalf("%s: GET /%s has no CountDetails", what, queue)
	}
	got := counted{cd.Active, cd.Scheduled, cd.DeadLetter}
	if got != want || cd.Transfer != 0 || cd.TransferDL != 0 {
		t.Errorf("%s: CountDetails of %s = %+v; want %+v", what, queue, *cd, want)
	}
	if total := want.active + want.scheduled + want.dead; e.Queue.MessageCount != total {
		t.Errorf("%s: MessageCount of %s = %d; want %d", what, queue, e.Queue.MessageCount, total)
	}
}

// wireMessage is one element of an extension's JSON array as it was sent: BrokerProperties kept
// raw so that its key order can be checked, numbers kept as their text.
type wireMessage struct {
	Body             *string         `json:"Body"`
	BodyBase64       []byte          `json:"BodyBase64"`
	ContentType      string          `json:"ContentType"`
	BrokerProperties json.RawMessage `json:"BrokerProperties"`
	UserProperties   map[string]any  `json:"UserProperties"`
	Location         string          `json:"Location"`
}

// messages checks a JSON array answer: the status, the JSON content type, and no field the
// Message schema lacks.
func (r result) messages(t *testing.T, what string, status int) []wireMessage {
	t.Helper()
	r.want(t, what, status)
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("%s: Content-Type = %q; want %q", what, ct, "application/json; charset=utf-8")
	}
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var msgs []wireMessage
	if err := dec.Decode(&msgs); err != nil {
		t.Fatalf("%s: body %q: %v", what, r.body, err)
	}
	if msgs == nil {
		t.Fatalf("%s: body %q; want a JSON array", what, r.body)
	}
	return msgs
}

// countResult checks a {"Count": n} answer.
func (r result) countResult(t *testing.T, what string, want int64) {
	t.Helper()
	r.want(t, what, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("%s: Content-Type = %q; want %q", what, ct, "application/json; charset=utf-8")
	}
	if body := fmt.Sprintf("{\"Count\":%d}\n", want); r.body != body {
		t.Errorf("%s: body %q; want %q", what, r.body, body)
	}
}

// peekLockHead peek-locks the head of path with the root key and returns the settlement path and
// the broker properties.
func (b *bundle) peekLockHead(t *testing.T, path string) (string, map[string]any) {
	t.Helper()
	r := b.do(t, call{method: http.MethodPost, path: "/" + path + "/messages/head?timeout=0"}).want(t, "peek-lock "+path, http.StatusCreated)
	return settlePath(t, r.header.Get("Location")), brokerProperties(t, r.header.Get("BrokerProperties"))
}

// browseAll lists every message of path through the generated client.
func (b *bundle) browseAll(t *testing.T, path string) []client.Message {
	t.Helper()
	r, err := b.api.BrowseMessagesWithResponse(t.Context(), path, &client.BrowseMessagesParams{Count: ptr(1000)})
	if err != nil {
		t.Fatalf("BrowseMessages(%q): %v", path, err)
	}
	if r.StatusCode() != http.StatusOK || r.JSON200 == nil {
		t.Fatalf("BrowseMessages(%q) = %d %s; want 200 with an array", path, r.StatusCode(), r.Body)
	}
	return *r.JSON200
}

// seqOf finds the sequence number of the message with the given MessageId in path by browsing.
func (b *bundle) seqOf(t *testing.T, path, messageID string) int64 {
	t.Helper()
	for _, m := range b.browseAll(t, path) {
		if bp := m.BrokerProperties; bp != nil && bp.MessageId != nil && *bp.MessageId == messageID {
			return seqNumber(t, m)
		}
	}
	t.Fatalf("browse %s: no message %q", path, messageID)
	return 0
}

func seqNumber(t *testing.T, m client.Message) int64 {
	t.Helper()
	if m.BrokerProperties == nil || m.BrokerProperties.SequenceNumber == nil {
		t.Fatalf("message %+v has no SequenceNumber", m)
	}
	return *m.BrokerProperties.SequenceNumber
}

func messageID(m client.Message) string {
	if m.BrokerProperties == nil || m.BrokerProperties.MessageId == nil {
		return ""
	}
	return *m.BrokerProperties.MessageId
}

// showPtr prints an optional field of a generated type for a failure message.
func showPtr[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

// withMessageID is a BrokerProperties header that sets only the MessageId.
func withMessageID(id string) map[string]string {
	return map[string]string{"BrokerProperties": `{"MessageId":"` + id + `"}`}
}

// scheduledAt is a BrokerProperties header that sets the MessageId and a scheduled time.
func scheduledAt(id string, at time.Time) map[string]string {
	return map[string]string{"BrokerProperties": `{"MessageId":"` + id + `","ScheduledEnqueueTimeUtc":"` + at.Format(http.TimeFormat) + `"}`}
}

const batchContentType = "application/vnd.microsoft.servicebus.json"

func TestBrowseMessages(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	b.createQueue(t, "q", "")

	// In sequence order: one to defer, one to keep locked, text with user properties of every
	// type, a binary body, a scheduled one.
	b.send(t, "q", "set aside", withMessageID("deferred"))
	b.send(t, "q", "held", withMessageID("locked"))
	loc, _ := b.peekLockHead(t, "q")
	b.do(t, call{method: http.MethodPost, path: loc + "/$defer"}).want(t, "defer", http.StatusOK)
	b.peekLockHead(t, "q")
	b.send(t, "q", `{"a":1}`, map[string]string{
		"Content-Type":     "application/json",
		"BrokerProperties": `{"MessageId":"text","Label":"first"}`,
		"s":                `"text"`,
		"n":                "42",
		"f":                "1.5",
		"g":                "2.0",
		"ok":               "true",
		"when":             `"Sun, 01 Mar 2026 11:00:00 GMT"`,
	})
	b.send(t, "q", "\xff\xfe\x00bin", map[string]string{"Content-Type": "application/octet-stream", "BrokerProperties": `{"MessageId":"binary"}`})
	b.send(t, "q", "later", scheduledAt("scheduled", start.Add(10*time.Minute)))
	b.wantCounts(t, "before browsing", "q", counted{active: 4, scheduled: 1})

	want := []struct {
		id            string
		state         client.BrokerPropertiesState
		deliveryCount int
	}{
		// A peek shows failed deliveries (as .NET shows a peeked message's): deferring, and
		// a lock still held, failed none.
		{"deferred", client.Deferred, 0},
		{"locked", client.Active, 0},
		{"text", client.Active, 0},
		{"binary", client.Active, 0},
		{"scheduled", client.Scheduled, 0},
	}
	for round := range 2 { // a second browse sees the same: the first counted no delivery
		got := b.browseAll(t, "q")
		if len(got) != len(want) {
			t.Fatalf("browse %d: %d messages; want %d", round, len(got), len(want))
		}
		for i, w := range want {
			m := got[i]
			bp := m.BrokerProperties
			if bp == nil {
				t.Fatalf("browse %d: message %d has no BrokerProperties", round, i)
			}
			if messageID(m) != w.id || bp.State == nil || *bp.State != w.state || bp.DeliveryCount == nil || *bp.DeliveryCount != w.deliveryCount {
				t.Errorf("browse %d: message %d = %s %s DeliveryCount %s; want %s %s %d", round, i,
					messageID(m), showPtr(bp.State), showPtr(bp.DeliveryCount), w.id, w.state, w.deliveryCount)
			}
			if bp.LockToken != nil || bp.LockedUntilUtc != nil || m.Location != nil {
				t.Errorf("browse %d: message %s shows a lock: %s %s %s", round, w.id, showPtr(bp.LockToken), showPtr(bp.LockedUntilUtc), showPtr(m.Location))
			}
		}
		for i := 1; i < len(got); i++ {
			if seqNumber(t, got[i-1]) >= seqNumber(t, got[i]) {
				t.Errorf("browse %d: not in sequence order", round)
			}
		}
		text := got[2]
		if showPtr(text.Body) != `{"a":1}` || text.BodyBase64 != nil || showPtr(text.ContentType) != "application/json" || showPtr(text.BrokerProperties.Label) != "first" {
			t.Errorf("browse: text message = Body %s, BodyBase64 %v, ContentType %s, Label %s", showPtr(text.Body), text.BodyBase64,
				showPtr(text.ContentType), showPtr(text.BrokerProperties.Label))
		}
		wantProps := map[string]any{"s": "text", "n": 42.0, "f": 1.5, "g": 2.0, "ok": true, "when": "Sun, 01 Mar 2026 11:00:00 GMT"}
		if text.UserProperties == nil || fmt.Sprint(*text.UserProperties) != fmt.Sprint(wantProps) {
			t.Errorf("browse: text message UserProperties = %v; want %v", showPtr(text.UserProperties), wantProps)
		}
		bin := got[3]
		if bin.Body != nil || bin.BodyBase64 == nil || string(*bin.BodyBase64) != "\xff\xfe\x00bin" || showPtr(bin.ContentType) != "application/octet-stream" {
			t.Errorf("browse: binary message = Body %s, BodyBase64 %q, ContentType %s; want the bytes as BodyBase64",
				showPtr(bin.Body), showPtr(bin.BodyBase64), showPtr(bin.ContentType))
		}
		if s := got[4].BrokerProperties.ScheduledEnqueueTimeUtc; showPtr(s) != "Sun, 01 Mar 2026 12:10:00 GMT" {
			t.Errorf("browse: ScheduledEnqueueTimeUtc = %s; want Sun, 01 Mar 2026 12:10:00 GMT", showPtr(s))
		}
	}
	b.wantCounts(t, "after browsing", "q", counted{active: 4, scheduled: 1})

	// from and count pick a window; the JSON is exactly the documented shape, with a double
	// that stays a double and broker properties in ordinal order. A listener may browse.
	from := b.seqOf(t, "q", "text")
	r := b.do(t, call{method: http.MethodGet, path: fmt.Sprintf("/q/messages/$browse?from=%d&count=2", from), key: "listener"})
	msgs := r.messages(t, "browse from text", http.StatusOK)
	if len(msgs) != 2 {
		t.Fatalf("browse from=%d&count=2: %d messages; want 2: %s", from, len(msgs), r.body)
	}
	for _, m := range msgs {
		brokerProperties(t, string(m.BrokerProperties))
	}
	if !strings.Contains(r.body, `"g":2.0`) || !strings.Contains(r.body, `"n":42,`) || !strings.Contains(r.body, `"BodyBase64":"//4AYmlu"`) {
		t.Errorf("browse from=%d: body %s; want g as 2.0, n as 42 and the binary body as base64", from, r.body)
	}
	if strings.Contains(r.body, "Lock") || strings.Contains(r.body, "Location") {
		t.Errorf("browse: body %s; want no lock information", r.body)
	}

	// The dead-letter subqueue is empty: an empty array, not null.
	r = b.do(t, call{method: http.MethodGet, path: "/q/$DeadLetterQueue/messages/$browse"})
	if r.messages(t, "browse the dead-letter queue", http.StatusOK); r.body != "[]\n" {
		t.Errorf("browse the empty dead-letter queue: body %q; want []", r.body)
	}
	r = b.do(t, call{method: http.MethodGet, path: fmt.Sprintf("/q/messages/$browse?from=%d", from+1000)})
	if r.messages(t, "browse past the end", http.StatusOK); r.body != "[]\n" {
		t.Errorf("browse past the end: body %q; want []", r.body)
	}

	for _, n := range []int{0, 1001} {
		bad, err := b.api.BrowseMessagesWithResponse(ctx, "q", &client.BrowseMessagesParams{Count: ptr(n)})
		if err != nil {
			t.Fatal(err)
		}
		if bad.StatusCode() != http.StatusBadRequest || bad.XML400 == nil || !strings.Contains(bad.XML400.Detail, "between 1 and 1000") {
			t.Errorf("BrowseMessages(count=%d) = %d %s; want 400", n, bad.StatusCode(), bad.Body)
		}
	}
	missing, err := b.api.BrowseMessagesWithResponse(ctx, "nowhere", nil)
	if err != nil {
		t.Fatal(err)
	}
	if missing.StatusCode() != http.StatusNotFound || missing.XML404 == nil || missing.XML404.Code != http.StatusNotFound {
		t.Errorf("BrowseMessages(nowhere) = %d %s; want 404 with the error body", missing.StatusCode(), missing.Body)
	}

	// Browsing took no lock: the head is still the text message, on its first delivery.
	_, bp := b.peekLockHead(t, "q")
	if bp["MessageId"] != "text" || fmt.Sprint(bp["DeliveryCount"]) != "1" {
		t.Errorf("peek-lock after browsing = %v %v; want text on delivery 1", bp["MessageId"], bp["DeliveryCount"])
	}

	// When its time comes the scheduled message browses as Active (and the lock of "locked"
	// has expired).
	b.clock.Advance(10 * time.Minute)
	b.wantCounts(t, "after the schedule", "q", counted{active: 5})
	got := b.browseAll(t, "q")
	if s := got[4].BrokerProperties.State; messageID(got[4]) != "scheduled" || showPtr(s) != string(client.Active) {
		t.Errorf("browse after the schedule: %s is %s; want Active", messageID(got[4]), showPtr(s))
	}
}

func TestPeekLockBatch(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	b.createQueue(t, "a/b", "<LockDuration>PT30S</LockDuration>")

	bin := []byte{0xff, 0x00, 0x80, 'x'}
	batch := []client.BatchMessage{
		{Body: ptr("one"), BrokerProperties: &client.BrokerProperties{MessageId: ptr("b1")}},
		{BodyBase64: &bin, BrokerProperties: &client.BrokerProperties{MessageId: ptr("b2"), ContentType: ptr("application/octet-stream")}},
		{Body: ptr("three"), BrokerProperties: &client.BrokerProperties{MessageId: ptr("b3")}, UserProperties: &map[string]any{"k": "v", "n": 7}},
		{Body: ptr("four"), BrokerProperties: &client.BrokerProperties{MessageId: ptr("b4")}},
		{Body: ptr("five"), BrokerProperties: &client.BrokerProperties{MessageId: ptr("b5")}},
	}
	raw, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := b.api.SendMessageWithBodyWithResponse(ctx, "a/b", nil, batchContentType, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if sent.StatusCode() != http.StatusCreated {
		t.Fatalf("send batch = %d %s", sent.StatusCode(), sent.Body)
	}

	peek, err := b.api.PeekLockBatchWithResponse(ctx, "a/b", &client.PeekLockBatchParams{Count: ptr(3), Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if peek.StatusCode() != http.StatusCreated || peek.JSON201 == nil || len(*peek.JSON201) != 3 {
		t.Fatalf("PeekLockBatch(count=3) = %d %s; want 201 with 3 messages", peek.StatusCode(), peek.Body)
	}
	if ct := peek.ContentType(); ct != "application/json; charset=utf-8" {
		t.Errorf("PeekLockBatch: Content-Type = %q; want JSON", ct)
	}
	locked := *peek.JSON201
	locations := make([]string, len(locked))
	for i, m := range locked {
		bp := m.BrokerProperties
		if want := fmt.Sprintf("b%d", i+1); messageID(m) != want {
			t.Errorf("PeekLockBatch: message %d is %s; want %s", i, messageID(m), want)
		}
		if bp.LockToken == nil || showPtr(bp.LockedUntilUtc) != "Sun, 01 Mar 2026 12:00:30 GMT" || showPtr(bp.DeliveryCount) != "1" || showPtr(bp.State) != "Active" {
			t.Errorf("PeekLockBatch: %s LockToken %s, LockedUntilUtc %s, DeliveryCount %s, State %s; want a 30 s lock on delivery 1",
				messageID(m), showPtr(bp.LockToken), showPtr(bp.LockedUntilUtc), showPtr(bp.DeliveryCount), showPtr(bp.State))
		}
		want := fmt.Sprintf("%s/a/b/messages/%d/%s", b.url, seqNumber(t, m), showPtr(bp.LockToken))
		if showPtr(m.Location) != want {
			t.Errorf("PeekLockBatch: %s Location = %s; want %s", messageID(m), showPtr(m.Location), want)
		}
		locations[i] = settlePath(t, showPtr(m.Location))
	}
	if m := locked[1]; m.Body != nil || m.BodyBase64 == nil || !bytes.Equal(*m.BodyBase64, bin) || showPtr(m.ContentType) != "application/octet-stream" {
		t.Errorf("PeekLockBatch: b2 = Body %s, BodyBase64 %v, ContentType %s; want the binary bytes", showPtr(m.Body), showPtr(m.BodyBase64), showPtr(m.ContentType))
	}
	if m := locked[2]; showPtr(m.Body) != "three" || m.UserProperties == nil || fmt.Sprint(*m.UserProperties) != "map[k:v n:7]" {
		t.Errorf("PeekLockBatch: b3 = Body %s, UserProperties %s", showPtr(m.Body), showPtr(m.UserProperties))
	}
	b.wantCounts(t, "after the batch peek-lock", "a/b", counted{active: 5})

	// Each lock is settled at its Location like a single peek-lock.
	b.do(t, call{method: http.MethodDelete, path: locations[0], key: "listener"}).want(t, "complete b1", http.StatusOK)
	b.do(t, call{method: http.MethodPut, path: locations[1], key: "listener"}).want(t, "abandon b2", http.StatusOK)
	b.do(t, call{method: http.MethodPost, path: locations[2], key: "listener"}).want(t, "renew b3", http.StatusOK)
	b.wantCounts(t, "after settling", "a/b", counted{active: 4})

	rd, err := b.api.ReceiveAndDeleteBatchWithResponse(ctx, "a/b", &client.ReceiveAndDeleteBatchParams{Count: ptr(10), Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if rd.StatusCode() != http.StatusOK || rd.JSON200 == nil {
		t.Fatalf("ReceiveAndDeleteBatch = %d %s; want 200", rd.StatusCode(), rd.Body)
	}
	var ids []string
	for _, m := range *rd.JSON200 {
		ids = append(ids, messageID(m)+"/"+showPtr(m.BrokerProperties.DeliveryCount))
		if m.Location != nil || m.BrokerProperties.LockToken != nil {
			t.Errorf("ReceiveAndDeleteBatch: %s has lock information", messageID(m))
		}
	}
	if got := strings.Join(ids, " "); got != "b2/2 b4/1 b5/1" {
		t.Errorf("ReceiveAndDeleteBatch = %s; want b2/2 b4/1 b5/1 (b3 is still locked)", got)
	}
	if m := (*rd.JSON200)[0]; m.BodyBase64 == nil || !bytes.Equal(*m.BodyBase64, bin) {
		t.Errorf("ReceiveAndDeleteBatch: b2 BodyBase64 = %v; want %v", showPtr(m.BodyBase64), bin)
	}
	b.wantCounts(t, "after the batch receive-and-delete", "a/b", counted{active: 1})

	// Nothing available: 204 at once, with no body, for both modes.
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		r := b.do(t, call{method: method, path: "/a/b/messages/$batch?timeout=0&count=5", key: "listener"}).want(t, method+" $batch with b3 locked", http.StatusNoContent)
		if r.body != "" {
			t.Errorf("%s $batch with nothing available: body %q; want none", method, r.body)
		}
	}

	// The renewed lock runs 30 s from the renewal; then b3 is delivered again.
	b.clock.Advance(30 * time.Second)
	b.do(t, call{method: http.MethodDelete, path: locations[2]}).wantError(t, "complete b3 after its lock expired", http.StatusNotFound, "The lock supplied is invalid.")
	again, err := b.api.PeekLockBatchWithResponse(ctx, "a/b", &client.PeekLockBatchParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if again.StatusCode() != http.StatusCreated || again.JSON201 == nil || len(*again.JSON201) != 1 ||
		messageID((*again.JSON201)[0]) != "b3" || showPtr((*again.JSON201)[0].BrokerProperties.DeliveryCount) != "2" {
		t.Fatalf("PeekLockBatch after the lock expired = %d %s; want b3 on delivery 2", again.StatusCode(), again.Body)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, showPtr((*again.JSON201)[0].Location))}).want(t, "complete b3", http.StatusOK)
	b.wantCounts(t, "after completing b3", "a/b", counted{})

	// The dead-letter subqueue has its own Location.
	b.send(t, "a/b", "poison", withMessageID("p"))
	loc, _ := b.peekLockHead(t, "a/b")
	b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter"}).want(t, "dead-letter p", http.StatusOK)
	dl := b.do(t, call{method: http.MethodPost, path: "/a/b/$DeadLetterQueue/messages/$batch?timeout=0"}).messages(t, "$batch on the dead-letter queue", http.StatusCreated)
	if len(dl) != 1 || !strings.HasPrefix(dl[0].Location, b.url+"/a/b/$DeadLetterQueue/messages/") {
		t.Fatalf("$batch on the dead-letter queue = %+v; want p with a dead-letter Location", dl)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, dl[0].Location)}).want(t, "complete p in the dead-letter queue", http.StatusOK)
	b.wantCounts(t, "after completing p", "a/b", counted{})

	for _, tc := range []struct{ query, detail string }{
		{"count=0&timeout=0", "between 1 and 1000"},
		{"count=1001&timeout=0", "between 1 and 1000"},
		{"timeout=-1", "The timeout must be a number of seconds"},
		{"count=x", "count"},
	} {
		b.do(t, call{method: http.MethodPost, path: "/a/b/messages/$batch?" + tc.query}).wantError(t, "$batch?"+tc.query, http.StatusBadRequest, tc.detail)
	}
	b.do(t, call{method: http.MethodDelete, path: "/nowhere/messages/$batch?timeout=0"}).wantError(t, "$batch on a missing queue", http.StatusNotFound, "")
}

// TestPeekLockBatchWaits checks that a batch receive waiting for its first message returns when
// one is sent.
func TestPeekLockBatchWaits(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "w", "")
	type answer struct {
		status int
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := b.api.PeekLockBatchWithResponse(t.Context(), "w", &client.PeekLockBatchParams{Timeout: ptr(60)})
		if err != nil {
			done <- answer{err: err}
			return
		}
		done <- answer{status: r.StatusCode(), body: string(r.Body)}
	}()
	b.send(t, "w", "wake up", nil)
	a := <-done
	if a.err != nil || a.status != http.StatusCreated || !strings.Contains(a.body, `"Body":"wake up"`) {
		t.Errorf("waiting PeekLockBatch = %d %s %v; want 201 with the message", a.status, a.body, a.err)
	}
}

func TestExtensionBodies(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	bin := "\x00\x01\x02\xfe\xff"
	items := []client.BatchMessage{
		{BodyBase64: ptr([]byte(bin))},
		{BodyBase64: ptr([]byte("plain text"))}, // valid UTF-8 comes back as Body
		{Body: ptr("")},
		{Body: ptr("h\u00e9 \U0001F600")},
	}
	raw, _ := json.Marshal(items)
	b.do(t, call{method: http.MethodPost, path: "/q/messages", body: string(raw), key: "sender",
		header: map[string]string{"Content-Type": batchContentType}}).want(t, "send the batch", http.StatusCreated)

	msgs := b.do(t, call{method: http.MethodGet, path: "/q/messages/$browse"}).messages(t, "browse", http.StatusOK)
	if len(msgs) != 4 {
		t.Fatalf("browse: %d messages; want 4", len(msgs))
	}
	if msgs[0].Body != nil || string(msgs[0].BodyBase64) != bin {
		t.Errorf("browse: binary message Body %v, BodyBase64 %q; want BodyBase64 %q", msgs[0].Body, msgs[0].BodyBase64, bin)
	}
	for i, want := range []string{"plain text", "", "h\u00e9 \U0001F600"} {
		m := msgs[i+1]
		if m.Body == nil || *m.Body != want || m.BodyBase64 != nil {
			t.Errorf("browse: message %d Body %v, BodyBase64 %q; want Body %q", i+1, m.Body, m.BodyBase64, want)
		}
	}

	// The REST receive gives the very bytes.
	r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive the binary message", http.StatusOK)
	if r.body != bin {
		t.Errorf("receive the binary message: body %q; want %q", r.body, bin)
	}
	// And a single REST send of binary bytes browses as BodyBase64.
	b.send(t, "q", "\xc3\x28", map[string]string{"Content-Type": "application/octet-stream"})
	msgs = b.do(t, call{method: http.MethodGet, path: "/q/messages/$browse?count=10"}).messages(t, "browse again", http.StatusOK)
	if last := msgs[len(msgs)-1]; last.Body != nil || string(last.BodyBase64) != "\xc3\x28" || last.ContentType != "application/octet-stream" {
		t.Errorf("browse: REST-sent binary message Body %v, BodyBase64 %q, ContentType %q", last.Body, last.BodyBase64, last.ContentType)
	}

	for _, tc := range []struct{ name, body, detail string }{
		{"Body and BodyBase64", `[{"Body":"a"},{"Body":"b","BodyBase64":"Yg=="}]`, "Message 2 of the batch has both Body and BodyBase64."},
		{"BodyBase64 not base64", `[{"BodyBase64":"***"}]`, "The batch is not a JSON array of messages."},
	} {
		b.do(t, call{method: http.MethodPost, path: "/q/messages", body: tc.body, key: "sender",
			header: map[string]string{"Content-Type": batchContentType}}).wantError(t, tc.name, http.StatusBadRequest, tc.detail)
	}
	b.wantCounts(t, "after the refused batches", "q", counted{active: 4})
}

func TestDeferAndReceiveDeferred(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	api := b.api
	b.createQueue(t, "d", "<MaxDeliveryCount>3</MaxDeliveryCount>")
	b.send(t, "d", "first", map[string]string{"BrokerProperties": `{"MessageId":"d1"}`, "kind": `"x"`})
	b.send(t, "d", "second", withMessageID("d2"))
	b.send(t, "d", "third", withMessageID("d3"))

	// deferHead peek-locks the head through the client and defers it.
	deferHead := func(want string) int64 {
		t.Helper()
		peek, err := api.PeekLockMessageWithResponse(ctx, "d", &client.PeekLockMessageParams{Timeout: ptr(0)})
		if err != nil {
			t.Fatal(err)
		}
		if peek.StatusCode() != http.StatusCreated || string(peek.Body) != want {
			t.Fatalf("peek-lock = %d %q; want 201 %q", peek.StatusCode(), peek.Body, want)
		}
		seq, tok := lockOf(t, peek.Headers201.BrokerProperties)
		def, err := api.DeferMessageWithResponse(ctx, "d", seq, tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		if def.StatusCode() != http.StatusOK {
			t.Fatalf("DeferMessage(%s) = %d %s; want 200", seq, def.StatusCode(), def.Body)
		}
		again, err := api.DeferMessageWithResponse(ctx, "d", seq, tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.StatusCode() != http.StatusNotFound || again.XML404 == nil || !strings.Contains(again.XML404.Detail, "The lock supplied is invalid.") {
			t.Errorf("DeferMessage(%s) twice = %d %s; want 404 lock lost", seq, again.StatusCode(), again.Body)
		}
		n, _ := strconv.ParseInt(seq, 10, 64)
		return n
	}
	seq1 := deferHead("first")
	seq2 := deferHead("second") // d1 is no longer at the head
	b.wantCounts(t, "after deferring two", "d", counted{active: 3})
	states := ""
	for _, m := range b.browseAll(t, "d") {
		states += messageID(m) + ":" + showPtr(m.BrokerProperties.State) + " "
	}
	if states != "d1:Deferred d2:Deferred d3:Active " {
		t.Errorf("browse after deferring = %s; want d1 and d2 Deferred", states)
	}

	// A deferred message answers like a peek-lock of the head.
	peekDeferred := func(what string, wantDeliveries string) (string, client.BrokerProperties) {
		t.Helper()
		r, err := api.PeekLockDeferredWithResponse(ctx, "d", seq1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != http.StatusCreated || r.Headers201 == nil || string(r.Body) != "first" {
			t.Fatalf("%s: PeekLockDeferred(%d) = %d %q; want 201 with the body", what, seq1, r.StatusCode(), r.Body)
		}
		if got := r.HTTPResponse.Header.Get("kind"); got != `"x"` {
			t.Errorf("%s: user property kind = %q; want %q", what, got, `"x"`)
		}
		var bp client.BrokerProperties
		if err := json.Unmarshal([]byte(showPtr(r.Headers201.BrokerProperties)), &bp); err != nil {
			t.Fatalf("%s: BrokerProperties %s: %v", what, showPtr(r.Headers201.BrokerProperties), err)
		}
		if showPtr(bp.State) != "Deferred" || showPtr(bp.DeliveryCount) != wantDeliveries || bp.LockToken == nil || showPtr(bp.SequenceNumber) != fmt.Sprint(seq1) {
			t.Errorf("%s: BrokerProperties %s; want Deferred, delivery %s, a lock", what, showPtr(r.Headers201.BrokerProperties), wantDeliveries)
		}
		if want := fmt.Sprintf("%s/d/messages/%d/%s", b.url, seq1, showPtr(bp.LockToken)); showPtr(r.Headers201.Location) != want {
			t.Errorf("%s: Location = %s; want %s", what, showPtr(r.Headers201.Location), want)
		}
		return showPtr(r.Headers201.Location), bp
	}
	// Deferring failed no delivery, and a receive by number counts none: DeliveryCount 1.
	loc, bp := peekDeferred("first deferred receive", "1")
	locked, err := api.PeekLockDeferredWithResponse(ctx, "d", seq1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if locked.StatusCode() != http.StatusNotFound || locked.XML404 == nil ||
		!strings.Contains(locked.XML404.Detail, fmt.Sprintf("No deferred message with sequence number %d is available in 'd'.", seq1)) {
		t.Errorf("PeekLockDeferred while locked = %d %s; want 404", locked.StatusCode(), locked.Body)
	}
	// Abandoning keeps it deferred: the head is d3.
	unlock, err := api.UnlockMessageWithResponse(ctx, "d", fmt.Sprint(seq1), *bp.LockToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if unlock.StatusCode() != http.StatusOK {
		t.Fatalf("abandon the deferred message at %s = %d %s", loc, unlock.StatusCode(), unlock.Body)
	}
	headLoc, head := b.peekLockHead(t, "d")
	if head["MessageId"] != "d3" {
		t.Errorf("head after abandoning the deferred message = %v; want d3", head["MessageId"])
	}
	b.do(t, call{method: http.MethodDelete, path: headLoc}).want(t, "complete d3", http.StatusOK)

	// Abandons count: the third failed delivery is the last MaxDeliveryCount allows, so that
	// abandon dead-letters it, and a deferred receive finds nothing.
	loc, _ = peekDeferred("second deferred receive", "2")
	b.do(t, call{method: http.MethodPut, path: settlePath(t, loc)}).want(t, "abandon d1 again", http.StatusOK)
	loc, _ = peekDeferred("third deferred receive", "3")
	b.do(t, call{method: http.MethodPut, path: settlePath(t, loc)}).want(t, "abandon d1 a third time", http.StatusOK)
	b.do(t, call{method: http.MethodPost, path: fmt.Sprintf("/d/messages/$deferred/%d", seq1)}).
		wantError(t, "deferred receive past MaxDeliveryCount", http.StatusNotFound, "No deferred message with sequence number")
	b.wantCounts(t, "after d1 was dead-lettered", "d", counted{active: 1, dead: 1})
	w := b.raw(t, http.MethodDelete, "/d/$DeadLetterQueue/messages/head?timeout=0", "")
	if w.statusLine != "HTTP/1.1 200 OK" || w.body != "first" || w.header["DeadLetterReason"] != `"MaxDeliveryCountExceeded"` {
		t.Errorf("receive d1 from the dead-letter queue = %s %v %q; want it with DeadLetterReason MaxDeliveryCountExceeded", w.statusLine, w.header, w.body)
	}

	// Receive-and-delete of a deferred message.
	rd, err := api.ReceiveAndDeleteDeferredWithResponse(ctx, "d", seq2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rd.StatusCode() != http.StatusOK || string(rd.Body) != "second" || rd.Headers200 == nil {
		t.Fatalf("ReceiveAndDeleteDeferred(%d) = %d %q; want 200 second", seq2, rd.StatusCode(), rd.Body)
	}
	if m := brokerProperties(t, showPtr(rd.Headers200.BrokerProperties)); m["MessageId"] != "d2" || fmt.Sprint(m["DeliveryCount"]) != "1" || m["LockToken"] != nil {
		t.Errorf("ReceiveAndDeleteDeferred: BrokerProperties %s; want d2 with DeliveryCount 1 (no failed delivery) without a lock", showPtr(rd.Headers200.BrokerProperties))
	}
	gone, err := api.ReceiveAndDeleteDeferredWithResponse(ctx, "d", seq2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gone.StatusCode() != http.StatusNotFound || gone.XML404 == nil || gone.XML404.Code != http.StatusNotFound {
		t.Errorf("ReceiveAndDeleteDeferred twice = %d %s; want 404", gone.StatusCode(), gone.Body)
	}
	b.wantCounts(t, "after receiving d2", "d", counted{})

	// An active message is not deferred; the dead-letter subqueue has none; the sequence number
	// is a number.
	b.send(t, "d", "active", withMessageID("d4"))
	seq4 := b.seqOf(t, "d", "d4")
	for _, tc := range []struct {
		method, path string
		status       int
		detail       string
	}{
		{http.MethodPost, fmt.Sprintf("/d/messages/$deferred/%d", seq4), http.StatusNotFound, fmt.Sprintf("No deferred message with sequence number %d", seq4)},
		{http.MethodDelete, fmt.Sprintf("/d/messages/$deferred/%d", seq4), http.StatusNotFound, fmt.Sprintf("No deferred message with sequence number %d", seq4)},
		{http.MethodDelete, "/d/messages/$deferred/999999", http.StatusNotFound, "No deferred message with sequence number 999999"},
		{http.MethodPost, fmt.Sprintf("/d/$DeadLetterQueue/messages/$deferred/%d", seq4), http.StatusBadRequest, "not its dead-letter subqueue"},
		{http.MethodPost, "/d/messages/$deferred/abc", http.StatusBadRequest, "sequenceNumber"},
		{http.MethodPost, "/nowhere/messages/$deferred/1", http.StatusNotFound, ""},
	} {
		b.do(t, call{method: tc.method, path: tc.path}).wantError(t, tc.method+" "+tc.path, tc.status, tc.detail)
	}
	// A dead letter cannot be deferred.
	b.send(t, "d", "dead", withMessageID("d5"))
	loc5, _ := b.peekLockHead(t, "d") // d4
	b.do(t, call{method: http.MethodDelete, path: loc5}).want(t, "complete d4", http.StatusOK)
	loc5, _ = b.peekLockHead(t, "d")
	b.do(t, call{method: http.MethodPost, path: loc5 + "/$deadletter"}).want(t, "dead-letter d5", http.StatusOK)
	dlq, _ := b.peekLockHead(t, "d/$DeadLetterQueue")
	b.do(t, call{method: http.MethodPost, path: dlq + "/$defer"}).wantError(t, "defer a dead letter", http.StatusNotFound, "The lock supplied is invalid.")
	b.wantCounts(t, "at the end", "d", counted{dead: 1})
}

func TestDeadLetterExtension(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	for i, body := range []string{"one", "two", "three", "four"} {
		b.send(t, "q", body, map[string]string{"BrokerProperties": fmt.Sprintf(`{"MessageId":"x%d"}`, i+1), "kind": `"x"`})
	}
	jsonBody := map[string]string{"Content-Type": "application/json"}

	loc, _ := b.peekLockHead(t, "q")
	b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter", header: jsonBody, key: "listener",
		body: `{"DeadLetterReason": "Bad \"input\"", "DeadLetterErrorDescription": "Field 'a' is missing."}`}).
		want(t, "dead-letter x1 with a reason and description", http.StatusOK)
	loc, _ = b.peekLockHead(t, "q")
	b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter", key: "listener"}).want(t, "dead-letter x2 without a body", http.StatusOK)
	// The generated client sends the documented DeadLetterRequest.
	_, bp := b.peekLockHead(t, "q")
	tok, err := uuid.Parse(fmt.Sprint(bp["LockToken"]))
	if err != nil {
		t.Fatal(err)
	}
	dl, err := b.api.DeadLetterMessageWithResponse(t.Context(), "q", fmt.Sprint(bp["SequenceNumber"]), tok, nil,
		client.DeadLetterRequest{DeadLetterReason: ptr("OnlyAReason")})
	if err != nil {
		t.Fatal(err)
	}
	if dl.StatusCode() != http.StatusOK {
		t.Fatalf("DeadLetterMessage(x3) = %d %s; want 200", dl.StatusCode(), dl.Body)
	}
	b.wantCounts(t, "after three dead-letters", "q", counted{active: 1, dead: 3})

	loc, _ = b.peekLockHead(t, "q")
	for _, tc := range []struct{ name, body, detail string }{
		{"not JSON", "reason", "The body must be a JSON object with DeadLetterReason and DeadLetterErrorDescription."},
		{"a number as reason", `{"DeadLetterReason": 5}`, "The body must be a JSON object"},
		{"a control character", `{"DeadLetterReason": "a\u0001b"}`, "may not contain control characters"},
		{"a newline", `{"DeadLetterErrorDescription": "line\nbreak"}`, "may not contain control characters"},
	} {
		b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter", header: jsonBody, body: tc.body}).
			wantError(t, "dead-letter with "+tc.name, http.StatusBadRequest, tc.detail)
	}
	b.wantCounts(t, "after the refused dead-letters", "q", counted{active: 1, dead: 3})
	b.clock.Advance(time.Minute) // the default LockDuration
	b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter"}).wantError(t, "dead-letter after the lock expired", http.StatusNotFound, "The lock supplied is invalid.")
	b.do(t, call{method: http.MethodPost, path: "/q/messages/1/00000000-0000-0000-0000-000000000000/$deadletter"}).
		wantError(t, "dead-letter with a wrong token", http.StatusNotFound, "The lock supplied is invalid.")
	b.wantCounts(t, "after the lost locks", "q", counted{active: 1, dead: 3})

	// The REST receive carries the reason and description as headers, exactly named and quoted.
	w := b.raw(t, http.MethodPost, "/q/$DeadLetterQueue/messages/head?timeout=0", "")
	if w.statusLine != "HTTP/1.1 201 Created" || w.body != "one" {
		t.Fatalf("peek-lock x1 from the dead-letter queue = %s %v %q", w.statusLine, w.header, w.body)
	}
	if got := w.header["DeadLetterReason"]; got != `"Bad \"input\""` {
		t.Errorf("x1: DeadLetterReason header %q; want %q", got, `"Bad \"input\""`)
	}
	if got := w.header["DeadLetterErrorDescription"]; got != `"Field 'a' is missing."` {
		t.Errorf("x1: DeadLetterErrorDescription header %q; want %q", got, `"Field 'a' is missing."`)
	}
	if w.header["kind"] != `"x"` {
		t.Errorf("x1: kind header %q; want the user property kept", w.header["kind"])
	}
	if bp := brokerProperties(t, w.header["BrokerProperties"]); bp["DeadLetterReason"] != nil {
		t.Errorf("x1: BrokerProperties %s carries the reason; the REST form has it as a header", w.header["BrokerProperties"])
	}
	x1 := settlePath(t, w.header["Location"])
	b.do(t, call{method: http.MethodPost, path: x1 + "/$deadletter"}).wantError(t, "dead-letter a dead letter", http.StatusBadRequest, "cannot be dead-lettered again")
	b.do(t, call{method: http.MethodPut, path: x1}).want(t, "abandon x1 in the dead-letter queue", http.StatusOK)

	// The JSON form carries them inside BrokerProperties, in ordinal order.
	msgs := b.do(t, call{method: http.MethodGet, path: "/q/$DeadLetterQueue/messages/$browse", key: "listener"}).messages(t, "browse the dead letters", http.StatusOK)
	want := []struct{ reason, description string }{
		{"Bad \"input\"", "Field 'a' is missing."},
		{"DeadLetteredByReceiver", ""},
		{"OnlyAReason", ""},
	}
	if len(msgs) != len(want) {
		t.Fatalf("browse the dead letters: %d; want %d", len(msgs), len(want))
	}
	for i, w := range want {
		bp := brokerProperties(t, string(msgs[i].BrokerProperties))
		if bp["DeadLetterReason"] != w.reason {
			t.Errorf("dead letter %d: DeadLetterReason %v; want %q", i, bp["DeadLetterReason"], w.reason)
		}
		if got, ok := bp["DeadLetterErrorDescription"]; w.description == "" && ok || w.description != "" && got != w.description {
			t.Errorf("dead letter %d: DeadLetterErrorDescription %v; want %q", i, got, w.description)
		}
		if fmt.Sprint(msgs[i].UserProperties) != "map[kind:x]" {
			t.Errorf("dead letter %d: UserProperties %v; want kind kept", i, msgs[i].UserProperties)
		}
	}

	// The default reason, and no description header when there is none.
	b.raw(t, http.MethodDelete, "/q/$DeadLetterQueue/messages/head?timeout=0", "") // x1
	w = b.raw(t, http.MethodDelete, "/q/$DeadLetterQueue/messages/head?timeout=0", "")
	if w.body != "two" || w.header["DeadLetterReason"] != `"DeadLetteredByReceiver"` {
		t.Errorf("receive x2 from the dead-letter queue: body %q, DeadLetterReason %q; want two, %q", w.body, w.header["DeadLetterReason"], `"DeadLetteredByReceiver"`)
	}
	if d, ok := w.header["DeadLetterErrorDescription"]; ok {
		t.Errorf("x2: DeadLetterErrorDescription header %q; want none", d)
	}
	b.wantCounts(t, "at the end", "q", counted{active: 1, dead: 1})
}

func TestCancelScheduled(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "s", "")
	b.send(t, "s", "in ten minutes", scheduledAt("s1", start.Add(10*time.Minute)))
	b.send(t, "s", "in one minute", scheduledAt("s2", start.Add(time.Minute)))
	b.send(t, "s", "now", withMessageID("s3"))
	b.send(t, "s", "in the past", scheduledAt("s4", start.Add(-time.Minute)))
	b.wantCounts(t, "after sending", "s", counted{active: 2, scheduled: 2})
	seq := map[string]int64{}
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		seq[id] = b.seqOf(t, "s", id)
	}
	cancel := func(id string) string { return fmt.Sprintf("/s/messages/$scheduled/%d", seq[id]) }

	b.do(t, call{method: http.MethodDelete, path: cancel("s1"), key: "sender"}).want(t, "cancel s1", http.StatusOK)
	b.wantCounts(t, "after cancelling s1", "s", counted{active: 2, scheduled: 1})
	b.do(t, call{method: http.MethodDelete, path: cancel("s1"), key: "sender"}).
		wantError(t, "cancel s1 twice", http.StatusNotFound, fmt.Sprintf("No scheduled message with sequence number %d is waiting in 's'.", seq["s1"]))
	for _, id := range []string{"s3", "s4"} {
		b.do(t, call{method: http.MethodDelete, path: cancel(id), key: "sender"}).wantError(t, "cancel the active "+id, http.StatusNotFound, "No scheduled message")
	}

	// Once its time has come a scheduled message is an active one.
	b.clock.Advance(time.Minute)
	b.wantCounts(t, "when s2's time comes", "s", counted{active: 3})
	r, err := b.api.CancelScheduledWithResponse(t.Context(), "s", seq["s2"], nil, b.signWith("sender"))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != http.StatusNotFound || r.XML404 == nil || !strings.Contains(r.XML404.Detail, "No scheduled message") {
		t.Errorf("CancelScheduled(s2) after its time = %d %s; want 404", r.StatusCode(), r.Body)
	}
	var got []string
	for range 3 {
		got = append(got, b.do(t, call{method: http.MethodDelete, path: "/s/messages/head?timeout=0"}).want(t, "receive", http.StatusOK).body)
	}
	if strings.Join(got, ", ") != "in one minute, now, in the past" {
		t.Errorf("received %q; want s2, s3, s4 in sequence order", got)
	}
	b.wantCounts(t, "at the end", "s", counted{})

	b.do(t, call{method: http.MethodDelete, path: "/s/$DeadLetterQueue/messages/$scheduled/1", key: "sender"}).
		wantError(t, "cancel in the dead-letter queue", http.StatusBadRequest, "not its dead-letter subqueue")
	b.do(t, call{method: http.MethodDelete, path: "/s/messages/$scheduled/next", key: "sender"}).
		wantError(t, "cancel a sequence number that is not a number", http.StatusBadRequest, "sequenceNumber")
	b.do(t, call{method: http.MethodDelete, path: "/nowhere/messages/$scheduled/1", key: "sender"}).
		wantError(t, "cancel in a missing queue", http.StatusNotFound, "")
}

func TestResubmit(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	b.createQueue(t, "r", "<LockDuration>PT5S</LockDuration><MaxDeliveryCount>1</MaxDeliveryCount>")
	dlq := "r/$DeadLetterQueue"

	// r1 runs out of deliveries; the others are dead-lettered by the receiver.
	b.send(t, "r", "r1", map[string]string{"BrokerProperties": `{"MessageId":"r1","Label":"alpha"}`, "region": `"eu"`})
	b.peekLockHead(t, "r")
	b.clock.Advance(5 * time.Second)
	b.do(t, call{method: http.MethodPost, path: "/r/messages/head?timeout=0"}).want(t, "r1 past MaxDeliveryCount", http.StatusNoContent)
	for _, m := range []struct{ id, label, region string }{
		{"r2", "beta", `"us"`}, {"r3", "another", `"eu"`}, {"r4", "apple", ""}, {"r5", "zeta", `"eu"`},
	} {
		h := map[string]string{"BrokerProperties": `{"MessageId":"` + m.id + `","Label":"` + m.label + `"}`}
		if m.region != "" {
			h["region"] = m.region
		}
		b.send(t, "r", m.id, h)
	}
	for _, m := range b.do(t, call{method: http.MethodPost, path: "/r/messages/$batch?timeout=0"}).messages(t, "lock r2 to r5", http.StatusCreated) {
		b.do(t, call{method: http.MethodPost, path: settlePath(t, m.Location) + "/$deadletter", body: `{"DeadLetterReason":"Rejected"}`}).
			want(t, "dead-letter", http.StatusOK)
	}
	b.wantCounts(t, "after dead-lettering five", "r", counted{dead: 5})
	original := map[string]int64{}
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5"} {
		original[id] = b.seqOf(t, dlq, id)
	}

	// A filter that does not compile is refused with where the problem is.
	for _, f := range []string{"region =", "sys.Label LIKE", "region = 'eu' AND", "(region = 'eu'", strings.Repeat("x", 1025)} {
		b.do(t, call{method: http.MethodPost, path: "/r/$DeadLetterQueue/messages/$resubmit?filter=" + url.QueryEscape(f)}).
			wantError(t, "resubmit with filter "+f, http.StatusBadRequest, "The filter is not a valid SQL filter expression:")
	}
	bad, err := b.api.ResubmitAllWithResponse(ctx, dlq, &client.ResubmitAllParams{Filter: ptr("region = = 'eu'")})
	if err != nil {
		t.Fatal(err)
	}
	if bad.StatusCode() != http.StatusBadRequest || bad.XML400 == nil || !strings.Contains(bad.XML400.Detail, "syntax error at position 10") {
		t.Errorf("ResubmitAll(region = = 'eu') = %d %s; want 400 pointing at position 10", bad.StatusCode(), bad.Body)
	}
	b.wantCounts(t, "after the refused filters", "r", counted{dead: 5})

	resubmitAll := func(filter string, want int64) {
		t.Helper()
		var params client.ResubmitAllParams
		if filter != "" {
			params.Filter = &filter
		}
		r, err := b.api.ResubmitAllWithResponse(ctx, dlq, &params)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != http.StatusOK || r.JSON200 == nil || r.JSON200.Count != want {
			t.Errorf("ResubmitAll(%q) = %d %s; want Count %d", filter, r.StatusCode(), r.Body, want)
		}
	}
	resubmitAll("DeadLetterReason = 'MaxDeliveryCountExceeded'", 1) // r1
	b.wantCounts(t, "after resubmitting by reason", "r", counted{active: 1, dead: 4})
	resubmitAll("user.region = 'eu'", 2) // r3, r5
	b.wantCounts(t, "after resubmitting by region", "r", counted{active: 3, dead: 2})
	resubmitAll("sys.Label LIKE 'a%'", 1) // r4; alpha and another are back already
	b.wantCounts(t, "after resubmitting by label", "r", counted{active: 4, dead: 1})

	one, err := b.api.ResubmitOneWithResponse(ctx, dlq, original["r2"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if one.StatusCode() != http.StatusOK || one.JSON200 == nil || one.JSON200.Count != 1 {
		t.Errorf("ResubmitOne(r2) = %d %s; want Count 1", one.StatusCode(), one.Body)
	}
	twice, err := b.api.ResubmitOneWithResponse(ctx, dlq, original["r2"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if twice.StatusCode() != http.StatusNotFound || twice.XML404 == nil ||
		!strings.Contains(twice.XML404.Detail, fmt.Sprintf("No dead-lettered message with sequence number %d is available in 'r'.", original["r2"])) {
		t.Errorf("ResubmitOne(r2) twice = %d %s; want 404", twice.StatusCode(), twice.Body)
	}
	b.wantCounts(t, "after resubmitting r2", "r", counted{active: 5})
	resubmitAll("", 0)

	// Each came back as a new message: at the back, no deliveries, no dead-letter reason, its
	// properties kept.
	var order []string
	for _, m := range b.browseAll(t, "r") {
		id := messageID(m)
		order = append(order, id)
		bp := m.BrokerProperties
		if seqNumber(t, m) <= original["r5"] || showPtr(bp.DeliveryCount) != "0" || bp.DeadLetterReason != nil || bp.DeadLetterErrorDescription != nil || showPtr(m.Body) != id {
			t.Errorf("resubmitted %s: SequenceNumber %d (was %d), DeliveryCount %s, DeadLetterReason %s, Body %s",
				id, seqNumber(t, m), original[id], showPtr(bp.DeliveryCount), showPtr(bp.DeadLetterReason), showPtr(m.Body))
		}
	}
	if got := strings.Join(order, " "); got != "r1 r3 r5 r4 r2" {
		t.Errorf("order after resubmitting = %s; want the order of resubmission r1 r3 r5 r4 r2", got)
	}
	r := b.do(t, call{method: http.MethodPost, path: "/r/messages/head?timeout=0"}).want(t, "receive r1 again", http.StatusCreated)
	if r.body != "r1" || r.header.Get("DeadLetterReason") != "" || r.header.Get("region") != `"eu"` {
		t.Errorf("receive r1 again: body %q, DeadLetterReason %q, region %q", r.body, r.header.Get("DeadLetterReason"), r.header.Get("region"))
	}

	// Resubmit only takes from a dead-letter subqueue.
	main, err := b.api.ResubmitOneWithResponse(ctx, "r", original["r1"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if main.StatusCode() != http.StatusBadRequest || main.XML400 == nil || !strings.Contains(main.XML400.Detail, "r/$DeadLetterQueue/messages/$resubmit") {
		t.Errorf("ResubmitOne on the queue = %d %s; want 400", main.StatusCode(), main.Body)
	}
	b.do(t, call{method: http.MethodPost, path: "/r/messages/$resubmit"}).wantError(t, "resubmit all on the queue", http.StatusBadRequest, "Resubmit takes messages from a dead-letter subqueue")
	b.do(t, call{method: http.MethodPost, path: "/nowhere/$DeadLetterQueue/messages/$resubmit"}).wantError(t, "resubmit in a missing queue", http.StatusNotFound, "")

	// A dead letter under a valid lock stays where it is until the lock ends.
	b.do(t, call{method: http.MethodPost, path: settlePath(t, r.header.Get("Location")) + "/$deadletter"}).want(t, "dead-letter r1 again", http.StatusOK)
	loc, _ := b.peekLockHead(t, "r")
	b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter"}).want(t, "dead-letter r3 again", http.StatusOK)
	b.peekLockHead(t, dlq) // r1, locked for 5 s
	r1 := b.seqOf(t, dlq, "r1")
	resubmitAll("", 1) // r3
	b.do(t, call{method: http.MethodPost, path: fmt.Sprintf("/r/$DeadLetterQueue/messages/$resubmit/%d", r1)}).
		wantError(t, "resubmit a locked dead letter", http.StatusNotFound, "No dead-lettered message")
	b.wantCounts(t, "with r1 locked in the dead-letter queue", "r", counted{active: 4, dead: 1})
	b.clock.Advance(5 * time.Second)
	b.do(t, call{method: http.MethodPost, path: fmt.Sprintf("/r/$DeadLetterQueue/messages/$resubmit/%d", r1)}).
		countResult(t, "resubmit r1 after its lock ended", 1)
	b.wantCounts(t, "at the end", "r", counted{active: 5})
}

func TestPurge(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	b.createQueue(t, "p", "")
	for i := 1; i <= 6; i++ {
		b.send(t, "p", fmt.Sprintf("p%d", i), withMessageID(fmt.Sprintf("p%d", i)))
	}
	b.send(t, "p", "p7", scheduledAt("p7", start.Add(time.Hour)))
	loc, _ := b.peekLockHead(t, "p")
	b.do(t, call{method: http.MethodPost, path: loc + "/$defer"}).want(t, "defer p1", http.StatusOK)
	for range 2 {
		loc, _ = b.peekLockHead(t, "p")
		b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter"}).want(t, "dead-letter", http.StatusOK)
	}
	held, _ := b.peekLockHead(t, "p") // p4
	p1 := b.seqOf(t, "p", "p1")
	b.wantCounts(t, "before purging", "p", counted{active: 4, scheduled: 1, dead: 2})

	purge := func(path string, want int64) {
		t.Helper()
		r, err := b.api.PurgeMessagesWithResponse(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != http.StatusOK || r.JSON200 == nil || r.JSON200.Count != want {
			t.Errorf("PurgeMessages(%q) = %d %s; want Count %d", path, r.StatusCode(), r.Body, want)
		}
	}
	// The queue: active, deferred, locked and scheduled messages; not the dead letters.
	purge("p", 5)
	b.wantCounts(t, "after purging the queue", "p", counted{dead: 2})
	b.do(t, call{method: http.MethodDelete, path: held}).wantError(t, "complete a purged message", http.StatusNotFound, "The lock supplied is invalid.")
	b.do(t, call{method: http.MethodPost, path: fmt.Sprintf("/p/messages/$deferred/%d", p1)}).
		wantError(t, "receive the purged deferred message", http.StatusNotFound, "No deferred message")
	if msgs := b.browseAll(t, "p/$DeadLetterQueue"); len(msgs) != 2 {
		t.Errorf("dead letters after purging the queue: %d; want 2", len(msgs))
	}

	// The dead-letter subqueue, through a raw request for the exact answer.
	b.do(t, call{method: http.MethodDelete, path: "/p/$DeadLetterQueue/messages"}).countResult(t, "purge the dead letters", 2)
	b.wantCounts(t, "after purging the dead letters", "p", counted{})
	purge("p/$DeadLetterQueue", 0)
	purge("p", 0)

	// A purge does not stop the queue: a new message is received as usual.
	b.send(t, "p", "after", nil)
	if r := b.do(t, call{method: http.MethodDelete, path: "/p/messages/head?timeout=0"}).want(t, "receive after purging", http.StatusOK); r.body != "after" {
		t.Errorf("receive after purging: %q", r.body)
	}

	missing, err := b.api.PurgeMessagesWithResponse(ctx, "nowhere", nil)
	if err != nil {
		t.Fatal(err)
	}
	if missing.StatusCode() != http.StatusNotFound || missing.XML404 == nil {
		t.Errorf("PurgeMessages(nowhere) = %d %s; want 404", missing.StatusCode(), missing.Body)
	}
}

// TestExtensionRights sends each extension with the keys that lack its right (401, nothing
// changes) and then with the one that has it.
func TestExtensionRights(t *testing.T) {
	b := setup(t)
	lockedIn := func(t *testing.T, q string) string {
		b.send(t, q, "m", nil)
		loc, _ := b.peekLockHead(t, q)
		return loc
	}
	deferredIn := func(t *testing.T, q string) int64 {
		b.send(t, q, "m", withMessageID("d"))
		loc, _ := b.peekLockHead(t, q)
		b.do(t, call{method: http.MethodPost, path: loc + "/$defer"}).want(t, "defer", http.StatusOK)
		return b.seqOf(t, q, "d")
	}
	deadIn := func(t *testing.T, q string) int64 {
		b.send(t, q, "m", withMessageID("dl"))
		loc, _ := b.peekLockHead(t, q)
		b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter"}).want(t, "dead-letter", http.StatusOK)
		return b.seqOf(t, q+"/$DeadLetterQueue", "dl")
	}
	tests := []struct {
		name    string
		method  string
		prepare func(t *testing.T, q string) string // returns the path
		right   string                              // the claim needed
		key     string                              // a key that has it
		status  int
	}{
		{"browse", http.MethodGet, func(t *testing.T, q string) string { return "/" + q + "/messages/$browse" }, "Listen", "listener", http.StatusOK},
		{"batch peek-lock", http.MethodPost, func(t *testing.T, q string) string {
			b.send(t, q, "m", nil)
			return "/" + q + "/messages/$batch?timeout=0"
		}, "Listen", "listener", http.StatusCreated},
		{"batch receive-and-delete", http.MethodDelete, func(t *testing.T, q string) string {
			b.send(t, q, "m", nil)
			return "/" + q + "/messages/$batch?timeout=0"
		}, "Listen", "listener", http.StatusOK},
		{"defer", http.MethodPost, func(t *testing.T, q string) string { return lockedIn(t, q) + "/$defer" }, "Listen", "listener", http.StatusOK},
		{"dead-letter", http.MethodPost, func(t *testing.T, q string) string { return lockedIn(t, q) + "/$deadletter" }, "Listen", "listener", http.StatusOK},
		{"deferred peek-lock", http.MethodPost, func(t *testing.T, q string) string {
			return fmt.Sprintf("/%s/messages/$deferred/%d", q, deferredIn(t, q))
		}, "Listen", "listener", http.StatusCreated},
		{"deferred receive-and-delete", http.MethodDelete, func(t *testing.T, q string) string {
			return fmt.Sprintf("/%s/messages/$deferred/%d", q, deferredIn(t, q))
		}, "Listen", "listener", http.StatusOK},
		{"cancel scheduled", http.MethodDelete, func(t *testing.T, q string) string {
			b.send(t, q, "m", scheduledAt("s", start.Add(time.Hour)))
			return fmt.Sprintf("/%s/messages/$scheduled/%d", q, b.seqOf(t, q, "s"))
		}, "Send", "sender", http.StatusOK},
		{"purge", http.MethodDelete, func(t *testing.T, q string) string {
			b.send(t, q, "m", nil)
			return "/" + q + "/messages"
		}, "Manage,EntityRead", "root", http.StatusOK},
		{"purge dead letters", http.MethodDelete, func(t *testing.T, q string) string {
			deadIn(t, q)
			return "/" + q + "/$DeadLetterQueue/messages"
		}, "Manage,EntityRead", "rotated", http.StatusOK},
		{"resubmit all", http.MethodPost, func(t *testing.T, q string) string {
			deadIn(t, q)
			return "/" + q + "/$DeadLetterQueue/messages/$resubmit?filter=" + url.QueryEscape("sys.Label IS NULL")
		}, "Manage,EntityRead", "root", http.StatusOK},
		{"resubmit one", http.MethodPost, func(t *testing.T, q string) string {
			return fmt.Sprintf("/%s/$DeadLetterQueue/messages/$resubmit/%d", q, deadIn(t, q))
		}, "Manage,EntityRead", "root", http.StatusOK},
	}
	for i, tc := range tests {
		q := fmt.Sprintf("rights%d", i)
		b.createQueue(t, q, "")
		path := tc.prepare(t, q)
		before := b.counts(t, q)
		for _, key := range []string{"sender", "listener"} {
			if key == tc.key {
				continue
			}
			b.do(t, call{method: tc.method, path: path, key: key}).wantError(t, tc.name+" with the "+key+" key", http.StatusUnauthorized,
				"Unauthorized access. '"+tc.right+"' claim(s) are required to perform this operation.")
		}
		if after := b.counts(t, q); after != before {
			t.Errorf("%s: counts after the refused requests = %+v; want %+v", tc.name, after, before)
		}
		b.do(t, call{method: tc.method, path: path, key: tc.key}).want(t, tc.name+" with the "+tc.key+" key", tc.status)
	}
}
