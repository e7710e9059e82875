// Package bench is sbgate's load tool: it drives one or more running gateways over HTTP, through
// the request constructors generated from openapi.yaml, and over AMQP as the Service Bus SDKs do
// (amqp.go), with N concurrent clients per operation,
// and reports msgs/s and latency percentiles. Every figure comes with its ratio to a baseline
// measured in the same run on the same machine: what the gateways' PostgreSQL does with nothing in
// front of it (a one-row INSERT per commit for sends, a naive SKIP LOCKED claim + delete for
// receives). It is the instrument speed is measured with; tests never time anything.
//
// The tool shares the machine with the gateways and PostgreSQL, so what it spends per request is
// taken from what it measures: requests are shallow copies of templates built once per worker
// (constant bodies are encoded once, never per request), responses are read into reused buffers
// or discarded, and connections are kept alive.
package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbgate/sbgate/api/client"
	"github.com/sbgate/sbgate/sas"
)

// Operations every concurrency level runs: the single and batch sends, and the receives that
// drain what was sent.
const (
	OpSend      = "send"
	OpSendBatch = "send-batch" // Config.BatchSize messages per request
	// OpPeekLock peek-locks one message and completes it: one message, two requests.
	OpPeekLock = "peek-lock"
	// OpBatchSettle peek-locks up to Config.SettleBatch messages with one $batch request and
	// completes them all with one $settle request.
	OpBatchSettle   = "batch-settle"
	OpReceiveDelete = "receive-delete" // receive-and-delete, one message a request
)

// AllOperations is the default run, in the order it runs at each level: the sends, then the
// receives, which drain a queue of their own (topped up before each).
var AllOperations = []string{OpSend, OpSendBatch, OpPeekLock, OpBatchSettle, OpReceiveDelete}

// Config says what to measure.
type Config struct {
	// ConnectionStrings name the gateways, all serving one database; the clients of every phase
	// are spread over them round-robin. At least one is required.
	ConnectionStrings []string
	// DatabaseURL is the gateways' PostgreSQL, which the baseline measures on its own (on a
	// scratch table it creates and drops). Empty: no baseline, and no ratios.
	DatabaseURL string
	// Queue prefixes the entities the run creates; default "bench-<random>".
	Queue string
	// Clients lists the concurrency levels; each operation runs once per level.
	Clients []int
	// ScenarioClients are the levels the scenarios (Scenarios) run at; default Clients.
	ScenarioClients []int
	// Duration is how long each phase runs.
	Duration time.Duration
	// MessageSize is the body size in bytes (default 1024).
	MessageSize int
	// BatchSize is the number of messages per send-batch request (default 10).
	BatchSize int
	// SettleBatch is how many messages a batch-settle iteration locks and settles (default 100).
	SettleBatch int
	// Operations to run, from AllOperations, AMQPOperations and Scenarios; "all" is every one
	// (the AMQP operations only with AMQPConnectionStrings).
	Operations []string
	// LoadGateways is how many of the gateways, the first ones, the clients of every phase go
	// through (0: all of them). The others take part only where a second gateway is the point:
	// the wake scenario's receivers on another gateway than the sender. With every gateway on
	// one machine, spreading the load over processes that share its cores measures that
	// sharing rather than the broker.
	LoadGateways int
	// AMQPConnectionStrings name the same gateways' AMQP listeners, as sbgate prints them
	// (UseDevelopmentEmulator=true for plain AMQP); the AMQP operations need them. Clients are
	// spread over them round-robin.
	AMQPConnectionStrings []string
	// AMQPPrefetch lists the link credits of the amqp-peek-lock receivers (default 20): the
	// operation runs once per credit at each concurrency level.
	AMQPPrefetch []int
	// Insecure skips TLS certificate checks (for a self-signed https broker).
	Insecure bool
	// Subscriptions is how many subscriptions the topic-send scenario's topic has (default 100).
	Subscriptions int
	// IdleSessions is how many sessions with state but no messages the session scenario's
	// queue holds besides the active ones (default 10,000; negative for none).
	IdleSessions int
	// Backlog is how many messages the backlog scenario's queue holds (default 1,000,000).
	Backlog int
	// Inflight is how many locks the inflight scenario holds at the head of its queue (default
	// 10,000).
	Inflight int
	// Queues is how many queues the many-queues scenario spreads its clients over (default 100).
	Queues int
	// WakeReceivers is how many receivers wait in the wake scenario; default the level's client
	// count.
	WakeReceivers int
	// BaselineClients is how many connections each baseline phase uses (default 16).
	BaselineClients int
	// Disposable says the gateways and their database are thrown away after the run (sbgate
	// bench started them), so the entities it created are not deleted one by one.
	Disposable bool
	// GatewayPIDs are the gateways' processes when they run on this machine (sbgate bench
	// started them): the report shows the CPU they used in each phase.
	GatewayPIDs []int
	// Setup describes the gateways for the report, e.g. "2 gateways started by sbgate bench".
	Setup string
	// ProfileDir, when set, receives profiles of every phase (profile.go): a CPU profile of
	// each gateway that serves Go's profiles at PprofAddrs (host:port, as sbgate serve
	// -pprof-listen), and what PostgreSQL spent per statement when the database has
	// pg_stat_statements loaded.
	ProfileDir string
	PprofAddrs []string
	// Progress receives a line per second while a phase runs; nil for none.
	Progress io.Writer
}

