package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/store"
)

// receiveAsync starts n receivers of t that each wait up to wait for one message; the channel
// gets each receiver's message (nil when none came) as it returns.
func receiveAsync(ctx context.Context, t *testing.T, st broker.Store, target broker.Target, mode broker.ReceiveMode, n int, wait time.Duration) <-chan *broker.Message {
	t.Helper()
	out := make(chan *broker.Message, n)
	for range n {
		go func() {
			m, err := receive1(ctx, st, target, mode, wait)
			if err != nil {
				t.Errorf("receive: %v", err)
			}
			out <- m
		}()
	}
	return out
}

// waitForClaims polls until the store has run at least n claims, so that receivers started with
// receiveAsync are known to be waiting.
func waitForClaims(t *testing.T, s *store.Postgres, n int64) {
	t.Helper()
	eventually.NoError(t, "the receivers' claims", func() error {
		if c := s.Claims(); c < n {
			return fmt.Errorf("the store ran %d claims; want at least %d", c, n)
		}
		return nil
	})
}

// TestReceiversShareClaims: 64 receivers waiting on one queue are served by a few claim
// statements sized to them, not by 64 claims racing for the head, and each gets a message of
// its own.
func TestReceiversShareClaims(t *testing.T) {
	b := setup(t, setupOptions{realClock: true})
	q := b.queue(t, "q", nil)
	const receivers = 64
	got := receiveAsync(b.ctx, t, b.store, broker.Target{Entity: q}, broker.PeekLock, receivers, time.Minute)
	waitForClaims(t, b.store, 1)
	msgs := make([]broker.Message, receivers)
	for i := range msgs {
		msgs[i] = broker.Message{Body: []byte("m"), MessageID: fmt.Sprint(i)}
	}
	before := b.store.Claims()
	b.send(t, q, msgs...)
	seen := make(map[string]bool)
	for range receivers {
		m := <-got
		if m == nil {
			t.Fatal("a receiver got nothing")
		}
		if seen[m.MessageID] {
			t.Errorf("message %s handed to two receivers", m.MessageID)
		}
		seen[m.MessageID] = true
	}
	// One claim for the 64 messages, give or take one for receivers that joined late.
	if n := b.store.Claims() - before; n > 4 {
		t.Errorf("64 waiting receivers took %d claim statements; want a few, sized to them", n)
	}
}

// TestIdleReceiversDoNotPoll: receivers waiting on an empty queue cost one claim between them,
// not one per receiver per poll: the store's backstop is an hour here, and nothing else happens.
func TestIdleReceiversDoNotPoll(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: store.Options{Recheck: time.Hour}})
	q := b.queue(t, "q", func(p *broker.Properties) { p.LockDuration = 5 * time.Minute })
	const receivers = 500
	got := receiveAsync(b.ctx, t, b.store, broker.Target{Entity: q}, broker.PeekLock, receivers, 500*time.Millisecond)
	for range receivers {
		if m := <-got; m != nil {
			t.Fatalf("a receiver of an empty queue got %v", m)
		}
	}
	if n := b.store.Claims(); n > 3 {
		t.Errorf("500 idle receivers made %d claims; want the one that found the queue empty", n)
	}
}

// TestSendWakesAsManyReceiversAsItHasMessages: of ten waiting receivers, a send of three
// messages serves three; the other seven keep waiting and get the next seven.
func TestSendWakesAsManyReceiversAsItHasMessages(t *testing.T) {
	b := setup(t, setupOptions{realClock: true})
	q := b.queue(t, "q", nil)
	got := receiveAsync(b.ctx, t, b.store, broker.Target{Entity: q}, broker.ReceiveAndDelete, 10, time.Minute)
	waitForClaims(t, b.store, 1)
	b.send(t, q, body("1"), body("2"), body("3"))
	for range 3 {
		if m := <-got; m == nil {
			t.Fatal("a receiver got nothing")
		}
	}
	select {
	case m := <-got:
		t.Fatalf("a fourth receiver returned (%v) with three messages sent", m)
	case <-time.After(100 * time.Millisecond):
	}
	for i := range 7 {
		b.send(t, q, body(fmt.Sprint(i)))
	}
	for range 7 {
		if m := <-got; m == nil {
			t.Fatal("a receiver got nothing")
		}
	}
}

