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

// browseSQL lists messages of one subqueue from a sequence number on, without locking them.
// Expired messages the sweep has not removed yet are left out, as a receive would. With $6 (a
// subscription) messages still waiting for their scheduled time are left out too: on the service
// they wait in the topic until then ("Message browsing": scheduled messages are peeked on
// queues, not on subscriptions), where sbgate keeps each subscription's copy.
var browseSQL = `SELECT ` + messageSelectFrom("m") + ` FROM messages m
WHERE m.entity_id = $1 AND (m.state = ` + sqlDeadLetter + `) = ($2::smallint = ` + sqlDeadLetter + `) AND m.seq >= $3
	AND (m.expires_at IS NULL OR m.expires_at > $4 OR m.state = ` + sqlDeadLetter + `)
	AND NOT ($6::boolean AND m.state = ` + sqlActive + ` AND m.lock_token IS NULL AND coalesce(m.scheduled_at > $4, false))
ORDER BY m.seq LIMIT $5`

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
	rows, err := s.pool.Query(ctx, browseSQL, e.ID, sq.State(), from, now, n, e.Kind == broker.KindSubscription)
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

// cancelScheduledSQL removes the messages @seqs (askSeqs) that are still waiting for their
// scheduled time, and returns their sequence numbers. The time condition is written so that no
// index can serve it: the index of scheduled messages can (visible_at > now is its key), and
// read every entity's scheduled messages to find the few asked for (TestCancelScheduledPlan).
const cancelScheduledSQL = `
WITH removed AS (
	DELETE FROM messages m USING` + askedSeqsSQL + `
	WHERE m.entity_id = w.entity AND m.seq = w.seq AND m.state = ` + sqlActive + `
		AND m.lock_token IS NULL AND (m.visible_at > @now) IS TRUE
	RETURNING m.seq, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), 0, -sum(size) FROM removed HAVING count(*) > 0
)
SELECT seq FROM removed`

// cancelScheduledCopiesSQL removes the copies, still waiting for their time, of the messages a
// topic or a forwarding entity numbered @seqs (their EnqueuedSequenceNumber), from the entities
// @holders that hold them (copyHolders), and returns each number it removed copies of.
const cancelScheduledCopiesSQL = `
WITH removed AS (
	DELETE FROM messages m
	WHERE m.entity_id = ANY(@holders::bigint[]) AND m.enqueued_seq = ANY(@seqs::bigint[]) AND m.state = ` + sqlActive + `
		AND m.lock_token IS NULL AND (m.visible_at > @now) IS TRUE
	RETURNING m.entity_id, m.enqueued_seq, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), 0, -sum(size) FROM removed GROUP BY entity_id
)
SELECT DISTINCT enqueued_seq FROM removed`

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
	statement := cancelScheduledSQL
	if e.Kind == broker.KindTopic || e.Props.ForwardTo != "" {
		holders, err := s.copyHolders(ctx, e)
		if err != nil {
			return fmt.Errorf("cancel scheduled messages in %s: %w", e.Path, err)
		}
		args["holders"], args["seqs"] = holders, want
		statement = cancelScheduledCopiesSQL
	} else {
		askSeqs(args, e, want)
	}
	missing, err := s.allOrNone(ctx, want, func(tx pgx.Tx, found map[int64]bool) error {
		rows, err := tx.Query(ctx, statement, args)
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

// purgeSQL deletes the next chunk of a subqueue's messages: those after sequence number @after,
// up to the sequence number of the @n-th of them (and not past @upto). It walks the primary key
// from where the previous chunk ended, so no chunk passes again over the rows (and dead index
// entries) earlier chunks deleted. The rows are deleted by primary-key range, not by ctid: a row
// another transaction updates meanwhile (a claim, an abandon, a renewal) is then deleted in its
// new version once that transaction ends (PostgreSQL rechecks the conditions on it), where a
// delete by ctid would find the version it saw gone and skip the row. It returns how many it
// deleted and the chunk's last sequence number (NULL: none left).
const purgeSQL = `
WITH bound AS MATERIALIZED (
	SELECT max(seq) AS last FROM (
		SELECT seq FROM messages
		WHERE entity_id = @entity AND seq > @after AND seq <= @upto
			AND (state = ` + sqlDeadLetter + `) = (@state::smallint = ` + sqlDeadLetter + `)
		ORDER BY seq LIMIT @n) c
), removed AS (
	DELETE FROM messages m
	WHERE m.entity_id = @entity AND m.seq > @after AND m.seq <= (SELECT last FROM bound)
		AND (m.state = ` + sqlDeadLetter + `) = (@state::smallint = ` + sqlDeadLetter + `)
	RETURNING m.state, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `), -count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), -sum(size)
	FROM removed HAVING count(*) > 0
)
SELECT (SELECT count(*) FROM removed), (SELECT last FROM bound)`

// Purge deletes the messages of e's subqueue (locked, scheduled and deferred ones too) that are
// there when it starts, and returns how many. Locks on purged messages are lost. A message sent
// while it runs may stay (one with a sequence number above the highest at the start does, and
// one whose send commits after the purge passed its sequence number), so that a purge ends even
// while senders keep sending.
func (s *Postgres) Purge(ctx context.Context, e *broker.Entity, sq broker.SubQueue) (int64, error) {
	var upto int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM messages WHERE entity_id = $1`, e.ID).Scan(&upto); err != nil {
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
	err := s.retryConflicts(ctx, nil, func() error {
		return s.pool.QueryRow(ctx, purgeSQL, pgx.NamedArgs{
			"entity": e.ID, "after": after, "upto": upto, "state": sq.State(), "n": n}).Scan(&deleted, &last)
	})
	return deleted, last, err
}

// resubmitChunk is how many dead-lettered messages one resubmit transaction looks at.
const resubmitChunk = 500

// resubmitCandidatesSQL reads dead-lettered messages after sequence number $2 that no one holds a
// lock on, locking the rows for the rest of the transaction.
var resubmitCandidatesSQL = `SELECT ` + messageSelectFrom("m") + ` FROM messages m
WHERE m.entity_id = $1 AND m.state = ` + sqlDeadLetter + ` AND m.seq > $2 AND ($3::bigint = 0 OR m.seq = $3)
	AND (m.lock_token IS NULL OR m.visible_at <= $4)
ORDER BY m.seq LIMIT $5 FOR UPDATE SKIP LOCKED`

// resubmitSQL puts dead-lettered messages back in their entity as new messages: a new sequence
// number (at the back of the queue), enqueued now with its TTL counted from now, no deliveries,
// no dead-letter reason.
const resubmitSQL = `
WITH moved AS (
	UPDATE messages m SET seq = nextval('message_seq'), state = ` + sqlActive + `, visible_at = NULL, lock_token = NULL,
		delivery_count = 0, enqueued_at = $3::timestamptz, scheduled_at = NULL,
		expires_at = CASE WHEN m.ttl IS NULL THEN NULL ELSE $3::timestamptz + m.ttl END,
		dead_letter_reason = NULL, dead_letter_description = NULL, dead_letter_source = NULL
	WHERE m.entity_id = $1 AND m.seq = ANY($2) AND m.state = ` + sqlDeadLetter + `
	RETURNING m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT $1, count(*), -count(*), 0 FROM moved HAVING count(*) > 0
)
SELECT count(*) FROM moved`

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
			rows, err := tx.Query(ctx, resubmitCandidatesSQL, e.ID, after, seq, now, resubmitChunk)
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
			return tx.QueryRow(ctx, resubmitSQL, e.ID, seqs, now).Scan(&moved)
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
