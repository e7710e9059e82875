-- Sessions of session-enabled queues and subscriptions: the session lock, the session state,
-- and when the session can next be accepted.
--   available_at: NULL when the session has no messages (it is only listed if it has state);
--                 otherwise when a receiver may accept it: the time its first message became
--                 receivable, or, while it is locked, the end of the lock. Like visible_at for
--                 messages, this keeps locked sessions out of the "next session" index range,
--                 so accepting stays fast however many sessions are held or idle.
CREATE TABLE sessions (
    entity_id    bigint NOT NULL,
    session_id   text NOT NULL,
    lock_token   uuid,
    locked_until timestamptz,
    available_at timestamptz,
    state        bytea,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (entity_id, session_id)
);

CREATE INDEX sessions_available ON sessions (entity_id, available_at) WHERE available_at IS NOT NULL;
CREATE UNIQUE INDEX sessions_lock ON sessions (entity_id, lock_token) WHERE lock_token IS NOT NULL;

-- The head of each session, for receives inside an accepted session.
CREATE INDEX messages_session_ready ON messages (entity_id, session_id, seq)
    WHERE visible_at IS NULL AND session_id IS NOT NULL;
CREATE INDEX messages_session_due ON messages (entity_id, session_id, visible_at)
    WHERE visible_at IS NOT NULL AND session_id IS NOT NULL;
