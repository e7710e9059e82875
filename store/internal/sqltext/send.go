package sqltext

// insertMessagesSQL writes a group of messages in one statement, so in one transaction, with
// their duplicate-detection history and count deltas. A message sent to an entity that detects
// duplicates (dedup_until, its history expiry, not NULL) is written only if its MessageId is
// new to that entity (dedup_entity) or its earlier record has expired; concurrent senders with
// the same id wait on the dedup key, so exactly one wins on every gateway, and all copies of a
// topic message share the topic's record. Rows are inserted in input order, which gives a batch
// increasing sequence numbers; so the statement returns the positions of the rows it inserted
// and their sequence numbers, both in increasing order, and the n-th of one belongs to the n-th
// of the other.
//
// The columns of messages it writes are generated from the db tags of store's messageColumns
// (columns.gen.go): one array each, named after its column (insertArrayList), the columns
// (insertColumnList) and what is inserted in each (insertValueList).
const insertMessagesSQL = `
WITH input AS (
	SELECT * FROM unnest(` + insertArrayList + `,
		@dedup_entity::bigint[], @dedup_until::timestamptz[], @sessioned::boolean[], @origin_of::bigint[])
		WITH ORDINALITY AS u(` + insertColumnList + `, dedup_entity, dedup_until, sessioned, origin_of, ord)
), origin AS (
	-- The sequence number of the original send of each auto-forwarded message that had no row
	-- where it was sent, one per sent message (its copies share it).
	SELECT origin_of, nextval('message_seq') AS oseq FROM (SELECT DISTINCT origin_of FROM input WHERE origin_of <> 0) f
), opened AS (
	-- A session entity's session becomes acceptable when its first message can be received; a
	-- locked session keeps its time (the end of its lock).
	INSERT INTO sessions (entity_id, session_id, available_at)
	SELECT DISTINCT ON (entity_id, session_id) entity_id, session_id, coalesce(visible_at, @now)
	FROM input WHERE sessioned
	ORDER BY entity_id, session_id, coalesce(visible_at, @now)
	ON CONFLICT (entity_id, session_id) DO UPDATE SET
		available_at = CASE WHEN sessions.locked_until > @now THEN sessions.available_at
			ELSE least(coalesce(sessions.available_at, excluded.available_at), excluded.available_at) END
), fresh AS (
	INSERT INTO dedup (entity_id, message_id, expires_at)
	SELECT DISTINCT dedup_entity, message_id, dedup_until FROM input WHERE dedup_until IS NOT NULL
	ORDER BY dedup_entity, message_id -- the order every send locks them in
	ON CONFLICT (entity_id, message_id) DO UPDATE SET expires_at = excluded.expires_at
		WHERE dedup.expires_at <= @now
	RETURNING entity_id, message_id
), ins AS (
	INSERT INTO messages (` + insertColumnList + `)
	SELECT ` + insertValueList + `
	FROM input LEFT JOIN origin USING (origin_of)
	WHERE dedup_until IS NULL
		OR EXISTS (SELECT 1 FROM fresh f WHERE f.entity_id = input.dedup_entity AND f.message_id = input.message_id)
	ORDER BY ord
	RETURNING entity_id, state, size, seq
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `),
		count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), sum(size)
	FROM ins GROUP BY entity_id
)
SELECT coalesce((SELECT array_agg(ord ORDER BY ord) FROM input
		WHERE dedup_until IS NULL
			OR EXISTS (SELECT 1 FROM fresh f WHERE f.entity_id = input.dedup_entity AND f.message_id = input.message_id)), '{}'),
	coalesce((SELECT array_agg(seq ORDER BY seq) FROM ins), '{}')`

// originNumbersSQL reads the EnqueuedSequenceNumber of the rows (entity, seq) given, in their
// order: 0 for a row that is gone already.
const originNumbersSQL = `SELECT array_agg(coalesce(m.enqueued_seq, 0) ORDER BY w.ord)
		FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY w(entity, seq, ord)
		LEFT JOIN messages m ON m.entity_id = w.entity AND m.seq = w.seq`
