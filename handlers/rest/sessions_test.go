package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/api/client"
)

// Sessions over HTTP (the sbgate extension): accept, receive and settle under the session's
// Location, session state, renew, release and lock expiry, driven raw for the exact answers and
// through the generated client to prove openapi.yaml.

// acceptedSession is the JSON answer of an accept or a session renew.
type acceptedSession struct {
	SessionID      string `json:"SessionId"`
	LockToken      string `json:"LockToken"`
	LockedUntilUtc string `json:"LockedUntilUtc"`
}

// sessionAnswer checks a session answer: the status, the JSON content type, exactly the three
// fields, a Location (on accept and renew alike) naming the session and its token.
func (b *bundle) sessionAnswer(t *testing.T, what string, r result, status int, entity string) (string, acceptedSession) {
	t.Helper()
	r.want(t, what, status)
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("%s: Content-Type = %q; want application/json; charset=utf-8", what, ct)
	}
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	var s acceptedSession
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("%s: body %q: %v", what, r.body, err)
	}
	if !lockTokenRE.MatchString(s.LockToken) || s.SessionID == "" || s.LockedUntilUtc == "" {
		t.Errorf("%s: %+v; want a session id, a lower-case GUID and a lock end", what, s)
	}
	loc := r.header.Get("Location")
	if want := b.url + "/" + entity + "/sessions/" + url.PathEscape(s.SessionID) + "/" + s.LockToken; loc != want {
		t.Errorf("%s: Location = %q; want %q", what, loc, want)
	}
	return settlePath(t, loc), s
}

// acceptNext accepts the next session of entity and expects one.
func (b *bundle) acceptNext(t *testing.T, entity string) (string, acceptedSession) {
	t.Helper()
	r := b.do(t, call{method: http.MethodPost, path: "/" + entity + "/sessions/$accept?timeout=0", key: "listener"})
	return b.sessionAnswer(t, "accept the next session of "+entity, r, http.StatusCreated, entity)
}

// sessionHead peek-locks the next message of an accepted session and checks that its Location
// continues under the session's.
func (b *bundle) sessionHead(t *testing.T, what, session string) (string, map[string]any, string) {
	t.Helper()
	r := b.do(t, call{method: http.MethodPost, path: session + "/messages/head?timeout=0", key: "listener"}).want(t, what, http.StatusCreated)
	bp := brokerProperties(t, r.header.Get("BrokerProperties"))
	loc := r.header.Get("Location")
	if want := fmt.Sprintf("%s%s/messages/%v/%v", b.url, session, bp["SequenceNumber"], bp["LockToken"]); loc != want {
		t.Errorf("%s: Location = %q; want %q", what, loc, want)
	}
	return settlePath(t, loc), bp, r.body
}

