package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/sbgate/sbgate/broker"

	"github.com/jackc/pgx/v5"
)

// Browse returns up to n messages of e's subqueue with sequence numbers from `from` on, in order,
// including scheduled (but on a subscription, whose scheduled messages the service keeps in the
// topic until their time) and deferred ones, without locking them or counting a delivery. Lock tokens
// are not shown: they belong to whoever holds the lock.
func (s *Postgres) Browse(ctx context.Context, e *broker.Entity, sq broker.SubQueue, from int64, n int) ([]*broker.Message, error) {
	if e.Kind == broker.KindTopic {
		return nil, broker.BadRequest("Messages cannot be browsed on topic '%s'; browse one of its subscriptions.", e.Path)
	}
	if n < 1 || n > broker.MaxBrowse {
		return nil, broker.BadRequest("A browse may return between 1 and %d messages.", broker.MaxBrowse)
	}
	s.touch(e)
	now := s.now()
	rows, err := s.pool.Query(ctx, browseMessages.sql, e.ID, sq.State(), from, now, n, e.Kind == broker.KindSubscription)
	if err != nil {
		return nil, fmt.Errorf("browse %s: %w", e.Path, interpretError(err))
	}
	msgs, err := collectMessages(rows)
	if err != nil {
		return nil, fmt.Errorf("browse %s: %w", e.Path, interpretError(err))
	}
	for _, m := range msgs {
		if m.LockToken != uuid.Nil && !m.LockedUntil.After(now) && m.State != broker.StateDeadLetter {
			m.DeliveryCount++ // its lock lapsed: that delivery failed, as the next claim counts it
		}
		m.LockToken, m.LockedUntil = [16]byte{}, time.Time{}
	}
	return msgs, nil
}

