package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sbgate/sbgate/api/client"
)

// OpSQLSend is applications sending through SQL (README "Sending from SQL"): each client runs
// transactions of one sbgate.send each, straight on the gateways' database (Config.DatabaseURL),
// as an application would; the gateways relay them. Its rate row ("relayed") counts the
// messages committed in the phase over the time until the gateways had relayed the last of them;
// its latency row ("commit to receive") is, one message at a time, the time from the sending
// transaction's commit to a receiver long-polling through gateway 0 having the message. Like
// the baseline, it writes SQL itself: that is what it measures.
const OpSQLSend = "sql-send"

// sqlSendStatement is one application transaction's send.
const sqlSendStatement = `SELECT sbgate.send($1, $2)`

// sqlDrainTimeout bounds the wait for the relay to catch up after a phase.
const sqlDrainTimeout = 5 * time.Minute

func (r *runner) sqlQueue() string { return r.cfg.Queue + "-sql" }

// sqlSend runs both rows of OpSQLSend at clients.
func (r *runner) sqlSend(ctx context.Context, clients int) ([]Result, error) {
	if r.cfg.DatabaseURL == "" {
		return nil, fmt.Errorf("bench: %s needs the gateways' database URL", OpSQLSend)
	}
	cfg, err := pgxpool.ParseConfig(r.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", OpSQLSend, err)
	}
	cfg.MaxConns = int32(clients + 1)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", OpSQLSend, err)
	}
	defer pool.Close()
	q := r.sqlQueue()

	rate := Result{Operation: OpSQLSend, Variant: "relayed", Clients: clients}
	rate, err = r.measure(ctx, rate, func(int) (iteration, error) {
		return func(ctx context.Context) (int, error) {
			_, err := pool.Exec(ctx, sqlSendStatement, q, r.body)
			return 1, err
		}, nil
	})
	if err != nil {
		return []Result{rate}, err
	}
	start := time.Now()
	for {
		var staged int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM sbgate.outbox WHERE path = $1 AND last_error IS NULL`, q).Scan(&staged); err != nil {
			return []Result{rate}, fmt.Errorf("bench: %s: %w", OpSQLSend, err)
		}
		if staged == 0 {
			break
		}
		if time.Since(start) > sqlDrainTimeout {
			return []Result{rate}, fmt.Errorf("bench: %s: %d messages still not relayed %v after the phase", OpSQLSend, staged, sqlDrainTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rate.Elapsed += time.Since(start)
	r.noteRate(rate)
	if err := r.purge(ctx, q); err != nil {
		return []Result{rate}, err
	}
	r.doneMu.Lock()
	r.done = append(r.done, rate)
	r.doneMu.Unlock()

	lat, err := r.sqlSendLatency(ctx, pool, q)
	return []Result{rate, lat}, err
}

// sqlSendLatency measures, one message at a time, from a sending transaction's commit to a
// long-polling receiver having the message.
func (r *runner) sqlSendLatency(ctx context.Context, pool *pgxpool.Pool, q string) (Result, error) {
	res := Result{Operation: OpSQLSend, Variant: "commit to receive", Clients: 1, Latency: true}
	g := r.gws[0]
	poll := wakePollSeconds
	recv, err := g.template(client.NewReceiveAndDeleteMessageRequest(g.server, q, &client.ReceiveAndDeleteMessageParams{Timeout: &poll}))
	if err != nil {
		return res, err
	}
	recvCtx, stop := context.WithCancel(ctx)
	defer stop()
	got := make(chan time.Time, 1)
	recvErr := make(chan error, 1)
	go func() {
		for recvCtx.Err() == nil {
			resp, err := g.do(recvCtx, recv)
			if err == nil && resp.StatusCode == http.StatusNoContent {
				drain(resp)
				continue
			}
			if err == nil {
				err = expect(resp, http.StatusOK)
			}
			if err != nil {
				if recvCtx.Err() == nil {
					recvErr <- err
				}
				return
			}
			select {
			case got <- time.Now():
			case <-recvCtx.Done():
			}
		}
	}()
	var latencies []time.Duration
	stopCPU := r.cpuMeasure()
	start := time.Now()
	deadline := start.Add(r.cfg.Duration)
	time.Sleep(min(wakeSettle, r.cfg.Duration/10)) // let the first long poll reach the gateway
	for time.Now().Before(deadline) || len(latencies) == 0 {
		if _, err := pool.Exec(ctx, sqlSendStatement, q, bytes.Clone(r.body)); err != nil {
			return res, fmt.Errorf("bench: %s: %w", OpSQLSend, err)
		}
		committed := time.Now()
		select {
		case at := <-got:
			latencies = append(latencies, max(0, at.Sub(committed)))
		case err := <-recvErr:
			return res, fmt.Errorf("bench: %s: receive: %w", OpSQLSend, err)
		case <-time.After(wakePollSeconds * time.Second):
			return res, fmt.Errorf("bench: %s: a committed message did not arrive within %ds", OpSQLSend, wakePollSeconds)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	stop()
	res.Elapsed = time.Since(start)
	stopCPU(&res)
	res.Messages, res.Iterations = int64(len(latencies)), int64(len(latencies))
	res.P50, res.P99 = percentiles(latencies)
	return res, nil
}
