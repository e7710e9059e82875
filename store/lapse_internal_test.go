package store

import (
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// TestClaimCursorStopsAtDueRowsOthersHold: a claim skips the due rows another claim holds at
// that moment (another gateway's, whose cursor this one does not see), and that claim may leave
// them. The cursor must stay at them: the next claim from it takes such a row, ahead of later
// messages, without waiting for a claim from the head.
func TestClaimCursorStopsAtDueRowsOthersHold(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, q := startedQueue(t, Options{Now: clock}, "X", "Y", "R")
	ctx, pool := t.Context(), s.pool
	// X and Y came due (abandoned, or their locks lapsed) a second apart; R is ready.
	if _, err := pool.Exec(ctx, `UPDATE messages m SET visible_at = $2::timestamptz + v.after
		FROM (VALUES ('X', interval '0'), ('Y', interval '1 second')) v(body, after)
		WHERE m.entity_id = $1 AND convert_from(m.body, 'UTF8') = v.body`, q.ID, now.Add(-5*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Another claim holds X while this one looks.
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if _, err := other.Exec(ctx, `SELECT 1 FROM messages WHERE entity_id = $1 AND body = 'X' FOR UPDATE`, q.ID); err != nil {
		t.Fatal(err)
	}
	cur := &claimCursor{lastHead: time.Now()} // no claim from the head for the next 250 ms
	take := func() string {
		t.Helper()
		msgs, full, err := s.claimMessages(ctx, broker.Target{Entity: q}, broker.ReceiveAndDelete, 1, cur)
		if err != nil || len(msgs) != 1 || !full {
			t.Fatalf("claim: %v (full %t), %v; want one message", msgs, full, err)
		}
		return string(msgs[0].Body)
	}
	if got := take(); got != "Y" {
		t.Fatalf("claim while X is held took %s; want Y", got)
	}
	if err := other.Rollback(ctx); err != nil { // the other claim left X
		t.Fatal(err)
	}
	if got := take(); got != "X" {
		t.Errorf("claim from the cursor after X was left took %s; want X (cursor at %v, X due at %v)", got, cur.dueFrom, now.Add(-5*time.Second))
	}
}

// TestClaimOfManyDueRowsReadsABoundedWindow: when far more messages come due together than a
// claim takes (a large schedule, the locks of a gateway that died), the claim reads at most
// dueLookahead of them past its own, not all: draining them must not cost each claim a read of
// all that remain.
func TestClaimOfManyDueRowsReadsABoundedWindow(t *testing.T) {
	t.Parallel()
	s, qs := planTestQueues(t, "q")
	pool, ctx, q := s.pool, t.Context(), qs[0]
	insertRawMessages(t, s, q, 50000, 100)
	// All due, the latest sequence numbers first.
	if _, err := pool.Exec(ctx, `UPDATE messages SET visible_at = $2::timestamptz - seq * interval '1 millisecond'
		WHERE entity_id = $1`, q.ID, s.now()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE messages`); err != nil {
		t.Fatal(err)
	}
	args := headClaimArgs(s.now(), 16, q)
	sharedArgs := headClaimsArgs(s.now(), 16, q)
	for _, tc := range []struct {
		name string
		sql  statement
		args pgx.NamedArgs
	}{
		{"peek-lock", claimStatements[broker.PeekLock][0], args},
		{"shared peek-lock", claimManyStatements[broker.PeekLock], sharedArgs},
	} {
		for _, generic := range []bool{false, true} {
			pages, nodes := explainPages(t, ctx, s, tc.sql, tc.args, generic)
			t.Logf("%s of 16 with 50,000 due (generic plan %v): %d pages", tc.name, generic, pages)
			// The 1,016 earliest due rows: about 1,100 pages. All 50,000: over 50,000.
			if pages > 5000 {
				t.Errorf("%s of 16 with 50,000 due (generic plan %v) reads %d pages; want about 1,100 (plan nodes: %s)", tc.name, generic, pages, nodes)
			}
		}
	}
}