// sessionList reads a ListSessions answer as "id [messages] [state] [until …]; …".
func sessionList(t *testing.T, r result) string {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("list sessions: Content-Type = %q", ct)
	}
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	var infos []client.SessionInfo
	if err := dec.Decode(&infos); err != nil {
		t.Fatalf("list sessions %q: %v", r.body, err)
	}
	var parts []string
	for _, in := range infos {
		s := in.SessionId
		if in.HasMessages {
			s += " messages"
		}
		if in.HasState {
			s += " state"
		}
		if in.LockedUntilUtc != nil {
			s += " until " + *in.LockedUntilUtc
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func sessionMessage(id, session string) map[string]string {
	return map[string]string{"BrokerProperties": fmt.Sprintf(`{"MessageId":%q,"SessionId":%q}`, id, session)}
}

// TestSessionWalkThrough drives one session queue through every session operation.
func TestSessionWalkThrough(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "<RequiresSession>true</RequiresSession><LockDuration>PT30S</LockDuration>")
	for _, m := range []struct{ id, session string }{{"a1", "s1"}, {"a2", "s1"}, {"a3", "s1"}, {"a4", "s1"}, {"b1", "s2"}} {
		b.send(t, "q", m.id, sessionMessage(m.id, m.session))
	}
	b.do(t, call{method: http.MethodPost, path: "/q/messages", body: "no session", key: "sender"}).
		wantError(t, "send without a SessionId", http.StatusBadRequest, "SessionId")

	// A plain receive cannot serve a session queue, nor can a plain settlement.
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		b.do(t, call{method: method, path: "/q/messages/head?timeout=0"}).
			wantError(t, method+" /q/messages/head", http.StatusBadRequest, "requires sessions")
	}

	// Accept: the session whose messages waited longest, as JSON with its Location.
	s1, lock1 := b.acceptNext(t, "q")
	if lock1.SessionID != "s1" || lock1.LockedUntilUtc != "Sun, 01 Mar 2026 12:00:30 GMT" {
		t.Errorf("first accept = %+v; want s1 locked until 12:00:30", lock1)
	}
	r := b.do(t, call{method: http.MethodPost, path: "/q/sessions/s1/$accept", key: "listener"})
	r.wantError(t, "accept the held s1 by name", http.StatusConflict, "SessionCannotBeLocked")
	s2, lock2 := b.acceptNext(t, "q")
	if lock2.SessionID != "s2" {
		t.Errorf("second accept = %+v; want s2", lock2)
	}
	r = b.do(t, call{method: http.MethodPost, path: "/q/sessions/$accept?timeout=0", key: "listener"}).want(t, "accept with none left", http.StatusNoContent)
	if r.body != "" {
		t.Errorf("accept with none left: body %q; want none", r.body)
	}

	// Peek-lock under the session; settle at the message's Location.
	loc, bp, body := b.sessionHead(t, "head of s1", s1)
	if body != "a1" || bp["SessionId"] != "s1" || fmt.Sprint(bp["DeliveryCount"]) != "1" || bp["LockedUntilUtc"] != "Sun, 01 Mar 2026 12:00:30 GMT" {
		t.Errorf("head of s1 = %q %v; want a1, delivery 1, locked 30 s", body, bp)
	}
	b.clock.Advance(10 * time.Second)
	r = b.do(t, call{method: http.MethodPost, path: loc, key: "listener"}).want(t, "renew a1's lock", http.StatusOK)
	if got := brokerProperties(t, r.header.Get("BrokerProperties"))["LockedUntilUtc"]; got != "Sun, 01 Mar 2026 12:00:40 GMT" {
		t.Errorf("renew a1: LockedUntilUtc = %v; want 12:00:40", got)
	}
	b.do(t, call{method: http.MethodPut, path: loc, key: "listener"}).want(t, "unlock a1", http.StatusOK)
	loc, bp, body = b.sessionHead(t, "head of s1 after unlock", s1)
	if body != "a1" || fmt.Sprint(bp["DeliveryCount"]) != "2" {
		t.Errorf("head after unlock = %q, delivery %v; want a1, 2", body, bp["DeliveryCount"])
	}
	// The lock is the session's: another session's path does not reach it, nor the plain path.
	b.do(t, call{method: http.MethodDelete, path: strings.Replace(loc, s1, s2, 1), key: "listener"}).
		wantError(t, "complete a1 under s2", http.StatusNotFound, "")
	b.do(t, call{method: http.MethodDelete, path: strings.Replace(loc, s1, "/q", 1), key: "listener"}).
		wantError(t, "complete a1 outside its session", http.StatusBadRequest, "settled in their session")
	b.do(t, call{method: http.MethodDelete, path: loc, key: "listener"}).want(t, "complete a1", http.StatusOK)
	b.do(t, call{method: http.MethodDelete, path: loc, key: "listener"}).wantError(t, "complete a1 twice", http.StatusNotFound, "The lock supplied is invalid.")

	// A batch under the session, in order, each with its settlement Location.
	msgs := b.do(t, call{method: http.MethodPost, path: s1 + "/messages/$batch?count=10&timeout=0", key: "listener"}).messages(t, "batch of s1", http.StatusCreated)
	var ids []string
	locs := map[string]string{}
	seqs := map[string]string{}
	for _, m := range msgs {
		var bp map[string]any
		if err := json.Unmarshal(m.BrokerProperties, &bp); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint(bp["MessageId"])
		ids = append(ids, id)
		seqs[id] = fmt.Sprint(bp["SequenceNumber"])
		locs[id] = settlePath(t, m.Location)
		if want := fmt.Sprintf("%s/messages/%v/%v", s1, bp["SequenceNumber"], bp["LockToken"]); locs[id] != want {
			t.Errorf("batch of s1, %s: Location %q; want %q", id, locs[id], want)
		}
	}
	if fmt.Sprint(ids) != "[a2 a3 a4]" {
		t.Fatalf("batch of s1 = %v; want [a2 a3 a4]", ids)
	}
	// Defer a2 and take it back by sequence number; dead-letter a3; keep a4 locked.
	b.do(t, call{method: http.MethodPost, path: locs["a2"] + "/$defer", key: "listener"}).want(t, "defer a2", http.StatusOK)
	b.do(t, call{method: http.MethodPost, path: locs["a3"] + "/$deadletter", key: "listener"}).want(t, "dead-letter a3", http.StatusOK)
	b.do(t, call{method: http.MethodPost, path: "/q/messages/$deferred/" + seqs["a2"]}).
		wantError(t, "deferred a2 outside its session", http.StatusBadRequest, "sessions")
	r = b.do(t, call{method: http.MethodPost, path: s1 + "/messages/$deferred/" + seqs["a2"], key: "listener"}).want(t, "receive deferred a2", http.StatusCreated)
	dbp := brokerProperties(t, r.header.Get("BrokerProperties"))
	if r.body != "a2" || dbp["State"] != "Deferred" {
		t.Errorf("receive deferred a2 = %q %v; want a2 in state Deferred", r.body, dbp)
	}
	if want := fmt.Sprintf("%s%s/messages/%s/%v", b.url, s1, seqs["a2"], dbp["LockToken"]); r.header.Get("Location") != want {
		t.Errorf("receive deferred a2: Location %q; want %q", r.header.Get("Location"), want)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, r.header.Get("Location")), key: "listener"}).want(t, "complete a2", http.StatusOK)
	w := b.raw(t, http.MethodDelete, "/q/$DeadLetterQueue/messages/head?timeout=0", "")
	if w.statusLine != "HTTP/1.1 200 OK" || w.body != "a3" || w.header["DeadLetterReason"] != `"DeadLetteredByReceiver"` {
		t.Errorf("receive a3 from the dead-letter queue = %s %v %q", w.statusLine, w.header, w.body)
	}

	// Session state: none, set, read, cleared.
	r = b.do(t, call{method: http.MethodGet, path: s1 + "/state", key: "listener"}).want(t, "state before any", http.StatusNoContent)
	if r.body != "" {
		t.Errorf("state before any: body %q", r.body)
	}
	b.do(t, call{method: http.MethodPut, path: s1 + "/state", body: "checkpoint\x00\x01", key: "listener",
		header: map[string]string{"Content-Type": "application/octet-stream"}}).want(t, "set state", http.StatusOK)
	r = b.do(t, call{method: http.MethodGet, path: s1 + "/state", key: "listener"}).want(t, "state", http.StatusOK)
	if r.body != "checkpoint\x00\x01" || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("state = %q (%s); want the bytes set", r.body, r.header.Get("Content-Type"))
	}

	// The list shows each session's messages, state and lock.
	r = b.do(t, call{method: http.MethodGet, path: "/q/sessions", key: "listener"}).want(t, "list sessions", http.StatusOK)
	if got, want := sessionList(t, r), "[s1 messages state until Sun, 01 Mar 2026 12:00:30 GMT; s2 messages until Sun, 01 Mar 2026 12:00:30 GMT]"; got != want {
		t.Errorf("list sessions = %s; want %s", got, want)
	}

	// Renew the session: a new end, the same token, the same Location.
	b.clock.Advance(10 * time.Second) // 12:00:20
	r = b.do(t, call{method: http.MethodPost, path: s1, key: "listener"})
	renewed, lock := b.sessionAnswer(t, "renew s1", r, http.StatusOK, "q")
	if renewed != s1 || lock.LockToken != lock1.LockToken || lock.LockedUntilUtc != "Sun, 01 Mar 2026 12:00:50 GMT" {
		t.Errorf("renew s1 = %+v at %s; want the same token locked until 12:00:50", lock, renewed)
	}
	b.do(t, call{method: http.MethodPut, path: s1 + "/state", key: "listener"}).want(t, "clear state", http.StatusOK)
	b.do(t, call{method: http.MethodGet, path: s1 + "/state", key: "listener"}).want(t, "state after clearing", http.StatusNoContent)

	// Release with a4 locked: the next holder starts from a4, delivered a second time.
	b.do(t, call{method: http.MethodPost, path: s1 + "/messages/head?timeout=0", key: "listener"}).want(t, "head of s1 with a4 locked", http.StatusNoContent)
	loc = locs["a4"]
	r = b.do(t, call{method: http.MethodDelete, path: s1, key: "listener"}).want(t, "release s1", http.StatusOK)
	if r.body != "" {
		t.Errorf("release s1: body %q", r.body)
	}
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, s1 + "/messages/head?timeout=0"},
		{http.MethodDelete, loc},
		{http.MethodPost, s1},
		{http.MethodDelete, s1},
		{http.MethodGet, s1 + "/state"},
	} {
		b.do(t, call{method: tc.method, path: tc.path, key: "listener"}).
			wantError(t, tc.method+" "+tc.path+" after release", http.StatusNotFound, "lock")
	}
	s1again, lock := b.acceptNext(t, "q")
	if lock.SessionID != "s1" || lock.LockToken == lock1.LockToken {
		t.Errorf("accept after release = %+v; want s1 under a new token", lock)
	}
	_, bp, body = b.sessionHead(t, "head after release", s1again)
	if body != "a4" || fmt.Sprint(bp["DeliveryCount"]) != "2" {
		t.Errorf("head after release = %q, delivery %v; want a4 on its second delivery", body, bp["DeliveryCount"])
	}

	// s2's lock ends at 12:00:30 with b1 locked under it: every operation under the old Location
	// is a lost lock, and the next holder gets b1 again.
	loc, _, body = b.sessionHead(t, "head of s2", s2)
	if body != "b1" {
		t.Fatalf("head of s2 = %q; want b1", body)
	}
	b.clock.Advance(10 * time.Second) // 12:00:30
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, s2 + "/messages/head?timeout=0"},
		{http.MethodPost, s2 + "/messages/$batch?timeout=0"},
		{http.MethodDelete, loc},
		{http.MethodPost, loc},
		{http.MethodPost, s2},
		{http.MethodPut, s2 + "/state"},
	} {
		b.do(t, call{method: tc.method, path: tc.path, key: "listener"}).
			wantError(t, tc.method+" "+tc.path+" after the session lock expired", http.StatusNotFound, "lock")
	}
	r = b.do(t, call{method: http.MethodPost, path: "/q/sessions/s2/$accept", key: "listener"})
	s2again, lock := b.sessionAnswer(t, "accept s2 by name after expiry", r, http.StatusCreated, "q")
	if lock.SessionID != "s2" || lock.LockToken == lock2.LockToken {
		t.Errorf("accept s2 by name = %+v; want s2 under a new token", lock)
	}
	_, bp, body = b.sessionHead(t, "head of s2 again", s2again)
	if body != "b1" || fmt.Sprint(bp["DeliveryCount"]) != "2" {
		t.Errorf("head of s2 again = %q, delivery %v; want b1 on its second delivery", body, bp["DeliveryCount"])
	}
	// Once every lock has run out the list shows no lock; the unsettled messages remain.
	b.clock.Advance(time.Minute)
	r = b.do(t, call{method: http.MethodGet, path: "/q/sessions?$top=1", key: "listener"}).want(t, "list sessions, first page", http.StatusOK)
	if got := sessionList(t, r); got != "[s1 messages]" {
		t.Errorf("list sessions $top=1 = %s; want [s1 messages]", got)
	}
	r = b.do(t, call{method: http.MethodGet, path: "/q/sessions?$skip=1", key: "listener"}).want(t, "list sessions, second page", http.StatusOK)
	if got := sessionList(t, r); got != "[s2 messages]" {
		t.Errorf("list sessions $skip=1 = %s; want [s2 messages]", got)
	}
}

