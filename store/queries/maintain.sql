-- The background tasks (maintain.go), the notifications between gateways (notify.go) and the
-- numbers a client transaction reserves (txn.go).

-- TryTaskLock takes the advisory lock of a background task for the transaction, if no other
-- gateway holds it.
-- name: TryTaskLock :one
SELECT pg_try_advisory_xact_lock(sqlc.arg(key)::bigint);

-- ExpireMessages removes expired messages that no valid lock holds, or dead-letters them
-- (TTLExpiredException) where the entity says so, counting either. It visits entities one by
-- one through the messages_expiry index, so its cost follows the number of expired messages,
-- not the size of the table.
-- name: ExpireMessages :one
WITH candidates AS (
	SELECT m.entity_id, m.seq, e.dead_lettering_on_expiration AS dl
	FROM entities e CROSS JOIN LATERAL (
		SELECT x.entity_id, x.seq FROM messages x
		WHERE x.entity_id = e.id AND x.expires_at <= sqlc.arg(now)::timestamptz
			AND x.state <> 2 /* sqlDeadLetter */
			AND (x.lock_token IS NULL OR x.visible_at <= sqlc.arg(now)::timestamptz)
		ORDER BY x.expires_at LIMIT sqlc.arg(chunk)::bigint FOR UPDATE OF x SKIP LOCKED
	) m
	WHERE e.kind <> 2 /* sqlTopic */
), dead_lettered AS (
	UPDATE messages m SET state = 2 /* sqlDeadLetter */, lock_token = NULL, visible_at = NULL,
		delivery_count = m.delivery_count + CASE WHEN m.lock_token IS NOT NULL THEN 1 ELSE 0 END,
		dead_letter_reason = 'TTLExpiredException',
		dead_letter_description = 'The message expired and was dead lettered.'
	FROM candidates c WHERE c.dl AND m.entity_id = c.entity_id AND m.seq = c.seq
	RETURNING m.entity_id
), removed AS (
	DELETE FROM messages m USING candidates c WHERE NOT c.dl AND m.entity_id = c.entity_id AND m.seq = c.seq
	RETURNING m.entity_id, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM dead_lettered GROUP BY entity_id
	UNION ALL
	SELECT entity_id, -count(*), 0, -sum(size) FROM removed GROUP BY entity_id
)
SELECT ((SELECT count(*) FROM dead_lettered) + (SELECT count(*) FROM removed))::bigint AS n,
	ARRAY(SELECT DISTINCT entity_id FROM dead_lettered)::bigint[] AS entities;

-- DeadLetterLapsed moves to the dead-letter subqueue the messages whose lock ran out on the
-- last delivery their entity allows (MaxDeliveryCountExceeded, store.ReasonMaxDeliveryCount): on
-- the service such a message is in the dead-letter subqueue (and counted there) once its lock
-- lapses, not at the next receive, which may never come. Each entity is visited through
-- messages_due, so the cost follows the locks that lapsed, not the size of the table.
-- name: DeadLetterLapsed :one
WITH lapsed AS (
	SELECT x.entity_id, x.seq, e.max_delivery_count AS max_delivery FROM entities e CROSS JOIN LATERAL (
		SELECT x.entity_id, x.seq FROM messages x
		WHERE x.entity_id = e.id AND x.state IN (0 /* sqlActive */, 1 /* sqlDeferred */)
			AND x.visible_at <= sqlc.arg(now)::timestamptz
			AND x.lock_token IS NOT NULL AND x.delivery_count + 1 >= e.max_delivery_count
		LIMIT sqlc.arg(chunk)::bigint FOR UPDATE OF x SKIP LOCKED
	) x
	WHERE e.kind <> 2 /* sqlTopic */
), moved AS (
	UPDATE messages m SET state = 2 /* sqlDeadLetter */, lock_token = NULL, visible_at = NULL,
		delivery_count = m.delivery_count + 1, dead_letter_reason = 'MaxDeliveryCountExceeded',
		dead_letter_description = 'Message could not be consumed after ' || l.max_delivery || ' delivery attempts.'
	FROM lapsed l WHERE m.entity_id = l.entity_id AND m.seq = l.seq
	RETURNING m.entity_id
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM moved GROUP BY entity_id
)
SELECT count(*) AS n, ARRAY(SELECT DISTINCT entity_id FROM moved)::bigint[] AS entities FROM moved;

-- CompactCounts folds the count deltas into entity_counts in one statement: a reader sees the
-- deltas either still in their table or already in the totals, never both or neither.
-- name: CompactCounts :exec
WITH folded AS (
	DELETE FROM entity_count_deltas RETURNING entity_id, main, dead, bytes
), summed AS (
	SELECT entity_id, sum(main) AS main, sum(dead) AS dead, sum(bytes) AS bytes FROM folded GROUP BY entity_id
)
INSERT INTO entity_counts (entity_id, main, dead, bytes)
SELECT s.entity_id, s.main, s.dead, s.bytes FROM summed s WHERE EXISTS (SELECT 1 FROM entities e WHERE e.id = s.entity_id)
ON CONFLICT (entity_id) DO UPDATE SET main = entity_counts.main + excluded.main,
	dead = entity_counts.dead + excluded.dead, bytes = entity_counts.bytes + excluded.bytes;

-- name: PruneDedup :exec
DELETE FROM dedup WHERE expires_at <= sqlc.arg(now)::timestamptz;

-- ForgetIdleSessions: sessions with no messages, no state and no lock are forgotten (they come
-- back with their next message).
-- name: ForgetIdleSessions :exec
DELETE FROM sessions WHERE available_at IS NULL AND state IS NULL
	AND (locked_until IS NULL OR locked_until <= sqlc.arg(now)::timestamptz);

-- IdleEntities finds entities idle for their AutoDeleteOnIdle: no send, receive, browse or
-- update since, and no scheduled message waiting (in them or, for a topic, its subscriptions).
-- name: IdleEntities :many
SELECT e.path FROM entities e
WHERE e.auto_delete_on_idle IS NOT NULL
	AND greatest(e.created_at, e.updated_at, coalesce(e.accessed_at, e.created_at)) + e.auto_delete_on_idle
		<= sqlc.arg(now)::timestamptz
	AND NOT EXISTS (
		SELECT 1 FROM messages m
		WHERE m.entity_id IN (SELECT e.id UNION ALL SELECT s.id FROM entities s WHERE s.parent_id = e.id)
			AND m.lock_token IS NULL AND m.visible_at > sqlc.arg(now)::timestamptz)
ORDER BY e.id LIMIT 100;

-- name: RecordAccess :exec
UPDATE entities SET accessed_at = sqlc.arg(now)::timestamptz
WHERE id = ANY(sqlc.arg(ids)::bigint[])
	AND (accessed_at IS NULL OR accessed_at < sqlc.arg(now)::timestamptz);

-- CountListeners counts the gateways listening for notifications (notify.go).
-- name: CountListeners :one
SELECT count(*) FROM pg_catalog.pg_stat_activity
WHERE application_name = sqlc.arg(app_name)::text AND datname = current_database();

-- name: Notify :exec
SELECT pg_notify(sqlc.arg(channel)::text, p) FROM unnest(sqlc.arg(payloads)::text[]) p;

-- ReserveSequenceNumbers draws numbers for a client transaction's scheduled messages (txn.go).
-- name: ReserveSequenceNumbers :one
SELECT array_agg(nextval('message_seq'))::bigint[] FROM generate_series(1, sqlc.arg(n)::integer);
