package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// NamespaceKey returns (and with create, makes) a namespace-level key. See Store.
func (s *Postgres) NamespaceKey(ctx context.Context, name string, create bool) (NamespaceKey, error) {
	const selectSQL = `SELECT name, primary_key, secondary_key, rights FROM namespace_keys WHERE name = $1`
	var k NamespaceKey
	err := s.pool.QueryRow(ctx, selectSQL, name).Scan(&k.Name, &k.PrimaryKey, &k.SecondaryKey, &k.Rights)
	if err == nil {
		return k, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return k, fmt.Errorf("read key %s: %w", name, interpretError(err))
	}
	if !create {
		return k, notFound("No shared access key named '%s'.", name)
	}
	primary, secondary := randomKey(), randomKey()
	// Several gateways may start at once on an empty database: the first insert wins and every
	// gateway reads back the same key.
	tag, err := s.pool.Exec(ctx, `INSERT INTO namespace_keys (name, primary_key, secondary_key, rights)
		VALUES ($1, $2, $3, ARRAY['Manage', 'Listen', 'Send']) ON CONFLICT (name) DO NOTHING`, name, primary, secondary)
	if err != nil {
		return k, fmt.Errorf("create key %s: %w", name, interpretError(err))
	}
	if err := s.pool.QueryRow(ctx, selectSQL, name).Scan(&k.Name, &k.PrimaryKey, &k.SecondaryKey, &k.Rights); err != nil {
		return k, fmt.Errorf("read key %s: %w", name, interpretError(err))
	}
	k.Created = tag.RowsAffected() == 1
	return k, nil
}

// randomKey returns 32 random bytes in base64, the form of Azure's generated keys.
func randomKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}
