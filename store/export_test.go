package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sbgate/sbgate/store/internal/sqlcdb"
)

// CountsSQL lets tests look at the plan of the count query: the text sqlc generated for
// EntityCounts, as a DBTX that runs nothing receives it.
var CountsSQL = func() string {
	var rec sqlRecorder
	_, _ = queries.EntityCounts(context.Background(), &rec, sqlcdb.EntityCountsParams{})
	return rec.sql
}()

// sqlRecorder is a DBTX that keeps the text of the statement it is given and runs nothing.
type sqlRecorder struct{ sql string }

var errRecorded = errors.New("recorded, not run")

func (r *sqlRecorder) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	r.sql = sql
	return pgconn.CommandTag{}, errRecorded
}

func (r *sqlRecorder) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	r.sql = sql
	return nil, errRecorded
}

func (r *sqlRecorder) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	r.sql = sql
	return recordedRow{}
}

type recordedRow struct{}

func (recordedRow) Scan(...any) error { return errRecorded }

// Claims is how many claim statements the store has run.
func (s *Postgres) Claims() int64 { return s.claims.Load() }

// SharedClaims is how many statements claimed for several targets at once.
func (s *Postgres) SharedClaims() int64 { return s.sharedClaims.Load() }

// ConflictRetries is how many statements were run again after a deadlock.
func (s *Postgres) ConflictRetries() int64 { return s.conflictRetries.Load() }

// IdlePIDs are the backend process ids of the idle connections of the store's pool and of its
// generic-plan pool.
func (s *Postgres) IdlePIDs(ctx context.Context) (pool, hot []uint32) {
	pids := func(p *pgxpool.Pool) []uint32 {
		var out []uint32
		for _, c := range p.AcquireAllIdle(ctx) {
			out = append(out, c.Conn().PgConn().PID())
			c.Release()
		}
		return out
	}
	pool = pids(s.pool)
	if h := s.hot.Load(); h != nil {
		hot = pids(h)
	}
	return pool, hot
}
