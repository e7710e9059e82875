package store

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CountsSQL lets tests look at the plan of the count query.
const CountsSQL = countsSQL

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
