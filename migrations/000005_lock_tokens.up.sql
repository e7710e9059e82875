-- A lock token names its message (its last 8 bytes are the sequence number), so settlement finds
-- the row through the primary key and the index of lock tokens, which every peek-lock had to
-- write, goes. Locks taken before this migration carry random tokens: settling one answers "lock
-- lost" and its message is delivered again when the lock ends, as after any lost lock.
DROP INDEX IF EXISTS messages_lock;
