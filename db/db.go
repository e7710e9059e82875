// Package db opens sbgate's PostgreSQL pool, applies migrations, and runs an embedded PostgreSQL
// server when no database is configured.
package db

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sbgate/sbgate/migrations"
)

// defaultConnectTimeout bounds each connection attempt when the URL does not say otherwise, so a
// server that has gone away gives an error (and a 503) within seconds instead of a hang.
const defaultConnectTimeout = 5 * time.Second

// Open returns a pool for url after checking that the server answers (Ping) within ctx.
//
// url is anything pgx accepts: a postgres:// or postgresql:// URL or a key=value DSN, multi-host
// lists with target_session_attrs included. The pool uses pgxpool's defaults except MaxConns,
// which is pool_max_conns from url when given and otherwise max(8, 4*GOMAXPROCS) (the gateway's
// group commit and long polls hold connections briefly but often), the connect timeout, which is
// 5s unless url sets connect_timeout, and enable_bitmapscan and jit, which are off (see below).
//
// The error wraps pgx's parse or connect error; it never contains the password.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	// pgxpool.ParseConfig drops pool_max_conns before we could see whether it was given, so
	// parse the connection part first to tell "absent" from "set to the default".
	connCfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	_, maxConnsGiven := connCfg.RuntimeParams["pool_max_conns"]

	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if !maxConnsGiven {
		cfg.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0)))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	// The broker's statements each read a handful of rows of one entity through an index; a
	// bitmap scan is never the right plan for them, but statistics older than a backlog make the
	// planner believe an entity has two rows where it has a million and pick one, with a sort of
	// the whole backlog on top (measured: 530 ms a claim instead of 0.9 ms, 36,000 pages read
	// instead of 20). Without bitmap scans the plan that reads the index in order is the only
	// cheap one, whatever the statistics say.
	cfg.ConnConfig.RuntimeParams["enable_bitmapscan"] = "off"
	// The same stale estimates push a statement's cost past jit_above_cost, and PostgreSQL then
	// compiles it to machine code before running it: the expiry sweep spent 520 ms compiling a
	// statement that ran in 0.3 ms, once a second per gateway. Statements that each touch a few
	// rows never gain from JIT.
	cfg.ConnConfig.RuntimeParams["jit"] = "off"

	// pgx's connect errors name the user, the database and every host tried.
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	return pool, nil
}

// describe names a connection target for error messages without its password.
func describe(c *pgx.ConnConfig) string {
	hosts := []string{hostPort(c.Host, c.Port)}
	for _, f := range c.Fallbacks { // includes the same host again without TLS for sslmode=prefer
		if h := hostPort(f.Host, f.Port); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return fmt.Sprintf("%q on %s as user %q", c.Database, strings.Join(hosts, ","), c.User)
}

func hostPort(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
	}
	return net.JoinHostPort(host, fmt.Sprint(port))
}

// Migrate applies every pending up-migration from migrations.FS and returns the resulting schema
// version. Having nothing to apply is not an error.
//
// It uses golang-migrate's pgx/v5 driver, which holds a PostgreSQL advisory lock while it
// migrates, so several gateways starting at once against one database are safe: one migrates,
// the others wait and then find nothing to do.
//
// url takes every form Open takes. Rather than rewriting it into the driver's pgx5:// scheme
// (which cannot express a key=value DSN and mangles unix-socket hosts), the connection is built
// with pgx.ParseConfig and handed to the driver as a database/sql DB.
//
// Cancelling ctx aborts the migration by closing its connections, because golang-migrate itself
// takes no context; a migration interrupted that way leaves the schema marked dirty, which
// Migrate then reports (migrate.ErrDirty) until an operator resolves it.
func Migrate(ctx context.Context, url string) (version uint, err error) {
	connCfg, err := migrateConfig(url)
	if err != nil {
		return 0, err
	}
	target := describe(connCfg)

	conns := &connTracker{}
	dial := connCfg.DialFunc
	connCfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return conns.add(c), nil
	}
	stopAbort := context.AfterFunc(ctx, conns.closeAll)
	defer stopAbort()

	if err := pinMigrationSchema(ctx, connCfg); err != nil {
		return 0, fmt.Errorf("migrate database %s: %w", target, withCtx(ctx, err))
	}
	m, err := newMigrator(ctx, connCfg, target)
	if err != nil {
		return 0, err
	}
	defer func() {
		srcErr, dbErr := m.Close()
		if err == nil {
			if cerr := errors.Join(srcErr, dbErr); cerr != nil {
				err = fmt.Errorf("migrate database %s: close: %w", target, cerr)
			}
		}
	}()
	// Waiting for another migrator's lock is bounded by ctx (which closes the connection), not by
	// golang-migrate's fixed 15s: a long migration in another gateway is not a failure here.
	m.LockTimeout = math.MaxInt64
	if deadline, ok := ctx.Deadline(); ok {
		m.LockTimeout = time.Until(deadline) + time.Second
	}

	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, fmt.Errorf("migrate database %s: %w", target, withCtx(ctx, err))
	}
	v, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("migrate database %s: read version: %w", target, withCtx(ctx, err))
	}
	if dirty {
		return v, fmt.Errorf("migrate database %s: %w", target, migrate.ErrDirty{Version: int(v)})
	}
	return v, nil
}

