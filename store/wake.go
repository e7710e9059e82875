package store

// wakeTarget names what a change concerns: an entity, and a session of it ("" for every
// receiver of the entity).
type wakeTarget struct {
	entity  int64
	session string
}

// wake wakes the dispatchers of this gateway that t concerns.
func (s *Postgres) wake(t wakeTarget) { s.hub.Wake(t.entity, t.session) }
