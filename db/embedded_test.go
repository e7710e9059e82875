package db_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/internal/eventually"
)

// execSQL runs statements on url.
func execSQL(t *testing.T, url string, statements ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)
	for _, s := range statements {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// queryString returns the single text value sql yields on url.
func queryString(t *testing.T, url, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// serverUser returns the uid and gid the server should run as: postgres's when the tests run as
// root, else our own.
func serverUser(t *testing.T) (uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return os.Geteuid(), os.Getegid()
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

func postgresUID(t *testing.T) int {
	uid, _ := serverUser(t)
	return uid
}

func ownerUID(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

func TestEmbeddedRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	e := startEmbedded(t, dir)

	if !strings.Contains(e.URL(), "/sbgate?") || !strings.Contains(e.AdminURL(), "/postgres?") {
		t.Errorf("URL() = %q, AdminURL() = %q; want databases sbgate and postgres", e.URL(), e.AdminURL())
	}
	execSQL(t, e.URL(), `CREATE TABLE kept (v text)`, `INSERT INTO kept VALUES ('across restarts')`)

	// The server runs as the server user, in a process group of its own (so a terminal's Ctrl-C
	// reaches sbgate, not postgres), and owns its cluster.
	pid := e.PIDForTest()
	if got, want := ownerUID(t, "/proc/"+strconv.Itoa(pid)), postgresUID(t); got != want {
		t.Errorf("postmaster runs as uid %d; want %d", got, want)
	}
	if got, want := ownerUID(t, filepath.Join(dir, "pg")), postgresUID(t); got != want {
		t.Errorf("cluster directory owned by uid %d; want %d", got, want)
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("Getpgid(postmaster) = %d, %v; want its own group %d", pgid, err, pid)
	}
	if got := strings.TrimSpace(queryString(t, e.URL(), `SHOW listen_addresses`)); got != "" {
		t.Errorf("listen_addresses = %q; want '' (no TCP)", got)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "sbgate.lock"))
	if err != nil || strings.TrimSpace(string(lock)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("sbgate.lock holds %q, %v; want our pid %d", lock, err, os.Getpid())
	}

	// Concurrent and repeated Stops all wait for the one shutdown.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := e.Stop(t.Context()); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
	wg.Wait()
	select {
	case <-e.Done():
	default:
		t.Fatal("Done() not closed after Stop returned")
	}
	if !processExited(pid) {
		t.Fatalf("postmaster %d still running after Stop", pid)
	}
	if err := e.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: %v", err)
	}

	e2 := startEmbedded(t, dir)
	if got := queryString(t, e2.URL(), `SELECT v FROM kept`); got != "across restarts" {
		t.Errorf("after restart: SELECT v = %q; want %q", got, "across restarts")
	}
}

func TestEmbeddedDataDirInUse(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	startEmbedded(t, dir)

	begin := time.Now()
	_, err := db.StartEmbedded(t.Context(), db.EmbeddedConfig{DataDir: dir, Settings: fastSettings})
	want := fmt.Sprintf("data directory %s is in use by another sbgate (pid %d)", dir, os.Getpid())
	if !errors.Is(err, db.ErrDataDirInUse) || err.Error() != want {
		t.Fatalf("second StartEmbedded = %v; want %q (ErrDataDirInUse)", err, want)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("second StartEmbedded took %v to fail; want it at once", took)
	}
}

func TestEmbeddedStopsLeftoverServer(t *testing.T) {
	t.Parallel()
	// Deep enough that the socket path would not fit a unix socket address, so the server's
	// socket goes to a short directory under os.TempDir().
	dir := filepath.Join(newDataDir(t), strings.Repeat("long-directory-name/", 5))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old := startEmbedded(t, dir)
	if strings.Contains(old.URL(), dir) {
		t.Errorf("URL() = %q uses the over-long socket path under %s", old.URL(), dir)
	}
	execSQL(t, old.URL(), `CREATE TABLE kept (v text)`, `INSERT INTO kept VALUES ('survives adoption')`)

	// What a killed sbgate leaves when the parent-death signal did not arrive: a running server
	// and no lock.
	old.ReleaseLockForTest()
	e := startEmbedded(t, dir)

	if !processExited(old.PIDForTest()) {
		t.Error("leftover server still running after the new StartEmbedded returned")
	}
	if e.PIDForTest() == old.PIDForTest() {
		t.Errorf("new server has the leftover's pid %d", e.PIDForTest())
	}
	if got := queryString(t, e.URL(), `SELECT v FROM kept`); got != "survives adoption" {
		t.Errorf("SELECT v = %q; want %q", got, "survives adoption")
	}
}

// TestEmbeddedStopsWhenSbgateIsKilled kills a stand-in sbgate (this test binary in helper mode)
// with SIGKILL, which it cannot handle, and expects the kernel to stop its server.
func TestEmbeddedStopsWhenSbgateIsKilled(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)

	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+dir)
	helper.Stderr = t.Output()
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = helper.Process.Kill()
		_ = helper.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the helper's output: %v", err)
	}
	var pid int
	var url string
	if _, err := fmt.Sscanf(line, "pid=%d url=%s", &pid, &url); err != nil {
		t.Fatalf("helper said %q: %v", line, err)
	}
	execSQL(t, url, `CREATE TABLE kept (v text)`, `INSERT INTO kept VALUES ('survives SIGKILL')`)

	// Another process holds the directory: the error names it.
	_, err = db.StartEmbedded(t.Context(), db.EmbeddedConfig{DataDir: dir, Settings: fastSettings})
	if want := fmt.Sprintf("(pid %d)", helper.Process.Pid); !errors.Is(err, db.ErrDataDirInUse) || !strings.Contains(err.Error(), want) {
		t.Errorf("StartEmbedded while the helper runs = %v; want ErrDataDirInUse naming %s", err, want)
	}

	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	eventually.True(t, fmt.Sprintf("postmaster %d to exit after its sbgate was killed", pid),
		func() bool { return processExited(pid) })

	// The kernel released the helper's lock; the data is intact.
	e := startEmbedded(t, dir)
	if got := queryString(t, e.URL(), `SELECT v FROM kept`); got != "survives SIGKILL" {
		t.Errorf("SELECT v = %q; want %q", got, "survives SIGKILL")
	}
}

