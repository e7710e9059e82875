package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

// Receive takes up to r.Max messages of r's target, waiting up to r.Wait for the first. See
// Store.
func (s *Postgres) Receive(ctx context.Context, r broker.ReceiveRequest) ([]*broker.Message, error) {
	t := r.Target
	if err := checkReceivable(t); err != nil {
		return nil, err
	}
	if r.Max < 1 || r.Max > broker.MaxReceiveBatch {
		return nil, broker.BadRequest("A receive may take between 1 and %d messages.", broker.MaxReceiveBatch)
	}
	s.touch(t.Entity)
	key := engine.Key{Entity: t.Entity.ID, SubQueue: t.SubQueue}
	if t.Session != nil {
		key.Session, key.Token = t.Session.SessionID, t.Session.Token
	}
	start := func() engine.Claimer[*broker.Message] {
		d := engine.Claimer[*broker.Message]{Recheck: s.recheck(t.Entity)}
		// The main queue, where throughput matters, claims from a cursor; sessions and
		// dead-letter subqueues, whose rows come back below any cursor (a session released, a
		// message dead-lettered), claim from the head.
		var cur *claimCursor
		if t.Session == nil && t.SubQueue == broker.SubQueueMain {
			cur = engine.CursorFor[claimCursor](s.hub, key) // start runs under the hub's lock
		}
		// Each claim reads the entity afresh (from the cache), so a change of its lock
		// duration, delivery limit or status applies to receivers already waiting.
		d.Claim = func(ctx context.Context, mode broker.ReceiveMode, n int) ([]*broker.Message, bool, error) {
			now, err := s.currentTarget(ctx, t)
			if err != nil {
				return nil, false, err
			}
			return s.claimMessages(ctx, now, mode, n, cur)
		}
		d.Next = func(ctx context.Context, since time.Time) (time.Time, error) {
			now, err := s.currentTarget(ctx, t)
			if err != nil {
				return time.Time{}, err
			}
			return s.nextDue(ctx, now, since)
		}
		return d
	}
	msgs, err := engine.WaitFor(ctx, s.hub, key, start, r.Mode, r.Max, r.Wait)
	if len(msgs) > 0 && ctx.Err() != nil && r.Mode == broker.PeekLock {
		// Whoever asked is gone and never saw these: give them back at once, as not delivered,
		// rather than leave them locked until their locks run out.
		s.release(context.WithoutCancel(ctx), t, msgs)
		return nil, ctx.Err()
	}
	return msgs, err
}

// currentTarget is t with its entity read again from the cache, refusing receives the entity no
// longer allows. Errors: ErrNotFound when it was deleted (or replaced by another of its name).
func (s *Postgres) currentTarget(ctx context.Context, t broker.Target) (broker.Target, error) {
	e, err := s.Resolve(ctx, t.Entity.Path)
	if err == nil && e.ID != t.Entity.ID {
		err = broker.NotFound("The messaging entity '%s' could not be found.", t.Entity.Path)
	}
	if err != nil {
		return broker.Target{}, err
	}
	t.Entity = e
	return t, checkReceivable(t)
}

// recheck is how long a dispatcher of e that found nothing waits before it looks again by itself:
// no longer than a lock of e lasts, since a lock another gateway took just as this one looked
// ends within that time and nothing announces it.
func (s *Postgres) recheck(e *broker.Entity) time.Duration {
	return min(e.Props.LockDuration, s.opts.Recheck)
}

// release unlocks msgs without counting their delivery, for messages claimed for a receiver that
// left before they reached it.
func (s *Postgres) release(ctx context.Context, t broker.Target, msgs []*broker.Message) {
	seqs, tokens := make([]int64, len(msgs)), make([][16]byte, len(msgs))
	for i, m := range msgs {
		seqs[i], tokens[i] = m.SequenceNumber, m.LockToken
	}
	sql, values, err := releaseLocks.bind(pgx.NamedArgs{"entity": t.Entity.ID, "seq": seqs, "token": tokens, "now": s.now()})
	if err == nil {
		_, err = s.pool.Exec(ctx, sql, values...)
	}
	if err != nil {
		s.log.Warn("release messages of a receiver that left; they are redelivered when their locks end",
			"entity", t.Entity.Path, "err", err)
		return
	}
	s.announce(wakeTarget{entity: t.Entity.ID})
}

// checkReceivable refuses receives the target does not allow.
func checkReceivable(t broker.Target) error {
	e := t.Entity
	switch {
	case e.Kind == broker.KindTopic:
		return broker.BadRequest("Messages cannot be received from topic '%s'; receive them from one of its subscriptions.", e.Path)
	case e.Props.Status == broker.StatusDisabled || e.Props.Status == broker.StatusReceiveDisabled:
		return &broker.Error{Code: broker.CodeForbidden, Message: fmt.Sprintf(
			"SubCode=40301. The messaging entity '%s' is disabled for receiving (status %s).", e.Path, e.Props.Status)}
	case t.Session != nil && !e.Props.RequiresSession:
		return broker.BadRequest("The entity '%s' does not require sessions; receive from it without a session.", e.Path)
	case t.Session != nil && t.SubQueue != broker.SubQueueMain:
		return broker.BadRequest("Sessions live in the entity, not its dead-letter subqueue.")
	case t.Session == nil && e.Props.RequiresSession && t.SubQueue == broker.SubQueueMain:
		return broker.BadRequest("The entity '%s' requires sessions: accept a session and receive from it (POST %s/sessions/$accept); Service Bus REST cannot receive from session entities.", e.Path, e.Path)
	}
	return broker.CheckSessionLockID(e, t.Session)
}

// announce wakes the receivers waiting for what changed, here and on other gateways.
func (s *Postgres) announce(targets ...wakeTarget) {
	if len(targets) == 0 {
		return
	}
	for _, t := range targets {
		s.wake(t)
	}
	s.listener.announceMessages(targets)
}