// TestScheduledMessageWakesWaitingReceiver: a receiver waiting on a queue whose only message is
// scheduled gets it when it comes due, from the dispatcher's timer (the backstop is an hour).
func TestScheduledMessageWakesWaitingReceiver(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: store.Options{Recheck: time.Hour}})
	q := b.queue(t, "q", func(p *broker.Properties) { p.LockDuration = 5 * time.Minute })
	at := time.Now().Add(300 * time.Millisecond)
	b.send(t, q, broker.Message{Body: []byte("later"), ScheduledEnqueueTime: at})
	m, err := receive1(b.ctx, b.store, broker.Target{Entity: q}, broker.ReceiveAndDelete, 30*time.Second)
	if err != nil || m == nil {
		t.Fatalf("receive = %v, %v; want the scheduled message", m, err)
	}
	if now := time.Now(); now.Before(at) {
		t.Errorf("received at %v, before its scheduled time %v", now, at)
	}
}

// TestLapsedLockReachesWaitingReceiver: a receiver waiting while another holds the only message
// gets it once that lock lapses. The store clock is moved past the lock; the dispatcher's look
// comes from its recheck, short here, as a timer would in real time.
func TestLapsedLockReachesWaitingReceiver(t *testing.T) {
	b := setup(t, setupOptions{opts: store.Options{Recheck: 20 * time.Millisecond}})
	q := b.queue(t, "q", nil)
	b.send(t, q, body("m"))
	first := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	got := receiveAsync(b.ctx, t, b.store, broker.Target{Entity: q}, broker.PeekLock, 1, time.Minute)
	b.clock.Advance(time.Minute)
	m := <-got
	if m == nil || m.SequenceNumber != first.SequenceNumber || m.DeliveryCount != 2 {
		t.Fatalf("waiting receiver got %+v; want the message again on delivery 2", m)
	}
}

// TestStopAnswersWaitingReceivers: at shutdown every waiting receiver is answered at once, with
// nothing, instead of waiting out its timeout.
func TestStopAnswersWaitingReceivers(t *testing.T) {
	b := setup(t, setupOptions{realClock: true})
	q := b.queue(t, "q", nil)
	got := receiveAsync(b.ctx, t, b.store, broker.Target{Entity: q}, broker.PeekLock, 20, time.Hour)
	waitForClaims(t, b.store, 1)
	start := time.Now()
	b.store.Stop()
	for range 20 {
		select {
		case m := <-got:
			if m != nil {
				t.Errorf("a receiver got %v at shutdown", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting receiver was not answered at shutdown")
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v with waiting receivers", d)
	}
	if m, err := receive1(b.ctx, b.store, broker.Target{Entity: q}, broker.PeekLock, time.Hour); m != nil || err != nil {
		t.Errorf("receive after Stop = %v, %v; want nothing at once", m, err)
	}
}

// TestAbandonOfLastDeliveryDeadLetters: with MaxDeliveryCount 1, abandoning the first delivery
// moves the message to the dead-letter subqueue at once, where counts and a waiting dead-letter
// receiver see it, rather than at the next receive of the queue.
func TestAbandonOfLastDeliveryDeadLetters(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 1 })
	b.send(t, q, body("a"), body("b"), body("c"), body("d"))
	b.send(t, q, broker.Message{Body: []byte("later"), ScheduledEnqueueTime: b.clock.Now().Add(time.Hour)})
	dead := receiveAsync(b.ctx, t, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueDeadLetter}, broker.PeekLock, 1, time.Minute)
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Abandon, "", m.LockToken); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	if c := b.counts(t, "q"); c.Active != 3 || c.DeadLetter != 1 || c.Scheduled != 1 {
		t.Errorf("counts after the last abandon = %+v; want 3 active, 1 dead letter, 1 scheduled", c)
	}
	dl := <-dead
	if dl == nil || dl.SequenceNumber != m.SequenceNumber || dl.DeadLetterReason != broker.ReasonMaxDeliveryCount {
		t.Fatalf("dead-letter receiver got %+v; want the abandoned message with MaxDeliveryCountExceeded", dl)
	}
	if dl.DeadLetterDescription != "Message could not be consumed after 1 delivery attempts." {
		t.Errorf("DeadLetterErrorDescription = %q", dl.DeadLetterDescription)
	}
	// An abandon before the last delivery puts the message back.
	q2 := b.queue(t, "q2", func(p *broker.Properties) { p.MaxDeliveryCount = 2 })
	b.send(t, q2, body("x"))
	m = b.receive(t, q2, broker.SubQueueMain, broker.PeekLock)
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q2}, broker.Abandon, "", m.LockToken); err != nil {
		t.Fatal(err)
	}
	if c := b.counts(t, "q2"); c.Active != 1 || c.DeadLetter != 0 {
		t.Errorf("counts after an abandon with deliveries left = %+v; want 1 active", c)
	}
}

