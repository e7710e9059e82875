package db_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/migrations"
)

// latestVersion is the highest migration number in migrations.FS.
func latestVersion(t *testing.T) uint {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no up-migrations: %v", err)
	}
	var latest uint
	for _, n := range names {
		var v uint
		if _, err := fmt.Sscanf(n, "%d_", &v); err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
		latest = max(latest, v)
	}
	return latest
}

// emptyDatabase returns the URL of a new database with nothing in it: a test database with its
// migrated schema dropped.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	url := dbtest.NewDatabase(t)
	execSQL(t, url, `DROP SCHEMA public CASCADE`, `CREATE SCHEMA public`)
	return url
}

// addParam appends key=value to a URL or DSN.
func addParam(connString, key, value string) string {
	switch {
	case !strings.Contains(connString, "://"):
		return connString + " " + key + "=" + value
	case strings.Contains(connString, "?"):
		return connString + "&" + key + "=" + value
	default:
		return connString + "?" + key + "=" + value
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	tests := []struct {
		name           string
		url            string
		maxConns       int32
		connectTimeout time.Duration
	}{
		{"defaults", url, int32(max(8, 4*runtime.GOMAXPROCS(0))), 5 * time.Second},
		{"from URL", addParam(addParam(url, "pool_max_conns", "3"), "connect_timeout", "2"), 3, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, err := db.Open(t.Context(), tt.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tt.url, err)
			}
			defer pool.Close()
			cfg := pool.Config()
			if cfg.MaxConns != tt.maxConns || cfg.ConnConfig.ConnectTimeout != tt.connectTimeout {
				t.Errorf("Open(%q): MaxConns %d, ConnectTimeout %v; want %d, %v", tt.url,
					cfg.MaxConns, cfg.ConnConfig.ConnectTimeout, tt.maxConns, tt.connectTimeout)
			}
			if err := pool.Ping(t.Context()); err != nil {
				t.Errorf("Ping: %v", err)
			}
			// Planner settings the broker's statements rely on, whatever the server's defaults.
			var bitmap, jit string
			if err := pool.QueryRow(t.Context(), "SELECT current_setting('enable_bitmapscan'), current_setting('jit')").Scan(&bitmap, &jit); err != nil {
				t.Fatal(err)
			}
			if bitmap != "off" || jit != "off" {
				t.Errorf("enable_bitmapscan %s, jit %s; want both off", bitmap, jit)
			}
		})
	}
}

func TestOpenFailsFast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, want string
	}{
		{"refused", "postgres://sbgate:s3cret@127.0.0.1:1/sbgate", "127.0.0.1:1"},
		{"no socket", "host=/nonexistent-sbgate-test user=sbgate dbname=sbgate", "/nonexistent-sbgate-test/.s.PGSQL.5432"},
		{"bad URL", "postgres://sbgate:s3cret@%zz/sbgate", "cannot parse"},
		{"bad pool setting", "postgres://sbgate@127.0.0.1:1/sbgate?pool_max_conns=many", "pool_max_conns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			pool, err := db.Open(t.Context(), tt.url)
			if err == nil {
				pool.Close()
				t.Fatalf("Open(%q) succeeded", tt.url)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.HasPrefix(msg, "open database") || !strings.Contains(msg, tt.want) || strings.Contains(msg, "s3cret") {
				t.Errorf("Open(%q) = %q; want an \"open database\" error mentioning %q and not the password", tt.url, msg, tt.want)
			}
			if took := time.Since(begin); took > 3*time.Second {
				t.Errorf("Open(%q) took %v to fail", tt.url, took)
			}
		})
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	url := emptyDatabase(t)
	want := latestVersion(t)
	for i := range 2 {
		v, err := db.Migrate(t.Context(), url)
		if err != nil || v != want {
			t.Fatalf("Migrate #%d = %d, %v; want %d, nil", i+1, v, err, want)
		}
	}
	if got := queryString(t, url, `SELECT coalesce(to_regclass('entities')::text, 'missing')`); got != "entities" {
		t.Errorf("table entities is %s after Migrate", got)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := emptyDatabase(t)
	want := latestVersion(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if v, err := db.Migrate(t.Context(), url); err != nil || v != want {
				t.Errorf("Migrate in goroutine %d = %d, %v; want %d, nil", i, v, err, want)
			}
		})
	}
	wg.Wait()
}

// TestMigrateConnectionStrings feeds Migrate the forms DATABASE_URL takes: key=value DSNs, URLs
// with a unix-socket host, multi-host lists, and pool settings meant for Open.
func TestMigrateConnectionStrings(t *testing.T) {
	t.Parallel()
	base, err := pgx.ParseConfig(dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	auth := ""
	if base.Password != "" {
		auth = ":" + base.Password
	}
	forms := map[string]func(dbname string) string{
		"dsn": func(d string) string {
			return fmt.Sprintf("host=%s port=%d user=%s password='%s' dbname=%s", base.Host, base.Port, base.User, base.Password, d)
		},
		"socket-style URL": func(d string) string {
			return fmt.Sprintf("postgres://%s%s@/%s?host=%s&port=%d", base.User, auth, d, base.Host, base.Port)
		},
		"postgresql scheme": func(d string) string {
			return fmt.Sprintf("postgresql://%s%s@/%s?host=%s&port=%d", base.User, auth, d, base.Host, base.Port)
		},
		"multi-host": func(d string) string {
			return fmt.Sprintf("postgres://%s%s@/%s?host=/nonexistent-sbgate-test,%s&port=%d&target_session_attrs=read-write",
				base.User, auth, d, base.Host, base.Port)
		},
		"pool settings": func(d string) string {
			return fmt.Sprintf("postgres://%s%s@/%s?host=%s&port=%d&pool_max_conns=2&pool_max_conn_lifetime=1h",
				base.User, auth, d, base.Host, base.Port)
		},
	}
	want := latestVersion(t)
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbname := queryString(t, emptyDatabase(t), `SELECT current_database()`)
			url := form(dbname)
			if v, err := db.Migrate(t.Context(), url); err != nil || v != want {
				t.Errorf("Migrate(%q) = %d, %v; want %d, nil", url, v, err, want)
			}
		})
	}
}

// TestMigrateHonoursContext holds the migration lock elsewhere (as a slow gateway would) and
// expects Migrate to give up when its context ends, not hang in golang-migrate's lock wait.
func TestMigrateHonoursContext(t *testing.T) {
	t.Parallel()
	url := emptyDatabase(t)
	dbname := queryString(t, url, `SELECT current_database()`)
	lockID, err := database.GenerateAdvisoryLockId(dbname, "public", "schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(t.Context(), `SELECT pg_advisory_lock($1::bigint)`, lockID); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = db.Migrate(ctx, url)
	t.Log(err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Migrate while the lock is held = %v; want context.DeadlineExceeded", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("Migrate took %v to give up after a 300ms deadline", took)
	}

	// Nothing was half-applied: once the lock is free, Migrate completes.
	if err := holder.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Migrate(t.Context(), url); err != nil || v != latestVersion(t) {
		t.Errorf("Migrate after the lock was released = %d, %v; want %d, nil", v, err, latestVersion(t))
	}
}
