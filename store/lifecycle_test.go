package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/store"
)

// manual keeps the background tasks from running on their own, so a test decides when the
// sweep happens by calling Maintain.
var manual = setupOptions{opts: store.Options{MaintenanceInterval: time.Hour}}

func (b *bundle) maintain(t *testing.T) {
	t.Helper()
	if err := b.store.Maintain(b.ctx); err != nil {
		t.Fatalf("Maintain: %v", err)
	}
}

func TestExpiredMessagesAreRemoved(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("short"), TimeToLive: 10 * time.Second}, broker.Message{Body: []byte("long"), TimeToLive: time.Hour})
	b.clock.Advance(11 * time.Second)

	// Before the sweep the expired message is already gone for every observer.
	if c := b.counts(t, "q"); c.Active != 1 || c.DeadLetter != 0 {
		t.Errorf("counts before the sweep = %+v; want 1 active", c)
	}
	before := b.counts(t, "q")
	b.maintain(t)
	if c := b.counts(t, "q"); c != before {
		t.Errorf("counts after the sweep = %+v; before it %+v: they must agree", c, before)
	}
	var rows int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM messages`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d message rows after the sweep; want the expired one deleted", rows)
	}
}

func TestExpiredMessagesAreDeadLettered(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", func(p *broker.Properties) { p.DeadLetteringOnMessageExpiration = true })
	b.send(t, q, broker.Message{Body: []byte("x"), MessageID: "x", TimeToLive: 10 * time.Second})
	b.clock.Advance(11 * time.Second)
	if c := b.counts(t, "q"); c.Active != 0 || c.DeadLetter != 1 {
		t.Errorf("counts before the sweep = %+v; want it counted as dead-lettered", c)
	}
	if m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock); m != nil {
		t.Fatalf("expired message received: %+v", m)
	}
	b.maintain(t)
	b.clock.Advance(1000 * time.Hour) // dead-lettered messages never expire
	b.maintain(t)
	dl := b.receive(t, q, broker.SubQueueDeadLetter, broker.ReceiveAndDelete)
	if dl == nil || dl.MessageID != "x" || dl.DeadLetterReason != "TTLExpiredException" {
		t.Fatalf("dead-letter subqueue gave %+v; want x with TTLExpiredException", dl)
	}
}

func TestLockedMessageDoesNotExpireUntilItsLockEnds(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", func(p *broker.Properties) { p.LockDuration = time.Minute })
	b.send(t, q, broker.Message{Body: []byte("a"), MessageID: "a", TimeToLive: 10 * time.Second},
		broker.Message{Body: []byte("b"), MessageID: "b", TimeToLive: 10 * time.Second})
	a := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	bm := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	b.clock.Advance(30 * time.Second) // both past their TTL, both still locked
	b.maintain(t)
	if c := b.counts(t, "q"); c.Active != 2 {
		t.Errorf("counts with both locked past their TTL = %+v; want 2 active", c)
	}
	// A locked, expired message can still be completed.
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, a.MessageID, a.LockToken); err != nil {
		t.Errorf("complete of a locked, expired message: %v", err)
	}
	// Abandoning the other makes its expiry take effect at once.
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Abandon, bm.MessageID, bm.LockToken); err != nil {
		t.Fatal(err)
	}
	if m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock); m != nil {
		t.Errorf("abandoned expired message received again: %q", m.Body)
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("counts = %+v; want nothing left", c)
	}
}

func TestScheduledCountsAndCancel(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("s1"), ScheduledEnqueueTime: b.clock.Now().Add(time.Minute)},
		broker.Message{Body: []byte("s2"), ScheduledEnqueueTime: b.clock.Now().Add(time.Hour)})
	if c := b.counts(t, "q"); c.Scheduled != 2 || c.Active != 0 {
		t.Errorf("counts = %+v; want 2 scheduled", c)
	}
	msgs, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, 0, 10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("Browse = %d messages, %v", len(msgs), err)
	}
	// All or none: with a number that names nothing scheduled, nothing is cancelled.
	missing := msgs[1].SequenceNumber + 100
	err = b.store.CancelScheduled(b.ctx, q, []int64{msgs[1].SequenceNumber, missing})
	if !errors.Is(err, broker.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprint(missing)) {
		t.Errorf("cancel [s2, missing]: err = %v; want ErrNotFound naming %d", err, missing)
	}
	if c := b.counts(t, "q"); c.Scheduled != 2 {
		t.Errorf("counts after the refused cancel = %+v; want 2 scheduled still", c)
	}
	if err := b.store.CancelScheduled(b.ctx, q, make([]int64, broker.MaxCancelBatch+1)); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("cancel of %d numbers: err = %v; want ErrBadRequest", broker.MaxCancelBatch+1, err)
	}
	if err := b.store.CancelScheduled(b.ctx, q, []int64{msgs[1].SequenceNumber, msgs[1].SequenceNumber}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := b.store.CancelScheduled(b.ctx, q, []int64{msgs[1].SequenceNumber}); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("second cancel: err = %v; want ErrNotFound", err)
	}
	b.clock.Advance(2 * time.Minute)
	if err := b.store.CancelScheduled(b.ctx, q, []int64{msgs[0].SequenceNumber}); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("cancel after the schedule passed: err = %v; want ErrNotFound", err)
	}
	if c := b.counts(t, "q"); c.Scheduled != 0 || c.Active != 1 {
		t.Errorf("counts = %+v; want 1 active", c)
	}
}

func TestDuplicateDetection(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", func(p *broker.Properties) {
		p.RequiresDuplicateDetection = true
		p.DuplicateDetectionHistoryTimeWindow = time.Minute
	})
	send := func(ids ...string) {
		t.Helper()
		var msgs []broker.Message
		for _, id := range ids {
			msgs = append(msgs, broker.Message{Body: []byte(id), MessageID: id})
		}
		b.send(t, q, msgs...)
	}
	send("a")
	send("a")           // dropped, still accepted
	send("b", "b", "c") // a duplicate inside one batch
	if c := b.counts(t, "q"); c.Active != 3 {
		t.Errorf("stored %d messages; want a, b, c", c.Active)
	}
	// Consumed or not, the id stays known for the window.
	for range 3 {
		b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete)
	}
	send("a")
	if c := b.counts(t, "q"); c.Active != 0 {
		t.Errorf("a resent within the window was stored")
	}
	b.clock.Advance(61 * time.Second)
	send("a")
	if c := b.counts(t, "q"); c.Active != 1 {
		t.Errorf("a resent after the window: %d stored; want 1", c.Active)
	}
	// The history is pruned once its window has passed.
	b.clock.Advance(2 * time.Minute)
	b.maintain(t)
	var n int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM dedup`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d duplicate-detection records left after their window", n)
	}
}

