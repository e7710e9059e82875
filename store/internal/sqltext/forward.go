package sqltext

// deadLettersToForwardSQL reads a chunk ($3) of the dead letters of entity $1 after sequence
// number $4 that no valid lock holds at $2, locking them, for forwarding to
// ForwardDeadLetteredMessagesTo; with $5 only those with a SessionId (the target needs sessions).
const deadLettersToForwardSQL = `SELECT ` + messageSelectFromM + ` FROM messages m
			WHERE m.entity_id = $1 AND m.state = ` + sqlDeadLetter + ` AND (m.lock_token IS NULL OR m.visible_at <= $2)
				AND m.seq > $4 AND (NOT $5 OR m.session_id IS NOT NULL)
			ORDER BY m.seq LIMIT $3 FOR UPDATE SKIP LOCKED`

// removeForwardedSQL deletes the dead letters of entity $1 with sequence numbers $2, forwarded,
// and counts them out.
const removeForwardedSQL = `WITH removed AS (
					DELETE FROM messages WHERE entity_id = $1 AND seq = ANY($2) RETURNING size
				) INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
				SELECT $1, 0, -count(*), -sum(size) FROM removed HAVING count(*) > 0`
