package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

// Message states and entity kinds as SQL literals, for statements built from constants: SQL
// names a state or kind by these, never by its number (TestSQLNamesMatchGoValues checks them
// against State and Kind, TestSQLHasNoStateNumerals that no statement uses a bare number).
const (
	sqlActive     = "0"
	sqlDeferred   = "1"
	sqlDeadLetter = "2"
	sqlTopic      = "2"
)

// A claim takes up to @n receivable messages of one entity's subqueue (or one session) in one
// statement. It reads two partial indexes: rows receivable since they were written
// (messages_ready, in sequence order) and rows whose scheduled time or lock has passed, or that
// were abandoned (messages_due, by that time). Neither holds a message under a valid lock, so the
// claim does not step over the locks in flight; the lowest sequence numbers win, so a message
// whose lock ended goes back to the front. SKIP LOCKED makes claims of other gateways take other
// rows; on one gateway only one claim per target runs at a time (the dispatcher).
//
// The due rows are found by time but taken by sequence number: the claim reads the due range
// up to @now (due_window, without locking), then locks the lowest sequence numbers of what it
// read. Taking the first @n by time instead handed out a message abandoned a moment ago ahead
// of an earlier one whose lock had just lapsed (its lock end comes later than the abandon). The
// read stops dueLookahead rows past @n, so that thousands of messages coming due together (a
// large schedule, the locks of a gateway that died) cost each claim a bounded read: a message
// behind that many others due before it waits for them.
//
// A row that is locked or removed leaves its index entries behind until vacuum, and in a busy
// queue those pile up at the head of both ranges faster than vacuum comes (after 32,000 claims a
// claim read 470 index pages instead of 20). So each dispatcher keeps a cursor: where its last
// claim ended in each range (@ready_from, @due_from), which the next claim starts from instead of
// the head. A cursor can pass a row committed late (a send whose group commit finished after a
// later one, an abandon in flight during the claim); the dispatcher therefore claims from the
// head now and then, and always before it concludes that nothing is there (cursor).
//
// The rows picked are then updated or deleted by their ctid, a TID scan, which is the one plan
// there is for that: whatever the statistics say, a claim never walks the backlog (statistics
// older than a backlog made the planner pick plans that did, for a join on seq and even for
// entity_id = … AND seq = ANY(…), which it ran as a scan of the entity's rows filtered on seq).
// The rows are locked FOR UPDATE by the same statement, so their versions cannot change in
// between.
const (
	// dueRangeSQL and readyRangeSQL select a target's rows in each range; a session narrows
	// them further (inSessionSQL) before they are ordered and limited.
	dueRangeSQL = `
	SELECT ctid, seq, visible_at FROM messages WHERE ` + dueWhereSQL
	dueWhereSQL = `entity_id = @entity AND state = @state AND visible_at >= @due_from AND visible_at <= @now
		AND (expires_at IS NULL OR expires_at > @now OR state = ` + sqlDeadLetter + `)`
	// dueWindowOrderSQL bounds the read of the due range by time; dueTakeSQL then locks the
	// lowest sequence numbers of the rows read (found again by their ctid, and checked again:
	// a row another claim locked and changed meanwhile is no longer due).
	dueWindowOrderSQL = `
	ORDER BY visible_at LIMIT @n + ` + dueLookahead
	dueTakeSQL = `
	SELECT ctid, seq, visible_at FROM messages
	WHERE ctid = ANY(ARRAY(SELECT ctid FROM due_window)) AND ` + dueWhereSQL + `
	ORDER BY seq LIMIT @n FOR UPDATE SKIP LOCKED`
	readyRangeSQL = `
	SELECT ctid, seq FROM messages
	WHERE entity_id = @entity AND state = @state AND visible_at IS NULL AND seq > @ready_from
		AND (expires_at IS NULL OR expires_at > @now OR state = ` + sqlDeadLetter + `)`
	readyOrderSQL = `
	ORDER BY seq LIMIT @n FOR UPDATE SKIP LOCKED`
	claimPickSQL = `
), picked AS (
	SELECT ctid, seq, due_at FROM (SELECT ctid, seq, visible_at AS due_at FROM due
		UNION ALL SELECT ctid, seq, NULL::timestamptz FROM ready) c
	ORDER BY seq LIMIT @n
)`
	// inSession narrows both index ranges to one session, whose lock must still be held.
	inSessionSQL = `
		AND session_id = @session AND EXISTS (SELECT 1 FROM sessions s WHERE s.entity_id = @entity
			AND s.session_id = @session AND s.lock_token = @session_token AND s.locked_until > @now)`
	// claimedSQL returns the claimed rows with what moves the cursors: each row's place in the
	// due range (NULL for a row from the ready range), and the earliest due row the claim read
	// but did not take (locked by another claim, or behind lower sequence numbers), where the
	// due cursor must stop.
	claimedSQL = `, p.due_at AS claimed_due_at,
	(SELECT min(w.visible_at) FROM due_window w WHERE w.ctid <> ALL (ARRAY(SELECT ctid FROM picked))) AS due_left`
)

