package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// messageColumnNames are read by scanMessage, in its order; messageColumns qualifies them with
// the table alias m.
const messageColumnNames = `seq, state, visible_at, lock_token, delivery_count, enqueued_at, expires_at, ttl,
	scheduled_at, message_id, correlation_id, session_id, reply_to_session_id, label, to_addr,
	reply_to, partition_key, content_type, user_props, body, dead_letter_reason,
	dead_letter_description, dead_letter_source`

const messageColumns = `m.seq, m.state, m.visible_at, m.lock_token, m.delivery_count, m.enqueued_at, m.expires_at, m.ttl,
	m.scheduled_at, m.message_id, m.correlation_id, m.session_id, m.reply_to_session_id, m.label, m.to_addr,
	m.reply_to, m.partition_key, m.content_type, m.user_props, m.body, m.dead_letter_reason,
	m.dead_letter_description, m.dead_letter_source`

func scanMessage(row pgx.Row) (*Message, error) {
	var (
		m                                         Message
		visible, expires, scheduled               pgtype.Timestamptz
		token                                     pgtype.UUID
		ttl                                       pgtype.Interval
		cid, sid, rts, label, to, replyTo, pk, ct pgtype.Text
		props                                     []byte
		dlReason, dlDescription, dlSource         pgtype.Text
	)
	err := row.Scan(&m.SequenceNumber, &m.State, &visible, &token, &m.DeliveryCount, &m.EnqueuedTime, &expires, &ttl,
		&scheduled, &m.MessageID, &cid, &sid, &rts, &label, &to, &replyTo, &pk, &ct, &props, &m.Body,
		&dlReason, &dlDescription, &dlSource)
	if err != nil {
		return nil, err
	}
	if token.Valid {
		m.LockToken = uuid.UUID(token.Bytes)
		m.LockedUntil = visible.Time.UTC()
	}
	m.EnqueuedTime = m.EnqueuedTime.UTC()
	m.ExpiresAt = expires.Time.UTC()
	if !expires.Valid {
		m.ExpiresAt = time.Time{}
	}
	m.TimeToLive = duration(ttl)
	m.ScheduledEnqueueTime = scheduled.Time.UTC()
	if !scheduled.Valid {
		m.ScheduledEnqueueTime = time.Time{}
	}
	m.CorrelationID, m.SessionID, m.ReplyToSessionID = cid.String, sid.String, rts.String
	m.Label, m.To, m.ReplyTo, m.PartitionKey, m.ContentType = label.String, to.String, replyTo.String, pk.String, ct.String
	m.DeadLetterReason, m.DeadLetterDescription, m.DeadLetterSource = dlReason.String, dlDescription.String, dlSource.String
	if m.UserProperties, err = decodeUserProperties(props); err != nil {
		return nil, err
	}
	return &m, nil
}

// claimCandidatesSQL picks up to $4 receivable messages of one entity and state, locking them with
// SKIP LOCKED so concurrent receivers take different rows. It reads two partial indexes: rows
// receivable since they were written (messages_ready, in sequence order) and rows whose
// scheduled time or lock has passed (messages_due, by that time). Neither index holds messages
// under a valid lock, so the cost of a claim does not grow with the number of locks in flight.
// Of the candidates the lowest sequence numbers win: an expired lock puts a message back at the
// front.
const claimCandidatesSQL = `
WITH due AS MATERIALIZED (
	SELECT seq FROM messages
	WHERE entity_id = $1 AND state = $2 AND visible_at <= $3 AND (expires_at IS NULL OR expires_at > $3 OR state = 2)
	ORDER BY visible_at LIMIT $4 FOR UPDATE SKIP LOCKED
), ready AS MATERIALIZED (
	SELECT seq FROM messages
	WHERE entity_id = $1 AND state = $2 AND visible_at IS NULL AND (expires_at IS NULL OR expires_at > $3 OR state = 2)
	ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED
), picked AS (
	SELECT seq FROM (SELECT seq FROM due UNION ALL SELECT seq FROM ready) c ORDER BY seq LIMIT $4
)`

