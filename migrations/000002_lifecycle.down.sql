DROP TABLE IF EXISTS dedup;
DROP INDEX IF EXISTS messages_expiry;
DROP INDEX IF EXISTS messages_scheduled;
DROP TABLE IF EXISTS entity_count_deltas;
DROP TABLE IF EXISTS entity_counts;
