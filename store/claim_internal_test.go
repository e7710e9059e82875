package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/engine"
)

// TestClaimPlanWithStaleStatistics: a queue filled faster than autoanalyze runs must be drained
// as fast as a small one. The statistics here were taken when the table held another entity's
// rows only, then 100,000 messages arrive: the planner believes the queue holds a couple of rows.
// Every claim statement must still read the head of the queue through its index (a few dozen
// pages), not sort the backlog (tens of thousands). The test asserts pages read, not time.
func TestClaimPlanWithStaleStatistics(t *testing.T) {
	t.Parallel()
	s, qs := planTestQueues(t, "other", "backlog")
	pool, ctx, other, q := s.pool, t.Context(), qs[0], qs[1]
	// Earlier traffic: messages come and go, leaving the indexes as large as a busy queue's.
	churn := `INSERT INTO messages (entity_id, enqueued_at, message_id, body, size)
		SELECT $1, now(), g::text, '\x00', 1 FROM generate_series(1, $2) g`
	if _, err := pool.Exec(ctx, churn, other.ID, 300000); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{`DELETE FROM messages`, `VACUUM messages`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	insertRawMessages(t, s, other, 3000, 1024)
	// ANALYZE takes the statistics; VACUUM then clears the dead rows the locking left (it keeps
	// the column statistics), so only the statistics are stale, not the table.
	for _, sql := range []string{`ANALYZE messages`, `VACUUM messages`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	insertRawMessages(t, s, q, 100000, 1024)

	sharedArgs := headClaimsArgs(s.now(), 16, q, other)
	base := pgx.NamedArgs{"entity": q.ID, "state": broker.StateActive, "now": s.now(), "n": 16, "ready_from": int64(0), "due_from": minusInfinity}
	for _, tc := range []struct {
		name string
		sql  statement
		args pgx.NamedArgs
		hot  bool // run on the generic-plan pool (as well as planned for the values)
	}{
		{"peek-lock", claimStatements[broker.PeekLock][0], pgx.NamedArgs{"lock": interval(q.Props.LockDuration), "max_delivery": q.Props.MaxDeliveryCount}, true},
		{"receive-and-delete", claimStatements[broker.ReceiveAndDelete][0], nil, true},
		// A round's claims of several entities share a statement (claimmany.go).
		{"shared peek-lock", claimManyStatements[broker.PeekLock], sharedArgs, true},
		{"shared receive-and-delete", claimManyStatements[broker.ReceiveAndDelete], sharedArgs, true},
		// nextDue runs on the pool that plans for the values (its generic plan scans the table).
		{"next due", nextDue, nil, false},
	} {
		args := pgx.NamedArgs{}
		for k, v := range base {
			args[k] = v
		}
		for k, v := range tc.args {
			args[k] = v
		}
		for _, generic := range []bool{false, true} {
			if generic && !tc.hot {
				continue
			}
			name := fmt.Sprintf("%s (generic plan %v)", tc.name, generic)
			pages, nodes := explainPages(t, ctx, s, tc.sql, args, generic)
			t.Logf("%s: %d pages", name, pages)
			if pages > 500 {
				t.Errorf("%s reads %d pages with stale statistics; want a few dozen (plan nodes: %s)", name, pages, nodes)
			}
			for _, bad := range []string{"Bitmap Heap Scan", "Seq Scan on messages"} {
				if strings.Contains(nodes, bad) {
					t.Errorf("%s plan has a %s: %s", name, bad, nodes)
				}
			}
		}
	}

	// A request for deferred messages finds its rows by the primary key, one lookup each, even
	// for as many sequence numbers as it may name and statistics that think the queue empty.
	// (None of these is deferred, so nothing changes; the rows are read all the same.)
	var seqs []int64
	if err := pool.QueryRow(ctx, `SELECT array_agg(seq) FROM (SELECT seq FROM messages WHERE entity_id = $1
		ORDER BY seq DESC LIMIT $2) s`, q.ID, broker.MaxReceiveBatch).Scan(&seqs); err != nil {
		t.Fatal(err)
	}
	deferredArgs := pgx.NamedArgs{"entity": q.ID, "now": s.now(), "session": nil,
		"lock": interval(q.Props.LockDuration), "max_delivery": q.Props.MaxDeliveryCount}
	askSeqs(deferredArgs, q, seqs)
	for _, tc := range []struct {
		name string
		sql  statement
	}{
		{"receive deferred", receiveDeferred},
		{"dead-letter deferred", deadLetterDeferred},
		{"delete deferred", deleteDeferred},
	} {
		for _, generic := range []bool{false, true} {
			pages, nodes := explainPages(t, ctx, s, tc.sql, deferredArgs, generic)
			t.Logf("%s of %d (generic plan %v): %d pages", tc.name, len(seqs), generic, pages)
			// Three index pages per sequence number and one heap page per row: 4,000. A scan of
			// the entity's rows, filtered, read 14,673.
			if pages > 6*len(seqs) {
				t.Errorf("%s of %d (generic plan %v) reads %d pages; want about %d (plan nodes: %s)", tc.name, len(seqs), generic, pages, 4*len(seqs), nodes)
			}
			for _, bad := range []string{"Hash Join", "Seq Scan on messages"} {
				if strings.Contains(nodes, bad) {
					t.Errorf("%s plan (generic plan %v) has a %s: %s", tc.name, generic, bad, nodes)
				}
			}
		}
	}

	// Settlements run generic plans too: each finds its rows by entity and sequence number.
	msgs, _, err := s.claimMessages(ctx, broker.Target{Entity: q}, broker.PeekLock, 16, nil)
	if err != nil || len(msgs) != 16 {
		t.Fatalf("claim: %d messages, %v", len(msgs), err)
	}
	var a settleArgs
	for _, m := range msgs {
		a.add(settleItem{t: broker.Target{Entity: q}, req: broker.SettleRequest{Token: m.LockToken, Reason: "r"}})
	}
	for op, sql := range settleStatements {
		pages, nodes := explainPages(t, ctx, s, sql, a.named(s.now()), true)
		t.Logf("settle %v (generic plan): %d pages", op, pages)
		if pages > 500 {
			t.Errorf("settle %v reads %d pages with stale statistics; want a few dozen (plan nodes: %s)", op, pages, nodes)
		}
		for _, bad := range []string{"Bitmap Heap Scan", "Seq Scan on messages"} {
			if strings.Contains(nodes, bad) {
				t.Errorf("settle %v plan has a %s: %s", op, bad, nodes)
			}
		}
	}

	// A purge deletes the queue in chunks; a chunk must not pass again over the rows the chunks
	// before it deleted (that made purging a large queue quadratic: a sequential scan from the
	// table's start each chunk). Purge 90,000 of the 100,000 messages, then look at the next chunk.
	var after int64
	for range 9 {
		n, last, err := s.purgeChunk(ctx, q, broker.SubQueueMain, after, math.MaxInt64, 10000)
		if err != nil || n != 10000 || last == nil {
			t.Fatalf("purge chunk after %d: %d deleted, last %v, %v", after, n, last, err)
		}
		after = *last
	}
	for _, generic := range []bool{false, true} {
		pages, nodes := explainPages(t, ctx, s, purgeMessages, pgx.NamedArgs{"entity": q.ID, "after": after, "upto": int64(math.MaxInt64), "state": broker.StateActive, "n": 1000}, generic)
		t.Logf("purge chunk of 1,000 after 90,000 purged (generic plan %v): %d pages", generic, pages)
		// Each row deleted costs about two buffer visits (found for the chunk's bound, found
		// and deleted) and its index pages a few more: 2,302 here. The statement before this
		// one, a sequential scan or a nested loop from the table's start, made 16,892 (generic
		// plan) and 4,977,033 (custom plan).
		if pages > 5000 {
			t.Errorf("a purge chunk of 1,000 after 90,000 purged reads %d pages (generic plan %v); want about 2,300 (plan nodes: %s)", pages, generic, nodes)
		}
		if strings.Contains(nodes, "Seq Scan on messages") {
			t.Errorf("purge chunk plan (generic plan %v) has a Seq Scan: %s", generic, nodes)
		}
	}
	n, err := s.Purge(ctx, q, broker.SubQueueMain)
	if err != nil || n != 10000 {
		t.Errorf("Purge of the rest = %d, %v; want 10000", n, err)
	}
}

// TestClaimLooksForDueRowsOnlyWhenSomeAre: a claim reads the due range once for each target (a
// scheduled message or a lapsed lock may be there) and, when that read found nothing, does not
// look for the due rows again to lock them. The second look, an index descent a target, was
// about a sixth of the pages a shared claim of many queues with one message each read.
func TestClaimLooksForDueRowsOnlyWhenSomeAre(t *testing.T) {
	t.Parallel()
	s, qs := planTestQueues(t, "a", "b", "c")
	ctx := t.Context()
	for _, q := range qs {
		insertRawMessages(t, s, q, 3, 16)
	}
	now := s.now()
	shared, single := headClaimsArgs(now, 1, qs...), headClaimArgs(now, 1, qs[0])
	for _, tc := range []struct {
		name    string
		sql     statement
		args    pgx.NamedArgs
		targets int
	}{
		{"peek-lock", claimStatements[broker.PeekLock][0], single, 1},
		{"receive-and-delete", claimStatements[broker.ReceiveAndDelete][0], single, 1},
		{"shared peek-lock", claimManyStatements[broker.PeekLock], shared, len(qs)},
		{"shared receive-and-delete", claimManyStatements[broker.ReceiveAndDelete], shared, len(qs)},
	} {
		for _, generic := range []bool{false, true} {
			_, nodes := explainPlanOf(t, ctx, s, tc.sql, tc.args, generic)
			// Index descents into messages other than the ready range's: the due range's read
			// (through messages_due), and the due rows' lock if it ran (through messages_due or
			// the primary key, as the planner likes).
			descents := 0
			for _, node := range nodes {
				if node.Relation == "messages" && node.Index != "" && node.Index != "messages_ready" {
					descents += node.Loops
				}
			}
			if descents != tc.targets {
				t.Errorf("%s (generic plan %v) makes %d index descents for due rows with nothing due; want %d, one a target (plan nodes: %v)",
					tc.name, generic, descents, tc.targets, nodes)
			}
		}
	}
}

// headClaimArgs are the arguments of a peek-lock claim of n messages from the head of q's main
// queue at now, as a receive makes it (newClaim), for its statement alone.
func headClaimArgs(now time.Time, n int, q *broker.Entity) pgx.NamedArgs {
	return newClaim(broker.Target{Entity: q}, broker.PeekLock, n, nil, true, now).args()
}

// headClaimsArgs are those of the peek-lock claims of n messages from the head of each of qs
// at now, sharing a statement (claimManyArgs).
func headClaimsArgs(now time.Time, n int, qs ...*broker.Entity) pgx.NamedArgs {
	jobs := make([]*engine.Job[*claimJob], len(qs))
	for i, q := range qs {
		jobs[i] = engine.NewJob(newClaim(broker.Target{Entity: q}, broker.PeekLock, n, nil, true, now))
	}
	return claimManyArgs(jobs)
}

// planTestQueues starts a store on a database of its own and creates the queues named. Autovacuum
// is off for the messages table: the plan tests say when statistics are taken.
func planTestQueues(t *testing.T, names ...string) (*Postgres, []*broker.Entity) {
	t.Helper()
	s := New(dbtest.NewPool(t), Options{})
	if _, err := s.pool.Exec(t.Context(), `ALTER TABLE messages SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	qs := make([]*broker.Entity, len(names))
	for i, name := range names {
		q, err := s.CreateEntity(t.Context(), broker.KindQueue, name, broker.DefaultProperties(broker.KindQueue))
		if err != nil {
			t.Fatal(err)
		}
		qs[i] = q
	}
	return s, qs
}

// insertRawMessages writes n ready messages with bodies of size bytes to q straight into the table,
// far faster than sends (no counts: the plan tests do not read them).
func insertRawMessages(t *testing.T, s *Postgres, q *broker.Entity, n, size int) {
	t.Helper()
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO messages (entity_id, enqueued_at, message_id, body, size)
		SELECT $1, now(), md5(g::text), convert_to(repeat('x', $3), 'UTF8'), $3 + 32 FROM generate_series(1, $2) g`,
		q.ID, n, size); err != nil {
		t.Fatal(err)
	}
}

// explainPages runs sql under EXPLAIN ANALYZE in a transaction it rolls back, and returns the
// shared pages the statement touched and its plan's node types.
func explainPages(t *testing.T, ctx context.Context, s *Postgres, st statement, args pgx.NamedArgs, generic bool) (int, string) {
	t.Helper()
	top, nodes := explainPlanOf(t, ctx, s, st, args, generic)
	var names []string
	for _, n := range nodes {
		names = append(names, strings.TrimSpace(n.Type+" on "+n.Relation))
	}
	return top.Hit + top.Read, fmt.Sprint(names)
}

// explainPlan runs sql under EXPLAIN ANALYZE in a transaction it rolls back, with the generic
// plan the store's claims and settlements run (see genericPlanPool), and returns the top node
// and every node of its plan.
func explainPlan(t *testing.T, ctx context.Context, s *Postgres, st statement, args pgx.NamedArgs) (planNode, []planNode) {
	t.Helper()
	return explainPlanOf(t, ctx, s, st, args, true)
}

// explainPlanOf is explainPlan with the plan chosen: generic, as a prepared statement runs it
// under plan_cache_mode force_generic_plan, or custom, planned for these arguments' values.
func explainPlanOf(t *testing.T, ctx context.Context, s *Postgres, st statement, args pgx.NamedArgs, generic bool) (planNode, []planNode) {
	t.Helper()
	sql, values, err := st.bind(args)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	explain := `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `
	var out []byte
	if generic {
		// EXPLAIN of a statement with parameters plans it for their values; EXPLAIN EXECUTE of
		// a prepared statement shows the plan the prepared statement runs.
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Conn().Prepare(ctx, "explained", sql); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Conn().Deallocate(ctx, "explained") }()
		marks := make([]string, len(values))
		for i := range values {
			marks[i] = fmt.Sprintf("$%d", i+1)
		}
		explain += `EXECUTE explained(` + strings.Join(marks, ", ") + `)`
		// EXECUTE's parameters are not a statement's: give them as literals (pgx writes those
		// for the Go types it knows without a column type; tokens go as text).
		literal := []any{pgx.QueryExecModeSimpleProtocol}
		for _, v := range values {
			if times, ok := v.([]pgtype.Timestamptz); ok {
				text := make([]string, len(times))
				for i, ts := range times {
					b, err := ts.MarshalJSON()
					if err != nil {
						t.Fatal(err)
					}
					text[i] = strings.Trim(string(b), `"`)
				}
				v = text
			}
			if tokens, ok := v.([][16]byte); ok {
				text := make([]string, len(tokens))
				for i, b := range tokens {
					text[i] = uuid.UUID(b).String()
				}
				v = text
			}
			literal = append(literal, v)
		}
		err = tx.QueryRow(ctx, explain, literal...).Scan(&out)
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
	} else if err := tx.QueryRow(ctx, explain+sql, values...).Scan(&out); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain output %s: %v", out, err)
	}
	var nodes []planNode
	var walk func(n planNode)
	walk = func(n planNode) {
		nodes = append(nodes, n)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return plans[0].Plan, nodes
}

type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Hit      int        `json:"Shared Hit Blocks"`
	Read     int        `json:"Shared Read Blocks"`
	Loops    int        `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

// TestReceiverThatLeavesGetsItsMessagesReleased: a peek-lock receive whose caller goes away
// while its claim runs gives the claimed messages back at once, as not delivered, instead of
// leaving them locked until their locks run out.
func TestReceiverThatLeavesGetsItsMessagesReleased(t *testing.T) {
	t.Parallel()
	s, q := startedQueue(t, Options{}, "m")
	ctx := t.Context()
	// The receiver's caller gives up while its claim runs: the claim is held until then.
	recvCtx, cancel := context.WithCancel(ctx)
	claiming := make(chan struct{})
	key := engine.Key{Entity: q.ID}
	start := func() engine.Claimer[*broker.Message] {
		d := engine.Claimer[*broker.Message]{Recheck: time.Minute}
		d.Claim = func(ctx context.Context, mode broker.ReceiveMode, n int) ([]*broker.Message, bool, error) {
			close(claiming)
			<-recvCtx.Done()
			return s.claimMessages(ctx, broker.Target{Entity: q}, mode, n, nil)
		}
		d.Next = func(context.Context, time.Time) (time.Time, error) { return time.Time{}, nil }
		return d
	}
	done := make(chan error, 1)
	go func() {
		msgs, err := engine.WaitFor(recvCtx, s.hub, key, start, broker.PeekLock, 1, time.Minute)
		if len(msgs) != 1 {
			done <- fmt.Errorf("the receiver got %d messages from its claim; want 1", len(msgs))
			return
		}
		s.release(context.WithoutCancel(recvCtx), broker.Target{Entity: q}, msgs)
		done <- err
	}()
	<-claiming
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	var delivered int32
	var locked bool
	if err := s.pool.QueryRow(ctx, `SELECT delivery_count, lock_token IS NOT NULL FROM messages WHERE entity_id = $1`, q.ID).Scan(&delivered, &locked); err != nil {
		t.Fatal(err)
	}
	if delivered != 0 || locked {
		t.Errorf("after the release: delivery count %d, locked %t; want 0, false", delivered, locked)
	}
}

// TestClaimCursorSkipsTheDeadHead: rows locked or completed leave index entries until vacuum;
// a claim that starts from its cursor does not read them, whatever their number, while one from
// the head does.
func TestClaimCursorSkipsTheDeadHead(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	s := New(pool, Options{})
	ctx := t.Context()
	q, err := s.CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE messages SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO messages (entity_id, enqueued_at, message_id, body, size)
		SELECT $1, now(), g::text, '\x00', 1 FROM generate_series(1, 30000) g`, q.ID); err != nil {
		t.Fatal(err)
	}
	// 20,000 claimed through a cursor, half of them completed: dead entries at the head.
	cur := &claimCursor{lastHead: time.Now()}
	var taken []*broker.Message
	for len(taken) < 20000 {
		msgs, _, err := s.claimMessages(ctx, broker.Target{Entity: q}, broker.PeekLock, 1000, cur)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, msgs...)
	}
	var reqs []broker.SettleRequest
	for _, m := range taken[:10000] {
		reqs = append(reqs, broker.SettleRequest{Op: broker.Complete, Token: m.LockToken})
	}
	s.settler.Start()
	defer s.settler.Stop()
	for _, res := range s.Settle(ctx, broker.Target{Entity: q}, reqs) {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	args := pgx.NamedArgs{"entity": q.ID, "state": broker.StateActive, "now": s.now(), "n": 16,
		"lock": interval(q.Props.LockDuration), "max_delivery": q.Props.MaxDeliveryCount,
		"ready_from": cur.readyFrom, "due_from": cur.dueFrom}
	readyPages := func() int {
		_, nodes := explainPlan(t, ctx, s, claimStatements[broker.PeekLock][0], args)
		for _, n := range nodes {
			if n.Index == "messages_ready" {
				return n.Hit + n.Read
			}
		}
		t.Fatal("the claim does not read messages_ready")
		return 0
	}
	fromCursor := readyPages()
	args["ready_from"], args["due_from"] = int64(0), minusInfinity
	fromHead := readyPages()
	t.Logf("the ready range read from the cursor: %d pages; from the head: %d pages", fromCursor, fromHead)
	if fromCursor > 20 || fromHead < 5*fromCursor {
		t.Errorf("the ready range read from the cursor takes %d pages, from the head %d; want a few from the cursor, many more from the head", fromCursor, fromHead)
	}
}

