package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/engine"
)

// TestSharedClaimIsEachTargetsOwnClaim: a round of claims of eight subqueues runs as two shared
// statements (one per receive mode), and each claim gets what it would have got alone: its own
// cursor, size, lock duration and delivery limit, dead-letter subqueues left in place, counts
// moved for its own entity only.
func TestSharedClaimIsEachTargetsOwnClaim(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	s := New(pool, Options{})
	s.Start(t.Context()) // for the sends; stopped before the claims, so nothing moves the counts meanwhile
	ctx := t.Context()
	queue := func(name string, edit func(*broker.Properties), messages int) (*broker.Entity, []int64) {
		t.Helper()
		props := broker.DefaultProperties(broker.KindQueue)
		if edit != nil {
			edit(&props)
		}
		e, err := s.CreateEntity(ctx, broker.KindQueue, name, props)
		if err != nil {
			t.Fatal(err)
		}
		for i := range messages {
			if err := s.Send(ctx, e, []broker.Message{{Body: []byte(fmt.Sprint(i))}}); err != nil {
				t.Fatal(err)
			}
		}
		rows, _ := pool.Query(ctx, `SELECT seq FROM messages WHERE entity_id = $1 ORDER BY seq`, e.ID)
		seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(seqs) != messages {
			t.Fatalf("%s holds %v, %v", name, seqs, err)
		}
		return e, seqs
	}
	qa, seqA := queue("a", nil, 4)
	qb, seqB := queue("b", func(p *broker.Properties) { p.LockDuration = 30 * time.Second }, 1)
	qc, _ := queue("c", func(p *broker.Properties) { p.MaxDeliveryCount = 1 }, 2)
	qd, seqD := queue("d", nil, 2)
	qe, seqE := queue("e", nil, 3)
	qf, seqF := queue("f", nil, 2)
	qg, seqG := queue("g", nil, 3)
	qh, seqH := queue("h", nil, 3)
	s.Stop()
	// c: delivered once already; d, f: dead letters.
	if _, err := pool.Exec(ctx, `UPDATE messages SET delivery_count = 1 WHERE entity_id = $1`, qc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE messages SET state = 2 WHERE entity_id IN ($1, $2)`, qd.ID, qf.ID); err != nil {
		t.Fatal(err)
	}
	// g: its first message's lock lapsed a second ago (the due range), the others are ready.
	if _, err := pool.Exec(ctx, `UPDATE messages SET visible_at = $2, delivery_count = 0,
		lock_token = gen_random_uuid() WHERE seq = $1`, seqG[0], s.now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	// h: its first message's lock lapsed a second ago, its second was abandoned three seconds
	// ago: the first is still the one to take (the due range by sequence number, not by time).
	if _, err := pool.Exec(ctx, `UPDATE messages SET visible_at = $2, delivery_count = 0,
		lock_token = gen_random_uuid() WHERE seq = $1`, seqH[0], s.now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE messages SET visible_at = $2, delivery_count = 1 WHERE seq = $1`,
		seqH[1], s.now().Add(-3*time.Second)); err != nil {
		t.Fatal(err)
	}
	deltas := func() map[int64][2]int64 {
		rows, _ := pool.Query(ctx, `SELECT entity_id, sum(main)::bigint, sum(dead)::bigint FROM entity_count_deltas GROUP BY entity_id`)
		out := make(map[int64][2]int64)
		for rows.Next() {
			var id, main, dead int64
			if err := rows.Scan(&id, &main, &dead); err != nil {
				t.Fatal(err)
			}
			out[id] = [2]int64{main, dead}
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return out
	}
	before := deltas()

	now := s.now()
	specs := []struct {
		t    broker.Target
		mode broker.ReceiveMode
		n    int
		cur  *claimCursor
	}{
		{broker.Target{Entity: qa}, broker.PeekLock, 2, &claimCursor{readyFrom: seqA[0]}}, // from its cursor: skips seqA[0]
		{broker.Target{Entity: qb}, broker.PeekLock, 3, nil},
		{broker.Target{Entity: qc}, broker.PeekLock, 2, nil},
		{broker.Target{Entity: qd, SubQueue: broker.SubQueueDeadLetter}, broker.PeekLock, 1, nil},
		{broker.Target{Entity: qe}, broker.ReceiveAndDelete, 2, nil},
		{broker.Target{Entity: qf, SubQueue: broker.SubQueueDeadLetter}, broker.ReceiveAndDelete, 1, nil},
		{broker.Target{Entity: qg}, broker.PeekLock, 1, nil}, // the lapsed lock first (lowest sequence number), nothing more
		{broker.Target{Entity: qh}, broker.PeekLock, 1, nil}, // the lapsed lock, ahead of the later message abandoned before it lapsed
	}
	var jobs []*engine.Job[*claimJob]
	for _, sp := range specs {
		jobs = append(jobs, engine.NewJob(newClaim(sp.t, sp.mode, sp.n, sp.cur, sp.cur == nil, now)))
	}
	s.writeClaims(jobs)
	got := make([][]*broker.Message, len(jobs))
	for i, j := range jobs {
		if err := s.claimer.Wait(t.Context(), j); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		for _, r := range j.Req.rows {
			m, err := r.message()
			if err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], m)
		}
	}
	if n := s.sharedClaims.Load(); n != 2 {
		t.Errorf("%d shared statements; want 2 (one per receive mode)", n)
	}
	seqsOf := func(ms []*broker.Message) []int64 {
		var out []int64
		for _, m := range ms {
			out = append(out, m.SequenceNumber)
		}
		return out
	}
	same := func(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
	for i, want := range [][]int64{seqA[1:3], seqB, nil, seqD[:1], seqE[:2], seqF[:1], seqG[:1], seqH[:1]} {
		if i == 2 {
			continue // c: checked below
		}
		if g := seqsOf(got[i]); !same(g, want) {
			t.Errorf("claim %d (%v) got %v; want %v", i, specs[i].t, g, want)
		}
	}
	// Locks: each with its own entity's duration, counted as a delivery.
	lockedUntil := func(seq int64) (time.Time, int32, int16) {
		var until time.Time
		var deliveries int32
		var state int16
		if err := pool.QueryRow(ctx, `SELECT visible_at, delivery_count, state FROM messages WHERE seq = $1 AND lock_token IS NOT NULL`, seq).
			Scan(&until, &deliveries, &state); err != nil {
			t.Fatalf("message %d is not locked: %v", seq, err)
		}
		return until, deliveries, state
	}
	for _, c := range []struct {
		seq   int64
		lock  time.Duration
		state int16
	}{{seqA[1], qa.Props.LockDuration, 0}, {seqA[2], qa.Props.LockDuration, 0}, {seqB[0], 30 * time.Second, 0}, {seqD[0], qd.Props.LockDuration, 2}, {seqG[0], qg.Props.LockDuration, 0}, {seqH[0], qh.Props.LockDuration, 0}} {
		until, deliveries, state := lockedUntil(c.seq)
		want := int32(0) // the failed deliveries: the lapsed locks of g and h count
		if c.seq == seqG[0] || c.seq == seqH[0] {
			want = 1
		}
		if d := until.Sub(now.Add(c.lock)); d < -time.Millisecond || d > time.Millisecond || deliveries != want || state != c.state {
			t.Errorf("message %d locked until %v with %d deliveries in state %d; want %v, %d, %d", c.seq, until, deliveries, state, now.Add(c.lock), want, c.state)
		}
	}
	// c: both messages were on their last delivery, so the claim moved them to the dead-letter
	// subqueue instead of handing them out.
	if len(got[2]) != 2 || got[2][0].State != broker.StateDeadLetter || got[2][1].State != broker.StateDeadLetter {
		t.Errorf("claim of c got %+v; want its 2 messages dead-lettered", got[2])
	}
	var dead int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE entity_id = $1 AND state = 2 AND dead_letter_reason = $2`,
		qc.ID, broker.ReasonMaxDeliveryCount).Scan(&dead); err != nil || dead != 2 {
		t.Errorf("c's dead letters: %d, %v; want 2", dead, err)
	}
	// Receive-and-delete removed what it returned.
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE seq = ANY($1)`, append(seqE[:2:2], seqF[0])).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d received-and-deleted messages still stored (%v)", left, err)
	}
	// Counts: only the entities whose messages moved or went, each by its own amount.
	after := deltas()
	for _, c := range []struct {
		e    *broker.Entity
		want [2]int64
	}{{qa, [2]int64{}}, {qb, [2]int64{}}, {qc, [2]int64{-2, 2}}, {qd, [2]int64{}}, {qe, [2]int64{-2, 0}}, {qf, [2]int64{0, -1}}, {qg, [2]int64{}}, {qh, [2]int64{}}} {
		if d := [2]int64{after[c.e.ID][0] - before[c.e.ID][0], after[c.e.ID][1] - before[c.e.ID][1]}; d != c.want {
			t.Errorf("count change of %s = %v (main, dead); want %v", c.e.Path, d, c.want)
		}
	}
}
