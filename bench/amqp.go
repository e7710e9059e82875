package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/sas"
)

// The AMQP operations drive the gateways' AMQP listeners as the Service Bus SDKs do, through
// github.com/Azure/go-amqp (the AMQP client the Go SDK is built on). Each client is one
// connection (SASL PLAIN with the connection string's key) with one session and one link, as an
// application with one sender or one receiver has.
const (
	// OpAMQPSend sends one message a transfer, unsettled: each waits for the gateway's accepted
	// disposition, and the gateway's link credit paces the sender.
	OpAMQPSend = "amqp-send"
	// OpAMQPPeekLock receives in peek-lock mode on a link that prefetches (a phase per credit
	// of Config.AMQPPrefetch) and completes each message with an accepted disposition, settled
	// in receiver settle mode second as the SDKs do (the completion waits for the gateway's
	// answer).
	OpAMQPPeekLock = "amqp-peek-lock"
)

// AMQPOperations run at every concurrency level after the HTTP ones when asked for; "all" has
// them when the gateways' AMQP connection strings are known (Config.AMQPConnectionStrings).
var AMQPOperations = []string{OpAMQPSend, OpAMQPPeekLock}

// amqpEmptyWait is how long a peek-lock client waits for a message before it takes its queue
// for drained: well past what the gateway takes to feed credit from a queue that has messages.
const amqpEmptyWait = time.Second

// amqpGateway is how to reach one gateway's AMQP listener.
type amqpGateway struct {
	addr string // amqp://host:port or amqps://host:port
	sasl amqp.SASLType
	tls  *tls.Config
}

// parseAMQPConnectionString reads a connection string sbgate prints for its AMQP listener: plain
// AMQP with UseDevelopmentEmulator=true, as the SDKs read it, else AMQP over TLS.
func parseAMQPConnectionString(s string, insecure bool) (*amqpGateway, error) {
	cs, err := sas.ParseConnectionString(s, "http")
	if err != nil {
		return nil, err
	}
	if cs.Key == "" {
		return nil, fmt.Errorf("%w: the AMQP operations need SharedAccessKeyName and SharedAccessKey, not a signature", sas.ErrConnectionString)
	}
	scheme, port := "amqps", "5671"
	for _, part := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(part, "=")
		if strings.EqualFold(strings.TrimSpace(k), "UseDevelopmentEmulator") && strings.EqualFold(strings.TrimSpace(v), "true") {
			scheme, port = "amqp", "5672"
		}
	}
	host := cs.Endpoint.Host
	if cs.Endpoint.Port() == "" {
		host += ":" + port
	}
	g := &amqpGateway{addr: (&url.URL{Scheme: scheme, Host: host}).String(), sasl: amqp.SASLTypePlain(cs.KeyName, cs.Key)}
	if scheme == "amqps" {
		g.tls = &tls.Config{ServerName: cs.Endpoint.Hostname(), InsecureSkipVerify: insecure} //nolint:gosec // opt-in for self-signed brokers
	}
	return g, nil
}

// amqpClient is one client's connection, session and link; close ends them.
type amqpClient struct {
	conn *amqp.Conn
	sess *amqp.Session
}

func (g *amqpGateway) dial(ctx context.Context) (*amqpClient, error) {
	conn, err := amqp.Dial(ctx, g.addr, &amqp.ConnOptions{SASLType: g.sasl, TLSConfig: g.tls})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", g.addr, err)
	}
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("session on %s: %w", g.addr, err)
	}
	return &amqpClient{conn: conn, sess: sess}, nil
}

// amqpGW is the AMQP gateway client w of a phase talks to, the same gateway as r.gw(w).
func (r *runner) amqpGW(w int) *amqpGateway { return r.amqpGws[w%min(r.loaded(), len(r.amqpGws))] }

