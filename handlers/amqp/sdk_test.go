package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/internal/eventually"
)

func TestSDKSendReceiveAndDelete(t *testing.T) {
	b, c, ctx, s := sdkQueue(t, "q", nil)
	enq := time.Date(2030, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	err := s.SendMessage(ctx, &azservicebus.Message{
		Body:          []byte("hello"),
		MessageID:     to.Ptr("m1"),
		CorrelationID: to.Ptr("c1"),
		ContentType:   to.Ptr("text/plain"),
		Subject:       to.Ptr("label"),
		To:            to.Ptr("to"),
		ReplyTo:       to.Ptr("reply"),
		PartitionKey:  to.Ptr("pk"),
		TimeToLive:    to.Ptr(time.Hour),
		ApplicationProperties: map[string]any{
			"s": "str", "i": int64(42), "i32": int32(7), "f": 1.5, "b": true, "t": enq,
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}

	r := newReceiver(t, c, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if string(m.Body) != "hello" || m.MessageID != "m1" || *m.CorrelationID != "c1" || *m.ContentType != "text/plain" ||
		*m.Subject != "label" || *m.To != "to" || *m.ReplyTo != "reply" || *m.PartitionKey != "pk" || *m.TimeToLive != time.Hour {
		t.Errorf("message = %+v", m)
	}
	if *m.SequenceNumber < 1 || m.EnqueuedTime == nil || m.DeliveryCount != 1 {
		t.Errorf("broker properties: seq %v enqueued %v count %d", m.SequenceNumber, m.EnqueuedTime, m.DeliveryCount)
	}
	want := map[string]any{"s": "str", "i": int64(42), "i32": int32(7), "f": 1.5, "b": true, "t": enq} // each in its own type
	for k, v := range want {
		got := m.ApplicationProperties[k]
		if tv, ok := v.(time.Time); ok {
			if gt, ok := got.(time.Time); !ok || !gt.Equal(tv) {
				t.Errorf("property %s = %v (%T), want %v", k, got, got, v)
			}
			continue
		}
		if got != v {
			t.Errorf("property %s = %v (%T), want %v (%T)", k, got, got, v, v)
		}
	}
	// Deleted once handed to the connection: nothing is left, not even past the lock the
	// claim took.
	waitEmpty(t, b, "q")
	b.clock.Advance(2 * time.Minute)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if again, _ := r.ReceiveMessages(short, 1, nil); len(again) != 0 {
		t.Errorf("received again after receive-and-delete: %v", again)
	}
}

// waitEmpty waits until the entity at path holds no message: completions run after the
// deliveries they follow are handed to the connection, so a client may be a moment ahead.
func waitEmpty(t *testing.T, b *testBroker, path string) {
	t.Helper()
	eventually.NoError(t, path+" to be empty", func() error {
		e, err := b.store.GetEntity(t.Context(), path)
		if err == nil && e.Counts.Total() == 0 {
			return nil
		}
		return fmt.Errorf("%s still holds %+v (%v)", path, e.Counts, err)
	})
}

func TestSDKBatchAndPeekLockSettlements(t *testing.T) {
	b, c, ctx, s := sdkQueue(t, "q", nil)
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"complete", "abandon", "dead"} {
		if err := batch.AddMessage(&azservicebus.Message{Body: []byte(body)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}

	r := newReceiver(t, c, "q", nil)
	var got []*azservicebus.ReceivedMessage
	for len(got) < 3 {
		msgs, err := r.ReceiveMessages(ctx, 3-len(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs...)
	}
	for i, m := range got {
		if want := []string{"complete", "abandon", "dead"}[i]; string(m.Body) != want {
			t.Fatalf("message %d = %q, want %q (in order)", i, m.Body, want)
		}
		if m.LockedUntil == nil || m.LockedUntil.Before(time.Now()) {
			t.Errorf("message %d locked until %v", i, m.LockedUntil)
		}
	}
	// The lock token the SDK read from the delivery tag is the store's: completing it over
	// HTTP works, and then the SDK's complete finds the lock gone.
	tok := uuid.UUID(got[0].LockToken).String()
	resp := b.httpDo(t, "DELETE", fmt.Sprintf("/q/messages/%d/%s", *got[0].SequenceNumber, tok), "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP complete of the AMQP lock: %s", resp.Status)
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err == nil {
		t.Error("completing a completed message succeeded")
	} else if sbErr := (*azservicebus.Error)(nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Errorf("second complete: %v, want lock lost", err)
	}
	if err := r.AbandonMessage(ctx, got[1], nil); err != nil {
		t.Fatal(err)
	}
	if err := r.DeadLetterMessage(ctx, got[2], &azservicebus.DeadLetterOptions{
		Reason: to.Ptr("bad"), ErrorDescription: to.Ptr("very bad"),
	}); err != nil {
		t.Fatal(err)
	}

	// The abandoned message comes again, its delivery counted.
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "abandon" || msgs[0].DeliveryCount != 2 {
		t.Fatalf("after abandon: %v, %v", msgs, err)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}

	dlq := newReceiver(t, c, "q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	msgs, err = dlq.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("dead-letter queue: %v, %v", msgs, err)
	}
	if d := msgs[0]; string(d.Body) != "dead" || d.DeadLetterReason == nil || *d.DeadLetterReason != "bad" ||
		d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription != "very bad" {
		t.Errorf("dead-lettered message = %+v", d)
	}
	if err := dlq.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	e, err := b.store.GetEntity(ctx, "q")
	if err != nil || e.Counts.Total() != 0 {
		t.Errorf("left: %+v, %v", e.Counts, err)
	}
	_ = broker.KindQueue
}

// gatedCompletes holds every completion back until release is closed, telling pending first.
type gatedCompletes struct {
	broker.Store
	pending chan struct{}
	release chan struct{}
}

func (g *gatedCompletes) Settle(ctx context.Context, t broker.Target, reqs []broker.SettleRequest) []broker.SettleResult {
	if len(reqs) > 0 && reqs[0].Op == broker.Complete {
		select {
		case g.pending <- struct{}{}:
		default:
		}
		<-g.release
	}
	return g.Store.Settle(ctx, t, reqs)
}

// A receive-and-delete link deletes a message before it sends it: a peer that has the message
// does not find it in the queue any more (a peek right after the receive found it while the
// deletion that followed the transfer was still under way; seen in the JS client's test).
func TestReceiveAndDeleteDeletesBeforeItSends(t *testing.T) {
	gate := &gatedCompletes{pending: make(chan struct{}, 1), release: make(chan struct{})}
	release := sync.OnceFunc(func() { close(gate.release) })
	t.Cleanup(release) // a failed test leaves no completion waiting
	b := newBrokerWith(t, nil, func(s broker.Store) broker.Store { gate.Store = s; return gate })
	b.createQueue(t, "q", nil)
	c := b.client(t, "root")
	ctx := ctxT(t)
	s := newSender(t, c, "q")
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("once")}, nil); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, c, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	type received struct {
		msgs []*azservicebus.ReceivedMessage
		err  error
	}
	got := make(chan received, 1)
	go func() {
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		got <- received{msgs, err}
	}()
	select {
	case <-gate.pending:
	case <-ctx.Done():
		t.Fatal("the link never completed the message")
	}
	// The deletion is held back: the message must not have been sent yet.
	select {
	case res := <-got:
		t.Fatalf("the peer had %d message(s) (%v) before their deletion was made", len(res.msgs), res.err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	if res := <-got; res.err != nil || len(res.msgs) != 1 || string(res.msgs[0].Body) != "once" {
		t.Fatalf("received %v, %v; want the message", res.msgs, res.err)
	}
	e, err := b.store.GetEntity(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if left, err := b.store.Browse(ctx, e, broker.SubQueueMain, 0, 10); err != nil || len(left) != 0 {
		t.Fatalf("the queue still holds %d message(s) after the receive (%v)", len(left), err)
	}
}
