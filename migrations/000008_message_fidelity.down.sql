-- Without body_type, an AMQP-encoded body would read as the bytes of the message: such messages
-- cannot be kept, and are removed (with their counts). The empty session becomes no session, as
-- it was before.
WITH removed AS (
    DELETE FROM messages WHERE body_type <> 0 RETURNING entity_id, state, size
)
INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
SELECT entity_id, -count(*) FILTER (WHERE state <> 2), -count(*) FILTER (WHERE state = 2), -sum(size)
FROM removed GROUP BY entity_id;
UPDATE messages SET session_id = NULL WHERE session_id = '';
DELETE FROM sessions WHERE session_id = '';
ALTER TABLE messages DROP COLUMN body_type;
