-- Subscription rules. The filter and action are kept as the client described them (kind, SQL
-- text, parameters with their types, correlation fields); the broker compiles and evaluates them
-- itself, never as SQL given to the database.
CREATE TABLE rules (
    subscription_id bigint NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    name_key        text NOT NULL,
    name            text NOT NULL,
    filter          jsonb NOT NULL,
    action          jsonb,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (subscription_id, name_key)
);
