package amqp

import (
	"slices"
	"sync"
	"testing"
)

// TestWorkerBatchesInOrder: a link's worker runs every item once, in the order added, and what
// is added while a batch runs is the next batch, run by the same goroutine.
func TestWorkerBatchesInOrder(t *testing.T) {
	t.Parallel()
	var w worker[int]
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	done := make(chan struct{})
	run := func(b []int) {
		mu.Lock()
		batches = append(batches, slices.Clone(b))
		n := len(batches)
		mu.Unlock()
		switch {
		case n == 1:
			close(entered)
			<-release
		case b[len(b)-1] == 9:
			close(done)
		}
	}
	w.add(0, run)
	<-entered // the first batch runs; the others queue behind it
	for i := 1; i < 10; i++ {
		w.add(i, run)
	}
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 2 || !slices.Equal(batches[0], []int{0}) || !slices.Equal(batches[1], []int{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("batches %v; want [0] then 1 to 9 together", batches)
	}
}
