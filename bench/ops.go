package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/api/client"
)

// setupConcurrency is how many requests set-up (fills, entity creation) keeps in flight.
const setupConcurrency = 16

// queueDescription is a queue with the defaults, as an Atom entry.
const queueDescription = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`

// runPhase runs the phase p: it prepares what the phase needs (fills its queue), measures, and
// cleans up what must not weigh on the next phases (the sends' messages).
func (r *runner) runPhase(ctx context.Context, p planned) ([]Result, error) {
	op, clients := p.op, p.clients
	res := Result{Operation: op, Clients: clients, Prefetch: p.prefetch}
	var err error
	switch op {
	case OpSend, OpSendBatch:
		res, err = r.measure(ctx, res, func(w int) (iteration, error) {
			if op == OpSend {
				return r.sendWorker(r.gw(w), r.sink, "application/octet-stream", r.body, 1)
			}
			return r.sendWorker(r.gw(w), r.sink, batchContentType, r.batch, r.cfg.BatchSize)
		})
		if err == nil {
			// The sends' messages are purged so that they do not pile up over the run: a send
			// phase always starts on an empty queue, and the database stays the size the
			// receive phases are measured at.
			err = r.purge(ctx, r.sink.name)
		}
	case OpAMQPSend:
		res, err = r.amqpPhase(ctx, res, r.sink)
		if err == nil {
			err = r.purge(ctx, r.sink.name)
		}
	case OpAMQPPeekLock:
		if err := r.fillQueue(ctx, r.amqpWork, r.fillFor(op, p.prefetch, clients, p.prefetch)); err != nil {
			return nil, err
		}
		res, err = r.amqpPhase(ctx, res, r.amqpWork)
	case OpPeekLock, OpBatchSettle, OpReceiveDelete:
		per := 1
		if op == OpBatchSettle {
			per = r.cfg.SettleBatch
		}
		if err := r.fillQueue(ctx, r.work, r.fillFor(op, 0, clients, per)); err != nil {
			return nil, err
		}
		res, err = r.measure(ctx, res, func(w int) (iteration, error) {
			switch op {
			case OpPeekLock:
				return r.peekLockWorker(r.gw(w), r.work)
			case OpBatchSettle:
				return r.batchSettleWorker(r.gw(w), r.work)
			}
			return r.receiveDeleteWorker(r.gw(w), r.work)
		})
	default:
		if !r.isSetUp[op] {
			if err := r.setUpScenario(ctx, op); err != nil {
				return nil, fmt.Errorf("bench: set up %s: %w", op, err)
			}
			r.isSetUp[op] = true
		}
		if op == OpWake {
			return r.wake(ctx, clients)
		}
		if op == OpSQLSend {
			return r.sqlSend(ctx, clients)
		}
		res, err = r.scenario(ctx, res)
	}
	if err != nil {
		return []Result{res}, err
	}
	r.doneMu.Lock()
	r.done = append(r.done, res)
	r.doneMu.Unlock()
	return []Result{res}, nil
}

const batchContentType = "application/vnd.microsoft.servicebus.json"

// batchBody is a JSON batch of n copies of body, encoded once for the whole run.
func batchBody(body []byte, n int) []byte {
	items := make([]client.BatchMessage, n)
	text := string(body)
	for i := range items {
		items[i] = client.BatchMessage{Body: &text}
	}
	b, _ := json.Marshal(items)
	return b
}

// expectWorker sends a copy of the template t, one request an iteration, which must answer
// status; then done says how many messages the iteration counts.
func expectWorker(g *gateway, t *http.Request, status int, done func() int) iteration {
	return func(ctx context.Context) (int, error) {
		resp, err := g.do(ctx, t)
		if err != nil {
			return 0, err
		}
		if err := expect(resp, status); err != nil {
			return 0, err
		}
		return done(), nil
	}
}

// sendWorker sends body (n messages) to q, one request an iteration.
func (r *runner) sendWorker(g *gateway, q *queue, contentType string, body []byte, n int) (iteration, error) {
	t, err := g.template(client.NewSendMessageRequestWithBody(g.server, q.name, nil, contentType, bytes.NewReader(body)))
	if err != nil {
		return nil, err
	}
	return expectWorker(g, t, http.StatusCreated, func() int {
		q.left.Add(int64(n))
		return n
	}), nil
}

// peekLockWorker peek-locks one message of q (timeout 0) and completes it at its Location.
func (r *runner) peekLockWorker(g *gateway, q *queue) (iteration, error) {
	zero := 0
	lock, err := g.template(client.NewPeekLockMessageRequest(g.server, q.name, &client.PeekLockMessageParams{Timeout: &zero}))
	if err != nil {
		return nil, err
	}
	// The completion's method and headers; its path is the Location of each lock.
	complete, err := g.template(client.NewCompleteMessageRequest(g.server, q.name, "0", uuid.Nil, nil))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (int, error) {
		resp, err := g.do(ctx, lock)
		if err != nil {
			return 0, err
		}
		switch resp.StatusCode {
		case http.StatusNoContent:
			drain(resp)
			return 0, errEmpty
		case http.StatusCreated:
		default:
			return 0, expect(resp, http.StatusCreated)
		}
		loc := resp.Header.Get("Location")
		drain(resp)
		path, err := locationPath(loc)
		if err != nil {
			return 0, err
		}
		resp, err = g.doPath(ctx, complete, path)
		if err != nil {
			return 0, err
		}
		if err := expect(resp, http.StatusOK); err != nil {
			return 0, err
		}
		q.left.Add(-1)
		return 1, nil
	}, nil
}

// receiveDeleteWorker receives and deletes one message of q (timeout 0).
func (r *runner) receiveDeleteWorker(g *gateway, q *queue) (iteration, error) {
	zero := 0
	t, err := g.template(client.NewReceiveAndDeleteMessageRequest(g.server, q.name, &client.ReceiveAndDeleteMessageParams{Timeout: &zero}))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (int, error) {
		resp, err := g.do(ctx, t)
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
		q.left.Add(-1)
		return 1, nil
	}, nil
}

// batchSettleWorker locks up to SettleBatch messages of q with one $batch peek-lock (timeout 0)
// and completes all of them with one $settle.
func (r *runner) batchSettleWorker(g *gateway, q *queue) (iteration, error) {
	zero, count := 0, r.cfg.SettleBatch
	lock, err := g.template(client.NewPeekLockBatchRequest(g.server, q.name, &client.PeekLockBatchParams{Count: &count, Timeout: &zero}))
	if err != nil {
		return nil, err
	}
	settle, err := g.template(client.NewSettleMessagesRequestWithBody(g.server, q.name, nil, "application/json", nil))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer // the worker's response buffer, reused
	return func(ctx context.Context) (int, error) {
		resp, err := g.do(ctx, lock)
		if err != nil {
			return 0, err
		}
		switch resp.StatusCode {
		case http.StatusNoContent:
			drain(resp)
			return 0, errEmpty
		case http.StatusCreated:
		default:
			return 0, expect(resp, http.StatusCreated)
		}
		buf.Reset()
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("$batch: %w", err)
		}
		// A fresh body each time: the transport may still hold the last one.
		body, n := settlements(make([]byte, 0, 64*count+2), buf.Bytes(), "Complete")
		if n == 0 {
			return 0, fmt.Errorf("$batch: no lock tokens in %.200s", buf.Bytes())
		}
		resp, err = g.doBody(ctx, settle, body)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, expect(resp, http.StatusOK)
		}
		buf.Reset()
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("$settle: %w", err)
		}
		if ok := bytes.Count(buf.Bytes(), []byte(`"Status":200`)); ok != n {
			return 0, fmt.Errorf("$settle: %d of %d settled: %.300s", ok, n, buf.Bytes())
		}
		q.left.Add(-int64(n))
		return n, nil
	}, nil
}

var lockTokenKey = []byte(`"LockToken":"`)

