package store

// CountsSQL lets tests look at the plan of the count query.
const CountsSQL = countsSQL

// Claims is how many claim statements the store has run.
func (s *Postgres) Claims() int64 { return s.claims.Load() }

// SharedClaims is how many statements claimed for several targets at once.
func (s *Postgres) SharedClaims() int64 { return s.sharedClaims.Load() }

// ConflictRetries is how many statements were run again after a deadlock.
func (s *Postgres) ConflictRetries() int64 { return s.conflictRetries.Load() }
