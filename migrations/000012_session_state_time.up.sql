-- get-message-sessions with a last-updated-time lists the sessions whose state was set after it
-- (what the service answers: a session with messages and no state update is not listed). The
-- one time a session row kept was bumped by sends and by its lock too; it becomes the time of
-- the last state update, NULL for a session whose state was never set. Sends no longer write it.
ALTER TABLE sessions RENAME COLUMN updated_at TO state_updated_at;
ALTER TABLE sessions ALTER COLUMN state_updated_at DROP NOT NULL;
UPDATE sessions SET state_updated_at = NULL WHERE state IS NULL;
