package engine

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// The engine's races are tested here without a database: the claims are a fake target (items
// numbered 1, 2, …, each to be handed out once) and the time is a clock the tests move.

// clock is a store clock the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// target is a fake subqueue: items become available when added, or at dueAt on the clock.
type target struct {
	mu     sync.Mutex
	clock  *clock
	next   int   // the last item added
	ready  []int // available, in order
	due    []int // available from dueAt
	dueAt  time.Time
	claims atomic.Int64
	// hold, when set, is waited on by every claim before it takes items, and after, when set,
	// once it has taken them (took is closed then): a claim under way.
	hold, after, took chan struct{}
	// claiming, when set, is closed by the first claim to start; looked by the first look for
	// what comes due next (made after a claim found the target empty).
	claiming, looked chan struct{}
}

// signal closes ch once (nil: nothing).
func signal(ch chan struct{}) {
	if ch == nil {
		return
	}
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (tg *target) add(n int) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for range n {
		tg.next++
		tg.ready = append(tg.ready, tg.next)
	}
}

func (tg *target) claimer(recheck time.Duration) func() Claimer[int] {
	return func() Claimer[int] {
		return Claimer[int]{Recheck: recheck, Claim: tg.claim, Next: tg.nextDue}
	}
}

func (tg *target) claim(ctx context.Context, _ broker.ReceiveMode, n int) ([]int, bool, error) {
	tg.claims.Add(1)
	tg.mu.Lock()
	hold := tg.hold
	signal(tg.claiming)
	tg.mu.Unlock()
	if hold != nil {
		<-hold
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if len(tg.due) > 0 && !tg.clock.now().Before(tg.dueAt) {
		tg.ready, tg.due = append(tg.ready, tg.due...), nil
	}
	k := min(n, len(tg.ready))
	got := append([]int(nil), tg.ready[:k]...)
	tg.ready = tg.ready[k:]
	after := tg.after
	signal(tg.took)
	tg.mu.Unlock()
	if after != nil {
		<-after
	}
	tg.mu.Lock() // for the deferred unlock
	return got, k == n, nil
}

func (tg *target) nextDue(context.Context, time.Time) (time.Time, error) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	signal(tg.looked)
	if len(tg.due) == 0 {
		return time.Time{}, nil
	}
	return tg.dueAt, nil
}

func newHub(t *testing.T) (*Hub, *clock) {
	c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	ctx, cancel := context.WithCancel(context.Background())
	h := NewHub(ctx, c.now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { h.Halt(); cancel() })
	return h, c
}

// Competing receivers on one gateway get every item exactly once, whether they take one or
// several, and whether their waits end before, during or after the claims that serve them.
func TestDispatcherHandsEveryItemOnce(t *testing.T) {
	h, c := newHub(t)
	tg := &target{clock: c}
	key := Key{Entity: 1}
	const receivers, items = 16, 2000
	var mu sync.Mutex
	seen := make(map[int]int)
	var wg sync.WaitGroup
	var taken atomic.Int64
	for r := range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for taken.Load() < items {
				wait := time.Duration(r%4) * time.Millisecond // some give up at once or soon
				got, err := WaitFor(context.Background(), h, key, tg.claimer(time.Hour), broker.PeekLock, 1+r%3, wait)
				if err != nil {
					t.Errorf("receiver %d: %v", r, err)
					return
				}
				mu.Lock()
				for _, it := range got {
					seen[it]++
				}
				mu.Unlock()
				taken.Add(int64(len(got)))
			}
		}()
	}
	for range items / 100 {
		tg.add(100)
		h.Wake(1, "")
	}
	wg.Wait()
	if len(seen) != items {
		t.Errorf("%d distinct items handed out; want %d", len(seen), items)
	}
	for it, n := range seen {
		if n != 1 {
			t.Errorf("item %d handed out %d times", it, n)
		}
	}
}

// A receiver whose wait ends while a claim for it runs gets that claim's items: what was
// claimed (locked, or removed by a receive-and-delete) is never dropped.
func TestReceiverLeavingDuringClaimGetsItsItems(t *testing.T) {
	h, c := newHub(t)
	tg := &target{clock: c, hold: make(chan struct{}), claiming: make(chan struct{})}
	tg.add(1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []int)
	go func() {
		got, _ := WaitFor(ctx, h, Key{Entity: 1}, tg.claimer(time.Hour), broker.ReceiveAndDelete, 1, time.Hour)
		done <- got
	}()
	<-tg.claiming
	cancel() // the receiver gives up while its claim runs
	close(tg.hold)
	if got := <-done; len(got) != 1 || got[0] != 1 {
		t.Fatalf("the receiver that left during its claim got %v; want [1]", got)
	}
}

