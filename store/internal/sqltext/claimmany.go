package sqltext

import (
	"regexp"
	"strings"

	"github.com/sbgate/sbgate/broker"
)

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
	SELECT t.k, d.ctid, d.seq, d.visible_at FROM t CROSS JOIN LATERAL (` + targetwise(strings.ReplaceAll(dueTakeSQL,
	dueWindowRowsSQL, "SELECT w.ctid FROM due_window w WHERE w.k = t.k")) + `
	) d
), ready AS MATERIALIZED (
	SELECT t.k, r.ctid, r.seq FROM t CROSS JOIN LATERAL (` + targetwise(readyRangeSQL+readyOrderSQL) + `
	) r
), picked AS (
	SELECT c.k, c.ctid, c.seq, c.due_at, t.state AS target_state, t.lock_us, t.max_delivery FROM (
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
	FROM picked x
	WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM picked)) AND m.ctid = x.ctid
	RETURNING m.*, x.target_state
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM locked
	WHERE locked.state = ` + sqlDeadLetter + ` AND locked.target_state <> ` + sqlDeadLetter + `
	GROUP BY entity_id
)
SELECT ` + messageSelectFromLocked + claimedManySQL + ` FROM locked JOIN picked p ON p.seq = locked.seq`

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

// targetArgs are the arguments of a claim that differ by target; in the shared statement they
// are columns of t, the target's row.
var targetArgs = map[string]bool{"entity": true, "state": true, "n": true, "ready_from": true, "due_from": true}

// namedArgRE finds what may be an @name. The names of a statement are checked by pgx's own lexer
// (pgx.StrictNamedArgs): one found here that pgx does not see as an argument (in a string or a
// comment) fails the numbering instead of passing silently.
var namedArgRE = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)
