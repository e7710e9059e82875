package amqp

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
)

// Transactions (AMQP part 4, as Service Bus profiles it; amqp-sdks.md "Transactions"). A
// client attaches a link to the coordinator and sends declare, answered with declared and a
// txn-id; sends (transfers), settlements (dispositions) and $management requests that carry
// transactional-state with that id are checked at once and kept on the gateway; discharge with
// fail false commits them all in one PostgreSQL transaction (store.CommitTransaction), with fail
// true forgets them. Nothing a transaction does is visible before its commit, and a transaction
// lives only on the gateway of its connection: one whose connection or coordinator link goes, or
// that is not discharged within TransactionTimeout of its first operation, is rolled back. The
// messages it settles stay locked until their locks end, as the service leaves them.
//
// The service's rules: a transaction works on one top-level entity (a queue, or a topic with its
// subscriptions); messages for other entities go "via" it (a sender link whose target is the
// transaction's entity and whose com.microsoft:transfer-destination-address names the
// destination). The .NET SDK's cross-entity transactions instead put the coordinator first on a
// session and every link after it on that session: on such a session a transaction may touch
// any entity. A transaction sends at most broker.MaxTransactionMessages messages.

// Conditions of transactions (part 4, section 4.5.2), and the service's text for work that
// spans entities.
const (
	condTxnUnknown  amqp.Symbol = "amqp:transaction:unknown-id"
	condTxnRollback amqp.Symbol = "amqp:transaction:rollback"
	condTxnTimeout  amqp.Symbol = "amqp:transaction:timeout"

	propTransferDestination amqp.Symbol = "com.microsoft:transfer-destination-address"
)

// What one connection's open transactions may hold: maxOpenTxns transactions, and maxTxnBytes of
// work (the sends' encoded size, settleCost a settlement) kept until their discharge. Beyond,
// a declare or an operation is refused with amqp:resource-limit-exceeded.
const (
	maxOpenTxns   = 256
	commitTimeout = time.Minute
	maxTxnBytes   = 64 << 20
	settleCost    = 256
)

// DefaultTransactionTimeout is how long a transaction may run from its first operation to its
// discharge, as the service allows.
const DefaultTransactionTimeout = 2 * time.Minute

// txn is one declared transaction.
type txn struct {
	id    []byte
	coord *coordinator

	mu   sync.Mutex
	err  *amqp.Error // set once it can do nothing more: timed out, rolled back with its link
	done bool        // discharged, or discharging
	// entity is the top-level entity (queue or topic path, lower-cased) the transaction works
	// on, "" until its first operation.
	entity   string
	work     broker.TxWork
	messages int
	held     int64           // bytes of work counted in the connection's txns.held
	locks    map[[2]any]bool // the locks it settles, by entity path and token
	timer    *time.Timer
	// pending counts its operations that arrived and are not yet recorded or refused: they
	// run on their links' workers, and the discharge, on the coordinator's, waits for them.
	// Guarded by the connection's txns.mu, not by mu.
	pending int
	idle    chan struct{} // closed when pending falls to 0, for a discharge waiting
}

// coordinator is a link to the transaction coordinator: the transactions it declared.
type coordinator struct {
	cs      *conn
	session *amqp.Session
	// cross: the coordinator was the session's first link, as the .NET SDK attaches it for
	// cross-entity transactions: work on links of this session may touch any entity.
	cross bool
	work  worker[*amqp.Delivery]
	// gone: the link detached (guarded by the connection's txns.mu); a declare still queued
	// behind the detach is refused, or its transaction would outlive its link.
	gone bool
}

// txns are a connection's open transactions, by txn-id, and the bytes of work they hold.
type txns struct {
	mu   sync.Mutex
	m    map[string]*txn
	held int64
	// arrived are the operations of open transactions counted in their pending, by the
	// delivery that carried each.
	arrived map[any]arrival
}

