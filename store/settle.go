package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Settlement is concurrent requests coalesced, like sends: each writer takes every settlement
// waiting and runs one statement per kind (complete, abandon, …) for all of them, each naming its
// message by the primary key the lock token carries. A request that asks for many (a batch
// settlement) is settled in the same statements, each lock on its own: a lost lock fails only
// its own result.

// settleItem is one lock to settle, with what its statement needs to know of its target, and
// where its result goes (in its job, which its caller reads only once the job is done).
type settleItem struct {
	t   Target
	req SettleRequest
	res *SettleResult
}

// settleJob is one Settle call waiting for its statements.
type settleJob struct {
	items   []settleItem
	results []SettleResult
}

// settleBatchSize bounds the locks one round of statements settles.
const settleBatchSize = 1000

func newSettler(s *Postgres) *batcher[*settleJob] {
	return newBatcher(s.opts.SendWriters, settleBatchSize, func(j *settleJob) int { return len(j.items) }, s.writeSettles)
}

// Settle settles each request on its own. See Store.
func (s *Postgres) Settle(ctx context.Context, t Target, reqs []SettleRequest) []SettleResult {
	results := make([]SettleResult, len(reqs))
	if err := checkSettleTarget(t); err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	job := &settleJob{results: make([]SettleResult, len(reqs))}
	var index []int // of each item in results
	for i, r := range reqs {
		if err := checkSettleRequest(t, r); err != nil {
			results[i].Err = err
			continue
		}
		if !validText(r.ID) {
			// No message has this MessageId (they are UTF-8 text without NUL, which is all
			// PostgreSQL's text holds): its lock is not held. Sent to the database, it would fail
			// the statement of every settlement coalesced with it.
			r.ID = ""
			results[i].Err = s.lockLost(t, r)
			continue
		}
		job.items = append(job.items, settleItem{t: t, req: r, res: &job.results[len(job.items)]})
		index = append(index, i)
	}
	if len(job.items) == 0 {
		return results
	}
	if err := s.settler.submit(ctx, job); err != nil {
		// The settlements may or may not be made; whoever asked has gone, or the gateway stops.
		for _, i := range index {
			results[i].Err = err
		}
		return results
	}
	for k, i := range index {
		results[i] = job.results[k]
	}
	s.touch(t.Entity)
	return results
}

// checkSettleTarget refuses settlements the target cannot take.
func checkSettleTarget(t Target) error {
	e := t.Entity
	switch {
	case e.Kind == KindTopic:
		return BadRequest("Messages are not settled on topic '%s'; settle them on the subscription they were received from.", e.Path)
	case t.Session == nil && t.SubQueue == SubQueueMain && e.Props.RequiresSession:
		return BadRequest("Messages of '%s' are settled in their session: use the session's settlement path.", e.Path)
	case t.Session != nil && (!e.Props.RequiresSession || t.SubQueue != SubQueueMain):
		return BadRequest("'%s' has no sessions to settle messages in.", t)
	}
	return checkSessionLockID(e, t.Session)
}

// checkSettleRequest refuses a request that cannot be right whatever the lock's state.
func checkSettleRequest(t Target, r SettleRequest) error {
	switch r.Op {
	case Complete, Abandon, RenewLock, Defer, Release:
		// A dead letter cannot be deferred: its lock simply is not one that can be, which the
		// statement answers as a lost lock, as the service does.
	case DeadLetter:
		if t.SubQueue == SubQueueDeadLetter {
			return BadRequest("A dead-lettered message cannot be dead-lettered again.")
		}
		if !validText(r.Reason) || !validText(r.Description) || len(r.Reason) > MaxPropertySize || len(r.Description) > MaxPropertySize {
			return BadRequest("The dead-letter reason and description must be UTF-8 text of at most %d bytes.", MaxPropertySize)
		}
	default:
		return BadRequest("Unknown settlement %d.", r.Op)
	}
	return nil
}

