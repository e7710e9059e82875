package amqp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// managementReceiver takes requests to an entity's $management node (docs/amqp.md §4); the
// replies go on the peer's reply link.
type managementReceiver struct {
	cs   *conn
	path string // the entity, with /$DeadLetterQueue for its subqueue
}

func (r *managementReceiver) Deliver(l *amqp.ReceiverLink, d *amqp.Delivery) {
	state := d.State
	r.cs.txnArrived(d, state)
	started := r.cs.request(l, d, "The management request", func(ctx context.Context, m *amqp.Message) *amqp.Message {
		defer r.cs.txnRecorded(d)
		body, err := r.handle(ctx, m, l.Session(), state)
		if err != nil && transactional(m) {
			r.cs.doomState(state, amqpError(err)) // a request of a transaction refused: all or nothing
		}
		return managementReply(body, err)
	}, func(err error) *amqp.Message {
		return managementReply(nil, amqp.Errorf(amqp.ErrCondInternalError, "The reply could not be encoded: %s", broker.Clip(err.Error())))
	})
	if !started {
		r.cs.txnRecorded(d)
	}
}

// transactional reports whether a request is one a transaction records or refuses: its failure
// dooms the transaction. Reads and renewals run as outside one, and so fail as outside one.
func transactional(m *amqp.Message) bool {
	opv, _ := m.ApplicationProperties.Get("operation")
	name, _ := opv.(string)
	if s, ok := opv.(amqp.Symbol); ok {
		name = string(s)
	}
	switch name {
	case "com.microsoft:update-disposition", "com.microsoft:schedule-message", "com.microsoft:set-session-state":
		return true
	}
	return inTransaction(name) != nil
}

// managementReply is the answer to a $management request: body with 200 (204 without one), or
// err's status, description and condition.
func managementReply(body amqp.Map, err error) *amqp.Message {
	status, desc := int32(200), "OK"
	props := amqp.Map{}
	switch {
	case err != nil:
		status = statusOf(err)
		ae := amqpError(err)
		desc = ae.Description
		props = append(props, amqp.MapEntry{Key: "errorCondition", Value: ae.Condition})
	case body == nil:
		status, desc = 204, "No Content"
	}
	props = append(amqp.Map{{Key: "statusCode", Value: status}, {Key: "statusDescription", Value: desc}}, props...)
	reply := &amqp.Message{ApplicationProperties: props}
	if body != nil {
		reply.Value = body
	} else {
		reply.Value, reply.HasValue = amqp.Map{}, true
	}
	return reply
}

func (r *managementReceiver) ReceiverDetached(*amqp.ReceiverLink, error) {}

// messageNotFound gives a missing message the condition the SDKs map to their
// message-not-found error; amqp:not-found reads as a missing entity.
func messageNotFound(err error) error {
	if broker.ErrorCode(err) != broker.CodeNotFound {
		return err
	}
	return &amqp.Error{Condition: condMessageNotFound, Description: broker.ErrorMessage(err)}
}

func badField(format string, args ...any) error {
	return &amqp.Error{Condition: condInvalidField, Description: fmt.Sprintf(format, args...)}
}

// mgmtRequest is one $management request being served: its body, the entity and subqueue of the
// node, and the session it names (by session-id, or by the session receiver link it names).
type mgmtRequest struct {
	cs   *conn
	m    *amqp.Message
	body amqp.Map
	e    *broker.Entity
	sq   broker.SubQueue
	t    broker.Target // with the session's lock when the operation runs under one
	sid  string
	// hasSession says a session was named (sid may be "", a session like any other).
	hasSession bool
	// txn is the transaction the request is part of (nil: none), made on a link of session.
	txn        *txn
	txnSession *amqp.Session
}

// mgmtOp is one operation of the $management node: the right it needs, whether it acts inside
// the session the request names (under the lock this connection holds on it), and what it does.
// do returns the reply's body, or nil for an empty success (204).
type mgmtOp struct {
	need      sas.Rights
	inSession bool
	do        func(ctx context.Context, q *mgmtRequest) (amqp.Map, error)
}

