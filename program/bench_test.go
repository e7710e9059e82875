package program

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbgate/sbgate/bench"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
)

// benchReport is the part of `sbgate bench -o json` the tests look at.
type benchReport struct {
	Gateways int `json:"gateways"`
	Baseline []struct {
		Operation string `json:"operation"`
		Messages  int64  `json:"messages"`
	} `json:"baseline"`
	Results []struct {
		Operation  string `json:"operation"`
		Variant    string `json:"variant"`
		Clients    int    `json:"clients"`
		Messages   int64  `json:"messages"`
		Errors     int64  `json:"errors"`
		FirstError string `json:"first_error"`
		Ratios     []struct {
			Against string `json:"against"`
		} `json:"ratios"`
	} `json:"results"`
}

func decodeReport(t *testing.T, out string) benchReport {
	t.Helper()
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench -o json output: %v\n%s", err, out)
	}
	return rep
}

// TestBenchCommand drives a running gateway named by its connection string, with the baseline
// on its database.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	endpoint, _, _ := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey))
	host := strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/")
	conn := "Endpoint=sb://" + host + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey
	var out, progress syncBuffer
	err := run(t.Context(), []string{"bench", "-clients", "1,4", "-duration", "200ms", "-baseline-clients", "2", "-database-url", url, "-o", "json"},
		env("SBGATE_CONNECTION_STRING", conn), &out, &progress)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, progress.String())
	}
	rep := decodeReport(t, out.String())
	if len(rep.Baseline) != 2 || len(rep.Results) != 10 {
		t.Fatalf("bench ran %d baseline phases and %d others; want 2 and 10 (5 operations × 2 levels):\n%s", len(rep.Baseline), len(rep.Results), out.String())
	}
	for _, r := range rep.Results {
		if r.Messages == 0 || r.Errors != 0 || len(r.Ratios) == 0 {
			t.Errorf("%s at %d clients: %d messages, %d errors (%s), ratios %v; want messages, no errors, ratios",
				r.Operation, r.Clients, r.Messages, r.Errors, r.FirstError, r.Ratios)
		}
	}
}

var (
	spawnDirRE = regexp.MustCompile(`logs in (\S+) \(removed at the end\)`)
	spawnPidRE = regexp.MustCompile(`started gateway-\d+ \(pid (\d+)\)`)
)

// TestBenchSpawnsGateways: with no connection string, sbgate bench starts its gateways (this
// test binary, run as sbgate), two of them on one embedded PostgreSQL, measures through both,
// over HTTP and over AMQP (whose listener, on port 0, it learns from the ready file), and leaves
// nothing behind: no process and no directory.
//
// Not parallel: the gateways learn from the environment that they are sbgate (t.Setenv).
func TestBenchSpawnsGateways(t *testing.T) {
	t.Setenv("SBGATE_TEST_AS_MAIN", "1")
	var out, progress syncBuffer
	err := run(t.Context(), []string{"bench", "-gateways", "2", "-clients", "2", "-duration", "200ms", "-baseline-clients", "2",
		"-ops", "send,receive-delete,amqp-send,amqp-peek-lock,wake", "-o", "json"}, env(), &out, &progress)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, progress.String())
	}
	rep := decodeReport(t, out.String())
	if rep.Gateways != 2 || len(rep.Baseline) != 2 || len(rep.Results) != 6 {
		t.Fatalf("report: %d gateways, %d baseline phases, %d others; want 2, 2, 6 (send, receive-delete, amqp-send, amqp-peek-lock, wake twice):\n%s",
			rep.Gateways, len(rep.Baseline), len(rep.Results), out.String())
	}
	for _, r := range rep.Results {
		if r.Messages == 0 || r.Errors != 0 {
			t.Errorf("%s %s: %d messages, %d errors (%s)", r.Operation, r.Variant, r.Messages, r.Errors, r.FirstError)
		}
	}
	if v := rep.Results[5].Variant; v != "other gateway" {
		t.Errorf("last wake row %q; want the one through the other gateway", v)
	}
	checkNothingLeft(t, progress.String())
}