// txnArrived counts an operation that arrived carrying state, before a link's worker records
// it, so that a discharge that comes after it on the wire waits for it. Called on the engine's
// dispatcher, in the order the peer sent; txnRecorded ends it (once per txnArrived of key).
func (cs *conn) txnArrived(key any, state amqp.DeliveryState) {
	ts, ok := state.(amqp.TransactionalState)
	if !ok {
		return
	}
	cs.txns.mu.Lock()
	defer cs.txns.mu.Unlock()
	t := cs.txns.m[string(ts.TxnID)]
	if t == nil {
		return
	}
	if cs.txns.arrived == nil {
		cs.txns.arrived = make(map[any]arrival)
	}
	a := cs.txns.arrived[key]
	cs.txns.arrived[key] = arrival{t: t, n: a.n + 1}
	t.pending++
}

// arrival is what txnArrived counted for one key.
type arrival struct {
	t *txn
	n int
}

// txnRecorded ends one txnArrived of key, once its operation is recorded or refused.
func (cs *conn) txnRecorded(key any) {
	cs.txns.mu.Lock()
	defer cs.txns.mu.Unlock()
	a, ok := cs.txns.arrived[key]
	if !ok {
		return
	}
	if a.n--; a.n == 0 {
		delete(cs.txns.arrived, key)
	} else {
		cs.txns.arrived[key] = a
	}
	t := a.t
	if t.pending--; t.pending == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// settled waits until every operation of t that arrived before now is recorded or refused.
func (cs *conn) settled(ctx context.Context, t *txn) bool {
	for {
		cs.txns.mu.Lock()
		if t.pending == 0 {
			cs.txns.mu.Unlock()
			return true
		}
		if t.idle == nil {
			t.idle = make(chan struct{})
		}
		idle := t.idle
		cs.txns.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return false
		}
	}
}

// hold counts n more bytes of work held by the connection's transactions, refusing what would
// pass maxTxnBytes.
func (ts *txns) hold(n int64) *amqp.Error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.held+n > maxTxnBytes {
		return amqp.Errorf(condResourceLimit, "The connection's open transactions hold %d bytes of work; this would pass the limit of %d: discharge some first.", ts.held, maxTxnBytes)
	}
	ts.held += n
	return nil
}

func (ts *txns) release(n int64) {
	ts.mu.Lock()
	ts.held -= n
	ts.mu.Unlock()
}

func (cs *conn) attachCoordinator(req *amqp.AttachRequest) {
	co := &coordinator{cs: cs, session: req.Session(), cross: true}
	for _, l := range cs.c.SenderLinks() {
		co.cross = co.cross && l.Session() != req.Session()
	}
	for _, l := range cs.c.ReceiverLinks() {
		co.cross = co.cross && l.Session() != req.Session()
	}
	// The coordinator answers with the capability it has: local transactions (not distributed
	// ones, nor promotable; part 4, txn-capability).
	_, _ = req.AcceptReceiver(co, amqp.ReceiverOptions{RcvSettleMode: &rcvFirst, Credit: requestCredit,
		Coordinator: &amqp.Coordinator{Capabilities: []amqp.Symbol{"amqp:local-transactions"}}})
}

func (co *coordinator) Deliver(l *amqp.ReceiverLink, d *amqp.Delivery) {
	co.work.add(d, func(batch []*amqp.Delivery) {
		for _, d := range batch {
			co.control(l.Conn().Context(), d)
		}
	})
}

// ReceiverDetached rolls back the transactions the link declared and has not discharged.
func (co *coordinator) ReceiverDetached(*amqp.ReceiverLink, error) {
	co.cs.txns.mu.Lock()
	co.gone = true
	co.cs.txns.mu.Unlock()
	co.cs.rollbackAll(func(t *txn) bool { return t.coord == co }, "its coordinator link was detached")
}

