-- Entities: queues, topics and subscriptions (entities.go, topics.go, maintain.go).

-- ForwardingSubscriptions reads where the subscriptions of a topic forward their messages, to
-- refuse forwarding that would go round in a loop.
-- name: ForwardingSubscriptions :many
SELECT forward_to FROM entities WHERE parent_id = sqlc.arg(topic_id)::bigint AND forward_to <> '';
