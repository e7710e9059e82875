package store

import (
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

// A round of the claimer often holds claims of many entities, each for a message or two (64
// receivers on 64 queues: one each). Run as one statement apiece, every claim pays a statement's
// fixed cost in PostgreSQL (measured: 81 µs of execution a claim of one message, against 31 µs a
// message for a claim of 14 in one queue) and a round trip's share. So the claims of a round
// that are not in a session share one statement: the claim written once above (the same ranges,
// cursors, ordering and locking), run for each target as a LATERAL subquery over the targets'
// arrays. A round with one such claim runs the claim's own statement.

// targetArgs are the arguments of a claim that differ by target; in the shared statement they
// are columns of t, the target's row.
var targetArgs = map[string]bool{"entity": true, "state": true, "n": true, "ready_from": true, "due_from": true}

// targetwise rewrites a claim's per-target @names to the columns of t.
func targetwise(sql string) string {
	return namedArgRE.ReplaceAllStringFunc(sql, func(m string) string {
		if targetArgs[m[1:]] {
			return "t." + m[1:]
		}
		return m
	})
}

// claimManyPickSQL picks, for every target k, what the claim of that target alone would pick.
var claimManyPickSQL = `WITH t AS MATERIALIZED (
	SELECT * FROM unnest(@entity::bigint[], @state::smallint[], @n::int[], @ready_from::bigint[],
		@due_from::timestamptz[], @lock_us::bigint[], @max_delivery::int[])
		WITH ORDINALITY AS t(entity, state, n, ready_from, due_from, lock_us, max_delivery, k)
), due_window AS MATERIALIZED (
	SELECT t.k, w.ctid, w.seq, w.visible_at FROM t CROSS JOIN LATERAL (` + targetwise(dueRangeSQL+dueWindowOrderSQL) + `
	) w
), due AS MATERIALIZED (
	SELECT t.k, d.ctid, d.seq, d.visible_at FROM t CROSS JOIN LATERAL (` + targetwise(strings.Replace(dueTakeSQL,
	"SELECT ctid FROM due_window", "SELECT w.ctid FROM due_window w WHERE w.k = t.k", 1)) + `
	) d
), ready AS MATERIALIZED (
	SELECT t.k, r.ctid, r.seq FROM t CROSS JOIN LATERAL (` + targetwise(readyRangeSQL+readyOrderSQL) + `
	) r
), picked AS (
	SELECT c.k, c.ctid, c.seq, c.due_at FROM (
		SELECT u.*, row_number() OVER (PARTITION BY u.k ORDER BY u.seq) AS rank FROM (
			SELECT k, ctid, seq, visible_at AS due_at FROM due
			UNION ALL SELECT k, ctid, seq, NULL::timestamptz FROM ready) u
	) c JOIN t ON t.k = c.k WHERE c.rank <= t.n
)`

// claimedManySQL is claimedSQL by target.
const claimedManySQL = `, p.k, p.due_at AS claimed_due_at,
	(SELECT min(w.visible_at) FROM due_window w WHERE w.k = p.k AND w.ctid <> ALL (ARRAY(SELECT ctid FROM picked))) AS due_left`

// peekLockManyTailSQL is peekLockTailSQL with each row's lock duration and delivery limit those
// of its target.
var peekLockManyTailSQL = `, locked AS (
	UPDATE messages m SET ` + strings.NewReplacer(
	"@lock::interval", "(x.lock_us * interval '1 microsecond')",
	"@max_delivery", "x.max_delivery").Replace(lockOrDeadLetterSQL) + `
	FROM (SELECT p.ctid, t.state, t.lock_us, t.max_delivery FROM picked p JOIN t ON t.k = p.k) x
	WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM picked)) AND m.ctid = x.ctid
	RETURNING m.*, x.state AS target_state
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM locked
	WHERE locked.state = ` + sqlDeadLetter + ` AND locked.target_state <> ` + sqlDeadLetter + `
	GROUP BY entity_id
)
SELECT ` + messageSelectFrom("locked") + claimedManySQL + ` FROM locked JOIN picked p ON p.seq = locked.seq`

// receiveAndDeleteManyTailSQL is receiveAndDeleteTailSQL counted by entity.
var receiveAndDeleteManyTailSQL = `, removed AS (
	DELETE FROM messages m WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM picked))
	RETURNING m.*
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `), -count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), -sum(size)
	FROM removed GROUP BY entity_id
)
SELECT ` + removedSelectFrom("removed") + claimedManySQL + ` FROM removed JOIN picked p ON p.seq = removed.seq`

// claimManyStatements[mode] claims for many targets at once.
var claimManyStatements = [2]string{
	broker.PeekLock:         claimManyPickSQL + peekLockManyTailSQL,
	broker.ReceiveAndDelete: claimManyPickSQL + receiveAndDeleteManyTailSQL,
}

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
