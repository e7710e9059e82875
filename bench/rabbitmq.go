package bench

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The RabbitMQ operations measure RabbitMQ beside sbgate on the same machine, as its users drive
// it (github.com/rabbitmq/amqp091-go, one connection and channel per client): a durable classic
// queue, persistent messages of Config.MessageSize bytes.
const (
	// OpRabbitPublish publishes with publisher confirms, keeping up to RabbitMQConfig.Window
	// messages a client unconfirmed (windowed publishing, as RabbitMQ advises for throughput
	// with safety); a message counts when its confirm arrives.
	OpRabbitPublish = "rabbitmq-publish"
	// OpRabbitConsume consumes with a prefetch (basic.qos) and acknowledges each message on
	// its own, the counterpart of a peek-lock receive completing each message.
	OpRabbitConsume = "rabbitmq-consume"
)

// RabbitMQOperations are the operations RunRabbitMQ runs, in this order at each level.
var RabbitMQOperations = []string{OpRabbitPublish, OpRabbitConsume}

// RabbitMQConfig says what to measure of a RabbitMQ broker.
type RabbitMQConfig struct {
	// URL is the broker's AMQP 0-9-1 URL, e.g. amqp://guest:guest@127.0.0.1:5672/.
	URL string
	// PIDs are the broker's processes on this machine (its Erlang VM), whose CPU, with their
	// children's, the report shows as the broker's.
	PIDs []int
	// Version names the broker in the report, e.g. "RabbitMQ 3.10.8".
	Version string
	// Clients lists the concurrency levels (default 64).
	Clients  []int
	Duration time.Duration // each phase (default 3 s)
	// MessageSize is the body size in bytes (default 1024).
	MessageSize int
	// Window is how many publishes a client keeps unconfirmed (default 100).
	Window int
	// Prefetch lists the consumers' prefetch counts, a consume phase each (default 100).
	Prefetch []int
	// Operations to run, of RabbitMQOperations (default both).
	Operations []string
	// Queue names the queue the run declares and deletes (default sbgate-bench-<random>).
	Queue    string
	Progress io.Writer
}

func (c *RabbitMQConfig) setDefaults() error {
	if c.URL == "" {
		return errors.New("bench: the RabbitMQ URL is required")
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{64}
	}
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.MessageSize <= 0 {
		c.MessageSize = 1024
	}
	if c.Window <= 0 {
		c.Window = 100
	}
	if len(c.Prefetch) == 0 {
		c.Prefetch = []int{100}
	}
	if len(c.Operations) == 0 {
		c.Operations = RabbitMQOperations
	}
	for _, op := range c.Operations {
		if !slices.Contains(RabbitMQOperations, op) {
			return fmt.Errorf("bench: unknown RabbitMQ operation %q (want %s)", op, strings.Join(RabbitMQOperations, ", "))
		}
	}
	for _, n := range slices.Concat(c.Clients, c.Prefetch) {
		if n < 1 {
			return fmt.Errorf("bench: client counts and prefetch counts must be positive, got %d", n)
		}
	}
	if c.Queue == "" {
		c.Queue = "sbgate-bench-" + hex.EncodeToString(randomBytes(4))
	}
	return nil
}

