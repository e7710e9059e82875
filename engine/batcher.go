// Package engine is the part of the broker that is neither domain nor SQL: the group-commit
// batchers that let concurrent requests share one statement and one commit, and the dispatchers
// that serve the receivers waiting on one target with one claim at a time, woken by changes and
// by timers. It runs whatever statements it is given (a Batcher's write, a Dispatcher's claim and
// next-due look), so its races are tested without a database (engine_test.go): store gives it
// the PostgreSQL statements.
package engine

import (
	"context"
	"sync"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// Batcher coalesces concurrent requests into shared statements: group commit. Each writer takes
// the first waiting request and every other request already waiting (up to a size), hands them
// to write, which answers each. It never waits for more requests to arrive: a lone request is
// written at once, and requests collect only while the writers are busy, which is exactly when
// sharing a statement and its commit pays. (A fixed wait window loses at low concurrency.)
type Batcher[T any] struct {
	writers int
	maxSize int
	size    func(T) int
	write   func(jobs []*Job[T])

	reqs    chan *Job[T]
	mu      sync.Mutex
	started bool
	quit    chan struct{}
	stopped chan struct{} // closed once stop has drained the queue: nothing queued is written after
	wg      sync.WaitGroup
}

// Job is one request waiting for its batch.
type Job[T any] struct {
	Req  T
	done chan error
}

// NewJob is a job for req not yet queued: what Submit makes, for tests that call a write
// function directly.
func NewJob[T any](req T) *Job[T] { return &Job[T]{Req: req, done: make(chan error, 1)} }

// Finish answers the job's Submit with err. A write function finishes every job it is given.
func (j *Job[T]) Finish(err error) { j.done <- err }

// NewBatcher returns a batcher of writers writers, each writing up to maxSize (as size counts
// requests) at a time with write.
func NewBatcher[T any](writers, maxSize int, size func(T) int, write func([]*Job[T])) *Batcher[T] {
	return &Batcher[T]{writers: writers, maxSize: maxSize, size: size, write: write,
		reqs: make(chan *Job[T], 4096), quit: make(chan struct{}), stopped: make(chan struct{})}
}

// Start runs the writers. It is idempotent.
func (b *Batcher[T]) Start() {
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

// Running reports whether the writers run: between start and stop.
func (b *Batcher[T]) Running() bool {
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

// Stop ends the writers after their current batch; anything still queued is answered with
// ErrShuttingDown rather than left waiting. It is idempotent.
func (b *Batcher[T]) Stop() {
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
			j.Finish(ErrShuttingDown)
		default:
			return
		}
	}
}

var ErrShuttingDown = &broker.Error{Code: broker.CodeUnavailable, Message: "The gateway is shutting down; retry on another."}

// Submit queues req and waits for its batch to be written.
func (b *Batcher[T]) Submit(ctx context.Context, req T) error {
	j, err := b.Queue(ctx, req)
	if err != nil {
		return err
	}
	return b.Wait(ctx, j)
}

// Queue puts req in line for a batch without waiting for it to be written (Wait does). Requests
// queued before Start are written together by the first writer that runs.
func (b *Batcher[T]) Queue(ctx context.Context, req T) (*Job[T], error) {
	j := NewJob(req)
	select {
	case b.reqs <- j:
		return j, nil
	case <-b.quit:
		return nil, ErrShuttingDown
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Wait waits for the batch of a queued job to be written and returns what its write answered.
func (b *Batcher[T]) Wait(ctx context.Context, j *Job[T]) error {
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
			return ErrShuttingDown
		}
	}
}

func (b *Batcher[T]) run() {
	for {
		var first *Job[T]
		select {
		case first = <-b.reqs:
		case <-b.quit:
			return
		}
		jobs, n := []*Job[T]{first}, b.size(first.Req)
	collect:
		for n < b.maxSize {
			select {
			case j := <-b.reqs:
				jobs = append(jobs, j)
				n += b.size(j.Req)
			default:
				break collect
			}
		}
		b.write(jobs)
	}
}

// WriteTimeout bounds one shared statement; it does not depend on any one client's context
// because it serves many.
const WriteTimeout = 30 * time.Second
