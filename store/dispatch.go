package store

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sbgate/sbgate/broker"
)

// Receivers of this gateway that wait on the same target are served by one dispatcher: one claim
// statement at a time, sized to the receivers waiting, whose messages are handed out in arrival
// order. Receivers therefore never race each other for the same head rows (which made every
// claim step over the rows the others were locking), and the cost of a message falls as more
// receivers wait.
//
// A dispatcher that found its target empty claims again only when something may have changed:
// a wake-up (a send, an abandon, a release through this gateway, or another gateway's NOTIFY), or
// its timer, set to when the next scheduled message or lock end comes due. Receivers that wait
// cost nothing in between, however many they are: there is no per-receiver polling.

// waitKey names what receivers wait for: the messages of an entity's subqueue, of one session
// held under one lock, or (accept) the next session of a session entity.
type waitKey struct {
	entity  int64
	sq      broker.SubQueue
	session string
	token   uuid.UUID
	accept  bool
}

// maxClaim bounds the messages one claim statement takes for the receivers waiting.
const maxClaim = broker.MaxReceiveBatch

// waker is what wake-ups and shutdown reach: dispatchers of either kind.
type waker interface {
	wake()
	halt()
}

// waiting registers the running dispatchers of a store by entity, and the claim cursors of the
// subqueues received from lately.
type waiting struct {
	mu       sync.Mutex
	byEntity map[int64]map[waitKey]waker
	halted   bool
	// cursors outlive dispatchers: a dispatcher ends whenever no receiver waits, which under
	// load is many times a second (every receiver busy settling), and one starting with a new
	// cursor claims from the head, walking whatever is locked or dead there (10,000 locks in
	// flight: 6,000 pages a head claim, against 250 from the cursor). A new dispatcher takes
	// over its subqueue's cursor; one dispatcher runs per subqueue at a time, so they never share
	// it. A cursor unused for cursorKeep is forgotten.
	cursors map[waitKey]*keptCursor
}

// keptCursor is a claim cursor between dispatchers, and when one last took it.
type keptCursor struct {
	cur  *claimCursor
	used time.Time // wall clock
}

// cursorKeep is how long a subqueue's claim cursor is kept with no dispatcher using it.
const cursorKeep = time.Minute

// cursorFor returns the claim cursor of key, kept from its last dispatcher or new. The caller
// holds w.mu (dispatchers start under it).
func (w *waiting) cursorFor(key waitKey) *claimCursor {
	if w.cursors == nil {
		w.cursors = make(map[waitKey]*keptCursor)
	}
	k := w.cursors[key]
	if k == nil {
		k = &keptCursor{cur: &claimCursor{}}
		w.cursors[key] = k
	}
	k.used = time.Now()
	return k.cur
}

// forgetCursors drops the cursors that no running dispatcher uses and none took since before
// cutoff.
func (w *waiting) forgetCursors(cutoff time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, k := range w.cursors {
		if _, running := w.byEntity[key.entity][key]; !running && k.used.Before(cutoff) {
			delete(w.cursors, key)
		}
	}
}

// waiter is one receive waiting for up to max items (messages, or a session).
type waiter[T any] struct {
	mode   broker.ReceiveMode
	max    int
	zero   bool // it does not wait: answer as soon as the target is known to be empty
	elem   *list.Element
	pinned bool // a claim for it is running
	gone   bool // its wait ended while it was pinned: answer it when that claim ends
	done   chan struct{}
	got    []T
	err    error
}

// claimFunc claims up to n items for receivers in mode; full reports that n were found, so more
// may be there. nextFunc says when the target next has an item that nothing announces (zero:
// never), after since: the time on the store clock just before the claim that found the target
// empty. Not after the time nextFunc itself looks: an item that came due between the claim and
// that look (a lock running out) would be neither claimed nor waited for, and its receivers would
// wait for the recheck backstop.
type (
	claimFunc[T any] func(ctx context.Context, mode broker.ReceiveMode, n int) (got []T, full bool, err error)
	nextFunc         func(ctx context.Context, since time.Time) (time.Time, error)
)

// dispatcher serves the receivers waiting on one key.
type dispatcher[T any] struct {
	s     *Postgres
	key   waitKey
	claim claimFunc[T]
	next  nextFunc
	// recheck is the longest an idle dispatcher goes without looking at its target again: the
	// entity's lock duration (a lock taken by another gateway just as this one found the target
	// empty ends within it), capped by the store's backstop.
	recheck time.Duration

	mu      sync.Mutex
	queue   list.List // *waiter[T], in arrival order
	wakes   uint64    // wake-ups so far
	empty   bool      // the last claim found the target empty…
	emptyAt uint64    // …and started when wakes was this…
	dueAt   time.Time // …and something comes due by itself then (zero: nothing)
	halted  bool
	kick    chan struct{}
}

