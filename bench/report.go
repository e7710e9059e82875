package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is a run: where it ran, its baseline and its results, each result with its ratios to
// the baselines.
type Report struct {
	Started time.Time
	Elapsed time.Duration
	Machine Machine
	// Broker names what was measured: "" for sbgate, else another broker (RunRabbitMQ), whose
	// processes' CPU is in the gateways' column.
	Broker string
	// RabbitMQWindow is the publishers' window of unconfirmed messages in a RabbitMQ run.
	RabbitMQWindow int
	// Setup describes the gateways (Config.Setup); Gateways is how many there were, and
	// LoadGateways how many of them the phases' clients went through.
	Setup        string
	Gateways     int
	LoadGateways int
	// What every phase did.
	Duration    time.Duration
	MessageSize int
	BatchSize   int
	SettleBatch int
	// AMQPPrefetch lists the amqp-peek-lock receivers' link credits.
	AMQPPrefetch []int
	Backlog      int
	Inflight     int
	Queues       int
	Subs         int
	IdleSess     int
	// Baseline is PostgreSQL alone (BaselineInsert, BaselineClaim); empty without a database
	// URL.
	Baseline []Result
	Results  []Result
}

// Machine names what the run ran on.
type Machine struct {
	CPU         string     `json:"cpu"`
	Cores       int        `json:"cores"` // physical cores, 0 when unknown
	CPUs        int        `json:"cpus"`  // logical CPUs
	MemoryBytes int64      `json:"memory_bytes"`
	LoadStart   [3]float64 `json:"load_average_start"`
	LoadEnd     [3]float64 `json:"load_average_end"`
	GoVersion   string     `json:"go_version"`
	PostgreSQL  string     `json:"postgresql,omitempty"`
	Durability  string     `json:"durability,omitempty"`
}

func newReport(cfg Config) *Report {
	return &Report{
		Started: time.Now(), Machine: describeMachine(), Setup: cfg.Setup, Gateways: len(cfg.ConnectionStrings),
		LoadGateways: loadGateways(cfg),
		Duration:     cfg.Duration, MessageSize: cfg.MessageSize, BatchSize: cfg.BatchSize, SettleBatch: cfg.SettleBatch, AMQPPrefetch: cfg.AMQPPrefetch,
		Backlog: cfg.Backlog, Inflight: cfg.Inflight, Queues: cfg.Queues, Subs: cfg.Subscriptions, IdleSess: cfg.IdleSessions,
	}
}

// finish stamps the end of the run and works out the ratios.
func (rep *Report) finish() *Report {
	rep.Elapsed = time.Since(rep.Started)
	rep.Machine.LoadEnd = loadAverage()
	for i := range rep.Results {
		r := &rep.Results[i]
		r.Ratios = rep.ratios(*r)
		r.ServerCPU = rep.serverCPU(*r)
		r.RequestCPU = rep.requestCPU(*r)
	}
	return rep
}

// serverCPU compares the CPU res cost the gateways and PostgreSQL per message with the CPU
// PostgreSQL alone spent per message in the baseline res's rate is compared with.
func (rep *Report) serverCPU(res Result) Ratio {
	gw, db := res.CPUPerMessage()
	if res.Latency || gw < 0 || db < 0 || len(res.Ratios) == 0 {
		return Ratio{}
	}
	for _, b := range rep.Baseline {
		if b.Operation != res.Ratios[0].Against {
			continue
		}
		if _, base := b.CPUPerMessage(); base > 0 {
			return Ratio{Against: b.Operation, Value: float64(gw+db) / float64(base)}
		}
	}
	return Ratio{}
}

// requestCPU compares the gateways' CPU per HTTP request of res with theirs in the http-floor
// phase at the same client count (or, without one, the first http-floor phase).
func (rep *Report) requestCPU(res Result) Ratio {
	per := res.GatewayCPUPerRequest()
	if res.Operation == OpHTTPFloor || per <= 0 {
		return Ratio{}
	}
	var floor time.Duration
	for _, f := range rep.Results {
		if f.Operation != OpHTTPFloor {
			continue
		}
		if p := f.GatewayCPUPerRequest(); p > 0 && (floor == 0 || f.Clients == res.Clients) {
			floor = p
			if f.Clients == res.Clients {
				break
			}
		}
	}
	if floor <= 0 {
		return Ratio{}
	}
	return Ratio{Against: OpHTTPFloor, Value: float64(per) / float64(floor)}
}