// TestSessionErrors covers the refusals: entities without sessions, rights, bad paths.
func TestSessionErrors(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "plain", "")
	b.createQueue(t, "sq", "<RequiresSession>true</RequiresSession>")
	b.createTopic(t, "t", "")
	b.send(t, "sq", "x", sessionMessage("x", "s"))

	for _, tc := range []struct {
		name, method, path, key string
		status                  int
		detail                  string
	}{
		{"accept on a queue without sessions", http.MethodPost, "/plain/sessions/$accept?timeout=0", "", http.StatusBadRequest, "does not require sessions"},
		{"accept on a topic", http.MethodPost, "/t/sessions/$accept?timeout=0", "", http.StatusBadRequest, "not on topic"},
		{"accept on a dead-letter queue", http.MethodPost, "/sq/$DeadLetterQueue/sessions/$accept?timeout=0", "", http.StatusBadRequest, "dead-letter subqueue"},
		{"accept on a missing queue", http.MethodPost, "/nowhere/sessions/$accept?timeout=0", "", http.StatusNotFound, "could not be found"},
		{"accept with a send key", http.MethodPost, "/sq/sessions/$accept?timeout=0", "sender", http.StatusUnauthorized, "'Listen' claim(s) are required"},
		{"accept by name with a send key", http.MethodPost, "/sq/sessions/s/$accept", "sender", http.StatusUnauthorized, "'Listen' claim(s) are required"},
		{"list with a send key", http.MethodGet, "/sq/sessions", "sender", http.StatusUnauthorized, "'Listen' claim(s) are required"},
		{"state with a send key", http.MethodGet, "/sq/sessions/s/00000000-0000-0000-0000-000000000000/state", "sender", http.StatusUnauthorized, "'Listen' claim(s) are required"},
		{"negative timeout", http.MethodPost, "/sq/sessions/$accept?timeout=-1", "", http.StatusBadRequest, "timeout"},
		{"a session token that is no GUID", http.MethodPost, "/sq/sessions/s/not-a-guid/messages/head?timeout=0", "", http.StatusBadRequest, ""},
		{"a session never accepted", http.MethodPost, "/sq/sessions/s/00000000-0000-0000-0000-000000000000/messages/head?timeout=0", "", http.StatusNotFound, "The session lock has expired"},
		{"list on a queue without sessions", http.MethodGet, "/plain/sessions", "", http.StatusBadRequest, "does not require sessions"},
		{"PUT on $accept", http.MethodPut, "/sq/sessions/$accept", "", http.StatusNotFound, "No service is hosted"},
	} {
		b.do(t, call{method: tc.method, path: tc.path, key: tc.key}).wantError(t, tc.name, tc.status, tc.detail)
	}
	// Nothing was accepted by the refused requests.
	_, lock := b.acceptNext(t, "sq")
	if lock.SessionID != "s" {
		t.Errorf("accept after the refusals = %+v; want s", lock)
	}
	// A named session need not have messages; it is locked all the same.
	r := b.do(t, call{method: http.MethodPost, path: "/sq/sessions/empty%20one/$accept", key: "listener"})
	loc, lock := b.sessionAnswer(t, "accept an empty session by name", r, http.StatusCreated, "sq")
	if lock.SessionID != "empty one" || !strings.Contains(loc, "/sq/sessions/empty%20one/") {
		t.Errorf("accept an empty session by name = %+v at %s", lock, loc)
	}
	b.do(t, call{method: http.MethodPost, path: loc + "/messages/head?timeout=0", key: "listener"}).want(t, "head of an empty session", http.StatusNoContent)
	b.do(t, call{method: http.MethodPost, path: "/sq/sessions/empty%20one/$accept", key: "listener"}).
		wantError(t, "accept it again", http.StatusConflict, "SessionCannotBeLocked")
	// The state has a size limit.
	b.do(t, call{method: http.MethodPut, path: loc + "/state", body: strings.Repeat("x", 256*1024+1), key: "listener"}).
		wantError(t, "state over 256 KB", http.StatusForbidden, "at most 262144 bytes")
}