// settlements appends to dst a $settle body that applies disposition to every lock token found
// in a $batch answer, and returns it with how many it names. It scans for the tokens instead of
// decoding the answer: the bodies it skips are the tool's own.
func settlements(dst, batch []byte, disposition string) ([]byte, int) {
	n := 0
	dst = append(dst, '[')
	for {
		i := bytes.Index(batch, lockTokenKey)
		if i < 0 || len(batch) < i+len(lockTokenKey)+36 {
			break
		}
		batch = batch[i+len(lockTokenKey):]
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = appendSettlement(dst, batch[:36], disposition)
		batch = batch[36:]
		n++
	}
	return append(dst, ']'), n
}

// appendSettlement appends one element of a $settle body.
func appendSettlement(dst, token []byte, disposition string) []byte {
	dst = append(dst, `{"LockToken":"`...)
	dst = append(dst, token...)
	dst = append(dst, `","Disposition":"`...)
	dst = append(dst, disposition...)
	return append(dst, `"}`...)
}

// fillFor is how many messages a receive phase of op at clients (with prefetch, for
// amqp-peek-lock) should find waiting: more than it can take in the phase, so that what it
// measures is the broker, never a queue run dry. The rate it can reach is bounded generously:
// half as much again as the best the run measured for op so far, as any receive measured
// before it, and as PostgreSQL's one-row INSERT per commit in the baseline (a receive of one
// message at a time has not come near it; three times that for batch settlement), or without a
// baseline a generous guess. perIteration is what one iteration may hold beyond that (a
// $batch, or a link's prefetched credit).
func (r *runner) fillFor(op string, prefetch, clients, perIteration int) int64 {
	bound := float64(4000 + 200*clients)
	if b := r.baselineRate(BaselineInsert); b > 0 {
		bound = 1.5 * b
	}
	if op == OpBatchSettle {
		bound *= 2
	} else {
		bound = max(bound, 1.5*r.fastestReceive())
	}
	switch op {
	case OpReceiveDelete:
		bound = max(bound, 1.5*r.doneRate(OpSend, clients))
	case OpAMQPPeekLock:
		bound = max(bound, 1.5*r.doneRate(OpAMQPSend, clients))
	}
	bound = max(bound, 1.5*r.rate(op, prefetch))
	seconds := r.cfg.Duration.Seconds()*1.2 + 0.5
	return int64(bound*seconds) + int64(clients*perIteration)
}