// Result is one operation at one concurrency level.
type Result struct {
	Operation string
	// Variant tells apart rows of one operation, e.g. the wake scenario's "other gateway".
	Variant    string
	Clients    int
	Messages   int64
	Iterations int64 // of the operation: a peek-lock iteration is two requests
	Errors     int64
	FirstError string
	Elapsed    time.Duration
	// P50 and P99 are per iteration; for a latency row (wake) they are the measured latency.
	P50 time.Duration
	P99 time.Duration
	// Requests is how many HTTP requests the phase's iterations made (0 over AMQP, and for the
	// baseline).
	Requests int64
	// Prefetch is the link credit of an amqp-peek-lock row's receivers.
	Prefetch int
	// Drained says a receive phase ran out of messages before its time, DrainedAfter when the
	// first client found its queue empty.
	Drained      bool
	DrainedAfter time.Duration
	// Latency marks a row whose point is its latency, not its rate.
	Latency bool
	// CPU is what the phase kept busy, in cores on average.
	CPU CPUUse
	// Ratios compare the rate with the baselines; filled in by the report.
	Ratios []Ratio
	// ServerCPU compares the CPU the gateways and PostgreSQL spent per message with what
	// PostgreSQL alone spent per message in the baseline the rate is compared with (its first
	// ratio); RequestCPU the gateways' CPU per HTTP request with theirs per request in the
	// http-floor phase. Filled in by the report; zero when they cannot be known.
	ServerCPU  Ratio
	RequestCPU Ratio
}

// Ratio is a rate divided by the rate of a baseline of the same run.
type Ratio struct {
	// Against names the baseline: a baseline's Operation, or "send@16" for sbgate's own send
	// at 16 clients.
	Against string
	Value   float64
}

// CPUPerMessage is the CPU the gateways and their PostgreSQL spent per message moved, each
// negative when unknown.
func (r Result) CPUPerMessage() (gateways, database time.Duration) {
	return r.perMessage(r.CPU.Gateways), r.perMessage(r.CPU.Database)
}

// GatewayCPUPerRequest is the CPU the gateways spent per HTTP request; negative when unknown or
// the phase made none.
func (r Result) GatewayCPUPerRequest() time.Duration {
	if r.CPU.Gateways < 0 || r.Requests <= 0 {
		return -1
	}
	return time.Duration(r.CPU.Gateways * r.Elapsed.Seconds() / float64(r.Requests) * float64(time.Second))
}

// perMessage turns cores kept busy over the phase into CPU time per message.
func (r Result) perMessage(cores float64) time.Duration {
	if cores < 0 || r.Messages <= 0 {
		return -1
	}
	return time.Duration(cores * r.Elapsed.Seconds() / float64(r.Messages) * float64(time.Second))
}

// Rate is messages per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

