CREATE UNIQUE INDEX IF NOT EXISTS messages_lock ON messages (entity_id, lock_token) WHERE lock_token IS NOT NULL;
