package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/db/dbtest"
)

// TestCPURatios checks the arithmetic of the CPU columns: CPU per message from cores and time,
// the server's CPU per message over the baseline's, and the gateways' CPU per request over
// theirs in http-floor.
func TestCPURatios(t *testing.T) {
	t.Parallel()
	sec := 10 * time.Second
	rep := &Report{
		Baseline: []Result{
			{Operation: BaselineInsert, Clients: 16, Messages: 100_000, Elapsed: sec, CPU: CPUUse{Gateways: 0, Database: 1.0}},
			// 0.8 cores × 10 s over 20,000 messages: 400 µs a message.
			{Operation: BaselineClaim, Clients: 16, Messages: 20_000, Elapsed: sec, CPU: CPUUse{Gateways: 0, Database: 0.8}},
		},
		Results: []Result{
			// 0.5 cores over 100,000 requests: 50 µs a request.
			{Operation: OpHTTPFloor, Clients: 64, Messages: 100_000, Iterations: 100_000, Requests: 100_000, Elapsed: sec,
				CPU: CPUUse{Gateways: 0.5, Database: 0}},
			// 40,000 messages, 80,000 requests: gateways 1.0 core → 250 µs a message, 125 µs a
			// request; database 0.4 → 100 µs a message; (250 + 100) / 400 = 0.875.
			{Operation: OpPeekLock, Clients: 64, Messages: 40_000, Iterations: 40_000, Requests: 80_000, Elapsed: sec,
				CPU: CPUUse{Gateways: 1.0, Database: 0.4}},
			// Over AMQP there are no requests, and with no gateway pids nothing of theirs is known.
			{Operation: OpAMQPPeekLock, Clients: 64, Prefetch: 20, Messages: 40_000, Iterations: 40_000, Elapsed: sec,
				CPU: CPUUse{Gateways: -1, Database: 0.4}},
			{Operation: OpWake, Variant: "same gateway", Clients: 64, Messages: 100, Elapsed: sec, Latency: true,
				CPU: CPUUse{Gateways: 0.1, Database: 0.1}},
		},
	}
	rep.finish()
	pl := rep.Results[1]
	if gw, db := pl.CPUPerMessage(); gw != 250*time.Microsecond || db != 100*time.Microsecond {
		t.Errorf("peek-lock CPUPerMessage = %v, %v; want 250µs, 100µs", gw, db)
	}
	if got := pl.GatewayCPUPerRequest(); got != 125*time.Microsecond {
		t.Errorf("peek-lock GatewayCPUPerRequest = %v; want 125µs", got)
	}
	if q := pl.ServerCPU; q.Against != BaselineClaim || !near(q.Value, 0.875) {
		t.Errorf("peek-lock ServerCPU = %+v; want 0.875 against %s", q, BaselineClaim)
	}
	if q := pl.RequestCPU; q.Against != OpHTTPFloor || !near(q.Value, 2.5) {
		t.Errorf("peek-lock RequestCPU = %+v; want 2.5 against http-floor", q)
	}
	if got := cpuPerMessageText(pl); got != "250+100" {
		t.Errorf("cpuPerMessageText = %q; want 250+100", got)
	}
	text := ratioText(pl)
	for _, want := range []string{"2.00x pg-claim-complete (cpu/msg 0.88x)", "gw cpu/req 2.50x http-floor"} {
		if !strings.Contains(text, want) {
			t.Errorf("ratioText = %q; want it to hold %q", text, want)
		}
	}

	floor := rep.Results[0]
	if floor.RequestCPU != (Ratio{}) || floor.ServerCPU != (Ratio{}) {
		t.Errorf("http-floor compared with itself or the database: %+v, %+v", floor.RequestCPU, floor.ServerCPU)
	}
	amqp := rep.Results[2]
	if amqp.ServerCPU != (Ratio{}) || amqp.RequestCPU != (Ratio{}) {
		t.Errorf("AMQP row without the gateways' CPU has CPU ratios %+v, %+v", amqp.ServerCPU, amqp.RequestCPU)
	}
	if got := cpuPerMessageText(amqp); got != "-+100" {
		t.Errorf("cpuPerMessageText without the gateways = %q; want -+100", got)
	}
	if wake := rep.Results[3]; wake.ServerCPU != (Ratio{}) {
		t.Errorf("a latency row has a CPU ratio: %+v", wake.ServerCPU)
	}
	if got := rep.Label(amqp); got != "amqp-peek-lock + complete (prefetch 20)" {
		t.Errorf("Label = %q", got)
	}
}