// TestDuplicateDetectionAcrossGateways: two gateways, many senders, the same ids: each id is
// stored once.
func TestDuplicateDetectionAcrossGateways(t *testing.T) {
	b := setup(t, setupOptions{realClock: true})
	q := b.queue(t, "q", func(p *broker.Properties) { p.RequiresDuplicateDetection = true })
	other := store.New(b.pool, store.Options{})
	other.Start(b.ctx)
	defer other.Stop()
	qOther, err := other.Resolve(b.ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	const ids, senders = 50, 8
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, e := b.store, q
			if s%2 == 1 {
				st, e = other, qOther
			}
			for i := range ids {
				if err := st.Send(b.ctx, e, []broker.Message{{Body: []byte("x"), MessageID: fmt.Sprint(i)}}); err != nil {
					t.Errorf("send: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if c := b.counts(t, "q"); c.Active != ids {
		t.Errorf("stored %d messages; want each of the %d ids once", c.Active, ids)
	}
}

func TestDeferral(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("later"), MessageID: "d"}, body("next"))
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Defer, m.MessageID, m.LockToken); err != nil {
		t.Fatalf("defer: %v", err)
	}
	if next := b.receive(t, q, broker.SubQueueMain, broker.PeekLock); next == nil || string(next.Body) != "next" {
		t.Fatalf("after deferring, received %v; want next", next)
	}
	if none := b.receive(t, q, broker.SubQueueMain, broker.PeekLock); none != nil {
		t.Fatalf("deferred message received by a plain receive: %q", none.Body)
	}
	// Browsing shows it as deferred.
	msgs, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, m.SequenceNumber, 1)
	if err != nil || len(msgs) != 1 || msgs[0].State != broker.StateDeferred {
		t.Fatalf("browse = %+v, %v; want the deferred message", msgs, err)
	}
	if c := b.counts(t, "q"); c.Active != 2 {
		t.Errorf("counts = %+v; deferred messages count as active", c)
	}
	d, err := receiveDeferred1(b.ctx, b.store, broker.Target{Entity: q}, m.SequenceNumber, broker.PeekLock)
	if err != nil {
		t.Fatalf("receive deferred: %v", err)
	}
	if d.DeliveryCount != 1 || d.LockToken == m.LockToken { // deferring did not fail a delivery
		t.Errorf("deferred message delivered with count %d, token %v", d.DeliveryCount, d.LockToken)
	}
	if _, err := receiveDeferred1(b.ctx, b.store, broker.Target{Entity: q}, m.SequenceNumber, broker.PeekLock); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("second receive of a locked deferred message: err = %v; want ErrNotFound", err)
	}
	// Abandon keeps it deferred; complete removes it.
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Abandon, d.MessageID, d.LockToken); err != nil {
		t.Fatal(err)
	}
	if m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock); m != nil {
		t.Errorf("abandoned deferred message came back to the head: %q", m.Body)
	}
	d, err = receiveDeferred1(b.ctx, b.store, broker.Target{Entity: q}, m.SequenceNumber, broker.ReceiveAndDelete)
	if err != nil || string(d.Body) != "later" {
		t.Fatalf("receive-and-delete deferred = %v, %v", d, err)
	}
	if _, err := receiveDeferred1(b.ctx, b.store, broker.Target{Entity: q}, m.SequenceNumber, broker.ReceiveAndDelete); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("deferred message received twice: err = %v", err)
	}
}

