// Package bench is sbgate's load tool: it drives a running broker over HTTP, through the client
// generated from openapi.yaml, with N concurrent clients per operation and reports msgs/s and
// latency percentiles. It is the instrument speed is measured with; tests never time anything.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/api/client"
	"github.com/sbgate/sbgate/sas"
)

// Operations the tool measures.
const (
	OpSend          = "send"
	OpSendBatch     = "send-batch"
	OpPeekLock      = "peek-lock"      // peek-lock then complete: one message, two requests
	OpReceiveDelete = "receive-delete" // receive-and-delete
)

// AllOperations is the default scenario, in the order it runs: the sends build the backlog the
// receives drain.
var AllOperations = []string{OpSend, OpSendBatch, OpPeekLock, OpReceiveDelete}

// Config says what to measure.
type Config struct {
	ConnectionString string
	// Queue is created for the run and deleted after; default "bench-<random>".
	Queue string
	// Clients lists the concurrency levels; each operation runs once per level.
	Clients []int
	// Duration is how long each operation runs at each level.
	Duration time.Duration
	// MessageSize is the body size in bytes.
	MessageSize int
	// BatchSize is the number of messages per send-batch request.
	BatchSize int
	// Operations to run, from AllOperations.
	Operations []string
	// Insecure skips TLS certificate checks (for a self-signed https broker).
	Insecure bool
	// Subscriptions is how many subscriptions the topic-send scenario's topic has (default 100).
	Subscriptions int
	// IdleSessions is how many sessions with state but no messages the session scenario's
	// queue holds besides the active ones (default 10,000; negative for none).
	IdleSessions int
	// Progress receives a line per second while a phase runs; nil for none.
	Progress io.Writer
}

// Result is one operation at one concurrency level.
type Result struct {
	Operation string
	Clients   int
	Messages  int64
	Requests  int64
	Errors    int64
	Elapsed   time.Duration
	P50, P99  time.Duration // per request
	Drained   bool          // a receive phase ran out of messages before its time
}

// Rate is messages per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

func (c *Config) setDefaults() error {
	if c.ConnectionString == "" {
		return errors.New("bench: a connection string is required (-connection-string or SBGATE_CONNECTION_STRING)")
	}
	if c.Queue == "" {
		c.Queue = "bench-" + hex.EncodeToString(randomBytes(4))
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{16}
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
	if len(c.Operations) == 0 {
		c.Operations = AllOperations
	}
	for _, op := range c.Operations {
		if !slices.Contains(AllOperations, op) && !slices.Contains(Scenarios, op) {
			return fmt.Errorf("bench: unknown operation %q (want %s)", op, strings.Join(append(slices.Clone(AllOperations), Scenarios...), ", "))
		}
	}
	for _, n := range c.Clients {
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

// runner holds what every phase shares.
type runner struct {
	cfg    Config
	api    *client.ClientWithResponses
	queue  string
	body   []byte
	batch  []byte
	sent   atomic.Int64 // messages sent and not yet received, to size the fills
	tokens *sas.ConnectionString
	// counter numbers topic sends, to spread them over the subscriptions' filters.
	counter atomic.Int64
	// sessionBacklog is how many messages the session queue holds.
	sessionBacklog atomic.Int64
}

// Run measures every operation at every concurrency level against the broker and returns the
// results in the order they ran.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	cs, err := sas.ParseConnectionString(cfg.ConnectionString, "http")
	if err != nil {
		return nil, err
	}
	maxClients := slices.Max(cfg.Clients)
	transport := &http.Transport{
		MaxIdleConns:        maxClients * 2,
		MaxIdleConnsPerHost: maxClients * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: cfg.Insecure}, //nolint:gosec // opt-in for self-signed brokers
	}
	defer transport.CloseIdleConnections()
	token := cs.Token(time.Now().Add(24 * time.Hour))
	api, err := client.NewClientWithResponses(cs.Endpoint.String(),
		client.WithHTTPClient(&http.Client{Transport: transport}),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", token)
			return nil
		}))
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, api: api, queue: cfg.Queue, body: bytes.Repeat([]byte("x"), cfg.MessageSize), tokens: &cs}
	r.batch = r.batchBody()
	if err := r.createQueue(ctx); err != nil {
		return nil, err
	}
	defer r.deleteQueue()
	defer r.tearDown()
	if err := r.setUp(ctx, cfg.Operations); err != nil {
		return nil, err
	}

	var results []Result
	for _, clients := range cfg.Clients {
		for _, op := range cfg.Operations {
			switch op {
			case OpPeekLock, OpReceiveDelete:
				err = r.fill(ctx, clients)
			case OpSession:
				err = r.fillSessions(ctx, clients)
			}
			if err != nil {
				return results, err
			}
			res, err := r.phase(ctx, op, clients)
			if err != nil {
				return results, err
			}
			results = append(results, res)
		}
	}
	return results, nil
}