// peekLockSQL locks the picked messages for $5 and counts the delivery. A message already
// delivered MaxDeliveryCount ($6) times is moved to the dead-letter subqueue instead, and counted
// there; the caller drops those from the result and claims again.
var peekLockSQL = claimCandidatesSQL + peekLockTail

// peekLockTail locks what a claim picked; see peekLockSQL.
var peekLockTail = `, locked AS (
	UPDATE messages m SET ` + lockOrDeadLetter("$3", "$5", "$6") + `
	FROM picked WHERE m.entity_id = $1 AND m.seq = picked.seq
	RETURNING ` + messageColumns + `
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT $1, -count(*), count(*), 0 FROM locked WHERE locked.state = 2 AND $2::smallint <> 2 HAVING count(*) > 0
)
SELECT ` + messageColumnNames + ` FROM locked`

// lockOrDeadLetter is the SET list that locks a message from time now for lock, counting the
// delivery, or, when it has already been delivered max times, moves it to the dead-letter
// subqueue instead (MaxDeliveryCountExceeded). The arguments are parameter placeholders.
func lockOrDeadLetter(now, lock, max string) string {
	over := `m.delivery_count >= ` + max + `::int`
	return `
		state = CASE WHEN ` + over + ` THEN 2 ELSE m.state END,
		lock_token = CASE WHEN ` + over + ` THEN NULL ELSE ` + newLockTokenSQL + ` END,
		visible_at = CASE WHEN ` + over + ` THEN NULL ELSE ` + now + `::timestamptz + ` + lock + `::interval END,
		delivery_count = CASE WHEN ` + over + ` THEN m.delivery_count ELSE m.delivery_count + 1 END,
		dead_letter_reason = CASE WHEN ` + over + ` THEN 'MaxDeliveryCountExceeded' ELSE m.dead_letter_reason END,
		dead_letter_description = CASE WHEN ` + over + `
			THEN 'Message could not be consumed after ' || ` + max + `::int || ' delivery attempts.' ELSE m.dead_letter_description END`
}

// receiveAndDeleteSQL removes the picked messages, counts their removal and returns them.
const receiveAndDeleteSQL = claimCandidatesSQL + receiveAndDeleteTail

// receiveAndDeleteTail removes what a claim picked; see receiveAndDeleteSQL.
const receiveAndDeleteTail = `, removed AS (
	DELETE FROM messages m USING picked WHERE m.entity_id = $1 AND m.seq = picked.seq
	RETURNING ` + messageColumns + `, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT $1, -count(*) FILTER (WHERE state <> 2), -count(*) FILTER (WHERE state = 2), -sum(size)
	FROM removed HAVING count(*) > 0
)
SELECT ` + messageColumnNames + ` FROM removed`

// noDeliveryLimit is passed as MaxDeliveryCount for the dead-letter subqueue, whose messages are
// never dead-lettered again.
const noDeliveryLimit = 1<<31 - 1