// dueLookahead is how many due rows past the @n it takes a claim reads to find the lowest
// sequence numbers among them (see above).
const dueLookahead = "1000"

// claimPicks are the picking parts of a claim, outside a session and inside one.
var claimPicks = [2]string{
	`WITH due_window AS MATERIALIZED (` + dueRangeSQL + dueWindowOrderSQL + `
), due AS MATERIALIZED (` + dueTakeSQL + `
), ready AS MATERIALIZED (` + readyRangeSQL + readyOrderSQL + claimPickSQL,
	`WITH due_window AS MATERIALIZED (` + dueRangeSQL + inSessionSQL + dueWindowOrderSQL + `
), due AS MATERIALIZED (` + dueTakeSQL + `
), ready AS MATERIALIZED (` + readyRangeSQL + inSessionSQL + readyOrderSQL + claimPickSQL,
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
SELECT ` + messageSelectFrom("locked") + claimedSQL + ` FROM locked JOIN picked p ON p.seq = locked.seq`

// removedSelectFrom is messageSelectFrom(alias) for messages a receive-and-delete claim removed:
// a lock that lapsed on one counts as the failed delivery it was (failedSQL), and the removed
// message is delivered without that lock's token.
func removedSelectFrom(alias string) string {
	cols := make([]string, len(messageFields))
	for i, f := range messageFields {
		switch f {
		case "delivery_count":
			cols[i] = "(" + strings.ReplaceAll(failedSQL, "m.", alias+".") + ") AS delivery_count"
		case "lock_token":
			cols[i] = "NULL::uuid AS lock_token"
		default:
			cols[i] = alias + "." + f
		}
	}
	return strings.Join(cols, ", ")
}

// failedSQL is the failed deliveries of m (its delivery_count) with a lock that lapsed on it
// counted: a claim only picks a message whose lock token is still set when that lock ran out.
// As on the service, a delivery counts when its lock expires or it is abandoned, not when it is
// made, and nothing counts in the dead-letter subqueue, which has no delivery limit: a message
// received from a queue, dead-lettered and received from the dead-letter subqueue shows the
// same DeliveryCount twice, and a deferred message received by its number is not counted again.
const failedSQL = `(m.delivery_count + CASE WHEN m.lock_token IS NOT NULL AND m.state <> ` + sqlDeadLetter + ` THEN 1 ELSE 0 END)`

// inSessionLock makes a statement that locks messages for @lock lock them, in a session, until
// the session lock (@session, @session_token) ends instead: on the service the session lock is
// its messages' lock, so a receiver that keeps renewing the session settles whenever it is done
// (RenewSessionLock moves the messages' lock ends with it).
func inSessionLock(sql string) string {
	const own = "@now::timestamptz + @lock::interval"
	if strings.Count(sql, own) != 1 {
		panic("store: a locking statement without its lock end")
	}
	return strings.Replace(sql, own, `(SELECT s.locked_until FROM sessions s
		WHERE s.entity_id = @entity AND s.session_id = @session AND s.lock_token = @session_token)`, 1)
}

// lockOrDeadLetterSQL is the SET list that locks message m from @now for @lock, or, when
// @max_delivery deliveries of it have failed, moves it to the dead-letter subqueue
// (MaxDeliveryCountExceeded).
var lockOrDeadLetterSQL = `
		state = CASE WHEN ` + failedSQL + ` >= @max_delivery THEN ` + sqlDeadLetter + ` ELSE m.state END,
		lock_token = CASE WHEN ` + failedSQL + ` >= @max_delivery THEN NULL ELSE ` + newLockTokenSQL + ` END,
		visible_at = CASE WHEN ` + failedSQL + ` >= @max_delivery THEN NULL ELSE @now::timestamptz + @lock::interval END,
		delivery_count = ` + failedSQL + `,
		dead_letter_reason = CASE WHEN ` + failedSQL + ` >= @max_delivery THEN '` + ReasonMaxDeliveryCount + `' ELSE m.dead_letter_reason END,
		dead_letter_description = CASE WHEN ` + failedSQL + ` >= @max_delivery
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
SELECT ` + removedSelectFrom("removed") + claimedSQL + ` FROM removed JOIN picked p ON p.seq = removed.seq`

// claimedRecord is a claimed row with what moves the claim cursor.
type claimedRecord struct {
	messageRecord
	ClaimedDueAt pgtype.Timestamptz `db:"claimed_due_at"`
	DueLeft      pgtype.Timestamptz `db:"due_left"`
}

// claimCursor is where a dispatcher's next claim starts in each range. The zero value starts at
// the head of both.
type claimCursor struct {
	readyFrom int64     // the ready range after this sequence number
	dueFrom   time.Time // the due range from this time; zero: from its start
	lastHead  time.Time // when a claim last started at the head (wall clock)
}

// Claims start at the head at least this often, to take rows a cursor passed before they were
// committed; dueMargin keeps the due cursor this far behind the time a claim looked, for abandons
// committed just after it.
const (
	headClaimEvery = 250 * time.Millisecond
	dueMargin      = 100 * time.Millisecond
)

// minusInfinity starts the due range at its head.
var minusInfinity = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}

// claimStatements[mode][inSession] is the whole claim.
var claimStatements = [2][2]string{
	broker.PeekLock:         {claimPicks[0] + peekLockTailSQL, claimPicks[1] + inSessionLock(peekLockTailSQL)},
	broker.ReceiveAndDelete: {claimPicks[0] + receiveAndDeleteTailSQL, claimPicks[1] + receiveAndDeleteTailSQL},
}

// querier runs a query on the pool or inside a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// noDeliveryLimit is the MaxDeliveryCount of a dead-letter subqueue, whose messages are never
// dead-lettered again.
const noDeliveryLimit = 1<<31 - 1

// claimMessages takes up to n messages of t now, without waiting, in sequence order. full
// reports that the last statement found as many candidates as it asked for, so more may be
// waiting; otherwise a claim from the head of both ranges found no more. cur, when not nil, is
// the dispatcher's cursor, which the claim starts from and moves.
func (s *Postgres) claimMessages(ctx context.Context, t broker.Target, mode broker.ReceiveMode, n int, cur *claimCursor) (msgs []*broker.Message, full bool, err error) {
	fromHead := cur == nil || time.Since(cur.lastHead) >= headClaimEvery
	for len(msgs) < n {
		want := n - len(msgs)
		got, picked, err := s.claimOnce(ctx, t, mode, want, cur, fromHead)
		if err != nil {
			return nil, false, err
		}
		msgs = append(msgs, got...)
		full = picked == want
		switch {
		case full && len(got) == 0:
			// Every candidate was dead-lettered for too many deliveries: look again, the
			// entity may hold more.
		case !full && !fromHead:
			// A cursor may have passed rows committed late: nothing is concluded before a look
			// from the head.
			fromHead = true
		default:
			sort.Slice(msgs, func(i, j int) bool { return msgs[i].SequenceNumber < msgs[j].SequenceNumber })
			return msgs, full, s.sessionLostIfEmpty(ctx, t, msgs)
		}
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].SequenceNumber < msgs[j].SequenceNumber })
	return msgs, full, nil
}

// sessionLostIfEmpty tells an empty session from one whose lock is gone: a claim in a session
// that found nothing fails with ErrLockLost when the session lock is no longer held.
func (s *Postgres) sessionLostIfEmpty(ctx context.Context, t broker.Target, msgs []*broker.Message) error {
	if len(msgs) > 0 || t.Session == nil {
		return nil
	}
	return s.checkSessionLock(ctx, s.pool, t.Entity, *t.Session, s.now())
}

// newClaim is the claim of up to n messages of t at now, from the head of both ranges or from
// cur. Its statement is written only when it runs alone (statement): outside a session it
// usually shares one with the round's other claims (claimmany.go).
func newClaim(t broker.Target, mode broker.ReceiveMode, n int, cur *claimCursor, fromHead bool, now time.Time) *claimJob {
	e := t.Entity
	ct := &claimTarget{entity: e.ID, state: int16(t.SubQueue.State()), n: int32(n), dueFrom: minusInfinity, now: now}
	if cur != nil && !fromHead {
		ct.readyFrom = cur.readyFrom
		if !cur.dueFrom.IsZero() {
			ct.dueFrom = pgtype.Timestamptz{Time: cur.dueFrom, Valid: true}
		}
	}
	if mode == broker.PeekLock {
		ct.maxDelivery = e.Props.MaxDeliveryCount
		if t.SubQueue == broker.SubQueueDeadLetter {
			ct.maxDelivery = noDeliveryLimit
		}
		ct.lock = e.Props.LockDuration
	}
	return &claimJob{mode: mode, target: ct, session: t.Session}
}

// statement is the claim as a statement of its own: numbered, and its arguments in order.
func (cj *claimJob) statement() (string, []any, error) {
	ct := cj.target
	args := pgx.NamedArgs{"entity": ct.entity, "state": ct.state, "n": ct.n, "now": ct.now, "ready_from": ct.readyFrom, "due_from": ct.dueFrom}
	inSession := 0
	if cj.session != nil {
		inSession = 1
		args["session"], args["session_token"] = cj.session.SessionID, cj.session.Token
	}
	if cj.mode == broker.PeekLock {
		args["lock"], args["max_delivery"] = interval(ct.lock), ct.maxDelivery
	}
	return positional(claimStatements[cj.mode][inSession], args)
}

// claimOnce runs one claim statement for up to n messages, from the head of both ranges or from
// cur, and moves cur. It returns the messages delivered and how many rows the statement picked
// (some may have been dead-lettered instead).
func (s *Postgres) claimOnce(ctx context.Context, t broker.Target, mode broker.ReceiveMode, n int, cur *claimCursor, fromHead bool) ([]*broker.Message, int, error) {
	e := t.Entity
	state := t.SubQueue.State()
	now := s.now()
	cj := newClaim(t, mode, n, cur, fromHead, now)
	s.claims.Add(1)
	var rows []claimedRecord
	var woken []wakeTarget
	var err error
	run := func(q querier) error {
		sql, args, err := cj.statement()
		if err != nil {
			return err
		}
		r, err := q.Query(ctx, sql, args...)
		if err == nil {
			rows, err = collectRecords[claimedRecord](r, n)
		}
		return err
	}
	// An entity that forwards its dead letters claims in a transaction with the move of any
	// message the claim dead-lettered, so none waits in its dead-letter subqueue.
	if mode == broker.PeekLock && t.SubQueue == broker.SubQueueMain && e.Props.ForwardDeadLetteredMessagesTo != "" {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := run(tx); err != nil {
				return err
			}
			for _, r := range rows {
				if r.State == broker.StateDeadLetter {
					woken, err = s.transferDeadLetters(ctx, tx, e)
					return err
				}
			}
			return nil
		})
	} else if s.claimer.Running() {
		err = s.claimer.Submit(ctx, cj)
		rows = cj.rows
	} else {
		err = run(s.hotPool())
	}
	if err != nil {
		return nil, 0, fmt.Errorf("receive from %s: %w", t, interpretError(err))
	}
	s.announce(woken...)
	if fromHead && cur != nil {
		cur.lastHead = time.Now()
	}
	cur.move(rows, now)
	msgs := make([]*broker.Message, 0, len(rows))
	for _, r := range rows {
		m, err := r.message()
		if err != nil {
			return nil, 0, fmt.Errorf("receive from %s: %w", t, err)
		}
		msgs = append(msgs, m)
	}
	out := delivered(msgs, state)
	if len(out) < len(msgs) && state != broker.StateDeadLetter {
		s.announce(wakeTarget{entity: e.ID}) // dead letters arrived for the dead-letter receivers
	}
	return out, len(rows), nil
}

// move advances the cursor past what a claim at now took: the ready range past the highest
// sequence number it took from it, the due range to the earliest due row it read but left (one
// locked by another claim, or behind lower sequence numbers), else, when it took anything, to
// just before now: it took every due row up to then. A claim that took nothing leaves the due
// cursor where it was, since what it read may have been another claim's for a moment (a due
// row that claim then leaves is still ahead of the cursor). The due cursor stays dueMargin
// behind now, for abandons committed just after the claim looked.
func (c *claimCursor) move(rows []claimedRecord, now time.Time) {
	if c == nil {
		return
	}
	var dueLeft time.Time
	for _, r := range rows {
		if !r.ClaimedDueAt.Valid {
			c.readyFrom = max(c.readyFrom, r.Seq)
		}
		if r.DueLeft.Valid {
			dueLeft = r.DueLeft.Time
		}
	}
	next := c.dueFrom
	switch {
	case !dueLeft.IsZero():
		next = dueLeft
	case len(rows) > 0:
		next = now
	}
	if limit := now.Add(-dueMargin); next.After(limit) {
		next = limit
	}
	c.dueFrom = maxTime(c.dueFrom, next)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// delivered keeps, in sequence order, the claimed messages that were handed out rather than
// dead-lettered for too many deliveries (those left state).
func delivered(msgs []*broker.Message, state broker.State) []*broker.Message {
	out := msgs[:0]
	for _, m := range msgs {
		if m.State == state {
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

// nextDue returns when t next has a message that nothing announces, after since: a scheduled
// message coming due or a lock running out (and, in a session, the session lock ending, when its
// receivers must learn that it is lost). Zero when there is none. The time may have passed
// already (see nextFunc).
func (s *Postgres) nextDue(ctx context.Context, t broker.Target, since time.Time) (time.Time, error) {
	args := pgx.NamedArgs{"entity": t.Entity.ID, "state": t.SubQueue.State(), "now": since}
	sql := nextDueSQL
	if t.Session != nil {
		sql = nextDueInSessionSQL
		args["session"], args["session_token"] = t.Session.SessionID, t.Session.Token
	}
	sql, values, err := positional(sql, args)
	if err != nil {
		return time.Time{}, err
	}
	var next pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, sql, values...).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("look for due messages in %s: %w", t, interpretError(err))
	}
	return timeOrZero(next), nil
}

// ReceiveDeferred takes the deferred messages of t with the sequence numbers seqs, all or none,
// in one transaction: locked in PeekLock mode, removed in ReceiveAndDelete mode. It returns them
// in the order asked; a sequence number asked more than once is taken once and returned at its
// first place. When one of them is not an available deferred message (never deferred, locked,
// expired, settled, in another session), nothing is locked or removed and the error is
// ErrNotFound naming the first such sequence number in the order asked.
//
// In PeekLock mode a message already delivered MaxDeliveryCount times is dead-lettered
// (MaxDeliveryCountExceeded) instead of locked, as a receive would. That move is kept, or the
// message could never leave the deferred state, but the request fails all the same: it counts
// as not available, so the error is ErrNotFound naming the first sequence number in the order
// asked that was missing or so moved, and the others asked for are neither locked nor counted
// as delivered (the attempt is rolled back, and the moves made again on their own).
//
// An empty seqs takes nothing and returns no messages (the .NET SDK answers an empty request so
// itself; the Go SDK sends it and reads an empty list). Errors: ErrBadRequest for more than
// MaxReceiveBatch sequence numbers (counting repeats), for a topic or a dead-letter subqueue;
// ErrForbidden when receiving is disabled; ErrNotFound as above; ErrLockLost inside a session
// whose lock is gone.
func (s *Postgres) ReceiveDeferred(ctx context.Context, t broker.Target, seqs []int64, mode broker.ReceiveMode) ([]*broker.Message, error) {
	e := t.Entity
	if err := checkReceivable(t); err != nil {
		return nil, err
	}
	if t.SubQueue != broker.SubQueueMain {
		return nil, broker.BadRequest("Deferred messages are received from the entity, not its dead-letter subqueue.")
	}
	if len(seqs) > broker.MaxReceiveBatch {
		return nil, broker.BadRequest("A request may receive at most %d deferred messages; this one names %d sequence numbers.", broker.MaxReceiveBatch, len(seqs))
	}
	want := distinctSeqs(seqs)
	if len(want) == 0 {
		return []*broker.Message{}, nil
	}
	s.touch(e)
	now := s.now()
	args := pgx.NamedArgs{"entity": e.ID, "now": now, "session": nil}
	askSeqs(args, e, want)
	if t.Session != nil {
		args["session"] = t.Session.SessionID
	}
	sql := deleteDeferredSQL
	if mode == broker.PeekLock {
		sql = receiveDeferredSQL
		args["lock"], args["max_delivery"] = interval(e.Props.LockDuration), e.Props.MaxDeliveryCount
		if t.Session != nil {
			sql, args["session_token"] = receiveDeferredInSessionSQL, t.Session.Token
		}
	}
	taken := make(map[int64]*broker.Message, len(want))
	var exhausted []int64 // delivered MaxDeliveryCount times: dead-lettered by the attempt
	missing, err := s.allOrNone(ctx, want, func(tx pgx.Tx, found map[int64]bool) error {
		clear(taken)
		exhausted = exhausted[:0]
		if t.Session != nil {
			if err := s.checkSessionLock(ctx, tx, e, *t.Session, now); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, sql, args)
		if err != nil {
			return err
		}
		msgs, err := collectMessages(rows)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.State == broker.StateDeferred {
				taken[m.SequenceNumber], found[m.SequenceNumber] = m, true
			} else {
				exhausted = append(exhausted, m.SequenceNumber)
			}
		}
		return nil
	})
	var de *broker.Error
	if errors.As(err, &de) {
		return nil, err // as it is: the session lock is gone
	}
	if err != nil {
		return nil, fmt.Errorf("receive deferred messages from %s: %w", t, interpretError(err))
	}
	if len(missing) > 0 {
		// Rolled back, the moves to the dead-letter subqueue too: they are made again alone.
		if len(exhausted) > 0 {
			if err := s.deadLetterDeferred(ctx, t, exhausted, args); err != nil {
				return nil, err
			}
		}
		return nil, broker.NotFound("No deferred message with sequence number %d is available in '%s'.", missing[0], e.Path)
	}
	out := make([]*broker.Message, len(want))
	for i, seq := range want {
		out[i] = taken[seq]
	}
	return out, nil
}

// deadLetterDeferred moves the deferred messages seqs of t that have been delivered
// MaxDeliveryCount times to the dead-letter subqueue: what a ReceiveDeferred that failed found
// so and rolled back. The statement checks each again, so one another request took meanwhile
// stays where it went.
func (s *Postgres) deadLetterDeferred(ctx context.Context, t broker.Target, seqs []int64, args pgx.NamedArgs) error {
	moveArgs := pgx.NamedArgs{}
	for k, v := range args {
		moveArgs[k] = v
	}
	askSeqs(moveArgs, t.Entity, seqs)
	var woken []wakeTarget
	// An entity that forwards its dead letters moves them on in the same transaction, as a
	// claim that dead-letters does; a deadlock runs it again, as the receive it follows.
	err := s.retryConflicts(ctx, func() { woken = nil }, func() error {
		return s.deadLetterDeferredTx(ctx, t, moveArgs, &woken)
	})
	if err != nil {
		return fmt.Errorf("dead-letter deferred messages of %s: %w", t, interpretError(err))
	}
	s.announce(woken...)
	return nil
}

// deadLetterDeferredTx is one attempt of deadLetterDeferred, adding to woken whom it concerns.
func (s *Postgres) deadLetterDeferredTx(ctx context.Context, t broker.Target, moveArgs pgx.NamedArgs, woken *[]wakeTarget) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, deadLetterDeferredSQL, moveArgs)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		*woken = append(*woken, wakeTarget{entity: t.Entity.ID}) // the dead-letter subqueue's receivers
		if t.Entity.Props.ForwardDeadLetteredMessagesTo != "" {
			moved, err := s.transferDeadLetters(ctx, tx, t.Entity)
			*woken = append(*woken, moved...)
			return err
		}
		return nil
	})
}

// availableDeferredSQL picks, of the messages asked for, the deferred ones (in session @session
// when not NULL) that are not locked and have not expired.
const availableDeferredSQL = `
	WHERE m.entity_id = w.entity AND m.seq = w.seq AND m.state = ` + sqlDeferred + `
		AND (@session::text IS NULL OR m.session_id = @session)
		AND (m.visible_at IS NULL OR m.visible_at <= @now) AND (m.expires_at IS NULL OR m.expires_at > @now)`

// receiveDeferredSQL locks the available deferred messages @seqs, counting the delivery; one
// past MaxDeliveryCount is dead-lettered instead (and counted there).
var receiveDeferredSQL = `
WITH locked AS (
	UPDATE messages m SET ` + lockOrDeadLetterSQL + `
	FROM` + askedSeqsSQL + availableDeferredSQL + `
	RETURNING m.*
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), count(*), 0 FROM locked WHERE locked.state = ` + sqlDeadLetter + ` HAVING count(*) > 0
)
SELECT ` + messageSelect + ` FROM locked`

// receiveDeferredInSessionSQL is receiveDeferredSQL in a session: the locks end with the session's.
var receiveDeferredInSessionSQL = inSessionLock(receiveDeferredSQL)

// deadLetterDeferredSQL is receiveDeferredSQL for the messages past MaxDeliveryCount only, all
// of which it dead-letters.
var deadLetterDeferredSQL = `
WITH moved AS (
	UPDATE messages m SET ` + lockOrDeadLetterSQL + `
	FROM` + askedSeqsSQL + availableDeferredSQL + `
		AND ` + failedSQL + ` >= @max_delivery
	RETURNING 1
)
INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
SELECT @entity, -count(*), count(*), 0 FROM moved HAVING count(*) > 0`

// deleteDeferredSQL removes the available deferred messages @seqs and counts the removal.
var deleteDeferredSQL = `
WITH removed AS (
	DELETE FROM messages m USING` + askedSeqsSQL + availableDeferredSQL + `
	RETURNING m.*
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), 0, -sum(size) FROM removed HAVING count(*) > 0
)
SELECT ` + messageSelect + ` FROM removed`

// claimJob is one dispatcher's claim statement waiting for its round.
type claimJob struct {
	mode broker.ReceiveMode
	// target is what the claim takes; outside a session (session nil) the claim may run as a
	// target of a statement shared with the claims of other entities in the round
	// (claimManyStatements).
	target  *claimTarget
	session *broker.SessionLock
	rows    []claimedRecord
}

// claimRoundSize bounds the claims one round runs.
const claimRoundSize = 64

// newClaimer coalesces the claims of different entities: one dispatcher claims for one entity
// at a time, so with many busy entities many claims, each of a message or two, run at once.
// A round runs those waiting in one pipeline and one transaction, the claims outside sessions
// in one statement per receive mode: one round trip, one commit and few statements instead of
// one each (claimmany.go).
func newClaimer(s *Postgres) *engine.Batcher[*claimJob] {
	return engine.NewBatcher(s.opts.SendWriters, claimRoundSize, func(*claimJob) int { return 1 }, s.writeClaims)
}

// claimPart is a statement of a round: one claim, or the shared claim of several targets.
type claimPart struct {
	jobs   []*engine.Job[*claimJob]
	shared bool
}

// writeClaims runs one round of claims and answers each once the round has committed: a claim
// answered before its commit could hand out a lock the database never kept.
func (s *Postgres) writeClaims(jobs []*engine.Job[*claimJob]) {
	ctx, cancel := context.WithTimeout(context.Background(), engine.WriteTimeout)
	defer cancel()
	b, parts := s.queueClaims(claimParts(jobs))
	if len(parts) == 0 {
		return
	}
	errs := make([]error, len(parts))
	br := s.hotPool().SendBatch(ctx, b)
	for i, p := range parts {
		errs[i] = readClaims(br, p)
	}
	closeErr := br.Close()
	for i, p := range parts {
		err := errs[i]
		if err == nil {
			err = closeErr
		}
		for _, j := range p.jobs {
			if err != nil {
				j.Req.rows = nil
			}
			j.Finish(err)
		}
	}
}

// claimParts groups a round's claims into statements: the session-less claims of each mode
// share one, the others have one each.
func claimParts(jobs []*engine.Job[*claimJob]) []claimPart {
	var parts []claimPart
	var shareable [2][]*engine.Job[*claimJob] // by mode
	// Targets of one statement must differ: the claims of one statement see the rows as they
	// were before it, so two claims of one subqueue in it could pick the same message (in
	// statements of their own, the later one sees the earlier one's locks). One dispatcher
	// claims for a subqueue at a time, so this is a safeguard, not a case that occurs.
	type subqueue struct {
		entity int64
		state  int16
	}
	seen := make(map[subqueue]bool, len(jobs))
	for _, j := range jobs {
		if t := j.Req.target; j.Req.session == nil && !seen[subqueue{t.entity, t.state}] {
			seen[subqueue{t.entity, t.state}] = true
			shareable[j.Req.mode] = append(shareable[j.Req.mode], j)
		} else {
			parts = append(parts, claimPart{jobs: []*engine.Job[*claimJob]{j}})
		}
	}
	for _, js := range shareable {
		if len(js) > 0 {
			parts = append(parts, claimPart{jobs: js, shared: len(js) > 1})
		}
	}
	return parts
}

// queueClaims queues the statement of each part in a batch and returns the parts queued: a
// statement that cannot be built fails its claims and stays out of the round.
func (s *Postgres) queueClaims(parts []claimPart) (*pgx.Batch, []claimPart) {
	b := &pgx.Batch{}
	queued := parts[:0]
	for _, p := range parts {
		var sql string
		var values []any
		var err error
		if p.shared {
			s.sharedClaims.Add(1)
			sql, values, err = positional(claimManyStatements[p.jobs[0].Req.mode], claimManyArgs(p.jobs))
		} else {
			sql, values, err = p.jobs[0].Req.statement()
		}
		if err != nil {
			for _, j := range p.jobs {
				j.Finish(err)
			}
			continue
		}
		queued = append(queued, p)
		b.Queue(sql, values...)
	}
	return b, queued
}

// readClaims reads the rows part p's statement claimed into its claims.
func readClaims(br pgx.BatchResults, p claimPart) error {
	r, err := br.Query()
	switch {
	case err != nil:
		if r != nil {
			r.Close()
		}
		return err
	case !p.shared:
		p.jobs[0].Req.rows, err = collectRecords[claimedRecord](r, int(p.jobs[0].Req.target.n))
		return err
	}
	n := 0
	for _, j := range p.jobs {
		n += int(j.Req.target.n)
	}
	rows, err := collectRecords[claimedManyRecord](r, n)
	if err != nil {
		return err
	}
	for _, row := range rows {
		j := p.jobs[row.K-1].Req
		j.rows = append(j.rows, row.claimedRecord)
	}
	return nil
}
