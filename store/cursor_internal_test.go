package store

import (
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
	"github.com/sbgate/sbgate/internal/eventually"
)

// TestDispatchersKeepTheirSubqueuesCursor: a dispatcher ends when no receiver waits; the next one
// of the same subqueue continues from its claim cursor instead of claiming from the head (where,
// under load, the locks in flight lie), and a cursor no dispatcher has used for a while is
// forgotten.
func TestDispatchersKeepTheirSubqueuesCursor(t *testing.T) {
	t.Parallel()
	s, q := startedQueue(t, Options{}, "0", "1", "2")
	ctx := t.Context()
	key := engine.Key{Entity: q.ID, SubQueue: broker.SubQueueMain}
	// receive takes one message and waits for its dispatcher to end, then returns the message
	// and the subqueue's kept cursor.
	receive := func() (*broker.Message, *claimCursor) {
		t.Helper()
		msgs, err := s.Receive(ctx, broker.ReceiveRequest{Target: broker.Target{Entity: q}, Mode: broker.PeekLock, Max: 1})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v, %v", msgs, err)
		}
		var kept any
		eventually.True(t, "the dispatcher to end", func() bool {
			var running bool
			kept, running = s.hub.Kept(key)
			return !running
		})
		if kept == nil {
			t.Fatal("no cursor kept for the queue after its dispatcher ended")
		}
		return msgs[0], kept.(*claimCursor)
	}
	first, cur := receive()
	if cur.readyFrom != first.SequenceNumber {
		t.Errorf("kept cursor at %d; want the first message's %d", cur.readyFrom, first.SequenceNumber)
	}
	second, again := receive()
	if again != cur {
		t.Error("the second dispatcher started a cursor of its own instead of taking over the kept one")
	}
	if second.SequenceNumber <= first.SequenceNumber || again.readyFrom != second.SequenceNumber {
		t.Errorf("second message %d, cursor at %d; want the next message and the cursor past it", second.SequenceNumber, again.readyFrom)
	}
	s.hub.ForgetCursors(time.Now().Add(-time.Hour)) // used just now: kept
	if kept, _ := s.hub.Kept(key); kept == nil {
		t.Error("a cursor used a moment ago was forgotten")
	}
	s.hub.ForgetCursors(time.Now().Add(time.Hour)) // as if unused for longer than CursorKeep
	if kept, _ := s.hub.Kept(key); kept != nil {
		t.Error("an unused cursor was not forgotten")
	}
}