// deferAll sends a message with each body to q and defers it; it returns them, in order, as
// received before deferring (delivery count 1).
func (b *bundle) deferAll(t *testing.T, q *broker.Entity, bodies ...string) []*broker.Message {
	t.Helper()
	for _, s := range bodies {
		b.send(t, q, broker.Message{Body: []byte(s), MessageID: s})
	}
	msgs, err := receiveN(b.ctx, b.store, broker.Target{Entity: q}, broker.PeekLock, len(bodies), 0)
	if err != nil || len(msgs) != len(bodies) {
		t.Fatalf("receive %d to defer: %d, %v", len(bodies), len(msgs), err)
	}
	for _, m := range msgs {
		if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Defer, m.MessageID, m.LockToken); err != nil {
			t.Fatalf("defer %s: %v", m.MessageID, err)
		}
	}
	return msgs
}

// browseOne is the message of e's main subqueue with sequence number seq, as browsing shows it.
func (b *bundle) browseOne(t *testing.T, e *broker.Entity, seq int64) *broker.Message {
	t.Helper()
	msgs, err := b.store.Browse(b.ctx, e, broker.SubQueueMain, seq, 1)
	if err != nil || len(msgs) != 1 || msgs[0].SequenceNumber != seq {
		t.Fatalf("browse %d = %v, %v", seq, msgs, err)
	}
	return msgs[0]
}

// A request for several deferred messages is all or nothing: one missing, and none of the others
// is removed (receive-and-delete) or locked (peek-lock); all there, and they come back in the
// order asked, each once.
func TestReceiveDeferredAllOrNothing(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	d := b.deferAll(t, q, "a", "b", "c")
	sa, sb, sc := d[0].SequenceNumber, d[1].SequenceNumber, d[2].SequenceNumber
	missing := sc + 100
	target := broker.Target{Entity: q}
	before := b.counts(t, "q")
	if before.Active != 3 {
		t.Fatalf("counts = %+v; want the 3 deferred messages active", before)
	}
	notFound := func(what string, err error, seq int64) {
		t.Helper()
		if !errors.Is(err, broker.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("sequence number %d ", seq)) {
			t.Errorf("%s: err = %v; want ErrNotFound naming %d", what, err, seq)
		}
	}

	for _, mode := range []broker.ReceiveMode{broker.ReceiveAndDelete, broker.PeekLock} {
		msgs, err := b.store.ReceiveDeferred(b.ctx, target, []int64{sa, missing, sb}, mode)
		notFound(fmt.Sprintf("mode %v: [a, missing, b]", mode), err, missing)
		if msgs != nil {
			t.Errorf("mode %v: failed request returned %q", mode, bodies(msgs))
		}
		for _, m := range d[:2] {
			got := b.browseOne(t, q, m.SequenceNumber)
			if got.State != broker.StateDeferred || got.DeliveryCount != 1 {
				t.Errorf("mode %v: after the failed request %s is %v, delivery count %d; want deferred, 1 (and not locked: see below)",
					mode, got.MessageID, got.State, got.DeliveryCount)
			}
		}
		if c := b.counts(t, "q"); c != before {
			t.Errorf("mode %v: counts after the failed request = %+v; want %+v", mode, c, before)
		}
	}
	// A message locked by another receiver counts as missing too.
	locked, err := receiveDeferred1(b.ctx, b.store, target, sc, broker.PeekLock)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.store.ReceiveDeferred(b.ctx, target, []int64{sa, sc}, broker.ReceiveAndDelete)
	notFound("[a, c locked]", err, sc)

	// All there (so not locked by the failed requests): in the order asked, a repeat once.
	msgs, err := b.store.ReceiveDeferred(b.ctx, target, []int64{sb, sa, sb}, broker.PeekLock)
	if err != nil || len(msgs) != 2 || msgs[0].MessageID != "b" || msgs[1].MessageID != "a" {
		t.Fatalf("peek-lock [b, a, b] = %q, %v; want b, a", bodies(msgs), err)
	}
	for _, m := range msgs {
		// Deferring failed no delivery, and a receive by number counts none: still 1.
		if m.DeliveryCount != 1 || m.LockToken == (uuid.UUID{}) || m.LockToken == d[0].LockToken || m.LockToken == d[1].LockToken {
			t.Errorf("%s: delivery count %d, lock %v; want 1 and a new lock", m.MessageID, m.DeliveryCount, m.LockToken)
		}
		if _, err := settle1(b.ctx, b.store, target, broker.RenewLock, m.MessageID, m.LockToken); err != nil {
			t.Errorf("renew the lock of %s: %v", m.MessageID, err)
		}
	}
	if msgs[0].LockToken == msgs[1].LockToken {
		t.Error("two messages got one lock token")
	}
	if c := b.counts(t, "q"); c != before {
		t.Errorf("counts after peek-lock = %+v; want %+v", c, before)
	}
	// Abandoned, they are deferred again, and a receive-and-delete takes all three.
	for _, m := range append(msgs, locked) {
		if _, err := settle1(b.ctx, b.store, target, broker.Abandon, m.MessageID, m.LockToken); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err = b.store.ReceiveDeferred(b.ctx, target, []int64{sc, sa, sb}, broker.ReceiveAndDelete)
	if err != nil || len(msgs) != 3 || msgs[0].MessageID != "c" || msgs[1].MessageID != "a" || msgs[2].MessageID != "b" {
		t.Fatalf("receive-and-delete [c, a, b] = %q, %v; want c, a, b", bodies(msgs), err)
	}
	for _, m := range msgs {
		if m.DeliveryCount != 2 { // the abandon counted
			t.Errorf("%s received with delivery count %d; want 2", m.MessageID, m.DeliveryCount)
		}
	}
	if c := b.counts(t, "q"); c.Active != 0 || c.SizeInBytes != 0 || c.DeadLetter != 0 {
		t.Errorf("counts after receive-and-delete of all = %+v; want none", c)
	}
	_, err = b.store.ReceiveDeferred(b.ctx, target, []int64{sa}, broker.ReceiveAndDelete)
	notFound("a again", err, sa)

	if none, err := b.store.ReceiveDeferred(b.ctx, target, nil, broker.PeekLock); err != nil || len(none) != 0 {
		t.Errorf("no sequence numbers = %v, %v; want none", none, err)
	}
	if _, err := b.store.ReceiveDeferred(b.ctx, target, make([]int64, broker.MaxReceiveBatch+1), broker.PeekLock); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("%d sequence numbers: err = %v; want ErrBadRequest", broker.MaxReceiveBatch+1, err)
	}
}