// TestReleaseDoesNotCountTheDelivery: a released message is receivable again at once with the
// delivery taken back, so releases never dead-letter it, even with MaxDeliveryCount 1; a
// receiver waiting for it is woken.
func TestReleaseDoesNotCountTheDelivery(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 1 })
	b.send(t, q, body("a"))
	for range 3 {
		m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
		if m.DeliveryCount != 1 {
			t.Fatalf("delivery count %d; want 1 after releases", m.DeliveryCount)
		}
		waiting := receiveAsync(b.ctx, t, b.store, broker.Target{Entity: q}, broker.PeekLock, 1, time.Minute)
		if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Release, "", m.LockToken); err != nil {
			t.Fatalf("release: %v", err)
		}
		got := <-waiting
		if got == nil || got.SequenceNumber != m.SequenceNumber || got.DeliveryCount != 1 {
			t.Fatalf("waiting receiver got %+v; want the released message, delivery 1", got)
		}
		if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Release, "", got.LockToken); err != nil {
			t.Fatalf("release: %v", err)
		}
		// A released lock is gone.
		if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Complete, "", got.LockToken); !errors.Is(err, broker.ErrLockLost) {
			t.Fatalf("complete after release: %v", err)
		}
	}
	if c := b.counts(t, "q"); c.Active != 1 || c.DeadLetter != 0 {
		t.Errorf("counts after releases = %+v; want 1 active", c)
	}
}

// TestLapsedLastLockDeadLettersInTheSweep: a message whose lock lapses on its last allowed
// delivery is in the dead-letter subqueue after the next background sweep, with no receive of
// the queue needed.
func TestLapsedLastLockDeadLettersInTheSweep(t *testing.T) {
	b := setup(t, setupOptions{opts: store.Options{MaintenanceInterval: time.Hour}})
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 1 })
	b.send(t, q, body("a"), body("b"))
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	b.clock.Advance(59 * time.Second)
	if err := b.store.Maintain(b.ctx); err != nil {
		t.Fatal(err)
	}
	if c := b.counts(t, "q"); c.Active != 2 || c.DeadLetter != 0 {
		t.Fatalf("counts while the lock holds = %+v; want 2 active", c)
	}
	b.clock.Advance(2 * time.Second)
	if err := b.store.Maintain(b.ctx); err != nil {
		t.Fatal(err)
	}
	if c := b.counts(t, "q"); c.Active != 1 || c.DeadLetter != 1 {
		t.Fatalf("counts after the last lock lapsed = %+v; want 1 active, 1 dead letter", c)
	}
	dl := b.receive(t, q, broker.SubQueueDeadLetter, broker.ReceiveAndDelete)
	if dl == nil || dl.SequenceNumber != m.SequenceNumber || dl.DeadLetterReason != broker.ReasonMaxDeliveryCount {
		t.Fatalf("dead letter = %+v; want the lapsed message", dl)
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Complete, "", m.LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("complete after the lapse: %v; want ErrLockLost", err)
	}
}

