package program

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/internal/eventually"
)

// TestEmbeddedPostgresSupervised kills the embedded postmaster with SIGKILL. /readyz answers 503
// while the supervisor brings it back and 200 after; /healthz stays 200; the message sent before
// is still there and the gateway serves again without a restart of its own. When the server then
// cannot come back (a setting it refuses), the supervisor gives up and /healthz answers 503.
func TestEmbeddedPostgresSupervised(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	cfg, err := parseServeConfig([]string{"-listen", "127.0.0.1:0", "-amqp-listen", "127.0.0.1:0", "-amqps-listen", "127.0.0.1:0"}, env("SBGATE_DATA_DIR", dir, "SBGATE_SAS_KEY", testKey), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	// Long enough a first delay that the test sees the gateway unready; the second restart
	// fails, and with it the supervisor's allowance.
	cfg.EmbeddedRestart = db.RestartPolicy{FirstDelay: time.Second, MaxDelay: time.Second, MaxAttempts: 2}
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, out) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	endpoint := waitEndpoint(t, out, done)

	if st, _, body := call(t, http.MethodPut, endpoint+"kept", nil, ""); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	if st, _, body := call(t, http.MethodPost, endpoint+"kept/messages", nil, "before the crash"); st != http.StatusCreated {
		t.Fatalf("send: %d %s", st, body)
	}

	killPostmaster(t, dir)
	waitStatus(t, endpoint+"readyz", http.StatusServiceUnavailable)
	// Only once the supervisor is on it does a 200 from /readyz mean the server is back.
	eventually.Within(time.Minute).True(t, "the supervisor to restart the server", func() bool {
		return strings.Contains(out.String(), `msg="restarting embedded postgres"`)
	})
	if st := status(t, endpoint+"healthz"); st != http.StatusOK {
		t.Errorf("/healthz while restarting = %d; want 200", st)
	}
	waitStatus(t, endpoint+"readyz", http.StatusOK)
	st, _, body := call(t, http.MethodDelete, endpoint+"kept/messages/head?timeout=5", nil, "")
	if st != http.StatusOK || body != "before the crash" {
		t.Errorf("receive after the restart = %d %q; want the message sent before", st, body)
	}
	log := out.String()
	for _, want := range []string{`msg="embedded postgres exited unexpectedly"`, `msg="restarting embedded postgres"`, `msg="embedded postgres restarted"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s", want)
		}
	}

	auto := filepath.Join(dir, "pg", "postgresql.auto.conf")
	f, err := os.OpenFile(auto, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("shared_buffers = 'lots'\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	killPostmaster(t, dir)
	waitStatus(t, endpoint+"healthz", http.StatusServiceUnavailable)
	if st := status(t, endpoint+"readyz"); st != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the supervisor gave up = %d; want 503", st)
	}
	resp, err := http.Get(endpoint + "healthz")
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	n, _ := resp.Body.Read(b)
	resp.Body.Close()
	if !strings.Contains(string(b[:n]), "restart sbgate") {
		t.Errorf("/healthz body %q does not say what to do", b[:n])
	}
	if !strings.Contains(out.String(), `msg="embedded postgres supervisor gave up`) {
		t.Errorf("log lacks the supervisor giving up")
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("serve returned %v", err)
	}
	done <- nil // for the cleanup
}

// killPostmaster sends SIGKILL to the embedded postmaster on dataDir.
func killPostmaster(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "pg", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("postmaster.pid: %q", b)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return pid
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitStatus polls url until it answers want.
func waitStatus(t *testing.T, url string, want int) {
	t.Helper()
	eventually.Within(60*time.Second).NoError(t, "GET "+url+" to answer", func() error {
		if got := status(t, url); got != want {
			return fmt.Errorf("GET %s: %d; want %d", url, got, want)
		}
		return nil
	})
}
