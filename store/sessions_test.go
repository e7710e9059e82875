package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store"
)

func (b *bundle) sessionQueue(t *testing.T, path string, edit func(p *broker.Properties)) *broker.Entity {
	t.Helper()
	return b.queue(t, path, func(p *broker.Properties) {
		p.RequiresSession = true
		if edit != nil {
			edit(p)
		}
	})
}

func (b *bundle) accept(t *testing.T, e *broker.Entity, id string) *broker.Session {
	t.Helper()
	s, err := b.store.AcceptSession(b.ctx, e, id)
	if err != nil {
		t.Fatalf("AcceptSession(%q): %v", id, err)
	}
	return s
}

// acceptNext accepts the next available session of e without waiting; nil when there is none.
func (b *bundle) acceptNext(t *testing.T, e *broker.Entity) *broker.Session {
	t.Helper()
	s, err := b.store.AcceptNextSession(b.ctx, e, 0)
	if err != nil {
		t.Fatalf("AcceptNextSession: %v", err)
	}
	return s
}

func lockOf(s *broker.Session) broker.SessionLock {
	return broker.SessionLock{SessionID: s.ID, Token: s.LockToken}
}

func (b *bundle) receiveIn(t *testing.T, e *broker.Entity, s *broker.Session, n int) []*broker.Message {
	t.Helper()
	msgs, err := receiveN(b.ctx, b.store, inSession(e, lockOf(s)), broker.PeekLock, n, 0)
	if err != nil {
		t.Fatalf("ReceiveSession(%s): %v", s.ID, err)
	}
	return msgs
}

func TestSessionsAreExclusiveAndOrdered(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", nil)
	for i := range 3 {
		for _, sid := range []string{"a", "b"} {
			b.send(t, q, broker.Message{Body: []byte(fmt.Sprintf("%s%d", sid, i)), SessionID: sid})
		}
	}
	// The session whose messages waited longest comes first.
	s1 := b.acceptNext(t, q)
	if s1 == nil || s1.ID != "a" || !s1.LockedUntil.Equal(b.clock.Now().Add(time.Minute)) {
		t.Fatalf("first accept = %+v; want session a locked for a minute", s1)
	}
	s2 := b.acceptNext(t, q)
	if s2 == nil || s2.ID != "b" {
		t.Fatalf("second accept = %+v; want session b", s2)
	}
	if s3 := b.acceptNext(t, q); s3 != nil {
		t.Fatalf("third accept = %+v; want none while both are held", s3)
	}
	if _, err := b.store.AcceptSession(b.ctx, q, "a"); !errors.Is(err, broker.ErrConflict) {
		t.Errorf("accepting a held session by name: err = %v; want ErrConflict", err)
	}
	got := b.receiveIn(t, q, s1, 10)
	if diff := cmp.Diff([]string{"a0", "a1", "a2"}, bodies(got)); diff != "" {
		t.Errorf("session a (-want +got):\n%s", diff)
	}
	for _, m := range got {
		if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s2)), broker.Complete, m.MessageID, m.LockToken); !errors.Is(err, broker.ErrLockLost) {
			t.Errorf("settling a's message under b's lock: err = %v; want ErrLockLost", err)
		}
		if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s1)), broker.Complete, m.MessageID, m.LockToken); err != nil {
			t.Errorf("complete in session: %v", err)
		}
	}
	// Plain receives and settlements do not work on a session queue.
	if _, err := receive1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, 0); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("plain receive: err = %v; want ErrBadRequest", err)
	}
	if err := b.store.Send(b.ctx, q, []broker.Message{body("no session")}); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("send without SessionId: err = %v; want ErrBadRequest", err)
	}
	// Released with no messages left, a session is no longer offered.
	if err := b.store.ReleaseSession(b.ctx, q, lockOf(s1)); err != nil {
		t.Fatal(err)
	}
	if err := b.store.ReleaseSession(b.ctx, q, lockOf(s1)); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("second release: err = %v; want ErrLockLost", err)
	}
	if s := b.acceptNext(t, q); s != nil {
		t.Errorf("accept after a was emptied = %+v; want none (b is held)", s)
	}
}

