package amqp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	goamqp "github.com/Azure/go-amqp"
	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
)

// settleGate holds the first settlement the AMQP door asks of the store until opened, and
// records how many requests each settlement carried.
type settleGate struct {
	broker.Store
	entered, open chan struct{}
	once          sync.Once

	mu    sync.Mutex
	sizes []int
	more  chan struct{} // a settlement after the first was asked
}

func (g *settleGate) Settle(ctx context.Context, t broker.Target, reqs []broker.SettleRequest) []broker.SettleResult {
	g.mu.Lock()
	g.sizes = append(g.sizes, len(reqs))
	n := len(g.sizes)
	g.mu.Unlock()
	if n == 1 {
		g.once.Do(func() {
			close(g.entered)
			<-g.open
		})
	} else {
		select {
		case g.more <- struct{}{}:
		default:
		}
	}
	return g.Store.Settle(ctx, t, reqs)
}

// TestOutcomesOfALinkAppliedTogether: the outcomes a peer gives on one link while others are
// being applied are applied together, in one store settlement, each with its own result: a
// completion of a lock lost meanwhile fails alone (the peer settled first, so it is dropped, as
// the mode accepts), the others complete, abandon and dead-letter their own messages.
func TestOutcomesOfALinkAppliedTogether(t *testing.T) {
	gate := &settleGate{entered: make(chan struct{}), open: make(chan struct{}), more: make(chan struct{}, 1)}
	b := newBrokerWith(t, nil, func(st broker.Store) broker.Store { gate.Store = st; return gate })
	q := b.createQueue(t, "q", nil)
	ctx := ctxT(t)
	msgs := make([]broker.Message, 10)
	for i := range msgs {
		msgs[i] = broker.Message{Body: []byte(fmt.Sprint(i)), MessageID: fmt.Sprint(i)}
	}
	if err := b.store.Send(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	r, err := c.sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 10, SettlementMode: goamqp.ReceiverSettleModeFirst.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]*goamqp.Message, 10)
	for i := range got {
		if got[i], err = r.Receive(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if string(got[i].GetData()) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, got[i].GetData())
		}
	}
	// Messages 0-2 are completed elsewhere: their locks are gone when the peer completes them.
	var lost []broker.SettleRequest
	for _, m := range got[:3] {
		lost = append(lost, broker.SettleRequest{Op: broker.Complete, Token: tagToken(m.DeliveryTag)})
	}
	for _, res := range b.store.Settle(ctx, broker.Target{Entity: q}, lost) {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if err := r.AcceptMessage(ctx, got[3]); err != nil {
		t.Fatal(err)
	}
	<-gate.entered // message 3's completion is being applied; the others queue behind it
	for i, m := range got {
		var err error
		switch {
		case i == 3:
			continue
		case i < 6:
			err = r.AcceptMessage(ctx, m)
		case i < 8:
			err = r.ModifyMessage(ctx, m, nil)
		default:
			err = r.RejectMessage(ctx, m, &goamqp.Error{Condition: "com.microsoft:dead-letter"})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The broker reads a connection's frames in order: once it answered an attach sent after
	// the dispositions, it has them all.
	s, err := c.sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	close(gate.open)
	select {
	case <-gate.more:
	case <-ctx.Done():
		t.Fatal("the outcomes after the first were not applied")
	}
	gate.mu.Lock()
	sizes := gate.sizes
	gate.mu.Unlock()
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 9 {
		t.Errorf("settlements of %v requests; want the first alone, then the other 9 together", sizes)
	}

	// Abandoned: 6 and 7 come back; dead-lettered: 8 and 9; the rest are gone.
	back := map[string]bool{}
	for len(back) < 2 {
		m, err := r.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		back[string(m.GetData())] = true
		if err := r.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if !back["6"] || !back["7"] {
		t.Errorf("received again %v; want the abandoned 6 and 7", back)
	}
	dlq, err := c.sess.NewReceiver(ctx, "q/$DeadLetterQueue", &goamqp.ReceiverOptions{Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	dead := map[string]bool{}
	for len(dead) < 2 {
		m, err := dlq.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		dead[string(m.GetData())] = true
	}
	if !dead["8"] || !dead["9"] {
		t.Errorf("dead-lettered %v; want 8 and 9", dead)
	}
}

// tagToken is the lock token a delivery tag carries, in .NET's byte order of a Guid.
func tagToken(tag []byte) uuid.UUID {
	var u uuid.UUID
	copy(u[:], tag)
	u[0], u[1], u[2], u[3] = u[3], u[2], u[1], u[0]
	u[4], u[5] = u[5], u[4]
	u[6], u[7] = u[7], u[6]
	return u
}
