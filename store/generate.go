package store

import "github.com/sbgate/sbgate/store/internal/sqlcdb"

// sqlc is pinned in a module of its own (tools/sqlc), away from the dependency graph of sbgate.
//go:generate go tool -modfile=../tools/sqlc/go.mod sqlc generate -f sqlc.yaml

// queries runs the statements of queries/*.sql, generated into package sqlcdb: each takes the
// pool or a transaction, so a statement run inside a pgx.Tx stays inside it.
var queries = sqlcdb.New()