func (c *Config) setDefaults() error {
	if len(c.ConnectionStrings) == 0 {
		return errors.New("bench: a connection string is required")
	}
	if n := c.LoadGateways; n < 0 || n > len(c.ConnectionStrings) {
		return fmt.Errorf("bench: the load cannot go through %d of %d gateways", n, len(c.ConnectionStrings))
	}
	if c.Queue == "" {
		c.Queue = "bench-" + hex.EncodeToString(randomBytes(4))
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{16}
	}
	if len(c.ScenarioClients) == 0 {
		c.ScenarioClients = c.Clients
	}
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.MessageSize <= 0 {
		c.MessageSize = 1024
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 10
	}
	if c.SettleBatch <= 0 {
		c.SettleBatch = 100
	}
	if c.Subscriptions <= 0 {
		c.Subscriptions = 100
	}
	if c.IdleSessions == 0 {
		c.IdleSessions = 10000
	}
	if c.Backlog <= 0 {
		c.Backlog = 1_000_000
	}
	if c.Inflight <= 0 {
		c.Inflight = 10_000
	}
	if c.Queues <= 0 {
		c.Queues = 100
	}
	if c.BaselineClients <= 0 {
		c.BaselineClients = 16
	}
	if len(c.AMQPPrefetch) == 0 {
		c.AMQPPrefetch = []int{20}
	}
	for _, n := range c.AMQPPrefetch {
		if n < 1 {
			return fmt.Errorf("bench: AMQP prefetch must be positive, got %d", n)
		}
	}
	if len(c.Operations) == 0 {
		c.Operations = AllOperations
	}
	if slices.Contains(c.Operations, "all") {
		c.Operations = slices.Concat(AllOperations, Scenarios)
		if len(c.AMQPConnectionStrings) > 0 {
			c.Operations = slices.Concat(AllOperations, AMQPOperations, Scenarios)
		}
	}
	known := slices.Concat(AllOperations, AMQPOperations, Scenarios)
	for _, op := range c.Operations {
		if !slices.Contains(known, op) {
			return fmt.Errorf("bench: unknown operation %q (want %s, or all)", op, strings.Join(known, ", "))
		}
		if slices.Contains(AMQPOperations, op) && len(c.AMQPConnectionStrings) == 0 {
			return fmt.Errorf("bench: %s needs the gateways' AMQP connection strings", op)
		}
	}
	for _, n := range slices.Concat(c.Clients, c.ScenarioClients) {
		if n < 1 {
			return fmt.Errorf("bench: client counts must be positive, got %d", n)
		}
	}
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// gateway is one broker the tool talks to.
type gateway struct {
	server string // base URL, ending in /
	auth   string // Authorization header value: a namespace token valid for the whole run
	http   *http.Client
	api    *client.ClientWithResponses // for set-up, and requests whose URL changes every time
}

// sign is a request editor for the generated client.
func (g *gateway) sign(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", g.auth)
	return nil
}

// template finishes a request made by a generated constructor so that do can send copies of it.
func (g *gateway) template(req *http.Request, err error) (*http.Request, error) {
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", g.auth)
	return req, nil
}

// do sends a copy of the template t: same URL and headers (shared, never written), a fresh reader
// over its constant body.
func (g *gateway) do(ctx context.Context, t *http.Request) (*http.Response, error) {
	req := t.WithContext(ctx)
	if t.GetBody != nil {
		body, err := t.GetBody()
		if err != nil {
			return nil, err
		}
		req.Body = body
	}
	return g.http.Do(req)
}

// doBody sends a copy of the template t with body; body must not change until the response is
// read.
func (g *gateway) doBody(ctx context.Context, t *http.Request, body []byte) (*http.Response, error) {
	req := t.WithContext(ctx)
	req.Body = io.NopCloser(&sliceReader{b: body})
	req.ContentLength = int64(len(body))
	req.GetBody = nil
	return g.http.Do(req)
}

// doPath sends a copy of the template t to another path of the same gateway (an escaped path,
// such as the path of a Location header).
func (g *gateway) doPath(ctx context.Context, t *http.Request, escapedPath string) (*http.Response, error) {
	u := *t.URL
	u.RawPath = escapedPath
	p, err := url.PathUnescape(escapedPath)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", escapedPath, err)
	}
	u.Path = p
	req := t.WithContext(ctx)
	req.URL = &u
	return g.http.Do(req)
}

