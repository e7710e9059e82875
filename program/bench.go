package program

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sbgate/sbgate/bench"
)

// runBench runs the load tool: against the gateways named by -connection-string, or, when none
// is named, against gateways it starts for itself on a fresh embedded PostgreSQL.
func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "rabbitmq":
			return runBenchRabbitMQ(ctx, args[1:], getenv, stdout, stderr)
		case "compare":
			return runBenchCompare(args[1:], stdout)
		}
	}
	fs := flag.NewFlagSet("sbgate bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	a := declareBenchFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if a.output != "table" && a.output != "json" {
		return fmt.Errorf("bench: -o: want table or json, got %q", a.output)
	}
	cfg, err := a.config(stderr)
	if err != nil {
		return err
	}
	if len(cfg.ConnectionStrings) == 0 {
		stop, err := spawnBenchGateways(ctx, &cfg, a)
		if err != nil {
			return err
		}
		defer stop()
	}

	rep, runErr := bench.Run(ctx, cfg)
	if rep != nil {
		var err error
		if a.output == "json" {
			err = rep.WriteJSON(stdout)
		} else {
			err = rep.WriteTable(stdout)
		}
		if runErr == nil {
			runErr = err
		}
	}
	return runErr
}

// benchArgs are sbgate bench's flags.
type benchArgs struct {
	conns, amqpConns                          listFlag
	databaseURL, queue, output, gatewayBinary string
	clients, scenarioClients, ops, prefetch   string
	profile                                   string
	loadGateways, gateways                    int
	size, batch, settleBatch                  int
	subs, idle, backlog, inflight, queues     int
	wakeReceivers, baselineClients            int
	duration                                  time.Duration
	insecure, quiet                           bool
}

// declareBenchFlags declares sbgate bench's flags on fs, some with defaults from the
// environment.
func declareBenchFlags(fs *flag.FlagSet, getenv func(string) string) *benchArgs {
	a := &benchArgs{}
	a.conns = listFlag{values: splitList(getenv("SBGATE_CONNECTION_STRING"))}
	fs.Var(&a.conns, "connection-string", "a gateway's connection string, as sbgate prints it at start; repeat the flag or separate with commas "+
		"for several gateways on one database, which the clients are spread over ($SBGATE_CONNECTION_STRING). "+
		"None: sbgate bench starts its own gateways (-gateways) and removes them afterwards")
	a.amqpConns = listFlag{values: splitList(getenv("SBGATE_AMQP_CONNECTION_STRING"))}
	fs.Var(&a.amqpConns, "amqp-connection-string", "the same gateways' AMQP connection strings, in the same order, as sbgate prints them "+
		"(UseDevelopmentEmulator=true for plain AMQP), for the AMQP operations ($SBGATE_AMQP_CONNECTION_STRING); "+
		"gateways sbgate bench starts have theirs")
	fs.StringVar(&a.databaseURL, "database-url", getenv("SBGATE_BENCH_DATABASE_URL"), "the gateways' PostgreSQL, for the baseline (PostgreSQL alone, on a scratch table "+
		"the run creates and drops); without it there are no ratios. With gateways started by sbgate bench: the database they use "+
		"instead of a fresh embedded one ($SBGATE_BENCH_DATABASE_URL)")
	fs.IntVar(&a.loadGateways, "load-gateways", 0, "how many of the gateways, the first ones, every phase's clients go through (0: all); the others serve only "+
		"the wake scenario's receivers on another gateway. On one machine, load spread over gateway processes that share its cores measures that sharing")
	fs.IntVar(&a.gateways, "gateways", 1, "how many gateways to start when no connection string is given: the first runs a fresh embedded PostgreSQL "+
		"in a temporary directory, the others use its database")
	fs.StringVar(&a.clients, "clients", "16", "comma-separated concurrency levels, e.g. 1,16,64")
	fs.StringVar(&a.scenarioClients, "scenario-clients", "", "concurrency levels of the scenarios (default: -clients)")
	fs.DurationVar(&a.duration, "duration", 3*time.Second, "how long each phase runs")
	fs.IntVar(&a.size, "size", 1024, "message body size in bytes")
	fs.IntVar(&a.batch, "batch", 10, "messages per send-batch request")
	fs.IntVar(&a.settleBatch, "settle-batch", 100, "messages a batch-settle iteration locks with $batch and completes with one $settle")
	fs.StringVar(&a.ops, "ops", strings.Join(bench.AllOperations, ","), "operations to run: "+strings.Join(bench.AllOperations, ", ")+
		"; over AMQP (with the AMQP connection strings) "+strings.Join(bench.AMQPOperations, ", ")+
		"; the scenarios "+strings.Join(bench.Scenarios, ", ")+"; or all (the AMQP operations when the AMQP connection strings are known)")
	fs.StringVar(&a.prefetch, "amqp-prefetch", "20", "link credit of each amqp-peek-lock receiver; a comma-separated list runs the operation once per credit, e.g. 20,100")
	fs.IntVar(&a.subs, "subscriptions", 100, "subscriptions of the topic-send scenario's topic")
	fs.IntVar(&a.idle, "idle-sessions", 10000, "idle sessions beside the active ones in the session scenario (negative: none)")
	fs.IntVar(&a.backlog, "backlog", 1_000_000, "messages the backlog scenario's queue holds")
	fs.IntVar(&a.inflight, "inflight", 10_000, "locks the inflight scenario holds, never settled, at the head of its queue")
	fs.IntVar(&a.queues, "queues", 100, "queues of the many-queues scenario (client i works on queue i mod queues)")
	fs.IntVar(&a.wakeReceivers, "wake-receivers", 0, "receivers waiting in the wake scenario (default: the level's client count)")
	fs.IntVar(&a.baselineClients, "baseline-clients", 16, "connections of each baseline phase")
	fs.StringVar(&a.queue, "queue", "", "name prefix of the entities the run creates (default: bench-<random>); they are deleted after")
	fs.BoolVar(&a.insecure, "insecure", false, "skip TLS certificate checks")
	fs.BoolVar(&a.quiet, "quiet", false, "no progress lines")
	fs.StringVar(&a.output, "o", "table", "summary format: table, or json for machines")
	fs.StringVar(&a.gatewayBinary, "gateway-binary", "", "the sbgate executable the gateways sbgate bench starts run (default: this one), "+
		"to compare two builds measured by the same load tool")
	fs.StringVar(&a.profile, "profile", "", "directory for profiles of every phase: with gateways sbgate bench starts, a CPU profile of each "+
		"(their -pprof-listen) and, from the embedded PostgreSQL it then starts itself with pg_stat_statements, what each statement cost")
	return a
}