// copyHolders are the entities that hold the copies of what is sent to e when e keeps none: a
// topic's subscriptions, and where each entity that forwards its messages forwards them to, hop
// after hop (MaxTransferHops at most).
func (s *Postgres) copyHolders(ctx context.Context, e *broker.Entity) ([]int64, error) {
	var holders []int64
	var visit func(e *broker.Entity, hops int) error
	visit = func(e *broker.Entity, hops int) error {
		if hops > broker.MaxTransferHops || slices.Contains(holders, e.ID) {
			return nil
		}
		switch {
		case e.Kind == broker.KindTopic:
			routes, err := s.routesOf(ctx, e)
			if err != nil {
				return err
			}
			for _, rt := range routes {
				if err := visit(rt.sub, hops); err != nil {
					return err
				}
			}
			return nil
		case e.Props.ForwardTo != "":
			holders = append(holders, e.ID) // a message that could not be forwarded stays
			next, err := s.Resolve(ctx, e.Props.ForwardTo)
			if errors.Is(err, broker.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			return visit(next, hops+1)
		}
		holders = append(holders, e.ID)
		return nil
	}
	if err := visit(e, 0); err != nil {
		return nil, err
	}
	return holders, nil
}

// CancelScheduled removes the scheduled messages with sequence numbers seqs before they become
// visible, all or none: when one of them is not waiting for its time (there is no such message,
// or its time has come), none is removed and the error is ErrNotFound naming those missing.
// Repeated numbers count once; more than MaxCancelBatch is a bad request.
//
// On a topic, and on an entity that forwards its messages, the numbers are those SendSequenced
// gave: each names every copy of one message, in the topic's subscriptions or where the messages
// were forwarded to, and cancelling it removes them all.
func (s *Postgres) CancelScheduled(ctx context.Context, e *broker.Entity, seqs []int64) error {
	if len(seqs) > broker.MaxCancelBatch {
		return broker.BadRequest("A request may cancel at most %d scheduled messages; this one names %d sequence numbers.", broker.MaxCancelBatch, len(seqs))
	}
	want := distinctSeqs(seqs)
	if len(want) == 0 {
		return nil
	}
	args := pgx.NamedArgs{"entity": e.ID, "now": s.now()}
	st := cancelScheduled
	if e.Kind == broker.KindTopic || e.Props.ForwardTo != "" {
		holders, err := s.copyHolders(ctx, e)
		if err != nil {
			return fmt.Errorf("cancel scheduled messages in %s: %w", e.Path, err)
		}
		args["holders"], args["seqs"] = holders, want
		st = cancelScheduledCopies
	} else {
		askSeqs(args, e, want)
	}
	sql, values, err := st.bind(args)
	if err != nil {
		return err
	}
	missing, err := s.allOrNone(ctx, want, func(tx pgx.Tx, found map[int64]bool) error {
		rows, err := tx.Query(ctx, sql, values...)
		if err != nil {
			return err
		}
		removed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, seq := range removed {
			found[seq] = true
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("cancel scheduled messages in %s: %w", e.Path, interpretError(err))
	}
	if len(missing) > 0 {
		names := make([]string, 0, min(len(missing), 11))
		for _, seq := range missing[:min(len(missing), 10)] {
			names = append(names, strconv.FormatInt(seq, 10))
		}
		switch {
		case len(want) == 1:
			return broker.NotFound("No scheduled message with sequence number %s is waiting in '%s'.", names[0], e.Path)
		case len(missing) == 1:
			return broker.NotFound("No scheduled message with sequence number %s is waiting in '%s'; none was cancelled.", names[0], e.Path)
		case len(missing) > 10:
			names = append(names, "…")
		}
		return broker.NotFound("No scheduled messages with sequence numbers %s are waiting in '%s'; none was cancelled.", strings.Join(names, ", "), e.Path)
	}
	s.touch(e)
	return nil
}

// purgeChunk bounds one purge transaction, so purging millions of messages neither holds one
// huge transaction nor blocks senders for long.
const purgeChunk = 10000

// Purge deletes the messages of e's subqueue (locked, scheduled and deferred ones too) that are
// there when it starts, and returns how many. Locks on purged messages are lost. A message sent
// while it runs may stay (one with a sequence number above the highest at the start does, and
// one whose send commits after the purge passed its sequence number), so that a purge ends even
// while senders keep sending.
func (s *Postgres) Purge(ctx context.Context, e *broker.Entity, sq broker.SubQueue) (int64, error) {
	var upto int64
	if err := s.pool.QueryRow(ctx, lastSeq.sql, e.ID).Scan(&upto); err != nil {
		return 0, fmt.Errorf("purge %s: %w", e.Path, interpretError(err))
	}
	var total, after int64
	for after < upto {
		n, last, err := s.purgeChunk(ctx, e, sq, after, upto, purgeChunk)
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", e.Path, interpretError(err))
		}
		total += n
		if last == nil {
			break
		}
		after = *last
	}
	s.touch(e)
	return total, nil
}

// purgeChunk deletes up to n messages of e's subqueue with sequence numbers in (after, upto], and
// returns how many it deleted and the last sequence number of the chunk (nil when none was left).
func (s *Postgres) purgeChunk(ctx context.Context, e *broker.Entity, sq broker.SubQueue, after, upto int64, n int) (int64, *int64, error) {
	var deleted int64
	var last *int64
	sql, values, err := purgeMessages.bind(pgx.NamedArgs{
		"entity": e.ID, "after": after, "upto": upto, "state": sq.State(), "n": n})
	if err != nil {
		return 0, nil, err
	}
	err = s.retryConflicts(ctx, nil, func() error {
		return s.pool.QueryRow(ctx, sql, values...).Scan(&deleted, &last)
	})
	return deleted, last, err
}

// resubmitChunk is how many dead-lettered messages one resubmit transaction looks at.
const resubmitChunk = 500

// Resubmit moves dead-lettered messages of e back into e as new messages: the one with sequence
// number seq when seq is not 0, else every one for which match returns true (every one when match
// is nil). Messages under a valid lock are left alone. It returns how many moved.
func (s *Postgres) Resubmit(ctx context.Context, e *broker.Entity, seq int64, match func(*broker.Message) bool) (int64, error) {
	var total int64
	var after int64
	for {
		var moved, seen int64
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			now := s.now()
			rows, err := tx.Query(ctx, resubmitCandidates.sql, e.ID, after, seq, now, resubmitChunk)
			if err != nil {
				return err
			}
			msgs, err := collectMessages(rows)
			if err != nil {
				return err
			}
			seen = int64(len(msgs))
			var seqs []int64
			for _, m := range msgs {
				after = m.SequenceNumber
				if match == nil || match(m) {
					seqs = append(seqs, m.SequenceNumber)
				}
			}
			if len(seqs) == 0 {
				return nil
			}
			return tx.QueryRow(ctx, resubmitMessages.sql, e.ID, seqs, now).Scan(&moved)
		})
		if err != nil {
			return total, fmt.Errorf("resubmit dead-lettered messages of %s: %w", e.Path, interpretError(err))
		}
		total += moved
		if seen < resubmitChunk || seq != 0 {
			break
		}
	}
	if seq != 0 && total == 0 {
		return 0, broker.NotFound("No dead-lettered message with sequence number %d is available in '%s'.", seq, e.Path)
	}
	if total > 0 {
		s.touch(e)
		s.announce(wakeTarget{entity: e.ID})
	}
	return total, nil
}