// sendOps are compared with a one-row INSERT per commit, receiveOps with the naive claim +
// complete.
var (
	sendOps    = []string{OpSend, OpSendBatch, OpTopicSend, OpSQLSend, OpAMQPSend}
	receiveOps = []string{OpPeekLock, OpBatchSettle, OpReceiveDelete, OpSession, OpBacklog, OpInflight, OpManyQueues, OpAMQPPeekLock}
)

// ratios compares res with its baseline and, for receive-and-delete, with sbgate's own single
// send at the same client count.
func (rep *Report) ratios(res Result) []Ratio {
	if res.Latency {
		return nil // a latency row has no rate to compare
	}
	var out []Ratio
	against := func(name string, rate float64) {
		if rate > 0 {
			out = append(out, Ratio{Against: name, Value: res.Rate() / rate})
		}
	}
	for _, b := range rep.Baseline {
		if (b.Operation == BaselineInsert && slices.Contains(sendOps, res.Operation)) ||
			(b.Operation == BaselineClaim && slices.Contains(receiveOps, res.Operation)) {
			against(b.Operation, b.Rate())
		}
	}
	if res.Operation == OpReceiveDelete {
		for _, s := range rep.Results {
			if s.Operation == OpSend && s.Clients == res.Clients {
				against(fmt.Sprintf("send@%d", s.Clients), s.Rate())
			}
		}
	}
	return out
}

// Label names a result in the summary, with the parameters that say what it measured.
func (rep *Report) Label(r Result) string {
	switch r.Operation {
	case BaselineInsert, BaselineClaim:
		return r.Operation + " (baseline)"
	case OpSendBatch:
		return fmt.Sprintf("send-batch (%d a request)", rep.BatchSize)
	case OpPeekLock:
		return "peek-lock + complete"
	case OpAMQPPeekLock:
		return fmt.Sprintf("amqp-peek-lock + complete (prefetch %d)", r.Prefetch)
	case OpBatchSettle:
		return fmt.Sprintf("batch-settle (%d a $batch)", rep.SettleBatch)
	case OpTopicSend:
		return fmt.Sprintf("topic-send (%d subscriptions)", rep.Subs)
	case OpSession:
		return fmt.Sprintf("session (%s idle)", thousands(float64(max(rep.IdleSess, 0))))
	case OpBacklog:
		return fmt.Sprintf("backlog (%s queued)", thousands(float64(rep.Backlog)))
	case OpInflight:
		return fmt.Sprintf("inflight (%s locked)", thousands(float64(rep.Inflight)))
	case OpManyQueues:
		return fmt.Sprintf("many-queues (%d queues)", rep.Queues)
	case OpHTTPFloor:
		return "http-floor (GET /healthz)"
	case OpRabbitPublish:
		return fmt.Sprintf("rabbitmq-publish (window %d)", rep.RabbitMQWindow)
	case OpRabbitConsume:
		return fmt.Sprintf("rabbitmq-consume + ack (prefetch %d)", r.Prefetch)
	}
	if r.Variant != "" {
		return r.Operation + ", " + r.Variant
	}
	return r.Operation
}

