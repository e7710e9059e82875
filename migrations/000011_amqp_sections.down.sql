-- The sections go with their column: the sizes they counted in are taken back, from the rows and
-- from their entities' byte counts.
WITH shrunk AS (
    UPDATE messages SET size = size - octet_length(amqp_sections)
    WHERE amqp_sections IS NOT NULL
    RETURNING entity_id, octet_length(amqp_sections) AS n
)
INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
SELECT entity_id, 0, 0, -sum(n) FROM shrunk GROUP BY entity_id;
ALTER TABLE messages DROP COLUMN amqp_sections, DROP COLUMN ttl_from_sender;