// TestClaimCursorMissesNothing: a row committed below the cursor (a group commit that finished
// after a later one) is still claimed: a claim from the cursor that comes back short looks from
// the head before anyone is told the queue is empty.
func TestClaimCursorMissesNothing(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	s := New(pool, Options{})
	ctx := t.Context()
	q, err := s.CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	insert := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := pool.Exec(ctx, `INSERT INTO messages (entity_id, enqueued_at, message_id, body, size)
				VALUES ($1, now(), $2, '\x00', 1)`, q.ID, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A late row: its sequence number is taken first, its commit comes after the others'.
	late, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.Exec(ctx, `INSERT INTO messages (entity_id, enqueued_at, message_id, body, size)
		VALUES ($1, now(), 'late', '\x00', 1)`, q.ID); err != nil {
		t.Fatal(err)
	}
	insert("a", "b")
	cur := &claimCursor{lastHead: time.Now()}
	got, _, err := s.claimMessages(ctx, broker.Target{Entity: q}, broker.ReceiveAndDelete, 2, cur)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim a and b = %d, %v", len(got), err)
	}
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	insert("c")
	// The cursor is past "late"; the claim from it finds c, and then comes back short, so it
	// looks from the head and finds "late" too.
	got, full, err := s.claimMessages(ctx, broker.Target{Entity: q}, broker.ReceiveAndDelete, 5, cur)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.MessageID)
	}
	if fmt.Sprint(ids) != "[late c]" || full {
		t.Errorf("claim = %v (full %t); want [late c], not full", ids, full)
	}
}

