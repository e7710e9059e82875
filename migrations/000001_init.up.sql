-- Entities: queues, topics and subscriptions share one table; rules live in their own table (a
-- later migration). path_key is the canonical lower-case path ("orders", "a/b/c",
-- "events/subscriptions/audit"); path keeps the casing the entity was created with.
CREATE TABLE entities (
    id                                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                                 smallint NOT NULL CHECK (kind IN (1, 2, 3)), -- queue, topic, subscription
    path_key                             text NOT NULL UNIQUE,
    path                                 text NOT NULL,
    parent_id                            bigint REFERENCES entities (id) ON DELETE CASCADE,
    lock_duration                        interval NOT NULL,
    max_size_mb                          bigint NOT NULL,
    requires_duplicate_detection         boolean NOT NULL,
    requires_session                     boolean NOT NULL,
    default_ttl                          interval, -- NULL: TimeSpan.MaxValue, never expires
    dead_lettering_on_expiration         boolean NOT NULL,
    dead_lettering_on_filter_exceptions  boolean NOT NULL,
    duplicate_detection_window           interval NOT NULL,
    max_delivery_count                   integer NOT NULL CHECK (max_delivery_count >= 1),
    enable_batched_operations            boolean NOT NULL,
    is_anonymous_accessible              boolean NOT NULL,
    status                               text NOT NULL,
    forward_to                           text NOT NULL DEFAULT '',
    forward_dead_lettered_to             text NOT NULL DEFAULT '',
    user_metadata                        text NOT NULL DEFAULT '',
    support_ordering                     boolean NOT NULL,
    auto_delete_on_idle                  interval, -- NULL: never
    enable_partitioning                  boolean NOT NULL,
    enable_express                       boolean NOT NULL,
    max_message_size_kb                  bigint NOT NULL,
    filtering_messages_before_publishing boolean NOT NULL,
    enable_subscription_partitioning     boolean NOT NULL,
    authorization_rules                  jsonb NOT NULL DEFAULT '[]',
    created_at                           timestamptz NOT NULL,
    updated_at                           timestamptz NOT NULL,
    accessed_at                          timestamptz
);

CREATE INDEX entities_parent ON entities (parent_id) WHERE parent_id IS NOT NULL;

-- One global sequence gives every entity increasing sequence numbers without a per-entity counter
-- row that every send would have to lock. CACHE 1 keeps numbers increasing in commit-start order
-- across connections, so a sender that waits for each 201 sees its messages in send order.
CREATE SEQUENCE message_seq AS bigint CACHE 1;

-- Messages: one row per message per queue or subscription.
--   state:      0 active, 1 deferred, 2 dead-lettered
--   visible_at: NULL = can be received now; otherwise not before this time, which is either the
--               scheduled enqueue time (lock_token NULL) or the end of a peek-lock (lock_token set).
--               An expired lock needs no sweeper: the row simply becomes "due".
CREATE TABLE messages (
    entity_id               bigint NOT NULL,
    seq                     bigint NOT NULL DEFAULT nextval('message_seq'),
    state                   smallint NOT NULL DEFAULT 0,
    visible_at              timestamptz,
    lock_token              uuid,
    delivery_count          integer NOT NULL DEFAULT 0,
    enqueued_at             timestamptz NOT NULL,
    expires_at              timestamptz, -- NULL: never
    ttl                     interval,    -- as sent; NULL when the sender gave none
    scheduled_at            timestamptz,
    message_id              text NOT NULL,
    correlation_id          text,
    session_id              text,
    reply_to_session_id     text,
    label                   text,
    to_addr                 text,
    reply_to                text,
    partition_key           text,
    content_type            text,
    user_props              jsonb,
    body                    bytea NOT NULL,
    size                    integer NOT NULL,
    dead_letter_reason      text,
    dead_letter_description text,
    dead_letter_source      text,
    PRIMARY KEY (entity_id, seq)
) WITH (
    -- A SKIP LOCKED queue turns over every row it holds; vacuum it on a fixed number of dead
    -- rows rather than a fraction of the table, and without cost-based sleeps.
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 50000,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0
);

-- The head of each entity: rows receivable now, in sequence order. Locked and scheduled rows are
-- not in this index, so a claim never steps over in-flight locks however many pile up.
CREATE INDEX messages_ready ON messages (entity_id, state, seq) WHERE visible_at IS NULL;
-- Rows that become receivable at a time: scheduled messages and peek-locks, by that time.
CREATE INDEX messages_due ON messages (entity_id, state, visible_at) WHERE visible_at IS NOT NULL;
-- Settlement finds a message by its lock token.
CREATE UNIQUE INDEX messages_lock ON messages (entity_id, lock_token) WHERE lock_token IS NOT NULL;

-- Namespace-level shared access policies (entity-level ones live on the entity).
CREATE TABLE namespace_keys (
    name          text PRIMARY KEY,
    primary_key   text NOT NULL,
    secondary_key text NOT NULL,
    rights        text[] NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
