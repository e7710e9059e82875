package store

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sbgate/sbgate/db/dbtest"
)

// TestHeadClaimPastLocksInFlight: a claim from the head (a dispatcher's periodic look behind
// its cursor, and its look before concluding a queue is empty) must not pay for the messages
// locked at the head, whatever the statistics say. Locked rows are outside the ready range, but
// once ANALYZE has seen a table where nearly every row is ready (a large backlog elsewhere), the
// planner may read the range through the primary key and visit every locked row's heap tuple.
func TestHeadClaimPastLocksInFlight(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	s := New(pool, Options{})
	ctx := t.Context()
	backlog, err := s.CreateEntity(ctx, KindQueue, "backlog", DefaultProperties(KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.CreateEntity(ctx, KindQueue, "inflight", DefaultProperties(KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	fill := `INSERT INTO messages (entity_id, enqueued_at, message_id, body, size)
		SELECT $1, now(), md5(g::text), convert_to(repeat('x', 512), 'UTF8'), 544 FROM generate_series(1, $2) g`
	for _, step := range []struct {
		sql  string
		args []any
	}{
		{`ALTER TABLE messages SET (autovacuum_enabled = false)`, nil}, // this test's own database
		{fill, []any{backlog.ID, 200000}},
		{fill, []any{q.ID, 20000}},
	} {
		if _, err := pool.Exec(ctx, step.sql, step.args...); err != nil {
			t.Fatal(err)
		}
	}
	const inFlight = 10000
	for locked := 0; locked < inFlight; {
		msgs, _, err := s.claimMessages(ctx, Target{Entity: q}, PeekLock, 500, nil)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("lock the head: %d messages, %v", len(msgs), err)
		}
		locked += len(msgs)
	}
	if _, err := pool.Exec(ctx, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}

	sharedArgs := pgx.NamedArgs{"entity": []int64{q.ID}, "state": []int16{0}, "n": []int32{16},
		"ready_from": []int64{0}, "due_from": []pgtype.Timestamptz{minusInfinity}, "now": s.now(),
		"lock_us": []int64{q.Props.LockDuration.Microseconds()}, "max_delivery": []int32{q.Props.MaxDeliveryCount}}
	for _, tc := range []struct {
		name string
		sql  string
		args pgx.NamedArgs
	}{
		{"peek-lock from the head", claimStatements[PeekLock][0], pgx.NamedArgs{"entity": q.ID, "state": StateActive, "now": s.now(), "n": 16,
			"ready_from": int64(0), "due_from": minusInfinity, "lock": interval(q.Props.LockDuration), "max_delivery": q.Props.MaxDeliveryCount}},
		{"shared peek-lock from the head", claimManyStatements[PeekLock], sharedArgs},
	} {
		for round := range 2 { // the first look may set the hint bits of the dead index entries
			pages, nodes := explainPages(t, ctx, s, tc.sql, tc.args, true)
			t.Logf("%s, look %d: %d pages (%s)", tc.name, round+1, pages, nodes)
			if round == 1 && pages > 500 {
				t.Errorf("%s past %d locks reads %d pages; want a few hundred at most (plan nodes: %s)", tc.name, inFlight, pages, nodes)
			}
		}
	}
}
