package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store"
)

// A transaction's commit applies its sends (topic copies and duplicate detection as any send)
// and its settlements together; another gateway sees all of it after the commit.
func TestCommitTransactionAppliesAll(t *testing.T) {
	b := setup(t, manual)
	in := b.queue(t, "in", nil)
	top := b.topic(t, "t", nil)
	b.sub(t, "t", "a", nil, nil)
	b.sub(t, "t", "b", nil, nil)
	dd := b.queue(t, "dd", func(p *broker.Properties) { p.RequiresDuplicateDetection = true })
	b.send(t, in, body("work"))
	m := b.receive(t, in, broker.SubQueueMain, broker.PeekLock)
	w := broker.TxWork{
		Sends: []broker.TxSend{
			{Entity: top, Messages: []broker.Message{body("fan-out")}},
			{Entity: dd, Messages: []broker.Message{{MessageID: "once", Body: []byte("1")}}},
			{Entity: dd, Messages: []broker.Message{{MessageID: "once", Body: []byte("2")}}},
		},
		Settles: []broker.TxSettle{{Target: broker.Target{Entity: in}, Request: broker.SettleRequest{Op: broker.Complete, Token: m.LockToken}}},
	}
	if err := b.store.CommitTransaction(b.ctx, w); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int64{"in": 0, "t/Subscriptions/a": 1, "t/Subscriptions/b": 1, "dd": 1} {
		if c := b.counts(t, path); c.Active != want {
			t.Errorf("%s after the commit: %+v; want %d active", path, c, want)
		}
	}
	other := openStore(t, b.pool.Config().ConnString(), store.Options{Now: b.clock.Now, MaintenanceInterval: time.Hour})
	sub, err := other.Resolve(b.ctx, "t/Subscriptions/a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := receive1(b.ctx, other, broker.Target{Entity: sub}, broker.ReceiveAndDelete, 0)
	if err != nil || got == nil || string(got.Body) != "fan-out" {
		t.Errorf("through another gateway: %v, %v; want the message sent in the transaction", got, err)
	}
}

// A settlement whose lock is gone fails the commit, and nothing of the transaction is applied.
func TestCommitTransactionLockLostAppliesNothing(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	b.send(t, q, body("a"), body("b"))
	ma := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	mb := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Complete, "", mb.LockToken); err != nil {
		t.Fatal(err)
	}
	w := broker.TxWork{
		Sends: []broker.TxSend{{Entity: q, Messages: []broker.Message{body("new")}}},
		Settles: []broker.TxSettle{
			{Target: broker.Target{Entity: q}, Request: broker.SettleRequest{Op: broker.Complete, Token: ma.LockToken}},
			{Target: broker.Target{Entity: q}, Request: broker.SettleRequest{Op: broker.DeadLetter, Token: mb.LockToken}},
		},
	}
	if err := b.store.CommitTransaction(b.ctx, w); !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("commit with a lock gone: %v; want ErrLockLost", err)
	}
	if c := b.counts(t, "q"); c.Active != 1 || c.DeadLetter != 0 {
		t.Errorf("q after the failed commit: %+v; want only a, still locked", c)
	}
	// a is still locked by its receiver: its completion outside the transaction works.
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Complete, "", ma.LockToken); err != nil {
		t.Errorf("a's lock after the failed commit: %v", err)
	}
	// A renewal or a settlement of one lock twice is no transaction's work.
	for _, w := range []broker.TxWork{
		{Settles: []broker.TxSettle{{Target: broker.Target{Entity: q}, Request: broker.SettleRequest{Op: broker.RenewLock, Token: uuid.New()}}}},
	} {
		if err := b.store.CommitTransaction(b.ctx, w); !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("%+v: %v; want ErrBadRequest", w, err)
		}
	}
}

// A message a transaction scheduled takes the number reserved for it, lower than those sent
// since; due at the commit, it is still the next claim's, wherever the claims' cursor is.
func TestCommitTransactionReservedNumberIsClaimed(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	nums, err := b.store.ReserveSequenceNumbers(b.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.send(t, q, body("a"), body("b"))
	for range 2 { // the claims' cursor passes the reserved number
		if m := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete); m == nil {
			t.Fatal("a sent message was not received")
		}
	}
	m := broker.Message{MessageID: "reserved", Body: []byte("r"), ScheduledEnqueueTime: b.clock.Now().Add(-time.Second)}
	if err := b.store.CommitTransaction(b.ctx, broker.TxWork{Sends: []broker.TxSend{{Entity: q, Messages: []broker.Message{m}, Numbers: nums}}}); err != nil {
		t.Fatal(err)
	}
	got := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete)
	if got == nil || got.MessageID != "reserved" || got.SequenceNumber != nums[0] {
		t.Fatalf("after the commit: %+v; want the message with the reserved number %d", got, nums[0])
	}
}

// A session state a transaction sets needs its session lock at the commit: without it nothing of
// the transaction is applied.
func TestCommitTransactionSessionStateNeedsTheLock(t *testing.T) {
	b := setup(t, manual)
	sq := b.queue(t, "sq", func(p *broker.Properties) { p.RequiresSession = true })
	q := b.queue(t, "q", nil)
	sess, err := b.store.AcceptSession(b.ctx, sq, "s1")
	if err != nil {
		t.Fatal(err)
	}
	lock := broker.SessionLock{SessionID: "s1", Token: sess.LockToken}
	gone := broker.SessionLock{SessionID: "s1", Token: uuid.New()}
	w := broker.TxWork{
		Sends:         []broker.TxSend{{Entity: q, Messages: []broker.Message{body("x")}}},
		SessionStates: []broker.TxSessionState{{Entity: sq, Lock: gone, State: []byte("state")}},
	}
	if err := b.store.CommitTransaction(b.ctx, w); broker.ErrorCode(err) != broker.CodeLockLost {
		t.Fatalf("commit with a session lock not held: %v; want the session lock lost", err)
	}
	if c := b.counts(t, "q"); c.Active != 0 {
		t.Errorf("q after the failed commit: %+v; want nothing", c)
	}
	w.SessionStates[0].Lock = lock
	if err := b.store.CommitTransaction(b.ctx, w); err != nil {
		t.Fatal(err)
	}
	if st, err := b.store.SessionState(b.ctx, sq, lock); err != nil || string(st) != "state" {
		t.Errorf("the session state after the commit: %q, %v", st, err)
	}
}
