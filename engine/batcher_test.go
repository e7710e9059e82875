package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A request submitted as the batcher stops, or after, is answered: written, or refused with
// ErrShuttingDown. One could be queued after stop had drained the queue (the send to the queue
// and the quit channel were both ready, and select picks at random) and then wait forever: a
// settlement an AMQP link made as its gateway stopped did, and the test's goroutine-leak check
// failed.
func TestBatcherAnswersSubmitsAfterStop(t *testing.T) {
	b := NewBatcher(1, 10, func(int) int { return 1 }, func(jobs []*Job[int]) {
		for _, j := range jobs {
			j.Finish(nil)
		}
	})
	b.Start()
	if err := b.Submit(context.Background(), 1); err != nil {
		t.Fatalf("submit while running: %v", err)
	}
	b.Stop()
	for i := range 200 {
		done := make(chan error, 1)
		go func() { done <- b.Submit(context.Background(), i) }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrShuttingDown) {
				t.Fatalf("submit %d after stop: %v; want ErrShuttingDown", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("submit %d after stop is still waiting", i)
		}
	}
}
