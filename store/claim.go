package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Message states and entity kinds as SQL literals, for statements built from constants; a test
// checks them against State and Kind.
const (
	sqlActive     = "0"
	sqlDeferred   = "1"
	sqlDeadLetter = "2"
	sqlTopic      = "2"
)

// A claim takes up to @n receivable messages of one entity's subqueue (or one session) in one
// statement. It reads two partial indexes: rows receivable since they were written
// (messages_ready, in sequence order) and rows whose scheduled time or lock has passed
// (messages_due, by that time). Neither holds a message under a valid lock, so the cost of a
// claim does not grow with the number of locks in flight; the lowest sequence numbers win, so an
// expired lock puts its message back at the front. SKIP LOCKED makes claims of other gateways
// take other rows; on one gateway only one claim per entity runs at a time (dispatcher).
//
// The rows picked are then updated or deleted by their ctid, a TID scan, which is the one plan
// there is for that: whatever the statistics say, a claim never walks the backlog (statistics
// older than a backlog made the planner pick plans that did, for a join on seq and even for
// entity_id = … AND seq = ANY(…), which it ran as a scan of the entity's rows filtered on seq).
// The rows are locked FOR UPDATE by the same statement, so their versions cannot change in
// between.
const (
	claimDueSQL = `due AS MATERIALIZED (
	SELECT ctid, seq FROM messages
	WHERE entity_id = @entity AND state = @state AND visible_at <= @now
		AND (expires_at IS NULL OR expires_at > @now OR state = ` + sqlDeadLetter + `)`
	claimReadySQL = `
	ORDER BY visible_at LIMIT @n FOR UPDATE SKIP LOCKED
), ready AS MATERIALIZED (
	SELECT ctid, seq FROM messages
	WHERE entity_id = @entity AND state = @state AND visible_at IS NULL
		AND (expires_at IS NULL OR expires_at > @now OR state = ` + sqlDeadLetter + `)`
	claimPickSQL = `
	ORDER BY seq LIMIT @n FOR UPDATE SKIP LOCKED
), picked AS (
	SELECT ctid FROM (SELECT ctid, seq FROM due UNION ALL SELECT ctid, seq FROM ready) c ORDER BY seq LIMIT @n
)`
	// inSession narrows both index ranges to one session, whose lock must still be held.
	inSessionSQL = `
		AND session_id = @session AND EXISTS (SELECT 1 FROM sessions s WHERE s.entity_id = @entity
			AND s.session_id = @session AND s.lock_token = @session_token AND s.locked_until > @now)`
)

// claimPicks are the picking parts of a claim, outside a session and inside one.
var claimPicks = [2]string{
	`WITH ` + claimDueSQL + claimReadySQL + claimPickSQL,
	`WITH ` + claimDueSQL + inSessionSQL + claimReadySQL + inSessionSQL + claimPickSQL,
}

// peekLockTailSQL locks what a claim picked for @lock and counts the delivery. A message already
// delivered @max_delivery times is moved to the dead-letter subqueue instead, and counted there;
// the caller drops it from the result.
var peekLockTailSQL = `, locked AS (
	UPDATE messages m SET ` + lockOrDeadLetterSQL + `
	WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM picked))
	RETURNING m.*
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), count(*), 0 FROM locked
	WHERE locked.state = ` + sqlDeadLetter + ` AND @state <> ` + sqlDeadLetter + ` HAVING count(*) > 0
)
SELECT ` + messageSelect + ` FROM locked`

// lockOrDeadLetterSQL is the SET list that locks message m from @now for @lock, counting the
// delivery, or, when it has already been delivered @max_delivery times, moves it to the
// dead-letter subqueue (MaxDeliveryCountExceeded).
var lockOrDeadLetterSQL = `
		state = CASE WHEN m.delivery_count >= @max_delivery THEN ` + sqlDeadLetter + ` ELSE m.state END,
		lock_token = CASE WHEN m.delivery_count >= @max_delivery THEN NULL ELSE ` + newLockTokenSQL + ` END,
		visible_at = CASE WHEN m.delivery_count >= @max_delivery THEN NULL ELSE @now::timestamptz + @lock::interval END,
		delivery_count = CASE WHEN m.delivery_count >= @max_delivery THEN m.delivery_count ELSE m.delivery_count + 1 END,
		dead_letter_reason = CASE WHEN m.delivery_count >= @max_delivery THEN '` + ReasonMaxDeliveryCount + `' ELSE m.dead_letter_reason END,
		dead_letter_description = CASE WHEN m.delivery_count >= @max_delivery
			THEN 'Message could not be consumed after ' || @max_delivery::int || ' delivery attempts.' ELSE m.dead_letter_description END`

