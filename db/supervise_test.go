package db_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/internal/eventually"
)

// durableSettings keep synchronous_commit on, so that a commit has reached the WAL (in the OS's
// cache: fsync stays off, which a killed process cannot undo) before it is acknowledged.
var durableSettings = map[string]string{
	"fsync":                      "off",
	"dynamic_shared_memory_type": "mmap",
}

// logBuffer is a slog handler target that tests can search while the server runs.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
	t  *testing.T
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	return l.t.Output().Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLogBuffer(t *testing.T) (*logBuffer, *slog.Logger) {
	lb := &logBuffer{t: t}
	return lb, slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// TestEmbeddedSupervisorRestartsKilledServer kills the postmaster with SIGKILL while eight
// writers insert rows. The supervisor logs the crash, restarts the server, reports it running
// again and calls OnRestart; a pool opened before the crash works again; every insert that was
// acknowledged is there.
func TestEmbeddedSupervisorRestartsKilledServer(t *testing.T) {
	t.Parallel()
	logs, logger := newLogBuffer(t)
	var restarts atomic.Int32
	var e *db.Embedded
	var statusAtRestart atomic.Int32 // what Status said while OnRestart ran
	e = startEmbeddedWith(t, db.EmbeddedConfig{
		DataDir: newDataDir(t), Settings: durableSettings, Logger: logger,
		OnRestart: func() {
			restarts.Add(1)
			statusAtRestart.Store(int32(e.Status()))
		},
	})
	execSQL(t, e.URL(), `CREATE TABLE acked (v text PRIMARY KEY)`)
	pool, err := db.Open(t.Context(), e.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var mu sync.Mutex
	acked := map[string]bool{}
	var inserted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("%d-%d", w, i)
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				_, err := pool.Exec(ctx, `INSERT INTO acked VALUES ($1)`, v)
				cancel()
				if err == nil {
					mu.Lock()
					acked[v] = true
					mu.Unlock()
					inserted.Add(1)
				}
			}
		})
	}
	eventually.True(t, "200 inserts", func() bool { return inserted.Load() >= 200 })
	old := e.PIDForTest()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually.Within(60*time.Second).True(t, "the supervisor to restart the server", func() bool {
		return e.Status() == db.StatusRunning && e.PIDForTest() != old
	})
	// The writers go on through the same pool.
	after := inserted.Load()
	eventually.True(t, "inserts through the old pool after the restart", func() bool {
		return inserted.Load() >= after+100
	})
	close(stop)
	wg.Wait()

	select {
	case <-e.Done():
		t.Fatal("Done closed although the server was restarted")
	default:
	}
	if n := restarts.Load(); n != 1 {
		t.Errorf("OnRestart called %d times; want 1", n)
	}
	// The pools are reset before anyone is told the server runs again.
	if s := db.Status(statusAtRestart.Load()); s != db.StatusRestarting {
		t.Errorf("Status while OnRestart ran = %v; want restarting", s)
	}
	for _, want := range []string{`msg="embedded postgres exited unexpectedly" component=postgres pid=` + fmt.Sprint(old), `msg="restarting embedded postgres" component=postgres attempt=1`, `msg="embedded postgres restarted"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
	rows, err := pool.Query(t.Context(), `SELECT v FROM acked`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		delete(acked, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acked) > 0 {
		t.Errorf("%d acknowledged inserts lost across the crash", len(acked))
	}
	if err := e.Stop(t.Context()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if s := e.Status(); s != db.StatusStopped {
		t.Errorf("Status after Stop = %v; want stopped", s)
	}
}

// TestEmbeddedSupervisorGivesUp: a server that cannot come back (here, a setting it refuses) is
// tried MaxAttempts times, then the supervisor gives up: Status says failed, Done is closed, and
// the log says so. Stop still works.
func TestEmbeddedSupervisorGivesUp(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	logs, logger := newLogBuffer(t)
	e := startEmbeddedWith(t, db.EmbeddedConfig{
		DataDir: dir, Logger: logger,
		Restart: db.RestartPolicy{FirstDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxAttempts: 3},
	})
	auto := filepath.Join(dir, "pg", "postgresql.auto.conf")
	f, err := os.OpenFile(auto, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("shared_buffers = 'lots'\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := syscall.Kill(e.PIDForTest(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Done():
	case <-time.After(2 * time.Minute):
		t.Fatalf("supervisor still trying after 2 minutes; status %v", e.Status())
	}
	if s := e.Status(); s != db.StatusFailed {
		t.Errorf("Status = %v; want failed", s)
	}
	log := logs.String()
	if n := strings.Count(log, `msg="embedded postgres restart failed"`); n != 3 {
		t.Errorf("%d failed restarts logged; want 3", n)
	}
	if !strings.Contains(log, `invalid value for parameter \"shared_buffers\"`) {
		t.Errorf("the failed restarts do not quote the server's complaint")
	}
	if !strings.Contains(log, `msg="embedded postgres supervisor gave up`) {
		t.Errorf("log lacks the supervisor giving up")
	}
	if err := e.Stop(t.Context()); err != nil {
		t.Errorf("Stop after giving up: %v", err)
	}
	if s := e.Status(); s != db.StatusStopped {
		t.Errorf("Status after Stop = %v; want stopped", s)
	}
}

