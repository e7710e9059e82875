package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/broker"
	amqpdoor "github.com/sbgate/sbgate/handlers/amqp"
	"github.com/sbgate/sbgate/internal/eventually"
)

// liveHeap is the heap in use after a collection: what the process keeps, not what it made.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// A peer that floods $cbs with requests whose replies cannot go out (its reply link has no
// credit), each request naming a 150 KB operation, makes the connection keep only clipped
// replies, at most amqpdoor.MaxPendingReplies of them; past that the reply link is detached with
// amqp:resource-limit-exceeded, and the request link still serves. Before the bound and the
// clipping, each waiting reply kept the whole echoed name (30 MB for 200 requests here).
func TestRepliesWaitingForCreditAreBounded(t *testing.T) {
	b := newBrokerAlone(t)
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous())
	ctx := ctxT(t)
	stuck, err := c.sess.NewReceiver(ctx, "$cbs", &goamqp.ReceiverOptions{TargetAddress: "stuck", Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	op := strings.Repeat("o", 150<<10)
	send := func(n int) {
		t.Helper()
		for i := range n {
			if err := c.req.Send(ctx, &goamqp.Message{
				Properties:            &goamqp.MessageProperties{MessageID: uint64(i), ReplyTo: ptr("stuck")},
				ApplicationProperties: map[string]any{"operation": op, "type": "servicebus.windows.net:sastoken", "name": "q"},
				Value:                 "token",
			}, nil); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
	}

	before := liveHeap()
	const held = 200
	send(held)
	grew := int64(liveHeap()) - int64(before)
	t.Logf("%d replies waiting for credit: heap %+d KB", held, grew>>10)
	// What may stay: amqpdoor.MaxInFlight requests still running (150 KB each) and the clipped replies.
	if limit := int64(amqpdoor.MaxInFlight*(150<<10) + held*(4<<10) + 4<<20); grew > limit {
		t.Errorf("%d waiting replies grew the heap by %d KB; the bound is %d KB", held, grew>>10, limit>>10)
	}

	// One reply read to see its text: the operation name is clipped.
	if err := stuck.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	m, err := stuck.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, desc := status(m); code != 400 || len(desc) > 1024 || !strings.Contains(desc, "ooo...") {
		t.Errorf("reply to an unknown operation: %d, %d bytes: %.200q", code, len(desc), desc)
	}

	// Past amqpdoor.MaxPendingReplies the reply link goes, with why.
	send(amqpdoor.MaxPendingReplies - held + 2)
	_, err = stuck.Receive(ctx, nil)
	var le *goamqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != goamqp.ErrCondResourceLimitExceeded {
		t.Fatalf("reply link after %d unread replies: %v; want a detach with %s", amqpdoor.MaxPendingReplies+1, err, goamqp.ErrCondResourceLimitExceeded)
	}
	// The connection and its request link still serve a well-behaved reply link.
	if code, _ := c.putToken(t, "sb://"+b.amqpAddr+"/missing", "token"); code == 0 {
		t.Error("put-token after the reply link was detached got no answer")
	}
}

// completionGate is the store the AMQP layer uses, holding the first completion (the deletion a
// receive-and-delete link makes before it sends) until the test opens the gate.
type completionGate struct {
	broker.Store
	entered, open, done chan struct{}
	once, doneOnce      sync.Once
}

func (g *completionGate) Settle(ctx context.Context, t broker.Target, reqs []broker.SettleRequest) []broker.SettleResult {
	if len(reqs) > 0 && reqs[0].Op == broker.Complete {
		g.once.Do(func() {
			close(g.entered)
			<-g.open
		})
	}
	res := g.Store.Settle(ctx, t, reqs)
	if len(reqs) > 0 && reqs[0].Op == broker.Complete {
		g.doneOnce.Do(func() { close(g.done) })
	}
	return res
}

// A receive-and-delete link whose peer detaches after the broker deleted a credit's worth to
// send, and before it sent them, puts them back: none is lost (the Go SDK's
// TestReceiverReceiveAndDeleteDoesNotLoseMessages closes its receiver so, under load).
func TestReceiveAndDeleteDetachLosesNothing(t *testing.T) {
	gate := &completionGate{entered: make(chan struct{}), open: make(chan struct{}), done: make(chan struct{})}
	b := newBrokerWith(t, nil, func(st broker.Store) broker.Store { gate.Store = st; return gate })
	q := b.createQueue(t, "q", nil)
	const total = 50
	msgs := make([]broker.Message, total)
	for i := range msgs {
		msgs[i] = broker.Message{Body: []byte(fmt.Sprint(i)), MessageID: fmt.Sprint(i)}
	}
	if err := b.store.Send(t.Context(), q, msgs); err != nil {
		t.Fatal(err)
	}
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	ctx := ctxT(t)
	r, err := c.sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: total, RequestedSenderSettleMode: ptr(goamqp.SenderSettleModeSettled)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-gate.entered:
	case <-ctx.Done():
		t.Fatal("the link did not delete what it was to send")
	}
	// The peer leaves while the deletion runs (Close returns once the broker answered the
	// detach); then the deletion commits, and the sends fail.
	if err := r.Close(ctx); err != nil {
		t.Logf("close: %v", err)
	}
	close(gate.open)
	<-gate.done
	got := 0
	for m := r.Prefetched(); m != nil; m = r.Prefetched() {
		got++
	}
	eventually.NoError(t, "the sends to come back to the queue", func() error {
		e, err := b.store.GetEntity(t.Context(), "q")
		if err == nil && e.Counts.Active+int64(got) == total {
			return nil
		}
		return fmt.Errorf("%d received, %+v in the queue (%v); want all %d",
			got, e.Counts, err, total)
	})
	if got != 0 {
		t.Logf("%d of %d reached the peer before its detach", got, total)
	}
}
