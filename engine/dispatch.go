package engine

import (
	"container/list"
	"context"
	"log/slog"
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

// Key names what receivers wait for: the messages of an entity's subqueue, of one session held
// under one lock, or (Accept) the next session of a session entity.
type Key struct {
	Entity   int64
	SubQueue broker.SubQueue
	Session  string
	Token    uuid.UUID
	Accept   bool
}

// MaxClaim bounds the items one claim takes for the receivers waiting.
const MaxClaim = broker.MaxReceiveBatch

// waker is what wake-ups and shutdown reach: dispatchers of either kind.
type waker interface {
	wake()
	halt()
}

// Hub registers the running dispatchers of a gateway by entity, and the claim cursors of the
// subqueues received from lately; wake-ups reach the dispatchers through it.
type Hub struct {
	now      func() time.Time // the store clock, which tests move
	lifetime context.Context  // ends when the store stops: claims running then are cut short
	log      *slog.Logger
	running  sync.WaitGroup // the running dispatchers

	mu       sync.Mutex
	byEntity map[int64]map[Key]waker
	halted   bool
	// cursors outlive dispatchers: a dispatcher ends whenever no receiver waits, which under
	// load is many times a second (every receiver busy settling), and one starting with a new
	// cursor claims from the head, walking whatever is locked or dead there (10,000 locks in
	// flight: 6,000 pages a head claim, against 250 from the cursor). A new dispatcher takes
	// over its subqueue's cursor; one dispatcher runs per subqueue at a time, so they never share
	// it. A cursor unused for cursorKeep is forgotten.
	cursors map[Key]*keptCursor
}

// NewHub returns a hub whose dispatchers read the time from now and claim under lifetime.
func NewHub(lifetime context.Context, now func() time.Time, log *slog.Logger) *Hub {
	return &Hub{now: now, lifetime: lifetime, log: log, byEntity: make(map[int64]map[Key]waker)}
}

// keptCursor is a claim cursor between dispatchers, and when one last took it.
type keptCursor struct {
	cur  any       // *C of the CursorFor that made it
	used time.Time // wall clock
}

// CursorKeep is how long a subqueue's claim cursor is kept with no dispatcher using it.
const CursorKeep = time.Minute

// CursorFor returns the claim cursor of key, kept from its last dispatcher or a new C. It is
// called from a start function of WaitFor, which runs under the hub's lock; the cursor is the
// claim's to read and move (the engine only keeps it).
func CursorFor[C any](h *Hub, key Key) *C {
	if h.cursors == nil {
		h.cursors = make(map[Key]*keptCursor)
	}
	k := h.cursors[key]
	if k == nil {
		k = &keptCursor{cur: new(C)}
		h.cursors[key] = k
	}
	k.used = time.Now()
	return k.cur.(*C)
}

// ForgetCursors drops the cursors that no running dispatcher uses and none took since before
// cutoff.
func (h *Hub) ForgetCursors(cutoff time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, k := range h.cursors {
		if _, running := h.byEntity[key.Entity][key]; !running && k.used.Before(cutoff) {
			delete(h.cursors, key)
		}
	}
}

// Kept returns the cursor kept for key (nil when none is), and whether a dispatcher runs for it.
func (h *Hub) Kept(key Key) (cur any, running bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, running = h.byEntity[key.Entity][key]
	if k := h.cursors[key]; k != nil {
		cur = k.cur
	}
	return cur, running
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

// ClaimFunc claims up to n items for receivers in mode; full reports that n were found, so more
// may be there. NextFunc says when the target next has an item that nothing announces (zero:
// never), after since: the time on the store clock just before the claim that found the target
// empty. Not after the time nextFunc itself looks: an item that came due between the claim and
// that look (a lock running out) would be neither claimed nor waited for, and its receivers would
// wait for the recheck backstop.
type (
	ClaimFunc[T any] func(ctx context.Context, mode broker.ReceiveMode, n int) (got []T, full bool, err error)
	NextFunc         func(ctx context.Context, since time.Time) (time.Time, error)
)

// Claimer is how a dispatcher serves its target: what a start function of WaitFor returns.
type Claimer[T any] struct {
	Claim ClaimFunc[T]
	Next  NextFunc
	// Recheck is the longest an idle dispatcher goes without looking at its target again: the
	// entity's lock duration (a lock taken by another gateway just as this one found the target
	// empty ends within it), capped by the store's backstop.
	Recheck time.Duration
}

// dispatcher serves the receivers waiting on one key.
type dispatcher[T any] struct {
	h   *Hub
	key Key
	Claimer[T]

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

// WaitFor queues a receive on key and waits up to wait for it to be served. A receive whose
// wait ends while a claim for it runs gets that claim's result: claimed items are never
// dropped. When no dispatcher serves key, start (called under the hub's lock) says how one
// does. It returns nothing when the hub is halted.
func WaitFor[T any](ctx context.Context, h *Hub, key Key, start func() Claimer[T], mode broker.ReceiveMode, max int, wait time.Duration) ([]T, error) {
	w := &waiter[T]{mode: mode, max: max, zero: wait <= 0, done: make(chan struct{})}
	d := enqueue(h, key, start, w)
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
// hub is halted.
func enqueue[T any](h *Hub, key Key, start func() Claimer[T], w *waiter[T]) *dispatcher[T] {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.halted {
		return nil
	}
	byKey := h.byEntity[key.Entity]
	if byKey == nil {
		byKey = make(map[Key]waker)
		h.byEntity[key.Entity] = byKey
	}
	d, _ := byKey[key].(*dispatcher[T])
	if d == nil {
		d = &dispatcher[T]{h: h, key: key, Claimer: start(), kick: make(chan struct{}, 1)}
		byKey[key] = d
		h.running.Add(1)
		go func() {
			defer h.running.Done()
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
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.queue.Len() > 0 {
		return false
	}
	byKey := d.h.byEntity[d.key.Entity]
	delete(byKey, d.key)
	if len(byKey) == 0 {
		delete(d.h.byEntity, d.key.Entity)
	}
	return true
}

// run claims for the queued receivers until none is left.
func (d *dispatcher[T]) run() {
	ctx := d.h.lifetime
	timer := time.NewTimer(d.Recheck)
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
		if d.empty && d.emptyAt == d.wakes && (d.dueAt.IsZero() || d.h.now().Before(d.dueAt)) {
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
				timer.Reset(d.Recheck)
			}
			continue
		}
		batch, mode, n := d.pin()
		started := d.wakes
		d.mu.Unlock()

		claimCtx, cancel := context.WithTimeout(ctx, WriteTimeout)
		looked := d.h.now()
		got, full, err := d.Claim(claimCtx, mode, n)
		var next time.Time
		if err == nil && !full {
			// Found empty: the timer goes off when the target next has something by itself.
			next, err = d.Next(claimCtx, looked)
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
			wait := d.Recheck
			if !next.IsZero() {
				// The store clock may be a test's: wait by how far ahead it says the time is.
				wait = min(wait, max(next.Sub(d.h.now()), time.Millisecond))
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
// receiver in that mode, up to MaxClaim items. Called with d.mu held.
func (d *dispatcher[T]) pin() (batch []*waiter[T], mode broker.ReceiveMode, n int) {
	mode = d.queue.Front().Value.(*waiter[T]).mode
	for e := d.queue.Front(); e != nil && n < MaxClaim; e = e.Next() {
		w := e.Value.(*waiter[T])
		if w.mode != mode {
			continue
		}
		w.pinned = true
		batch = append(batch, w)
		n += w.max
	}
	return batch, mode, min(n, MaxClaim)
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
		d.h.log.Error("a claim returned more messages than its receivers asked for", "extra", len(got))
	}
}

// Wake wakes the dispatchers whose target a change of entity may concern: all of them, or
// with session not "" those of that session and those not of one session (accepting).
func (h *Hub) Wake(entity int64, session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, d := range h.byEntity[entity] {
		if session == "" || key.Session == "" || key.Session == session {
			d.wake()
		}
	}
}

// WakeAll wakes every dispatcher, after notifications from other gateways may have been missed.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, byKey := range h.byEntity {
		for _, d := range byKey {
			d.wake()
		}
	}
}

// Halt answers every waiting receive with nothing, refuses new ones and waits for the
// dispatchers to end. Claims running finish and their receivers get what they claimed:
// cancelling one could lose messages a receive-and-delete had already removed when the cancel
// arrived.
func (h *Hub) Halt() {
	h.mu.Lock()
	h.halted = true
	var all []waker
	for _, byKey := range h.byEntity {
		for _, d := range byKey {
			all = append(all, d)
		}
	}
	h.mu.Unlock()
	for _, d := range all {
		d.halt()
	}
	h.running.Wait()
}