// TestEmbeddedStopDuringRestart: Stop while the supervisor waits to restart a killed server ends
// supervision, and no server is left running.
func TestEmbeddedStopDuringRestart(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	e := startEmbeddedWith(t, db.EmbeddedConfig{DataDir: dir, Restart: db.RestartPolicy{FirstDelay: time.Hour}})
	pgData, err := filepath.EvalSymlinks(filepath.Join(dir, "pg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(e.PIDForTest(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the supervisor to notice", func() bool {
		return e.Status() == db.StatusRestarting
	})
	if err := e.Stop(t.Context()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if s := e.Status(); s != db.StatusStopped {
		t.Errorf("Status after Stop = %v; want stopped", s)
	}
	eventually.True(t, "the crashed server's children to exit", func() bool {
		return len(processesIn(pgData)) == 0
	})
}

func TestStatusString(t *testing.T) {
	for s, want := range map[db.Status]string{db.StatusRunning: "running", db.StatusRestarting: "restarting", db.StatusFailed: "failed", db.StatusStopped: "stopped"} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d).String() = %q; want %q", s, got, want)
		}
	}
}

// TestEmbeddedNotRunningOnceThePostmasterIsGone: the status leaves running as soon as the
// postmaster exits, not once the crash is logged. A backend busy in a query outlives its
// postmaster's SIGKILL and keeps the log open, so the log is read to its end only after
// awaitLog's bound; meanwhile that backend may answer a readiness probe's ping, and /readyz said
// 200 for a server that was not there (seen as a failure of TestEmbeddedPostgresSupervised in CI).
func TestEmbeddedNotRunningOnceThePostmasterIsGone(t *testing.T) {
	t.Parallel()
	logs, logger := newLogBuffer(t)
	dir := newDataDir(t)
	e := startEmbeddedWith(t, db.EmbeddedConfig{DataDir: dir, Logger: logger, Restart: db.RestartPolicy{FirstDelay: time.Hour}})
	conn, err := pgx.Connect(t.Context(), e.URL())
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan error, 1)
	go func() {
		// In the select list the series is streamed (in FROM it would fill a temporary file);
		// statement_timeout bounds it even when nothing else stops the orphan.
		_, err := conn.Exec(context.Background(), `SET statement_timeout = '60s'; SELECT count(*) FROM (SELECT generate_series(1, 100000000000)) s`)
		busy <- err
	}()
	eventually.True(t, "the busy query to run", func() bool {
		var n int
		c, err := pgx.Connect(t.Context(), e.URL())
		if err != nil {
			return false
		}
		defer c.Close(context.Background())
		_ = c.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%generate_series%' AND pid <> pg_backend_pid()`).Scan(&n)
		return n > 0
	})
	if err := syscall.Kill(e.PIDForTest(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the status to leave running", func() bool {
		return e.Status() != db.StatusRunning
	})
	if strings.Contains(logs.String(), "exited unexpectedly") {
		t.Error("the status left running only once the crash was logged, after the orphaned backend's log was waited for")
	}
	// The orphan would count to the end.
	if err := syscall.Kill(int(conn.PgConn().PID()), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(t.Context()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	<-busy
}
