package store

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// TestHeadClaimPastLocksInFlight: a claim from the head (a dispatcher's periodic look behind
// its cursor, and its look before concluding a queue is empty) must not pay for the messages
// locked at the head, whatever the statistics say. Locked rows are outside the ready range, but
// once ANALYZE has seen a table where nearly every row is ready (a large backlog elsewhere), the
// planner may read the range through the primary key and visit every locked row's heap tuple.
func TestHeadClaimPastLocksInFlight(t *testing.T) {
	t.Parallel()
	s, qs := planTestQueues(t, "backlog", "inflight")
	pool, ctx, backlog, q := s.pool, t.Context(), qs[0], qs[1]
	insertRawMessages(t, s, backlog, 200000, 512)
	insertRawMessages(t, s, q, 20000, 512)
	const inFlight = 10000
	for locked := 0; locked < inFlight; {
		msgs, _, err := s.claimMessages(ctx, broker.Target{Entity: q}, broker.PeekLock, 500, nil)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("lock the head: %d messages, %v", len(msgs), err)
		}
		locked += len(msgs)
	}
	if _, err := pool.Exec(ctx, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}

	sharedArgs := headClaimsArgs(s.now(), 16, q)
	for _, tc := range []struct {
		name string
		sql  statement
		args pgx.NamedArgs
	}{
		{"peek-lock from the head", claimStatements[broker.PeekLock][0], headClaimArgs(s.now(), 16, q)},
		{"shared peek-lock from the head", claimManyStatements[broker.PeekLock], sharedArgs},
	} {
		// Through messages_ready a claim reads about 250 pages once the locked rows' dead index
		// entries are marked dead, and about 800 while they are not yet (seen when another test
		// ran beside this one); through the primary key it reads about 5,000.
		// Claims run with the generic plan on their own pool, and planned for the values
		// when they fall back to the main one.
		for _, generic := range []bool{true, false} {
			for round := range 2 { // the first look may mark the dead index entries
				pages, nodes := explainPages(t, ctx, s, tc.sql, tc.args, generic)
				t.Logf("%s (generic plan %v), look %d: %d pages (%s)", tc.name, generic, round+1, pages, nodes)
				if round == 1 && pages > 1500 {
					t.Errorf("%s (generic plan %v) past %d locks reads %d pages; want under 1,500 (plan nodes: %s)", tc.name, generic, inFlight, pages, nodes)
				}
			}
		}
	}
}