// amqpPhase measures an AMQP operation at res.Clients clients, then closes every client's
// connection; the peek-lock receivers first give back what they prefetched and did not take.
func (r *runner) amqpPhase(ctx context.Context, res Result, q *queue) (Result, error) {
	var mu sync.Mutex
	var cleanups []func()
	defer func() {
		var wg sync.WaitGroup
		for _, c := range cleanups {
			wg.Add(1)
			go func() { defer wg.Done(); c() }()
		}
		wg.Wait()
	}()
	return r.measure(ctx, res, func(w int) (iteration, error) {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := r.amqpGW(w).dial(dctx)
		if err != nil {
			return nil, err
		}
		var it iteration
		var cleanup func()
		if res.Operation == OpAMQPSend {
			it, err = r.amqpSendWorker(dctx, c, q)
		} else {
			it, cleanup, err = r.amqpPeekLockWorker(dctx, c, q, res.Prefetch, int64(res.Clients*res.Prefetch))
		}
		mu.Lock()
		cleanups = append(cleanups, func() {
			if cleanup != nil {
				cleanup()
			}
			c.conn.Close()
		})
		mu.Unlock()
		return it, err
	})
}

// amqpSendWorker sends one message of r.body to q a transfer, unsettled.
func (r *runner) amqpSendWorker(ctx context.Context, c *amqpClient, q *queue) (iteration, error) {
	s, err := c.sess.NewSender(ctx, q.name, &amqp.SenderOptions{SettlementMode: amqp.SenderSettleModeUnsettled.Ptr()})
	if err != nil {
		return nil, fmt.Errorf("attach sender to %s: %w", q.name, err)
	}
	return func(ctx context.Context) (int, error) {
		if err := s.Send(ctx, &amqp.Message{Data: [][]byte{r.body}}, nil); err != nil {
			return 0, err
		}
		q.left.Add(1)
		return 1, nil
	}, nil
}

// amqpPeekLockWorker receives one message of q a time from a prefetching peek-lock link and
// completes it. It manages the link's credit itself, as the Go SDK does: credit at
// first, topped up each time half of it was taken, so that its cleanup can drain the credit and
// then release what the link prefetched but the phase did not take; those messages do not stay
// locked into the next phases. held is what the phase's links can hold at once: a link that
// waited amqpEmptyWait for nothing takes the queue for empty only when no more than that is
// queued.
func (r *runner) amqpPeekLockWorker(ctx context.Context, c *amqpClient, q *queue, credit int, held int64) (iteration, func(), error) {
	rcv, err := c.sess.NewReceiver(ctx, q.name, &amqp.ReceiverOptions{
		Credit:                    -1, // managed here
		RequestedSenderSettleMode: amqp.SenderSettleModeUnsettled.Ptr(),
		SettlementMode:            amqp.ReceiverSettleModeSecond.Ptr(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("attach receiver to %s: %w", q.name, err)
	}
	prefetch := uint32(credit)
	if err := rcv.IssueCredit(prefetch); err != nil {
		return nil, nil, err
	}
	refill := max(1, prefetch/2)
	var taken uint32 // only this worker's goroutine touches it
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rcv.DrainCredit(ctx, nil)
		for m := rcv.Prefetched(); m != nil; m = rcv.Prefetched() {
			_ = rcv.ReleaseMessage(ctx, m)
		}
		_ = rcv.Close(ctx)
	}
	return func(ctx context.Context) (int, error) {
		waited := time.Now()
		wctx, cancel := context.WithTimeout(ctx, amqpEmptyWait)
		m, err := rcv.Receive(wctx, nil)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				if q.left.Load() > held {
					return 0, errIdle // more are queued than all the links can hold
				}
				return 0, emptySince{at: waited}
			}
			return 0, err
		}
		if taken++; taken >= refill {
			if err := rcv.IssueCredit(taken); err != nil {
				return 0, err
			}
			taken = 0
		}
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			return 0, err
		}
		q.left.Add(-1)
		return 1, nil
	}, cleanup, nil
}
