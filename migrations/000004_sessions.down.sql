DROP INDEX IF EXISTS messages_session_due;
DROP INDEX IF EXISTS messages_session_ready;
DROP TABLE IF EXISTS sessions;
