-- Sessions that are not claims of messages (sessionlist.go, sessions.go).

-- ListSessionsUpdatedSince: Service Bus's get-message-sessions with a last-updated-time.
-- name: SessionsUpdatedSince :many
SELECT session_id FROM sessions WHERE entity_id = @entity_id AND state_updated_at > sqlc.arg(since)::timestamptz
ORDER BY session_id OFFSET sqlc.arg(skip)::bigint LIMIT sqlc.arg(top)::bigint;

-- NextSessionDue is when the next session of an entity whose messages are all scheduled comes
-- due: the time an accepting receiver waits for.
-- name: NextSessionDue :one
SELECT min(available_at) FROM sessions
WHERE entity_id = @entity_id AND available_at > sqlc.arg(since)::timestamptz;

-- OldestAvailableSession takes the session whose messages have waited longest.
-- name: OldestAvailableSession :one
SELECT session_id FROM sessions
WHERE entity_id = @entity_id AND available_at <= sqlc.arg(now)::timestamptz
ORDER BY available_at LIMIT 1 FOR UPDATE SKIP LOCKED;

-- NextAvailable is when the session can next give a message: now if it holds a receivable
-- message (or one under a message lock, which accepting the session releases), the earliest
-- scheduled time if it holds only scheduled ones, NULL if it holds none. Each branch reads one
-- of the session's partial indexes; none scans the entity.
-- name: NextAvailable :one
SELECT CASE
	WHEN EXISTS (SELECT 1 FROM messages WHERE entity_id = sqlc.arg(entity_id)::bigint
		AND session_id = sqlc.arg(session_id)::text AND visible_at IS NULL AND state = 0 /* sqlActive */
		AND (expires_at IS NULL OR expires_at > sqlc.arg(now)::timestamptz)) THEN sqlc.arg(now)::timestamptz
	ELSE (SELECT min(CASE WHEN lock_token IS NOT NULL OR visible_at <= sqlc.arg(now)::timestamptz
			THEN sqlc.arg(now)::timestamptz ELSE visible_at END)
		FROM messages WHERE entity_id = sqlc.arg(entity_id)::bigint AND session_id = sqlc.arg(session_id)::text
			AND visible_at IS NOT NULL AND state = 0 /* sqlActive */
			AND (expires_at IS NULL OR expires_at > sqlc.arg(now)::timestamptz))
END AS next_available;

-- SetSessionAvailable records when a session that is not locked will have a message to give.
-- name: SetSessionAvailable :exec
UPDATE sessions SET available_at = @available_at, lock_token = NULL, locked_until = NULL
WHERE entity_id = @entity_id AND session_id = @session_id;

-- ReleaseMessageLocks frees the messages of a session that were locked under an earlier
-- session lock: a new holder continues from the first unsettled message. Each of those
-- deliveries failed (its lock went with the session's), and counts.
-- name: ReleaseMessageLocks :exec
UPDATE messages SET lock_token = NULL, visible_at = NULL, delivery_count = delivery_count + 1
WHERE entity_id = @entity_id AND session_id = sqlc.arg(session_id)::text AND visible_at IS NOT NULL
	AND lock_token IS NOT NULL AND state <> 2 /* sqlDeadLetter */;

-- name: TakeSessionLock :one
UPDATE sessions SET lock_token = gen_random_uuid(),
	locked_until = sqlc.arg(now)::timestamptz + sqlc.arg(lock_duration)::interval,
	available_at = sqlc.arg(now)::timestamptz + sqlc.arg(lock_duration)::interval
WHERE entity_id = @entity_id AND session_id = @session_id
RETURNING lock_token, locked_until;

-- EnsureSession makes the row of a session a receiver accepts by name, and returns until when
-- another receiver holds it.
-- name: EnsureSession :one
INSERT INTO sessions (entity_id, session_id) VALUES (@entity_id, @session_id)
ON CONFLICT (entity_id, session_id) DO UPDATE SET session_id = excluded.session_id
RETURNING locked_until;

-- name: SessionLockHeld :one
SELECT 1 FROM sessions WHERE entity_id = @entity_id AND session_id = @session_id
	AND lock_token = sqlc.arg(lock_token)::uuid AND locked_until > sqlc.arg(now)::timestamptz;

-- RenewSessionLock extends a session lock, and the locks of the messages received under it
-- with it (a message in a session is locked as long as its session).
-- name: RenewSessionLock :one
WITH renewed AS (
	UPDATE sessions SET locked_until = sqlc.arg(now)::timestamptz + sqlc.arg(lock_duration)::interval,
		available_at = sqlc.arg(now)::timestamptz + sqlc.arg(lock_duration)::interval
	WHERE entity_id = sqlc.arg(entity_id)::bigint AND session_id = sqlc.arg(session_id)::text AND lock_token = sqlc.arg(lock_token)::uuid
		AND locked_until > sqlc.arg(now)::timestamptz
	RETURNING locked_until
), held AS (
	UPDATE messages m SET visible_at = r.locked_until FROM renewed r
	WHERE m.entity_id = sqlc.arg(entity_id)::bigint AND m.session_id = sqlc.arg(session_id)::text AND m.lock_token IS NOT NULL
		AND m.visible_at > sqlc.arg(now)::timestamptz AND m.state <> 2 /* sqlDeadLetter */
)
SELECT locked_until::timestamptz FROM renewed;

-- name: LockSessionHeld :one
SELECT EXISTS (SELECT 1 FROM sessions WHERE entity_id = @entity_id AND session_id = @session_id
	AND lock_token = sqlc.arg(lock_token)::uuid AND locked_until > sqlc.arg(now)::timestamptz FOR UPDATE);

-- name: ReleaseSessionLock :exec
UPDATE sessions SET lock_token = NULL, locked_until = NULL, available_at = @available_at
WHERE entity_id = @entity_id AND session_id = @session_id;

-- name: SessionState :one
SELECT state FROM sessions WHERE entity_id = @entity_id AND session_id = @session_id
	AND lock_token = sqlc.arg(lock_token)::uuid AND locked_until > sqlc.arg(now)::timestamptz;

-- name: SetSessionState :execrows
UPDATE sessions SET state = @state, state_updated_at = sqlc.arg(now)::timestamptz
WHERE entity_id = @entity_id AND session_id = @session_id AND lock_token = sqlc.arg(lock_token)::uuid
	AND locked_until > sqlc.arg(now)::timestamptz;

-- ListSessions lists the sessions of an entity that hold messages or state, or are locked.
-- name: ListSessions :many
SELECT s.session_id, s.locked_until, (s.state IS NOT NULL)::boolean AS has_state,
	(EXISTS (SELECT 1 FROM messages m WHERE m.entity_id = s.entity_id AND m.session_id = s.session_id
		AND m.visible_at IS NULL AND m.state <> 2 /* sqlDeadLetter */)
	OR EXISTS (SELECT 1 FROM messages m WHERE m.entity_id = s.entity_id AND m.session_id = s.session_id
		AND m.visible_at IS NOT NULL AND m.state <> 2 /* sqlDeadLetter */))::boolean AS has_messages
FROM sessions s
WHERE s.entity_id = @entity_id
	AND (s.available_at IS NOT NULL OR s.state IS NOT NULL OR s.locked_until > sqlc.arg(now)::timestamptz)
ORDER BY s.session_id OFFSET sqlc.arg(skip)::bigint LIMIT sqlc.arg(top)::bigint;
