package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/internal/eventually"
)

// leavingStore is the store the handlers use, holding the first receive-and-delete that took
// messages until its request is over: the client has left before it could be answered.
type leavingStore struct {
	broker.Store
	took chan struct{}
	once sync.Once
}

func (s *leavingStore) Receive(ctx context.Context, r broker.ReceiveRequest) ([]*broker.Message, error) {
	msgs, err := s.Store.Receive(ctx, r)
	if len(msgs) > 0 && r.Mode == broker.ReceiveAndDelete {
		first := false
		s.once.Do(func() { first = true; close(s.took) })
		if first {
			<-ctx.Done()
		}
	}
	return msgs, err
}

// A receive-and-delete whose client leaves between the taking and the answer puts the messages
// back as they were: nothing a sender was answered 201 for is lost to a client that never got
// it. One request asks for the head, the other for a batch.
func TestReceiveAndDeleteForAClientThatLeftRestores(t *testing.T) {
	for _, path := range []string{"/q/messages/head?timeout=5", "/q/messages/$batch?count=3&timeout=5"} {
		t.Run(path, func(t *testing.T) {
			st := &leavingStore{took: make(chan struct{})}
			b := setup(t, setupOptions{realClock: true, wrap: func(s broker.Store) broker.Store { st.Store = s; return st }})
			b.createQueue(t, "q", "")
			for _, body := range []string{"a", "b", "c"} {
				b.send(t, "q", body, nil)
			}
			ctx, cancel := context.WithCancel(t.Context())
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", b.token(b.url+path, "root"))
			done := make(chan error, 1)
			go func() {
				resp, err := b.http.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			<-st.took
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the request was answered; the test needs a client that left first")
			}
			eventually.NoError(t, "the messages to be restored", func() error {
				if c := b.counts(t, "q"); c.Active != 3 {
					return fmt.Errorf("q holds %+v; want all 3 back", c)
				}
				return nil
			})
			got := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"})
			if got.status != http.StatusOK || got.body != "a" {
				t.Errorf("receive after the restore: %d %q; want 200 a, first in its place", got.status, got.body)
			}
		})
	}
}
