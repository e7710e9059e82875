package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/internal/eventually"
)

// enteringStore counts the waits that have reached the store.
type enteringStore struct {
	broker.Store
	waits atomic.Int64
}

func (s *enteringStore) Receive(ctx context.Context, r broker.ReceiveRequest) ([]*broker.Message, error) {
	s.waits.Add(1)
	return s.Store.Receive(ctx, r)
}

func (s *enteringStore) AcceptNextSession(ctx context.Context, e *broker.Entity, wait time.Duration) (*broker.Session, error) {
	s.waits.Add(1)
	return s.Store.AcceptNextSession(ctx, e, wait)
}

// TestDrainAnswersWaitingReceivers: when the server starts shutting down, every receive and
// session accept still waiting is answered at once with 204, not held to its 60 s timeout nor
// answered 500, and a receive arriving while draining does not wait. Nothing is lost: the
// message sent afterwards is still there.
func TestDrainAnswersWaitingReceivers(t *testing.T) {
	drain, startDraining := context.WithCancel(context.Background())
	defer startDraining()
	var counted *enteringStore
	b := setup(t, setupOptions{realClock: true,
		wrap:   func(st broker.Store) broker.Store { counted = &enteringStore{Store: st}; return counted },
		config: func(c *rest.Config) { c.Drain = drain }})
	b.createQueue(t, "q", "")
	b.createQueue(t, "sq", "<RequiresSession>true</RequiresSession>")
	paths := []struct{ method, path string }{
		{http.MethodPost, "/q/messages/head?timeout=60"},
		{http.MethodDelete, "/q/messages/head?timeout=60"},
		{http.MethodPost, "/q/messages/$batch?timeout=60&count=5"},
		{http.MethodPost, "/sq/sessions/$accept?timeout=60"},
	}
	const each = 10
	var wg sync.WaitGroup
	statuses := make(chan string, each*len(paths))
	for _, p := range paths {
		for range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := b.do(t, call{method: p.method, path: p.path})
				statuses <- fmt.Sprintf("%s %s: %d", p.method, p.path, r.status)
			}()
		}
	}
	eventually.True(t, "the receivers to wait", func() bool {
		return counted.waits.Load() >= int64(each*len(paths))
	})
	startDraining()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // half their timeout: they were not answered at once
		t.Fatal("waiting receivers were not answered when the server began draining")
	}
	close(statuses)
	for s := range statuses {
		if s[len(s)-3:] != "204" {
			t.Errorf("%s; want 204", s)
		}
	}
	b.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=60"}).want(t, "receive while draining", http.StatusNoContent)
	b.send(t, "q", "kept", nil)
	if c := b.counts(t, "q"); c.Active != 1 {
		t.Errorf("counts after draining = %+v; want the one message", c)
	}
}
