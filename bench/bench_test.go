package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/bench"
	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
	amqpdoor "github.com/sbgate/sbgate/handlers/amqp"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// TestMain gives the package a real PostgreSQL server; each test clones its own database.
func TestMain(m *testing.M) { dbtest.Main(m) }

const testKey = "YmVuY2gtdGVzdC1rZXktZm9yLXNiZ2F0ZS0xMjM0NTY3OA=="

// gateways serves n gateways over one fresh database, as n sbgate processes would, and returns
// their connection strings and the database's URL.
func gateways(t *testing.T, n int) ([]string, string) {
	t.Helper()
	conns, _, url := gatewaysWithAMQP(t, n)
	return conns, url
}

// gatewaysWithAMQP is gateways that also listen for AMQP, as sbgate serve does, and returns
// their AMQP connection strings too.
func gatewaysWithAMQP(t *testing.T, n int) (conns, amqpConns []string, url string) {
	t.Helper()
	return gatewaysWrapped(t, n, nil)
}

// gatewaysWrapped is gatewaysWithAMQP with each gateway's HTTP handler passed through wrap
// (with the gateway's place) when wrap is not nil.
func gatewaysWrapped(t *testing.T, n int, wrap func(int, http.Handler) http.Handler) (conns, amqpConns []string, url string) {
	t.Helper()
	url = dbtest.NewDatabase(t)
	keys := []sas.Key{{Name: "RootManageSharedAccessKey", Primary: testKey, Rights: sas.Manage}}
	for i := range n {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		pool, err := db.Open(ctx, url)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st := store.New(pool, store.Options{})
		st.Start(context.Background())
		t.Cleanup(st.Stop)
		relay := store.NewRelay(st, store.RelayOptions{}) // as sbgate serve runs it, for sql-send
		relay.Start(context.Background())
		t.Cleanup(relay.Stop)
		var web http.Handler = rest.NewServer(st, rest.Config{Keys: keys})
		if wrap != nil {
			web = wrap(i, web)
		}
		srv := httptest.NewServer(web)
		t.Cleanup(srv.Close)
		conns = append(conns, "Endpoint="+srv.URL+"/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+testKey)

		h := amqpdoor.New(amqpdoor.Config{Store: st, Access: access.New(access.Config{Keys: keys, Source: st})})
		asrv := amqp.NewServer(h, amqp.Options{Authenticate: h.Authenticate})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = asrv.Serve(context.Background(), ln)
		}()
		t.Cleanup(func() {
			_ = asrv.Close()
			<-served
		})
		amqpConns = append(amqpConns, "Endpoint=sb://"+ln.Addr().String()+";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+testKey+";UseDevelopmentEmulator=true")
	}
	return conns, amqpConns, url
}

// TestEveryOperation runs the baseline and every operation and scenario for a moment at one
// and two clients over two gateways, and checks that each moved messages without an error and
// that the summary compares each with its baseline. It never looks at a rate's size.
func TestEveryOperation(t *testing.T) {
	t.Parallel()
	conns, amqpConns, url := gatewaysWithAMQP(t, 2)
	var progress bytes.Buffer
	rep, err := bench.Run(t.Context(), bench.Config{
		ConnectionStrings:     conns,
		AMQPConnectionStrings: amqpConns,
		AMQPPrefetch:          []int{5, 10},
		DatabaseURL:           url,
		Clients:               []int{1, 2},
		ScenarioClients:       []int{2},
		Duration:              250 * time.Millisecond,
		Operations:            []string{"all"},
		Subscriptions:         4,
		IdleSessions:          5,
		Backlog:               300,
		Inflight:              20,
		Queues:                3,
		BaselineClients:       2,
		Progress:              &progress,
	})
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}

	if got := names(rep.Baseline); !slices.Equal(got, []string{bench.BaselineInsert, bench.BaselineClaim}) {
		t.Fatalf("baseline rows %q; want insert then claim + complete", got)
	}
	var want []string
	for _, c := range []int{1, 2} {
		for _, op := range slices.Concat(bench.AllOperations, bench.AMQPOperations) {
			if op == bench.OpAMQPPeekLock {
				want = append(want, key(op, "prefetch 5", c), key(op, "prefetch 10", c))
				continue
			}
			want = append(want, key(op, "", c))
		}
	}
	for _, op := range bench.Scenarios {
		if op == bench.OpWake {
			want = append(want, key(op, "same gateway", 2), key(op, "other gateway", 2))
			continue
		}
		if op == bench.OpSQLSend {
			want = append(want, key(op, "relayed", 2), key(op, "commit to receive", 1))
			continue
		}
		want = append(want, key(op, "", 2))
	}
	var got []string
	for _, r := range rep.Results {
		variant := r.Variant
		if r.Prefetch > 0 {
			variant = "prefetch " + strconv.Itoa(r.Prefetch)
		}
		got = append(got, key(r.Operation, variant, r.Clients))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results\n%q\nwant\n%q", got, want)
	}

	for _, r := range slices.Concat(rep.Baseline, rep.Results) {
		what := key(r.Operation, r.Variant, r.Clients)
		if r.Messages == 0 || r.Iterations == 0 {
			t.Errorf("%s moved no messages: %+v", what, r)
		}
		if r.Errors != 0 {
			t.Errorf("%s: %d errors, the first: %s", what, r.Errors, r.FirstError)
		}
		if r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("%s: p50 %v, p99 %v", what, r.P50, r.P99)
		}
	}

	// Every rate is compared with its baseline; receive-and-delete also with the send at its
	// level; wake-ups are latencies.
	for _, r := range rep.Results {
		var against []string
		for _, q := range r.Ratios {
			against = append(against, q.Against)
			if q.Value <= 0 {
				t.Errorf("%s %d: ratio %v to %s", r.Operation, r.Clients, q.Value, q.Against)
			}
		}
		var want []string
		switch r.Operation {
		case bench.OpSend, bench.OpSendBatch, bench.OpTopicSend, bench.OpAMQPSend:
			want = []string{bench.BaselineInsert}
		case bench.OpSQLSend:
			if !r.Latency {
				want = []string{bench.BaselineInsert}
			}
		case bench.OpReceiveDelete:
			want = []string{bench.BaselineClaim, "send@" + strconv.Itoa(r.Clients)}
		case bench.OpWake:
			if !r.Latency {
				t.Errorf("wake row %q is not a latency row", r.Variant)
			}
		case bench.OpHTTPFloor:
			// A ceiling, not compared with the database.
		default:
			want = []string{bench.BaselineClaim}
		}
		if !slices.Equal(against, want) {
			t.Errorf("%s at %d clients is compared with %q; want %q", r.Operation, r.Clients, against, want)
		}
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"machine:", "database:  PostgreSQL", "pg-insert (baseline)", "pg-claim-complete (baseline)",
		"x pg-insert", "x pg-claim-complete", "x send@2", "wake, other gateway", "backlog (300 queued)",
		"http-floor (GET /healthz)", "the ceiling of a request a message", "µs/msg gw+db",
		"amqp-peek-lock + complete (prefetch 5)", "amqp-peek-lock + complete (prefetch 10)"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, table.String())
		}
	}
	t.Logf("summary:\n%s", table.String())
	var out bytes.Buffer
	if err := rep.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Baseline []struct {
			Operation      string  `json:"operation"`
			DatabaseMicros float64 `json:"database_cpu_us_per_msg"`
		} `json:"baseline"`
		Results []struct {
			Operation     string  `json:"operation"`
			MsgsPerSecond float64 `json:"msgs_per_s"`
			Requests      int64   `json:"requests"`
			Ratios        []struct {
				Against string  `json:"against"`
				Value   float64 `json:"value"`
			} `json:"ratios"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &decoded); err != nil {
		t.Fatalf("-o json output does not decode: %v\n%s", err, out.String())
	}
	if len(decoded.Baseline) != 2 || len(decoded.Results) != len(rep.Results) || len(decoded.Results[0].Ratios) != 1 {
		t.Errorf("JSON report: %s", out.String())
	}
	// The test database runs on this machine, so its CPU per message is known; a send made one
	// request a message.
	if b := decoded.Baseline[0]; b.DatabaseMicros <= 0 {
		t.Errorf("baseline %s: database CPU per message %v; want it measured", b.Operation, b.DatabaseMicros)
	}
	if r := decoded.Results[0]; r.Operation != bench.OpSend || r.Requests == 0 {
		t.Errorf("first result %+v; want a send that counted its requests", r)
	}
}

// TestWithoutBaseline: with no database URL the run measures the gateway alone and says that
// there are no ratios.
func TestWithoutBaseline(t *testing.T) {
	t.Parallel()
	conns, _ := gateways(t, 1)
	rep, err := bench.Run(t.Context(), bench.Config{
		ConnectionStrings: conns, Clients: []int{1}, Duration: 100 * time.Millisecond,
		Operations: []string{bench.OpSend, bench.OpReceiveDelete},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Baseline) != 0 || len(rep.Results) != 2 || rep.Results[0].Messages == 0 {
		t.Fatalf("report: %+v", rep)
	}
	// Receive-and-delete is still compared with sbgate's own send.
	if r := rep.Results[1].Ratios; len(r) != 1 || r[0].Against != "send@1" {
		t.Errorf("receive-delete ratios %+v; want one, to send@1", r)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "baseline:  none") {
		t.Errorf("summary does not say there is no baseline:\n%s", table.String())
	}
}

// TestLoadGateways: with LoadGateways 1 of 2, every phase's clients go through the first
// gateway, and the second one serves only the wake scenario's receivers on another gateway.
func TestLoadGateways(t *testing.T) {
	t.Parallel()
	var served atomic.Int64 // requests the second gateway served
	conns, _, url := gatewaysWrapped(t, 2, func(i int, h http.Handler) http.Handler {
		if i == 0 {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			h.ServeHTTP(w, r)
		})
	})
	run := func(ops ...string) *bench.Report {
		t.Helper()
		rep, err := bench.Run(t.Context(), bench.Config{
			ConnectionStrings: conns, DatabaseURL: url, LoadGateways: 1, BaselineClients: 2, Backlog: 300,
			Clients: []int{4}, Duration: 250 * time.Millisecond, Operations: ops,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := run(bench.OpSend, bench.OpSendBatch, bench.OpPeekLock, bench.OpReceiveDelete, bench.OpBacklog)
	if rep.LoadGateways != 1 || rep.Gateways != 2 {
		t.Errorf("report says %d of %d gateways loaded; want 1 of 2", rep.LoadGateways, rep.Gateways)
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the second gateway served %d requests of the operations; want none", n)
	}
	run(bench.OpWake)
	if served.Load() == 0 {
		t.Error("the second gateway served none of the wake scenario's receivers")
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  bench.Config
		want string
	}{
		{bench.Config{}, "connection string is required"},
		{bench.Config{ConnectionStrings: []string{"Endpoint=sb://h/;SharedAccessKeyName=k;SharedAccessKey=v"}, Operations: []string{"fly"}}, `unknown operation "fly"`},
		{bench.Config{ConnectionStrings: []string{"Endpoint=sb://h/;SharedAccessKeyName=k;SharedAccessKey=v"}, Clients: []int{0}}, "must be positive"},
		{bench.Config{ConnectionStrings: []string{"nonsense"}}, "invalid connection string"},
		{bench.Config{ConnectionStrings: []string{"Endpoint=sb://h/;SharedAccessKeyName=k;SharedAccessKey=v"}, LoadGateways: 2}, "cannot go through 2 of 1 gateways"},
		{bench.Config{ConnectionStrings: []string{"Endpoint=sb://h/;SharedAccessKeyName=k;SharedAccessKey=v"}, Operations: []string{bench.OpAMQPSend}}, "needs the gateways' AMQP connection strings"},
	} {
		_, err := bench.Run(t.Context(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v; want an error mentioning %q", tc.cfg, err, tc.want)
		}
	}
}

func names(rs []bench.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Operation)
	}
	return out
}

func key(op, variant string, clients int) string {
	if variant != "" {
		op += ", " + variant
	}
	return op + "@" + strconv.Itoa(clients)
}

// TestAMQPPeekLockLeavesNoLocks: an amqp-peek-lock phase gives back what its links prefetched
// and did not take, so nothing it leaves locked hides from the phases after it.
func TestAMQPPeekLockLeavesNoLocks(t *testing.T) {
	t.Parallel()
	conns, amqpConns, url := gatewaysWithAMQP(t, 1)
	rep, err := bench.Run(t.Context(), bench.Config{
		ConnectionStrings: conns, AMQPConnectionStrings: amqpConns, AMQPPrefetch: []int{50},
		Clients: []int{4}, Duration: 200 * time.Millisecond, Operations: []string{bench.OpAMQPPeekLock},
		Queue: "nolocks", Disposable: true, // keep the queue to look at
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Messages == 0 || rep.Results[0].Errors != 0 {
		t.Fatalf("report: %+v", rep.Results)
	}
	pool, err := db.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var left, locked int
	if err := pool.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE lock_token IS NOT NULL AND visible_at > now())
		FROM messages m JOIN entities e ON e.id = m.entity_id WHERE e.path = 'nolocks-amqp-recv'`).Scan(&left, &locked); err != nil {
		t.Fatal(err)
	}
	if left == 0 || locked != 0 {
		t.Errorf("after the phase the queue holds %d messages, %d of them locked; want some, none locked", left, locked)
	}
}
