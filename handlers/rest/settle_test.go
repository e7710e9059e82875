package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/api/client"
)

// lockBatch sends n messages m1…mn to path and peek-locks them with $batch, returning their
// lock tokens by MessageId.
func (b *bundle) lockBatch(t *testing.T, path string, n int) map[string]uuid.UUID {
	t.Helper()
	for i := 1; i <= n; i++ {
		b.send(t, path, "body", withMessageID(fmt.Sprintf("m%d", i)))
	}
	peek, err := b.api.PeekLockBatchWithResponse(t.Context(), path, &client.PeekLockBatchParams{Count: ptr(n), Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if peek.StatusCode() != http.StatusCreated || peek.JSON201 == nil || len(*peek.JSON201) != n {
		t.Fatalf("PeekLockBatch(%s, %d) = %d %s", path, n, peek.StatusCode(), peek.Body)
	}
	tokens := make(map[string]uuid.UUID, n)
	for _, m := range *peek.JSON201 {
		tokens[messageID(m)] = *m.BrokerProperties.LockToken
	}
	return tokens
}

func TestSettleMessages(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	b.createQueue(t, "q", "<LockDuration>PT30S</LockDuration>")
	tok := b.lockBatch(t, "q", 6)
	b.clock.Advance(10 * time.Second)

	unknown := uuid.New()
	settle := []client.Settlement{
		{LockToken: tok["m1"], Disposition: client.Complete},
		{LockToken: tok["m2"], Disposition: client.Abandon},
		{LockToken: tok["m3"], Disposition: client.DeadLetter, DeadLetterReason: ptr("Bad"), DeadLetterErrorDescription: ptr("no customer")},
		{LockToken: tok["m4"], Disposition: client.Defer},
		{LockToken: tok["m5"], Disposition: client.RenewLock},
		{LockToken: unknown, Disposition: client.Complete},
		{LockToken: tok["m1"], Disposition: client.Complete}, // already completed above
		{LockToken: tok["m6"], Disposition: client.Complete},
		{LockToken: tok["m5"], Disposition: client.RenewLock}, // renewed again: as if one after the other
	}
	r, err := b.api.SettleMessagesWithResponse(ctx, "q", nil, settle)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != http.StatusOK || r.JSON200 == nil {
		t.Fatalf("SettleMessages = %d %s; want 200 with results", r.StatusCode(), r.Body)
	}
	results := *r.JSON200
	if len(results) != len(settle) {
		t.Fatalf("SettleMessages gave %d results for %d settlements: %s", len(results), len(settle), r.Body)
	}
	wantStatus := []int{200, 200, 200, 200, 200, 404, 404, 200, 200}
	for i, res := range results {
		if res.LockToken != settle[i].LockToken || res.Status != wantStatus[i] {
			t.Errorf("result %d = %s %d (detail %s); want %s %d", i, res.LockToken, res.Status, showPtr(res.Detail), settle[i].LockToken, wantStatus[i])
		}
		if wantStatus[i] == 404 && (res.Detail == nil || !strings.Contains(*res.Detail, "The lock supplied is invalid")) {
			t.Errorf("result %d: Detail = %s; want the lock-lost text", i, showPtr(res.Detail))
		}
		if wantStatus[i] == 200 && res.Detail != nil {
			t.Errorf("result %d: Detail = %s on success", i, *res.Detail)
		}
	}
	for _, i := range []int{4, 8} {
		if got := showPtr(results[i].LockedUntilUtc); got != "Sun, 01 Mar 2026 12:00:40 GMT" {
			t.Errorf("result %d: renewed lock until %s; want 30 s after the renewal", i, got)
		}
	}
	for _, i := range []int{0, 1, 2, 3, 7} {
		if results[i].LockedUntilUtc != nil {
			t.Errorf("result %d has LockedUntilUtc %s; only a renewal has one", i, *results[i].LockedUntilUtc)
		}
	}
	// m2 (abandoned), m4 (deferred) and m5 (locked) stay; m3 is a dead letter.
	b.wantCounts(t, "after the batch settlement", "q", counted{active: 3, dead: 1})
	dead := b.browseAll(t, "q/$DeadLetterQueue")
	if len(dead) != 1 || messageID(dead[0]) != "m3" || showPtr(dead[0].BrokerProperties.DeadLetterReason) != "Bad" ||
		showPtr(dead[0].BrokerProperties.DeadLetterErrorDescription) != "no customer" {
		t.Errorf("dead letters = %+v; want m3 with its reason and description", dead)
	}
	next, _ := b.peekLockHead(t, "q")
	if !strings.Contains(next, "/q/messages/") {
		t.Fatalf("next peek-lock at %s", next)
	}

	// Bad requests fail as a whole, settling nothing.
	for _, tc := range []struct{ name, body, detail string }{
		{"not JSON", `{`, "JSON array of settlements"},
		{"an object", `{"LockToken":"` + tok["m5"].String() + `","Disposition":"Complete"}`, "JSON array of settlements"},
		{"empty", `[]`, "names no locks"},
		{"unknown disposition", `[{"LockToken":"` + tok["m5"].String() + `","Disposition":"Eat"}]`, "Disposition must be"},
		{"no token", `[{"Disposition":"Complete"}]`, ""},
		{"bad token", `[{"LockToken":"nope","Disposition":"Complete"}]`, "JSON array of settlements"},
		{"unknown field", `[{"LockToken":"` + tok["m5"].String() + `","Disposition":"Complete","Extra":1}]`, "JSON array of settlements"},
		{"reason without dead-letter", `[{"LockToken":"` + tok["m5"].String() + `","Disposition":"Complete","DeadLetterReason":"x"}]`, "DeadLetter disposition only"},
		{"control characters", `[{"LockToken":"` + tok["m5"].String() + `","Disposition":"DeadLetter","DeadLetterReason":"a\nb"}]`, "control characters"},
		{"too many", "[" + strings.TrimSuffix(strings.Repeat(`{"LockToken":"`+tok["m5"].String()+`","Disposition":"Complete"},`, 1001), ",") + "]", "at most 1000"},
	} {
		r := b.do(t, call{method: http.MethodPost, path: "/q/messages/$settle", body: tc.body, key: "listener",
			header: map[string]string{"Content-Type": "application/json"}})
		if tc.name == "no token" {
			// A missing token reads as the zero GUID, which names no lock.
			var res []client.SettlementResult
			if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &res) != nil || len(res) != 1 || res[0].Status != 404 {
				t.Errorf("%s: %d %s; want 200 with a 404 result", tc.name, r.status, r.body)
			}
			continue
		}
		r.wantError(t, tc.name, http.StatusBadRequest, tc.detail)
	}
	b.wantCounts(t, "after the refused settlements", "q", counted{active: 3, dead: 1})

	// Settling needs Listen.
	body := `[{"LockToken":"` + tok["m5"].String() + `","Disposition":"Complete"}]`
	b.do(t, call{method: http.MethodPost, path: "/q/messages/$settle", body: body, key: "sender"}).
		wantError(t, "settle with the send key", http.StatusUnauthorized, "'Listen' claim(s) are required")
	b.do(t, call{method: http.MethodPost, path: "/missing/messages/$settle", body: body}).
		wantError(t, "settle on a missing queue", http.StatusNotFound, "")

	// Dead letters are settled under the dead-letter subqueue; a main-queue token is not valid there.
	dl, err := b.api.PeekLockBatchWithResponse(ctx, "q/$DeadLetterQueue", &client.PeekLockBatchParams{Timeout: ptr(0)})
	if err != nil || dl.JSON201 == nil || len(*dl.JSON201) != 1 {
		t.Fatalf("peek-lock the dead letter: %v %s", err, dl.Body)
	}
	dlTok := *(*dl.JSON201)[0].BrokerProperties.LockToken
	r, err = b.api.SettleMessagesWithResponse(ctx, "q", nil, []client.Settlement{{LockToken: dlTok, Disposition: client.Complete}})
	if err != nil || r.JSON200 == nil || (*r.JSON200)[0].Status != 404 {
		t.Fatalf("settle a dead letter's lock on the queue = %v %s; want a 404 result", err, r.Body)
	}
	r, err = b.api.SettleMessagesWithResponse(ctx, "q/$DeadLetterQueue", nil, []client.Settlement{
		{LockToken: dlTok, Disposition: client.DeadLetter},
		{LockToken: dlTok, Disposition: client.Complete},
	})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("settle in the dead-letter queue: %v %s", err, r.Body)
	}
	if got := fmt.Sprint((*r.JSON200)[0].Status, (*r.JSON200)[1].Status); got != "400 200" {
		t.Errorf("dead-letter then complete in the dead-letter queue = %s; want 400 200 (%s)", got, r.Body)
	}
	b.wantCounts(t, "after completing the dead letter", "q", counted{active: 3})
}

