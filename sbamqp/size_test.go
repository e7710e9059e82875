package sbamqp_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/store"
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
			b := newBroker(t)
			ctx := ctxT(t)
			q := b.createQueue(t, "q", func(p *store.Properties) { p.MaxDeliveryCount = 2 })
			big := bytes.Repeat([]byte("b"), 2000)
			if err := b.store.Send(ctx, q, []store.Message{
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
			receive := func(r *goamqp.Receiver) string {
				t.Helper()
				m, err := r.Receive(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if mode == "peek-lock" {
					if err := r.AcceptMessage(ctx, m); err != nil {
						t.Fatal(err)
					}
				}
				return string(m.GetData())
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
				for _, sq := range []store.SubQueue{store.SubQueueMain, store.SubQueueDeadLetter} {
					msgs, err := b.store.Browse(ctx, q, sq, 0, 10)
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range msgs {
						if mode == "peek-lock" && string(m.Body) == "a" {
							continue // its completion may still be on its way
						}
						got = append(got, int32(len(m.Body)), m.DeliveryCount)
					}
				}
				return got
			}

			r := attach()
			if got := receive(r); got != "a" {
				t.Fatalf("first message %q", got)
			}
			tooLarge(r)
			// The large one counted once; "c", claimed with it, went back uncounted.
			if got, want := state(), []int32{2000, 1, 1, 0}; !slices.Equal(got, want) {
				t.Fatalf("after the first link: (size, delivery count) %v; want %v", got, want)
			}
			tooLarge(attach())
			// The third claim would be its third delivery: it goes to the dead-letter subqueue,
			// and the entity flows again.
			if got := receive(attach()); got != "c" {
				t.Fatalf("after two counted attempts got %q; want c", got)
			}
			dead, err := b.store.Browse(ctx, q, store.SubQueueDeadLetter, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(dead) != 1 || len(dead[0].Body) != 2000 || dead[0].DeadLetterReason != "MaxDeliveryCountExceeded" {
				t.Fatalf("dead-letter subqueue %v", dead)
			}
		})
	}
}