// A deferred message whose last allowed delivery lapsed (MaxDeliveryCount deliveries failed) is
// dead-lettered by a peek-lock request for it, and stays so though the request fails: otherwise
// it could never leave the deferred state. The other messages of that request are neither
// locked nor counted as delivered.
func TestReceiveDeferredPastMaxDeliveryCount(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 1 })
	target := broker.Target{Entity: q}
	d := b.deferAll(t, q, "worn", "fresh", "other")
	worn, fresh, other := d[0].SequenceNumber, d[1].SequenceNumber, d[2].SequenceNumber
	// Its delivery by number lapses (an abandon would dead-letter it at once): it is deferred
	// again, with as many failed deliveries as the queue allows.
	m, err := receiveDeferred1(b.ctx, b.store, target, worn, broker.PeekLock)
	if err != nil || m.DeliveryCount != 1 {
		t.Fatalf("delivery of worn by number = %v, %v", m, err)
	}
	b.clock.Advance(q.Props.LockDuration + time.Second)
	if got := b.browseOne(t, q, worn); got.State != broker.StateDeferred {
		t.Fatalf("worn after its lock ran out: %v; want deferred", got.State)
	}
	sizeBefore := b.counts(t, "q").SizeInBytes

	_, err = b.store.ReceiveDeferred(b.ctx, target, []int64{fresh, worn}, broker.PeekLock)
	if !errors.Is(err, broker.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("sequence number %d ", worn)) {
		t.Fatalf("peek-lock [fresh, worn]: err = %v; want ErrNotFound naming worn (%d)", err, worn)
	}
	if got := b.browseOne(t, q, fresh); got.State != broker.StateDeferred || got.DeliveryCount != 1 {
		t.Errorf("fresh after the request: %v, delivery count %d; want deferred, 1 (and not locked: see below)", got.State, got.DeliveryCount)
	}
	if c := b.counts(t, "q"); c.Active != 2 || c.DeadLetter != 1 || c.SizeInBytes != sizeBefore {
		t.Errorf("counts = %+v; want 2 active, 1 dead letter, %d bytes", c, sizeBefore)
	}
	dl := b.drain(t, q, broker.SubQueueDeadLetter)
	if len(dl) != 1 || dl[0].MessageID != "worn" || dl[0].DeadLetterReason != broker.ReasonMaxDeliveryCount {
		t.Fatalf("dead letters = %+v; want worn, dead-lettered for its deliveries", dl)
	}

	// A missing message named first is the one the error names; a worn one behind it is
	// dead-lettered all the same.
	if _, err = receiveDeferred1(b.ctx, b.store, target, other, broker.PeekLock); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(q.Props.LockDuration + time.Second)
	_, err = b.store.ReceiveDeferred(b.ctx, target, []int64{worn, other, fresh}, broker.PeekLock)
	if !errors.Is(err, broker.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("sequence number %d ", worn)) {
		t.Errorf("peek-lock [worn (gone), other (worn), fresh]: err = %v; want ErrNotFound naming %d", err, worn)
	}
	if dl := b.drain(t, q, broker.SubQueueDeadLetter); len(dl) != 1 || dl[0].MessageID != "other" {
		t.Errorf("dead letters = %q; want other", bodies(dl))
	}

	// The one left was not locked and is received as usual.
	msgs, err := b.store.ReceiveDeferred(b.ctx, target, []int64{fresh}, broker.PeekLock)
	if err != nil || len(msgs) != 1 || msgs[0].DeliveryCount != 1 {
		t.Fatalf("peek-lock [fresh] = %v, %v; want it with delivery count 1", msgs, err)
	}
	if c := b.counts(t, "q"); c.Active != 1 || c.DeadLetter != 0 {
		t.Errorf("counts = %+v; want 1 active", c)
	}
}

