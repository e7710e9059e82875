-- Entities: queues, topics and subscriptions (entities.go, topics.go, maintain.go).

-- ForwardingSubscriptions reads where the subscriptions of a topic forward their messages, to
-- refuse forwarding that would go round in a loop.
-- name: ForwardingSubscriptions :many
SELECT forward_to FROM entities WHERE parent_id = sqlc.arg(topic_id)::bigint AND forward_to <> '';

-- Entity reads the entity at a path key. `SELECT *` and `RETURNING *` are expanded by sqlc into
-- every column, in table order, and read into its row type sqlcdb.Entity (made from the
-- migrations), so no statement reads an entity without some column.
-- name: Entity :one
SELECT * FROM entities WHERE path_key = @path_key;

-- EntityForUpdate reads the entity at a path key and locks it until the transaction ends.
-- name: EntityForUpdate :one
SELECT * FROM entities WHERE path_key = @path_key FOR UPDATE;

-- ListEntities lists the entities of a kind, those of one parent unless parent_id is 0.
-- name: ListEntities :many
SELECT * FROM entities
WHERE kind = @kind AND (sqlc.arg(parent_id)::bigint = 0 OR parent_id = sqlc.arg(parent_id)::bigint)
ORDER BY path_key OFFSET sqlc.arg(skip)::bigint LIMIT sqlc.arg(top)::bigint;

-- TopicSubscriptions reads the subscriptions of a topic (topics.go).
-- name: TopicSubscriptions :many
SELECT * FROM entities WHERE parent_id = sqlc.arg(topic_id)::bigint ORDER BY path_key;

-- DeadLetterForwarders reads the entities whose dead letters Maintain moves on (maintain.go).
-- name: DeadLetterForwarders :many
SELECT * FROM entities WHERE forward_dead_lettered_to <> '';

-- CreateEntity writes every column but the generated id; a path taken already returns no row.
-- entityrecord_internal_test.go checks that it names every column of the table.
-- name: CreateEntity :one
INSERT INTO entities (kind, path_key, path, parent_id, lock_duration, max_size_mb,
	requires_duplicate_detection, requires_session, default_ttl, dead_lettering_on_expiration,
	dead_lettering_on_filter_exceptions, duplicate_detection_window, max_delivery_count,
	enable_batched_operations, is_anonymous_accessible, status, forward_to,
	forward_dead_lettered_to, user_metadata, support_ordering, auto_delete_on_idle,
	enable_partitioning, enable_express, max_message_size_kb,
	filtering_messages_before_publishing, enable_subscription_partitioning, authorization_rules,
	created_at, updated_at, accessed_at, forward_to_url, forward_dead_lettered_to_url)
VALUES (@kind, @path_key, @path, @parent_id, @lock_duration, @max_size_mb,
	@requires_duplicate_detection, @requires_session, @default_ttl, @dead_lettering_on_expiration,
	@dead_lettering_on_filter_exceptions, @duplicate_detection_window, @max_delivery_count,
	@enable_batched_operations, @is_anonymous_accessible, @status, @forward_to,
	@forward_dead_lettered_to, @user_metadata, @support_ordering, @auto_delete_on_idle,
	@enable_partitioning, @enable_express, @max_message_size_kb,
	@filtering_messages_before_publishing, @enable_subscription_partitioning, @authorization_rules,
	@created_at, @updated_at, @accessed_at, @forward_to_url, @forward_dead_lettered_to_url)
ON CONFLICT (path_key) DO NOTHING
RETURNING *;

-- UpdateEntity writes the columns an update may change: the description and updated_at. The
-- others are fixed at creation (kind, path_key, path, parent_id, created_at) or written by their
-- own statement (accessed_at, RecordAccess); entityrecord_internal_test.go lists them.
-- name: UpdateEntity :one
UPDATE entities SET lock_duration = @lock_duration, max_size_mb = @max_size_mb,
	requires_duplicate_detection = @requires_duplicate_detection,
	requires_session = @requires_session, default_ttl = @default_ttl,
	dead_lettering_on_expiration = @dead_lettering_on_expiration,
	dead_lettering_on_filter_exceptions = @dead_lettering_on_filter_exceptions,
	duplicate_detection_window = @duplicate_detection_window,
	max_delivery_count = @max_delivery_count,
	enable_batched_operations = @enable_batched_operations,
	is_anonymous_accessible = @is_anonymous_accessible, status = @status,
	forward_to = @forward_to, forward_dead_lettered_to = @forward_dead_lettered_to,
	user_metadata = @user_metadata, support_ordering = @support_ordering,
	auto_delete_on_idle = @auto_delete_on_idle, enable_partitioning = @enable_partitioning,
	enable_express = @enable_express, max_message_size_kb = @max_message_size_kb,
	filtering_messages_before_publishing = @filtering_messages_before_publishing,
	enable_subscription_partitioning = @enable_subscription_partitioning,
	authorization_rules = @authorization_rules, updated_at = @updated_at,
	forward_to_url = @forward_to_url, forward_dead_lettered_to_url = @forward_dead_lettered_to_url
WHERE id = @id
RETURNING *;

