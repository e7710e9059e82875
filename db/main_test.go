package db_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
)

// helperEnv, when set to a data directory, turns the test binary into a stand-in sbgate for
// TestEmbeddedStopsWhenSbgateIsKilled: it starts an embedded server there, prints
// "pid=<postmaster pid> url=<url>" and waits until its stdin closes or it is killed.
const helperEnv = "SBGATE_DB_TEST_HELPER_DATA_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(runHelper(dir))
	}
	// The Open and Migrate tests use databases on the package's test server; the embedded-server
	// tests start servers of their own in directories of their own.
	dbtest.Main(m)
}

func runHelper(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := db.StartEmbedded(ctx, db.EmbeddedConfig{DataDir: dir, Settings: fastSettings})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("pid=%d url=%s\n", e.PIDForTest(), e.URL())
	// Exit when the test goes away, so a failed test leaves no stray helper behind.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	_ = e.Stop(context.Background())
	return 0
}

// fastSettings turn off what a throwaway server does not need. Dynamic shared memory goes into
// the data directory (mmap) rather than /dev/shm, where the servers these tests kill with SIGKILL
// would leave their segments behind.
var fastSettings = map[string]string{
	"fsync":                      "off",
	"synchronous_commit":         "off",
	"full_page_writes":           "off",
	"dynamic_shared_memory_type": "mmap",
}

// newDataDir returns an empty directory for an embedded server, removed after the test. It is made
// under os.TempDir() rather than with t.TempDir(), whose 0700 parent the postgres user (which runs
// the server when the tests run as root) could not enter.
func newDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbgate-db-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // for subdirectories as data directories
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove data directory: %v", err)
		}
	})
	return dir
}

// startEmbedded starts a server in dataDir and stops it when the test ends (unless stopped before).
func startEmbedded(t *testing.T, dataDir string) *db.Embedded {
	t.Helper()
	return startEmbeddedWith(t, db.EmbeddedConfig{DataDir: dataDir})
}

// startEmbeddedWith is startEmbedded with more settings; Settings and Logger default to
// fastSettings and the test's log.
func startEmbeddedWith(t *testing.T, cfg db.EmbeddedConfig) *db.Embedded {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if cfg.Settings == nil {
		cfg.Settings = fastSettings
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	dataDir := cfg.DataDir
	e, err := db.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatalf("StartEmbedded(%s): %v", dataDir, err)
	}
	t.Cleanup(func() {
		if err := e.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return e
}

// testLogger sends the server's log to the test's output, shown when it fails or with -v.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// processExited reports whether pid is gone. A process whose parent died is a zombie until
// whatever adopted it reaps it, which some container inits never do; a zombie has exited.
func processExited(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}