func TestSessionLockExpiryHandsOver(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", func(p *broker.Properties) { p.LockDuration = 30 * time.Second })
	for i := range 4 {
		b.send(t, q, broker.Message{Body: []byte(fmt.Sprint(i)), SessionID: "s"})
	}
	first := b.acceptNext(t, q)
	msgs := b.receiveIn(t, q, first, 2)
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(first)), broker.Complete, msgs[0].MessageID, msgs[0].LockToken); err != nil {
		t.Fatal(err)
	}
	renewed, err := b.store.RenewSessionLock(b.ctx, q, lockOf(first))
	if err != nil || !renewed.Equal(b.clock.Now().Add(30*time.Second)) {
		t.Fatalf("renew = %v, %v", renewed, err)
	}
	// The receiver dies holding the session and message 1.
	b.clock.Advance(31 * time.Second)
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(first)), broker.Complete, msgs[1].MessageID, msgs[1].LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("settle after the session lock expired: err = %v; want ErrLockLost", err)
	}
	second := b.acceptNext(t, q)
	if second == nil || second.ID != "s" || second.LockToken == first.LockToken {
		t.Fatalf("second accept = %+v; want s under a new lock", second)
	}
	rest := b.receiveIn(t, q, second, 10)
	if diff := cmp.Diff([]string{"1", "2", "3"}, bodies(rest)); diff != "" {
		t.Errorf("the new holder continues from the first unsettled message (-want +got):\n%s", diff)
	}
	if rest[0].DeliveryCount != 2 {
		t.Errorf("message 1 redelivered with DeliveryCount %d; want 2", rest[0].DeliveryCount)
	}
	if _, err := receiveN(b.ctx, b.store, inSession(q, lockOf(first)), broker.PeekLock, 1, 0); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("receive under the expired lock: err = %v; want ErrLockLost", err)
	}
}

func TestSessionState(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", nil)
	s := b.accept(t, q, "device-7") // named, without messages
	if st, err := b.store.SessionState(b.ctx, q, lockOf(s)); err != nil || st != nil {
		t.Fatalf("initial state = %q, %v", st, err)
	}
	if err := b.store.SetSessionState(b.ctx, q, lockOf(s), []byte("step=3")); err != nil {
		t.Fatal(err)
	}
	other := broker.SessionLock{SessionID: "device-7", Token: [16]byte{1}}
	if err := b.store.SetSessionState(b.ctx, q, other, []byte("x")); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("set state without the lock: err = %v; want ErrLockLost", err)
	}
	if err := b.store.ReleaseSession(b.ctx, q, lockOf(s)); err != nil {
		t.Fatal(err)
	}
	b.maintain(t) // idle sessions without state are forgotten; this one has state
	list, err := b.store.ListSessions(b.ctx, q, 0, 10)
	if err != nil || len(list) != 1 || list[0].ID != "device-7" || !list[0].HasState || list[0].HasMessages {
		t.Fatalf("ListSessions = %+v, %v", list, err)
	}
	s = b.accept(t, q, "device-7")
	if st, err := b.store.SessionState(b.ctx, q, lockOf(s)); err != nil || string(st) != "step=3" {
		t.Errorf("state after re-accept = %q, %v; want it kept", st, err)
	}
	if err := b.store.SetSessionState(b.ctx, q, lockOf(s), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.store.ReleaseSession(b.ctx, q, lockOf(s)); err != nil {
		t.Fatal(err)
	}
	b.maintain(t)
	if list, _ := b.store.ListSessions(b.ctx, q, 0, 10); len(list) != 0 {
		t.Errorf("a cleared, empty session is still listed: %+v", list)
	}
}

