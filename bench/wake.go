package bench

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbgate/sbgate/api/client"
)

// wakePollSeconds is how long each wake receiver's long poll waits.
const wakePollSeconds = 30

// wakeSettle is how long the sender waits, once every receiver has sent its first long poll, for
// those requests to reach their gateway, so that the first measured message wakes a waiting
// receiver rather than meeting one on its way in.
const wakeSettle = 100 * time.Millisecond

// wakeOvertime is how long a wake phase may run past its duration waiting for its first
// measured wake-up.
const wakeOvertime = 30 * time.Second

// wake runs the wake scenario with its receivers on the sender's gateway and, when there are
// two gateways or more, with its receivers on the others.
func (r *runner) wake(ctx context.Context, clients int) ([]Result, error) {
	receivers := r.cfg.WakeReceivers
	if receivers <= 0 {
		receivers = clients
	}
	var out []Result
	res, err := r.wakePhase(ctx, receivers, "same gateway", r.gws[:1])
	out = append(out, res)
	if err != nil || len(r.gws) < 2 {
		return out, err
	}
	res, err = r.wakePhase(ctx, receivers, "other gateway", r.gws[1:])
	return append(out, res), err
}

// wakePhase measures, for the phase's duration, how long a message sent through gateway 0 takes
// to reach one of receivers long-polling through recvGWs (round-robin): the time from the send's
// 201 to the receiver having read the message, clamped at 0 (the receiver may have it before the
// sender sees its 201). The sender sends the next message only once the last one was received, so
// each message wakes exactly one receiver.
func (r *runner) wakePhase(ctx context.Context, receivers int, variant string, recvGWs []*gateway) (Result, error) {
	res := Result{Operation: OpWake, Variant: variant, Clients: receivers, Latency: true}
	q := r.wakeQueue
	sender := r.gws[0]
	send, recvs, err := r.wakeRequests(q.name, recvGWs)
	if err != nil {
		return res, err
	}

	// The receivers poll until the sender is done. The sender sends for the phase's duration, and
	// past it until one wake-up was measured: a latency row with no sample says nothing.
	recvCtx, stopReceivers := context.WithCancel(ctx)
	defer stopReceivers()
	sendCtx, stopSender := context.WithTimeout(ctx, r.cfg.Duration+wakeOvertime)
	defer stopSender()
	got := make(chan time.Time, receivers)
	var errs atomic.Int64
	var firstErr atomic.Pointer[string]
	fail := func(err error) {
		errs.Add(1)
		msg := err.Error()
		firstErr.CompareAndSwap(nil, &msg)
	}
	var started, wg sync.WaitGroup
	started.Add(receivers)
	for i := range receivers {
		g, t := recvGWs[i%len(recvGWs)], recvs[i%len(recvGWs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			wakeReceive(recvCtx, g, t, got, fail)
		}()
	}

	stopCPU := r.cpuMeasure()
	start := time.Now()
	deadline := start.Add(r.cfg.Duration)
	var woken atomic.Int64
	stopProgress := r.progress("wake, "+variant, receivers, start, &woken)
	started.Wait()
	latencies, sendErr := r.wakeSend(sendCtx, sender, send, deadline, got, &woken)
	stopReceivers()
	wg.Wait()
	res.Elapsed = time.Since(start)
	stopCPU(&res)
	stopProgress()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if sendErr != nil {
		fail(sendErr)
	}
	// A message still on its way when the phase ended may be left in the queue; the next wake
	// phase must start on an empty one.
	if err := r.purge(ctx, q.name); err != nil {
		return res, err
	}
	res.Messages, res.Iterations, res.Errors = woken.Load(), woken.Load(), errs.Load()
	if p := firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	res.P50, res.P99 = percentiles(latencies)
	return res, nil
}

// wakeRequests are the templates of the wake phase's requests: the send through gateway 0 to
// queue, and a long-polling receive through each of recvGWs.
func (r *runner) wakeRequests(queue string,
	recvGWs []*gateway) (send *http.Request, recvs []*http.Request, err error) {
	sender := r.gws[0]
	send, err = sender.template(client.NewSendMessageRequestWithBody(sender.server, queue, nil,
		"application/octet-stream", bytes.NewReader(r.body)))
	if err != nil {
		return nil, nil, err
	}
	poll := wakePollSeconds
	recvs = make([]*http.Request, len(recvGWs))
	for i, g := range recvGWs {
		if recvs[i], err = g.template(client.NewReceiveAndDeleteMessageRequest(g.server, queue,
			&client.ReceiveAndDeleteMessageParams{Timeout: &poll})); err != nil {
			return nil, nil, err
		}
	}
	return send, recvs, nil
}

// wakeReceive long-polls through g with the receive t until ctx ends, telling got when it has
// read a message, and fail each error (backing off while they repeat).
func wakeReceive(ctx context.Context, g *gateway, t *http.Request, got chan<- time.Time,
	fail func(error)) {
	failures := 0
	for ctx.Err() == nil {
		resp, err := g.do(ctx, t)
		if err == nil && resp.StatusCode == http.StatusNoContent {
			drain(resp)
			continue
		}
		if err == nil {
			err = expect(resp, http.StatusOK)
		}
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
				failures++
				backOff(ctx, failures)
			}
			continue
		}
		failures = 0
		select { // after expect read the body: the receiver has the message
		case got <- time.Now():
		case <-ctx.Done():
		}
	}
}

// wakeSend sends through sender with the send request, once the receivers' first polls have
// had time to arrive, until deadline and one wake-up at least, each message once the last was
// received (got), and returns how long each took to be received. ctx ending ends it without
// an error.
func (r *runner) wakeSend(ctx context.Context, sender *gateway, send *http.Request,
	deadline time.Time, got <-chan time.Time, woken *atomic.Int64) ([]time.Duration, error) {
	var latencies []time.Duration
	settle := time.NewTimer(min(wakeSettle, r.cfg.Duration/10))
	defer settle.Stop()
	select {
	case <-ctx.Done():
		return latencies, nil
	case <-settle.C:
	}
	for time.Now().Before(deadline) || len(latencies) == 0 {
		resp, err := sender.do(ctx, send)
		if err != nil {
			if ctx.Err() != nil {
				return latencies, nil
			}
			return latencies, err
		}
		if err := expect(resp, http.StatusCreated); err != nil {
			return latencies, err
		}
		sent := time.Now()
		select {
		case <-ctx.Done():
			return latencies, nil
		case at := <-got:
			latencies = append(latencies, max(0, at.Sub(sent)))
			woken.Add(1)
		}
	}
	return latencies, nil
}
