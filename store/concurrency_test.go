package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/store"
)

// TestCompetingReceivers: 1,000 messages, 8 receivers peek-locking and completing at once. Every
// message is completed exactly once, none is lost, and none is handed to a second receiver while
// a lock on it is valid (locks last a minute here, far longer than the test).
func TestCompetingReceivers(t *testing.T) {
	b := setup(t, setupOptions{realClock: true})
	q := b.queue(t, "q", nil)
	const total, receivers = 1000, 8
	var wg sync.WaitGroup
	for s := range 10 { // ten concurrent senders, so the group commit is exercised too
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < total; i += 10 {
				if err := b.store.Send(b.ctx, q, []broker.Message{{Body: []byte(fmt.Sprint(i)), MessageID: fmt.Sprint(i)}}); err != nil {
					t.Errorf("send %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()

	var mu sync.Mutex
	seen := make(map[string]int)
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := receive1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, 0)
				if err != nil {
					t.Errorf("receive: %v", err)
					return
				}
				if m == nil {
					return
				}
				mu.Lock()
				seen[m.MessageID]++
				mu.Unlock()
				if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, m.MessageID, m.LockToken); err != nil {
					t.Errorf("complete %s: %v", m.MessageID, err)
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != total {
		t.Errorf("received %d distinct messages; want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %s handed out %d times", id, n)
		}
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("left in the queue: %+v", c)
	}
}

// TestCompetingReceiversOnManyQueues: 16 queues with 2 receivers each, peek-lock + complete on
// half of them and receive-and-delete on the others, all at once, so that the claims of
// different queues share statements (claimmany.go). Every message is received exactly once, by
// a receiver of its own queue, and every queue ends empty.
func TestCompetingReceiversOnManyQueues(t *testing.T) {
	b := setup(t, setupOptions{realClock: true})
	const queues, perQueue, receivers = 16, 40, 2
	qs := make([]*broker.Entity, queues)
	for i := range qs {
		qs[i] = b.queue(t, fmt.Sprintf("q%d", i), nil)
		batch := make([]broker.Message, perQueue)
		for j := range batch {
			batch[j] = broker.Message{Body: []byte(fmt.Sprint(j)), MessageID: fmt.Sprintf("q%d-%d", i, j)}
		}
		if err := b.store.Send(b.ctx, qs[i], batch); err != nil {
			t.Fatal(err)
		}
	}
	before := b.store.SharedClaims()
	var mu sync.Mutex
	seen := make(map[string]int)
	var wg sync.WaitGroup
	for i, q := range qs {
		mode := broker.PeekLock
		if i%2 == 1 {
			mode = broker.ReceiveAndDelete
		}
		target := broker.Target{Entity: q, SubQueue: broker.SubQueueMain}
		for range receivers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					m, err := receive1(b.ctx, b.store, target, mode, 0)
					if err != nil {
						t.Errorf("receive from %s: %v", q.Path, err)
						return
					}
					if m == nil {
						return
					}
					if want := q.Path + "-"; len(m.MessageID) < len(want) || m.MessageID[:len(want)] != want {
						t.Errorf("receiver of %s got %s", q.Path, m.MessageID)
					}
					mu.Lock()
					seen[m.MessageID]++
					mu.Unlock()
					if mode == broker.PeekLock {
						if _, err := settle1(b.ctx, b.store, target, broker.Complete, m.MessageID, m.LockToken); err != nil {
							t.Errorf("complete %s: %v", m.MessageID, err)
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	if len(seen) != queues*perQueue {
		t.Errorf("received %d distinct messages; want %d", len(seen), queues*perQueue)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %s handed out %d times", id, n)
		}
	}
	for _, q := range qs {
		if c := b.counts(t, q.Path); c.Total() != 0 {
			t.Errorf("left in %s: %+v", q.Path, c)
		}
	}
	if b.store.SharedClaims() == before {
		t.Error("no round shared a claim statement among queues; the test did not test what it is for")
	}
}

// TestGroupCommitManySenders: many concurrent senders to two queues, one writer: every message
// of every send is committed.
func TestGroupCommitManySenders(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: store.Options{SendWriters: 1}})
	queues := []*broker.Entity{b.queue(t, "a", nil), b.queue(t, "b", nil)}
	const senders, each = 32, 25
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				q := queues[(s+i)%2]
				if err := b.store.Send(b.ctx, q, []broker.Message{body("x"), body("y")}); err != nil {
					t.Errorf("send: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	a, bb := b.counts(t, "a"), b.counts(t, "b")
	if a.Active+bb.Active != senders*each*2 {
		t.Errorf("stored %d + %d messages; want %d", a.Active, bb.Active, senders*each*2)
	}
}

// TestWakeAcrossGateways: two stores on one database stand for two gateways. A receiver waiting
// on one is woken by a send through the other (by NOTIFY), not by its poll, which is set to an
// hour here.
func TestWakeAcrossGateways(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	open := func() *store.Postgres {
		pool := openPool(t, url)
		s := store.New(pool, store.Options{Recheck: time.Hour})
		s.Start(context.Background())
		t.Cleanup(s.Stop)
		return s
	}
	gwA, gwB := open(), open()
	ctx := t.Context()
	q, err := gwA.CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	qB, err := gwB.Resolve(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *broker.Message, 1)
	go func() {
		m, err := receive1(ctx, gwB, broker.Target{Entity: qB, SubQueue: broker.SubQueueMain}, broker.ReceiveAndDelete, time.Minute)
		if err != nil {
			t.Errorf("receive on gateway B: %v", err)
		}
		got <- m
	}()
	// A gateway notifies once it has seen another listening (it checks every 2s), so keep
	// sending until the waiter is woken.
	var m *broker.Message
	eventually.True(t, "gateway B to be woken by gateway A's sends", func() bool {
		select {
		case m = <-got:
			return true
		default:
		}
		if err := gwA.Send(ctx, q, []broker.Message{body("ping")}); err != nil {
			t.Fatal(err)
		}
		return false
	})
	if m == nil {
		t.Fatal("gateway B's receive returned nothing")
	}
}

// TestEntityChangeReachesOtherGateway: an update through one gateway is seen by another's cache
// without waiting for it to expire.
func TestEntityChangeReachesOtherGateway(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	open := func() *store.Postgres {
		s := store.New(openPool(t, url), store.Options{EntityCacheTTL: time.Hour})
		s.Start(context.Background())
		t.Cleanup(s.Stop)
		return s
	}
	gwA, gwB := open(), open()
	ctx := t.Context()
	if _, err := gwA.CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue)); err != nil {
		t.Fatal(err)
	}
	if _, err := gwB.Resolve(ctx, "q"); err != nil { // now cached on B for an hour
		t.Fatal(err)
	}
	p := broker.DefaultProperties(broker.KindQueue)
	p.MaxDeliveryCount = 3
	if _, err := gwA.UpdateEntity(ctx, broker.KindQueue, "q", p); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "gateway B to see the change", func() bool {
		e, err := gwB.Resolve(ctx, "q")
		return err == nil && e.Props.MaxDeliveryCount == 3
	})
}

// TestConcurrentReceiveDeferred: receivers ask at once for overlapping sets of deferred messages,
// in random orders, receive-and-delete. Each request gets all it asked for or fails with
// ErrNotFound; every message is received exactly once, and none is lost.
func TestConcurrentReceiveDeferred(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	const total, receivers, requests = 40, 8, 25
	names := make([]string, total)
	for i := range names {
		names[i] = fmt.Sprint(i)
	}
	d := b.deferAll(t, q, names...)
	var mu sync.Mutex
	got := make(map[int64]int)
	var wg sync.WaitGroup
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range requests {
				ask := make([]int64, 1+rand.IntN(6))
				for i := range ask {
					ask[i] = d[rand.IntN(total)].SequenceNumber
				}
				msgs, err := b.store.ReceiveDeferred(b.ctx, broker.Target{Entity: q}, ask, broker.ReceiveAndDelete)
				if err != nil {
					if !errors.Is(err, broker.ErrNotFound) {
						t.Errorf("receive deferred %v: %v", ask, err)
					}
					continue
				}
				mu.Lock()
				for _, m := range msgs {
					got[m.SequenceNumber]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var left []int64
	for _, m := range d {
		if got[m.SequenceNumber] == 0 {
			left = append(left, m.SequenceNumber)
		}
	}
	if len(left) > 0 {
		msgs, err := b.store.ReceiveDeferred(b.ctx, broker.Target{Entity: q}, left, broker.ReceiveAndDelete)
		if err != nil {
			t.Fatalf("receive the %d left: %v", len(left), err)
		}
		for _, m := range msgs {
			got[m.SequenceNumber]++
		}
	}
	for _, m := range d {
		if n := got[m.SequenceNumber]; n != 1 {
			t.Errorf("message %s received %d times; want once", m.MessageID, n)
		}
	}
	if c := b.counts(t, "q"); c.Active != 0 || c.SizeInBytes != 0 {
		t.Errorf("counts = %+v; want none left", c)
	}
	t.Logf("%d of %d received by the concurrent requests", total-len(left), total)
}