// claim takes up to n messages of e's subqueue now, without waiting.
func (s *Postgres) claim(ctx context.Context, e *Entity, sq SubQueue, mode ReceiveMode, n int) ([]*Message, error) {
	state := sq.state()
	for {
		msgs, err := s.claimOnce(ctx, e, sq, mode, n)
		if err != nil {
			return nil, fmt.Errorf("receive from %s: %w", e.Path, interpretError(err))
		}
		delivered := delivered(msgs, state, mode)
		// Every candidate was dead-lettered for too many deliveries: look again, the entity may
		// hold more.
		if len(delivered) == 0 && len(msgs) > 0 {
			continue
		}
		return delivered, nil
	}
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

// querier runs a query on the pool or inside a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// claimOnce runs one claim statement. An entity that forwards its dead letters runs it in a
// transaction with the move of any message it dead-lettered, so none waits in its dead-letter
// subqueue; every other entity claims in one statement.
func (s *Postgres) claimOnce(ctx context.Context, e *Entity, sq SubQueue, mode ReceiveMode, n int) ([]*Message, error) {
	maxDelivery := int64(e.Props.MaxDeliveryCount)
	if sq == SubQueueDeadLetter {
		maxDelivery = noDeliveryLimit
	}
	now := s.now()
	run := func(db querier) ([]*Message, error) {
		var rows pgx.Rows
		var err error
		if mode == ReceiveAndDelete {
			rows, err = db.Query(ctx, receiveAndDeleteSQL, e.ID, sq.state(), now, n)
		} else {
			rows, err = db.Query(ctx, peekLockSQL, e.ID, sq.state(), now, n, interval(e.Props.LockDuration), maxDelivery)
		}
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Message, error) { return scanMessage(r) })
	}
	if mode == ReceiveAndDelete || sq != SubQueueMain || e.Props.ForwardDeadLetteredMessagesTo == "" {
		return run(s.pool)
	}
	var msgs []*Message
	var woken []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if msgs, err = run(tx); err != nil {
			return err
		}
		for _, m := range msgs {
			if m.State == StateDeadLetter {
				woken, err = s.transferDeadLetters(ctx, tx, e)
				return err
			}
		}
		return nil
	})
	s.announce(woken)
	return msgs, err
}

// announce wakes the receivers of entities that just got messages, here and on other gateways.
func (s *Postgres) announce(ids []int64) {
	if len(ids) == 0 {
		return
	}
	for _, id := range ids {
		s.hub.wake(id)
	}
	s.listener.announceMessages(ids)
}

// Receive takes the next message, waiting up to wait. See Store.
func (s *Postgres) Receive(ctx context.Context, e *Entity, sq SubQueue, mode ReceiveMode, wait time.Duration) (*Message, error) {
	msgs, err := s.ReceiveBatch(ctx, e, sq, mode, 1, wait)
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	return msgs[0], nil
}

// MaxReceiveBatch bounds the messages one ReceiveBatch takes.
const MaxReceiveBatch = 1000

// ReceiveBatch takes up to n messages, waiting up to wait for the first. See Store.
func (s *Postgres) ReceiveBatch(ctx context.Context, e *Entity, sq SubQueue, mode ReceiveMode, n int, wait time.Duration) ([]*Message, error) {
	if err := checkReceivable(e, sq); err != nil {
		return nil, err
	}
	if n < 1 || n > MaxReceiveBatch {
		return nil, badRequest("A receive may take between 1 and %d messages.", MaxReceiveBatch)
	}
	s.touch(e)
	var msgs []*Message
	err := s.longPoll(ctx, e.ID, wait, func() (bool, error) {
		var err error
		msgs, err = s.claim(ctx, e, sq, mode, n)
		return len(msgs) > 0, err
	})
	return msgs, err
}

