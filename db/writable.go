package db

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrReadOnly says that the database answers but no host in its URL takes writes: every one
// reachable is a standby (or otherwise read-only).
var ErrReadOnly = errors.New("no writable host: every reachable server is read-only (a standby)")

// CheckWritable tells whether url leads to a server that takes writes, whatever the URL's
// target_session_attrs: nil when one does, an error wrapping ErrReadOnly when servers answer but
// none is writable, and the connect error (naming every host tried) when none answers.
func CheckWritable(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	for k := range cfg.RuntimeParams {
		if strings.HasPrefix(k, "pool_") {
			delete(cfg.RuntimeParams, k)
		}
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	rw := cfg.Copy()
	rw.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	conn, err := pgx.ConnectConfig(ctx, rw)
	if err == nil {
		return conn.Close(ctx)
	}
	anyHost := cfg.Copy()
	anyHost.ValidateConnect = nil
	conn, err2 := pgx.ConnectConfig(ctx, anyHost)
	if err2 != nil {
		return fmt.Errorf("open database: %w", err)
	}
	_ = conn.Close(ctx)
	return fmt.Errorf("database %s: %w", describe(cfg), ErrReadOnly)
}
