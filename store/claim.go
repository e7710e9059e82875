package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

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
	inSession := 0
	if cj.session != nil {
		inSession = 1
	}
	return claimStatements[cj.mode][inSession].bind(cj.args())
}

// args are the named arguments of the claim as a statement of its own.
func (cj *claimJob) args() pgx.NamedArgs {
	ct := cj.target
	args := pgx.NamedArgs{"entity": ct.entity, "state": ct.state, "n": ct.n, "now": ct.now, "ready_from": ct.readyFrom, "due_from": ct.dueFrom}
	if cj.session != nil {
		args["session"], args["session_token"] = cj.session.SessionID, cj.session.Token
	}
	if cj.mode == broker.PeekLock {
		args["lock"], args["max_delivery"] = interval(ct.lock), ct.maxDelivery
	}
	return args
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

// nextDue returns when t next has a message that nothing announces, after since: a scheduled
// message coming due or a lock running out (and, in a session, the session lock ending, when its
// receivers must learn that it is lost). Zero when there is none. The time may have passed
// already (see nextFunc).
func (s *Postgres) nextDue(ctx context.Context, t broker.Target, since time.Time) (time.Time, error) {
	args := pgx.NamedArgs{"entity": t.Entity.ID, "state": t.SubQueue.State(), "now": since}
	st := nextDue
	if t.Session != nil {
		st = nextDueInSession
		args["session"], args["session_token"] = t.Session.SessionID, t.Session.Token
	}
	sql, values, err := st.bind(args)
	if err != nil {
		return time.Time{}, err
	}
	var next pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, sql, values...).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("look for due messages in %s: %w", t, interpretError(err))
	}
	return timeOrZero(next), nil
}

// deferredStatement is the statement that takes deferred messages of t in mode, with what it
// needs added to args.
func deferredStatement(t broker.Target, mode broker.ReceiveMode, args pgx.NamedArgs) statement {
	if t.Session != nil {
		args["session"] = t.Session.SessionID
	}
	if mode != broker.PeekLock {
		return deleteDeferred
	}
	e := t.Entity
	args["lock"], args["max_delivery"] = interval(e.Props.LockDuration), e.Props.MaxDeliveryCount
	if t.Session != nil {
		args["session_token"] = t.Session.Token
		return receiveDeferredInSession
	}
	return receiveDeferred
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
	sql, values, err := deferredStatement(t, mode, args).bind(args)
	if err != nil {
		return nil, err
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
		rows, err := tx.Query(ctx, sql, values...)
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
		sql, values, err := deadLetterDeferred.bind(moveArgs)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sql, values...)
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
			sql, values, err = claimManyStatements[p.jobs[0].Req.mode].bind(claimManyArgs(p.jobs))
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
	// Each claim gets a slice of exactly its rows (a claimedRecord is about 700 bytes; appending
	// one at a time regrew them).
	counts := make([]int, len(p.jobs))
	for _, row := range rows {
		counts[row.K-1]++
	}
	for i, j := range p.jobs {
		if counts[i] > 0 {
			j.Req.rows = make([]claimedRecord, 0, counts[i])
		}
	}
	for _, row := range rows {
		j := p.jobs[row.K-1].Req
		j.rows = append(j.rows, row.claimedRecord)
	}
	return nil
}
