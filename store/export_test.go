package store

// CountsSQL lets tests look at the plan of the count query.
const CountsSQL = countsSQL

// Claims is how many claim statements the store has run.
func (s *Postgres) Claims() int64 { return s.claims.Load() }

// SharedClaims is how many statements claimed for several targets at once.
func (s *Postgres) SharedClaims() int64 { return s.sharedClaims.Load() }

// ConflictRetries is how many statements were run again after a deadlock.
func (s *Postgres) ConflictRetries() int64 { return s.conflictRetries.Load() }

// Conns is how many connections the store's pool and its generic-plan pool hold.
func (s *Postgres) Conns() (pool, hot int32) {
	pool = s.pool.Stat().TotalConns()
	if h := s.hot.Load(); h != nil {
		hot = h.Stat().TotalConns()
	}
	return pool, hot
}