// config is the run's configuration as the flags give it, with progress lines to stderr
// unless -quiet.
func (a *benchArgs) config(stderr io.Writer) (bench.Config, error) {
	cfg := bench.Config{
		ConnectionStrings:     a.conns.values,
		LoadGateways:          a.loadGateways,
		AMQPConnectionStrings: a.amqpConns.values,
		DatabaseURL:           a.databaseURL,
		Queue:                 a.queue,
		Duration:              a.duration,
		MessageSize:           a.size,
		BatchSize:             a.batch,
		SettleBatch:           a.settleBatch,
		Operations:            splitList(a.ops),
		Insecure:              a.insecure,
		Subscriptions:         a.subs,
		IdleSessions:          a.idle,
		Backlog:               a.backlog,
		Inflight:              a.inflight,
		Queues:                a.queues,
		WakeReceivers:         a.wakeReceivers,
		BaselineClients:       a.baselineClients,
		ProfileDir:            a.profile,
		Progress:              stderr,
	}
	if a.quiet {
		cfg.Progress = nil
	}
	var err error
	if cfg.Clients, err = levels("-clients", a.clients); err != nil {
		return cfg, err
	}
	if cfg.ScenarioClients, err = levels("-scenario-clients", a.scenarioClients); err != nil {
		return cfg, err
	}
	if cfg.AMQPPrefetch, err = levels("-amqp-prefetch", a.prefetch); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// spawnBenchGateways starts -gateways gateways for a run that names none and points cfg at
// them; it returns the function that removes them.
func spawnBenchGateways(ctx context.Context, cfg *bench.Config, a *benchArgs) (func(), error) {
	if a.gateways < 1 {
		return nil, fmt.Errorf("bench: -gateways: want at least 1, got %d", a.gateways)
	}
	gws, err := spawnGateways(ctx, spawnOptions{n: a.gateways, databaseURL: cfg.DatabaseURL,
		profile: a.profile != "", binary: a.gatewayBinary}, cfg.Progress)
	if err != nil {
		return nil, err
	}
	cfg.ConnectionStrings = gws.connectionStrings()
	cfg.AMQPConnectionStrings = gws.amqpConnectionStrings()
	for _, c := range gws.procs {
		cfg.GatewayPIDs = append(cfg.GatewayPIDs, c.cmd.Process.Pid)
	}
	cfg.PprofAddrs = gws.pprof
	where := "a fresh embedded PostgreSQL in a temporary directory"
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = gws.procs[0].ready.DatabaseURL
		cfg.Disposable = true
	} else {
		where = "the database of -database-url"
	}
	if gws.pg != nil {
		where = "a fresh embedded PostgreSQL with pg_stat_statements, which sbgate bench runs itself, in a temporary directory"
	}
	cfg.Setup = fmt.Sprintf("%d started by sbgate bench (sbgate serve, one process each) on %s", len(gws.procs), where)
	if a.gatewayBinary != "" {
		cfg.Setup += ", running " + a.gatewayBinary
	}
	return gws.stop, nil
}

