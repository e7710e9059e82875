// Package dbtest gives tests real PostgreSQL databases, one per test, so that tests can run in
// parallel without seeing each other's rows. Each database is cloned from a template that is
// created and migrated once per server: cloning takes milliseconds, while migrating in every
// test (or at the start of every test package) is slow and fails with lock errors when `go test`
// runs packages in parallel against one server.
//
// A package opts in with
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// and its tests call NewDatabase or NewPool.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/migrations"
)

// EnvDatabaseURL names the environment variable that points the tests at an existing server
// instead of an embedded one. The URL's user must be allowed to CREATE DATABASE.
const EnvDatabaseURL = "SBGATE_TEST_DATABASE_URL"

// envLog set to "debug" shows the embedded server's log (on failure, or with -v).
const envLog = "SBGATE_TEST_LOG"

// embeddedSettings trade durability, which a test server does not need, for speed, and allow
// many parallel tests each holding a pool.
var embeddedSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
	"max_connections":    "300",
	"shared_buffers":     "128MB",
}

// createStrategy is how databases are cloned from the template on PostgreSQL 15 and later.
// BenchmarkCreateDatabase on our development VM (PostgreSQL 15, 2 cores, fsync off, data on tmpfs):
// FILE_COPY 9–13 ms per clone (7–9.5 ms per create+drop with several at once), WAL_LOG 11–13 ms
// (12 ms). FILE_COPY copies the template's few hundred small files and its checkpoints cost
// little with fsync off; WAL_LOG writes every page of the template to the WAL, which pays off
// only for large templates on servers that sync.
var createStrategy = "FILE_COPY"

var (
	adminURL string // set by Main before any test runs

	mu          sync.Mutex
	admin       *pgxpool.Pool // opened on first use
	hasStrategy bool          // the server knows CREATE DATABASE … STRATEGY (PostgreSQL 15+)
	template    string        // the template's name once it is known to exist
)

// Main is called from a package's TestMain: it provides a PostgreSQL server for the package's
// tests, runs them, and exits with their result.
//
// If SBGATE_TEST_DATABASE_URL is set it must point at a server where the user can CREATE
// DATABASE (an admin URL); otherwise Main starts an embedded server (db.StartEmbedded) with
// durability turned off in a fresh directory (on /dev/shm when it can, else under os.TempDir())
// and removes it afterwards. It never skips: without a server the test binary fails and says why.
// After the tests it checks for leaked goroutines (goleak), which fail the run.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		adminURL = u
		code := m.Run()
		closeAdmin()
		return checkLeaks(code)
	}

	// The base is traversable by everyone, so the postgres user that runs the server when we are
	// root can reach the directory; StartEmbedded gives it the directory itself.
	dir, err := os.MkdirTemp(tempBase(), "sbgate-dbtest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	e, err := startServer(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: cannot start a PostgreSQL server for the tests: %v\n"+
			"dbtest: set %s to the admin URL of an existing server to use that instead\n", err, EnvDatabaseURL)
		return 1
	}
	adminURL = e.AdminURL()

	code := m.Run()

	closeAdmin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return checkLeaks(code)
}

func startServer(dir string) (*db.Embedded, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return db.StartEmbedded(ctx, db.EmbeddedConfig{DataDir: dir, Settings: embeddedSettings, Logger: logger()})
}

// checkLeaks fails a passing run that left goroutines behind (a pool never closed, a server
// never stopped, a background loop without a way out); it runs after our own server and pool
// are gone, so whatever it finds came from the tests or the code under test.
func checkLeaks(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: goroutines leaked by the tests: %v\n", err)
		return 1
	}
	return code
}