// managementOps are the operations of the $management node, by the name the SDKs send in the
// "operation" application property (docs/amqp.md §4, amqp-sdks.md "$management").
var managementOps = map[string]mgmtOp{
	"com.microsoft:renew-lock":                 {sas.Listen, true, renewLocks},
	"com.microsoft:peek-message":               {sas.Listen, false, peekMessages},
	"com.microsoft:receive-by-sequence-number": {sas.Listen, true, receiveBySequenceNumber},
	"com.microsoft:update-disposition":         {sas.Listen, true, updateDisposition},
	"com.microsoft:renew-session-lock":         {sas.Listen, true, renewSessionLock},
	"com.microsoft:get-session-state":          {sas.Listen, true, getSessionState},
	"com.microsoft:set-session-state":          {sas.Listen, true, setSessionState},
	"com.microsoft:get-message-sessions":       {sas.Listen, false, getMessageSessions},
	"com.microsoft:schedule-message":           {sas.Send, false, scheduleMessages},
	"com.microsoft:cancel-scheduled-message":   {sas.Send, false, cancelScheduled},
	"com.microsoft:add-rule":                   {sas.Listen, false, addRule},
	"com.microsoft:remove-rule":                {sas.Listen, false, removeRule},
	"com.microsoft:enumerate-rules":            {sas.Listen, false, enumerateRules},
}

// handle runs one operation and returns its reply body, or nil for an empty success (204).
func (r *managementReceiver) handle(ctx context.Context, m *amqp.Message, session *amqp.Session, state amqp.DeliveryState) (amqp.Map, error) {
	opv, _ := m.ApplicationProperties.Get("operation")
	name, _ := opv.(string)
	if s, ok := opv.(amqp.Symbol); ok {
		name = string(s)
	}
	op, ok := managementOps[name]
	if !ok {
		return nil, unsupported("The management operation '%s' is not supported.", broker.Clip(name))
	}
	var t *txn
	if state != nil {
		var aerr *amqp.Error
		if t, aerr = r.cs.txnOf(state); aerr != nil {
			return nil, aerr
		}
		if t == nil {
			return nil, badField("A request's transfer state is a transactional-state or none.")
		}
		if err := inTransaction(name); err != nil {
			return nil, err
		}
	}
	if aerr := r.cs.authorize(op.need, r.path, r.path+"/$management"); aerr != nil {
		return nil, aerr
	}
	path, sq := access.SplitSubQueue(r.path)
	e, aerr := r.cs.resolve(ctx, path)
	if aerr != nil {
		return nil, aerr
	}
	body, _ := m.Value.(amqp.Map)
	q := &mgmtRequest{cs: r.cs, m: m, body: body, e: e, sq: sq, t: broker.Target{Entity: e, SubQueue: sq}, txn: t, txnSession: session}
	q.sid, q.hasSession = mapString(body, "session-id")
	if !q.hasSession {
		// The SDKs name the session receiver's link instead of the session on some requests
		// (peek, update-disposition, renew-lock).
		if v, ok := m.ApplicationProperties.Get("associated-link-name"); ok {
			if name, _ := v.(string); name != "" {
				if lock, ok := r.cs.linkSession(name); ok {
					q.sid, q.hasSession = lock.SessionID, true
				}
			}
		}
	}
	if q.hasSession && op.inSession {
		lock, ok := r.cs.sessionLock(e.Path, q.sid)
		if !ok {
			return nil, &amqp.Error{Condition: condSessionLockLost, Description: "This connection holds no lock on session '" + broker.Clip(q.sid) + "'."}
		}
		q.t.Session = &lock
	}
	return op.do(ctx, q)
}

// inTransaction refuses the operations a transaction cannot include. The .NET SDK sends every
// $management request inside a TransactionScope with the transaction's id
// (ManagementUtilities.ExecuteRequestResponseAsync), reads included. The service's transactional
// operations are send (schedule-message too), complete, abandon, dead-letter, defer and, as the
// .NET SDK's transactions sample does, set-session-state: update-disposition, schedule-message and
// set-session-state are recorded in the transaction. Renewals and reads (renew-lock, which the
// transactions document lists, renew-session-lock, peek, get-session-state, receive by sequence
// number — receives are not transactional — and the listings) are made at once, as outside
// one. Cancelling a scheduled message and the rule operations are refused.
func inTransaction(op string) error {
	switch op {
	case "com.microsoft:cancel-scheduled-message", "com.microsoft:add-rule", "com.microsoft:remove-rule":
		return &amqp.Error{Condition: condNotAllowed, Description: fmt.Sprintf("The management operation '%s' cannot be part of a transaction.", broker.Clip(op))}
	}
	return nil
}

// store is the store the request runs against.
func (q *mgmtRequest) store() broker.Store { return q.cs.h.cfg.Store }

