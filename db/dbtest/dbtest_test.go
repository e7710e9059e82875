package dbtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { Main(m) }

func currentDatabase(t *testing.T, url string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var name string
	if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).
		Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}

func TestNewPoolGivesIsolatedMigratedDatabases(t *testing.T) {
	t.Parallel()
	a, b := NewPool(t), NewPool(t)
	if _, err := a.Exec(t.Context(), `CREATE TABLE only_in_a (v int)`); err != nil {
		t.Fatal(err)
	}
	for name, pool := range map[string]*pgxpool.Pool{"a": a, "b": b} {
		var version int
		var dirty bool
		if err := pool.QueryRow(t.Context(), `SELECT version, dirty FROM schema_migrations`).Scan(&version, &dirty); err != nil || version < 1 || dirty {
			t.Errorf("database %s: schema_migrations = %d, dirty %v, %v; want a clean migrated schema", name, version, dirty, err)
		}
	}
	var found *string
	if err := b.QueryRow(t.Context(), `SELECT to_regclass('only_in_a')::text`).Scan(&found); err != nil || found != nil {
		t.Errorf("table created in database a is visible in database b (%v, %v)", found, err)
	}
}

func TestNewDatabaseParallel(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			pool := NewPool(t)
			if _, err := pool.Exec(t.Context(), `CREATE TABLE t (v int); INSERT INTO t VALUES (1)`); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
				t.Errorf("count = %d, %v; want 1", n, err)
			}
		})
	}
}

func TestNewDatabaseDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var name string
	var leftOpen *pgx.Conn
	t.Run("user", func(t *testing.T) {
		url := NewDatabase(t)
		name = currentDatabase(t, url)
		// A connection the test forgot to close must not keep the database alive.
		var err error
		if leftOpen, err = pgx.Connect(context.Background(), url); err != nil {
			t.Fatal(err)
		}
	})
	defer leftOpen.Close(context.Background())
	if name == "" || databaseExists(t, name) {
		t.Errorf("database %q still exists after its test ended", name)
	}
}

func TestNewDatabaseNamedAfterTest(t *testing.T) {
	t.Parallel()
	if got := currentDatabase(t, NewDatabase(t)); !strings.HasPrefix(got, "test_testnewdatabasenamedaftertest_") {
		t.Errorf("database name %q does not start with the test's name", got)
	}
}

func TestDatabaseName(t *testing.T) {
	tests := []struct{ test, prefix string }{
		{"TestX", "test_testx_"},
		{"TestSend/batch_of_10/Ünïcode", "test_testsend_batch_of_10_n_code_"},
		{strings.Repeat("TestLong", 20), "test_testlongtestlongtestlongtestlongtes_"},
	}
	for _, tt := range tests {
		got := databaseName(tt.test)
		if !strings.HasPrefix(got, tt.prefix) || len(got) > 63 || len(got) != len(tt.prefix)+12 {
			t.Errorf("databaseName(%q) = %q; want %q + 12 hex digits, at most 63 bytes", tt.test, got, tt.prefix)
		}
	}
	if a, b := databaseName("TestX"), databaseName("TestX"); a == b {
		t.Errorf("databaseName gave %q twice", a)
	}
}

func TestTemplateNameFollowsMigrations(t *testing.T) {
	fsys := fstest.MapFS{
		"000001_init.up.sql":   {Data: []byte("CREATE TABLE a (v int);")},
		"000001_init.down.sql": {Data: []byte("DROP TABLE a;")},
		"migrations.go":        {Data: []byte("package migrations")},
	}
	name := func() string {
		n, err := templateName(fsys)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	base := name()
	if base != name() || !strings.HasPrefix(base, "sbgate_template_") {
		t.Fatalf("templateName = %q, not stable or not prefixed", base)
	}
	fsys["000001_init.down.sql"] = &fstest.MapFile{Data: []byte("DROP TABLE a CASCADE;")}
	if got := name(); got != base {
		t.Errorf("a changed down-migration changed the template name (%q → %q); the template only holds ups", base, got)
	}
	fsys["000001_init.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE a (v bigint);")}
	changed := name()
	if changed == base {
		t.Errorf("a changed up-migration kept the template name %q", base)
	}
	fsys["000002_more.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE b (v int);")}
	if got := name(); got == changed {
		t.Errorf("an added migration kept the template name %q", got)
	}
}

func TestWithDatabase(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://sbgate@/postgres?host=/var/lib/sbgate/run&port=5432", "postgres://sbgate@/x?host=/var/lib/sbgate/run&port=5432"},
		{"postgres://u:p@localhost:5432/postgres", "postgres://u:p@localhost:5432/x"},
		{"postgresql://u@h1:5432,h2:5433/postgres?target_session_attrs=read-write", "postgresql://u@h1:5432,h2:5433/x?target_session_attrs=read-write"},
		{"postgres://u@localhost", "postgres://u@localhost/x"},
		{"postgres://u@localhost?sslmode=disable", "postgres://u@localhost/x?sslmode=disable"},
		{"host=/tmp dbname=postgres user=u", "host=/tmp dbname=postgres user=u dbname=x"},
	}
	for _, tt := range tests {
		got, err := withDatabase(tt.in, "x")
		if err != nil || got != tt.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			continue
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil || cfg.Database != "x" {
			t.Errorf("withDatabase(%q) = %q, which pgx reads as database %q (%v)", tt.in, got, cfg.Database, err)
		}
	}
	if _, err := withDatabase("mysql://u@h/db", "x"); err == nil {
		t.Error("withDatabase accepted a mysql:// URL")
	}
}

// BenchmarkCreateDatabase compares the ways of cloning the template, to choose createStrategy.
// The parallel variants time a create plus a drop.
func BenchmarkCreateDatabase(b *testing.B) {
	ctx := context.Background()
	pool, tmpl, err := setup(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if !hasStrategy {
		b.Skip("the server predates CREATE DATABASE … STRATEGY (PostgreSQL 15)")
	}
	saved := createStrategy
	defer func() { createStrategy = saved }()
	for _, strategy := range []string{"FILE_COPY", "WAL_LOG"} {
		b.Run(strategy, func(b *testing.B) {
			createStrategy = strategy
			var dropping time.Duration
			for range b.N {
				name := databaseName(b.Name())
				if err := createDatabase(ctx, pool, name, tmpl); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				start := time.Now()
				if _, err := pool.Exec(ctx, `DROP DATABASE `+ident(name)+` WITH (FORCE)`); err != nil {
					b.Fatal(err)
				}
				dropping += time.Since(start)
				b.StartTimer()
			}
			b.ReportMetric(float64(dropping.Microseconds())/1000/float64(b.N), "drop-ms/op")
		})
		// As parallel tests do it: several clones (and drops) at once.
		b.Run(strategy+"/parallel", func(b *testing.B) {
			createStrategy = strategy
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					name := databaseName(b.Name())
					if err := createDatabase(ctx, pool, name, tmpl); err != nil {
						b.Error(err)
						return
					}
					if _, err := pool.Exec(ctx, `DROP DATABASE `+ident(name)+` WITH (FORCE)`); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