// TestSubscriptionSessions accepts sessions of a session-ful subscription.
func TestSubscriptionSessions(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "t", "")
	b.createSubscription(t, "t", "ss", "<RequiresSession>true</RequiresSession>")
	b.createSubscription(t, "t", "plain", "")
	b.send(t, "t", "one", sessionMessage("one", "s-a"))
	b.send(t, "t", "two", sessionMessage("two", "s-b"))
	b.send(t, "t", "three", sessionMessage("three", "s-a"))

	b.do(t, call{method: http.MethodPost, path: "/t/Subscriptions/ss/messages/head?timeout=0"}).
		wantError(t, "plain receive from ss", http.StatusBadRequest, "requires sessions")
	// The subscription without sessions got everything, in order, sessions or not.
	if got := bodies(b.drain(t, "t/Subscriptions/plain"), ""); got != "one two three" {
		t.Errorf("plain received %q; want one two three", got)
	}

	sess, lock := b.acceptNext(t, "t/Subscriptions/ss")
	if lock.SessionID != "s-a" {
		t.Fatalf("accept on ss = %+v; want s-a", lock)
	}
	loc, _, body := b.sessionHead(t, "head of s-a", sess)
	if body != "one" {
		t.Errorf("head of s-a = %q; want one", body)
	}
	b.do(t, call{method: http.MethodDelete, path: loc, key: "listener"}).want(t, "complete one", http.StatusOK)
	r := b.do(t, call{method: http.MethodDelete, path: sess + "/messages/head?timeout=0", key: "listener"}).want(t, "receive-and-delete in s-a", http.StatusOK)
	if r.body != "three" || r.header.Get("Location") != "" {
		t.Errorf("receive-and-delete in s-a = %q (Location %q); want three", r.body, r.header.Get("Location"))
	}
	b.do(t, call{method: http.MethodPost, path: sess + "/messages/head?timeout=0", key: "listener"}).want(t, "s-a is empty", http.StatusNoContent)

	// Python's casing reaches the same subscription; the Location keeps the request's casing.
	r = b.do(t, call{method: http.MethodPost, path: "/t/subscriptions/ss/sessions/$accept?timeout=0", key: "listener"})
	sessB, lock := b.sessionAnswer(t, "accept on t/subscriptions/ss", r, http.StatusCreated, "t/subscriptions/ss")
	if lock.SessionID != "s-b" {
		t.Errorf("accept on t/subscriptions/ss = %+v; want s-b", lock)
	}
	_, _, body = b.sessionHead(t, "head of s-b", sessB)
	if body != "two" {
		t.Errorf("head of s-b = %q; want two", body)
	}
	r = b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/ss/sessions", key: "listener"}).want(t, "list ss sessions", http.StatusOK)
	if got, want := sessionList(t, r), "[s-a until Sun, 01 Mar 2026 12:01:00 GMT; s-b messages until Sun, 01 Mar 2026 12:01:00 GMT]"; got != want {
		t.Errorf("list ss sessions = %s; want %s", got, want)
	}
	// A topic's key rights apply: Send-only cannot accept.
	b.do(t, call{method: http.MethodPost, path: "/t/Subscriptions/ss/sessions/$accept?timeout=0", key: "sender"}).
		wantError(t, "accept on ss with a send key", http.StatusUnauthorized, "'Listen' claim(s) are required")
}