// WriteTable prints the report for a terminal: a header naming the machine, then one row per
// result with msgs/s, latency and ratios.
func (rep *Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m := rep.Machine
	fmt.Fprintf(bw, "sbgate bench, %s, took %s\n", rep.Started.UTC().Format("2006-01-02 15:04 UTC"), rep.Elapsed.Round(time.Second))
	fmt.Fprintf(bw, "machine:   %s\n", m.summary())
	if m.PostgreSQL != "" {
		fmt.Fprintf(bw, "database:  %s (%s)\n", m.PostgreSQL, m.Durability)
	}
	setup := rep.Setup
	if setup == "" {
		setup = fmt.Sprintf("%d given", rep.Gateways)
	}
	if rep.Broker != "" {
		fmt.Fprintf(bw, "broker:    %s; the gw CPU columns are its processes'\n", setup)
	} else if rep.LoadGateways < rep.Gateways {
		fmt.Fprintf(bw, "gateways:  %s; clients spread round-robin over the first %d, the others serve only the wake scenario's receivers on another gateway\n", setup, rep.LoadGateways)
	} else {
		fmt.Fprintf(bw, "gateways:  %s; clients spread over them round-robin\n", setup)
	}
	if rep.Broker != "" {
		fmt.Fprintf(bw, "phases:    %s each, %d-byte persistent messages on a durable classic queue; p50 and p99 per publish call "+
			"(it waits only when its window is full) or per delivery taken and acknowledged\n", rep.Duration, rep.MessageSize)
		fmt.Fprintln(bw, "cpu:       cores kept busy by the load tool / the broker (its processes and their children) / - / the whole machine")
		fmt.Fprintln(bw, "µs/msg:    the broker's CPU per message")
	} else {
		fmt.Fprintf(bw, "phases:    %s each, %d-byte messages; p50 and p99 per iteration (peek-lock + complete is one)\n",
			rep.Duration, rep.MessageSize)
		fmt.Fprintln(bw, "cpu:       cores kept busy by the load tool / the gateways / their PostgreSQL / the whole machine, with whatever else runs on it")
		fmt.Fprintln(bw, "µs/msg:    CPU per message of the gateways + their PostgreSQL (http-floor: per request; the baseline: PostgreSQL alone)")
		fmt.Fprintln(bw, "ratio:     msgs/s over the named row's: pg-insert for sends, pg-claim-complete for receives, send@N is sbgate's send at N clients;")
		fmt.Fprintln(bw, "           cpu/msg: gateways' + PostgreSQL's CPU per message over PostgreSQL's alone in that baseline;")
		fmt.Fprintln(bw, "           gw cpu/req: the gateways' CPU per HTTP request over theirs per request in http-floor")
		if len(rep.Baseline) == 0 {
			fmt.Fprintln(bw, "baseline:  none (no database URL given), so no ratios")
		}
	}
	fmt.Fprintln(bw)

	rows := slices.Concat(rep.Baseline, rep.Results)
	width := len("operation")
	for _, r := range rows {
		width = max(width, len(rep.Label(r)))
	}
	fmt.Fprintf(bw, "%-*s  %7s  %10s  %9s  %9s  %9s  %6s  %19s  %12s  %s\n", width, "operation", "clients", "msgs", "msgs/s", "p50", "p99", "errors", "cpu tool/gw/db/all", "µs/msg gw+db", "ratio")
	var problems []string
	for _, r := range rows {
		rate := thousands(r.Rate())
		if r.Latency {
			rate = "-"
		}
		fmt.Fprintf(bw, "%-*s  %7d  %10s  %9s  %9s  %9s  %6d  %19s  %12s  %s\n", width, rep.Label(r), r.Clients, thousands(float64(r.Messages)),
			rate, showLatency(r.P50), showLatency(r.P99), r.Errors, cpuText(r), cpuPerMessageText(r), ratioText(r))
		if r.FirstError != "" {
			problems = append(problems, fmt.Sprintf("%s at %d clients: %d errors, the first: %s", rep.Label(r), r.Clients, r.Errors, r.FirstError))
		}
	}
	if len(problems) > 0 {
		fmt.Fprintln(bw)
		for _, p := range problems {
			fmt.Fprintln(bw, p)
		}
	}
	return bw.Flush()
}

// cpuText is the cores the tool, the gateways, their PostgreSQL and the whole machine kept busy.
func cpuText(r Result) string {
	var b strings.Builder
	for i, v := range []float64{r.CPU.Tool, r.CPU.Gateways, r.CPU.Database, r.CPU.Machine} {
		if i > 0 {
			b.WriteByte('/')
		}
		if v < 0 {
			b.WriteByte('-')
		} else {
			fmt.Fprintf(&b, "%.2f", v)
		}
	}
	return b.String()
}

// cpuPerMessageText is the CPU per message of the gateways and of PostgreSQL, in whole
// microseconds, "-" for what is unknown.
func cpuPerMessageText(r Result) string {
	gw, db := r.CPUPerMessage()
	if gw < 0 && db < 0 {
		return "-"
	}
	show := func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return strconv.FormatInt(int64(d+time.Microsecond/2)/int64(time.Microsecond), 10)
	}
	return show(gw) + "+" + show(db)
}