func TestBrowseDoesNotLockOrCount(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	for i := range 5 {
		b.send(t, q, broker.Message{Body: []byte(fmt.Sprint(i)), MessageID: fmt.Sprint(i)})
	}
	locked := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	all, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, 0, 100)
	if err != nil || len(all) != 5 {
		t.Fatalf("Browse all = %d, %v", len(all), err)
	}
	for i, m := range all {
		if m.MessageID != fmt.Sprint(i) {
			t.Errorf("browse[%d] = %s; want sequence order", i, m.MessageID)
		}
		if !m.LockedUntil.IsZero() || m.LockToken != [16]byte{} {
			t.Errorf("browse exposes the lock of %s", m.MessageID)
		}
	}
	page, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, all[2].SequenceNumber, 2)
	if err != nil || len(page) != 2 || page[0].MessageID != "2" || page[1].MessageID != "3" {
		t.Errorf("Browse from the third, 2 = %+v, %v", page, err)
	}
	// Browsing took no lock and counted no delivery.
	next := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if next.MessageID != "1" || next.DeliveryCount != 1 {
		t.Errorf("after browsing, received %s with DeliveryCount %d", next.MessageID, next.DeliveryCount)
	}
	_ = locked
}

func TestReceiveBatch(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	for i := range 7 {
		b.send(t, q, broker.Message{Body: []byte(fmt.Sprint(i)), MessageID: fmt.Sprint(i)})
	}
	got, err := receiveN(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, 5, 0)
	if err != nil || len(got) != 5 {
		t.Fatalf("ReceiveBatch(5) = %d, %v", len(got), err)
	}
	for i, m := range got {
		if m.MessageID != fmt.Sprint(i) || m.LockToken == [16]byte{} {
			t.Errorf("batch[%d] = %s (token %v)", i, m.MessageID, m.LockToken)
		}
	}
	rest, err := receiveN(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.ReceiveAndDelete, 5, 0)
	if err != nil || len(rest) != 2 || rest[0].MessageID != "5" {
		t.Fatalf("second batch = %+v, %v", rest, err)
	}
	if _, err := receiveN(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, 0, 0); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("ReceiveBatch(0): err = %v; want ErrBadRequest", err)
	}
}

func TestExplicitDeadLetterAndResubmit(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	for _, id := range []string{"a", "b", "c"} {
		b.send(t, q, broker.Message{Body: []byte(id), MessageID: id, TimeToLive: time.Hour, Label: "l-" + id})
	}
	for range 3 {
		m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
		if err := deadLetter1(b.ctx, b.store, broker.Target{Entity: q}, m.MessageID, m.LockToken, "Broken"+m.MessageID, "cannot parse"); err != nil {
			t.Fatalf("dead-letter %s: %v", m.MessageID, err)
		}
		if err := deadLetter1(b.ctx, b.store, broker.Target{Entity: q}, m.MessageID, m.LockToken, "again", ""); !errors.Is(err, broker.ErrLockLost) {
			t.Errorf("second dead-letter: err = %v; want ErrLockLost", err)
		}
	}
	if c := b.counts(t, "q"); c.DeadLetter != 3 || c.Active != 0 {
		t.Errorf("counts = %+v; want 3 dead-lettered", c)
	}
	dl, err := b.store.Browse(b.ctx, q, broker.SubQueueDeadLetter, 0, 10)
	if err != nil || len(dl) != 3 || dl[0].DeadLetterReason != "Brokena" || dl[0].DeadLetterDescription != "cannot parse" {
		t.Fatalf("dead-letter browse = %+v, %v", dl, err)
	}

	b.clock.Advance(30 * time.Minute)
	// One by sequence number.
	if n, err := b.store.Resubmit(b.ctx, q, dl[0].SequenceNumber, nil); err != nil || n != 1 {
		t.Fatalf("resubmit one = %d, %v", n, err)
	}
	if _, err := b.store.Resubmit(b.ctx, q, dl[0].SequenceNumber, nil); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("resubmit of a message no longer dead-lettered: err = %v; want ErrNotFound", err)
	}
	// All matching.
	n, err := b.store.Resubmit(b.ctx, q, 0, func(m *broker.Message) bool { return m.Label == "l-c" })
	if err != nil || n != 1 {
		t.Fatalf("resubmit matching = %d, %v", n, err)
	}
	if c := b.counts(t, "q"); c.DeadLetter != 1 || c.Active != 2 {
		t.Errorf("counts after resubmits = %+v; want 2 active, 1 dead-lettered", c)
	}
	a := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete)
	if a.MessageID != "a" || a.SequenceNumber <= dl[2].SequenceNumber || a.DeadLetterReason != "" || a.DeliveryCount != 1 {
		t.Errorf("resubmitted a = %+v; want a new sequence number, no dead-letter reason, a fresh delivery count", a)
	}
	if !a.EnqueuedTime.Equal(b.clock.Now()) || !a.ExpiresAt.Equal(b.clock.Now().Add(time.Hour)) {
		t.Errorf("resubmitted a enqueued %v expires %v; want now and its TTL from now", a.EnqueuedTime, a.ExpiresAt)
	}
}