// TestSessionsGeneratedClient walks a session through the client generated from openapi.yaml.
func TestSessionsGeneratedClient(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	api := b.api
	b.createQueue(t, "gq", "<RequiresSession>true</RequiresSession><LockDuration>PT20S</LockDuration>")
	for i := 1; i <= 4; i++ {
		bp := fmt.Sprintf(`{"MessageId":"m%d","SessionId":"order-7"}`, i)
		sent, err := api.SendMessageWithBodyWithResponse(ctx, "gq", &client.SendMessageParams{BrokerProperties: &bp}, "text/plain", strings.NewReader(fmt.Sprintf("m%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if sent.StatusCode() != http.StatusCreated {
			t.Fatalf("SendMessage(m%d) = %d %s", i, sent.StatusCode(), sent.Body)
		}
	}

	plain, err := api.PeekLockMessageWithResponse(ctx, "gq", &client.PeekLockMessageParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if plain.StatusCode() != http.StatusBadRequest || plain.XML400 == nil || !strings.Contains(plain.XML400.Detail, "sessions") {
		t.Errorf("PeekLockMessage(gq) = %d %s; want 400 about sessions", plain.StatusCode(), plain.Body)
	}

	acc, err := api.AcceptNextSessionWithResponse(ctx, "gq", &client.AcceptNextSessionParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if acc.StatusCode() != http.StatusCreated || acc.JSON201 == nil || acc.Headers201 == nil || acc.Headers201.Location == nil {
		t.Fatalf("AcceptNextSession(gq) = %d %s; want 201 with a SessionLock and Location", acc.StatusCode(), acc.Body)
	}
	sl := *acc.JSON201
	if sl.SessionId != "order-7" || sl.LockedUntilUtc != "Sun, 01 Mar 2026 12:00:20 GMT" ||
		*acc.Headers201.Location != fmt.Sprintf("%s/gq/sessions/order-7/%s", b.url, sl.LockToken) {
		t.Errorf("AcceptNextSession(gq) = %+v at %s", sl, *acc.Headers201.Location)
	}
	none, err := api.AcceptNextSessionWithResponse(ctx, "gq", &client.AcceptNextSessionParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if none.StatusCode() != http.StatusNoContent {
		t.Errorf("AcceptNextSession(gq) with the only session held = %d %s; want 204", none.StatusCode(), none.Body)
	}
	held, err := api.AcceptSessionWithResponse(ctx, "gq", "order-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	if held.StatusCode() != http.StatusConflict || held.XML409 == nil || held.XML409.Code != http.StatusConflict {
		t.Errorf("AcceptSession(order-7) while held = %d %s; want 409", held.StatusCode(), held.Body)
	}

	peek, err := api.SessionPeekLockWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, &client.SessionPeekLockParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if peek.StatusCode() != http.StatusCreated || string(peek.Body) != "m1" || peek.Headers201 == nil {
		t.Fatalf("SessionPeekLock = %d %q; want 201 m1", peek.StatusCode(), peek.Body)
	}
	seq, tok := lockOf(t, peek.Headers201.BrokerProperties)
	if want := fmt.Sprintf("%s/gq/sessions/order-7/%s/messages/%s/%s", b.url, sl.LockToken, seq, tok); showPtr(peek.Headers201.Location) != want {
		t.Errorf("SessionPeekLock: Location %s; want %s", showPtr(peek.Headers201.Location), want)
	}
	renewMsg, err := api.SessionRenewMessageLockWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, seq, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if renewMsg.StatusCode() != http.StatusOK {
		t.Errorf("SessionRenewMessageLock = %d %s", renewMsg.StatusCode(), renewMsg.Body)
	}
	unlock, err := api.SessionUnlockWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, seq, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if unlock.StatusCode() != http.StatusOK {
		t.Errorf("SessionUnlock = %d %s", unlock.StatusCode(), unlock.Body)
	}

	batch, err := api.SessionPeekLockBatchWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, &client.SessionPeekLockBatchParams{Count: ptr(3), Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if batch.StatusCode() != http.StatusCreated || batch.JSON201 == nil || len(*batch.JSON201) != 3 {
		t.Fatalf("SessionPeekLockBatch = %d %s; want 3 messages", batch.StatusCode(), batch.Body)
	}
	var got []string
	for _, m := range *batch.JSON201 {
		got = append(got, showPtr(m.Body)+"/"+showPtr(m.BrokerProperties.DeliveryCount))
	}
	if fmt.Sprint(got) != "[m1/2 m2/1 m3/1]" {
		t.Errorf("SessionPeekLockBatch = %v; want m1 (second delivery), m2, m3", got)
	}
	lockIn := func(m client.Message) (string, client.LockToken) {
		return fmt.Sprint(seqNumber(t, m)), *m.BrokerProperties.LockToken
	}
	s1, t1 := lockIn((*batch.JSON201)[0])
	if r, err := api.SessionCompleteWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, s1, t1, nil); err != nil || r.StatusCode() != http.StatusOK {
		t.Errorf("SessionComplete(m1) = %v %v", r.StatusCode(), err)
	}
	s2, t2 := lockIn((*batch.JSON201)[1])
	if r, err := api.SessionDeferWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, s2, t2, nil); err != nil || r.StatusCode() != http.StatusOK {
		t.Errorf("SessionDefer(m2) = %v %v", r.StatusCode(), err)
	}
	s3, t3 := lockIn((*batch.JSON201)[2])
	dl, err := api.SessionDeadLetterWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, s3, t3, nil,
		client.SessionDeadLetterJSONRequestBody{DeadLetterReason: ptr("bad"), DeadLetterErrorDescription: ptr("m3 is bad")})
	if err != nil {
		t.Fatal(err)
	}
	if dl.StatusCode() != http.StatusOK {
		t.Errorf("SessionDeadLetter(m3) = %d %s", dl.StatusCode(), dl.Body)
	}
	seq2 := seqNumber(t, (*batch.JSON201)[1])
	deferred, err := api.SessionReceiveAndDeleteDeferredWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, seq2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if deferred.StatusCode() != http.StatusOK || string(deferred.Body) != "m2" {
		t.Errorf("SessionReceiveAndDeleteDeferred(m2) = %d %q", deferred.StatusCode(), deferred.Body)
	}
	rd, err := api.SessionReceiveAndDeleteWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, &client.SessionReceiveAndDeleteParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if rd.StatusCode() != http.StatusOK || string(rd.Body) != "m4" {
		t.Errorf("SessionReceiveAndDelete = %d %q; want m4", rd.StatusCode(), rd.Body)
	}

	empty, err := api.GetSessionStateWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if empty.StatusCode() != http.StatusNoContent {
		t.Errorf("GetSessionState before any = %d %q; want 204", empty.StatusCode(), empty.Body)
	}
	set, err := api.SetSessionStateWithBodyWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, nil, "application/octet-stream", strings.NewReader(`{"step":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if set.StatusCode() != http.StatusOK {
		t.Errorf("SetSessionState = %d %s", set.StatusCode(), set.Body)
	}
	state, err := api.GetSessionStateWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if state.StatusCode() != http.StatusOK || string(state.Body) != `{"step":3}` {
		t.Errorf("GetSessionState = %d %q", state.StatusCode(), state.Body)
	}

	list, err := api.ListSessionsWithResponse(ctx, "gq", nil)
	if err != nil {
		t.Fatal(err)
	}
	if list.StatusCode() != http.StatusOK || list.JSON200 == nil || len(*list.JSON200) != 1 {
		t.Fatalf("ListSessions = %d %s", list.StatusCode(), list.Body)
	}
	if in := (*list.JSON200)[0]; in.SessionId != "order-7" || in.HasMessages || !in.HasState || showPtr(in.LockedUntilUtc) != "Sun, 01 Mar 2026 12:00:20 GMT" {
		t.Errorf("ListSessions = %+v (locked until %s); want order-7 without messages, with state, locked", in, showPtr(in.LockedUntilUtc))
	}

	b.clock.Advance(15 * time.Second)
	renew, err := api.RenewSessionLockWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if renew.StatusCode() != http.StatusOK || renew.JSON200 == nil || renew.JSON200.LockedUntilUtc != "Sun, 01 Mar 2026 12:00:35 GMT" || renew.JSON200.LockToken != sl.LockToken {
		t.Errorf("RenewSessionLock = %d %s; want the same token until 12:00:35", renew.StatusCode(), renew.Body)
	}
	rel, err := api.ReleaseSessionWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rel.StatusCode() != http.StatusOK {
		t.Errorf("ReleaseSession = %d %s", rel.StatusCode(), rel.Body)
	}
	lost, err := api.GetSessionStateWithResponse(ctx, "gq", sl.SessionId, sl.LockToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lost.StatusCode() != http.StatusNotFound || lost.XML404 == nil || !strings.Contains(lost.XML404.Detail, "session lock has expired") {
		t.Errorf("GetSessionState after release = %d %s; want 404 lock lost", lost.StatusCode(), lost.Body)
	}
	// The state outlives the lock.
	again, err := api.AcceptSessionWithResponse(ctx, "gq", "order-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.StatusCode() != http.StatusCreated || again.JSON201 == nil {
		t.Fatalf("AcceptSession(order-7) after release = %d %s", again.StatusCode(), again.Body)
	}
	state, err = api.GetSessionStateWithResponse(ctx, "gq", "order-7", again.JSON201.LockToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if state.StatusCode() != http.StatusOK || string(state.Body) != `{"step":3}` {
		t.Errorf("GetSessionState after accepting again = %d %q; want the state kept", state.StatusCode(), state.Body)
	}
	// The dead letter waits in the queue's dead-letter subqueue, outside any session.
	dead, err := api.ReceiveAndDeleteMessageWithResponse(ctx, "gq/$DeadLetterQueue", &client.ReceiveAndDeleteMessageParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if dead.StatusCode() != http.StatusOK || string(dead.Body) != "m3" || dead.HTTPResponse.Header.Get("DeadLetterReason") != `"bad"` {
		t.Errorf("receive from gq's dead-letter queue = %d %q %v", dead.StatusCode(), dead.Body, dead.HTTPResponse.Header)
	}
	// A send key cannot accept.
	sender, err := client.NewClientWithResponses(b.url, client.WithHTTPClient(b.http), client.WithRequestEditorFn(b.signWith("sender")))
	if err != nil {
		t.Fatal(err)
	}
	denied, err := sender.AcceptNextSessionWithResponse(ctx, "gq", &client.AcceptNextSessionParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if denied.StatusCode() != http.StatusUnauthorized || denied.XML401 == nil || !strings.Contains(denied.XML401.Detail, "'Listen' claim(s)") {
		t.Errorf("AcceptNextSession with a send key = %d %s; want 401", denied.StatusCode(), denied.Body)
	}
}