// longPoll calls try until it reports done or fails, waiting between tries, up to wait in all,
// for a wake-up of entity id (a send here, or another gateway's NOTIFY) or the poll interval,
// which is how scheduled messages and expired locks, which announce nothing, are noticed. The
// waiter registers before each try, so a send between the try and the wait is not missed.
func (s *Postgres) longPoll(ctx context.Context, id int64, wait time.Duration, try func() (bool, error)) error {
	deadline := time.Now().Add(wait)
	for {
		woken, release := s.hub.wait(id)
		done, err := try()
		if err != nil || done {
			release()
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			release()
			return nil
		}
		timer := time.NewTimer(min(left, s.opts.PollInterval))
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		release()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// checkReceivable refuses receives the entity does not allow.
func checkReceivable(e *Entity, sq SubQueue) error {
	switch {
	case e.Kind == KindTopic:
		return badRequest("Messages cannot be received from topic '%s'; receive them from one of its subscriptions.", e.Path)
	case e.Props.Status == StatusDisabled || e.Props.Status == StatusReceiveDisabled:
		return &Error{Code: CodeForbidden, Message: fmt.Sprintf(
			"SubCode=40301. The messaging entity '%s' is disabled for receiving (status %s).", e.Path, e.Props.Status)}
	case e.Props.RequiresSession && sq == SubQueueMain:
		return badRequest("The entity '%s' requires sessions: accept a session and receive from it (POST %s/sessions/$accept); Service Bus REST cannot receive from session entities.", e.Path, e.Path)
	}
	return nil
}

// settleFilter matches the message holding lock token $2 in entity $1 while the lock is valid at
// $3, in the dead-letter subqueue when $4 is the dead-letter state and in the entity proper
// (active or deferred) otherwise, if its sequence number or message id is $5.
const settleFilter = `entity_id = $1 AND lock_token = $2 AND visible_at > $3 AND (state = 2) = ($4::smallint = 2)
	AND (message_id = $5 OR seq::text = $5){session}`

// Settlement statements, by operation, as text with {session} where settleSQL puts the session
// lock check.
const (
	completeSQL = `WITH removed AS (
		DELETE FROM messages WHERE ` + settleFilter + ` RETURNING entity_id, state, size, visible_at
	), counted AS (
		INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
		SELECT entity_id, -count(*) FILTER (WHERE state <> 2), -count(*) FILTER (WHERE state = 2), -sum(size)
		FROM removed GROUP BY entity_id
	)
	SELECT visible_at FROM removed`
	abandonSQL   = `UPDATE messages SET lock_token = NULL, visible_at = NULL WHERE ` + settleFilter + ` RETURNING $3::timestamptz`
	renewLockSQL = `UPDATE messages SET visible_at = $3 + $6::interval WHERE ` + settleFilter + ` RETURNING visible_at`
	// A deferred message leaves the head of the queue; it is received again only by its sequence
	// number. Abandoning it later keeps it deferred (the update above leaves state alone).
	deferSQL = `UPDATE messages SET state = 1, lock_token = NULL, visible_at = NULL
		WHERE ` + settleFilter + ` AND state <> 2 RETURNING $3::timestamptz`
	deadLetterSQL = `WITH moved AS (
		UPDATE messages SET state = 2, lock_token = NULL, visible_at = NULL,
			dead_letter_reason = $6, dead_letter_description = $7
		WHERE ` + settleFilter + ` AND state <> 2 RETURNING entity_id
	), counted AS (
		INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
		SELECT entity_id, -count(*), count(*), 0 FROM moved GROUP BY entity_id
	)
	SELECT $3::timestamptz FROM moved`
)

// settleStatements holds each settlement's SQL without and with a session lock check, and how
// many parameters the operation passes before the session's two.
var settleStatements = func() map[Settlement][2]string {
	m := make(map[Settlement][2]string)
	for op, v := range map[Settlement]struct {
		sql    string
		params int
	}{Complete: {completeSQL, 5}, Abandon: {abandonSQL, 5}, RenewLock: {renewLockSQL, 6}, Defer: {deferSQL, 5}, DeadLetter: {deadLetterSQL, 7}} {
		sid, tok := fmt.Sprintf("$%d", v.params+1), fmt.Sprintf("$%d", v.params+2)
		// In a session the message must belong to it and the session lock must still be held.
		clause := ` AND session_id = ` + sid + ` AND EXISTS (SELECT 1 FROM sessions s WHERE s.entity_id = $1
			AND s.session_id = ` + sid + ` AND s.lock_token = ` + tok + `::uuid AND s.locked_until > $3)`
		m[op] = [2]string{strings.ReplaceAll(v.sql, "{session}", ""), strings.ReplaceAll(v.sql, "{session}", clause)}
	}
	return m
}()

// Settle completes, abandons, renews or defers a lock. See Store.
func (s *Postgres) Settle(ctx context.Context, e *Entity, sq SubQueue, op Settlement, id string, token uuid.UUID) (time.Time, error) {
	return s.settle(ctx, e, sq, nil, op, id, token, "", "")
}

// SettleSession is Settle for a message received in an accepted session: the session lock must
// still be held. Errors: ErrLockLost (the message lock or the session lock is gone).
func (s *Postgres) SettleSession(ctx context.Context, e *Entity, sl SessionLock, op Settlement, id string, token uuid.UUID) (time.Time, error) {
	return s.settle(ctx, e, SubQueueMain, &sl, op, id, token, "", "")
}

// DeadLetter moves a locked message to the dead-letter subqueue with a reason and description.
// See Store.
func (s *Postgres) DeadLetter(ctx context.Context, e *Entity, id string, token uuid.UUID, reason, description string) error {
	return s.deadLetterMessage(ctx, e, nil, id, token, reason, description)
}

// DeadLetterSession is DeadLetter for a message received in an accepted session.
func (s *Postgres) DeadLetterSession(ctx context.Context, e *Entity, sl SessionLock, id string, token uuid.UUID, reason, description string) error {
	return s.deadLetterMessage(ctx, e, &sl, id, token, reason, description)
}

func (s *Postgres) deadLetterMessage(ctx context.Context, e *Entity, sl *SessionLock, id string, token uuid.UUID, reason, description string) error {
	if !validText(reason) || !validText(description) || len(reason) > MaxPropertySize || len(description) > MaxPropertySize {
		return badRequest("The dead-letter reason and description must be UTF-8 text of at most %d bytes.", MaxPropertySize)
	}
	_, err := s.settle(ctx, e, SubQueueMain, sl, DeadLetter, id, token, reason, description)
	return err
}

// SettleMany settles each request on its own. See Store.
func (s *Postgres) SettleMany(ctx context.Context, e *Entity, sq SubQueue, sl *SessionLock, reqs []SettleRequest) []SettleResult {
	out := make([]SettleResult, len(reqs))
	for i, r := range reqs {
		id := r.ID
		if id == "" {
			id = strconv.FormatInt(lockTokenSeq(r.Token), 10)
		}
		if r.Op == DeadLetter {
			if sq != SubQueueMain {
				out[i].Err = badRequest("A dead-lettered message cannot be dead-lettered again.")
				continue
			}
			out[i].Err = s.deadLetterMessage(ctx, e, sl, id, r.Token, r.Reason, r.Description)
			continue
		}
		out[i].LockedUntil, out[i].Err = s.settle(ctx, e, sq, sl, r.Op, id, r.Token, "", "")
	}
	return out
}

func (s *Postgres) settle(ctx context.Context, e *Entity, sq SubQueue, sl *SessionLock, op Settlement, id string, token uuid.UUID, reason, description string) (time.Time, error) {
	statements, ok := settleStatements[op]
	if !ok {
		return time.Time{}, fmt.Errorf("unknown settlement %d", op)
	}
	if sl == nil && sq == SubQueueMain && e.Props.RequiresSession {
		return time.Time{}, badRequest("Messages of '%s' are settled in their session: use the session's settlement path.", e.Path)
	}
	if op == Complete && sl == nil {
		// Completions are the most frequent settlement: concurrent ones share one statement.
		if err := s.complete(ctx, e, sq, id, token); err != nil {
			return time.Time{}, err
		}
		s.touch(e)
		return time.Time{}, nil
	}
	args := []any{e.ID, token, s.now(), sq.state(), id}
	switch op {
	case RenewLock:
		args = append(args, interval(e.Props.LockDuration))
	case DeadLetter:
		args = append(args, reason, description)
	}
	sql := statements[0]
	if sl != nil {
		sql = statements[1]
		args = append(args, sl.SessionID, sl.Token)
	}
	var until time.Time
	var err error
	var woken []int64
	if op == DeadLetter && e.Props.ForwardDeadLetteredMessagesTo != "" {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, sql, args...).Scan(&until); err != nil {
				return err
			}
			woken, err = s.transferDeadLetters(ctx, tx, e)
			return err
		})
		s.announce(woken)
	} else {
		err = s.pool.QueryRow(ctx, sql, args...).Scan(&until)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, lockLost(e, token, id)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("settle message %s on %s: %w", truncate(id), e.Path, interpretError(err))
	}
	s.touch(e)
	if op == Abandon {
		s.announce([]int64{e.ID})
	}
	return until.UTC(), nil
}
