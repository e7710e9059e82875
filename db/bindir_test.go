package db

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// fakeServer makes dir hold executable initdb and postgres files.
func fakeServer(t *testing.T, dir string, programs ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range programs {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func notFound(string) (string, error) { return "", exec.ErrNotFound }

func TestFindBinDir(t *testing.T) {
	dir, err := FindBinDir()
	if err != nil {
		t.Fatalf("FindBinDir() on a machine with PostgreSQL installed: %v", err)
	}
	if !hasServer(dir) {
		t.Errorf("FindBinDir() = %q, which lacks initdb or postgres", dir)
	}
	// Where Debian/Ubuntu's postgresql package puts a lone server (as on the CI machine).
	if want := "/usr/lib/postgresql/15/bin"; hasServer(want) && highestVersionDir("/usr/lib/postgresql") == want && dir != want {
		t.Errorf("FindBinDir() = %q; want %q", dir, want)
	}
}

func TestFindBinDirOrder(t *testing.T) {
	root := t.TempDir()
	lib := filepath.Join(root, "lib")
	fakeServer(t, filepath.Join(lib, "9.6", "bin"), "initdb", "postgres")
	fakeServer(t, filepath.Join(lib, "10", "bin"), "initdb", "postgres")
	v15 := fakeServer(t, filepath.Join(lib, "15", "bin"), "initdb", "postgres")
	fakeServer(t, filepath.Join(lib, "16", "bin"), "initdb") // client and initdb only
	fakeServer(t, filepath.Join(lib, "extension"), "initdb", "postgres")
	pgConfigDir := fakeServer(t, filepath.Join(root, "pgconfig"), "initdb", "postgres")
	clientOnly := fakeServer(t, filepath.Join(root, "client"), "psql")
	pathDir := fakeServer(t, filepath.Join(root, "path"), "initdb", "postgres")
	linkDir := filepath.Join(root, "links")
	if err := os.MkdirAll(linkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(pathDir, "initdb"), filepath.Join(linkDir, "initdb")); err != nil {
		t.Fatal(err)
	}

	lookIn := func(dir string) func(string) (string, error) {
		return func(file string) (string, error) {
			if file == "pg_config" {
				return "/usr/bin/pg_config", nil
			}
			return filepath.Join(dir, file), nil
		}
	}
	pgConfigSays := func(dir string) func(string) (string, error) {
		return func(string) (string, error) { return dir, nil }
	}
	tests := []struct {
		name string
		s    binSearch
		want string
	}{
		{"pg_config first", binSearch{lookPath: lookIn(pathDir), pgConfig: pgConfigSays(pgConfigDir), libDir: lib}, pgConfigDir},
		{"pg_config without server", binSearch{lookPath: lookIn(pathDir), pgConfig: pgConfigSays(clientOnly), libDir: lib}, v15},
		{"highest complete version", binSearch{lookPath: notFound, libDir: lib}, v15},
		{"PATH", binSearch{lookPath: lookIn(pathDir), pgConfig: pgConfigSays(clientOnly), libDir: root + "/none"}, pathDir},
		{"PATH through symlink", binSearch{lookPath: lookIn(linkDir), pgConfig: pgConfigSays(clientOnly)}, pathDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findBinDir(tt.s)
			if err != nil || got != tt.want {
				t.Errorf("findBinDir() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestFindBinDirNothingInstalled(t *testing.T) {
	t.Setenv("PATH", "") // no pg_config, no initdb
	_, err := findBinDir(binSearch{lookPath: exec.LookPath, pgConfig: runPGConfig, libDir: t.TempDir()})
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("findBinDir() = %v; want ErrNoBinaries", err)
	}
	const want = "PostgreSQL server binaries not found (initdb, postgres); install them with " +
		"`sudo apt-get install -y postgresql` (Debian/Ubuntu), or set DATABASE_URL to use an existing server"
	if err.Error() != want {
		t.Errorf("error = %q; want %q", err, want)
	}
}

func TestDefaultDataDir(t *testing.T) {
	home := func() (string, error) { return "/home/ann", nil }
	noHome := func() (string, error) { return "", errors.New("$HOME is not defined") }
	env := func(xdg string) func(string) string {
		return func(k string) string {
			if k == "XDG_DATA_HOME" {
				return xdg
			}
			return ""
		}
	}
	tests := []struct {
		name    string
		euid    int
		xdg     string
		home    func() (string, error)
		want    string
		wantErr bool
	}{
		{"root", 0, "/ignored", noHome, "/var/lib/sbgate", false},
		{"XDG_DATA_HOME", 1000, "/data/ann", home, "/data/ann/sbgate", false},
		{"relative XDG_DATA_HOME is ignored", 1000, "rel", home, "/home/ann/.local/share/sbgate", false},
		{"home", 1000, "", home, "/home/ann/.local/share/sbgate", false},
		{"no home", 1000, "", noHome, "", true},
	}
	for _, tt := range tests {
		got, err := defaultDataDir(tt.euid, env(tt.xdg), tt.home)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%s: defaultDataDir() = %q, %v; want %q (error: %v)", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSocketDirFor(t *testing.T) {
	short := "/var/lib/sbgate"
	if got, want := socketDirFor(short), "/var/lib/sbgate/run"; got != want {
		t.Errorf("socketDirFor(%q) = %q; want %q", short, got, want)
	}
	long := "/" + strings.Repeat("d", 90)
	got := socketDirFor(long)
	if !strings.HasPrefix(got, os.TempDir()) || len(got+"/.s.PGSQL.5432") > maxSocketPath {
		t.Errorf("socketDirFor(%q) = %q; want a short directory under %s", long, got, os.TempDir())
	}
	if again := socketDirFor(long); again != got {
		t.Errorf("socketDirFor is not stable: %q, then %q", got, again)
	}
	if other := socketDirFor(long + "x"); other == got {
		t.Errorf("socketDirFor gives two data directories the same socket directory %q", got)
	}
}

func TestSocketURL(t *testing.T) {
	// Environment defaults must not redirect the embedded server's URL.
	t.Setenv("PGPORT", "1")
	t.Setenv("PGSSLMODE", "require")
	t.Setenv("PGUSER", "someone")
	u := socketURL("/var/lib/sbgate/run dir", "sbgate")
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatalf("socketURL() = %q does not parse: %v", u, err)
	}
	if cfg.Host != "/var/lib/sbgate/run dir" || cfg.Port != 5432 || cfg.Database != "sbgate" || cfg.User != "sbgate" || cfg.TLSConfig != nil {
		t.Errorf("socketURL() = %q parses to host %q port %d database %q user %q TLS %v",
			u, cfg.Host, cfg.Port, cfg.Database, cfg.User, cfg.TLSConfig != nil)
	}
}

func TestLineRing(t *testing.T) {
	r := newLineRing(3)
	if got := r.lines(); len(got) != 0 {
		t.Errorf("empty ring: lines() = %q", got)
	}
	for _, l := range []string{"a", "b"} {
		r.add(l)
	}
	if got := strings.Join(r.lines(), ","); got != "a,b" {
		t.Errorf("lines() = %q; want a,b", got)
	}
	for _, l := range []string{"c", "d", "e"} {
		r.add(l)
	}
	if got := strings.Join(r.lines(), ","); got != "c,d,e" {
		t.Errorf("lines() = %q; want c,d,e", got)
	}
}
