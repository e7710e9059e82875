package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/db/dbtest"
)

// TestClaimPlanWithStaleStatistics: a queue filled faster than autoanalyze runs must be drained
// as fast as a small one. The statistics here were taken when the table held another entity's
// rows only, then 100,000 messages arrive: the planner believes the queue holds a couple of rows.
// Every claim statement must still read the head of the queue through its index (a few dozen
// pages), not sort the backlog (tens of thousands). The test asserts pages read, not time.
func TestClaimPlanWithStaleStatistics(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	s := New(pool, Options{})
	ctx := t.Context()
	other, err := s.CreateEntity(ctx, KindQueue, "other", DefaultProperties(KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.CreateEntity(ctx, KindQueue, "backlog", DefaultProperties(KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	fill := `INSERT INTO messages (entity_id, enqueued_at, message_id, body, size)
		SELECT $1, now(), md5(g::text), convert_to(repeat('x', 1024), 'UTF8'), 1056 FROM generate_series(1, $2) g`
	for _, sql := range []string{
		`ALTER TABLE messages SET (autovacuum_enabled = false)`, // this test's own database
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
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
	if _, err := pool.Exec(ctx, fill, other.ID, 3000); err != nil {
		t.Fatal(err)
	}
	// ANALYZE takes the statistics; VACUUM then clears the dead rows the locking left (it keeps
	// the column statistics), so only the statistics are stale, not the table.
	for _, sql := range []string{`ANALYZE messages`, `VACUUM messages`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, fill, q.ID, 100000); err != nil {
		t.Fatal(err)
	}

	base := pgx.NamedArgs{"entity": q.ID, "state": StateActive, "now": s.now(), "n": 16}
	for _, tc := range []struct {
		name string
		sql  string
		args pgx.NamedArgs
	}{
		{"peek-lock", claimStatements[PeekLock][0], pgx.NamedArgs{"lock": interval(q.Props.LockDuration), "max_delivery": q.Props.MaxDeliveryCount}},
		{"receive-and-delete", claimStatements[ReceiveAndDelete][0], nil},
		{"next due", nextDueSQL, nil},
	} {
		args := pgx.NamedArgs{}
		for k, v := range base {
			args[k] = v
		}
		for k, v := range tc.args {
			args[k] = v
		}
		pages, nodes := explainPages(t, ctx, s, tc.sql, args)
		t.Logf("%s: %d pages", tc.name, pages)
		if pages > 500 {
			t.Errorf("%s reads %d pages with stale statistics; want a few dozen (plan nodes: %s)", tc.name, pages, nodes)
		}
		for _, bad := range []string{"Bitmap Heap Scan", "Seq Scan on messages"} {
			if strings.Contains(nodes, bad) {
				t.Errorf("%s plan has a %s: %s", tc.name, bad, nodes)
			}
		}
	}
}

// explainPages runs sql under EXPLAIN ANALYZE in a transaction it rolls back, and returns the
// shared pages the statement touched and its plan's node types.
func explainPages(t *testing.T, ctx context.Context, s *Postgres, sql string, args pgx.NamedArgs) (int, string) {
	t.Helper()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var out []byte
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, args).Scan(&out); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain output %s: %v", out, err)
	}
	var nodes []string
	var walk func(n planNode)
	walk = func(n planNode) {
		nodes = append(nodes, strings.TrimSpace(n.Type+" on "+n.Relation))
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return plans[0].Plan.Hit + plans[0].Plan.Read, fmt.Sprint(nodes)
}

type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Hit      int        `json:"Shared Hit Blocks"`
	Read     int        `json:"Shared Read Blocks"`
	Plans    []planNode `json:"Plans"`
}