// ratioText is the ratio column: each ratio with what it is against, the CPU ratios, and what
// else the row needs said.
func ratioText(r Result) string {
	var parts []string
	for _, q := range r.Ratios {
		p := fmt.Sprintf("%.2fx %s", q.Value, q.Against)
		if r.ServerCPU.Value > 0 && r.ServerCPU.Against == q.Against {
			p += fmt.Sprintf(" (cpu/msg %.2fx)", r.ServerCPU.Value)
		}
		parts = append(parts, p)
	}
	if r.RequestCPU.Value > 0 {
		parts = append(parts, fmt.Sprintf("gw cpu/req %.2fx %s", r.RequestCPU.Value, r.RequestCPU.Against))
	}
	if r.Latency && r.Operation == OpSQLSend {
		parts = append(parts, "latency: from the sending transaction's commit to a long-polling receiver having the message")
	} else if r.Latency {
		parts = append(parts, "latency: from the send's 201 to a woken receiver having the message")
	}
	if r.Operation == OpHTTPFloor {
		parts = append(parts, "requests/s with no database: the ceiling of a request a message")
	}
	if r.Drained {
		parts = append(parts, fmt.Sprintf("(queue empty after %s of %s: the rest of the phase had nothing to receive)",
			r.DrainedAfter.Round(100*time.Millisecond), r.Elapsed.Round(100*time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

// jsonReport is the machine-readable form of a report.
type jsonReport struct {
	Started         time.Time    `json:"started"`
	ElapsedSeconds  float64      `json:"elapsed_s"`
	Machine         Machine      `json:"machine"`
	Broker          string       `json:"broker,omitempty"`
	RabbitMQWindow  int          `json:"rabbitmq_window,omitempty"`
	Setup           string       `json:"setup,omitempty"`
	Gateways        int          `json:"gateways"`
	LoadGateways    int          `json:"load_gateways"`
	PhaseSeconds    float64      `json:"phase_s"`
	MessageSize     int          `json:"message_size"`
	BatchSize       int          `json:"batch_size"`
	SettleBatch     int          `json:"settle_batch"`
	Backlog         int          `json:"backlog"`
	Inflight        int          `json:"inflight"`
	Queues          int          `json:"queues"`
	Subscriptions   int          `json:"subscriptions"`
	IdleSessions    int          `json:"idle_sessions"`
	Baseline        []jsonResult `json:"baseline"`
	Results         []jsonResult `json:"results"`
	LatencyPerIter  bool         `json:"latency_per_iteration"`
	RatioDefinition string       `json:"ratio_definition"`
}

type jsonResult struct {
	Operation     string  `json:"operation"`
	Variant       string  `json:"variant,omitempty"`
	Label         string  `json:"label"`
	Clients       int     `json:"clients"`
	Messages      int64   `json:"messages"`
	Iterations    int64   `json:"iterations"`
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	Seconds       float64 `json:"elapsed_s"`
	MsgsPerSecond float64 `json:"msgs_per_s"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	Drained       bool    `json:"drained,omitempty"`
	DrainedAfter  float64 `json:"drained_after_s,omitempty"`
	Latency       bool    `json:"latency_row,omitempty"`
	Requests      int64   `json:"requests,omitempty"`
	Prefetch      int     `json:"prefetch,omitempty"`
	CPU           CPUUse  `json:"cpu_cores"` // negative when unknown
	// CPU per message in microseconds, negative when unknown.
	GatewayMicros  float64 `json:"gateway_cpu_us_per_msg"`
	DatabaseMicros float64 `json:"database_cpu_us_per_msg"`
	Ratios         []Ratio `json:"ratios,omitempty"`
	ServerCPU      *Ratio  `json:"server_cpu_ratio,omitempty"`
	RequestCPU     *Ratio  `json:"request_cpu_ratio,omitempty"`
}

// WriteJSON prints the report as one JSON object.
func (rep *Report) WriteJSON(w io.Writer) error {
	conv := func(rs []Result) []jsonResult {
		out := make([]jsonResult, 0, len(rs))
		micros := func(d time.Duration) float64 {
			if d < 0 {
				return -1
			}
			return float64(d) / float64(time.Microsecond)
		}
		ratio := func(q Ratio) *Ratio {
			if q.Value <= 0 {
				return nil
			}
			return &q
		}
		for _, r := range rs {
			gw, db := r.CPUPerMessage()
			out = append(out, jsonResult{
				Operation: r.Operation, Variant: r.Variant, Label: rep.Label(r), Clients: r.Clients,
				Messages: r.Messages, Iterations: r.Iterations, Errors: r.Errors, FirstError: r.FirstError,
				Seconds: r.Elapsed.Seconds(), MsgsPerSecond: r.Rate(),
				P50ms: float64(r.P50) / float64(time.Millisecond), P99ms: float64(r.P99) / float64(time.Millisecond),
				Drained: r.Drained, DrainedAfter: r.DrainedAfter.Seconds(), Latency: r.Latency,
				Requests: r.Requests, Prefetch: r.Prefetch, CPU: r.CPU,
				GatewayMicros: micros(gw), DatabaseMicros: micros(db),
				Ratios: r.Ratios, ServerCPU: ratio(r.ServerCPU), RequestCPU: ratio(r.RequestCPU),
			})
		}
		return out
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonReport{
		Started: rep.Started.UTC(), ElapsedSeconds: rep.Elapsed.Seconds(), Machine: rep.Machine, Setup: rep.Setup,
		Broker: rep.Broker, RabbitMQWindow: rep.RabbitMQWindow,
		Gateways: rep.Gateways, LoadGateways: rep.LoadGateways, PhaseSeconds: rep.Duration.Seconds(), MessageSize: rep.MessageSize,
		BatchSize: rep.BatchSize, SettleBatch: rep.SettleBatch, Backlog: rep.Backlog, Inflight: rep.Inflight,
		Queues: rep.Queues, Subscriptions: rep.Subs, IdleSessions: rep.IdleSess,
		Baseline: conv(rep.Baseline), Results: conv(rep.Results), LatencyPerIter: true,
		RatioDefinition: "msgs_per_s divided by the msgs_per_s of the named baseline row of the same run " +
			"(pg-insert for sends, pg-claim-complete for receives; send@N is sbgate's own send at N clients)",
	})
}

// thousands formats a count or rate as an integer with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// showLatency rounds a latency to three significant digits or so.
func showLatency(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= 100*time.Microsecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// describeMachine reads the CPU model, core count and memory from /proc where there is one.
func describeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU, m.Cores = parseCPUInfo(b)
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryBytes = parseMemTotal(b)
	}
	return m
}

// parseCPUInfo returns the first model name and the number of physical cores (distinct
// physical id and core id pairs, or "cpu cores" when the ids are missing).
func parseCPUInfo(b []byte) (model string, cores int) {
	seen := map[string]bool{}
	var physical, core string
	perSocket := 0
	flush := func() {
		if core != "" {
			seen[physical+"/"+core] = true
		}
		physical, core = "", ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			if strings.TrimSpace(line) == "" {
				flush()
			}
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name":
			if model == "" {
				model = v
			}
		case "physical id":
			physical = v
		case "core id":
			core = v
		case "cpu cores":
			perSocket, _ = strconv.Atoi(v)
		}
	}
	flush()
	if len(seen) > 0 {
		return model, len(seen)
	}
	return model, perSocket
}

func parseMemTotal(b []byte) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// loadAverage is the 1, 5 and 15 minute load average, zero where /proc/loadavg is missing.
func loadAverage() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range bytes.Fields(b)[:min(3, len(bytes.Fields(b)))] {
		out[i], _ = strconv.ParseFloat(string(f), 64)
	}
	return out
}

func (m Machine) summary() string {
	cpu := m.CPU
	if cpu == "" {
		cpu = "unknown CPU"
	}
	cores := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.Cores > 0 {
		cores = fmt.Sprintf("%d cores, %d CPUs", m.Cores, m.CPUs)
	}
	return fmt.Sprintf("%s, %s, %.1f GiB, %s; load average %.2f at start, %.2f at end",
		cpu, cores, float64(m.MemoryBytes)/(1<<30), m.GoVersion, m.LoadStart[0], m.LoadEnd[0])
}
