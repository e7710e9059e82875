package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// NamespaceKey returns (and with create, makes) a namespace-level key. See Store.
func (s *Postgres) NamespaceKey(ctx context.Context, name string, create bool) (broker.NamespaceKey, error) {
	const selectSQL = `SELECT name, primary_key, secondary_key, rights FROM namespace_keys WHERE name = $1`
	var k broker.NamespaceKey
	err := s.pool.QueryRow(ctx, selectSQL, name).Scan(&k.Name, &k.PrimaryKey, &k.SecondaryKey, &k.Rights)
	if err == nil {
		return k, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return k, fmt.Errorf("read key %s: %w", name, interpretError(err))
	}
	if !create {
		return k, broker.NotFound("No shared access key named '%s'.", name)
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

// NamespaceKeys lists the namespace-level keys kept in the database, by name.
func (s *Postgres) NamespaceKeys(ctx context.Context) ([]broker.NamespaceKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, primary_key, secondary_key, rights FROM namespace_keys ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", interpretError(err))
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (broker.NamespaceKey, error) {
		var k broker.NamespaceKey
		err := row.Scan(&k.Name, &k.PrimaryKey, &k.SecondaryKey, &k.Rights)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", interpretError(err))
	}
	return keys, nil
}

// CreateNamespaceKey makes a namespace-level key named name with the given rights and random
// primary and secondary keys. A key of that name already existing is a conflict.
func (s *Postgres) CreateNamespaceKey(ctx context.Context, name string, rights []string) (broker.NamespaceKey, error) {
	if err := validKeyName(name); err != nil {
		return broker.NamespaceKey{}, err
	}
	if len(rights) == 0 {
		return broker.NamespaceKey{}, broker.BadRequest("A key needs at least one right: Send, Listen or Manage.")
	}
	k := broker.NamespaceKey{Name: name, PrimaryKey: randomKey(), SecondaryKey: randomKey(), Rights: rights, Created: true}
	tag, err := s.pool.Exec(ctx, `INSERT INTO namespace_keys (name, primary_key, secondary_key, rights)
		VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING`, k.Name, k.PrimaryKey, k.SecondaryKey, k.Rights)
	if err != nil {
		return broker.NamespaceKey{}, fmt.Errorf("create key %s: %w", name, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return broker.NamespaceKey{}, &broker.Error{Code: broker.CodeConflict, Message: fmt.Sprintf("A key named '%s' already exists.", name)}
	}
	return k, nil
}

// RotateNamespaceKey replaces the primary (or, with secondary, the secondary) key of the key named
// name with a new random one; tokens signed with the old one stop working. The other key is kept,
// so clients can move to it first.
func (s *Postgres) RotateNamespaceKey(ctx context.Context, name string, secondary bool) (broker.NamespaceKey, error) {
	column := "primary_key"
	if secondary {
		column = "secondary_key"
	}
	var k broker.NamespaceKey
	err := s.pool.QueryRow(ctx, `UPDATE namespace_keys SET `+column+` = $2 WHERE name = $1
		RETURNING name, primary_key, secondary_key, rights`, name, randomKey()).Scan(&k.Name, &k.PrimaryKey, &k.SecondaryKey, &k.Rights)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, broker.NotFound("No shared access key named '%s'.", name)
	}
	if err != nil {
		return k, fmt.Errorf("rotate key %s: %w", name, interpretError(err))
	}
	return k, nil
}

// DeleteNamespaceKey revokes the key named name.
func (s *Postgres) DeleteNamespaceKey(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM namespace_keys WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("delete key %s: %w", name, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return broker.NotFound("No shared access key named '%s'.", name)
	}
	return nil
}

// validKeyName checks a key name as Service Bus does for shared access policies: 1 to 256
// letters, digits, periods, hyphens and underscores.
func validKeyName(name string) error {
	if name == "" || len(name) > 256 {
		return broker.BadRequest("A key name has 1 to 256 characters.")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return broker.BadRequest("The key name '%s' may contain only letters, digits, periods, hyphens and underscores.", name)
		}
	}
	return nil
}
