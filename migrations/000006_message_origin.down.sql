ALTER TABLE messages DROP COLUMN IF EXISTS via_partition_key, DROP COLUMN IF EXISTS enqueued_seq;
