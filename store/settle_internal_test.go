package store

import (
	"errors"
	"testing"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

// A request whose settlement fails the statement it shares with others (a value PostgreSQL
// refuses; Settle keeps such ids out, writeSettles does not rely on it) fails alone: each
// request's settlements are then made in a statement of their own.
func TestSharedSettlementFailureFailsOneRequest(t *testing.T) {
	t.Parallel()
	s, q := startedQueue(t, Options{}, "a", "b")
	msgs, err := s.Receive(t.Context(), broker.ReceiveRequest{Target: broker.Target{Entity: q}, Mode: broker.PeekLock, Max: 2})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %d, %v", len(msgs), err)
	}
	jobOf := func(m *broker.Message, id string) *engine.Job[*settleJob] {
		sj := &settleJob{results: make([]broker.SettleResult, 1)}
		sj.items = []settleItem{{t: broker.Target{Entity: q}, req: broker.SettleRequest{Op: broker.Complete, Token: m.LockToken, ID: id}, res: &sj.results[0]}}
		return engine.NewJob(sj)
	}
	good, bad := jobOf(msgs[0], ""), jobOf(msgs[1], "a\x00b")
	s.writeSettles([]*engine.Job[*settleJob]{bad, good})
	if err := good.Req.results[0].Err; err != nil {
		t.Errorf("the other request's complete: %v; want made", err)
	}
	if err := bad.Req.results[0].Err; err == nil || errors.Is(err, broker.ErrLockLost) {
		t.Errorf("the refused request's complete: %v; want the statement's error", err)
	}
	if m, err := s.Receive(t.Context(), broker.ReceiveRequest{Target: broker.Target{Entity: q}, Mode: broker.PeekLock, Max: 2}); err != nil || len(m) != 0 {
		t.Errorf("after the settlements: %d messages receivable (%v); want none (one completed, one still locked)", len(m), err)
	}
}