// The settlement statements take one array per field of the requests (unnest keeps them in
// step); settleInput names them and settleMatchSQL is the lock check every one of them makes:
// the message its token names, still locked under that token, in the right subqueue, with the
// sequence number or MessageId the client gave (if any), and in the session whose lock the
// client holds (if any).
const (
	settleInputSQL = `
WITH r AS (
	SELECT * FROM unnest(@entity::bigint[], @seq::bigint[], @token::uuid[], @state::smallint[], @id::text[],
		@session::text[], @session_token::uuid[], @max_delivery::int[], @lock_us::bigint[], @reason::text[], @description::text[])
		WITH ORDINALITY AS r(entity, seq, token, state, id, session, session_token, max_delivery, lock_us, reason, description, ord)
)`
	settleMatchSQL = `m.entity_id = r.entity AND m.seq = r.seq AND m.lock_token = r.token AND m.visible_at > @now
		AND (m.state = ` + sqlDeadLetter + `) = (r.state = ` + sqlDeadLetter + `)
		AND (r.id = '' OR m.message_id = r.id OR m.seq::text = r.id)
		AND (r.session = '' OR m.session_id = r.session AND EXISTS (SELECT 1 FROM sessions s
			WHERE s.entity_id = r.entity AND s.session_id = r.session AND s.lock_token = r.session_token AND s.locked_until > @now))`
)

// settleStatements are the statements by settlement. Each returns, for every request it
// satisfied, its ord (1-based), the message's entity, session, state after, MessageId and lock
// end.
var settleStatements = map[Settlement]string{
	Complete: settleInputSQL + `, done AS (
	DELETE FROM messages m USING r WHERE ` + settleMatchSQL + `
	RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, m.size, NULL::timestamptz AS until
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `), -count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), -sum(size)
	FROM done GROUP BY entity_id
)
SELECT ord, entity_id, session_id, state, message_id, until, false AS expired FROM done`,

	// An abandon releases the lock; the message is receivable again at once, at the front (due
	// now: claims look at the due range from where they last looked, not at the ready range
	// below their cursor). If that delivery was the last MaxDeliveryCount allows, the message
	// goes to the dead-letter subqueue now, not at the next receive (which may never come). A
	// deferred message stays deferred.
	Abandon: settleInputSQL + `, done AS (
	UPDATE messages m SET lock_token = NULL,
		visible_at = CASE WHEN ` + abandonedLastSQL + ` THEN NULL ELSE @now::timestamptz END,
		state = CASE WHEN ` + abandonedLastSQL + ` THEN ` + sqlDeadLetter + ` ELSE m.state END,
		dead_letter_reason = CASE WHEN ` + abandonedLastSQL + ` THEN '` + ReasonMaxDeliveryCount + `' ELSE m.dead_letter_reason END,
		dead_letter_description = CASE WHEN ` + abandonedLastSQL + `
			THEN 'Message could not be consumed after ' || r.max_delivery || ' delivery attempts.' ELSE m.dead_letter_description END
	FROM r WHERE ` + settleMatchSQL + `
	RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, r.state AS was, NULL::timestamptz AS until
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM done WHERE state = ` + sqlDeadLetter + ` AND was <> ` + sqlDeadLetter + `
	GROUP BY entity_id
)
SELECT ord, entity_id, session_id, state, message_id, until, false AS expired FROM done`,

	// A message whose time to live ended while it was locked stays with its receiver until the
	// lock ends (the expiry document: expiration does not affect a locked message, and takes
	// effect when the lock expires or is abandoned), but its lock is not renewed: renewals would
	// otherwise keep an expired message out of the expiry sweep and the dead-letter queue forever.
	RenewLock: settleInputSQL + `
UPDATE messages m SET visible_at = CASE WHEN ` + expiredSQL + ` THEN m.visible_at
	ELSE @now::timestamptz + r.lock_us * interval '1 microsecond' END
FROM r WHERE ` + settleMatchSQL + `
RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, m.visible_at AS until, ` + expiredSQL + ` AS expired`,

	// A deferred message leaves the head of the queue; it is received again only by its
	// sequence number.
	Defer: settleInputSQL + `