// migrateConfig is the connection configuration of url for migrating: without the pool's
// settings, and with a connect timeout.
func migrateConfig(url string) (*pgx.ConnConfig, error) {
	connCfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	// The same URL usually feeds Open; its pool settings would reach the server as unknown
	// run-time parameters.
	for k := range connCfg.RuntimeParams {
		if strings.HasPrefix(k, "pool_") {
			delete(connCfg.RuntimeParams, k)
		}
	}
	if connCfg.ConnectTimeout == 0 {
		connCfg.ConnectTimeout = defaultConnectTimeout
	}
	return connCfg, nil
}

// newMigrator connects to the database of connCfg (target, for errors) and sets up
// golang-migrate over it with the embedded migrations. Closing it closes the connection.
func newMigrator(ctx context.Context, connCfg *pgx.ConnConfig,
	target string) (*migrate.Migrate, error) {
	sqlDB := stdlib.OpenDB(*connCfg)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("migrate database %s: %w", target, err)
	}
	driver, err := migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("migrate database %s: %w", target, withCtx(ctx, err))
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		_ = driver.Close()
		return nil, fmt.Errorf("migrate: read embedded migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		_ = driver.Close()
		return nil, fmt.Errorf("migrate database %s: %w", target, err)
	}
	return m, nil
}

// withCtx adds ctx's error to err when ctx ended, since the error golang-migrate reports after
// its connection was closed under it ("conn closed") does not say why.
func withCtx(ctx context.Context, err error) error {
	if cerr := context.Cause(ctx); cerr != nil {
		return errors.Join(cerr, err)
	}
	return err
}

// connTracker remembers the network connections of one Migrate call so that cancelling its
// context can close them, which interrupts a statement or lock wait that golang-migrate runs
// with context.Background.
type connTracker struct {
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func (t *connTracker) add(c net.Conn) net.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = c.Close()
		return c
	}
	t.conns = append(t.conns, c)
	return c
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, c := range t.conns {
		_ = c.Close()
	}
	t.conns = nil
}

// pinMigrationSchema makes the migrations run in the schema that already holds their history,
// unless the URL sets a search_path itself. PostgreSQL's default search_path starts with
// "$user": once a schema named like the connecting role exists (migration 000007 creates schema
// sbgate, and sbgate is the default role), current_schema() would name it, and golang-migrate,
// which keeps its history in current_schema(), would find none there and run every migration
// again into it.
func pinMigrationSchema(ctx context.Context, cfg *pgx.ConnConfig) error {
	if _, set := cfg.RuntimeParams["search_path"]; set {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// A new database has no history yet: its schema is current_schema() before migration 000007
	// runs, and stays that for the later migrations of the same run.
	var schema *string
	err = conn.QueryRow(ctx, `SELECT coalesce((SELECT s.name FROM unnest(current_schemas(false)) WITH ORDINALITY AS s(name, ord)
		JOIN pg_namespace n ON n.nspname = s.name
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = 'schema_migrations'
		ORDER BY s.ord LIMIT 1), current_schema())`).Scan(&schema)
	if err != nil {
		return err
	}
	if schema != nil { // NULL: no schema in the search_path exists; golang-migrate will say so
		cfg.RuntimeParams["search_path"] = pgx.Identifier{*schema}.Sanitize()
	}
	return nil
}