// queueDescription is a queue with the defaults, as an Atom entry.
const queueDescription = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`

func (r *runner) createQueue(ctx context.Context) error {
	resp, err := r.api.PutEntityWithBody(ctx, r.queue, nil, "application/atom+xml", strings.NewReader(queueDescription))
	if err != nil {
		return fmt.Errorf("bench: create queue %s: %w", r.queue, err)
	}
	return expect(resp, http.StatusCreated)
}

func (r *runner) deleteQueue() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := r.api.DeleteEntity(ctx, r.queue, nil); err == nil {
		drain(resp)
	}
}

func (r *runner) batchBody() []byte {
	items := make([]client.BatchMessage, r.cfg.BatchSize)
	text := string(r.body)
	for i := range items {
		items[i] = client.BatchMessage{Body: &text}
	}
	b, _ := json.Marshal(items)
	return b
}

// fillTarget is how many messages a receive phase should find waiting: enough for a fast broker
// to stay busy for the whole phase.
func (r *runner) fillTarget(clients int) int64 {
	perSecond := int64(4000 + 200*clients)
	return perSecond * int64(r.cfg.Duration/time.Second+1)
}

// fill tops the queue up with batch sends before a receive phase, so the phase measures receiving
// and not an empty queue.
func (r *runner) fill(ctx context.Context, clients int) error {
	need := r.fillTarget(clients) - r.sent.Load()
	if need <= 0 {
		return nil
	}
	requests := (need + int64(r.cfg.BatchSize) - 1) / int64(r.cfg.BatchSize)
	if err := parallel(ctx, int(requests), func(int) error { return r.sendBatch(ctx) }); err != nil {
		return fmt.Errorf("bench: fill queue: %w", err)
	}
	return nil
}

// phase runs one operation with clients workers for the configured duration.
func (r *runner) phase(ctx context.Context, op string, clients int) (Result, error) {
	res := Result{Operation: op, Clients: clients}
	phaseCtx, cancel := context.WithTimeout(ctx, r.cfg.Duration)
	defer cancel()
	var messages, requests, errs atomic.Int64
	var drained atomic.Bool
	latencies := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	start := time.Now()
	stopProgress := r.progress(op, clients, start, &messages)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for phaseCtx.Err() == nil {
				t0 := time.Now()
				n, err := r.once(phaseCtx, op)
				if phaseCtx.Err() != nil {
					return // a request cut short by the end of the phase is not counted
				}
				if errors.Is(err, errEmpty) {
					drained.Store(true)
					return
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				latencies[w] = append(latencies[w], time.Since(t0))
				requests.Add(1)
				messages.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	stopProgress()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.Messages, res.Requests, res.Errors, res.Drained = messages.Load(), requests.Load(), errs.Load(), drained.Load()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	res.P50, res.P99 = percentile(all, 0.50), percentile(all, 0.99)
	return res, nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
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
				fmt.Fprintf(r.cfg.Progress, "  %-15s %4d clients %6.1fs %9d msgs %9.0f msgs/s\n",
					op, clients, el.Seconds(), n, float64(n)/el.Seconds())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// errEmpty means a receive found the queue empty.
var errEmpty = errors.New("queue empty")

// once does one request (two for peek-lock + complete) and returns how many messages it moved.
func (r *runner) once(ctx context.Context, op string) (int, error) {
	switch op {
	case OpSend:
		resp, err := r.api.SendMessageWithBody(ctx, r.queue, nil, "application/octet-stream", bytes.NewReader(r.body))
		if err != nil {
			return 0, err
		}
		if err := expect(resp, http.StatusCreated); err != nil {
			return 0, err
		}
		r.sent.Add(1)
		return 1, nil
	case OpSendBatch:
		if err := r.sendBatch(ctx); err != nil {
			return 0, err
		}
		return r.cfg.BatchSize, nil
	case OpPeekLock:
		zero := 0
		resp, err := r.api.PeekLockMessage(ctx, r.queue, &client.PeekLockMessageParams{Timeout: &zero})
		if err != nil {
			return 0, err
		}
		if resp.StatusCode == http.StatusNoContent {
			drain(resp)
			return 0, errEmpty
		}
		seq, token, err := lockOf(resp)
		drain(resp)
		if err != nil {
			return 0, err
		}
		resp, err = r.api.CompleteMessage(ctx, r.queue, seq, token, nil)
		if err != nil {
			return 0, err
		}
		if err := expect(resp, http.StatusOK); err != nil {
			return 0, err
		}
		r.sent.Add(-1)
		return 1, nil
	case OpReceiveDelete:
		zero := 0
		resp, err := r.api.ReceiveAndDeleteMessage(ctx, r.queue, &client.ReceiveAndDeleteMessageParams{Timeout: &zero})
		if err != nil {
			return 0, err
		}
		if resp.StatusCode == http.StatusNoContent {
			drain(resp)
			return 0, errEmpty
		}
		if err := expect(resp, http.StatusOK); err != nil {
			return 0, err
		}
		r.sent.Add(-1)
		return 1, nil
	case OpTopicSend:
		return r.topicSend(ctx)
	case OpSession:
		return r.sessionOnce(ctx)
	}
	return 0, fmt.Errorf("unknown operation %q", op)
}

func (r *runner) sendBatch(ctx context.Context) error {
	resp, err := r.api.SendMessageWithBody(ctx, r.queue, nil, "application/vnd.microsoft.servicebus.json", bytes.NewReader(r.batch))
	if err != nil {
		return err
	}
	if err := expect(resp, http.StatusCreated); err != nil {
		return err
	}
	r.sent.Add(int64(r.cfg.BatchSize))
	return nil
}

// lockOf reads the sequence number and lock token of a peek-locked message from its Location.
func lockOf(resp *http.Response) (string, uuid.UUID, error) {
	if resp.StatusCode != http.StatusCreated {
		return "", uuid.Nil, fmt.Errorf("peek-lock: status %d", resp.StatusCode)
	}
	loc := resp.Header.Get("Location")
	parts := strings.Split(loc, "/")
	if len(parts) < 2 {
		return "", uuid.Nil, fmt.Errorf("peek-lock: bad Location %q", loc)
	}
	token, err := uuid.Parse(parts[len(parts)-1])
	if err != nil {
		return "", uuid.Nil, fmt.Errorf("peek-lock: bad lock token in %q", loc)
	}
	return parts[len(parts)-2], token, nil
}

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

// WriteSummary prints the results as a table.
func WriteSummary(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tclients\tmsgs\tmsgs/s\tp50\tp99\terrors\t")
	for _, r := range results {
		note := ""
		if r.Drained {
			note = " (queue drained)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%d\t%s\n", r.Operation, r.Clients, r.Messages, r.Rate(),
			roundLatency(r.P50), roundLatency(r.P99), r.Errors, note)
	}
	tw.Flush()
}

func roundLatency(d time.Duration) time.Duration {
	switch {
	case d > 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d > 100*time.Microsecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
