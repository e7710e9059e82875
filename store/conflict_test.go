package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/internal/eventually"
)

// rowLocker holds row locks on messages in an open transaction, as another writer would (a
// purge, another gateway's settlement). Its own deadlock_timeout is long, so that in a deadlock
// the store's statement, which waits with the default second, is the one PostgreSQL ends.
type rowLocker struct {
	t  *testing.T
	b  *bundle
	tx pgx.Tx
}

func newRowLocker(t *testing.T, b *bundle) *rowLocker {
	t.Helper()
	tx, err := b.pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(b.ctx, `SET LOCAL deadlock_timeout = '60s'`); err != nil {
		t.Fatal(err)
	}
	return &rowLocker{t: t, b: b, tx: tx}
}

// lock takes the row lock of message seq of e, waiting for it if another holds it; with nowait
// it fails instead of waiting.
func (l *rowLocker) lock(e *broker.Entity, seq int64, nowait bool) {
	l.t.Helper()
	sql := `SELECT 1 FROM messages WHERE entity_id = $1 AND seq = $2 FOR UPDATE`
	if nowait {
		sql += ` NOWAIT`
	}
	l.lockRow(sql, e.ID, seq)
}

// lockRow runs sql, which locks one row.
func (l *rowLocker) lockRow(sql string, args ...any) {
	l.t.Helper()
	var one int
	if err := l.tx.QueryRow(l.b.ctx, sql, args...).Scan(&one); err != nil {
		l.t.Fatalf("%s %v: %v", sql, args, err)
	}
}

// release ends the transaction, and with it its locks.
func (l *rowLocker) release() {
	l.t.Helper()
	if err := l.tx.Rollback(l.b.ctx); err != nil {
		l.t.Fatal(err)
	}
}

// awaitLockWaiter returns once another backend of the test's database waits for a lock.
func (l *rowLocker) awaitLockWaiter() {
	l.t.Helper()
	eventually.True(l.t, "a statement to wait for the locked rows", func() bool {
		var n int
		if err := l.b.pool.QueryRow(l.b.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			l.t.Fatal(err)
		}
		return n > 0
	})
}

// lockedPair sends two messages to a new queue and peek-locks both.
func lockedPair(t *testing.T, b *bundle) (*broker.Entity, *broker.Message, *broker.Message) {
	t.Helper()
	q := b.queue(t, "q", nil)
	b.send(t, q, body("first"), body("second"))
	m1 := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	m2 := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if m1 == nil || m2 == nil || m1.SequenceNumber > m2.SequenceNumber {
		t.Fatalf("received %+v and %+v; want both, in order", m1, m2)
	}
	return q, m1, m2
}

// completeAroundLocks completes msgs while another transaction holds the row lock of message
// first, and, once the completion waits for a lock, takes the row lock of message then too
// (failing instead of waiting with nowait), then ends. Every complete must succeed.
func completeAroundLocks(t *testing.T, b *bundle, q *broker.Entity, first, then int64, nowait bool, msgs ...*broker.Message) {
	t.Helper()
	var reqs []broker.SettleRequest
	for _, m := range msgs {
		reqs = append(reqs, broker.SettleRequest{Op: broker.Complete, Token: m.LockToken})
	}
	other := newRowLocker(t, b)
	other.lock(q, first, false)
	done := make(chan []broker.SettleResult, 1)
	go func() { done <- b.store.Settle(b.ctx, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, reqs) }()
	other.awaitLockWaiter()
	other.lock(q, then, nowait)
	other.release()
	for i, res := range <-done {
		if res.Err != nil {
			t.Errorf("complete %d: %v", i, res.Err)
		}
	}
}

// purged is what a purge returned.
type purged struct {
	n   int64
	err error
}

// purgeAsync purges q's messages in the background.
func purgeAsync(b *bundle, q *broker.Entity) <-chan purged {
	done := make(chan purged, 1)
	go func() {
		n, err := b.store.Purge(b.ctx, q, broker.SubQueueMain)
		done <- purged{n, err}
	}()
	return done
}

// A settlement round that PostgreSQL ends in a deadlock is run again: its clients get their
// settlements, not an error for a conflict none of them caused.
func TestSettlementDeadlockIsRetried(t *testing.T) {
	b := setup(t)
	q, m1, m2 := lockedPair(t, b)
	// The settlement deletes the first message and waits for the second; taking the first
	// then closes the cycle, which PostgreSQL breaks by ending the settlement's statement.
	completeAroundLocks(t, b, q, m2.SequenceNumber, m1.SequenceNumber, false, m1, m2)
	if n := b.store.ConflictRetries(); n == 0 {
		t.Error("no statement was retried: the deadlock did not happen")
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("counts after both completes = %+v; want none left", c)
	}
}

