package store

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// TestPurgeChunksStayFlat: a purge deletes a queue in chunks, and each chunk must cost what the
// first did, wherever the purge has got to, so that purging a large queue stays linear: no chunk
// may pass again over the rows (and dead index entries) earlier chunks deleted, nor over other
// entities' rows. The table is large, other entities' rows lie ahead of the purged queue's and
// behind them in the primary key, vacuum does not run during the purge (as when it outruns
// autovacuum), and the statistics are stale both ways: taken before one queue had any message
// (the planner thinks it empty), and when the other was full (it thinks it still is). Each chunk
// is looked at under EXPLAIN (ANALYZE, BUFFERS), planned for the values and as the generic plan.
func TestPurgeChunksStayFlat(t *testing.T) {
	t.Parallel()
	s, qs := planTestQueues(t, "ahead", "unseen", "full", "behind")
	pool, ctx := s.pool, t.Context()
	ahead, unseen, full, behind := qs[0], qs[1], qs[2], qs[3]
	insertRawMessages(t, s, ahead, 300000, 100)
	insertRawMessages(t, s, full, 50000, 100)
	if _, err := pool.Exec(ctx, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}
	insertRawMessages(t, s, unseen, 50000, 100)
	insertRawMessages(t, s, behind, 100000, 100)

	const chunks, chunk, looked = 10, 5000, 1000
	for _, q := range []*broker.Entity{unseen, full} {
		var upto int64
		if err := pool.QueryRow(ctx, `SELECT max(seq) FROM messages WHERE entity_id = $1`, q.ID).Scan(&upto); err != nil {
			t.Fatal(err)
		}
		var first [2]int // pages of the first chunk looked at: custom plan, generic plan
		var after int64
		for i := range chunks {
			// Look at the next chunk of 1,000 (rolled back), then purge the next 5,000.
			for g, generic := range []bool{false, true} {
				pages, nodes := explainPages(t, ctx, s, purgeMessages, pgx.NamedArgs{"entity": q.ID, "after": after, "upto": upto,
					"state": broker.StateActive, "n": looked}, generic)
				t.Logf("%s: chunk of %d after %d purged (generic plan %v): %d pages", q.Path, looked, i*chunk, generic, pages)
				if i == 0 {
					first[g] = pages
				}
				// A chunk of 1,000 reads about 2,070 pages (two buffer visits a row and its index
				// pages), give or take a few, wherever it starts. One that walks the primary key
				// from the queue's start reads about 8 more for every 1,000 rows purged before it
				// (the dead rows' index entries, once marked dead), 5% more after 10,000 and
				// without bound after that; a scan from the table's start reads them all.
				if pages > first[g]*21/20 {
					t.Errorf("%s: a chunk of %d after %d purged reads %d pages (generic plan %v); the first read %d: the purge is not linear (plan nodes: %s)",
						q.Path, looked, i*chunk, pages, generic, first[g], nodes)
				}
				if strings.Contains(nodes, "Seq Scan on messages") {
					t.Errorf("%s: purge chunk plan (generic plan %v) has a Seq Scan: %s", q.Path, generic, nodes)
				}
			}
			n, last, err := s.purgeChunk(ctx, q, broker.SubQueueMain, after, upto, chunk)
			if err != nil || n != chunk || last == nil {
				t.Fatalf("%s: purge chunk after %d: %d deleted, last %v, %v", q.Path, after, n, last, err)
			}
			after = *last
		}
	}
	// The others are untouched.
	for _, c := range []struct {
		e    *broker.Entity
		want int
	}{{ahead, 300000}, {behind, 100000}} {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE entity_id = $1`, c.e.ID).Scan(&n); err != nil || n != c.want {
			t.Errorf("%s holds %d messages after the purges (%v); want %d", c.e.Path, n, err, c.want)
		}
	}
}