// sliceReader reads a byte slice; unlike bytes.Reader it needs no constructor call per request.
type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// runner holds what every phase shares.
type runner struct {
	cfg     Config
	gws     []*gateway
	amqpGws []*amqpGateway
	body    []byte // one message body
	// batch is the send-batch request body; fill is the body of the larger batches that fill
	// queues before receive phases, fillCount messages each.
	batch, fill []byte
	fillCount   int
	transport   *http.Transport
	// prof takes each phase's profiles (nil: none); label names a result as the report does.
	prof  *profiler
	label func(Result) string
	// postmaster is the gateways' PostgreSQL server process when it runs on this machine (0:
	// elsewhere, or no database URL), whose CPU the report shows.
	postmaster int

	sink *queue // what the send phases send to; purged after each
	work *queue // what the plain receive phases drain; topped up before each
	// amqpWork is what amqp-peek-lock drains: a queue of its own, so that messages an AMQP
	// phase leaves locked never hide from the HTTP receives.
	amqpWork *queue

	// rates holds the best rate measured per operation so far, to size the next fills.
	ratesMu sync.Mutex
	rates   map[string]float64
	// baseline holds the baseline's results, once measured.
	baseline []Result

	// counter numbers topic sends, to spread them over the subscriptions' filters.
	counter atomic.Int64
	// sessions is the session scenario's queue.
	sessions *queue
	// isSetUp says which scenarios have their entities.
	isSetUp map[string]bool
	// backlog, inflight, manyQueues and wakeQueue are the scenarios' queues.
	backlog    *queue
	inflight   *inflightState
	manyQueues []*queue
	wakeQueue  *queue
	// done is the results so far, for the fills to size themselves on.
	doneMu sync.Mutex
	done   []Result
	// created lists the entities to delete at the end.
	createdMu sync.Mutex
	created   []string
}

// queue is an entity the run created and how many messages the run believes wait in it.
type queue struct {
	name string
	left atomic.Int64
}

// Run measures the baseline (when cfg.DatabaseURL is set), then every operation at every
// concurrency level, and returns the report of what ran. On an error the report holds what ran
// before it.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	rep := newReport(cfg)
	r := &runner{cfg: cfg, rates: map[string]float64{}, isSetUp: map[string]bool{}, label: rep.Label}
	if err := r.connect(); err != nil {
		return rep, err
	}
	defer r.transport.CloseIdleConnections()
	r.body = make([]byte, cfg.MessageSize)
	for i := range r.body {
		r.body[i] = 'x'
	}
	r.batch = batchBody(r.body, cfg.BatchSize)
	// A fill request carries as many messages as fit well under the default 256 KB limit of a
	// batch, at most 100.
	r.fillCount = max(1, min(100, 200_000/(cfg.MessageSize+64)))
	r.fill = batchBody(r.body, r.fillCount)

	if cfg.ProfileDir != "" {
		prof, err := newProfiler(ctx, cfg, r.logf)
		if err != nil {
			return rep.finish(), err
		}
		defer prof.close(context.WithoutCancel(ctx))
		r.prof = prof
	}
	if cfg.DatabaseURL != "" {
		r.postmaster = localPostmaster(ctx, cfg.DatabaseURL)
		base, err := r.runBaseline(ctx, &rep.Machine)
		rep.Baseline = base
		r.baseline = base
		if err != nil {
			return rep.finish(), err
		}
	}
	defer r.tearDown()
	if err := r.setUp(ctx); err != nil {
		return rep.finish(), err
	}
	for _, p := range r.plan() {
		res, err := r.runPhase(ctx, p)
		rep.Results = append(rep.Results, res...)
		if err != nil {
			return rep.finish(), err
		}
	}
	return rep.finish(), nil
}

// planned is one phase: an operation at a concurrency level (and for amqp-peek-lock, a link
// credit).
type planned struct {
	op       string
	clients  int
	prefetch int
}

// plan is the phases in the order they run: at each level every basic operation (amqp-peek-lock
// once per prefetch), then at each scenario level every scenario.
func (r *runner) plan() []planned {
	var out []planned
	for _, c := range r.cfg.Clients {
		for _, op := range r.cfg.Operations {
			switch {
			case op == OpAMQPPeekLock:
				for _, p := range r.cfg.AMQPPrefetch {
					out = append(out, planned{op, c, p})
				}
			case !slices.Contains(Scenarios, op):
				out = append(out, planned{op, c, 0})
			}
		}
	}
	for _, c := range r.cfg.ScenarioClients {
		for _, op := range r.cfg.Operations {
			if slices.Contains(Scenarios, op) {
				out = append(out, planned{op, c, 0})
			}
		}
	}
	return out
}