// TestTwoGatewaysCompetingReceivers: two stores on one database stand for two gateways, 16
// receivers on each peek-lock and complete 2,000 messages: every message is completed exactly
// once and none is handed out twice while its lock is valid (locks last a minute here).
func TestTwoGatewaysCompetingReceivers(t *testing.T) {
	t.Parallel()
	url := newSharedDatabase(t)
	gws := []*store.Postgres{openStore(t, url), openStore(t, url)}
	ctx := t.Context()
	q, err := gws[0].CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	const total = 2000
	for i := 0; i < total; i += 100 {
		batch := make([]broker.Message, 100)
		for k := range batch {
			batch[k] = broker.Message{Body: []byte("m"), MessageID: fmt.Sprint(i + k)}
		}
		if err := gws[i/100%2].Send(ctx, q, batch); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := make(map[string]int)
	var wg sync.WaitGroup
	for r := range 32 {
		gw := gws[r%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := receive1(ctx, gw, broker.Target{Entity: q}, broker.PeekLock, 0)
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
				if _, err := settle1(ctx, gw, broker.Target{Entity: q}, broker.Complete, "", m.LockToken); err != nil {
					t.Errorf("complete %s: %v", m.MessageID, err)
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != total {
		t.Errorf("completed %d distinct messages; want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %s handed out %d times", id, n)
		}
	}
}

// Messages a receive-and-delete took but could not hand out go back as they were: same sequence
// number, enqueue time and delivery count, counted again, and received before later messages.
func TestRestoreReceiveAndDeleteMessages(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	for _, id := range []string{"a", "b", "c", "d"} {
		b.send(t, q, broker.Message{Body: []byte(id), MessageID: id, Label: "l-" + id})
	}
	before, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := receiveN(b.ctx, b.store, broker.Target{Entity: q}, broker.ReceiveAndDelete, 3, 0)
	if err != nil || len(taken) != 3 {
		t.Fatalf("receive-and-delete: %d, %v", len(taken), err)
	}
	if c := b.counts(t, "q"); c.Active != 1 {
		t.Fatalf("counts after taking 3: %+v", c)
	}
	n, err := b.store.Restore(b.ctx, broker.Target{Entity: q}, taken[1:])
	if err != nil || n != 2 {
		t.Fatalf("Restore = %d, %v; want 2", n, err)
	}
	if c := b.counts(t, "q"); c.Active != 3 || c.SizeInBytes != b.sizeOf(t, before[1:]) {
		t.Errorf("counts after restoring 2: %+v; want 3 active of %d bytes", c, b.sizeOf(t, before[1:]))
	}
	after, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before[1:], after); diff != "" {
		t.Errorf("restored messages differ (-before +after):\n%s", diff)
	}
	// A second restore of the same messages puts nothing back twice.
	if n, err := b.store.Restore(b.ctx, broker.Target{Entity: q}, taken[1:]); err != nil || n != 0 {
		t.Errorf("second Restore = %d, %v; want 0", n, err)
	}
	got, err := receiveN(b.ctx, b.store, broker.Target{Entity: q}, broker.PeekLock, 3, 0)
	if err != nil || len(got) != 3 || got[0].MessageID != "b" || got[1].MessageID != "c" || got[2].MessageID != "d" {
		t.Fatalf("receive after the restore: %v, %v; want b, c, d", got, err)
	}
	if got[0].DeliveryCount != 1 {
		t.Errorf("restored b: DeliveryCount %d; want 1", got[0].DeliveryCount)
	}
}

// sizeOf is the bytes msgs count for, as SizeInBytes shows them.
func (b *bundle) sizeOf(t *testing.T, msgs []*broker.Message) int64 {
	t.Helper()
	var n int64
	for _, m := range msgs {
		var size int64
		if err := b.pool.QueryRow(b.ctx, `SELECT size FROM messages WHERE seq = $1`, m.SequenceNumber).Scan(&size); err != nil {
			t.Fatal(err)
		}
		n += size
	}
	return n
}

// A message restored into a session whose lock was given up meanwhile (the session looked empty)
// makes the session acceptable again: the next accept of any session finds it.
func TestRestoreIntoASessionReopensIt(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "sq", nil)
	b.send(t, q, broker.Message{Body: []byte("s"), MessageID: "s", SessionID: "s", HasSessionID: true})
	s := b.accept(t, q, "s")
	taken, err := receiveN(b.ctx, b.store, inSession(q, lockOf(s)), broker.ReceiveAndDelete, 1, 0)
	if err != nil || len(taken) != 1 {
		t.Fatalf("receive-and-delete in the session: %v, %v", taken, err)
	}
	if err := b.store.ReleaseSession(b.ctx, q, lockOf(s)); err != nil {
		t.Fatal(err)
	}
	if next := b.acceptNext(t, q); next != nil {
		t.Fatalf("a session was acceptable before the restore: %q", next.ID)
	}
	if n, err := b.store.Restore(b.ctx, broker.Target{Entity: q}, taken); err != nil || n != 1 {
		t.Fatalf("Restore = %d, %v", n, err)
	}
	next := b.acceptNext(t, q)
	if next == nil || next.ID != "s" {
		t.Fatalf("accept next after the restore: %v; want session s", next)
	}
	if got := b.receiveIn(t, q, next, 1); len(got) != 1 || got[0].MessageID != "s" {
		t.Errorf("session s after the restore holds %v", got)
	}
}
