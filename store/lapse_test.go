package store_test

import (
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store"
)

// lapseScenario is issue 28's: with a 5 s lock, A then B are sent; A is peek-locked and kept;
// B is taken and abandoned three times; A's lock lapses. The next peek-lock must return A again
// (delivery 2), not B: a message whose lock lapses is available again in its place, ahead of
// every later message, though it came due after B's last abandon. take peek-locks one message
// (the gateway doing so varies by test), abandon abandons it, advance moves the clock.
func lapseScenario(t *testing.T, take func(step string) *broker.Message, abandon func(m *broker.Message), advance func(time.Duration)) {
	t.Helper()
	a := take("peek-lock A")
	if string(a.Body) != "A" {
		t.Fatalf("first peek-lock got %q; want A", a.Body)
	}
	for i := range 3 {
		advance(100 * time.Millisecond)
		b := take("take B")
		if string(b.Body) != "B" || b.DeliveryCount != int32(i+1) {
			t.Fatalf("take %d got %q (delivery %d); want B (delivery %d)", i+1, b.Body, b.DeliveryCount, i+1)
		}
		abandon(b)
	}
	advance(5 * time.Second) // A's lock, taken 300 ms ago, has lapsed
	m := take("peek-lock after the lapse")
	if string(m.Body) != "A" || m.SequenceNumber != a.SequenceNumber || m.DeliveryCount != 2 {
		t.Fatalf("after A's lock lapsed the next peek-lock got %q (seq %d, delivery %d); want A (seq %d) on delivery 2",
			m.Body, m.SequenceNumber, m.DeliveryCount, a.SequenceNumber)
	}
	if m := take("peek-lock after A"); string(m.Body) != "B" || m.DeliveryCount != 4 {
		t.Fatalf("the peek-lock after A got %q (delivery %d); want B on delivery 4", m.Body, m.DeliveryCount)
	}
}

// fiveSecondLocks is the lock duration of the scenario's queue.
func fiveSecondLocks(p *broker.Properties) { p.LockDuration = 5 * time.Second }

// TestLapsedLockComesBackFirst: a lapsed lock is visible to the very next claim, ahead of a
// message abandoned before the lock lapsed, through the receive path (dispatcher and cursor).
// Three trials, each on a queue of its own.
func TestLapsedLockComesBackFirst(t *testing.T) {
	b := setup(t, manual)
	for trial := range 3 {
		q := b.queue(t, "q"+string(rune('a'+trial)), fiveSecondLocks)
		b.send(t, q, body("A"), body("B"))
		target := broker.Target{Entity: q}
		lapseScenario(t, func(step string) *broker.Message {
			m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
			if m == nil {
				t.Fatalf("trial %d, %s: nothing received", trial+1, step)
			}
			return m
		}, func(m *broker.Message) {
			if _, err := settle1(b.ctx, b.store, target, broker.Abandon, "", m.LockToken); err != nil {
				t.Fatalf("trial %d, abandon: %v", trial+1, err)
			}
		}, b.clock.Advance)
	}
}

// TestLapsedLockComesBackFirstInSession: the same inside a session, where a message's lock is
// its session's: A's lock lapses with the session lock (not renewed), and the session's next
// holder gets A first, on delivery 2.
func TestLapsedLockComesBackFirstInSession(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", fiveSecondLocks)
	inS := func(s string) broker.Message { return broker.Message{Body: []byte(s), SessionID: "s"} }
	b.send(t, q, inS("A"), inS("B"))
	sess := b.accept(t, q, "s")
	lapseScenario(t, func(step string) *broker.Message {
		if !sess.LockedUntil.After(b.clock.Now()) {
			sess = b.accept(t, q, "s") // the lapsed session taken again
		}
		msgs := b.receiveIn(t, q, sess, 1)
		if len(msgs) != 1 {
			t.Fatalf("%s: %d messages received in the session", step, len(msgs))
		}
		return msgs[0]
	}, func(m *broker.Message) {
		if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(sess)), broker.Abandon, "", m.LockToken); err != nil {
			t.Fatalf("abandon: %v", err)
		}
	}, b.clock.Advance)
}

// TestLapsedLockComesBackFirstOnTwoGateways: two stores on one database stand for two gateways,
// whose claim cursors do not see each other's claims. A is locked through the first, B taken
// and abandoned through the second; once A's lock lapses, the next claim of either gateway
// returns A.
func TestLapsedLockComesBackFirstOnTwoGateways(t *testing.T) {
	t.Parallel()
	url := newSharedDatabase(t)
	clock := newClock()
	opts := store.Options{Now: clock.Now, MaintenanceInterval: time.Hour}
	gws := []*store.Postgres{openStore(t, url, opts), openStore(t, url, opts)}
	ctx := t.Context()
	for _, next := range []int{1, 0} { // which gateway claims after the lapse
		q, err := gws[0].CreateEntity(ctx, broker.KindQueue, "q"+string(rune('0'+next)), func() broker.Properties {
			p := broker.DefaultProperties(broker.KindQueue)
			fiveSecondLocks(&p)
			return p
		}())
		if err != nil {
			t.Fatal(err)
		}
		if err := gws[0].Send(ctx, q, []broker.Message{body("A"), body("B")}); err != nil {
			t.Fatal(err)
		}
		target := broker.Target{Entity: q}
		takes := 0
		lapseScenario(t, func(step string) *broker.Message {
			// A through gateway 0, B's takes through gateway 1, then the claim after the lapse
			// through gateway next and the one after it through the other.
			gw := gws[1]
			switch takes++; {
			case takes == 1:
				gw = gws[0]
			case takes == 5:
				gw = gws[next]
			case takes == 6:
				gw = gws[1-next]
			}
			m, err := receive1(ctx, gw, target, broker.PeekLock, 0)
			if err != nil || m == nil {
				t.Fatalf("%s: %v, %v", step, m, err)
			}
			return m
		}, func(m *broker.Message) {
			if _, err := settle1(ctx, gws[1], target, broker.Abandon, "", m.LockToken); err != nil {
				t.Fatalf("abandon: %v", err)
			}
		}, clock.Advance)
	}
}
