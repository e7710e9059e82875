-- The rules of subscriptions (rules.go, topics.go). A rule's name_key is its name in lower case:
-- names are unique without regard to case.

-- name: InsertRule :execrows
INSERT INTO rules (subscription_id, name_key, name, filter, action, created_at)
VALUES (@subscription_id, @name_key, @name, @filter, @action, @created_at)
ON CONFLICT DO NOTHING;

-- name: UpdateRule :one
UPDATE rules SET filter = @filter, action = @action, name = @name
WHERE subscription_id = @subscription_id AND name_key = @name_key
RETURNING created_at;

-- name: CountRules :one
SELECT count(*) FROM rules WHERE subscription_id = @subscription_id;

-- name: Rule :one
SELECT name, filter, action, created_at FROM rules
WHERE subscription_id = @subscription_id AND name_key = @name_key;

-- name: DeleteRule :execrows
DELETE FROM rules WHERE subscription_id = @subscription_id AND name_key = @name_key;

-- name: Rules :many
SELECT name, filter, action, created_at FROM rules WHERE subscription_id = @subscription_id
ORDER BY name_key OFFSET sqlc.arg(skip)::bigint LIMIT sqlc.arg(top)::bigint;

-- TopicRules reads the rules of every subscription of a topic, for routing its sends.
-- name: TopicRules :many
SELECT r.subscription_id, r.name, r.filter, r.action, r.created_at
FROM rules r JOIN entities e ON e.id = r.subscription_id
WHERE e.parent_id = sqlc.arg(topic_id)::bigint
ORDER BY r.subscription_id, r.name_key;
