package store

import (
	"context"
	"sync"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// batcher coalesces concurrent requests into shared statements: group commit. Each writer takes
// the first waiting request and every other request already waiting (up to a size), hands them
// to write, which answers each. It never waits for more requests to arrive: a lone request is
// written at once, and requests collect only while the writers are busy, which is exactly when
// sharing a statement and its commit pays. (A fixed wait window loses at low concurrency.)
type batcher[T any] struct {
	writers int
	maxSize int
	size    func(T) int
	write   func(jobs []*job[T])

	reqs    chan *job[T]
	mu      sync.Mutex
	started bool
	quit    chan struct{}
	stopped chan struct{} // closed once stop has drained the queue: nothing queued is written after
	wg      sync.WaitGroup
}

// job is one request waiting for its batch.
type job[T any] struct {
	req  T
	done chan error
}

func (j *job[T]) finish(err error) { j.done <- err }

func newBatcher[T any](writers, maxSize int, size func(T) int, write func([]*job[T])) *batcher[T] {
	return &batcher[T]{writers: writers, maxSize: maxSize, size: size, write: write,
		reqs: make(chan *job[T], 4096), quit: make(chan struct{}), stopped: make(chan struct{})}
}

func (b *batcher[T]) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		return
	}
	b.started = true
	for range b.writers {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.run()
		}()
	}
}

// running reports whether the writers run: between start and stop.
func (b *batcher[T]) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		return false
	}
	select {
	case <-b.quit:
		return false
	default:
		return true
	}
}

// stop ends the writers after their current batch; anything still queued is answered with
// errShuttingDown rather than left waiting. It is idempotent.
func (b *batcher[T]) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		return
	}
	select {
	case <-b.quit:
		return
	default:
	}
	close(b.quit)
	b.wg.Wait()
	defer close(b.stopped)
	for {
		select {
		case j := <-b.reqs:
			j.finish(errShuttingDown)
		default:
			return
		}
	}
}

var errShuttingDown = &broker.Error{Code: broker.CodeUnavailable, Message: "The gateway is shutting down; retry on another."}

// submit queues req and waits for its batch to be written.
func (b *batcher[T]) submit(ctx context.Context, req T) error {
	j := &job[T]{req: req, done: make(chan error, 1)}
	select {
	case b.reqs <- j:
	case <-b.quit:
		return errShuttingDown
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		// The write may still commit; the client that gave up cannot be told either way.
		return ctx.Err()
	case <-b.stopped:
		// A job queued as stop began (select picks among ready cases at random, so the queue
		// can win over quit) after stop had drained the queue is never written: the writers
		// are gone. One written or drained before is answered already.
		select {
		case err := <-j.done:
			return err
		default:
			return errShuttingDown
		}
	}
}

func (b *batcher[T]) run() {
	for {
		var first *job[T]
		select {
		case first = <-b.reqs:
		case <-b.quit:
			return
		}
		jobs, n := []*job[T]{first}, b.size(first.req)
	collect:
		for n < b.maxSize {
			select {
			case j := <-b.reqs:
				jobs = append(jobs, j)
				n += b.size(j.req)
			default:
				break collect
			}
		}
		b.write(jobs)
	}
}

// writeTimeout bounds one shared statement; it does not depend on any one client's context
// because it serves many.
const writeTimeout = 30 * time.Second