// session is the session lock of an operation that needs one.
func (q *mgmtRequest) session() (broker.SessionLock, error) {
	if q.t.Session == nil {
		return broker.SessionLock{}, badField("the request has no 'session-id'")
	}
	return *q.t.Session, nil
}

func renewSessionLock(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	sl, err := q.session()
	if err != nil {
		return nil, err
	}
	until, err := q.store().RenewSessionLock(ctx, q.e, sl)
	if err != nil {
		return nil, sessionErr(err)
	}
	return amqp.Map{{Key: "expiration", Value: until}}, nil
}

func getSessionState(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	sl, err := q.session()
	if err != nil {
		return nil, err
	}
	state, err := q.store().SessionState(ctx, q.e, sl)
	if err != nil {
		return nil, sessionErr(err)
	}
	var v any
	if state != nil {
		v = state
	}
	return amqp.Map{{Key: "session-state", Value: v}}, nil
}

func setSessionState(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	sl, err := q.session()
	if err != nil {
		return nil, err
	}
	v, _ := q.body.Get("session-state")
	state, ok := v.([]byte)
	if !ok && v != nil {
		return nil, badField("'session-state' must be binary or null")
	}
	if q.txn != nil {
		if aerr := q.txn.addSessionState(q.cs, q.txnSession, broker.TxSessionState{Entity: q.e, Lock: sl, State: state}); aerr != nil {
			return nil, aerr
		}
		return amqp.Map{}, nil
	}
	if err := q.store().SetSessionState(ctx, q.e, sl, state); err != nil {
		return nil, sessionErr(err)
	}
	return amqp.Map{}, nil
}

// renewLocks renews every lock token of the request, all or none: the reply's expirations are
// in the order of the tokens; a lock that is gone fails the request with lock-lost.
func renewLocks(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	toks, err := uuids(q.body, "lock-tokens")
	if err != nil {
		return nil, err
	}
	reqs := make([]broker.SettleRequest, len(toks))
	for i, tok := range toks {
		reqs[i] = broker.SettleRequest{Op: broker.RenewLock, Token: tok}
	}
	res := q.store().Settle(ctx, q.t, reqs)
	exp := make([]any, len(res))
	for i, rr := range res {
		if rr.Err != nil {
			return nil, sessionErr(rr.Err)
		}
		exp[i] = rr.LockedUntil
	}
	return amqp.Map{{Key: "expirations", Value: amqp.Array{Type: amqp.TypeTimestamp, Elems: exp}}}, nil
}

func peekMessages(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	from, err := integer(q.body, "from-sequence-number")
	if err != nil {
		return nil, err
	}
	n, err := integer(q.body, "message-count")
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, badField("message-count must be at least 1")
	}
	sid := ""
	if q.hasSession {
		sid = q.sid
	}
	msgs, err := peek(ctx, q.store(), q.e, q.sq, q.hasSession, sid, from, int(min(n, broker.MaxBrowse)))
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	list := make(amqp.List, 0, len(msgs))
	now := q.cs.h.access.Now()
	for _, sm := range msgs {
		b, err := encodeStored(sm, now)
		if err != nil {
			return nil, err
		}
		list = append(list, amqp.Map{{Key: "message", Value: b}})
	}
	return amqp.Map{{Key: "messages", Value: list}}, nil
}

func receiveBySequenceNumber(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	seqs, err := longs(q.body, "sequence-numbers")
	if err != nil {
		return nil, err
	}
	mode := broker.PeekLock
	if v, _ := q.body.Get("receiver-settle-mode"); v == uint32(0) {
		mode = broker.ReceiveAndDelete
	}
	// All or nothing in one store call: taking them one by one deleted (or locked) those
	// before a missing one, and the client, answered not-found, never got them.
	msgs, err := q.store().ReceiveDeferred(ctx, q.t, seqs, mode)
	if err != nil {
		return nil, sessionErr(messageNotFound(err)) // lock lost: only a session's can be
	}
	list := make(amqp.List, 0, len(msgs))
	for _, sm := range msgs {
		b, err := encodeStored(sm, time.Time{}) // a locked one's token in x-opt-lock-token too
		if err != nil {
			return nil, err
		}
		entry := amqp.Map{{Key: "message", Value: b}}
		if mode == broker.PeekLock {
			entry = append(entry, amqp.MapEntry{Key: "lock-token", Value: amqp.UUID(sm.LockToken)})
		}
		list = append(list, entry)
	}
	return amqp.Map{{Key: "messages", Value: list}}, nil
}

