package sqltext

// restoreSQL inserts rows as they were when a receive-and-delete removed them: their sequence
// number and failed deliveries, the other columns as the message insert has them (insertColumnNames), with their count
// deltas. A sequence number in use again (it cannot be, short of a restore run twice) keeps
// what holds it.
const restoreSQL = `
WITH input AS (
	SELECT * FROM unnest(` + insertArrayList + `, @seq::bigint[], @delivery_count::integer[])
		AS u(` + insertColumnList + `, seq, delivery_count)
), ins AS (
	INSERT INTO messages (seq, delivery_count, ` + insertColumnList + `)
	SELECT seq, delivery_count, ` + insertColumnList + ` FROM input
	ON CONFLICT (entity_id, seq) DO NOTHING
	RETURNING entity_id, session_id, state, size
), opened AS (
	-- A session a message comes back to can be accepted for it, as when it was sent.
	INSERT INTO sessions (entity_id, session_id, available_at)
	SELECT DISTINCT entity_id, session_id, @now::timestamptz FROM ins
	WHERE @sessioned AND session_id IS NOT NULL AND state <> ` + sqlDeadLetter + `
	ON CONFLICT (entity_id, session_id) DO UPDATE SET
		available_at = CASE WHEN sessions.locked_until > @now THEN sessions.available_at
			ELSE least(coalesce(sessions.available_at, excluded.available_at), excluded.available_at) END
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `),
		count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), sum(size)
	FROM ins GROUP BY entity_id
)
SELECT count(*) FROM ins`