// receiveAndDeleteTailSQL removes what a claim picked, counts the removal and returns it.
var receiveAndDeleteTailSQL = `, removed AS (
	DELETE FROM messages m WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM picked))
	RETURNING m.*
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `), -count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), -sum(size)
	FROM removed HAVING count(*) > 0
)
SELECT ` + messageSelect + ` FROM removed`

// claimStatements[mode][inSession] is the whole claim.
var claimStatements = [2][2]string{
	PeekLock:         {claimPicks[0] + peekLockTailSQL, claimPicks[1] + peekLockTailSQL},
	ReceiveAndDelete: {claimPicks[0] + receiveAndDeleteTailSQL, claimPicks[1] + receiveAndDeleteTailSQL},
}

// querier runs a query on the pool or inside a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// noDeliveryLimit is the MaxDeliveryCount of a dead-letter subqueue, whose messages are never
// dead-lettered again.
const noDeliveryLimit = 1<<31 - 1

// claimMessages takes up to n messages of t now, without waiting, in sequence order. full
// reports that the statement found n candidates, so more may be waiting; fewer means the target
// had no more receivable messages when the claim ran.
func (s *Postgres) claimMessages(ctx context.Context, t Target, mode ReceiveMode, n int) (msgs []*Message, full bool, err error) {
	e := t.Entity
	state := t.SubQueue.state()
	maxDelivery := e.Props.MaxDeliveryCount
	if t.SubQueue == SubQueueDeadLetter {
		maxDelivery = noDeliveryLimit
	}
	args := pgx.NamedArgs{"entity": e.ID, "state": state, "n": n}
	inSession := 0
	if t.Session != nil {
		inSession = 1
		args["session"], args["session_token"] = t.Session.SessionID, t.Session.Token
	}
	if mode == PeekLock {
		args["lock"], args["max_delivery"] = interval(e.Props.LockDuration), maxDelivery
	}
	sql := claimStatements[mode][inSession]
	// An entity that forwards its dead letters claims in a transaction with the move of any
	// message the claim dead-lettered, so none waits in its dead-letter subqueue.
	forward := mode == PeekLock && t.SubQueue == SubQueueMain && e.Props.ForwardDeadLetteredMessagesTo != ""
	for {
		args["now"] = s.now()
		var picked []*Message
		var woken []wakeTarget
		if forward {
			err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				rows, err := tx.Query(ctx, sql, args)
				if err != nil {
					return err
				}
				if picked, err = collectMessages(rows); err != nil {
					return err
				}
				for _, m := range picked {
					if m.State == StateDeadLetter {
						woken, err = s.transferDeadLetters(ctx, tx, e)
						return err
					}
				}
				return nil
			})
		} else {
			var rows pgx.Rows
			if rows, err = s.pool.Query(ctx, sql, args); err == nil {
				picked, err = collectMessages(rows)
			}
		}
		if err != nil {
			return nil, false, fmt.Errorf("receive from %s: %w", t, interpretError(err))
		}
		s.announce(woken...)
		msgs = delivered(picked, state, mode)
		if len(msgs) < len(picked) && state != StateDeadLetter {
			s.announce(wakeTarget{entity: e.ID}) // dead letters arrived for the dead-letter receivers
		}
		full = len(picked) == n
		// Every candidate was dead-lettered for too many deliveries: look again, the entity may
		// hold more.
		if len(msgs) > 0 || !full {
			break
		}
	}
	if len(msgs) == 0 && t.Session != nil {
		// Nothing came: tell an empty session from a session whose lock is gone.
		if err := s.checkSessionLock(ctx, s.pool, e, *t.Session, s.now()); err != nil {
			return nil, false, err
		}
	}
	return msgs, full, nil
}

// delivered keeps, in sequence order, the claimed messages that were handed out rather than
// dead-lettered for too many deliveries (those left state), counting the delivery a
// receive-and-delete made by removing them.
func delivered(msgs []*Message, state State, mode ReceiveMode) []*Message {
	out := msgs[:0]
	for _, m := range msgs {
		if m.State == state {
			if mode == ReceiveAndDelete {
				m.DeliveryCount++
			}
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SequenceNumber < out[j].SequenceNumber })
	return out
}

// nextDueSQL is when the next message of a subqueue (or session) becomes receivable by itself:
// the earliest scheduled time or lock end still to come. It reads the head of messages_due.
const nextDueSQL = `SELECT min(visible_at) FROM messages
	WHERE entity_id = @entity AND state = @state AND visible_at > @now`

const nextDueInSessionSQL = `SELECT least(
	(SELECT min(visible_at) FROM messages WHERE entity_id = @entity AND session_id = @session
		AND state = @state AND visible_at > @now),
	(SELECT locked_until FROM sessions WHERE entity_id = @entity AND session_id = @session
		AND lock_token = @session_token AND locked_until > @now))`

// nextDue returns when t next has a message that nothing announces: a scheduled message coming
// due or a lock running out (and, in a session, the session lock ending, when its receivers
// must learn that it is lost). Zero when there is none.
func (s *Postgres) nextDue(ctx context.Context, t Target) (time.Time, error) {
	args := pgx.NamedArgs{"entity": t.Entity.ID, "state": t.SubQueue.state(), "now": s.now()}
	sql := nextDueSQL
	if t.Session != nil {
		sql = nextDueInSessionSQL
		args["session"], args["session_token"] = t.Session.SessionID, t.Session.Token
	}
	var next pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, sql, args).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("look for due messages in %s: %w", t, interpretError(err))
	}
	return timeOrZero(next), nil
}

// ReceiveDeferred takes the deferred message with sequence number seq: locked in PeekLock mode,
// removed in ReceiveAndDelete mode. Errors: ErrNotFound when no such deferred message is
// available (never deferred, locked, expired, settled, or just dead-lettered for too many
// deliveries); ErrLockLost inside a session whose lock is gone.
func (s *Postgres) ReceiveDeferred(ctx context.Context, t Target, seq int64, mode ReceiveMode) (*Message, error) {
	e := t.Entity
	if err := checkReceivable(t); err != nil {
		return nil, err
	}
	if t.SubQueue != SubQueueMain {
		return nil, badRequest("Deferred messages are received from the entity, not its dead-letter subqueue.")
	}
	if t.Session != nil {
		if err := s.checkSessionLock(ctx, s.pool, e, *t.Session, s.now()); err != nil {
			return nil, err
		}
	}
	s.touch(e)
	args := pgx.NamedArgs{"entity": e.ID, "now": s.now(), "seq": seq, "session": nil}
	if t.Session != nil {
		args["session"] = t.Session.SessionID
	}
	sql := deleteDeferredSQL
	if mode == PeekLock {
		sql = receiveDeferredSQL
		args["lock"], args["max_delivery"] = interval(e.Props.LockDuration), e.Props.MaxDeliveryCount
	}
	rows, err := s.pool.Query(ctx, sql, args)
	var m *Message
	if err == nil {
		m, err = collectMessage(rows)
	}
	if errors.Is(err, pgx.ErrNoRows) || err == nil && m.State != StateDeferred {
		if err == nil {
			s.announce(wakeTarget{entity: e.ID}) // it went to the dead-letter subqueue
		}
		return nil, notFound("No deferred message with sequence number %d is available in '%s'.", seq, e.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("receive deferred message %d from %s: %w", seq, e.Path, interpretError(err))
	}
	if mode == ReceiveAndDelete {
		m.DeliveryCount++
	}
	return m, nil
}

// receiveDeferredSQL locks the deferred message @seq (in session @session when not NULL) if it
// is not locked and has not expired, counting the delivery; past MaxDeliveryCount it is
// dead-lettered instead.
var receiveDeferredSQL = `
WITH locked AS (
	UPDATE messages m SET ` + lockOrDeadLetterSQL + `
	WHERE m.entity_id = @entity AND m.seq = @seq AND m.state = ` + sqlDeferred + `
		AND (@session::text IS NULL OR m.session_id = @session)
		AND (m.visible_at IS NULL OR m.visible_at <= @now) AND (m.expires_at IS NULL OR m.expires_at > @now)
	RETURNING m.*
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), count(*), 0 FROM locked WHERE locked.state = ` + sqlDeadLetter + ` HAVING count(*) > 0
)
SELECT ` + messageSelect + ` FROM locked`

// deleteDeferredSQL removes the deferred message @seq if it is not locked and has not expired.
var deleteDeferredSQL = `
WITH removed AS (
	DELETE FROM messages m
	WHERE m.entity_id = @entity AND m.seq = @seq AND m.state = ` + sqlDeferred + `
		AND (@session::text IS NULL OR m.session_id = @session)
		AND (m.visible_at IS NULL OR m.visible_at <= @now) AND (m.expires_at IS NULL OR m.expires_at > @now)
	RETURNING m.*
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), 0, -sum(size) FROM removed HAVING count(*) > 0
)
SELECT ` + messageSelect + ` FROM removed`

// String names a target in errors: the entity path, its subqueue, the session.
func (t Target) String() string {
	p := t.Entity.Path
	if t.SubQueue == SubQueueDeadLetter {
		p += "/$DeadLetterQueue"
	}
	if t.Session != nil {
		p += " (session " + strconv.Quote(truncate(t.Session.SessionID)) + ")"
	}
	return p
}