-- DeleteEntityTree deletes an entity and, for a topic, its subscriptions, returning their ids
-- for the statements below.
-- name: DeleteEntityTree :many
DELETE FROM entities WHERE path_key = sqlc.arg(path_key)::text OR parent_id IN
	(SELECT id FROM entities WHERE path_key = sqlc.arg(path_key)::text) RETURNING id;

-- name: DeleteEntitiesMessages :exec
DELETE FROM messages WHERE entity_id = ANY(sqlc.arg(ids)::bigint[]);

-- name: DeleteEntitiesCounts :exec
DELETE FROM entity_counts WHERE entity_id = ANY(sqlc.arg(ids)::bigint[]);

-- name: DeleteEntitiesCountDeltas :exec
DELETE FROM entity_count_deltas WHERE entity_id = ANY(sqlc.arg(ids)::bigint[]);

-- name: DeleteEntitiesDedup :exec
DELETE FROM dedup WHERE entity_id = ANY(sqlc.arg(ids)::bigint[]);

-- name: DeleteEntitiesSessions :exec
DELETE FROM sessions WHERE entity_id = ANY(sqlc.arg(ids)::bigint[]);

-- EntityCounts reads the counts of several entities: the kept totals plus the deltas not yet
-- folded in, less the messages whose time has not come (scheduled) and those expired but not yet
-- swept, each found through a small partial index. Nothing here scans an entity's messages.
-- The ::bigint casts give sqlc the type the Go code reads (a sum of bigints is a numeric).
-- name: EntityCounts :many
SELECT e.id::bigint AS id,
	(coalesce(c.main, 0) + coalesce(d.main, 0))::bigint AS main,
	(coalesce(c.dead, 0) + coalesce(d.dead, 0))::bigint AS dead,
	(coalesce(c.bytes, 0) + coalesce(d.bytes, 0))::bigint AS bytes,
	sch.n::bigint AS scheduled, exp.n::bigint AS expired, exp.bytes::bigint AS expired_bytes
FROM unnest(sqlc.arg(ids)::bigint[]) AS e(id)
LEFT JOIN entity_counts c ON c.entity_id = e.id
LEFT JOIN LATERAL (SELECT sum(main) AS main, sum(dead) AS dead, sum(bytes) AS bytes
	FROM entity_count_deltas x WHERE x.entity_id = e.id) d ON true
CROSS JOIN LATERAL (SELECT count(*) AS n FROM messages m
	WHERE m.entity_id = e.id AND m.lock_token IS NULL
		AND m.visible_at > sqlc.arg(now)::timestamptz) sch
CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(sum(m.size), 0) AS bytes FROM messages m
	WHERE m.entity_id = e.id AND m.expires_at <= sqlc.arg(now)::timestamptz
		AND m.state <> 2 /* sqlDeadLetter */
		AND NOT (m.lock_token IS NOT NULL AND m.visible_at > sqlc.arg(now)::timestamptz)) exp;

-- TopicCounts reads, for each topic, its subscriptions, the bytes they hold (each copy counted:
-- the service stores a message once per topic, sbgate once per subscription it reaches) and the
-- messages scheduled on it that have not come due: on the service those wait in the topic, and
-- its runtime properties count them (the Go SDK's live tests check it); here they wait as copies
-- in the subscriptions, counted once per scheduled message: the copies of one scheduled through
-- $management share its number (EnqueuedSequenceNumber), those of one sent with a
-- ScheduledEnqueueTime share its MessageId and enqueue time.
-- name: TopicCounts :many
SELECT t.id::bigint AS id, count(s.id)::bigint AS subscriptions,
	coalesce(sum(coalesce(c.bytes, 0) + coalesce(d.bytes, 0)), 0)::bigint AS bytes,
	(SELECT count(DISTINCT (m.enqueued_seq, CASE WHEN m.enqueued_seq IS NULL THEN m.message_id END,
			CASE WHEN m.enqueued_seq IS NULL THEN m.enqueued_at END))
		FROM entities x JOIN messages m ON m.entity_id = x.id
		WHERE x.parent_id = t.id AND m.lock_token IS NULL AND m.visible_at > sqlc.arg(now)::timestamptz
			AND m.scheduled_at IS NOT NULL)::bigint AS scheduled
FROM unnest(sqlc.arg(ids)::bigint[]) AS t(id)
LEFT JOIN entities s ON s.parent_id = t.id
LEFT JOIN entity_counts c ON c.entity_id = s.id
LEFT JOIN LATERAL (SELECT sum(bytes) AS bytes FROM entity_count_deltas x
	WHERE x.entity_id = s.id) d ON true
GROUP BY t.id;

-- TopicRuleCounts counts the SQL and the correlation filters of the subscriptions of topics.
-- name: TopicRuleCounts :many
SELECT e.parent_id,
	count(*) FILTER (WHERE r.filter->>'kind' <> 'CorrelationFilter') AS sql_filters,
	count(*) FILTER (WHERE r.filter->>'kind' = 'CorrelationFilter') AS correlation_filters
FROM rules r JOIN entities e ON e.id = r.subscription_id
WHERE e.parent_id = ANY(sqlc.arg(topic_ids)::bigint[]) GROUP BY e.parent_id;