// connect prepares one client per gateway, sharing one transport.
func (r *runner) connect() error {
	maxClients := slices.Max(slices.Concat(r.cfg.Clients, r.cfg.ScenarioClients, []int{r.cfg.WakeReceivers}))
	// Every client of a phase may hold a connection to one gateway, and the wake scenario has a
	// sender beside its receivers.
	perHost := maxClients + setupConcurrency + 1
	r.transport = &http.Transport{
		MaxIdleConns:        perHost * len(r.cfg.ConnectionStrings),
		MaxIdleConnsPerHost: perHost,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: r.cfg.Insecure}, //nolint:gosec // opt-in for self-signed brokers
	}
	hc := &http.Client{Transport: r.transport}
	for _, s := range r.cfg.ConnectionStrings {
		cs, err := sas.ParseConnectionString(s, "http")
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		g := &gateway{server: cs.Endpoint.String(), auth: cs.Token(time.Now().Add(24 * time.Hour)), http: hc}
		api, err := client.NewClientWithResponses(g.server, client.WithHTTPClient(hc), client.WithRequestEditorFn(g.sign))
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		g.api = api
		r.gws = append(r.gws, g)
	}
	for _, s := range r.cfg.AMQPConnectionStrings {
		g, err := parseAMQPConnectionString(s, r.cfg.Insecure)
		if err != nil {
			return fmt.Errorf("bench: AMQP: %w", err)
		}
		r.amqpGws = append(r.amqpGws, g)
	}
	return nil
}

// loaded is how many gateways, the first ones, the phases' clients go through.
func (r *runner) loaded() int { return loadGateways(r.cfg) }

// loadGateways is Config.LoadGateways within the gateways there are.
func loadGateways(cfg Config) int {
	if n := cfg.LoadGateways; n > 0 && n < len(cfg.ConnectionStrings) {
		return n
	}
	return len(cfg.ConnectionStrings)
}

// gw is the gateway client w of a phase talks to.
func (r *runner) gw(w int) *gateway { return r.gws[w%r.loaded()] }

// iteration does one iteration of an operation and returns how many messages it moved.
type iteration func(ctx context.Context) (int, error)

// errEmpty means a receive found its queue empty.
var errEmpty = errors.New("queue empty")

// errIdle means a receive waited and got nothing, though its queue should still hold messages
// (the broker was slow to deliver): the iteration is neither counted nor timed, and the client
// goes on.
var errIdle = errors.New("nothing received yet")

// emptySince is errEmpty noticed some time after the queue was last seen with a message: a
// receiver that waits for messages to arrive takes its queue for empty once it waited long
// enough, and at is when that wait began.
type emptySince struct{ at time.Time }

func (e emptySince) Error() string        { return errEmpty.Error() }
func (e emptySince) Is(target error) bool { return target == errEmpty }

// measure runs newWorker(w)'s iterations on clients goroutines for the configured duration.
// Iterations run under ctx, not under a context that ends with the phase.
func (r *runner) measure(ctx context.Context, res Result, newWorker func(w int) (iteration, error)) (Result, error) {
	workers := make([]iteration, res.Clients)
	for w := range workers {
		it, err := newWorker(w)
		if err != nil {
			return res, fmt.Errorf("bench: %s: %w", res.Operation, err)
		}
		workers[w] = it
	}
	var t phaseTally
	latencies := make([][]time.Duration, res.Clients)
	var wg sync.WaitGroup
	stopProfile := r.prof.start(ctx, res, r.label(res), r.cfg.Duration)
	stopCPU := r.cpuMeasure()
	start := time.Now()
	deadline := start.Add(r.cfg.Duration)
	stopProgress := r.progress(res.Operation, res.Clients, start, &t.messages)
	for w, it := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			latencies[w] = t.work(ctx, it, start, deadline)
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	stopCPU(&res)
	stopProgress()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.Messages, res.Iterations, res.Errors = t.messages.Load(), t.iterations.Load(), t.errs.Load()
	res.Requests = res.Iterations * int64(requestsPerIteration(res.Operation))
	if at := t.drainedAt.Load(); at > 0 {
		res.Drained, res.DrainedAfter = true, time.Duration(at)
	}
	if p := t.firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	res.P50, res.P99 = percentiles(slices.Concat(latencies...))
	stopProfile(res)
	r.noteRate(res)
	return res, nil
}

// phaseTally is what the workers of a phase count, all at once.
type phaseTally struct {
	messages, iterations, errs atomic.Int64
	drainedAt                  atomic.Int64 // nanoseconds after start, 0: not drained
	firstErr                   atomic.Pointer[string]
}