func TestEmbeddedRecoversFromInterruptedInitdb(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	// An initdb killed half-way: a cluster directory without PG_VERSION, and our scratch directory.
	for _, d := range []string{"pg", "pg.initdb"} {
		if err := os.MkdirAll(filepath.Join(dir, d, "base"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "junk"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// A server that fails to start reports the end of its log.
	_, err := db.StartEmbedded(t.Context(), db.EmbeddedConfig{
		DataDir:  dir,
		Settings: map[string]string{"fsync": "off", "shared_buffers": "lots"},
		Logger:   testLogger(t),
	})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "last server log lines") ||
		!strings.Contains(err.Error(), `invalid value for parameter "shared_buffers"`) {
		t.Fatalf("StartEmbedded with a bad setting = %v; want the server's complaint about shared_buffers", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pg", "PG_VERSION")); err != nil {
		t.Errorf("cluster not initialised: %v", err)
	}
	for _, p := range []string{"pg/junk", "pg.initdb"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left from the interrupted initdb: %v", p, err)
		}
	}

	// The failed start released the directory, and the cluster is usable.
	e := startEmbedded(t, dir)
	execSQL(t, e.URL(), `SELECT 1`)
}

func TestEmbeddedStopEscalates(t *testing.T) {
	t.Parallel()
	e, err := db.StartEmbedded(t.Context(), db.EmbeddedConfig{DataDir: newDataDir(t), Settings: fastSettings, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	pid := e.PIDForTest()
	// A stopped process leaves SIGINT and SIGQUIT pending; only SIGKILL ends it.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.SetStopTimeoutForTest(100 * time.Millisecond)
	err = e.Stop(t.Context())
	if err == nil || !strings.Contains(err.Error(), "SIGQUIT, then SIGKILL") {
		t.Errorf("Stop of a stuck server = %v; want it to report SIGQUIT, then SIGKILL", err)
	}
	if !processExited(pid) {
		t.Errorf("postmaster %d still running after Stop", pid)
	}
}

// TestEmbeddedRestartsAfterCrash: a new StartEmbedded copes with what a crashed server leaves
// (with the supervisor off, as when the sbgate that ran it is gone too).
func TestEmbeddedRestartsAfterCrash(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	e := startEmbeddedWith(t, db.EmbeddedConfig{DataDir: dir, Restart: db.RestartPolicy{Disabled: true}})
	pgData, err := filepath.EvalSymlinks(filepath.Join(dir, "pg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(e.PIDForTest(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done() not closed 30s after the server was killed")
	}
	if err := e.Stop(t.Context()); err != nil {
		t.Errorf("Stop after a crash: %v", err)
	}
	// The killed postmaster's children notice its death and exit; a new server cannot start
	// while they hold the old shared memory.
	eventually.True(t, "the crashed server's children to exit", func() bool {
		return len(processesIn(pgData)) == 0
	})

	// postmaster.pid still names the dead postmaster. Make it name a live process of the server
	// user that is not a postmaster, as after pid reuse: postgres alone would refuse to start.
	stranger := exec.Command("sleep", "60")
	if os.Geteuid() == 0 {
		uid, gid := serverUser(t)
		stranger.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stranger.Process.Kill()
		_ = stranger.Wait()
	})
	pidFile := filepath.Join(dir, "pg", "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("no stale postmaster.pid after the crash: %v", err)
	}
	_, rest, _ := strings.Cut(string(b), "\n")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(stranger.Process.Pid)+"\n"+rest), 0o600); err != nil {
		t.Fatal(err)
	}

	e2 := startEmbedded(t, dir)
	execSQL(t, e2.URL(), `SELECT 1`)
}

// processesIn returns the pids of processes whose working directory is dir.
func processesIn(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == dir && !processExited(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestEmbeddedRefusesUnreachableDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the server to another user, who may be unable to reach the directory")
	}
	t.Parallel()
	parent := newDataDir(t)
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := db.StartEmbedded(t.Context(), db.EmbeddedConfig{DataDir: filepath.Join(parent, "data")})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "cannot enter "+parent) ||
		!strings.Contains(err.Error(), "chmod o+x "+parent) || !strings.Contains(err.Error(), "SBGATE_DATA_DIR") {
		t.Fatalf("StartEmbedded under a 0700 root directory = %v; want an error naming %s and the fixes", err, parent)
	}
}

func TestEmbeddedNoBinaries(t *testing.T) {
	_, err := db.StartEmbedded(context.Background(), db.EmbeddedConfig{DataDir: newDataDir(t), BinDir: t.TempDir()})
	if !errors.Is(err, db.ErrNoBinaries) {
		t.Fatalf("StartEmbedded with an empty BinDir = %v; want ErrNoBinaries", err)
	}
}