func TestPurge(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 1 })
	for i := range 5 {
		b.send(t, q, body(fmt.Sprint(i)))
	}
	b.send(t, q, broker.Message{Body: []byte("scheduled"), ScheduledEnqueueTime: b.clock.Now().Add(time.Hour)})
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if err := deadLetter1(b.ctx, b.store, broker.Target{Entity: q}, m.MessageID, m.LockToken, "r", "d"); err != nil {
		t.Fatal(err)
	}
	b.receive(t, q, broker.SubQueueMain, broker.PeekLock) // one locked
	n, err := b.store.Purge(b.ctx, q, broker.SubQueueDeadLetter)
	if err != nil || n != 1 {
		t.Fatalf("purge dead-letter = %d, %v", n, err)
	}
	n, err = b.store.Purge(b.ctx, q, broker.SubQueueMain)
	if err != nil || n != 5 {
		t.Fatalf("purge main = %d, %v; want 4 plus the scheduled one", n, err)
	}
	if c := b.counts(t, "q"); c != (broker.Counts{}) {
		t.Errorf("counts after purge = %+v", c)
	}
}

// TestPurgeTakesRowsUpdatedWhileItRuns: a message another transaction updates while a purge
// runs (a claim, an abandon, a renewal) is purged too, in its new version, once that transaction
// ends; and the counts come out exact.
func TestPurgeTakesRowsUpdatedWhileItRuns(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	for i := range 5 {
		b.send(t, q, body(fmt.Sprint(i)))
	}
	tx, err := b.pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.ctx) }()
	if _, err := tx.Exec(b.ctx, `UPDATE messages SET delivery_count = delivery_count + 1
		WHERE entity_id = $1 AND seq = (SELECT max(seq) FROM messages WHERE entity_id = $1)`, q.ID); err != nil {
		t.Fatal(err)
	}
	done := purgeAsync(b, q)
	// The purge waits for the updating transaction's row lock.
	b.waitForLockWaiter(t, "%DELETE FROM messages%")
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.n != 5 {
		t.Fatalf("purge = %d, %v; want all 5, the one updated meanwhile too", r.n, r.err)
	}
	var left int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM messages WHERE entity_id = $1`, q.ID).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d messages left after the purge (%v)", left, err)
	}
	if c := b.counts(t, "q"); c != (broker.Counts{}) {
		t.Errorf("counts after purge = %+v", c)
	}
}

func TestMaxSizeInMegabytes(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil) // 1024 MB
	b.send(t, q, body("fits"))
	// Fill the queue's count to its quota without writing a gigabyte.
	if _, err := b.pool.Exec(b.ctx, `INSERT INTO entity_count_deltas (entity_id, main, dead, bytes) VALUES ($1, 0, 0, $2)`,
		q.ID, int64(1024<<20)); err != nil {
		t.Fatal(err)
	}
	b.maintain(t)
	// The size is remembered for a second.
	eventually.True(t, "the full queue to refuse a send", func() bool {
		err := b.store.Send(b.ctx, q, []broker.Message{body("too much")})
		return errors.Is(err, broker.ErrQuota)
	})
}

func TestAutoDeleteOnIdle(t *testing.T) {
	b := setup(t, manual)
	idle := b.queue(t, "idle", func(p *broker.Properties) { p.AutoDeleteOnIdle = 5 * time.Minute })
	busy := b.queue(t, "busy", func(p *broker.Properties) { p.AutoDeleteOnIdle = 5 * time.Minute })
	waiting := b.queue(t, "waiting", func(p *broker.Properties) { p.AutoDeleteOnIdle = 5 * time.Minute })
	b.queue(t, "forever", nil)
	b.send(t, waiting, broker.Message{Body: []byte("x"), ScheduledEnqueueTime: b.clock.Now().Add(time.Hour)})
	_ = idle

	b.clock.Advance(4 * time.Minute)
	b.send(t, busy, body("x"))
	b.maintain(t) // records the use of busy at minute 4
	b.clock.Advance(2 * time.Minute)
	b.maintain(t)

	for path, want := range map[string]bool{"idle": false, "busy": true, "waiting": true, "forever": true} {
		_, err := b.store.GetEntity(b.ctx, path)
		if exists := err == nil; exists != want {
			t.Errorf("after 6 minutes, %s exists = %v; want %v (err %v)", path, exists, want, err)
		}
	}
	e, err := b.store.GetEntity(b.ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if !e.AccessedAt.Equal(b.clock.Now().Add(-2 * time.Minute)) {
		t.Errorf("busy AccessedAt = %v; want minute 4", e.AccessedAt)
	}
}

// TestCountsDoNotScan: with many messages the count query reads indexes, not the table.
func TestCountsDoNotScan(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	if _, err := b.pool.Exec(b.ctx, `
		INSERT INTO messages (entity_id, enqueued_at, message_id, body, size)
		SELECT $1, $2, g::text, '\x00'::bytea, 1 FROM generate_series(1, 200000) g`, q.ID, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, `INSERT INTO entity_count_deltas VALUES ($1, 200000, 0, 200000)`, q.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}
	var lines []string
	rows, err := b.pool.Query(b.ctx, "EXPLAIN "+store.CountsSQL, []int64{q.ID}, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Seq Scan on messages") {
		t.Errorf("count query scans the messages table:\n%s", plan)
	}
	if c := b.counts(t, "q"); c.Active != 200000 {
		t.Errorf("Active = %d; want 200000", c.Active)
	}
}

// TestDrainGetsExactlyTheExpectedSet: 10,000 messages from 8 concurrent senders with mixed TTLs,
// schedules and duplicate ids; after time passes, a drain receives exactly the messages that
// should still be there, once each.
func TestDrainGetsExactlyTheExpectedSet(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) {
		p.RequiresDuplicateDetection = true
		p.DuplicateDetectionHistoryTimeWindow = time.Hour
	})
	start := b.clock.Now()
	type plan struct {
		id        string
		ttl       time.Duration
		scheduled time.Time
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var plans []plan
	for i := range 10000 {
		p := plan{id: fmt.Sprintf("m%05d", i)}
		switch r := rng.IntN(10); {
		case r == 0 && i > 0:
			p = plans[rng.IntN(i)] // a resend of an earlier message, which may race ahead of it
		case r <= 2:
			p.ttl = 5 * time.Minute // expired by the drain
		case r == 3:
			p.ttl = 5 * time.Hour // still alive
		case r == 4:
			p.scheduled = start.Add(10 * time.Minute) // due by the drain
		case r == 5:
			p.scheduled = start.Add(10 * time.Hour) // not yet
		}
		plans = append(plans, p)
	}
	// Expected: each id once, unless it expired or is scheduled past the drain.
	drainAt := start.Add(time.Hour)
	want := map[string]bool{}
	for _, p := range plans {
		expired := p.ttl > 0 && start.Add(p.ttl).Before(drainAt)
		future := !p.scheduled.IsZero() && p.scheduled.After(drainAt)
		if !expired && !future {
			want[p.id] = true
		}
	}
	var wg sync.WaitGroup
	for s := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < len(plans); i += 8 {
				p := plans[i]
				m := broker.Message{Body: []byte(p.id), MessageID: p.id, TimeToLive: p.ttl, ScheduledEnqueueTime: p.scheduled}
				if err := b.store.Send(b.ctx, q, []broker.Message{m}); err != nil {
					t.Errorf("send %s: %v", p.id, err)
				}
			}
		}()
	}
	wg.Wait()
	b.clock.Advance(time.Hour)
	got := map[string]bool{}
	for {
		msgs, err := receiveN(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.ReceiveAndDelete, 500, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if got[m.MessageID] {
				t.Errorf("message %s received twice", m.MessageID)
			}
			got[m.MessageID] = true
		}
	}
	if diff := cmp.Diff(keys(want), keys(got)); diff != "" {
		t.Errorf("drained set differs (-want +got):\n%s", diff)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ResetConnections drops the connections of both pools (after a restart of the database each
// would fail its next statement), and the store goes on with new ones.
func TestResetConnections(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	b.send(t, q, body("1"), body("2"))
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	// The connections idle before the reset (the background tasks may hold others a moment).
	var pool, hot []uint32
	for range 100 {
		if pool, hot = b.store.IdlePIDs(b.ctx); len(pool) > 0 && len(hot) > 0 {
			break
		}
	}
	if len(pool) == 0 || len(hot) == 0 {
		t.Fatalf("idle connections before the reset: pool %v, generic-plan pool %v; want some in each", pool, hot)
	}
	b.store.ResetConnections()
	// Background tasks may open new connections at once; none of the old may be handed out.
	poolAfter, hotAfter := b.store.IdlePIDs(b.ctx)
	for _, pid := range append(poolAfter, hotAfter...) {
		if slices.Contains(pool, pid) || slices.Contains(hot, pid) {
			t.Errorf("backend %d, idle before the reset, is still in a pool (pool %v, generic-plan pool %v after)", pid, poolAfter, hotAfter)
		}
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, "", m.LockToken); err != nil {
		t.Errorf("complete after the reset: %v", err)
	}
	if m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock); m == nil {
		t.Error("receive after the reset: nothing")
	}
}

// A deferred message a deferred receive dead-letters for its deliveries goes on at once to
// where its entity forwards dead letters, as one a claim dead-letters does (before, it waited
// in the entity's dead-letter subqueue for the next maintenance run or claim).
func TestReceiveDeferredPastMaxDeliveryCountForwards(t *testing.T) {
	b := setup(t, manual)
	collector := b.queue(t, "collector", nil)
	q := b.queue(t, "q", func(p *broker.Properties) {
		p.MaxDeliveryCount = 1
		p.ForwardDeadLetteredMessagesTo = "collector"
	})
	target := broker.Target{Entity: q}
	worn := b.deferAll(t, q, "worn")[0].SequenceNumber
	// Its one allowed delivery by number lapses.
	if _, err := receiveDeferred1(b.ctx, b.store, target, worn, broker.PeekLock); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(q.Props.LockDuration + time.Second)
	if _, err := receiveDeferred1(b.ctx, b.store, target, worn, broker.PeekLock); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("receive of a worn deferred message: %v; want ErrNotFound", err)
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("q counts %+v; want nothing left, not even a dead letter", c)
	}
	got := b.drain(t, collector, broker.SubQueueMain)
	if len(got) != 1 || got[0].MessageID != "worn" || got[0].DeadLetterSource != "q" {
		t.Fatalf("collector holds %+v; want worn, from q", got)
	}
}

// DeliveryCount is the service's: deliveries that failed (abandoned, lock expired, lock lost with
// its session) plus one. Neither dead-lettering nor deferring fails a delivery, a receive from
// the dead-letter subqueue or of a deferred message by its number adds nothing by itself, and
// nothing counts in the dead-letter subqueue. What the Go SDK's own live tests check of the
// service (TestMessageSettlementUsingReceiver, TestDeferredMessages/Abandon).
func TestDeliveryCountAsTheServiceCountsIt(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 10 })
	main, dlq := broker.Target{Entity: q}, broker.Target{Entity: q, SubQueue: broker.SubQueueDeadLetter}
	count := func(what string, m *broker.Message, want int32) {
		t.Helper()
		if m == nil {
			t.Fatalf("%s: no message", what)
		}
		if m.DeliveryCount != want {
			t.Errorf("%s: DeliveryCount %d; want %d", what, m.DeliveryCount, want)
		}
	}
	settle := func(tg broker.Target, op broker.Settlement, m *broker.Message) {
		t.Helper()
		if _, err := settle1(b.ctx, b.store, tg, op, m.MessageID, m.LockToken); err != nil {
			t.Fatalf("%v of %s: %v", op, m.MessageID, err)
		}
	}

	b.send(t, q, broker.Message{Body: []byte("a"), MessageID: "a"})
	all, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, 0, 1)
	if err != nil || len(all) != 1 {
		t.Fatalf("browse: %v, %v", all, err)
	}
	seq := all[0].SequenceNumber
	count("peek before any delivery", b.browseOne(t, q, seq), 1)
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	count("first delivery", m, 1)
	count("peek while locked", b.browseOne(t, q, seq), 1)
	settle(main, broker.Abandon, m)
	count("peek after an abandon", b.browseOne(t, q, seq), 2)
	m = b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	count("delivery after an abandon", m, 2)
	settle(main, broker.DeadLetter, m)
	m = b.receive(t, q, broker.SubQueueDeadLetter, broker.PeekLock)
	count("first delivery from the dead-letter subqueue", m, 2)
	settle(dlq, broker.Abandon, m)
	m = b.receive(t, q, broker.SubQueueDeadLetter, broker.PeekLock)
	count("dead letter after an abandon there", m, 2)
	b.clock.Advance(q.Props.LockDuration + time.Second)
	m = b.receive(t, q, broker.SubQueueDeadLetter, broker.PeekLock)
	count("dead letter after its lock lapsed", m, 2)
	settle(dlq, broker.Complete, m)

	// Deferred: received by number, abandoned, peeked.
	d := b.deferAll(t, q, "d")[0]
	m, err = receiveDeferred1(b.ctx, b.store, main, d.SequenceNumber, broker.PeekLock)
	if err != nil {
		t.Fatal(err)
	}
	count("deferred message received by number", m, 1)
	settle(main, broker.Abandon, m)
	count("peek of the deferred message after an abandon", b.browseOne(t, q, d.SequenceNumber), 2)
	m, err = receiveDeferred1(b.ctx, b.store, main, d.SequenceNumber, broker.PeekLock)
	if err != nil {
		t.Fatal(err)
	}
	count("deferred message received again", m, 2)
	settle(main, broker.Complete, m)

	// A lapsed lock counts; a release (a delivery the receiver never saw) does not.
	b.send(t, q, broker.Message{Body: []byte("l"), MessageID: "l"})
	m = b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	count("first delivery of l", m, 1)
	b.clock.Advance(q.Props.LockDuration + time.Second)
	count("peek after a lapsed lock", b.browseOne(t, q, m.SequenceNumber), 2)
	m = b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	count("delivery after a lapsed lock", m, 2)
	settle(main, broker.Release, m)
	m = b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete)
	count("receive-and-delete after a release", m, 2)

	// Receive-and-delete takes a message whose lock lapsed with that delivery counted, and
	// without the lapsed lock's token.
	b.send(t, q, broker.Message{Body: []byte("r"), MessageID: "r"})
	count("first delivery of r", b.receive(t, q, broker.SubQueueMain, broker.PeekLock), 1)
	b.clock.Advance(q.Props.LockDuration + time.Second)
	m = b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete)
	count("receive-and-delete after a lapsed lock", m, 2)
	if m.LockToken != uuid.Nil {
		t.Errorf("receive-and-delete after a lapsed lock gave lock token %v", m.LockToken)
	}

	// A message locked under a session lock that was released counts that delivery.
	sq := b.sessionQueue(t, "sq", nil)
	b.send(t, sq, broker.Message{Body: []byte("s"), MessageID: "s", SessionID: "one", HasSessionID: true})
	s := b.accept(t, sq, "one")
	got := b.receiveIn(t, sq, s, 1)
	if len(got) != 1 {
		t.Fatalf("session receive: %d messages", len(got))
	}
	count("first delivery in the session", got[0], 1)
	if err := b.store.ReleaseSession(b.ctx, sq, lockOf(s)); err != nil {
		t.Fatal(err)
	}
	s = b.accept(t, sq, "one")
	got = b.receiveIn(t, sq, s, 1)
	if len(got) != 1 {
		t.Fatalf("session receive after the release: %d messages", len(got))
	}
	count("delivery after the session lock was released", got[0], 2)
}