// control runs one declare or discharge.
func (co *coordinator) control(ctx context.Context, d *amqp.Delivery) {
	m, err := d.Message()
	if err != nil {
		_ = d.Reject(&amqp.Error{Condition: amqp.ErrCondDecodeError, Description: "The transaction control message is not a valid message."})
		return
	}
	desc, _ := m.Value.(amqp.Described)
	fields, _ := desc.Value.(amqp.List)
	switch desc.Descriptor {
	case uint64(0x31), amqp.Symbol("amqp:declare:list"):
		if len(fields) > 0 && fields[0] != nil {
			_ = d.Reject(amqp.Errorf(condNotImplemented, "Distributed transactions (a declare with a global-id) are not supported."))
			return
		}
		id, aerr := co.cs.declare(co)
		if aerr != nil {
			_ = d.Reject(aerr)
			return
		}
		_ = d.Settle(amqp.Declared{TxnID: id})
	case uint64(0x32), amqp.Symbol("amqp:discharge:list"):
		var id []byte
		var fail bool
		if len(fields) > 0 {
			id, _ = fields[0].([]byte)
		}
		if len(fields) > 1 {
			fail, _ = fields[1].(bool)
		}
		if aerr := co.cs.discharge(ctx, id, fail); aerr != nil {
			_ = d.Reject(aerr)
			return
		}
		_ = d.Accept()
	default:
		_ = d.Reject(amqp.Errorf(amqp.ErrCondDecodeError, "The coordinator takes an amqp-value of declare or discharge."))
	}
}

// declare opens a transaction and returns its id.
func (cs *conn) declare(co *coordinator) ([]byte, *amqp.Error) {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	cs.txns.mu.Lock()
	defer cs.txns.mu.Unlock()
	if co.gone {
		return nil, amqp.Errorf(amqp.ErrCondDetachForced, "The coordinator link was detached.")
	}
	if len(cs.txns.m) >= maxOpenTxns {
		return nil, amqp.Errorf(condResourceLimit, "The connection has %d transactions open, the most it may: discharge one first.", maxOpenTxns)
	}
	if cs.txns.m == nil {
		cs.txns.m = make(map[string]*txn)
	}
	cs.txns.m[string(id)] = &txn{id: id, coord: co}
	return id, nil
}

// discharge ends a transaction: with fail, its work is forgotten; without, committed.
func (cs *conn) discharge(ctx context.Context, id []byte, fail bool) *amqp.Error {
	cs.txns.mu.Lock()
	t := cs.txns.m[string(id)]
	cs.txns.mu.Unlock()
	if t == nil {
		return amqp.Errorf(condTxnUnknown, "No transaction with this id is open on the connection.")
	}
	// The operations the peer sent before the discharge, on other links, may still be on their
	// links' workers: the discharge waits for them (a peer that settles first sends its
	// disposition and then the discharge, and expects both in that order).
	wctx, cancel := context.WithTimeout(ctx, commitTimeout)
	waited := cs.settled(wctx, t)
	cancel()
	if !waited {
		t.fail(amqp.Errorf(condTxnRollback, "The transaction was rolled back: its operations were still being made at its discharge."))
	}
	cs.txns.mu.Lock()
	if cs.txns.m[string(id)] != t {
		cs.txns.mu.Unlock()
		return amqp.Errorf(condTxnUnknown, "No transaction with this id is open on the connection.")
	}
	delete(cs.txns.m, string(id))
	cs.txns.mu.Unlock()
	t.mu.Lock()
	t.done = true
	if t.timer != nil {
		t.timer.Stop()
	}
	aerr, work, held := t.err, t.work, t.held
	t.work, t.held = broker.TxWork{}, 0
	t.mu.Unlock()
	cs.txns.release(held)
	switch {
	case fail:
		return nil // a rollback: whatever ended the transaction already, nothing is applied
	case aerr != nil:
		return aerr
	}
	// The commit is made even if the connection goes meanwhile, but not waited for forever:
	// the coordinator's later declares and discharges queue behind it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := cs.h.cfg.Store.CommitTransaction(cctx, work); err != nil {
		e := amqpError(err)
		return &amqp.Error{Condition: condTxnRollback, Description: "The transaction was rolled back: " + e.Description,
			Info: amqp.Map{{Key: amqp.Symbol("com.microsoft:cause"), Value: e.Condition}}}
	}
	return nil
}

// rollbackAll rolls back the open transactions which match, saying why.
func (cs *conn) rollbackAll(match func(*txn) bool, why string) {
	cs.txns.mu.Lock()
	var ended []*txn
	for k, t := range cs.txns.m {
		if match(t) {
			ended = append(ended, t)
			delete(cs.txns.m, k)
		}
	}
	cs.txns.mu.Unlock()
	for _, t := range ended {
		t.fail(amqp.Errorf(condTxnRollback, "The transaction was rolled back: %s.", why))
	}
}

