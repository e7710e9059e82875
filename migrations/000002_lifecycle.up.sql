-- Message counts kept as they change, so CountDetails is cheap for an entity with millions of
-- messages. Every statement that adds or removes messages inserts a delta row in the same
-- statement (inserts never wait on each other, unlike updates of one counter row per entity);
-- a background task folds the deltas into entity_counts. Reads add the two.
--   main:  messages in the entity proper (active, deferred and scheduled ones)
--   dead:  messages in its dead-letter subqueue
--   bytes: their total size
CREATE TABLE entity_counts (
    entity_id bigint PRIMARY KEY,
    main      bigint NOT NULL DEFAULT 0,
    dead      bigint NOT NULL DEFAULT 0,
    bytes     bigint NOT NULL DEFAULT 0
);

CREATE TABLE entity_count_deltas (
    entity_id bigint NOT NULL,
    main      bigint NOT NULL,
    dead      bigint NOT NULL,
    bytes     bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000, autovacuum_vacuum_cost_delay = 0);

CREATE INDEX entity_count_deltas_entity ON entity_count_deltas (entity_id);

INSERT INTO entity_counts (entity_id, main, dead, bytes)
SELECT entity_id, count(*) FILTER (WHERE state <> 2), count(*) FILTER (WHERE state = 2), coalesce(sum(size), 0)
FROM messages GROUP BY entity_id;

-- Scheduled messages (not yet visible, not locked), for ScheduledMessageCount without a scan.
CREATE INDEX messages_scheduled ON messages (entity_id, visible_at)
    WHERE lock_token IS NULL AND visible_at IS NOT NULL;

-- Messages that can expire, for the expiry sweep and for counting the expired ones it has not
-- reached yet. Dead-lettered messages never expire.
CREATE INDEX messages_expiry ON messages (entity_id, expires_at)
    WHERE expires_at IS NOT NULL AND state <> 2;

-- Duplicate detection history: a MessageId seen by an entity, until its window ends. Written in
-- the same statement as the message, so concurrent senders on several gateways agree.
CREATE TABLE dedup (
    entity_id  bigint NOT NULL,
    message_id text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (entity_id, message_id)
);

CREATE INDEX dedup_expiry ON dedup (expires_at);