// TestBenchSpawnInterrupted: cancelling sbgate bench (Ctrl-C) in the middle of a phase stops its
// gateways and removes their directory.
func TestBenchSpawnInterrupted(t *testing.T) {
	t.Setenv("SBGATE_TEST_AS_MAIN", "1")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, progress syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"bench", "-clients", "2", "-duration", "1m", "-baseline-clients", "2", "-ops", "send"}, env(), &out, &progress)
	}()
	eventually.Within(time.Minute).True(t, "a measuring phase", func() bool {
		return strings.Contains(progress.String(), "pg-insert ")
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("interrupted bench returned %v; want context.Canceled", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("bench did not stop after cancellation:\n%s", progress.String())
	}
	checkNothingLeft(t, progress.String())
}

// checkNothingLeft checks that the gateways named in a bench's progress output have exited and
// that their directory is gone, with no process (PostgreSQL) still working in it.
func checkNothingLeft(t *testing.T, progress string) {
	t.Helper()
	m := spawnDirRE.FindStringSubmatch(progress)
	pids := spawnPidRE.FindAllStringSubmatch(progress, -1)
	if m == nil || len(pids) == 0 {
		t.Fatalf("progress names no gateway directory or pid:\n%s", progress)
	}
	for _, p := range pids {
		pid, _ := strconv.Atoi(p[1])
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("gateway pid %d still exists after bench returned (kill 0: %v)", pid, err)
		}
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gateway directory %s still there: %v", m[1], err)
	}
	if runtime.GOOS != "linux" {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range procs {
		if cwd, err := os.Readlink(p); err == nil && strings.HasPrefix(cwd, m[1]) {
			t.Errorf("process %s still runs in %s", filepath.Dir(p), cwd)
		}
	}
}

// TestBenchProfile: with -profile, sbgate bench runs the embedded PostgreSQL itself with
// pg_stat_statements and gives its gateways profiling listeners, and writes for each phase a CPU
// profile of each gateway, its allocations, and what each statement cost; every row has the gateways' and
// PostgreSQL's CPU per message. Nothing is left behind.
//
// Not parallel: the gateways learn from the environment that they are sbgate (t.Setenv).
func TestBenchProfile(t *testing.T) {
	t.Setenv("SBGATE_TEST_AS_MAIN", "1")
	dir := t.TempDir()
	var out, progress syncBuffer
	err := run(t.Context(), []string{"bench", "-clients", "2", "-duration", "1s", "-baseline-clients", "2",
		"-ops", "send", "-profile", dir, "-o", "json"}, env(), &out, &progress)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, progress.String())
	}
	var rep struct {
		Results []struct {
			Operation string  `json:"operation"`
			Gateway   float64 `json:"gateway_cpu_us_per_msg"`
			Database  float64 `json:"database_cpu_us_per_msg"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil || len(rep.Results) != 1 {
		t.Fatalf("report (%v):\n%s", err, out.String())
	}
	if r := rep.Results[0]; r.Gateway <= 0 || r.Database <= 0 {
		t.Errorf("%s: gateway %v µs, database %v µs a message; want both measured", r.Operation, r.Gateway, r.Database)
	}
	prof, err := os.ReadFile(filepath.Join(dir, "03-send-2.gateway-0.pprof"))
	if err != nil || len(prof) == 0 {
		t.Errorf("the send phase's gateway profile: %v (%d bytes)", err, len(prof))
	}
	for _, f := range []string{"03-send-2.gateway-0.allocs-before.pprof", "03-send-2.gateway-0.allocs-after.pprof"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || len(b) == 0 {
			t.Errorf("%s: %v (%d bytes)", f, err, len(b))
		}
	}
	stmts, err := os.ReadFile(filepath.Join(dir, "03-send-2.statements.txt"))
	if err != nil || !strings.Contains(string(stmts), "WITH input AS (") || !strings.Contains(string(stmts), "µs planning") {
		t.Errorf("the send phase's statements (%v):\n%s", err, stmts)
	}
	if errs, _ := filepath.Glob(filepath.Join(dir, "*.error.txt")); len(errs) > 0 {
		b, _ := os.ReadFile(errs[0])
		t.Errorf("profiling failed: %s: %s", errs[0], b)
	}
	checkNothingLeft(t, progress.String())
}

// TestBenchCompare: sbgate bench compare prints another broker's report and sbgate's side by
// side, and refuses them the wrong way round; sbgate bench rabbitmq reports a broker it cannot
// reach.
func TestBenchCompare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, rep *bench.Report) string {
		t.Helper()
		var b bytes.Buffer
		if err := rep.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sec := 10 * time.Second
	rabbit := write("rabbitmq.json", &bench.Report{Broker: "RabbitMQ 3.10.8", RabbitMQWindow: 100, Duration: sec, MessageSize: 1024,
		Results: []bench.Result{{Operation: bench.OpRabbitConsume, Clients: 64, Prefetch: 100, Messages: 100_000, Elapsed: sec,
			CPU: bench.CPUUse{Gateways: 1, Database: -1}}}})
	sbgate := write("sbgate.json", &bench.Report{Duration: sec, MessageSize: 1024,
		Results: []bench.Result{{Operation: bench.OpAMQPPeekLock, Clients: 64, Prefetch: 20, Messages: 50_000, Elapsed: sec,
			CPU: bench.CPUUse{Gateways: 0.5, Database: 0.5}}}})
	var out, errOut syncBuffer
	if err := run(t.Context(), []string{"bench", "compare", rabbit, sbgate}, env(), &out, &errOut); err != nil {
		t.Fatalf("bench compare: %v", err)
	}
	for _, want := range []string{"rabbitmq-consume + ack (prefetch 100)", "sbgate amqp-peek-lock + complete (prefetch 20)", "0.50x rate, 2.00x cpu/msg"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("comparison lacks %q:\n%s", want, out.String())
		}
	}
	if err := run(t.Context(), []string{"bench", "compare", sbgate, rabbit}, env(), &out, &errOut); err == nil {
		t.Error("bench compare took sbgate's report for the other broker's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	err = run(t.Context(), []string{"bench", "rabbitmq", "-url", "amqp://guest:guest@" + addr + "/", "-clients", "1", "-duration", "100ms"}, env(), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "RabbitMQ") {
		t.Errorf("bench rabbitmq with no broker = %v; want an error about RabbitMQ", err)
	}
}
