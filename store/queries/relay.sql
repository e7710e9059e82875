-- The relay of the SQL sends (relay.go): its doorbell lock and the outbox it empties.

-- HoldDoorbell takes the session advisory lock that tells senders a relay is polling
-- (sbgate.ring in migration 000007), if no other relay holds it.
-- name: HoldDoorbell :one
SELECT pg_try_advisory_lock(7367, 1);

-- name: ReleaseDoorbell :exec
SELECT pg_advisory_unlock(7367, 1);

-- ClaimOutbox takes the oldest due rows that no other relay holds.
-- name: ClaimOutbox :many
SELECT id, path, body, message_id, coalesce(correlation_id, '') AS correlation_id,
	coalesce(session_id, '') AS session_id, coalesce(reply_to_session_id, '') AS reply_to_session_id,
	coalesce(label, '') AS label, coalesce(to_addr, '') AS to_addr, coalesce(reply_to, '') AS reply_to,
	coalesce(partition_key, '') AS partition_key, coalesce(via_partition_key, '') AS via_partition_key,
	coalesce(content_type, '') AS content_type, ttl_seconds, scheduled_at, user_props, attempts
FROM sbgate.outbox WHERE retry_at IS NULL OR retry_at <= sqlc.arg(now)::timestamptz
ORDER BY id LIMIT sqlc.arg(n)::bigint FOR UPDATE SKIP LOCKED;

-- RelayDone deletes the relayed rows (done_ids) and records the ones that could not be
-- delivered: their errors, and when to try again ('infinity': never). ROWS FROM of three
-- unnests is what unnest(a, b, c) stands for (PostgreSQL documents them as the same), spelled
-- out because sqlc knows unnest of one array only. The retry times are cast to
-- pg_catalog.timestamptz, the same type, so that sqlc.yaml's time.Time for timestamptz does not
-- apply: time.Time has no 'infinity', pgtype.Timestamptz does.
-- name: RelayDone :exec
WITH gone AS (
	DELETE FROM sbgate.outbox WHERE id = ANY(sqlc.arg(done_ids)::bigint[])
)
UPDATE sbgate.outbox o SET attempts = o.attempts + 1, last_error = f.err, retry_at = f.retry
FROM ROWS FROM (unnest(sqlc.arg(failed_ids)::bigint[]), unnest(sqlc.arg(failures)::text[]),
	unnest(sqlc.arg(retries)::pg_catalog.timestamptz[])) AS f(id, err, retry)
WHERE o.id = f.id;
