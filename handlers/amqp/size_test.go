package amqp_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/broker"
)

// A receive link whose max-message-size is below a message's size cannot take it: the link
// hands out what comes before it, then detaches with amqp:link:message-size-exceeded and gives
// the message back with its delivery counted, deleting nothing in receive-and-delete mode.
// Before, a peek-lock link released it and claimed it again at once, forever; a
// receive-and-delete link deleted it and lost it. Counted, it is dead-lettered at
// MaxDeliveryCount and stops blocking the entity for such a receiver.
func TestReceiveLinkBelowAMessageSize(t *testing.T) {
	for _, mode := range []string{"peek-lock", "receive-and-delete"} {
		t.Run(mode, func(t *testing.T) {
			watch := &releaseWatch{released: make(chan struct{}, 1)}
			b := newBrokerWith(t, nil, func(s broker.Store) broker.Store { watch.Store = s; return watch })
			ctx := ctxT(t)
			q := b.createQueue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 2 })
			big := bytes.Repeat([]byte("b"), 2000)
			if err := b.store.Send(ctx, q, []broker.Message{
				{Body: []byte("a")}, {Body: big}, {Body: []byte("c")},
			}); err != nil {
				t.Fatal(err)
			}
			c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
			attach := func() *goamqp.Receiver {
				t.Helper()
				opts := &goamqp.ReceiverOptions{Credit: 10, MaxMessageSize: 1000}
				if mode == "receive-and-delete" {
					opts.RequestedSenderSettleMode = ptr(goamqp.SenderSettleModeSettled)
				}
				r, err := c.sess.NewReceiver(ctx, "q", opts)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// receive takes a message, and settle accepts it on a peek-lock link.
			receive := func(r *goamqp.Receiver) *goamqp.Message {
				t.Helper()
				m, err := r.Receive(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			settle := func(r *goamqp.Receiver, m *goamqp.Message) {
				t.Helper()
				if mode == "peek-lock" {
					if err := r.AcceptMessage(ctx, m); err != nil {
						t.Fatalf("accept %q: %v", m.GetData(), err)
					}
				}
			}
			tooLarge := func(r *goamqp.Receiver) {
				t.Helper()
				_, err := r.Receive(ctx, nil)
				var ae *goamqp.Error
				if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondMessageSizeExceeded {
					t.Fatalf("receive past the large message: %v; want the link detached with %s", err, goamqp.ErrCondMessageSizeExceeded)
				}
			}
			// state is the queue's messages (the main subqueue, then the dead-letter one) by
			// body length and delivery count.
			state := func() []int32 {
				t.Helper()
				var got []int32
				for _, sq := range []broker.SubQueue{broker.SubQueueMain, broker.SubQueueDeadLetter} {
					msgs, err := b.store.Browse(ctx, q, sq, 0, 10)
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range msgs {
						got = append(got, int32(len(m.Body)), m.DeliveryCount)
					}
				}
				return got
			}

			r := attach()
			a := receive(r)
			if string(a.GetData()) != "a" {
				t.Fatalf("first message %q", a.GetData())
			}
			// The link gives the large message and "c", claimed with "a", back at once, then
			// waits for the peer's outcome of "a" before it detaches: an outcome sent after the
			// detach would be lost.
			// Delivery counts as the service shows them (failed deliveries plus one): the large
			// message's delivery failed, "c"'s was given back unseen.
			held := []int32{2000, 2, 1, 1}
			if mode == "peek-lock" {
				held = append([]int32{1, 1}, held...) // "a", locked, then the two given back
			}
			select {
			case <-watch.released:
			case <-ctx.Done():
				t.Fatal("the link did not give the messages after \"a\" back")
			}
			if got := state(); !slices.Equal(got, held) {
				t.Fatalf("given back: (size, delivery count) %v; want %v", got, held)
			}
			settle(r, a)
			tooLarge(r)
			// The large one counted once; "c" went back uncounted.
			if got, want := state(), []int32{2000, 2, 1, 1}; !slices.Equal(got, want) {
				t.Fatalf("after the first link: (size, delivery count) %v; want %v", got, want)
			}
			// Its second abandon is its last delivery (MaxDeliveryCount 2): it goes to the
			// dead-letter subqueue, and the entity flows again.
			tooLarge(attach())
			r = attach()
			if m := receive(r); string(m.GetData()) != "c" {
				t.Fatalf("after two counted attempts got %q; want c", m.GetData())
			}
			dead, err := b.store.Browse(ctx, q, broker.SubQueueDeadLetter, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(dead) != 1 || len(dead[0].Body) != 2000 || dead[0].DeadLetterReason != "MaxDeliveryCountExceeded" {
				t.Fatalf("dead-letter subqueue %v", dead)
			}
		})
	}
}

// releaseWatch is the store the AMQP layer uses, telling when a release (a link giving messages
// back) has been made.
type releaseWatch struct {
	broker.Store
	released chan struct{}
}

func (w *releaseWatch) Settle(ctx context.Context, t broker.Target, reqs []broker.SettleRequest) []broker.SettleResult {
	res := w.Store.Settle(ctx, t, reqs)
	if len(reqs) > 0 && reqs[0].Op == broker.Release {
		select {
		case w.released <- struct{}{}:
		default:
		}
	}
	return res
}