func near(a, b float64) bool { return a > b-1e-9 && a < b+1e-9 }

// TestDrainedText: a row whose queue ran empty says when.
func TestDrainedText(t *testing.T) {
	t.Parallel()
	r := Result{Operation: OpPeekLock, Drained: true, DrainedAfter: 4120 * time.Millisecond, Elapsed: 6 * time.Second}
	if got, want := ratioText(r), "(queue empty after 4.1s of 6s: the rest of the phase had nothing to receive)"; got != want {
		t.Errorf("ratioText = %q; want %q", got, want)
	}
}

// TestFillFor: a receive phase is filled past what the fastest rate seen could take in it.
func TestFillFor(t *testing.T) {
	t.Parallel()
	r := &runner{cfg: Config{Duration: 10 * time.Second}, rates: map[string]float64{}}
	seconds := 10*1.2 + 0.5
	if got, want := r.fillFor(OpPeekLock, 0, 64, 1), int64((4000+200*64)*seconds)+64; got != want {
		t.Errorf("without a baseline: fillFor = %d; want %d", got, want)
	}
	r.baseline = []Result{{Operation: BaselineInsert, Messages: 100_000, Elapsed: 10 * time.Second}} // 10,000/s
	if got, want := r.fillFor(OpPeekLock, 0, 16, 1), int64(15_000*seconds)+16; got != want {
		t.Errorf("fillFor = %d; want %d (1.5 x pg-insert)", got, want)
	}
	if got, want := r.fillFor(OpBatchSettle, 0, 16, 100), int64(30_000*seconds)+1600; got != want {
		t.Errorf("batch-settle fillFor = %d; want %d (3 x pg-insert)", got, want)
	}
	// A receive measured faster than the bound raises it for every receive after it.
	r.done = append(r.done, Result{Operation: OpAMQPPeekLock, Prefetch: 100, Messages: 200_000, Elapsed: 10 * time.Second})
	r.noteRate(r.done[0])
	if got, want := r.fillFor(OpPeekLock, 0, 16, 1), int64(30_000*seconds)+16; got != want {
		t.Errorf("after a 20,000/s receive: fillFor = %d; want %d", got, want)
	}
	if got, want := r.fillFor(OpAMQPPeekLock, 100, 64, 100), int64(30_000*seconds)+6400; got != want {
		t.Errorf("amqp-peek-lock at prefetch 100: fillFor = %d; want %d", got, want)
	}
}

// TestFindPostmaster finds the test server's postmaster from one of its backends: the process
// that postmaster.pid in its data directory names.
func TestFindPostmaster(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.WithoutCancel(t.Context()))
	var backend int
	var dir string
	if err := c.QueryRow(t.Context(), `SELECT pg_backend_pid(), current_setting('data_directory')`).Scan(&backend, &dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		t.Fatalf("the test server runs here, so its postmaster.pid is readable: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	want, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("postmaster.pid: %q", b)
	}
	if got := findPostmaster(backend); got != want {
		t.Errorf("findPostmaster(%d) = %d; want %d", backend, got, want)
	}
	if got := localPostmaster(t.Context(), url); got != want {
		t.Errorf("localPostmaster = %d; want %d", got, want)
	}
	if got := findPostmaster(os.Getpid()); got != 0 {
		t.Errorf("findPostmaster(this test) = %d; want 0, it is no postgres", got)
	}
}