// TestLockEndingDuringAnEmptyClaimIsWaitedFor: a claim finds the queue empty while its one
// message is locked, and the lock runs out before the dispatcher looks for what comes due next.
// The dispatcher must still wake for that message (its lock end came after the claim looked),
// not leave its receivers to the recheck backstop. The store clock is moved between the claim
// and the look, as a loaded machine would.
func TestLockEndingDuringAnEmptyClaimIsWaitedFor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	s, q := startedQueue(t, Options{Now: clock}, "m")
	ctx := t.Context()
	locked, _, err := s.claimMessages(ctx, broker.Target{Entity: q}, broker.PeekLock, 1, nil)
	if err != nil || len(locked) != 1 {
		t.Fatalf("lock the message: %v, %v", locked, err)
	}
	key := engine.Key{Entity: q.ID}
	var claims int
	start := func() engine.Claimer[*broker.Message] {
		d := engine.Claimer[*broker.Message]{Recheck: time.Hour}
		d.Claim = func(ctx context.Context, mode broker.ReceiveMode, n int) ([]*broker.Message, bool, error) {
			got, full, err := s.claimMessages(ctx, broker.Target{Entity: q}, mode, n, nil)
			if claims++; claims == 1 {
				advance(q.Props.LockDuration + time.Second) // the lock runs out right after the claim
			}
			return got, full, err
		}
		d.Next = func(ctx context.Context, since time.Time) (time.Time, error) {
			return s.nextDue(ctx, broker.Target{Entity: q}, since)
		}
		return d
	}
	got, err := engine.WaitFor(ctx, s.hub, key, start, broker.ReceiveAndDelete, 1, 30*time.Second)
	if err != nil || len(got) != 1 || got[0].SequenceNumber != locked[0].SequenceNumber {
		t.Fatalf("receive after the lock ran out: %v, %v; want the message whose lock ended", got, err)
	}
	if claims != 2 {
		t.Errorf("%d claims; want 2 (the empty one, then the one the lock end woke)", claims)
	}
}