// work runs it until deadline, ctx's end or the queue found empty, counting into t, and
// returns the latencies of its iterations that succeeded.
func (t *phaseTally) work(ctx context.Context, it iteration,
	start, deadline time.Time) []time.Duration {
	lat := make([]time.Duration, 0, 1024)
	failures := 0
	// An iteration begun before the deadline runs to its end and counts: the phase
	// lasts until the last one ends. Cutting iterations short would waste their work
	// (and make a phase shorter than one slow iteration measure nothing).
	for t0 := time.Now(); t0.Before(deadline); t0 = time.Now() {
		n, err := it(ctx)
		if ctx.Err() != nil {
			return lat
		}
		if errors.Is(err, errEmpty) {
			t.messages.Add(int64(n))
			at := time.Now()
			if late, ok := err.(emptySince); ok {
				at = late.at
			}
			t.drainedAt.CompareAndSwap(0, int64(max(at.Sub(start), 1)))
			return lat
		}
		if errors.Is(err, errIdle) {
			continue
		}
		if err != nil {
			t.errs.Add(1)
			msg := err.Error()
			t.firstErr.CompareAndSwap(nil, &msg)
			failures++
			backOff(ctx, failures)
			continue
		}
		failures = 0
		lat = append(lat, time.Since(t0))
		t.iterations.Add(1)
		t.messages.Add(int64(n))
	}
	return lat
}

// requestsPerIteration is how many HTTP requests an iteration of op makes.
func requestsPerIteration(op string) int {
	switch op {
	case OpSend, OpSendBatch, OpReceiveDelete, OpTopicSend, OpHTTPFloor:
		return 1
	case OpPeekLock, OpBatchSettle, OpBacklog, OpInflight, OpManyQueues:
		return 2 // the lock, and the settlement
	case OpSession:
		return 3 // accept, receive, release
	}
	return 0 // over AMQP, or straight to PostgreSQL
}

// backOff waits a little after the failures-th failure in a row, up to 100 ms, so that a
// gateway answering every request with an error at once does not have the tool spin on the
// cores it shares with it.
func backOff(ctx context.Context, failures int) {
	t := time.NewTimer(time.Duration(min(failures, 100)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// percentiles sorts d and returns its median and 99th percentile.
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(d)
	return percentile(d, 0.50), percentile(d, 0.99)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// noteRate remembers the best rate of an operation (with its prefetch), to size the fills of
// its next phases.
func (r *runner) noteRate(res Result) {
	r.ratesMu.Lock()
	defer r.ratesMu.Unlock()
	k := rateKey(res.Operation, res.Prefetch)
	r.rates[k] = max(r.rates[k], res.Rate())
}

// rate is the best rate of op (with prefetch, for amqp-peek-lock) so far, 0 before its first.
func (r *runner) rate(op string, prefetch int) float64 {
	r.ratesMu.Lock()
	defer r.ratesMu.Unlock()
	return r.rates[rateKey(op, prefetch)]
}

func rateKey(op string, prefetch int) string {
	if prefetch > 0 {
		return op + "/" + strconv.Itoa(prefetch)
	}
	return op
}

// progress prints a line a second until the returned function is called.
func (r *runner) progress(op string, clients int, start time.Time, messages *atomic.Int64) func() {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				el := time.Since(start)
				n := messages.Load()
				fmt.Fprintf(r.cfg.Progress, "  %-18s %4d clients %6.1fs %9d msgs %9.0f msgs/s\n",
					op, clients, el.Seconds(), n, float64(n)/el.Seconds())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (r *runner) logf(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, format+"\n", args...)
	}
}

// expect drains and closes resp and returns an error unless it has the status.
func expect(resp *http.Response, status int) error {
	defer drain(resp)
	if resp.StatusCode != status {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	return nil
}

// drain reads and closes a body so the connection is reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// locationPath is the escaped path of a settlement URL from a Location header
// (scheme://host/{entity}/messages/{seq}/{token}).
func locationPath(loc string) (string, error) {
	i := strings.Index(loc, "://")
	if i < 0 {
		return "", fmt.Errorf("peek-lock: bad Location %q", loc)
	}
	j := strings.IndexByte(loc[i+3:], '/')
	if j < 0 {
		return "", fmt.Errorf("peek-lock: bad Location %q", loc)
	}
	return loc[i+3+j:], nil
}