// fastestReceive is the best rate of a receive of one message at a time measured so far.
func (r *runner) fastestReceive() float64 {
	r.doneMu.Lock()
	defer r.doneMu.Unlock()
	best := 0.0
	for _, d := range r.done {
		if slices.Contains(receiveOps, d.Operation) && d.Operation != OpBatchSettle && d.Operation != OpSession {
			best = max(best, d.Rate())
		}
	}
	return best
}

// baselineRate is the rate of a baseline phase, 0 when there is none.
func (r *runner) baselineRate(op string) float64 {
	for _, b := range r.baseline {
		if b.Operation == op {
			return b.Rate()
		}
	}
	return 0
}

// doneRate is the rate of op at clients measured earlier in the run, 0 when there is none.
func (r *runner) doneRate(op string, clients int) float64 {
	r.doneMu.Lock()
	defer r.doneMu.Unlock()
	for _, d := range r.done {
		if d.Operation == op && d.Clients == clients {
			return d.Rate()
		}
	}
	return 0
}

// fillQueue tops q up to target messages with concurrent batch sends spread over the gateways,
// printing progress when it takes a while.
func (r *runner) fillQueue(ctx context.Context, q *queue, target int64) error {
	need := target - q.left.Load()
	if need <= 0 {
		return nil
	}
	requests := int((need + int64(r.fillCount) - 1) / int64(r.fillCount))
	templates := make([]*http.Request, r.loaded())
	for i, g := range r.gws[:r.loaded()] {
		t, err := g.template(client.NewSendMessageRequestWithBody(g.server, q.name, nil, batchContentType, bytes.NewReader(r.fill)))
		if err != nil {
			return err
		}
		templates[i] = t
	}
	var sent atomic.Int64
	stop := r.fillProgress(q.name, int64(requests*r.fillCount), &sent)
	defer stop()
	err := parallel(ctx, requests, func(i int) error {
		resp, err := r.gw(i).do(ctx, templates[i%r.loaded()])
		if err != nil {
			return err
		}
		if err := expect(resp, http.StatusCreated); err != nil {
			return err
		}
		q.left.Add(int64(r.fillCount))
		sent.Add(int64(r.fillCount))
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench: fill %s: %w", q.name, err)
	}
	return nil
}

// fillProgress prints how a long fill goes, every 2 seconds, until stopped.
func (r *runner) fillProgress(what string, total int64, done *atomic.Int64) func() {
	if r.cfg.Progress == nil || total < 50_000 {
		return func() {}
	}
	r.logf("  filling %s with %d messages...", what, total)
	start := time.Now()
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				n := done.Load()
				el := time.Since(start).Seconds()
				r.logf("  filling %s: %d of %d (%.0f msgs/s)", what, n, total, float64(n)/el)
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// purge deletes every message of an entity (DELETE {path}/messages, an sbgate extension).
func (r *runner) purge(ctx context.Context, path string) error {
	resp, err := r.gws[0].api.PurgeMessages(ctx, path, nil)
	if err != nil {
		return fmt.Errorf("bench: purge %s: %w", path, err)
	}
	if err := expect(resp, http.StatusOK); err != nil {
		return fmt.Errorf("bench: purge %s: %w", path, err)
	}
	return nil
}

// createEntity creates an entity from its Atom description and remembers to delete it.
func (r *runner) createEntity(ctx context.Context, path, description string) error {
	resp, err := r.gws[0].api.PutEntityWithBody(ctx, path, nil, "application/atom+xml", strings.NewReader(description))
	if err != nil {
		return fmt.Errorf("bench: create %s: %w", path, err)
	}
	if err := expect(resp, http.StatusCreated); err != nil {
		return fmt.Errorf("bench: create %s: %w", path, err)
	}
	r.createdMu.Lock()
	r.created = append(r.created, path)
	r.createdMu.Unlock()
	return nil
}

// setUp creates the queues of the basic operations. A scenario's entities are created before its
// first phase (setUpScenario), so that the basic operations run on a database without the
// scenarios' backlog and idle sessions.
func (r *runner) setUp(ctx context.Context) error {
	r.sink = &queue{name: r.cfg.Queue + "-send"}
	r.work = &queue{name: r.cfg.Queue + "-recv"}
	queues := []*queue{r.sink, r.work}
	if slices.Contains(r.cfg.Operations, OpAMQPPeekLock) {
		r.amqpWork = &queue{name: r.cfg.Queue + "-amqp-recv"}
		queues = append(queues, r.amqpWork)
	}
	for _, q := range queues {
		if err := r.createEntity(ctx, q.name, queueDescription); err != nil {
			return err
		}
	}
	return nil
}

// tearDown deletes what the run created, unless it is all thrown away anyway.
func (r *runner) tearDown() {
	if r.cfg.Disposable || len(r.created) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_ = parallel(ctx, len(r.created), func(i int) error {
		if resp, err := r.gws[0].api.DeleteEntity(ctx, r.created[i], nil); err == nil {
			drain(resp)
		}
		return nil
	})
}

// parallel runs fn(0..n-1) on setupConcurrency goroutines and returns the first error.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(setupConcurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil || failed.Load() {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