func TestSessionLifecycleFeatures(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 1 })
	b.send(t, q,
		broker.Message{Body: []byte("later"), SessionID: "s", ScheduledEnqueueTime: b.clock.Now().Add(time.Hour)},
		broker.Message{Body: []byte("short"), SessionID: "s", TimeToLive: time.Second},
		broker.Message{Body: []byte("defer-me"), SessionID: "s", MessageID: "d"},
		broker.Message{Body: []byte("poison"), SessionID: "s", MessageID: "p"})
	b.clock.Advance(2 * time.Second) // "short" expires
	s := b.acceptNext(t, q)
	msgs := b.receiveIn(t, q, s, 10)
	if diff := cmp.Diff([]string{"defer-me", "poison"}, bodies(msgs)); diff != "" {
		t.Fatalf("session receive (-want +got):\n%s", diff)
	}
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Defer, "d", msgs[0].LockToken); err != nil {
		t.Fatal(err)
	}
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Abandon, "p", msgs[1].LockToken); err != nil {
		t.Fatal(err)
	}
	// The poison message was delivered MaxDeliveryCount times: the next receive dead-letters it.
	if again := b.receiveIn(t, q, s, 10); len(again) != 0 {
		t.Errorf("received %q; want nothing (deferred, dead-lettered, scheduled)", bodies(again))
	}
	if dl := b.drain(t, q, broker.SubQueueDeadLetter); len(dl) != 1 || dl[0].MessageID != "p" {
		t.Errorf("dead letters = %q; want the poison message", bodies(dl))
	}
	d, err := receiveDeferred1(b.ctx, b.store, inSession(q, lockOf(s)), msgs[0].SequenceNumber, broker.ReceiveAndDelete)
	if err != nil || string(d.Body) != "defer-me" {
		t.Fatalf("deferred receive = %v, %v", d, err)
	}
	if err := deadLetter1(b.ctx, b.store, inSession(q, lockOf(s)), "x", [16]byte{9}, "r", "d"); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("dead-letter with a wrong message lock: err = %v", err)
	}
	// The scheduled message makes the session available again when it is due.
	if err := b.store.ReleaseSession(b.ctx, q, lockOf(s)); err != nil {
		t.Fatal(err)
	}
	if s := b.acceptNext(t, q); s != nil {
		t.Fatalf("accept before the schedule = %+v; want none", s)
	}
	b.clock.Advance(time.Hour)
	s = b.acceptNext(t, q)
	if s == nil {
		t.Fatal("session not offered when its scheduled message became due")
	}
	if got := bodies(b.receiveIn(t, q, s, 10)); !cmp.Equal(got, []string{"later"}) {
		t.Errorf("after the schedule: %q", got)
	}
}

// TestManySessionsManyReceivers: 50 sessions × 200 messages sent concurrently (each session by
// its own sender, in order), 8 competing session receivers. Each session's messages are
// processed in exact send order, by one receiver at a time, none lost or duplicated.
func TestManySessionsManyReceivers(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: store.Options{MaintenanceInterval: time.Hour}})
	q := b.sessionQueue(t, "q", nil)
	const sessions, perSession, receivers = 50, 200, 8
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("s%02d", s)
			for i := 0; i < perSession; i += 10 {
				batch := make([]broker.Message, 10)
				for j := range batch {
					batch[j] = broker.Message{Body: []byte(fmt.Sprint(i + j)), SessionID: sid}
				}
				if err := b.store.Send(b.ctx, q, batch); err != nil {
					t.Errorf("send %s: %v", sid, err)
					return
				}
			}
		}()
	}
	wg.Wait()

	var mu sync.Mutex
	next := make(map[string]int)   // the next message number each session must deliver
	holder := make(map[string]int) // which receiver holds each session
	for r := range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				s, err := b.store.AcceptNextSession(b.ctx, q, 0)
				if err != nil {
					t.Errorf("accept: %v", err)
					return
				}
				if s == nil {
					return
				}
				mu.Lock()
				if h, held := holder[s.ID]; held {
					t.Errorf("receiver %d accepted %s while receiver %d holds it", r, s.ID, h)
				}
				holder[s.ID] = r
				mu.Unlock()
				for {
					msgs, err := receiveN(b.ctx, b.store, inSession(q, lockOf(s)), broker.PeekLock, 25, 0)
					if err != nil {
						t.Errorf("receive in %s: %v", s.ID, err)
						return
					}
					if len(msgs) == 0 {
						break
					}
					for _, m := range msgs {
						mu.Lock()
						if want := fmt.Sprint(next[s.ID]); string(m.Body) != want {
							t.Errorf("session %s delivered %s; want %s", s.ID, m.Body, want)
						}
						next[s.ID]++
						mu.Unlock()
						if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Complete, m.MessageID, m.LockToken); err != nil {
							t.Errorf("complete: %v", err)
						}
					}
				}
				mu.Lock()
				delete(holder, s.ID)
				mu.Unlock()
				if err := b.store.ReleaseSession(b.ctx, q, lockOf(s)); err != nil {
					t.Errorf("release %s: %v", s.ID, err)
				}
			}
		}()
	}
	wg.Wait()
	if len(next) != sessions {
		t.Errorf("%d sessions processed; want %d", len(next), sessions)
	}
	for sid, n := range next {
		if n != perSession {
			t.Errorf("session %s: %d messages processed; want %d", sid, n, perSession)
		}
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("left over: %+v", c)
	}
}