func updateDisposition(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	toks, err := uuids(q.body, "lock-tokens")
	if err != nil {
		return nil, err
	}
	var modify broker.UserProperties
	if v, ok := q.body.Get("properties-to-modify"); ok && v != nil {
		pm, ok := v.(amqp.Map)
		if !ok {
			return nil, badField("'properties-to-modify' must be a map")
		}
		if modify, err = modifications(pm, false); err != nil {
			return nil, err
		}
	}
	statusV, _ := q.body.Get("disposition-status")
	status, _ := statusV.(string)
	var req broker.SettleRequest
	switch strings.ToLower(status) {
	case "completed":
		req.Op = broker.Complete
	case "abandoned":
		req.Op = broker.Abandon
	case "suspended":
		req.Op = broker.DeadLetter
		req.Reason, _ = mapString(q.body, "deadletter-reason")
		req.Description, _ = mapString(q.body, "deadletter-description")
	case "defered", "deferred":
		req.Op = broker.Defer
	default:
		return nil, badField("disposition-status '%s' is not completed, abandoned, suspended or defered", broker.Clip(status))
	}
	if len(modify) > 0 && req.Op == broker.Complete {
		return nil, badField("properties cannot be modified on a completion")
	}
	req.PropertiesToModify = modify
	if q.txn != nil {
		sts := make([]broker.TxSettle, len(toks))
		for i, tok := range toks {
			sts[i] = broker.TxSettle{Target: q.t, Request: req}
			sts[i].Request.Token = tok
		}
		if aerr := q.txn.addSettles(q.cs, q.txnSession, sts); aerr != nil {
			return nil, aerr
		}
		return amqp.Map{}, nil
	}
	reqs := make([]broker.SettleRequest, len(toks))
	for i, tok := range toks {
		reqs[i] = req
		reqs[i].Token = tok
	}
	for _, rr := range q.store().Settle(ctx, q.t, reqs) {
		if rr.Err != nil {
			return nil, sessionErr(rr.Err)
		}
	}
	return amqp.Map{}, nil
}

func scheduleMessages(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	if q.txn != nil {
		return scheduleInTxn(ctx, q)
	}
	return schedule(ctx, q.store(), q.e, q.sq, "com.microsoft:schedule-message", q.body)
}

// scheduleInTxn schedules messages in the request's transaction: their numbers are drawn now,
// for the reply, and they are stored with those numbers when the transaction commits.
func scheduleInTxn(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	if q.sq != broker.SubQueueMain {
		return nil, badField("scheduled messages live in the entity, not its dead-letter subqueue")
	}
	msgs, size, err := scheduledMessages(q.body)
	if err == nil {
		err = q.store().CheckSend(ctx, q.e, msgs)
	}
	var nums []int64
	if err == nil {
		nums, err = q.store().ReserveSequenceNumbers(ctx, len(msgs))
	}
	if err != nil {
		return nil, err
	}
	if aerr := q.txn.addSends(q.cs, q.e.Path, q.txnSession, broker.TxSend{Entity: q.e, Messages: msgs, Numbers: nums}, size); aerr != nil {
		return nil, aerr
	}
	return sequenceNumbers(nums), nil
}

// sequenceNumbers is the reply of schedule-message.
func sequenceNumbers(seqs []int64) amqp.Map {
	out := make([]any, len(seqs))
	for i, seq := range seqs {
		out[i] = seq
	}
	return amqp.Map{{Key: "sequence-numbers", Value: amqp.Array{Type: amqp.TypeLong, Elems: out}}}
}

func cancelScheduled(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	return schedule(ctx, q.store(), q.e, q.sq, "com.microsoft:cancel-scheduled-message", q.body)
}

// schedule runs schedule-message and cancel-scheduled-message on e. On a topic, or an entity
// that forwards its messages, the number a message gets names all its copies (in the topic's
// subscriptions, or where it was forwarded to), and cancelling it cancels them all.
func schedule(ctx context.Context, st broker.Store, e *broker.Entity, sq broker.SubQueue, op string, body amqp.Map) (amqp.Map, error) {
	if sq != broker.SubQueueMain {
		return nil, badField("scheduled messages live in the entity, not its dead-letter subqueue")
	}
	if op == "com.microsoft:cancel-scheduled-message" {
		seqs, err := longs(body, "sequence-numbers")
		if err != nil {
			return nil, err
		}
		// All or none, as Service Bus answers one error naming the numbers missing.
		if err := st.CancelScheduled(ctx, e, seqs); err != nil {
			return nil, messageNotFound(err)
		}
		return amqp.Map{}, nil
	}
	msgs, _, err := scheduledMessages(body)
	if err != nil {
		return nil, err
	}
	seqs, err := st.SendSequenced(ctx, e, msgs)
	if err != nil {
		return nil, err
	}
	return sequenceNumbers(seqs), nil
}