// A settlement locks its rows in primary-key order, whatever order its clients named them in,
// so it waits for a writer that goes in that order (a purge) instead of deadlocking with it.
func TestSettlementLocksInKeyOrder(t *testing.T) {
	b := setup(t)
	q, m1, m2 := lockedPair(t, b)
	// Settled in the order asked, the second message would be deleted already (held by the
	// settlement until it ends) when the other transaction asks for it without waiting.
	completeAroundLocks(t, b, q, m1.SequenceNumber, m2.SequenceNumber, true, m2, m1)
	if n := b.store.ConflictRetries(); n != 0 {
		t.Errorf("%d statements retried after a conflict; want none", n)
	}
}

// A purge chunk that PostgreSQL ends in a deadlock is run again.
func TestPurgeDeadlockIsRetried(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	b.send(t, q, body("1"), body("2"), body("3"))
	msgs, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, 0, 3)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("browse: %d messages, %v", len(msgs), err)
	}
	other := newRowLocker(t, b)
	other.lock(q, msgs[2].SequenceNumber, false)
	done := purgeAsync(b, q)
	other.awaitLockWaiter()
	other.lock(q, msgs[0].SequenceNumber, false)
	other.release()
	res := <-done
	if res.err != nil || res.n != 3 {
		t.Fatalf("purge = %d, %v; want 3 purged", res.n, res.err)
	}
	if n := b.store.ConflictRetries(); n == 0 {
		t.Error("no statement was retried: the deadlock did not happen")
	}
}

// Sends with duplicate detection lock the entries of their MessageIds; a send that PostgreSQL
// ends in a deadlock over them is run again, not failed with every send coalesced with it.
func TestSendDeadlockIsRetried(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.RequiresDuplicateDetection = true })
	b.send(t, q, broker.Message{MessageID: "a", Body: []byte("1")}, broker.Message{MessageID: "b", Body: []byte("2")})
	const lockID = `SELECT 1 FROM dedup WHERE entity_id = $1 AND message_id = $2 FOR UPDATE`
	other := newRowLocker(t, b)
	other.lockRow(lockID, q.ID, "b")
	done := make(chan error, 1)
	go func() {
		done <- b.store.Send(b.ctx, q, []broker.Message{{MessageID: "b", Body: []byte("3")}, {MessageID: "a", Body: []byte("4")}})
	}()
	other.awaitLockWaiter()
	other.lockRow(lockID, q.ID, "a")
	other.release()
	if err := <-done; err != nil {
		t.Fatalf("send: %v", err)
	}
	if n := b.store.ConflictRetries(); n == 0 {
		t.Error("no statement was retried: the deadlock did not happen")
	}
	if c := b.counts(t, "q"); c.Active != 2 {
		t.Errorf("counts = %+v; want the 2 first sends (the others are duplicates)", c)
	}
}

// A deferred receive that PostgreSQL ends in a deadlock is run again: it locks its rows in
// ascending order, so two of them never deadlock, but another writer can (here a transaction
// that holds the last row, then asks for the first).
func TestReceiveDeferredDeadlockIsRetried(t *testing.T) {
	b := setup(t)
	q, m1, m2 := lockedPair(t, b)
	main := broker.Target{Entity: q, SubQueue: broker.SubQueueMain}
	for _, m := range []*broker.Message{m1, m2} {
		if _, err := settle1(b.ctx, b.store, main, broker.Defer, "", m.LockToken); err != nil {
			t.Fatal(err)
		}
	}
	other := newRowLocker(t, b)
	other.lock(q, m2.SequenceNumber, false)
	type received struct {
		msgs []*broker.Message
		err  error
	}
	done := make(chan received, 1)
	go func() {
		msgs, err := b.store.ReceiveDeferred(b.ctx, main, []int64{m2.SequenceNumber, m1.SequenceNumber}, broker.ReceiveAndDelete)
		done <- received{msgs, err}
	}()
	other.awaitLockWaiter()
	other.lock(q, m1.SequenceNumber, false)
	other.release()
	res := <-done
	if res.err != nil || len(res.msgs) != 2 || res.msgs[0].SequenceNumber != m2.SequenceNumber {
		t.Fatalf("receive deferred = %v, %v; want both, in the order asked", res.msgs, res.err)
	}
	if n := b.store.ConflictRetries(); n == 0 {
		t.Error("no statement was retried: the deadlock did not happen")
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("counts after the receive = %+v; want none left", c)
	}
}
