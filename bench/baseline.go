package bench

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The baseline: what the gateways' PostgreSQL does with nothing in front of it, measured in the
// same run on the same machine, so that every figure of the run can be read as a ratio to it. It
// is the one place outside store/ that writes SQL: it must not go through the store, whose cost
// is what it is compared with.
const (
	// BaselineInsert is a one-row INSERT of one message body per commit: what a send costs
	// PostgreSQL at the least.
	BaselineInsert = "pg-insert"
	// BaselineClaim is the naive claim + complete: one UPDATE … FOR UPDATE SKIP LOCKED claims
	// the first unlocked row (its own commit), one DELETE removes it (its own commit).
	BaselineClaim = "pg-claim-complete"
)

// baselineTable is the scratch table's definition; %s is its name.
const baselineTable = `CREATE TABLE %s (
	seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	locked boolean NOT NULL DEFAULT false,
	body bytea NOT NULL
)`

// baselinePrefillChunk is how many rows one prefill statement inserts.
const baselinePrefillChunk = 20_000

// runBaseline measures BaselineInsert then BaselineClaim on a scratch table it drops afterwards,
// and fills in the database's side of the machine description.
func (r *runner) runBaseline(ctx context.Context, m *Machine) ([]Result, error) {
	admin, err := pgx.Connect(ctx, r.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: baseline: connect: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	describeDatabase(ctx, admin, m)

	table := pgx.Identifier{"bench_scratch_" + hex.EncodeToString(randomBytes(4))}.Sanitize()
	if _, err := admin.Exec(ctx, fmt.Sprintf(baselineTable, table)); err != nil {
		return nil, fmt.Errorf("bench: baseline: create scratch table: %w", err)
	}
	defer func() {
		dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = admin.Exec(dropCtx, `DROP TABLE IF EXISTS `+table)
	}()

	conns := make([]*pgx.Conn, r.cfg.BaselineClients)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	for i := range conns {
		if conns[i], err = pgx.Connect(ctx, r.cfg.DatabaseURL); err != nil {
			return nil, fmt.Errorf("bench: baseline: connect: %w", err)
		}
	}
	r.logf("baseline: PostgreSQL alone, %d connections, scratch table %s", len(conns), table)

	ins, err := r.baselineInsert(ctx, conns, table)
	out := []Result{ins}
	if err != nil {
		return out, err
	}
	if err := r.prefillBaseline(ctx, admin, table, ins, len(conns)); err != nil {
		return out, err
	}
	claim, err := r.baselineClaim(ctx, conns, table)
	return append(out, claim), err
}

// baselineInsert measures BaselineInsert: single-row inserts into table over conns.
func (r *runner) baselineInsert(ctx context.Context, conns []*pgx.Conn,
	table string) (Result, error) {
	insertSQL := `INSERT INTO ` + table + ` (body) VALUES ($1)`
	res := Result{Operation: BaselineInsert, Clients: len(conns)}
	return r.measure(ctx, res, func(w int) (iteration, error) {
		c := conns[w]
		return func(ctx context.Context) (int, error) {
			if _, err := c.Exec(ctx, insertSQL, r.body); err != nil {
				return 0, err
			}
			return 1, nil
		}, nil
	})
}

// prefillBaseline fills table for the claim phase, given the insert phase ins and the number of
// connections.
func (r *runner) prefillBaseline(ctx context.Context, admin *pgx.Conn, table string, ins Result,
	conns int) error {
	// Enough rows for the claim to stay busy: it is slower than the insert (two commits a row),
	// so the insert's rate bounds it.
	var rows int64
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&rows); err != nil {
		return fmt.Errorf("bench: baseline: %w", err)
	}
	want := int64(max(ins.Rate(), 2000)*(r.cfg.Duration.Seconds()*1.2+0.5)) + int64(conns)
	for rows < want {
		n := min(want-rows, baselinePrefillChunk)
		if _, err := admin.Exec(ctx, `INSERT INTO `+table+` (body) SELECT $1::bytea FROM generate_series(1, $2::int)`, r.body, n); err != nil {
			return fmt.Errorf("bench: baseline: prefill: %w", err)
		}
		rows += n
	}
	// Fresh statistics, so that the claim's plan is the index scan it would have in a table
	// that grew slowly.
	if _, err := admin.Exec(ctx, `ANALYZE `+table); err != nil {
		return fmt.Errorf("bench: baseline: analyze: %w", err)
	}
	return nil
}

// baselineClaim measures BaselineClaim: a SKIP LOCKED claim of the oldest row of table, then its
// deletion, over conns.
func (r *runner) baselineClaim(ctx context.Context, conns []*pgx.Conn,
	table string) (Result, error) {
	claimSQL := `UPDATE ` + table + ` SET locked = true WHERE seq = (SELECT seq FROM ` + table +
		` WHERE NOT locked ORDER BY seq FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING seq, body`
	deleteSQL := `DELETE FROM ` + table + ` WHERE seq = $1`
	res := Result{Operation: BaselineClaim, Clients: len(conns)}
	return r.measure(ctx, res, func(w int) (iteration, error) {
		c := conns[w]
		var seq int64
		var body []byte
		return func(ctx context.Context) (int, error) {
			if err := c.QueryRow(ctx, claimSQL).Scan(&seq, &body); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return 0, errEmpty
				}
				return 0, err
			}
			if _, err := c.Exec(ctx, deleteSQL, seq); err != nil {
				return 0, err
			}
			return 1, nil
		}, nil
	})
}

// localPostmaster is the process of the PostgreSQL server at url when it runs on this machine,
// else 0 (findPostmaster).
func localPostmaster(ctx context.Context, url string) int {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0
	}
	defer c.Close(context.WithoutCancel(ctx))
	var backend int
	if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0
	}
	return findPostmaster(backend)
}

// describeDatabase adds the server's version and durability settings to m.
func describeDatabase(ctx context.Context, c *pgx.Conn, m *Machine) {
	var version, fsync, syncCommit string
	if err := c.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')`).
		Scan(&version, &fsync, &syncCommit); err != nil {
		return
	}
	m.PostgreSQL = "PostgreSQL " + version
	m.Durability = "fsync " + fsync + ", synchronous_commit " + syncCommit
}