// A wake-up that comes while a claim runs, after that claim looked, makes the dispatcher claim
// again: the receivers do not wait for the recheck (an hour here) to see what was sent.
func TestWakeDuringClaimIsNotLost(t *testing.T) {
	h, c := newHub(t)
	tg := &target{clock: c, hold: make(chan struct{}), claiming: make(chan struct{})}
	done := make(chan []int)
	go func() {
		got, _ := WaitFor(context.Background(), h, Key{Entity: 1}, tg.claimer(time.Hour), broker.PeekLock, 1, time.Hour)
		done <- got
	}()
	<-tg.claiming
	// The item comes, with its wake-up, while the claim is held before it looks: the claim
	// then finds it. Then a second item comes the same way during a claim that finds nothing.
	tg.add(1)
	h.Wake(1, "")
	close(tg.hold)
	if got := <-done; len(got) != 1 {
		t.Fatalf("got %v; want the item sent during the claim", got)
	}
	// Then a claim finds nothing, and the next item and its wake-up come after it looked but
	// before it returns: the dispatcher must not take the claim's "empty" as the last word.
	tg.mu.Lock()
	tg.after, tg.took = make(chan struct{}), make(chan struct{})
	tg.mu.Unlock()
	go func() {
		got, _ := WaitFor(context.Background(), h, Key{Entity: 1}, tg.claimer(time.Hour), broker.PeekLock, 1, time.Hour)
		done <- got
	}()
	<-tg.took
	tg.add(1)
	h.Wake(1, "")
	tg.mu.Lock()
	after := tg.after
	tg.after = nil
	tg.mu.Unlock()
	close(after)
	var got []int
	select {
	case got = <-done:
	case <-time.After(30 * time.Second): // the recheck is an hour away
		t.Fatal("a wake-up that came with a claim under way was lost")
	}
	if len(got) != 1 {
		t.Fatalf("got %v; want the item sent during the claim", got)
	}
}

// An idle dispatcher claims again when the next item comes due by itself (a scheduled message,
// a lock ending), by the store clock: a receiver that joins after the clock passed the due time
// is not told "empty" from the claim that found nothing before it.
func TestDueItemIsClaimedWhenTheClockPassesIt(t *testing.T) {
	h, c := newHub(t)
	tg := &target{clock: c, looked: make(chan struct{})}
	tg.due, tg.dueAt = []int{7}, c.now().Add(time.Hour)
	key := Key{Entity: 1}
	done := make(chan []int)
	go func() {
		got, _ := WaitFor(context.Background(), h, key, tg.claimer(24*time.Hour), broker.PeekLock, 1, 24*time.Hour)
		done <- got
	}()
	<-tg.looked // the first claim found nothing; the item is due in an hour by the clock
	c.advance(2 * time.Hour)
	// A receiver that does not wait pokes the dispatcher: the due time has passed on the
	// clock, so it claims rather than answer from the empty claim before.
	if _, err := WaitFor(context.Background(), h, key, tg.claimer(24*time.Hour), broker.PeekLock, 1, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if len(got) != 1 || got[0] != 7 {
			t.Fatalf("the waiting receiver got %v; want the item that came due", got)
		}
	case <-time.After(30 * time.Second): // the dispatcher's own timer is an hour away
		t.Fatal("the item that came due was not claimed for the waiting receiver")
	}
}

// Halt answers the receivers waiting with nothing, lets the claim under way finish (its
// receiver gets its items) and refuses new receives.
func TestHaltAnswersWaitersAndKeepsClaimedItems(t *testing.T) {
	h, c := newHub(t)
	busy := &target{clock: c, hold: make(chan struct{}), claiming: make(chan struct{})}
	busy.add(1)
	idle := &target{clock: c, looked: make(chan struct{})}
	claimed := make(chan []int)
	go func() {
		got, _ := WaitFor(context.Background(), h, Key{Entity: 1}, busy.claimer(time.Hour), broker.PeekLock, 1, time.Hour)
		claimed <- got
	}()
	waiting := make(chan error)
	go func() {
		got, err := WaitFor(context.Background(), h, Key{Entity: 2}, idle.claimer(time.Hour), broker.PeekLock, 1, time.Hour)
		if len(got) != 0 {
			t.Errorf("the idle receiver got %v", got)
		}
		waiting <- err
	}()
	<-busy.claiming
	<-idle.looked // the idle receiver's dispatcher found nothing and waits
	halted := make(chan struct{})
	go func() { h.Halt(); close(halted) }()
	if err := <-waiting; err != nil {
		t.Errorf("the idle receiver: %v; want nothing, no error", err)
	}
	close(busy.hold)
	if got := <-claimed; len(got) != 1 {
		t.Errorf("the receiver whose claim ran at the halt got %v; want its item", got)
	}
	<-halted
	if got, err := WaitFor(context.Background(), h, Key{Entity: 3}, idle.claimer(time.Hour), broker.PeekLock, 1, time.Hour); got != nil || err != nil {
		t.Errorf("a receive after the halt: %v, %v; want nothing at once", got, err)
	}
}

// Concurrent submits share writes, each write holds at most maxSize, and every submit is
// answered once with its own write's result.
func TestBatcherGroupsAndAnswersEverySubmit(t *testing.T) {
	var writes, largest atomic.Int64
	b := NewBatcher(1, 8, func(int) int { return 1 }, func(jobs []*Job[int]) {
		writes.Add(1)
		if n := int64(len(jobs)); n > largest.Load() {
			largest.Store(n)
		}
		for _, j := range jobs {
			if j.Req%2 == 1 {
				j.Finish(broker.BadRequest("odd %d", j.Req))
			} else {
				j.Finish(nil)
			}
		}
	})
	b.Start()
	defer b.Stop()
	const n = 400
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.Submit(context.Background(), i)
			if (err != nil) != (i%2 == 1) {
				t.Errorf("submit %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if largest.Load() > 8 {
		t.Errorf("a write of %d jobs; want at most 8", largest.Load())
	}
	if writes.Load() > n {
		t.Errorf("%d writes for %d submits", writes.Load(), n)
	}
}
