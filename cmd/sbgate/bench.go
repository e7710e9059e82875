package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sbgate/sbgate/bench"
)

// runBench runs the load tool against a running broker.
func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sbgate bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := fs.String("connection-string", getenv("SBGATE_CONNECTION_STRING"), "the broker's connection string, as sbgate prints it at start ($SBGATE_CONNECTION_STRING)")
	clients := fs.String("clients", "16", "comma-separated concurrency levels, e.g. 1,16,64")
	duration := fs.Duration("duration", 3*time.Second, "how long each operation runs at each level")
	size := fs.Int("size", 1024, "message body size in bytes")
	batch := fs.Int("batch", 10, "messages per send-batch request")
	ops := fs.String("ops", strings.Join(bench.AllOperations, ","), "operations to run: "+strings.Join(bench.AllOperations, ", ")+
		", and the scenarios "+strings.Join(bench.Scenarios, ", "))
	subs := fs.Int("subscriptions", 100, "subscriptions of the topic-send scenario's topic")
	idle := fs.Int("idle-sessions", 10000, "idle sessions beside the active ones in the session scenario")
	queue := fs.String("queue", "", "queue to create and use (default: a fresh bench-* queue, deleted after)")
	insecure := fs.Bool("insecure", false, "skip TLS certificate checks")
	quiet := fs.Bool("quiet", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := bench.Config{
		ConnectionString: *conn,
		Queue:            *queue,
		Duration:         *duration,
		MessageSize:      *size,
		BatchSize:        *batch,
		Operations:       splitList(*ops),
		Insecure:         *insecure,
		Subscriptions:    *subs,
		IdleSessions:     *idle,
		Progress:         stderr,
	}
	if *quiet {
		cfg.Progress = nil
	}
	for _, c := range splitList(*clients) {
		n, err := strconv.Atoi(c)
		if err != nil {
			return fmt.Errorf("bench: -clients: %q is not a number", c)
		}
		cfg.Clients = append(cfg.Clients, n)
	}
	results, err := bench.Run(ctx, cfg)
	bench.WriteSummary(stdout, results)
	return err
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