// tempBase returns where the embedded test server keeps its data: /dev/shm when it is a shared
// tmpfs with room to spare, otherwise os.TempDir(). Cloning a database touches a few hundred
// files, and on a virtual machine's disk that is what a test waits for: CREATE DATABASE from the
// template took 150–350 ms under /tmp on our 2-core development VM and 8–13 ms on /dev/shm.
func tempBase() string {
	const shm, minFree = "/dev/shm", 2 << 30
	fi, err := os.Stat(shm)
	if err != nil || !fi.IsDir() || fi.Mode()&(fs.ModeSticky|0o777) != fs.ModeSticky|0o777 {
		return os.TempDir()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(shm, &st); err != nil || st.Bavail*uint64(st.Bsize) < minFree {
		return os.TempDir()
	}
	return shm
}

func logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv(envLog) == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func closeAdmin() {
	mu.Lock()
	defer mu.Unlock()
	if admin != nil {
		admin.Close()
		admin = nil
	}
}

// AdminURL returns the admin URL of the package's test server, for tests that need it, e.g. to
// create databases of their own or to start a second server process. It is empty when Main was
// not called.
func AdminURL() string { return adminURL }

// NewDatabase creates a fresh, migrated database for one test and returns its connection URL.
// The database is dropped when the test ends, whatever connections are still open to it.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if adminURL == "" {
		t.Fatal("dbtest: no test server; call dbtest.Main from the package's TestMain: " +
			"func TestMain(m *testing.M) { dbtest.Main(m) }")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	pool, tmpl, err := setup(ctx)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	name := databaseName(t.Name())
	if err := createDatabase(ctx, pool, name, tmpl); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP DATABASE IF EXISTS `+ident(name)+` WITH (FORCE)`); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	u, err := withDatabase(adminURL, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return u
}

// NewPool is NewDatabase plus db.Open; the pool is closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := NewDatabase(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pool, err := db.Open(ctx, u)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close) // runs before NewDatabase's drop: cleanups run last-in first-out
	return pool
}

func createDatabase(ctx context.Context, pool *pgxpool.Pool, name, tmpl string) error {
	sql := `CREATE DATABASE ` + ident(name) + ` TEMPLATE ` + ident(tmpl)
	if hasStrategy {
		sql += ` STRATEGY ` + createStrategy
	}
	if _, err := pool.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create database %s from template %s: %w", name, tmpl, err)
	}
	return nil
}

// setup opens the admin pool and makes sure the template exists, once per test binary.
func setup(ctx context.Context) (*pgxpool.Pool, string, error) {
	mu.Lock()
	defer mu.Unlock()
	if admin == nil {
		pool, err := db.Open(ctx, adminURL)
		if err != nil {
			return nil, "", fmt.Errorf("connect to the test server: %w", err)
		}
		var version int
		if err := pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
			pool.Close()
			return nil, "", fmt.Errorf("connect to the test server: %w", err)
		}
		admin, hasStrategy = pool, version >= 150000
	}
	if template == "" {
		name, err := templateName(migrations.FS)
		if err != nil {
			return nil, "", err
		}
		if err := ensureTemplate(ctx, name); err != nil {
			return nil, "", err
		}
		template = name
	}
	return admin, template, nil
}

// templateName names the template after the migration files, so that a changed or added
// migration gets a new template instead of clones of a stale one.
func templateName(migrationFS fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrationFS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".up.sql") {
			return err
		}
		b, err := fs.ReadFile(migrationFS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return "sbgate_template_" + hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// templateLockKey is the advisory lock that serialises template creation among test binaries
// sharing one server (`go test ./...` runs packages in parallel).
const templateLockKey = 0x5b6a7e_7e3a

// ensureTemplate creates and migrates the template unless it exists. The template is built under
// another name and renamed when complete, so a test binary killed half-way leaves no template
// that looks usable.
func ensureTemplate(ctx context.Context, name string) (err error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) // also drops the advisory lock
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(templateLockKey)); err != nil {
		return fmt.Errorf("create template: lock: %w", err)
	}

	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).
		Scan(&exists); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	if exists {
		return nil
	}

	build := name + "_build"
	for _, sql := range []string{
		`DROP DATABASE IF EXISTS ` + ident(build) + ` WITH (FORCE)`,
		`CREATE DATABASE ` + ident(build) + ` TEMPLATE template0`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("create template: %w", err)
		}
	}
	buildURL, err := withDatabase(adminURL, build)
	if err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	// Migrate closes its connections before it returns: a template with open connections
	// cannot be cloned (or renamed).
	if _, err := db.Migrate(ctx, buildURL); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	for _, sql := range []string{
		`ALTER DATABASE ` + ident(build) + ` RENAME TO ` + ident(name),
		// No connections from now on, so nothing can stop it from being cloned.
		`ALTER DATABASE ` + ident(name) + ` WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("create template: %w", err)
		}
	}
	return nil
}

// databaseName returns a new database name that starts with the test's name, which helps when
// looking at a server a failed test left behind.
func databaseName(testName string) string {
	var b strings.Builder
	b.WriteString("test_")
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 40 {
			break
		}
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		} else if s := b.String(); s[len(s)-1] != '_' {
			b.WriteByte('_')
		}
	}
	var random [6]byte
	_, _ = rand.Read(random[:])
	return strings.TrimSuffix(b.String(), "_") + "_" + hex.EncodeToString(random[:])
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// withDatabase returns connString with its database replaced by name. connString is a URL or a
// key=value DSN, as pgx accepts them; URLs are taken apart by hand because net/url rejects
// multi-host authorities such as "h1:5432,h2:5432".
func withDatabase(connString, name string) (string, error) {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		rest, ok := strings.CutPrefix(connString, scheme)
		if !ok {
			continue
		}
		authority, pathAndQuery := rest, ""
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			authority, pathAndQuery = rest[:i], rest[i:]
		}
		query := ""
		if i := strings.IndexByte(pathAndQuery, '?'); i >= 0 {
			query = pathAndQuery[i:]
		}
		return scheme + authority + "/" + name + query, nil
	}
	if strings.Contains(connString, "://") {
		return "", errors.New("test database URL: unknown scheme (want postgres:// or postgresql://)")
	}
	// In a DSN the last setting of a key wins.
	return strings.TrimSpace(connString + " dbname=" + name), nil
}