// forget drops t's work, giving back what it held.
func (t *txn) forgetLocked() {
	t.work = broker.TxWork{}
	t.coord.cs.txns.release(t.held)
	t.held = 0
}

// fail ends t with err: its work is forgotten, and its discharge (if it comes) answers err.
func (t *txn) fail(err *amqp.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failLocked(err)
}

// doom ends t because one of its operations failed with cause: all or nothing, so its commit
// can only fail. The Java SDK does not look at the outcome of a send in a transaction (it takes
// any as success), so a refused send must not let the rest commit without it.
func (t *txn) doom(cause *amqp.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.doomLocked(cause)
}

func (t *txn) doomLocked(cause *amqp.Error) {
	t.failLocked(amqp.Errorf(condTxnRollback, "The transaction was rolled back: one of its operations failed (%s: %s).",
		cause.Condition, cause.Description))
}

func (t *txn) failLocked(err *amqp.Error) {
	if t.err == nil {
		t.err = err
	}
	t.forgetLocked()
	if t.timer != nil {
		t.timer.Stop()
	}
}

// doomState dooms the transaction state names, if it names an open one, because an operation
// made in it was refused with aerr. Every refusal of a transactional operation goes through it
// (or through txn.add, which dooms by itself), so none can leave the rest to commit without it.
func (cs *conn) doomState(state amqp.DeliveryState, aerr *amqp.Error) {
	if _, ok := state.(amqp.TransactionalState); !ok || aerr == nil {
		return
	}
	if t, _ := cs.txnOf(state); t != nil {
		t.doom(aerr)
	}
}

// txnOf finds the transaction a delivery state names: nil, nil when it names none.
func (cs *conn) txnOf(state amqp.DeliveryState) (*txn, *amqp.Error) {
	ts, ok := state.(amqp.TransactionalState)
	if !ok {
		return nil, nil
	}
	cs.txns.mu.Lock()
	t := cs.txns.m[string(ts.TxnID)]
	cs.txns.mu.Unlock()
	if t == nil {
		return nil, amqp.Errorf(condTxnUnknown, "No transaction with this id is open on the connection.")
	}
	return t, nil
}

// topLevel is the queue or topic an entity path belongs to, lower-cased: a subscription's is
// its topic.
func topLevel(path string) string {
	p := strings.ToLower(path)
	if i := strings.Index(p, "/subscriptions/"); i >= 0 {
		return p[:i]
	}
	return p
}

// add records one operation of t (a send when send is set), on the top-level entity of path
// (for a send-via, the via entity), made on a link of session: it checks the transaction is open and may touch that
// entity, starts its timer at its first operation, and runs record under t's lock.
func (t *txn) add(cs *conn, path string, send bool, session *amqp.Session, record func() *amqp.Error) *amqp.Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.err != nil:
		return t.err
	case t.done:
		return amqp.Errorf(condTxnUnknown, "The transaction is being discharged.")
	}
	top := topLevel(path)
	// Cross-entity (on the session the coordinator opened first): sends go anywhere, routed
	// through the transaction's entity, but a settlement cannot be routed so: it must be on that
	// entity (the .NET SDK's transactions sample: InvalidOperationException otherwise).
	if t.entity != "" && t.entity != top && !(send && t.coord.cross && session == t.coord.session) {
		aerr := amqp.Errorf(condNotAllowed, "Local transactions cannot span multiple top-level entities such as queue or topic: "+
			"this transaction works on '%s', not '%s'. Send to other entities via '%s' (transfer-destination-address), "+
			"or use cross-entity transactions.", t.entity, broker.Clip(top), t.entity)
		t.doomLocked(aerr)
		return aerr
	}
	if aerr := record(); aerr != nil {
		t.doomLocked(aerr)
		return aerr
	}
	if t.entity == "" {
		t.entity = top
	}
	if t.timer == nil {
		// The service's timer starts with the transaction's first operation.
		t.timer = time.AfterFunc(cs.h.cfg.TransactionTimeout, func() {
			t.fail(amqp.Errorf(condTxnTimeout, "The transaction timed out: it was not discharged within %s of its first operation.", cs.h.cfg.TransactionTimeout))
		})
	}
	return nil
}