// A session lock naming a SessionId no session can have (not UTF-8, or with a NUL) is not held:
// every operation under it answers lock lost, and a settlement under it does not fail those it
// would have shared a statement with.
func TestSessionLockWithUnstorableID(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("a0"), SessionID: "a"})
	s := b.accept(t, q, "a")
	m := b.receiveIn(t, q, s, 1)[0]
	for _, id := range []string{"\xff", "a\x00"} {
		bad := broker.SessionLock{SessionID: id, Token: lockOf(s).Token}
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, broker.ErrLockLost) {
				t.Errorf("%s in session %q: err = %v; want ErrLockLost", what, id, err)
			}
		}
		res := b.store.Settle(b.ctx, inSession(q, bad), []broker.SettleRequest{{Op: broker.Complete, Token: m.LockToken}})
		check("complete", res[0].Err)
		_, err := receive1(b.ctx, b.store, inSession(q, bad), broker.PeekLock, 0)
		check("receive", err)
		_, err = receiveDeferred1(b.ctx, b.store, inSession(q, bad), m.SequenceNumber, broker.PeekLock)
		check("receive deferred", err)
		_, err = b.store.RenewSessionLock(b.ctx, q, bad)
		check("renew", err)
		_, err = b.store.SessionState(b.ctx, q, bad)
		check("get state", err)
		check("set state", b.store.SetSessionState(b.ctx, q, bad, []byte("x")))
		check("release", b.store.ReleaseSession(b.ctx, q, bad))
	}
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Complete, "", m.LockToken); err != nil {
		t.Errorf("complete under the real lock: %v", err)
	}
}

// In a session, a request for deferred messages takes the session's only: one of another
// session's in it fails the request as a missing one would, and the session's stay deferred.
func TestReceiveDeferredInSessionAllOrNothing(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("a0"), SessionID: "a", MessageID: "a0"},
		broker.Message{Body: []byte("a1"), SessionID: "a", MessageID: "a1"},
		broker.Message{Body: []byte("b0"), SessionID: "b", MessageID: "b0"})
	var seqs []int64
	sessions := map[string]*broker.Session{}
	for _, id := range []string{"a", "b"} {
		s := b.accept(t, q, id)
		sessions[id] = s
		for _, m := range b.receiveIn(t, q, s, 10) {
			if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Defer, m.MessageID, m.LockToken); err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, m.SequenceNumber)
		}
	}
	if len(seqs) != 3 {
		t.Fatalf("deferred %d messages; want 3", len(seqs))
	}
	inA := inSession(q, lockOf(sessions["a"]))
	_, err := b.store.ReceiveDeferred(b.ctx, inA, []int64{seqs[0], seqs[1], seqs[2]}, broker.ReceiveAndDelete)
	if !errors.Is(err, broker.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("sequence number %d ", seqs[2])) {
		t.Fatalf("receive-and-delete in session a of a0, a1, b0: err = %v; want ErrNotFound naming b0 (%d)", err, seqs[2])
	}
	msgs, err := b.store.ReceiveDeferred(b.ctx, inA, []int64{seqs[1], seqs[0]}, broker.ReceiveAndDelete)
	if err != nil || len(msgs) != 2 || msgs[0].MessageID != "a1" || msgs[1].MessageID != "a0" {
		t.Fatalf("receive-and-delete in session a of a1, a0 = %q, %v", bodies(msgs), err)
	}
	if c := b.counts(t, "q"); c.Active != 1 {
		t.Errorf("counts = %+v; want b0 left", c)
	}
}

