package sqltext

// browseSQL lists messages of one subqueue from a sequence number on, without locking them.
// Expired messages the sweep has not removed yet are left out, as a receive would. With $6 (a
// subscription) messages still waiting for their scheduled time are left out too: on the service
// they wait in the topic until then ("Message browsing": scheduled messages are peeked on
// queues, not on subscriptions), where sbgate keeps each subscription's copy.
var browseSQL = `SELECT ` + messageSelectFromM + ` FROM messages m
WHERE m.entity_id = $1 AND (m.state = ` + sqlDeadLetter + `) = ($2::smallint = ` + sqlDeadLetter + `) AND m.seq >= $3
	AND (m.expires_at IS NULL OR m.expires_at > $4 OR m.state = ` + sqlDeadLetter + `)
	AND NOT ($6::boolean AND m.state = ` + sqlActive + ` AND m.lock_token IS NULL AND coalesce(m.scheduled_at > $4, false))
ORDER BY m.seq LIMIT $5`

// cancelScheduledSQL removes the messages @seqs (askSeqs) that are still waiting for their
// scheduled time, and returns their sequence numbers. The time condition is written so that no
// index can serve it: the index of scheduled messages can (visible_at > now is its key), and
// read every entity's scheduled messages to find the few asked for (TestCancelScheduledPlan).
const cancelScheduledSQL = `
WITH removed AS (
	DELETE FROM messages m USING` + askedSeqsSQL + `
	WHERE m.entity_id = w.entity AND m.seq = w.seq AND m.state = ` + sqlActive + `
		AND m.lock_token IS NULL AND (m.visible_at > @now) IS TRUE
	RETURNING m.seq, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), 0, -sum(size) FROM removed HAVING count(*) > 0
)
SELECT seq FROM removed`

// cancelScheduledCopiesSQL removes the copies, still waiting for their time, of the messages a
// topic or a forwarding entity numbered @seqs (their EnqueuedSequenceNumber), from the entities
// @holders that hold them (copyHolders), and returns each number it removed copies of.
const cancelScheduledCopiesSQL = `
WITH removed AS (
	DELETE FROM messages m
	WHERE m.entity_id = ANY(@holders::bigint[]) AND m.enqueued_seq = ANY(@seqs::bigint[]) AND m.state = ` + sqlActive + `
		AND m.lock_token IS NULL AND (m.visible_at > @now) IS TRUE
	RETURNING m.entity_id, m.enqueued_seq, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), 0, -sum(size) FROM removed GROUP BY entity_id
)
SELECT DISTINCT enqueued_seq FROM removed`

// purgeSQL deletes the next chunk of a subqueue's messages: those after sequence number @after,
// up to the sequence number of the @n-th of them (and not past @upto). It walks the primary key
// from where the previous chunk ended, so no chunk passes again over the rows (and dead index
// entries) earlier chunks deleted. The rows are deleted by primary-key range, not by ctid: a row
// another transaction updates meanwhile (a claim, an abandon, a renewal) is then deleted in its
// new version once that transaction ends (PostgreSQL rechecks the conditions on it), where a
// delete by ctid would find the version it saw gone and skip the row. It returns how many it
// deleted and the chunk's last sequence number (NULL: none left).
const purgeSQL = `
WITH bound AS MATERIALIZED (
	SELECT max(seq) AS last FROM (
		SELECT seq FROM messages
		WHERE entity_id = @entity AND seq > @after AND seq <= @upto
			AND (state = ` + sqlDeadLetter + `) = (@state::smallint = ` + sqlDeadLetter + `)
		ORDER BY seq LIMIT @n) c
), removed AS (
	DELETE FROM messages m
	WHERE m.entity_id = @entity AND m.seq > @after AND m.seq <= (SELECT last FROM bound)
		AND (m.state = ` + sqlDeadLetter + `) = (@state::smallint = ` + sqlDeadLetter + `)
	RETURNING m.state, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `), -count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), -sum(size)
	FROM removed HAVING count(*) > 0
)
SELECT (SELECT count(*) FROM removed), (SELECT last FROM bound)`

// resubmitCandidatesSQL reads dead-lettered messages after sequence number $2 that no one holds a
// lock on, locking the rows for the rest of the transaction.
var resubmitCandidatesSQL = `SELECT ` + messageSelectFromM + ` FROM messages m
WHERE m.entity_id = $1 AND m.state = ` + sqlDeadLetter + ` AND m.seq > $2 AND ($3::bigint = 0 OR m.seq = $3)
	AND (m.lock_token IS NULL OR m.visible_at <= $4)
ORDER BY m.seq LIMIT $5 FOR UPDATE SKIP LOCKED`

// resubmitSQL puts dead-lettered messages back in their entity as new messages: a new sequence
// number (at the back of the queue), enqueued now with its TTL counted from now, no deliveries,
// no dead-letter reason.
const resubmitSQL = `
WITH moved AS (
	UPDATE messages m SET seq = nextval('message_seq'), state = ` + sqlActive + `, visible_at = NULL, lock_token = NULL,
		delivery_count = 0, enqueued_at = $3::timestamptz, scheduled_at = NULL,
		expires_at = CASE WHEN m.ttl IS NULL THEN NULL ELSE $3::timestamptz + m.ttl END,
		dead_letter_reason = NULL, dead_letter_description = NULL, dead_letter_source = NULL
	WHERE m.entity_id = $1 AND m.seq = ANY($2) AND m.state = ` + sqlDeadLetter + `
	RETURNING m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT $1, count(*), -count(*), 0 FROM moved HAVING count(*) > 0
)
SELECT count(*) FROM moved`

// lastSeqSQL is the highest sequence number entity $1 holds (0: none), where a purge stops.
const lastSeqSQL = `SELECT coalesce(max(seq), 0) FROM messages WHERE entity_id = $1`
