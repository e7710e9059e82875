package store

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/engine"
)

// A round of the claimer often holds claims of many entities, each for a message or two (64
// receivers on 64 queues: one each). Run as one statement apiece, every claim pays a statement's
// fixed cost in PostgreSQL (measured: 81 µs of execution a claim of one message, against 31 µs a
// message for a claim of 14 in one queue) and a round trip's share. So the claims of a round
// that are not in a session share one statement: the claim written once above (the same ranges,
// cursors, ordering and locking), run for each target as a LATERAL subquery over the targets'
// arrays. A round with one such claim runs the claim's own statement.

// claimTarget is one claim as a target of a shared statement: its entity, subqueue, size and
// cursor, and the lock duration and delivery limit its messages are locked with.
type claimTarget struct {
	entity      int64
	state       int16
	n           int32
	readyFrom   int64
	dueFrom     pgtype.Timestamptz
	lock        time.Duration
	maxDelivery int32
	now         time.Time
}

// claimedManyRecord is a claimed row of a shared claim: k is its target's place (1-based).
type claimedManyRecord struct {
	claimedRecord
	K int64 `db:"k"`
}

// claimManyArgs are the arguments of claimManyStatements for the claims of jobs, in order.
func claimManyArgs(jobs []*engine.Job[*claimJob]) pgx.NamedArgs {
	n := len(jobs)
	entity, state, size := make([]int64, n), make([]int16, n), make([]int32, n)
	readyFrom, dueFrom := make([]int64, n), make([]pgtype.Timestamptz, n)
	lockMicros, maxDelivery := make([]int64, n), make([]int32, n)
	var now time.Time
	for i, j := range jobs {
		t := j.Req.target
		entity[i], state[i], size[i], readyFrom[i], dueFrom[i] = t.entity, t.state, t.n, t.readyFrom, t.dueFrom
		lockMicros[i], maxDelivery[i] = t.lock.Microseconds(), t.maxDelivery
		// Every claim of the round looks up to the latest of their times: a claim never
		// concludes anything about a time later than it looked (its cursor stays behind its
		// own time).
		now = maxTime(now, t.now)
	}
	return pgx.NamedArgs{"entity": entity, "state": state, "n": size, "ready_from": readyFrom,
		"due_from": dueFrom, "lock_us": lockMicros, "max_delivery": maxDelivery, "now": now}
}