// startedQueue starts a store with opts on a database of its own (stopped when the test ends)
// and creates a queue "q" holding a message for each of bodies.
func startedQueue(t *testing.T, opts Options, bodies ...string) (*Postgres, *broker.Entity) {
	t.Helper()
	s := New(dbtest.NewPool(t), opts)
	s.Start(context.Background())
	t.Cleanup(s.Stop)
	q, err := s.CreateEntity(t.Context(), broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if err := s.Send(t.Context(), q, []broker.Message{{Body: []byte(b)}}); err != nil {
			t.Fatal(err)
		}
	}
	return s, q
}

// A cancel of scheduled messages finds its rows by the primary key: through the index of
// scheduled messages (visible_at > now is all it could use there, the entity coming only with
// the pairs) it read every entity's scheduled messages (14,370 pages for 100,000 in another
// queue).
func TestCancelScheduledPlan(t *testing.T) {
	t.Parallel()
	s, qs := planTestQueues(t, "other", "q")
	pool, ctx, other, q := s.pool, t.Context(), qs[0], qs[1]
	if _, err := pool.Exec(ctx, `ANALYZE messages`); err != nil { // statistics of an empty table
		t.Fatal(err)
	}
	scheduled := `INSERT INTO messages (entity_id, enqueued_at, visible_at, message_id, body, size)
		SELECT $1, now(), $2, g::text, '\x00', 1 FROM generate_series(1, $3) g`
	later := s.now().Add(time.Hour)
	for _, e := range []struct {
		id int64
		n  int
	}{{other.ID, 30000}, {q.ID, 10}} {
		if _, err := pool.Exec(ctx, scheduled, e.id, later, e.n); err != nil {
			t.Fatal(err)
		}
	}
	var seq int64
	if err := pool.QueryRow(ctx, `SELECT max(seq) FROM messages WHERE entity_id = $1`, q.ID).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	args := pgx.NamedArgs{"entity": q.ID, "now": s.now()}
	askSeqs(args, q, []int64{seq})
	for _, generic := range []bool{false, true} {
		pages, nodes := explainPages(t, ctx, s, cancelScheduled, args, generic)
		t.Logf("cancel of one scheduled message (generic plan %v): %d pages", generic, pages)
		if pages > 50 {
			t.Errorf("cancel of one scheduled message (generic plan %v) reads %d pages; want a few (plan nodes: %s)", generic, pages, nodes)
		}
	}
}