// levels parses a comma-separated list of client counts.
func levels(flagName, s string) ([]int, error) {
	var out []int
	for _, c := range splitList(s) {
		n, err := strconv.Atoi(c)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %q is not a number", flagName, c)
		}
		out = append(out, n)
	}
	return out, nil
}

// listFlag is a flag that may be repeated and takes comma-separated values. The first value
// given on the command line replaces the default from the environment.
type listFlag struct {
	values   []string
	fromFlag bool
}

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.values, ",")
}

func (l *listFlag) Set(s string) error {
	if !l.fromFlag {
		l.values, l.fromFlag = nil, true
	}
	l.values = append(l.values, splitList(s)...)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// runBenchRabbitMQ measures a RabbitMQ broker as sbgate bench measures sbgate (bench.RunRabbitMQ),
// for make bench-peers.
func runBenchRabbitMQ(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sbgate bench rabbitmq", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", cmp.Or(getenv("SBGATE_BENCH_RABBITMQ_URL"), "amqp://guest:guest@127.0.0.1:5672/"),
		"the broker's AMQP 0-9-1 URL ($SBGATE_BENCH_RABBITMQ_URL)")
	pids := fs.String("pids", "", "comma-separated process ids of the broker on this machine (its Erlang VM), whose CPU the report shows")
	version := fs.String("version", "RabbitMQ", "what to call the broker in the report, e.g. \"RabbitMQ 3.10.8\"")
	clients := fs.String("clients", "64", "comma-separated concurrency levels")
	duration := fs.Duration("duration", 3*time.Second, "how long each phase runs")
	size := fs.Int("size", 1024, "message body size in bytes")
	window := fs.Int("window", 100, "publishes a client keeps unconfirmed")
	prefetch := fs.String("prefetch", "100", "consumers' prefetch counts, a consume phase each")
	ops := fs.String("ops", strings.Join(bench.RabbitMQOperations, ","), "operations: "+strings.Join(bench.RabbitMQOperations, ", "))
	quiet := fs.Bool("quiet", false, "no progress lines")
	output := fs.String("o", "table", "summary format: table, or json (for sbgate bench compare)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench rabbitmq: unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("bench rabbitmq: -o: want table or json, got %q", *output)
	}
	cfg := bench.RabbitMQConfig{URL: *url, Version: *version, Duration: *duration, MessageSize: *size, Window: *window,
		Operations: splitList(*ops), Progress: stderr}
	if *quiet {
		cfg.Progress = nil
	}
	var err error
	if cfg.Clients, err = levels("-clients", *clients); err != nil {
		return err
	}
	if cfg.Prefetch, err = levels("-prefetch", *prefetch); err != nil {
		return err
	}
	if cfg.PIDs, err = levels("-pids", *pids); err != nil {
		return err
	}
	rep, runErr := bench.RunRabbitMQ(ctx, cfg)
	if rep != nil {
		write := rep.WriteTable
		if *output == "json" {
			write = rep.WriteJSON
		}
		if err := write(stdout); runErr == nil {
			runErr = err
		}
	}
	return runErr
}

// runBenchCompare prints two reports side by side: another broker's (sbgate bench rabbitmq -o
// json) and sbgate's (sbgate bench -o json).
func runBenchCompare(args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("bench compare: want two JSON reports, the other broker's then sbgate's; got %d arguments", len(args))
	}
	var reps [2]*bench.Report
	for i, path := range args {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("bench compare: %w", err)
		}
		reps[i], err = bench.ReadJSON(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("bench compare: %s: %w", path, err)
		}
	}
	c, err := bench.ComparePeers(reps[0], reps[1])
	if err != nil {
		return err
	}
	return c.WriteComparison(stdout)
}