UPDATE messages m SET state = ` + sqlDeferred + `, lock_token = NULL, visible_at = NULL
FROM r WHERE ` + settleMatchSQL + ` AND m.state <> ` + sqlDeadLetter + `
RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, NULL::timestamptz AS until, false AS expired`,

	// A release undoes the delivery: the lock ends, the message is receivable again at once,
	// and the delivery the claim counted is taken back, so it never dead-letters a message.
	Release: settleInputSQL + `
UPDATE messages m SET lock_token = NULL, visible_at = @now::timestamptz, delivery_count = greatest(m.delivery_count - 1, 0)
FROM r WHERE ` + settleMatchSQL + `
RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, NULL::timestamptz AS until, false AS expired`,

	DeadLetter: settleInputSQL + `, done AS (
	UPDATE messages m SET state = ` + sqlDeadLetter + `, lock_token = NULL, visible_at = NULL,
		dead_letter_reason = r.reason, dead_letter_description = r.description
	FROM r WHERE ` + settleMatchSQL + ` AND m.state <> ` + sqlDeadLetter + `
	RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, NULL::timestamptz AS until
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM done GROUP BY entity_id
)
SELECT ord, entity_id, session_id, state, message_id, until, false AS expired FROM done`,
}

// expiredSQL: m's time to live has ended (dead letters never expire).
const expiredSQL = `coalesce(m.state <> ` + sqlDeadLetter + ` AND m.expires_at <= @now, false)`

// abandonedLastSQL: the abandoned delivery of m was the last its entity allows.
const abandonedLastSQL = `(m.state <> ` + sqlDeadLetter + ` AND m.delivery_count >= r.max_delivery)`

// settleArgs are the arrays of one settlement statement, in types pgx encodes without
// reflection: "" is no session, a lock duration is in microseconds.
type settleArgs struct {
	entity, seq, lockMicros []int64
	token, sessionToken     [][16]byte
	state                   []int16
	id, session             []string
	reason, description     []string
	maxDelivery             []int32
	items                   []settleItem
	forwards                map[int64]*Entity // entities that forward their dead letters
}

func (a *settleArgs) add(it settleItem) {
	e := it.t.Entity
	a.items = append(a.items, it)
	a.entity = append(a.entity, e.ID)
	a.seq = append(a.seq, lockTokenSeq(it.req.Token))
	a.token = append(a.token, it.req.Token)
	a.state = append(a.state, int16(it.t.SubQueue.state()))
	a.id = append(a.id, it.req.ID)
	var session string
	var sessionToken [16]byte
	if it.t.Session != nil {
		session, sessionToken = it.t.Session.SessionID, it.t.Session.Token
	}
	a.session = append(a.session, session)
	a.sessionToken = append(a.sessionToken, sessionToken)
	a.maxDelivery = append(a.maxDelivery, e.Props.MaxDeliveryCount)
	a.lockMicros = append(a.lockMicros, e.Props.LockDuration.Microseconds())
	a.reason = append(a.reason, it.req.Reason)
	a.description = append(a.description, it.req.Description)
	if e.Props.ForwardDeadLetteredMessagesTo != "" && it.t.SubQueue == SubQueueMain {
		if a.forwards == nil {
			a.forwards = make(map[int64]*Entity)
		}
		a.forwards[e.ID] = e
	}
}

func (a *settleArgs) named(now time.Time) pgx.NamedArgs {
	return pgx.NamedArgs{"entity": a.entity, "seq": a.seq, "token": a.token, "state": a.state, "id": a.id,
		"session": a.session, "session_token": a.sessionToken, "max_delivery": a.maxDelivery, "lock_us": a.lockMicros,
		"reason": a.reason, "description": a.description, "now": now}
}

// writeSettles runs one statement per kind of settlement for every job waiting, and answers
// each request.
func (s *Postgres) writeSettles(jobs []*job[*settleJob]) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	byOp := make(map[Settlement][]settleItem)
	var ops []Settlement // in the order first seen
	for _, j := range jobs {
		for _, it := range j.req.items {
			if byOp[it.req.Op] == nil {
				ops = append(ops, it.req.Op)
			}
			byOp[it.req.Op] = append(byOp[it.req.Op], it)
		}
	}
	for _, op := range ops {
		err := s.settleItems(ctx, op, byOp[op])
		if err == nil || len(jobs) == 1 || errors.Is(err, ErrUnavailable) {
			continue
		}
		// One request's settlements failed the shared statement (as sends do, writeSends): each
		// request's are made alone, so that the others' are not failed with them.
		for _, j := range jobs {
			var mine []settleItem
			for _, it := range j.req.items {
				if it.req.Op == op {
					mine = append(mine, it)
				}
			}
			if len(mine) > 0 {
				_ = s.settleItems(ctx, op, mine)
			}
		}
	}
	for _, j := range jobs {
		j.finish(nil)
	}
}

// settleItems makes the settlements items of kind op in one statement and fills their results;
// it returns the statement's error, which is each item's too.
func (s *Postgres) settleItems(ctx context.Context, op Settlement, items []settleItem) error {
	for _, it := range items {
		*it.res = SettleResult{} // a request's earlier round may have failed
	}
	// Each statement locks its rows in primary-key order (its plans join the sorted input
	// first), the order every other settlement locks them in and a purge of a large queue
	// deletes them in, so that they wait for each other rather than deadlock. The order is the
	// planner's, not a guarantee (a purge of a few rows scans the table), so a deadlock is still
	// retried (settleOp).
	slices.SortStableFunc(items, func(x, y settleItem) int {
		return cmp.Or(cmp.Compare(x.t.Entity.ID, y.t.Entity.ID), cmp.Compare(lockTokenSeq(x.req.Token), lockTokenSeq(y.req.Token)))
	})
	a := &settleArgs{}
	for _, it := range items {
		a.add(it)
	}
	woken, err := s.settleOp(ctx, op, a)
	if err != nil {
		for _, it := range a.items {
			it.res.Err = fmt.Errorf("%s message %d on %s: %w", op, lockTokenSeq(it.req.Token), it.t, err)
		}
		return err
	}
	// Receivers waiting for what the settlements made available are woken before the settlers
	// hear that they are done.
	s.announce(woken...)
	return nil
}

// settleOp runs the statement of op for the requests in a, filling their results. It returns
// the wake-ups the settlements call for: an abandoned message is receivable again, a
// dead-lettered one is in its dead-letter subqueue.
func (s *Postgres) settleOp(ctx context.Context, op Settlement, a *settleArgs) ([]wakeTarget, error) {
	var woken []wakeTarget
	found := make([]bool, len(a.items))
	ids := make([]string, len(a.items)) // the MessageId of the message each found request settled
	// What an attempt ended in a conflict had recorded of its rows is forgotten.
	reset := func() {
		woken = woken[:0]
		for i, it := range a.items {
			found[i] = false
			*it.res = SettleResult{}
		}
	}
	run := func(q querier) error {
		// Each attempt looks at its own time: a retry comes a deadlock_timeout later.
		sql, values, err := positional(settleStatements[op], a.named(s.now()))
		if err != nil {
			return err
		}
		rows, err := q.Query(ctx, sql, values...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ord, entity int64
			var session pgtype.Text
			var state State
			var messageID string
			var until pgtype.Timestamptz
			var expired bool
			if err := rows.Scan(&ord, &entity, &session, &state, &messageID, &until, &expired); err != nil {
				return err
			}
			i := int(ord - 1)
			found[i], ids[i] = true, messageID
			a.items[i].res.LockedUntil = timeOrZero(until)
			if expired {
				it := a.items[i]
				it.res.Err = &Error{Code: CodeLockLost, Message: fmt.Sprintf(
					"The lock of message %d in '%s' is not renewed: the message's time to live ended while it was locked. "+
						"It stays locked until %s; complete or abandon it before then.",
					lockTokenSeq(it.req.Token), it.t.Entity.Path, timeOrZero(until).Format(time.RFC3339))}
			}
			switch {
			case (op == Abandon || op == Release) && state != StateDeadLetter:
				woken = append(woken, wakeTarget{entity: entity, session: session.String})
			case op == DeadLetter, op == Abandon:
				woken = append(woken, wakeTarget{entity: entity})
			}
		}
		return rows.Err()
	}
	err := s.retryConflicts(ctx, reset, func() error {
		if (op == Abandon || op == DeadLetter) && len(a.forwards) > 0 {
			// Dead letters of an entity that forwards them move on in the same transaction.
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				if err := run(tx); err != nil {
					return err
				}
				// In one order, so that two of these transactions do not deadlock.
				for _, id := range slices.Sorted(maps.Keys(a.forwards)) {
					targets, err := s.transferDeadLetters(ctx, tx, a.forwards[id])
					if err != nil {
						return err
					}
					woken = append(woken, targets...)
				}
				return nil
			})
		}
		return run(s.hotPool())
	})
	if err != nil {
		return nil, interpretError(err)
	}
	sameLockOnce(op, a.items, found, ids)
	for i, it := range a.items {
		if !found[i] {
			it.res.Err = s.lockLost(it.t, it.req)
		}
	}
	return woken, nil
}

// sameLockOnce gives the requests of one statement that name the same lock (a batch settlement
// may name it twice) the answers they would have had one after another. They meet one row,
// which PostgreSQL reports for one of them, whichever: a renewal renews it for each of them;
// any other settlement is made by the first of them, and the lock is gone for the others.
// Requests name the same lock when everything the statement matches on or writes is the same
// (entity, subqueue, session lock, lock token, a dead-lettering's reason and description) and
// each one's id, if it has one, is the message's: its sequence number or its MessageId (ids,
// what the statement returned for the request it reported). A request with another id names no
// lock and keeps its lock lost. items are sorted by entity and sequence number, the client's
// order kept among equal ones.
func sameLockOnce(op Settlement, items []settleItem, found []bool, ids []string) {
	type lock struct {
		entity  int64
		state   State
		session SessionLock
		token   uuid.UUID
		// A dead-lettering's reason and description are written: the request whose values
		// PostgreSQL wrote is the one that made it.
		reason, description string
	}
	key := func(it settleItem) lock {
		k := lock{entity: it.t.Entity.ID, state: it.t.SubQueue.state(), token: it.req.Token,
			reason: it.req.Reason, description: it.req.Description}
		if it.t.Session != nil {
			k.session = *it.t.Session
		}
		return k
	}
	// Only a statement where two requests share a sort key can have such a pair.
	shared := false
	for i := 1; i < len(items) && !shared; i++ {
		shared = items[i].t.Entity.ID == items[i-1].t.Entity.ID && lockTokenSeq(items[i].req.Token) == lockTokenSeq(items[i-1].req.Token)
	}
	if !shared {
		return
	}
	type made struct {
		res       SettleResult
		messageID string
	}
	settled := make(map[lock]made)
	for i, it := range items {
		if found[i] {
			settled[key(it)] = made{*it.res, ids[i]}
		}
	}
	seen := make(map[lock]bool)
	for i, it := range items {
		m, ok := settled[key(it)]
		id := it.req.ID
		if !ok || id != "" && id != m.messageID && id != strconv.FormatInt(lockTokenSeq(it.req.Token), 10) {
			continue
		}
		found[i] = op == RenewLock || !seen[key(it)]
		seen[key(it)] = true
		if found[i] {
			*it.res = m.res
		} else {
			*it.res = SettleResult{}
		}
	}
}

// lockLost is the error of a settlement whose lock is not held.
func (s *Postgres) lockLost(t Target, r SettleRequest) error {
	id := r.ID
	if id == "" {
		id = strconv.FormatInt(lockTokenSeq(r.Token), 10)
	}
	return &Error{Code: CodeLockLost, Message: fmt.Sprintf(
		"The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue. Reference: %s, entity '%s', message '%s'.",
		r.Token, t.Entity.Path, Clip(id))}
}

// String names a settlement in errors.
func (op Settlement) String() string {
	switch op {
	case Complete:
		return "complete"
	case Abandon:
		return "abandon"
	case RenewLock:
		return "renew the lock of"
	case Defer:
		return "defer"
	case DeadLetter:
		return "dead-letter"
	case Release:
		return "release"
	}
	return "settle"
}