// wake tells the dispatcher that its target may have changed.
func (d *dispatcher[T]) wake() {
	d.mu.Lock()
	d.wakes++
	d.mu.Unlock()
	d.poke()
}

func (d *dispatcher[T]) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// halt answers every queued receiver with nothing (receivers whose claim runs get its result) and
// ends the dispatcher.
func (d *dispatcher[T]) halt() {
	d.mu.Lock()
	d.halted = true
	d.answerQueued(func(*waiter[T]) bool { return true })
	d.mu.Unlock()
	d.poke()
}

// answerQueued answers, with nothing, the queued receivers that pick selects.
func (d *dispatcher[T]) answerQueued(pick func(*waiter[T]) bool) {
	for e := d.queue.Front(); e != nil; {
		next := e.Next()
		if w := e.Value.(*waiter[T]); !w.pinned && pick(w) {
			d.queue.Remove(e)
			close(w.done)
		}
		e = next
	}
}

// waitFor queues a receive on key and waits up to wait for it to be served. A receive whose
// wait ends while a claim for it runs gets that claim's result: claimed messages are never
// dropped. It returns nothing when the store is stopping.
func waitFor[T any](ctx context.Context, s *Postgres, key waitKey, start func() *dispatcher[T], mode broker.ReceiveMode, max int, wait time.Duration) ([]T, error) {
	w := &waiter[T]{mode: mode, max: max, zero: wait <= 0, done: make(chan struct{})}
	d := enqueue(s, key, start, w)
	if d == nil {
		return nil, nil
	}
	var expired <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-w.done:
		return w.got, w.err
	case <-expired:
	case <-ctx.Done():
	}
	d.mu.Lock()
	if w.pinned {
		w.gone = true
		d.mu.Unlock()
		<-w.done
		return w.got, w.err
	}
	select {
	case <-w.done:
		d.mu.Unlock()
		return w.got, w.err
	default:
	}
	d.queue.Remove(w.elem)
	last := d.queue.Len() == 0
	d.mu.Unlock()
	if last {
		d.poke() // so that it ends
	}
	return nil, ctx.Err()
}

// enqueue adds w to the dispatcher of key, starting one when none runs. It returns nil when the
// store is stopping.
func enqueue[T any](s *Postgres, key waitKey, start func() *dispatcher[T], w *waiter[T]) *dispatcher[T] {
	s.waiting.mu.Lock()
	defer s.waiting.mu.Unlock()
	if s.waiting.halted {
		return nil
	}
	byKey := s.waiting.byEntity[key.entity]
	if byKey == nil {
		byKey = make(map[waitKey]waker)
		s.waiting.byEntity[key.entity] = byKey
	}
	d, _ := byKey[key].(*dispatcher[T])
	if d == nil {
		d = start()
		d.kick = make(chan struct{}, 1)
		byKey[key] = d
		s.dispatchers.Add(1)
		go func() {
			defer s.dispatchers.Done()
			d.run()
		}()
	}
	d.mu.Lock()
	w.elem = d.queue.PushBack(w)
	d.mu.Unlock()
	d.poke()
	return d
}

// leave removes the dispatcher from the registry if it has no receivers left; the registry lock
// is taken first so that no receiver joins a dispatcher that is ending.
func (d *dispatcher[T]) leave() bool {
	d.s.waiting.mu.Lock()
	defer d.s.waiting.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.queue.Len() > 0 {
		return false
	}
	byKey := d.s.waiting.byEntity[d.key.entity]
	delete(byKey, d.key)
	if len(byKey) == 0 {
		delete(d.s.waiting.byEntity, d.key.entity)
	}
	return true
}