// addSends records snd, made through via, in t; size is its messages' encoded size.
func (t *txn) addSends(cs *conn, via string, session *amqp.Session, snd broker.TxSend, size int) *amqp.Error {
	return t.add(cs, via, true, session, func() *amqp.Error {
		if t.messages+len(snd.Messages) > broker.MaxTransactionMessages {
			return amqp.Errorf(condResourceLimit, "Cannot send more than %d messages in a single transaction.", broker.MaxTransactionMessages)
		}
		if aerr := cs.txns.hold(int64(size)); aerr != nil {
			return aerr
		}
		t.held += int64(size)
		t.messages += len(snd.Messages)
		t.work.Sends = append(t.work.Sends, snd)
		return nil
	})
}

// addSettle records a settlement in t.
func (t *txn) addSettle(cs *conn, session *amqp.Session, st broker.TxSettle) *amqp.Error {
	return t.addSettles(cs, session, []broker.TxSettle{st})
}

// addSettles records settlements of one entity in t, all or none.
func (t *txn) addSettles(cs *conn, session *amqp.Session, sts []broker.TxSettle) *amqp.Error {
	if len(sts) == 0 {
		return nil
	}
	for _, st := range sts {
		if err := broker.CheckTxSettle(st); err != nil {
			aerr := amqpError(err)
			t.doom(aerr)
			return aerr
		}
	}
	return t.add(cs, sts[0].Target.Entity.Path, false, session, func() *amqp.Error {
		keys := make(map[[2]any]bool, len(sts))
		for _, st := range sts {
			key := [2]any{st.Target.Entity.ID, st.Request.Token}
			if t.locks[key] || keys[key] {
				return amqpError(broker.ErrLockLost)
			}
			keys[key] = true
		}
		cost := int64(settleCost * len(sts))
		if aerr := cs.txns.hold(cost); aerr != nil {
			return aerr
		}
		t.held += cost
		if t.locks == nil {
			t.locks = make(map[[2]any]bool)
		}
		for k := range keys {
			t.locks[k] = true
		}
		t.work.Settles = append(t.work.Settles, sts...)
		return nil
	})
}

// addSessionState records a session state t sets when it commits.
func (t *txn) addSessionState(cs *conn, session *amqp.Session, st broker.TxSessionState) *amqp.Error {
	if err := broker.CheckTxSessionState(st); err != nil {
		return amqpError(err)
	}
	return t.add(cs, st.Entity.Path, false, session, func() *amqp.Error {
		cost := int64(settleCost + len(st.State))
		if aerr := cs.txns.hold(cost); aerr != nil {
			return aerr
		}
		t.held += cost
		t.work.SessionStates = append(t.work.SessionStates, st)
		return nil
	})
}

// txnOutcomes records the transactional outcomes of a receive link in their transactions and
// answers each; it returns the outcomes that are not transactional.
func (r *entityReceiver) txnOutcomes(batch []outcome) []outcome {
	if !slices.ContainsFunc(batch, func(o outcome) bool { _, ok := o.state.(amqp.TransactionalState); return ok }) {
		return batch // the usual case: nothing to sort out
	}
	plain := batch[:0:0]
	for _, o := range batch {
		ts, ok := o.state.(amqp.TransactionalState)
		if !ok {
			plain = append(plain, o)
			continue
		}
		var err error
		if aerr := r.txnOutcome(o, ts); aerr != nil {
			err = aerr
			r.cs.doomState(ts, aerr)
		}
		r.answer(o, err)
		r.cs.txnRecorded(o.d)
	}
	return plain
}

// txnOutcome records one transactional outcome in its transaction.
func (r *entityReceiver) txnOutcome(o outcome, ts amqp.TransactionalState) *amqp.Error {
	t, aerr := r.cs.txnOf(ts)
	if aerr != nil {
		return aerr
	}
	if r.mode != broker.PeekLock {
		return amqp.Errorf(condNotAllowed, "Messages received and deleted are not settled in a transaction.")
	}
	req, err := settleRequest(o.d.Tag(), ts.Outcome)
	if err != nil {
		return amqpError(err)
	}
	tg, aerr := r.target(context.WithoutCancel(r.ctx))
	if aerr != nil {
		return aerr
	}
	return t.addSettle(r.cs, o.l.Session(), broker.TxSettle{Target: tg, Request: req})
}