// A last-updated-time lists the sessions whose state was set (or cleared) after it, as the
// service answers get-message-sessions: not those that only got messages, or whose lock was
// taken, renewed or released since.
func TestSessionsUpdatedSinceCountStateUpdatesOnly(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", nil)
	since := b.clock.Now()
	b.clock.Advance(time.Second)
	for _, id := range []string{"msg-only", "state", "cleared"} {
		b.send(t, q, broker.Message{Body: []byte(id), SessionID: id, HasSessionID: true})
	}
	for _, id := range []string{"state", "cleared", "locked-only"} {
		s := b.accept(t, q, id)
		var state []byte
		if id == "state" {
			state = []byte("x")
		}
		if id != "locked-only" {
			if err := b.store.SetSessionState(b.ctx, q, lockOf(s), state); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.store.RenewSessionLock(b.ctx, q, lockOf(s)); err != nil {
			t.Fatal(err)
		}
		if err := b.store.ReleaseSession(b.ctx, q, lockOf(s)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.store.ListSessionsUpdatedSince(b.ctx, q, since, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cleared", "state"}; !slices.Equal(got, want) {
		t.Errorf("sessions updated since: %q; want %q", got, want)
	}
	// A later time lists none; a send after it does not list its session.
	later := b.clock.Now()
	b.clock.Advance(time.Second)
	b.send(t, q, broker.Message{Body: []byte("again"), SessionID: "state", HasSessionID: true})
	if got, err := b.store.ListSessionsUpdatedSince(b.ctx, q, later, 0, 10); err != nil || len(got) != 0 {
		t.Errorf("sessions updated since after a send: %q, %v; want none", got, err)
	}
}

// A message received in a session is locked as long as the session is: a receiver that keeps
// renewing the session lock settles it after the entity's LockDuration, as on the service,
// where the session lock is its messages' lock. Nothing lapses meanwhile, so nothing counts as
// a failed delivery, and the message is not handed out again.
func TestSessionMessagesAreLockedWithTheirSession(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("a"), MessageID: "a", SessionID: "s", HasSessionID: true},
		broker.Message{Body: []byte("b"), MessageID: "b", SessionID: "s", HasSessionID: true})
	s := b.accept(t, q, "s")
	got := b.receiveIn(t, q, s, 1)
	if len(got) != 1 || !got[0].LockedUntil.Equal(s.LockedUntil) {
		t.Fatalf("received %v; want a locked until the session lock's end %v", got, s.LockedUntil)
	}
	d, err := b.store.ReceiveDeferred(b.ctx, inSession(q, lockOf(s)), nil, broker.PeekLock)
	if err != nil || len(d) != 0 {
		t.Fatalf("receive deferred of none: %v, %v", d, err)
	}
	for range 3 { // well past LockDuration, renewing the session each time before it ends
		b.clock.Advance(q.Props.LockDuration - time.Second)
		if _, err := b.store.RenewSessionLock(b.ctx, q, lockOf(s)); err != nil {
			t.Fatal(err)
		}
		b.maintain(t)
	}
	more := b.receiveIn(t, q, s, 10)
	if len(more) != 1 || more[0].MessageID != "b" {
		t.Fatalf("the session's receiver got %v; want b alone (a is still its own)", more)
	}
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Complete, "a", got[0].LockToken); err != nil {
		t.Errorf("complete a after %v of renewed session: %v", 3*(q.Props.LockDuration-time.Second), err)
	}
	// And with the session lock run out, its messages' locks are gone with it.
	b.clock.Advance(q.Props.LockDuration + time.Second)
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Complete, "b", more[0].LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("complete after the session lock ended: %v; want ErrLockLost", err)
	}
}