// RunRabbitMQ measures the RabbitMQ operations at every concurrency level and returns the
// report of what ran; its gateways' CPU column is the broker's (RabbitMQConfig.PIDs). The queue
// is declared at the start and deleted at the end.
func RunRabbitMQ(ctx context.Context, cfg RabbitMQConfig) (*Report, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	bcfg := Config{Duration: cfg.Duration, MessageSize: cfg.MessageSize, GatewayPIDs: cfg.PIDs, Progress: cfg.Progress,
		Clients: cfg.Clients, AMQPPrefetch: cfg.Prefetch,
		Setup: fmt.Sprintf("%s at %s", cfg.Version, redactURL(cfg.URL))}
	rep := newReport(bcfg)
	rep.Broker, rep.RabbitMQWindow = cfg.Version, cfg.Window
	if rep.Broker == "" {
		rep.Broker = "RabbitMQ"
	}
	r := &runner{cfg: bcfg, rates: map[string]float64{}, label: rep.Label}
	r.body = make([]byte, cfg.MessageSize)
	for i := range r.body {
		r.body[i] = 'x'
	}
	rq := &rabbit{url: cfg.URL, queue: cfg.Queue}
	if err := rq.declare(); err != nil {
		return rep.finish(), err
	}
	defer rq.remove()
	for _, clients := range cfg.Clients {
		for _, op := range cfg.Operations {
			prefetches := []int{0}
			if op == OpRabbitConsume {
				prefetches = cfg.Prefetch
			}
			for _, p := range prefetches {
				res := Result{Operation: op, Clients: clients, Prefetch: p}
				var err error
				if op == OpRabbitPublish {
					res, err = r.measure(ctx, res, func(int) (iteration, error) { return rq.publisher(r.body, cfg.Window) })
					if err == nil {
						err = rq.purge()
					}
				} else {
					if err = rq.fill(ctx, r.body, r.rabbitFill(clients, p)); err == nil {
						res, err = r.measure(ctx, res, func(int) (iteration, error) { return rq.consumer(p, int64(clients*p)) })
					}
				}
				rq.closeClients()
				rep.Results = append(rep.Results, res)
				if err != nil {
					return rep.finish(), err
				}
				r.doneMu.Lock()
				r.done = append(r.done, res)
				r.doneMu.Unlock()
			}
		}
	}
	return rep.finish(), nil
}

// rabbitFill is how many messages a consume phase should find queued: half as much again as
// the fastest the run measured (publish or consume) would take in the phase, at least 20,000 a
// second's worth, with each consumer's prefetch on top.
func (r *runner) rabbitFill(clients, prefetch int) int64 {
	rate := 20_000.0
	r.doneMu.Lock()
	for _, d := range r.done {
		rate = max(rate, 1.5*d.Rate())
	}
	r.doneMu.Unlock()
	return int64(rate*(r.cfg.Duration.Seconds()*1.2+0.5)) + int64(clients*prefetch)
}

// redactURL is a broker URL without its password.
func redactURL(s string) string {
	u, err := amqp091.ParseURI(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return fmt.Sprintf("%s://%s:%d%s", u.Scheme, u.Host, u.Port, "/"+strings.TrimPrefix(u.Vhost, "/"))
}

// rabbit is the run's queue on the broker, and the connections of the phase running.
type rabbit struct {
	url, queue string
	left       atomic.Int64 // messages the run believes are queued

	mu    sync.Mutex
	conns []*amqp091.Connection
}

// declareArgs make the queue a classic queue whatever the broker's default type.
var declareArgs = amqp091.Table{"x-queue-type": "classic"}

func (q *rabbit) declare() error {
	return q.withChannel(func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare(q.queue, true, false, false, false, declareArgs)
		return err
	})
}

func (q *rabbit) purge() error {
	return q.withChannel(func(ch *amqp091.Channel) error {
		_, err := ch.QueuePurge(q.queue, false)
		q.left.Store(0)
		return err
	})
}

func (q *rabbit) remove() {
	_ = q.withChannel(func(ch *amqp091.Channel) error {
		_, err := ch.QueueDelete(q.queue, false, false, false)
		return err
	})
}

