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
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

// Settlement is concurrent requests coalesced, like sends: each writer takes every settlement
// waiting and runs one statement per kind (complete, abandon, …) for all of them, each naming its
// message by the primary key the lock token carries. A request that asks for many (a batch
// settlement) is settled in the same statements, each lock on its own: a lost lock fails only
// its own result.

// settleItem is one lock to settle, with what its statement needs to know of its target, and
// where its result goes (in its job, which its caller reads only once the job is done).
type settleItem struct {
	t   broker.Target
	req broker.SettleRequest
	res *broker.SettleResult
}

// settleJob is one Settle call waiting for its statements.
type settleJob struct {
	items   []settleItem
	results []broker.SettleResult
}

// settleBatchSize bounds the locks one round of statements settles.
const settleBatchSize = 1000

func newSettler(s *Postgres) *engine.Batcher[*settleJob] {
	return engine.NewBatcher(s.opts.SendWriters, settleBatchSize, func(j *settleJob) int { return len(j.items) }, s.writeSettles)
}

// Settle settles each request on its own. See Store.
func (s *Postgres) Settle(ctx context.Context, t broker.Target, reqs []broker.SettleRequest) []broker.SettleResult {
	results := make([]broker.SettleResult, len(reqs))
	if err := broker.CheckSettleTarget(t); err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	job := &settleJob{results: make([]broker.SettleResult, len(reqs))}
	var index []int // of each item in results
	for i, r := range reqs {
		if err := broker.CheckSettleRequest(t, r); err != nil {
			results[i].Err = err
			continue
		}
		if !broker.ValidText(r.ID) {
			// No message has this MessageId (they are UTF-8 text without NUL, which is all
			// PostgreSQL's text holds): its lock is not held. Sent to the database, it would fail
			// the statement of every settlement coalesced with it.
			r.ID = ""
			results[i].Err = lockLost(t, r)
			continue
		}
		job.items = append(job.items, settleItem{t: t, req: r, res: &job.results[len(job.items)]})
		index = append(index, i)
	}
	if len(job.items) == 0 {
		return results
	}
	if err := s.settler.Submit(ctx, job); err != nil {
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

// settleArgs are the arrays of one settlement statement, in types pgx encodes without
// reflection: a lock duration is in microseconds. props and size are those of a modifying
// statement, filled by modifyProperties.
type settleArgs struct {
	entity, seq, lockMicros []int64
	token, sessionToken     [][16]byte
	state                   []int16
	id, session             []string
	inSession               []bool
	reason, description     []string
	maxDelivery             []int32
	props                   [][]byte
	size                    []int32
	items                   []settleItem
	forwards                map[int64]*broker.Entity // entities that forward their dead letters
	// modify: the requests modify properties, and run modifyStatements.
	modify bool
}

// newSettleArgs makes the arrays of a statement for n requests.
func newSettleArgs(n int, modify bool) *settleArgs {
	return &settleArgs{modify: modify, items: make([]settleItem, 0, n),
		entity: make([]int64, 0, n), seq: make([]int64, 0, n), lockMicros: make([]int64, 0, n),
		token: make([][16]byte, 0, n), sessionToken: make([][16]byte, 0, n), state: make([]int16, 0, n),
		id: make([]string, 0, n), session: make([]string, 0, n), inSession: make([]bool, 0, n),
		reason: make([]string, 0, n), description: make([]string, 0, n), maxDelivery: make([]int32, 0, n)}
}

func (a *settleArgs) add(it settleItem) {
	e := it.t.Entity
	a.items = append(a.items, it)
	a.entity = append(a.entity, e.ID)
	a.seq = append(a.seq, lockTokenSeq(it.req.Token))
	a.token = append(a.token, it.req.Token)
	a.state = append(a.state, int16(it.t.SubQueue.State()))
	a.id = append(a.id, it.req.ID)
	var session string
	var sessionToken [16]byte
	if it.t.Session != nil {
		session, sessionToken = it.t.Session.SessionID, it.t.Session.Token
	}
	a.session = append(a.session, session)
	a.inSession = append(a.inSession, it.t.Session != nil)
	a.sessionToken = append(a.sessionToken, sessionToken)
	a.maxDelivery = append(a.maxDelivery, e.Props.MaxDeliveryCount)
	a.lockMicros = append(a.lockMicros, e.Props.LockDuration.Microseconds())
	a.reason = append(a.reason, it.req.Reason)
	a.description = append(a.description, it.req.Description)
	if e.Props.ForwardDeadLetteredMessagesTo != "" && it.t.SubQueue == broker.SubQueueMain {
		if a.forwards == nil {
			a.forwards = make(map[int64]*broker.Entity)
		}
		a.forwards[e.ID] = e
	}
}

func (a *settleArgs) named(now time.Time) pgx.NamedArgs {
	args := pgx.NamedArgs{"entity": a.entity, "seq": a.seq, "token": a.token, "state": a.state, "id": a.id,
		"session": a.session, "in_session": a.inSession, "session_token": a.sessionToken, "max_delivery": a.maxDelivery,
		"lock_us": a.lockMicros, "reason": a.reason, "description": a.description, "now": now}
	if a.modify {
		args["props"], args["size"] = a.props, a.size
	}
	return args
}

// writeSettles runs one statement per kind of settlement for every job waiting, and answers
// each request.
func (s *Postgres) writeSettles(jobs []*engine.Job[*settleJob]) {
	ctx, cancel := context.WithTimeout(context.Background(), engine.WriteTimeout)
	defer cancel()
	// One statement per kind, and for the settlements that modify properties one of their own.
	type kind struct {
		op     broker.Settlement
		modify bool
	}
	kindOf := func(it settleItem) kind { return kind{it.req.Op, len(it.req.PropertiesToModify) > 0} }
	byKind := make(map[kind][]settleItem)
	var kinds []kind // in the order first seen
	for _, j := range jobs {
		for _, it := range j.Req.items {
			k := kindOf(it)
			if byKind[k] == nil {
				kinds = append(kinds, k)
			}
			byKind[k] = append(byKind[k], it)
		}
	}
	for _, k := range kinds {
		err := s.settleItems(ctx, k.op, k.modify, byKind[k])
		if err == nil || len(jobs) == 1 || errors.Is(err, broker.ErrUnavailable) {
			continue
		}
		// One request's settlements failed the shared statement (as sends do, writeSends): each
		// request's are made alone, so that the others' are not failed with them.
		for _, j := range jobs {
			var mine []settleItem
			for _, it := range j.Req.items {
				if kindOf(it) == k {
					mine = append(mine, it)
				}
			}
			if len(mine) > 0 {
				_ = s.settleItems(ctx, k.op, k.modify, mine)
			}
		}
	}
	for _, j := range jobs {
		j.Finish(nil)
	}
}

// settleItems makes the settlements items of kind op in one statement (with modify, the one that
// also modifies their properties) and fills their results; it returns the statement's error,
// which is each item's too.
func (s *Postgres) settleItems(ctx context.Context, op broker.Settlement, modify bool, items []settleItem) error {
	for _, it := range items {
		*it.res = broker.SettleResult{} // a request's earlier round may have failed
	}
	// Each statement locks its rows in primary-key order (its plans join the sorted input
	// first), the order every other settlement locks them in and a purge of a large queue
	// deletes them in, so that they wait for each other rather than deadlock. The order is the
	// planner's, not a guarantee (a purge of a few rows scans the table), so a deadlock is still
	// retried (settleOp).
	slices.SortStableFunc(items, func(x, y settleItem) int {
		return cmp.Or(cmp.Compare(x.t.Entity.ID, y.t.Entity.ID), cmp.Compare(lockTokenSeq(x.req.Token), lockTokenSeq(y.req.Token)))
	})
	a := newSettleArgs(len(items), modify)
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
func (s *Postgres) settleOp(ctx context.Context, op broker.Settlement, a *settleArgs) ([]wakeTarget, error) {
	var woken []wakeTarget
	found := make([]bool, len(a.items))
	ids := make([]string, len(a.items))   // the MessageId of the message each found request settled
	refused := make([]bool, len(a.items)) // modifications that failed their checks
	err := s.retryConflicts(ctx, func() { woken = woken[:0] }, func() (err error) {
		// Each attempt looks at its own time: a retry comes a deadlock_timeout later.
		now := s.now()
		if a.modify || (op == broker.Abandon || op == broker.DeadLetter) && len(a.forwards) > 0 {
			// Properties are modified from the messages as they are, read and locked in the
			// transaction that settles them; dead letters of an entity that forwards them move
			// on in it.
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
				woken, err = s.settleWithin(ctx, tx, op, a, now, found, ids, refused)
				return err
			})
		}
		clearResults(a, found, refused)
		woken, err = s.runSettle(ctx, s.hotPool(), op, a, now, found, ids)
		return err
	})
	if err != nil {
		return nil, interpretError(err)
	}
	s.lostLocks(op, a, found, ids, refused)
	return woken, nil
}

// lostLocks gives each request of a that the statement did not satisfy, and that was not
// refused, the lock-lost error.
func (s *Postgres) lostLocks(op broker.Settlement, a *settleArgs, found []bool, ids []string, refused []bool) {
	sameLockOnce(op, a.items, found, ids)
	for i, it := range a.items {
		if !found[i] && !refused[i] {
			it.res.Err = lockLost(it.t, it.req)
		}
	}
}

// clearResults forgets what an earlier attempt, ended by a conflict, recorded of a's rows.
func clearResults(a *settleArgs, found, refused []bool) {
	for i, it := range a.items {
		found[i], refused[i] = false, false
		*it.res = broker.SettleResult{}
	}
}

// settleWithin makes the settlements of a in tx: it modifies their properties, runs op's
// statement, counts what the modifications grew and moves the dead letters of entities that
// forward them on. found, ids and refused are filled as settleOp describes them.
func (s *Postgres) settleWithin(ctx context.Context, tx pgx.Tx, op broker.Settlement, a *settleArgs, now time.Time,
	found []bool, ids []string, refused []bool) ([]wakeTarget, error) {
	clearResults(a, found, refused)
	var grown map[int64]int64
	if a.modify {
		var err error
		if grown, err = s.modifyProperties(ctx, tx, a, now, refused); err != nil {
			return nil, err
		}
	}
	woken, err := s.runSettle(ctx, tx, op, a, now, found, ids)
	if err != nil {
		return nil, err
	}
	if err := s.countGrowth(ctx, tx, a, found, grown); err != nil {
		return nil, err
	}
	if op != broker.Abandon && op != broker.DeadLetter {
		return woken, nil
	}
	// In one order, so that two of these transactions do not deadlock.
	for _, id := range slices.Sorted(maps.Keys(a.forwards)) {
		targets, err := s.transferDeadLetters(ctx, tx, a.forwards[id])
		if err != nil {
			return nil, err
		}
		woken = append(woken, targets...)
	}
	return woken, nil
}

// runSettle runs op's statement for the requests of a on q (the pool or a transaction), marks
// each request it satisfied in found (with the MessageId of its message in ids) and fills its
// result; it returns the wake-ups the settlements call for.
func (s *Postgres) runSettle(ctx context.Context, q querier, op broker.Settlement, a *settleArgs, now time.Time, found []bool, ids []string) ([]wakeTarget, error) {
	statement := settleStatements[op]
	if a.modify {
		statement = modifyStatements[op]
	}
	_, values, err := statement.bind(a.named(now))
	if err != nil {
		return nil, err
	}
	var woken []wakeTarget
	settled := func(r *wireRow) error {
		var ord, entity int64
		var session pgtype.Text
		var state broker.State
		var messageID string
		var until pgtype.Timestamptz
		var expired bool
		if err := r.scan(&ord, &entity, &session, &state, &messageID, &until, &expired); err != nil {
			return err
		}
		i := int(ord - 1)
		found[i], ids[i] = true, messageID
		a.items[i].res.LockedUntil = timeOrZero(until)
		if expired {
			it := a.items[i]
			it.res.Err = &broker.Error{Code: broker.CodeLockLost, Message: fmt.Sprintf(
				"The lock of message %d in '%s' is not renewed: the message's time to live ended while it was locked. "+
					"It stays locked until %s; complete or abandon it before then.",
				lockTokenSeq(it.req.Token), it.t.Entity.Path, timeOrZero(until).Format(time.RFC3339))}
		}
		switch {
		case (op == broker.Abandon || op == broker.Release) && state != broker.StateDeadLetter:
			woken = append(woken, wakeTarget{entity: entity, session: session.String})
		case op == broker.DeadLetter, op == broker.Abandon:
			woken = append(woken, wakeTarget{entity: entity})
		}
		return nil
	}
	err = onConn(ctx, q, func(c *pgx.Conn) error { return queryWire(ctx, c, statement, values, settled) })
	if err != nil {
		return nil, err
	}
	return woken, nil
}

// modifyProperties reads and locks the messages of the requests in a (all of which modify
// properties), and fills a.props and a.size with each message's user properties as modified and
// its size after. A request whose modified message would not pass the checks of a send is
// refused: its result is ErrBadRequest, refused[i] is set, and its props stay NULL, which the
// statement does not match. It returns, by sequence number, how many bytes each modified
// message grew by (countGrowth counts those the statement settled).
func (s *Postgres) modifyProperties(ctx context.Context, tx pgx.Tx, a *settleArgs, now time.Time, refused []bool) (map[int64]int64, error) {
	a.props, a.size = make([][]byte, len(a.items)), make([]int32, len(a.items))
	sql, values, err := lockedForModify.bind(a.named(now))
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, sql, values...)
	if err != nil {
		return nil, err
	}
	locked, err := collectRecords[lockedRecord](rows, len(a.items))
	if err != nil {
		return nil, err
	}
	grown := make(map[int64]int64, len(locked))
	for _, rec := range locked {
		i := int(rec.Ord - 1)
		it := a.items[i]
		m, err := rec.message()
		if err != nil {
			return nil, err
		}
		props, size, err := modified(it.t.Entity, m, it.req.PropertiesToModify)
		if err != nil {
			refused[i] = true
			it.res.Err = err
			continue
		}
		a.props[i], a.size[i] = props, int32(size)
		grown[rec.Seq] = int64(size) - int64(rec.Size)
	}
	return grown, nil
}

