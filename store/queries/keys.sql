-- Namespace-level shared access keys (keys.go).

-- name: NamespaceKey :one
SELECT name, primary_key, secondary_key, rights FROM namespace_keys WHERE name = @name;

-- Several gateways may start at once on an empty database: the first insert wins and every
-- gateway reads back the same key.
-- name: CreateFirstNamespaceKey :execrows
INSERT INTO namespace_keys (name, primary_key, secondary_key, rights)
VALUES (@name, @primary_key, @secondary_key, ARRAY['Manage', 'Listen', 'Send'])
ON CONFLICT (name) DO NOTHING;

-- name: NamespaceKeys :many
SELECT name, primary_key, secondary_key, rights FROM namespace_keys ORDER BY name;

-- name: CreateNamespaceKey :execrows
INSERT INTO namespace_keys (name, primary_key, secondary_key, rights)
VALUES (@name, @primary_key, @secondary_key, @rights)
ON CONFLICT (name) DO NOTHING;

-- name: RotatePrimaryNamespaceKey :one
UPDATE namespace_keys SET primary_key = @key WHERE name = @name
RETURNING name, primary_key, secondary_key, rights;

-- name: RotateSecondaryNamespaceKey :one
UPDATE namespace_keys SET secondary_key = @key WHERE name = @name
RETURNING name, primary_key, secondary_key, rights;

-- name: DeleteNamespaceKey :execrows
DELETE FROM namespace_keys WHERE name = @name;