func TestSessionSettleMessages(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "sq", "<RequiresSession>true</RequiresSession>")
	for _, m := range []struct{ id, session string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}} {
		b.send(t, "sq", "x", map[string]string{"BrokerProperties": `{"MessageId":"` + m.id + `","SessionId":"` + m.session + `"}`})
	}
	sessionPath, s := b.acceptNext(t, "sq")
	if s.SessionID != "a" {
		t.Fatalf("accepted session %q; want a", s.SessionID)
	}
	msgs := b.do(t, call{method: http.MethodPost, path: sessionPath + "/messages/$batch?timeout=0&count=5", key: "listener"}).messages(t, "session $batch", http.StatusCreated)
	if len(msgs) != 2 {
		t.Fatalf("session $batch gave %d messages; want 2", len(msgs))
	}
	var tokens []string
	for _, m := range msgs {
		tokens = append(tokens, m.Location[strings.LastIndex(m.Location, "/")+1:])
	}
	// Settled with the queue's path instead of the session's, the locks are refused.
	var res []client.SettlementResult
	body := `[{"LockToken":"` + tokens[0] + `","Disposition":"Complete"}]`
	r := b.do(t, call{method: http.MethodPost, path: "/sq/messages/$settle", body: body, key: "listener"}).want(t, "settle outside the session", http.StatusOK)
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || len(res) != 1 || res[0].Status != 400 || !strings.Contains(showPtr(res[0].Detail), "settled in their session") {
		t.Fatalf("settle a session's lock outside the session = %s; want a 400 result", r.body)
	}
	body = `[{"LockToken":"` + tokens[0] + `","Disposition":"Complete"},{"LockToken":"` + tokens[1] + `","Disposition":"Abandon"}]`
	r = b.do(t, call{method: http.MethodPost, path: sessionPath + "/messages/$settle", body: body, key: "listener"}).want(t, "session settle", http.StatusOK)
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || len(res) != 2 || res[0].Status != 200 || res[1].Status != 200 {
		t.Fatalf("session settle = %s; want two 200 results", r.body)
	}
	b.wantCounts(t, "after the session settlement", "sq", counted{active: 2})
	// Once the session is released its token no longer settles anything.
	b.do(t, call{method: http.MethodDelete, path: sessionPath, key: "listener"}).want(t, "release", http.StatusOK)
	r = b.do(t, call{method: http.MethodPost, path: sessionPath + "/messages/$settle", body: `[{"LockToken":"` + tokens[1] + `","Disposition":"Complete"}]`, key: "listener"}).
		want(t, "settle after release", http.StatusOK)
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || len(res) != 1 || res[0].Status != 404 {
		t.Fatalf("settle after the session was released = %s; want a 404 result", r.body)
	}
}
