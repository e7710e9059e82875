package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store/internal/sqlcdb"
)

// NamespaceKey returns (and with create, makes) a namespace-level key. See Store.
func (s *Postgres) NamespaceKey(ctx context.Context, name string, create bool) (broker.NamespaceKey, error) {
	row, err := queries.NamespaceKey(ctx, s.pool, name)
	if err == nil {
		return namespaceKeyOf(row), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return broker.NamespaceKey{}, fmt.Errorf("read key %s: %w", name, interpretError(err))
	}
	if !create {
		return broker.NamespaceKey{}, broker.NotFound("No shared access key named '%s'.", name)
	}
	n, err := queries.CreateFirstNamespaceKey(ctx, s.pool, sqlcdb.CreateFirstNamespaceKeyParams{
		Name: name, PrimaryKey: randomKey(), SecondaryKey: randomKey()})
	if err != nil {
		return broker.NamespaceKey{}, fmt.Errorf("create key %s: %w", name, interpretError(err))
	}
	if row, err = queries.NamespaceKey(ctx, s.pool, name); err != nil {
		return broker.NamespaceKey{}, fmt.Errorf("read key %s: %w", name, interpretError(err))
	}
	k := namespaceKeyOf(row)
	k.Created = n == 1
	return k, nil
}

// namespaceKeyOf is the key a row of namespace_keys holds.
func namespaceKeyOf(r sqlcdb.NamespaceKeyRow) broker.NamespaceKey {
	return broker.NamespaceKey{Name: r.Name, PrimaryKey: r.PrimaryKey, SecondaryKey: r.SecondaryKey, Rights: r.Rights}
}

// randomKey returns 32 random bytes in base64, the form of Azure's generated keys.
func randomKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

// NamespaceKeys lists the namespace-level keys kept in the database, by name.
func (s *Postgres) NamespaceKeys(ctx context.Context) ([]broker.NamespaceKey, error) {
	rows, err := queries.NamespaceKeys(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", interpretError(err))
	}
	keys := make([]broker.NamespaceKey, len(rows))
	for i, r := range rows {
		keys[i] = namespaceKeyOf(sqlcdb.NamespaceKeyRow(r))
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
	n, err := queries.CreateNamespaceKey(ctx, s.pool, sqlcdb.CreateNamespaceKeyParams{
		Name: k.Name, PrimaryKey: k.PrimaryKey, SecondaryKey: k.SecondaryKey, Rights: k.Rights})
	if err != nil {
		return broker.NamespaceKey{}, fmt.Errorf("create key %s: %w", name, interpretError(err))
	}
	if n == 0 {
		return broker.NamespaceKey{}, &broker.Error{Code: broker.CodeConflict, Message: fmt.Sprintf("A key named '%s' already exists.", name)}
	}
	return k, nil
}

// RotateNamespaceKey replaces the primary (or, with secondary, the secondary) key of the key named
// name with a new random one; tokens signed with the old one stop working. The other key is kept,
// so clients can move to it first.
func (s *Postgres) RotateNamespaceKey(ctx context.Context, name string, secondary bool) (broker.NamespaceKey, error) {
	var row sqlcdb.NamespaceKeyRow
	var err error
	if secondary {
		var r sqlcdb.RotateSecondaryNamespaceKeyRow
		r, err = queries.RotateSecondaryNamespaceKey(ctx, s.pool,
			sqlcdb.RotateSecondaryNamespaceKeyParams{Name: name, Key: randomKey()})
		row = sqlcdb.NamespaceKeyRow(r)
	} else {
		var r sqlcdb.RotatePrimaryNamespaceKeyRow
		r, err = queries.RotatePrimaryNamespaceKey(ctx, s.pool,
			sqlcdb.RotatePrimaryNamespaceKeyParams{Name: name, Key: randomKey()})
		row = sqlcdb.NamespaceKeyRow(r)
	}
	k := namespaceKeyOf(row)
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
	n, err := queries.DeleteNamespaceKey(ctx, s.pool, name)
	if err != nil {
		return fmt.Errorf("delete key %s: %w", name, interpretError(err))
	}
	if n == 0 {
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