// scheduledMessages decodes the messages of a schedule-message request, and their encoded size.
func scheduledMessages(body amqp.Map) ([]broker.Message, int, error) {
	es, err := elems(body, "messages")
	if err != nil {
		return nil, 0, err
	}
	if len(es) == 0 {
		return nil, 0, badField("'messages' is empty")
	}
	msgs := make([]broker.Message, len(es))
	size := 0
	for i, el := range es {
		entry, _ := el.(amqp.Map)
		v, _ := entry.Get("message")
		b, ok := v.([]byte)
		if !ok {
			return nil, 0, badField("entry %d of 'messages' has no binary 'message'", i+1)
		}
		size += len(b)
		m, err := amqp.UnmarshalKeepingBody(b)
		if err != nil {
			return nil, 0, &amqp.Error{Condition: amqp.ErrCondDecodeError, Description: fmt.Sprintf("Message %d could not be decoded.", i+1)}
		}
		if msgs[i], err = toStore(m); err != nil {
			return nil, 0, err
		}
	}
	return msgs, size, nil
}

// peek browses up to n messages from sequence number from on; with a session (hasSession, sid
// possibly ""), only that session's, paging through the entity's messages (the store browses by
// sequence number only, so a session peek reads the messages of the other sessions in between).
func peek(ctx context.Context, st broker.Store, e *broker.Entity, sq broker.SubQueue, hasSession bool, sid string, from int64, n int) ([]*broker.Message, error) {
	if !hasSession {
		return st.Browse(ctx, e, sq, from, n)
	}
	var out []*broker.Message
	for len(out) < n {
		page, err := st.Browse(ctx, e, sq, from, broker.MaxBrowse)
		if err != nil {
			return nil, err
		}
		for _, m := range page {
			if m.InSession() && m.SessionID == sid && len(out) < n {
				out = append(out, m)
			}
		}
		if len(page) < broker.MaxBrowse {
			break
		}
		from = page[len(page)-1].SequenceNumber + 1
	}
	return out, nil
}

// sessionErr maps a lost lock inside a session to com.microsoft:session-lock-lost.
func sessionErr(err error) error {
	if broker.ErrorCode(err) == broker.CodeLockLost {
		return &amqp.Error{Condition: condSessionLockLost, Description: broker.ErrorMessage(err)}
	}
	return err
}

// mapString is the string under k, and whether there is one (absent and null are not).
func mapString(m amqp.Map, k string) (string, bool) {
	v, _ := m.Get(k)
	s, ok := v.(string)
	return s, ok
}

func elems(m amqp.Map, k string) ([]any, error) {
	v, ok := m.Get(k)
	if !ok {
		return nil, badField("the request has no '%s'", k)
	}
	switch v := v.(type) {
	case amqp.Array:
		return v.Elems, nil
	case amqp.List:
		return v, nil
	}
	return nil, badField("'%s' must be an array", k)
}

func uuids(m amqp.Map, k string) ([]uuid.UUID, error) {
	es, err := elems(m, k)
	if err != nil {
		return nil, err
	}
	out := make([]uuid.UUID, len(es))
	for i, e := range es {
		u, ok := e.(amqp.UUID)
		if !ok {
			return nil, badField("'%s' must hold uuids", k)
		}
		out[i] = uuid.UUID(u)
	}
	return out, nil
}

func longs(m amqp.Map, k string) ([]int64, error) {
	es, err := elems(m, k)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(es))
	for i, e := range es {
		n, ok := asInt64(e)
		if !ok {
			return nil, badField("'%s' must hold longs", k)
		}
		out[i] = n
	}
	return out, nil
}

func integer(m amqp.Map, k string) (int64, error) {
	v, ok := m.Get(k)
	if !ok {
		return 0, badField("the request has no '%s'", k)
	}
	n, ok := asInt64(v)
	if !ok {
		return 0, badField("'%s' must be an integer", k)
	}
	return n, nil
}

func asInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case int16:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint8:
		return int64(v), true
	case uint64:
		if v <= 1<<63-1 {
			return int64(v), true
		}
	}
	return 0, false
}