// run claims for the queued receivers until none is left.
func (d *dispatcher[T]) run() {
	ctx := d.s.lifetime
	timer := time.NewTimer(d.recheck)
	defer timer.Stop()
	for {
		if d.leave() {
			return
		}
		d.mu.Lock()
		if d.halted {
			d.answerQueued(func(*waiter[T]) bool { return true })
			d.mu.Unlock()
			continue // leave() ends it once the claim running is answered
		}
		if d.empty && d.emptyAt == d.wakes && (d.dueAt.IsZero() || d.s.now().Before(d.dueAt)) {
			// Nothing changed since the target was found empty, and nothing has come due since
			// (a receiver joining before the timer fires, or after a test moved the clock, must
			// not be told "empty" about a scheduled message or lock end that is due): receivers
			// that do not wait get nothing at once, the others wait for a wake-up or the timer.
			d.answerQueued(func(w *waiter[T]) bool { return w.zero })
			if d.queue.Len() == 0 {
				d.mu.Unlock()
				continue // nobody left: end
			}
			d.mu.Unlock()
			select {
			case <-d.kick:
			case <-timer.C:
				d.mu.Lock()
				d.wakes++
				d.mu.Unlock()
				timer.Reset(d.recheck)
			}
			continue
		}
		batch, mode, n := d.pin()
		started := d.wakes
		d.mu.Unlock()

		claimCtx, cancel := context.WithTimeout(ctx, writeTimeout)
		looked := d.s.now()
		got, full, err := d.claim(claimCtx, mode, n)
		var next time.Time
		if err == nil && !full {
			// Found empty: the timer goes off when the target next has something by itself.
			next, err = d.next(claimCtx, looked)
		}
		cancel()

		if err != nil && ctx.Err() != nil {
			got, err = nil, nil // the store is stopping: its receivers get nothing, not an error
		}
		d.mu.Lock()
		d.hand(batch, got, err)
		d.empty, d.emptyAt, d.dueAt = err == nil && !full, started, next
		d.mu.Unlock()
		if err == nil && !full {
			wait := d.recheck
			if !next.IsZero() {
				// The store clock may be a test's: wait by how far ahead it says the time is.
				wait = min(wait, max(next.Sub(d.s.now()), time.Millisecond))
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(wait)
		}
	}
}

// pin picks the receivers the next claim serves: the oldest receiver's mode, and every queued
// receiver in that mode, up to maxClaim items. Called with d.mu held.
func (d *dispatcher[T]) pin() (batch []*waiter[T], mode broker.ReceiveMode, n int) {
	mode = d.queue.Front().Value.(*waiter[T]).mode
	for e := d.queue.Front(); e != nil && n < maxClaim; e = e.Next() {
		w := e.Value.(*waiter[T])
		if w.mode != mode {
			continue
		}
		w.pinned = true
		batch = append(batch, w)
		n += w.max
	}
	return batch, mode, min(n, maxClaim)
}

// hand gives the claimed items to the pinned receivers in arrival order, each up to what it
// asked for, or the error to all of them. Receivers left without items are queued again, but
// those whose wait ended meanwhile are answered with nothing. Called with d.mu held.
func (d *dispatcher[T]) hand(batch []*waiter[T], got []T, err error) {
	for _, w := range batch {
		w.pinned = false
		switch {
		case err != nil:
			w.err = err
		case len(got) > 0:
			k := min(w.max, len(got))
			w.got, got = got[:k:k], got[k:]
		case w.gone:
		default:
			continue
		}
		d.queue.Remove(w.elem)
		close(w.done)
	}
	if len(got) > 0 {
		// More came than the receivers asked for: can only happen if n was miscounted; the
		// claim is sized from the receivers, so this is a bug, but messages must not be lost.
		d.s.log.Error("a claim returned more messages than its receivers asked for", "extra", len(got))
	}
}

// wakeTarget names what a change concerns: an entity, and a session of it ("" for every
// receiver of the entity).
type wakeTarget struct {
	entity  int64
	session string
}

// wake wakes the dispatchers of this gateway that t concerns.
func (s *Postgres) wake(t wakeTarget) {
	s.waiting.mu.Lock()
	defer s.waiting.mu.Unlock()
	for key, d := range s.waiting.byEntity[t.entity] {
		if t.session == "" || key.session == "" || key.session == t.session {
			d.wake()
		}
	}
}

// wakeAll wakes every dispatcher, after notifications from other gateways may have been missed.
func (s *Postgres) wakeAll() {
	s.waiting.mu.Lock()
	defer s.waiting.mu.Unlock()
	for _, byKey := range s.waiting.byEntity {
		for _, d := range byKey {
			d.wake()
		}
	}
}

// haltReceivers answers every waiting receive with nothing and refuses new ones. Claims running
// finish and their receivers get what they claimed: cancelling one could lose messages a
// receive-and-delete had already removed when the cancel arrived.
func (s *Postgres) haltReceivers() {
	s.waiting.mu.Lock()
	s.waiting.halted = true
	var all []waker
	for _, byKey := range s.waiting.byEntity {
		for _, d := range byKey {
			all = append(all, d)
		}
	}
	s.waiting.mu.Unlock()
	for _, d := range all {
		d.halt()
	}
	s.dispatchers.Wait()
}