// modified is m's user properties encoded with mods set over them by name, and m's size then.
// Errors: ErrBadRequest when the result breaks a limit of a send.
func modified(e *broker.Entity, m *broker.Message, mods broker.UserProperties) ([]byte, int, error) {
	props := slices.Clone(m.UserProperties)
	for _, p := range mods {
		i := slices.IndexFunc(props, func(q broker.Property) bool { return q.Name == p.Name })
		if i < 0 {
			props = append(props, broker.Property{Name: p.Name, Value: p.Value})
		} else {
			props[i].Value = p.Value
		}
	}
	enc, err := broker.EncodeUserProperties(props)
	if err != nil {
		return nil, 0, broker.BadRequest("The message's properties as modified: %s", broker.ErrorMessage(err))
	}
	m.UserProperties = props
	size := broker.MessageSize(m, len(enc))
	if limit := e.Props.MaxMessageSizeInKilobytes * 1024; int64(size) > limit {
		return nil, 0, broker.BadRequest("The message as modified (size %d bytes) would exceed the limit of %d bytes allowed on entity '%s'.",
			size, limit, e.Path)
	}
	return enc, size, nil
}

// countGrowth records, in tx, how much the messages whose properties the statement modified grew
// (or shrank) in their entities' sizes.
func (s *Postgres) countGrowth(ctx context.Context, tx pgx.Tx, a *settleArgs, found []bool, grown map[int64]int64) error {
	if len(grown) == 0 {
		return nil
	}
	var entities, bytes []int64
	for i, it := range a.items {
		if d, ok := grown[lockTokenSeq(it.req.Token)]; ok && found[i] && d != 0 {
			entities, bytes = append(entities, it.t.Entity.ID), append(bytes, d)
		}
	}
	if len(entities) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, grownBytes.sql, entities, bytes)
	return err
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
func sameLockOnce(op broker.Settlement, items []settleItem, found []bool, ids []string) {
	type lock struct {
		entity  int64
		state   broker.State
		session broker.SessionLock
		token   uuid.UUID
		// A dead-lettering's reason and description are written, and properties to modify:
		// the request whose values PostgreSQL wrote is the one that made it.
		reason, description, props string
	}
	key := func(it settleItem) lock {
		k := lock{entity: it.t.Entity.ID, state: it.t.SubQueue.State(), token: it.req.Token,
			reason: it.req.Reason, description: it.req.Description}
		if len(it.req.PropertiesToModify) > 0 {
			enc, _ := broker.EncodeUserProperties(it.req.PropertiesToModify) // checked already
			k.props = string(enc)
		}
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
		res       broker.SettleResult
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
		found[i] = op == broker.RenewLock || !seen[key(it)]
		seen[key(it)] = true
		if found[i] {
			*it.res = m.res
		} else {
			*it.res = broker.SettleResult{}
		}
	}
}

// lockLost is the error of a settlement whose lock is not held.
func lockLost(t broker.Target, r broker.SettleRequest) error {
	id := r.ID
	if id == "" {
		id = strconv.FormatInt(lockTokenSeq(r.Token), 10)
	}
	return &broker.Error{Code: broker.CodeLockLost, Message: fmt.Sprintf(
		"The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue. Reference: %s, entity '%s', message '%s'.",
		r.Token, t.Entity.Path, broker.Clip(id))}
}

// lockedRecord is a message row a settlement that modifies properties locked, with the place
// (1-based) of its request.
type lockedRecord struct {
	Ord int64 `db:"ord"`
	messageRecord
}