// withChannel runs fn on a channel of a connection of its own.
func (q *rabbit) withChannel(fn func(*amqp091.Channel) error) error {
	conn, err := amqp091.Dial(q.url)
	if err != nil {
		return fmt.Errorf("bench: RabbitMQ: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("bench: RabbitMQ: %w", err)
	}
	if err := fn(ch); err != nil {
		return fmt.Errorf("bench: RabbitMQ %s: %w", q.queue, err)
	}
	return nil
}

// channel opens a client's connection and channel, closed by closeClients.
func (q *rabbit) channel() (*amqp091.Channel, error) {
	conn, err := amqp091.Dial(q.url)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.conns = append(q.conns, conn)
	q.mu.Unlock()
	return conn.Channel()
}

// closeClients closes the connections of the phase that ran: what its consumers held and did not
// acknowledge goes back to the queue.
func (q *rabbit) closeClients() {
	q.mu.Lock()
	conns := q.conns
	q.conns = nil
	q.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

var persistent = amqp091.Publishing{DeliveryMode: amqp091.Persistent, ContentType: "application/octet-stream"}

// publisher publishes body to the queue one message an iteration, with confirms, waiting for
// the oldest confirm once window are outstanding; an iteration counts the confirms it waited for.
func (q *rabbit) publisher(body []byte, window int) (iteration, error) {
	ch, err := q.channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		return nil, err
	}
	msg := persistent
	msg.Body = body
	pending := make([]*amqp091.DeferredConfirmation, 0, window)
	return func(ctx context.Context) (int, error) {
		confirmed := 0
		if len(pending) == window {
			ok, err := pending[0].WaitContext(ctx)
			if err != nil {
				return 0, err
			}
			if !ok {
				return 0, errors.New("RabbitMQ refused (nacked) a publish")
			}
			pending = append(pending[:0], pending[1:]...)
			confirmed = 1
			q.left.Add(1)
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.queue, false, false, msg)
		if err != nil {
			return confirmed, err
		}
		pending = append(pending, dc)
		return confirmed, nil
	}, nil
}

// consumer takes one delivery an iteration and acknowledges it alone; a consumer given nothing
// for amqpEmptyWait takes the queue for empty when no more are queued than the phase's consumers
// (held: their prefetch) can hold, and waits on otherwise.
func (q *rabbit) consumer(prefetch int, held int64) (iteration, error) {
	ch, err := q.channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return nil, err
	}
	deliveries, err := ch.Consume(q.queue, "", false, false, false, false, nil)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(amqpEmptyWait)
	return func(ctx context.Context) (int, error) {
		waited := time.Now()
		timer.Reset(amqpEmptyWait)
		defer timer.Stop()
		select {
		case d, ok := <-deliveries:
			if !ok {
				return 0, errors.New("RabbitMQ closed the consumer")
			}
			if err := d.Ack(false); err != nil {
				return 0, err
			}
			q.left.Add(-1)
			return 1, nil
		case <-timer.C:
			if q.left.Load() > held {
				return 0, errIdle
			}
			return 0, emptySince{at: waited}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, nil
}

// fill tops the queue up to target messages, publishing with confirms over setupConcurrency
// connections.
func (q *rabbit) fill(ctx context.Context, body []byte, target int64) error {
	need := target - q.left.Load()
	if need <= 0 {
		return nil
	}
	const window = 1000
	per := (need + setupConcurrency - 1) / setupConcurrency
	defer q.closeClients()
	err := parallel(ctx, setupConcurrency, func(int) error {
		ch, err := q.channel()
		if err != nil {
			return err
		}
		if err := ch.Confirm(false); err != nil {
			return err
		}
		msg := persistent
		msg.Body = body
		var pending []*amqp091.DeferredConfirmation
		for i := int64(0); i < per; i++ {
			if len(pending) == window {
				if _, err := pending[0].WaitContext(ctx); err != nil {
					return err
				}
				pending = pending[1:]
			}
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.queue, false, false, msg)
			if err != nil {
				return err
			}
			pending = append(pending, dc)
		}
		for _, dc := range pending {
			if _, err := dc.WaitContext(ctx); err != nil {
				return err
			}
		}
		q.left.Add(per)
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench: fill RabbitMQ %s: %w", q.queue, err)
	}
	return nil
}
