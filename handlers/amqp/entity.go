package amqp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// entityAddress parses a link address into an entity path and subqueue: "q", "t",
// "t/Subscriptions/s", "…/$DeadLetterQueue", also given as a URL ("amqps://host/q").
func entityAddress(addr string) (string, broker.SubQueue) {
	p := addr
	if _, rest, ok := strings.Cut(p, "://"); ok {
		if _, path, ok := strings.Cut(rest, "/"); ok {
			p = path
		} else {
			p = ""
		}
	}
	return access.SplitSubQueue(strings.Trim(p, "/"))
}

// resolve finds the entity of a link, mapping a missing one to amqp:not-found.
func (cs *conn) resolve(ctx context.Context, path string) (*broker.Entity, *amqp.Error) {
	if path == "" {
		return nil, amqp.Errorf(condNotFound, "The link names no entity.")
	}
	e, err := cs.h.cfg.Store.Resolve(ctx, path)
	if err != nil {
		if broker.ErrorCode(err) == broker.CodeNotFound {
			return nil, amqp.Errorf(condNotFound, "The messaging entity '%s' could not be found.", path)
		}
		return nil, amqpError(err)
	}
	return e, nil
}

// attachEntitySender answers a link on which the peer sends to a queue or topic: its target,
// or with com.microsoft:transfer-destination-address the entity that names, sent to via the
// target (send-via: the target is the entity a transaction works on; the peer needs Send on
// both). It runs on its own goroutine: resolving the entities may read the database.
func (cs *conn) attachEntitySender(req *amqp.AttachRequest) {
	via, aerr := cs.sendableEntity(req.Context(), req.TargetAddress())
	if aerr != nil {
		_ = req.Refuse(aerr)
		return
	}
	dest := via
	var props amqp.Map
	if v, ok := req.Properties().Get(propTransferDestination); ok {
		addr, _ := v.(string)
		if dest, aerr = cs.sendableEntity(req.Context(), addr); aerr != nil {
			_ = req.Refuse(aerr)
			return
		}
		// The service echoes the destination in its attach.
		props = append(props, amqp.MapEntry{Key: propTransferDestination, Value: addr})
	}
	s := &entitySender{cs: cs, path: dest.Path, via: via.Path}
	size := int64(dest.Props.MaxMessageSizeInKilobytes) * 1024
	// Tracked before it is accepted, so a detach that comes at once finds it to untrack.
	var detach lateDetach
	cs.track(s, dest.Path, sas.Send, detach.call)
	if via != dest {
		cs.track(&s.via, via.Path, sas.Send, detach.call)
	}
	l, err := req.AcceptReceiver(s, amqp.ReceiverOptions{
		RcvSettleMode:  &rcvFirst,
		MaxMessageSize: uint64(size),
		// The SDKs size their batches by it (Go prefers it to max-message-size; .NET falls back
		// to 1 MiB without it). A batch is one message on the wire, so the limits are equal.
		Properties: append(amqp.Map{{Key: propMaxMessageBatchSize, Value: size}}, props...),
	})
	if err != nil {
		s.untrack()
		cs.h.log.Debug("amqp attach not accepted", "err", err)
		return
	}
	detach.set(l.Detach)
}

// sendableEntity is the queue or topic at a sender link's address, which the connection may
// send to.
func (cs *conn) sendableEntity(ctx context.Context, addr string) (*broker.Entity, *amqp.Error) {
	path, sq := entityAddress(addr)
	if aerr := cs.authorize(sas.Send, path); aerr != nil {
		return nil, aerr
	}
	e, aerr := cs.resolve(ctx, path)
	if aerr != nil {
		return nil, aerr
	}
	if sq != broker.SubQueueMain || e.Kind == broker.KindSubscription {
		return nil, amqp.Errorf(condNotAllowed, "Messages cannot be sent to '%s': send to a queue or topic.", broker.Clip(addr))
	}
	return e, nil
}

// lateDetach detaches a link tracked before it was accepted (see conn.track): until set, there
// is nothing to detach.
type lateDetach struct {
	mu     sync.Mutex
	detach func(*amqp.Error) error
}

func (d *lateDetach) set(f func(*amqp.Error) error) {
	d.mu.Lock()
	d.detach = f
	d.mu.Unlock()
}

func (d *lateDetach) call(err *amqp.Error) error {
	d.mu.Lock()
	f := d.detach
	d.mu.Unlock()
	if f == nil {
		return amqp.ErrLinkDetached
	}
	return f(err)
}

// entitySender stores what the peer sends on one link. Deliveries are stored in arrival
// order by one goroutine at a time, those that queued up meanwhile in one store.Send.
type entitySender struct {
	cs   *conn
	path string // the entity the messages go to
	via  string // the entity they go through: path itself, or the link's target for a send-via
	work worker[*amqp.Delivery]
}

func (s *entitySender) untrack() {
	s.cs.untrack(s)
	s.cs.untrack(&s.via)
}

func (s *entitySender) Deliver(l *amqp.ReceiverLink, d *amqp.Delivery) {
	s.cs.txnArrived(d, d.State)
	s.work.add(d, func(batch []*amqp.Delivery) { s.store(l.Conn().Context(), l, batch) })
}

func (s *entitySender) ReceiverDetached(*amqp.ReceiverLink, error) { s.untrack() }

// worker runs what a link queues, in order, on one goroutine at a time: everything that queued
// up while the last batch ran is the next batch. The goroutine stays a while once the queue is
// empty (workerLinger), for the link's next items: starting one per batch, its stack grew anew
// through the store's calls every time, 5-7% of the gateway's CPU over AMQP with 64 links.
type worker[T any] struct {
	mu      sync.Mutex
	queue   []T
	running bool
	kick    chan struct{}
}

// workerLinger is how long a link's worker waits for more once its queue is empty.
const workerLinger = 100 * time.Millisecond

// add queues item; run is what the worker does with a batch (the same for every item of a link).
func (w *worker[T]) add(item T, run func([]T)) {
	w.mu.Lock()
	w.queue = append(w.queue, item)
	start := !w.running
	w.running = true
	if w.kick == nil {
		w.kick = make(chan struct{}, 1)
	}
	kick := w.kick
	w.mu.Unlock()
	if start {
		go w.run(run)
		return
	}
	select {
	case kick <- struct{}{}:
	default:
	}
}

func (w *worker[T]) run(run func([]T)) {
	var linger *time.Timer
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		kick := w.kick
		w.mu.Unlock()
		if len(batch) > 0 {
			run(batch)
			continue
		}
		if linger == nil {
			linger = time.NewTimer(workerLinger)
		} else {
			linger.Reset(workerLinger)
		}
		select {
		case <-kick:
			linger.Stop()
		case <-linger.C:
			w.mu.Lock()
			if len(w.queue) == 0 {
				w.running = false
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
		}
	}
}

// store stores a run of deliveries: each delivery's messages atomically, and the deliveries
// together in one store.Send when they all decode; when that fails, one by one, so each gets
// its own outcome.
func (s *entitySender) store(ctx context.Context, l *amqp.ReceiverLink, batch []*amqp.Delivery) {
	aerr := s.cs.authorize(sas.Send, s.path)
	if aerr == nil && s.via != s.path {
		aerr = s.cs.authorize(sas.Send, s.via)
	}
	if aerr != nil {
		for _, d := range batch {
			s.reject(d, aerr)
		}
		_ = l.Detach(aerr)
		return
	}
	e, aerr := s.cs.resolve(ctx, s.path)
	if aerr != nil {
		for _, d := range batch {
			s.reject(d, aerr)
		}
		return
	}
	type item struct {
		d    *amqp.Delivery
		msgs []broker.Message
	}
	items := make([]item, 0, len(batch))
	var all []broker.Message
	for _, d := range batch {
		msgs, err := deliveryMessages(d)
		if err != nil {
			s.reject(d, amqpError(err))
			continue
		}
		if d.State != nil {
			s.storeInTxn(ctx, l, d, e, msgs)
			continue
		}
		items = append(items, item{d, msgs})
		all = append(all, msgs...)
	}
	if len(items) > 1 {
		if err := s.cs.h.cfg.Store.Send(ctx, e, all); err == nil {
			for _, it := range items {
				_ = it.d.Accept()
			}
			return
		}
	}
	for _, it := range items {
		if err := s.cs.h.cfg.Store.Send(ctx, e, it.msgs); err != nil {
			_ = it.d.Reject(amqpError(err))
			continue
		}
		_ = it.d.Accept()
	}
}

// storeInTxn records the messages of a delivery sent in a transaction in it, once they pass the
// checks of a send: they are stored when it commits.
func (s *entitySender) storeInTxn(ctx context.Context, l *amqp.ReceiverLink, d *amqp.Delivery, e *broker.Entity, msgs []broker.Message) {
	ts, ok := d.State.(amqp.TransactionalState)
	if !ok {
		s.reject(d, amqp.Errorf(condInvalidField, "A transfer's state is a transactional-state or none."))
		return
	}
	t, aerr := s.cs.txnOf(ts)
	if aerr == nil {
		if err := s.cs.h.cfg.Store.CheckSend(ctx, e, msgs); err != nil {
			aerr = amqpError(err)
		} else {
			aerr = t.addSends(s.cs, s.via, l.Session(), broker.TxSend{Entity: e, Messages: msgs}, len(d.Payload))
		}
	}
	if aerr != nil {
		s.reject(d, aerr)
		return
	}
	_ = d.Settle(amqp.TransactionalState{TxnID: bytes.Clone(ts.TxnID), Outcome: amqp.Accepted{}})
	s.cs.txnRecorded(d)
}

// reject refuses a delivery; one sent in a transaction dooms it (doomState).
func (s *entitySender) reject(d *amqp.Delivery, aerr *amqp.Error) {
	_ = d.Reject(aerr)
	s.cs.doomState(d.State, aerr)
	s.cs.txnRecorded(d)
}

// deliveryMessages decodes a delivery: one message, or for a batch (message format
// 0x80013700) the messages encoded in its data sections.
func deliveryMessages(d *amqp.Delivery) ([]broker.Message, error) {
	// The body is kept as it was encoded: checked, never built (amqp.UnmarshalKeepingBody).
	m, err := amqp.UnmarshalKeepingBody(d.Payload)
	if err != nil {
		return nil, &amqp.Error{Condition: amqp.ErrCondDecodeError, Description: "The message could not be decoded."}
	}
	if d.MessageFormat != amqp.MessageFormatBatch {
		sm, err := toStore(m)
		if err != nil {
			return nil, err
		}
		return []broker.Message{sm}, nil
	}
	if len(m.Data) == 0 {
		return nil, &amqp.Error{Condition: condInvalidField, Description: "The batch contains no messages."}
	}
	msgs := make([]broker.Message, 0, len(m.Data))
	for i, data := range m.Data {
		inner, err := amqp.UnmarshalKeepingBody(data)
		if err != nil {
			return nil, &amqp.Error{Condition: amqp.ErrCondDecodeError, Description: fmt.Sprintf("Message %d of the batch could not be decoded.", i+1)}
		}
		sm, err := toStore(inner)
		if err != nil {
			return nil, unsupported("message %d of the batch: %s", i+1, err.Error())
		}
		msgs = append(msgs, sm)
	}
	return msgs, nil
}

// attachEntityReceiver answers a link on which the peer receives from a queue, a
// subscription or a dead-letter subqueue.
func (cs *conn) attachEntityReceiver(req *amqp.AttachRequest) {
	path, sq := entityAddress(req.SourceAddress())
	authPath := path
	if sq == broker.SubQueueDeadLetter {
		authPath = path + "/$DeadLetterQueue"
	}
	if aerr := cs.authorize(sas.Listen, authPath); aerr != nil {
		_ = req.Refuse(aerr)
		return
	}
	e, aerr := cs.resolve(req.Context(), path)
	if aerr != nil {
		_ = req.Refuse(aerr)
		return
	}
	if e.Kind == broker.KindTopic {
		_ = req.Refuse(amqp.Errorf(condNotAllowed, "Messages cannot be received from topic '%s': receive from a subscription.", e.Path))
		return
	}
	filter, hasFilter := req.Filter().Get(sessionFilter)
	if hasFilter && (!e.Props.RequiresSession || sq != broker.SubQueueMain) {
		_ = req.Refuse(amqp.Errorf(condNotAllowed, "'%s' does not hold sessions: receive without a session.", req.SourceAddress()))
		return
	}
	if !hasFilter && e.Props.RequiresSession && sq == broker.SubQueueMain {
		_ = req.Refuse(amqp.Errorf(condNotAllowed, "It is not possible for an entity that requires sessions to create a non-sessionful message receiver. "+
			"'%s' requires sessions: accept a session to receive.", e.Path))
		return
	}
	var opts amqp.SenderOptions
	var lock *broker.SessionLock
	if hasFilter {
		var aerr *amqp.Error
		if lock, opts, aerr = cs.acceptSession(req, e, filter); aerr != nil {
			_ = req.Refuse(aerr)
			return
		}
	}
	mode := broker.PeekLock
	if req.Attach().SndSettleMode == amqp.SenderSettleModeSettled {
		mode = broker.ReceiveAndDelete
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Conn().Context()))
	r := &entityReceiver{
		cs: cs, path: e.Path, authPath: authPath, sq: sq, mode: mode, session: lock,
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		unsettled: map[uuid.UUID]struct{}{}, settled: make(chan struct{}, 1),
	}
	var detach lateDetach
	cs.track(r, authPath, sas.Listen, detach.call)
	l, err := req.AcceptSender(r, opts)
	if err != nil {
		cs.untrack(r)
		cancel()
		if lock != nil {
			cs.releaseSession(e, *lock, nil)
		}
		return
	}
	detach.set(l.Detach)
	r.settling.Add(1) // a session's release waits for the pump to give back what it holds
	go r.pump(l)
}

const (
	sessionFilter           amqp.Symbol = "com.microsoft:session-filter"
	propMaxMessageBatchSize amqp.Symbol = "com.microsoft:max-message-batch-size"
)

// entityReceiver feeds one receive link from the store: while the peer grants credit, one
// store receive for up to that many messages waits at a time.
type entityReceiver struct {
	cs       *conn
	path     string
	authPath string
	sq       broker.SubQueue
	mode     broker.ReceiveMode
	session  *broker.SessionLock // nil outside a session
	ctx      context.Context
	cancel   context.CancelFunc
	wake     chan struct{}

	mu         sync.Mutex
	stopWait   context.CancelFunc // ends the store receive under way, for a drain
	waitActive bool
	// held are messages received but not yet sent: the peer lowered its credit meanwhile.
	held []outgoing
	// deleted is how many of the first held messages a receive-and-delete link has completed
	// already (deleteSendable): those, and only those, it may send.
	deleted int
	// settling counts the peer's settlements under way (Disposition) and the pump until it has
	// given back what it held, which a session's release waits for: released first, the
	// session would look empty to the next accept while messages come back into it.
	settling sync.WaitGroup
	// unsettled are the lock tokens of the peek-locked deliveries the link sent (or is
	// sending) whose outcome is not made yet (guarded by mu); each outcome made signals settled.
	unsettled map[uuid.UUID]struct{}
	settled   chan struct{}
	// outcomes are the peer's dispositions waiting to be applied: all that are waiting are
	// applied together, in one store.Settle (applyOutcomes).
	outcomes worker[outcome]
}

// outcome is a disposition of the peer's, waiting to be applied.
type outcome struct {
	l       *amqp.SenderLink
	d       *amqp.OutgoingDelivery
	state   amqp.DeliveryState
	settled bool
	tracked bool // counted in settling
}

func (r *entityReceiver) Flow(l *amqp.SenderLink, credit uint32, drain bool) {
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if drain {
		r.mu.Lock()
		if r.waitActive {
			r.stopWait()
		}
		r.mu.Unlock()
	}
}

func (r *entityReceiver) SenderDetached(*amqp.SenderLink, error) {
	r.cs.untrack(r)
	r.cancel()
	if r.session != nil {
		if t, aerr := r.target(context.WithoutCancel(r.ctx)); aerr == nil {
			r.cs.releaseSession(t.Entity, *r.session, &r.settling)
		}
	}
}

func (r *entityReceiver) target(ctx context.Context) (broker.Target, *amqp.Error) {
	e, aerr := r.cs.resolve(ctx, r.path)
	if aerr != nil {
		return broker.Target{}, aerr
	}
	return broker.Target{Entity: e, SubQueue: r.sq, Session: r.session}, nil
}

// pump receives for the link while it has credit. Every claim is a peek-lock, also for a
// receive-and-delete link: its messages are completed just before they are handed to the
// connection, as many as the credit takes; the others stay locked and are released if the link
// goes (deleteSendable).
func (r *entityReceiver) pump(l *amqp.SenderLink) {
	defer r.settling.Done()
	defer r.giveBack()
	for r.ctx.Err() == nil {
		credit := l.Credit()
		if credit == 0 {
			select {
			case <-r.wake:
			case <-r.ctx.Done():
			}
			continue
		}
		if aerr := r.cs.authorize(sas.Listen, r.authPath); aerr != nil {
			_ = l.Detach(aerr)
			return
		}
		if len(r.held) > 0 {
			if !r.send(l) {
				return
			}
			continue
		}
		t, aerr := r.target(r.ctx)
		if aerr != nil {
			_ = l.Detach(aerr)
			return
		}
		wctx, stop := context.WithCancel(r.ctx)
		r.mu.Lock()
		r.stopWait, r.waitActive = stop, true
		r.mu.Unlock()
		drain := l.Drain()
		wait := r.cs.h.cfg.MaxReceiveWait
		if drain {
			wait = 0
		}
		msgs, err := r.cs.h.cfg.Store.Receive(wctx, broker.ReceiveRequest{
			Target: t, Mode: broker.PeekLock, Max: int(min(credit, broker.MaxReceiveBatch)), Wait: wait,
		})
		r.mu.Lock()
		r.waitActive = false
		r.mu.Unlock()
		stop()
		r.held = append(r.held, r.encode(l, msgs)...)
		if len(r.held) > 0 && !r.send(l) {
			return
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			aerr := amqpError(err)
			if r.session != nil && aerr.Condition == condLockLost {
				aerr.Condition = condSessionLockLost
			}
			_ = l.Detach(aerr)
			return
		}
		if drain && len(msgs) == 0 && err == nil {
			l.CompleteDrain()
		}
	}
}

// outgoing is a message the link received and has not sent yet, encoded as the link sends it.
type outgoing struct {
	m       *broker.Message
	payload []byte
	// unsendable says why the message cannot go on this link: larger than the peer's
	// max-message-size, or not encodable.
	unsendable *amqp.Error
}

// encode prepares received messages for the link: a receive-and-delete delivery carries no lock.
// A message the link cannot carry is marked, not sent: send gives it back and detaches.
func (r *entityReceiver) encode(l *amqp.SenderLink, msgs []*broker.Message) []outgoing {
	out := make([]outgoing, len(msgs))
	for i, m := range msgs {
		am := m
		if r.mode == broker.ReceiveAndDelete {
			plain := *m
			plain.LockToken, plain.LockedUntil = uuid.Nil, time.Time{}
			am = &plain
		}
		b, err := encodeStored(am, time.Time{})
		out[i] = outgoing{m: m, payload: b}
		switch limit := l.MaxMessageSize(); {
		case err != nil:
			r.cs.h.log.Error("amqp: a stored message could not be encoded", "entity", r.path,
				"sequence_number", m.SequenceNumber, "err", err)
			out[i].unsendable = amqp.Errorf(amqp.ErrCondInternalError,
				"The message with sequence number %d could not be encoded; it was abandoned.", m.SequenceNumber)
		case limit > 0 && uint64(len(b)) > limit:
			counted := "the delivery counts toward MaxDeliveryCount"
			if r.sq == broker.SubQueueDeadLetter {
				counted = "it stays in the dead-letter subqueue: receive it on a link that takes it"
			}
			out[i].unsendable = amqp.Errorf(amqp.ErrCondMessageSizeExceeded,
				"The message with sequence number %d is %d bytes, over the link's max-message-size of %d; it was abandoned (%s).",
				m.SequenceNumber, len(b), limit, counted)
		}
	}
	return out
}

// send sends the held messages while the link has credit. Messages that could not be sent are
// released (their delivery uncounted). A message the link cannot carry (encode) is abandoned,
// its delivery counted, once those before it are sent; the others held are released, and once
// the peer has settled what it got (awaitOutcomes) the link is detached with the reason.
// Released, the message would come straight back to the head of the entity and to this link,
// and a receive-and-delete link must not delete what it cannot hand out. Counted, a receiver
// that keeps asking with the same limit sees it dead-lettered at MaxDeliveryCount instead of
// blocking the entity (a dead-letter subqueue keeps it). send reports false when it detached
// the link.
func (r *entityReceiver) send(l *amqp.SenderLink) bool {
	var detach *amqp.Error
	if r.mode == broker.ReceiveAndDelete {
		detach = r.deleteSendable(l)
	}
	var failed []uuid.UUID
	var unsent []*broker.Message // deleted, and their transfer could not be queued
	for len(r.held) > 0 && (r.mode == broker.PeekLock || r.deleted > 0) && r.held[0].unsendable == nil {
		o := r.held[0]
		var err error
		if r.mode == broker.PeekLock {
			// Marked before it goes: the peer's outcome may be made before Send returns.
			r.markUnsettled(o.m.LockToken, true)
			if _, err = l.Send(r.ctx, lockTag(o.m.LockToken), o.payload, nil); err != nil {
				r.markUnsettled(o.m.LockToken, false)
			}
		} else {
			_, err = l.Send(r.ctx, seqTag(o.m.SequenceNumber), o.payload, &amqp.SendOptions{Settled: true})
		}
		if errors.Is(err, amqp.ErrNoCredit) {
			break
		}
		r.held = r.held[1:]
		if r.mode == broker.ReceiveAndDelete {
			r.deleted--
			if err != nil {
				unsent = append(unsent, o.m)
			}
		} else if err != nil {
			failed = append(failed, o.m.LockToken)
		}
	}
	r.restore(unsent)
	r.settleAll(failed, broker.Release)
	if detach == nil && r.deleted == 0 && len(r.held) > 0 && r.held[0].unsendable != nil {
		o := r.held[0]
		r.held = r.held[1:]
		r.settleAll([]uuid.UUID{o.m.LockToken}, broker.Abandon)
		r.giveBack()
		r.awaitOutcomes(l)
		detach = o.unsendable
	}
	if detach != nil {
		r.giveBack() // first: a peer that sees the detach finds the others receivable
		_ = l.Detach(detach)
		return false
	}
	return true
}

// awaitOutcomes waits until the peer's outcomes for the peek-locked deliveries the link sent are
// all made, before the link is detached: an outcome that came after the detach would be
// dropped, and its message redelivered, counted, when its lock ran out. It waits no longer
// than the entity's lock duration (the locks have run out by then, unless renewed) nor past
// the link's end. A drain asked meanwhile is answered at once: nothing more will be sent.
func (r *entityReceiver) awaitOutcomes(l *amqp.SenderLink) {
	t, aerr := r.target(r.ctx)
	if aerr != nil {
		return
	}
	bound := time.NewTimer(t.Entity.Props.LockDuration)
	defer bound.Stop()
	for {
		r.mu.Lock()
		n := len(r.unsettled)
		r.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-r.settled:
		case <-r.wake:
			if l.Drain() {
				l.CompleteDrain()
			}
		case <-r.ctx.Done():
			return
		case <-bound.C:
			return
		}
	}
}

// deleteSendable completes, on a receive-and-delete link, the held messages the link's credit
// lets it send now, before they are sent: Service Bus deletes a message when it hands it out in
// this mode, so a peer that has it must not find it in the entity still (a peek right after the
// receive did). One whose transfer then cannot be queued (the peer detached meanwhile) is put
// back as it was (restore); those the credit does not reach stay locked, and are released if
// the link goes first. A message whose lock was lost meanwhile is not sent (another receiver may have it).
// When a completion fails otherwise (the database is away) it returns the error the link is to
// be detached with, once the messages deleted so far are sent: sending one without its
// deletion could hand it out twice.
func (r *entityReceiver) deleteSendable(l *amqp.SenderLink) *amqp.Error {
	from := r.deleted // deleted already, not sent yet: the credit goes to them first
	n := min(len(r.held), int(l.Credit())) - from
	for i := range max(n, 0) {
		if r.held[from+i].unsendable != nil { // it stays locked: send abandons it
			n = i
			break
		}
	}
	if n <= 0 || r.ctx.Err() != nil {
		return nil
	}
	t, aerr := r.target(r.ctx)
	if aerr != nil {
		return aerr
	}
	reqs := make([]broker.SettleRequest, n)
	for i, o := range r.held[from : from+n] {
		reqs[i] = broker.SettleRequest{Op: broker.Complete, Token: o.m.LockToken}
	}
	kept := append(make([]outgoing, 0, len(r.held)), r.held[:from]...)
	var locked []outgoing // not deleted: they stay held, and go back when the link does
	var failed *amqp.Error
	for i, res := range r.cs.h.cfg.Store.Settle(context.WithoutCancel(r.ctx), t, reqs) {
		switch {
		case res.Err == nil:
			kept = append(kept, r.held[from+i])
		case errors.Is(res.Err, broker.ErrLockLost):
		default:
			locked = append(locked, r.held[from+i])
			failed = amqpError(res.Err)
		}
	}
	r.deleted = len(kept)
	r.held = slices.Concat(kept, locked, r.held[from+n:])
	return failed
}

// giveBack releases what the link received but could not send before it went (not what a
// receive-and-delete link deleted already: that is gone).
func (r *entityReceiver) giveBack() {
	var toks []uuid.UUID
	for _, o := range r.held[r.deleted:] {
		toks = append(toks, o.m.LockToken)
	}
	unsent := make([]*broker.Message, r.deleted)
	for i, o := range r.held[:r.deleted] {
		unsent[i] = o.m
	}
	r.held, r.deleted = nil, 0
	r.restore(unsent)
	r.settleAll(toks, broker.Release)
}

// restore puts back messages a receive-and-delete link deleted to send and then could not
// send (the peer detached, the connection went): the peer never had them. Only a crash of
// the gateway between the deletion and the send loses a message, which is what the mode
// allows.
func (r *entityReceiver) restore(msgs []*broker.Message) {
	if len(msgs) == 0 {
		return
	}
	ctx := context.WithoutCancel(r.ctx)
	t, aerr := r.target(ctx)
	if aerr == nil {
		var n int
		var err error
		if n, err = r.cs.h.cfg.Store.Restore(ctx, t, msgs); err == nil {
			r.cs.h.log.Debug("amqp receive-and-delete: messages deleted but not sent were put back", "entity", r.path, "count", n)
			return
		}
		aerr = amqpError(err)
	}
	r.cs.h.log.Error("amqp receive-and-delete: messages deleted but not sent are lost", "entity", r.path,
		"count", len(msgs), "first_sequence_number", msgs[0].SequenceNumber, "err", aerr)
}

func (r *entityReceiver) settleAll(toks []uuid.UUID, op broker.Settlement) {
	if len(toks) == 0 {
		return
	}
	ctx := context.WithoutCancel(r.ctx)
	t, aerr := r.target(ctx)
	if aerr != nil {
		return
	}
	reqs := make([]broker.SettleRequest, len(toks))
	for i, tok := range toks {
		reqs[i] = broker.SettleRequest{Op: op, Token: tok}
	}
	for _, res := range r.cs.h.cfg.Store.Settle(ctx, t, reqs) {
		if res.Err != nil {
			r.cs.h.log.Warn("amqp settlement of a message the link took failed", "entity", r.path, "op", op, "err", res.Err)
		}
	}
}

// modifications reads the properties to modify of a settlement: the message annotations of a
// modified outcome, the info of a rejected one (without the dead-letter reason and description,
// when deadLetter) or update-disposition's properties-to-modify. Keys are strings (or symbols);
// values keep their types as on a send. nil when there are none.
func modifications(m amqp.Map, deadLetter bool) (broker.UserProperties, error) {
	var props broker.UserProperties
	for _, e := range m {
		name, ok := e.Key.(string)
		if s, isSym := e.Key.(amqp.Symbol); isSym {
			name, ok = string(s), true
		}
		if !ok {
			return nil, badField("the names of properties to modify must be strings, not %T", e.Key)
		}
		if deadLetter && (name == propDeadLetterReason || name == propDeadLetterDescription) {
			continue
		}
		v, err := userValue(name, e.Value)
		if err != nil {
			return nil, err
		}
		props = append(props, broker.Property{Name: name, Value: v})
	}
	return props, nil
}

// deadLetterFields are the dead-letter reason and description of a rejected outcome's info.
func deadLetterFields(info amqp.Map) (reason, description string) {
	for _, e := range info {
		k, _ := e.Key.(string)
		if s, ok := e.Key.(amqp.Symbol); ok {
			k = string(s)
		}
		v, _ := e.Value.(string)
		switch k {
		case propDeadLetterReason:
			reason = v
		case propDeadLetterDescription:
			description = v
		}
	}
	return reason, description
}

// seqTag is the delivery tag of a receive-and-delete delivery, which has no lock token.
func seqTag(seq int64) []byte {
	b := make([]byte, 8)
	for i := range 8 {
		b[7-i] = byte(seq >> (8 * i))
	}
	return b
}

// markUnsettled adds a sent delivery's lock token to those waiting for the peer's outcome, or
// takes it out.
func (r *entityReceiver) markUnsettled(tok uuid.UUID, waiting bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if waiting {
		r.unsettled[tok] = struct{}{}
	} else {
		delete(r.unsettled, tok)
	}
}

// isOutcome reports whether a delivery state is an outcome, not a peer's progress report
// (received).
func isOutcome(state amqp.DeliveryState) bool {
	switch st := state.(type) {
	case amqp.Accepted, amqp.Rejected, amqp.Released, amqp.Modified:
		return true
	case amqp.TransactionalState:
		return isOutcome(st.Outcome)
	}
	return false
}

// Disposition applies the peer's outcome for a peek-locked delivery to its lock. The outcomes of
// a link are applied as they came, those that came while others were being applied together in
// one store.Settle, as a link's sends are stored (entitySender): a goroutine and a store job per
// outcome cost more than the settlement itself (a peer that settles one message at a time with
// 20 prefetched keeps up to 20 outcomes in flight).
func (r *entityReceiver) Disposition(l *amqp.SenderLink, d *amqp.OutgoingDelivery, state amqp.DeliveryState, settled bool) {
	// The engine calls Disposition and SenderDetached one after the other: one that comes after
	// the link ended (its context cancelled) has no release waiting for it.
	r.cs.txnArrived(d, state)
	o := outcome{l: l, d: d, state: state, settled: settled, tracked: r.ctx.Err() == nil}
	if o.tracked {
		r.settling.Add(1)
	}
	r.outcomes.add(o, r.applyOutcomes)
}

// applyOutcomes applies a batch of outcomes and answers each.
func (r *entityReceiver) applyOutcomes(batch []outcome) {
	if batch = r.txnOutcomes(batch); len(batch) == 0 {
		return
	}
	errs := r.settleOutcomes(batch)
	for i, o := range batch {
		r.answer(o, errs[i])
	}
}

// answer tells the peer how its outcome went, once it was applied with the error err.
func (r *entityReceiver) answer(o outcome, err error) {
	if o.tracked {
		defer r.settling.Done()
	}
	d, state := o.d, o.state
	if tok, ok := tagLock(d.Tag()); ok && (o.settled || isOutcome(state)) {
		r.markUnsettled(tok, false)
		select {
		case r.settled <- struct{}{}:
		default:
		}
	}
	if o.settled {
		// The peer settled first and awaits no outcome. A settlement that could not be made
		// because its lock is gone is what the mode accepts (the message comes back); one the
		// broker refuses (a bad request: properties it cannot keep, a state that is no
		// outcome) must not vanish, so the link is detached with why.
		_, inTxn := state.(amqp.TransactionalState)
		if err != nil && broker.ErrorCode(err) != broker.CodeLockLost && !inTxn {
			// (One made in a transaction is not: its failure dooms the transaction, whose
			// discharge reports it.)
			if aerr := amqpError(err); aerr.Condition != condLockLost {
				_ = o.l.Detach(aerr)
			}
		}
		return
	}
	if err != nil {
		_ = d.Settle(amqp.Rejected{Error: amqpError(err)})
		return
	}
	_ = d.Settle(confirmation(state))
}

// confirmation is the state that confirms an outcome made (or, in a transaction, recorded). A
// dead-letter is confirmed by a rejected outcome without an error: the SDKs read an error there
// as the settlement's failure.
func confirmation(state amqp.DeliveryState) amqp.DeliveryState {
	switch st := state.(type) {
	case amqp.Rejected:
		return amqp.Rejected{}
	case amqp.TransactionalState:
		return amqp.TransactionalState{TxnID: bytes.Clone(st.TxnID), Outcome: confirmation(st.Outcome)}
	}
	return state
}

// settleOutcomes applies outcomes to their locks, in one store.Settle, and returns each one's
// error.
func (r *entityReceiver) settleOutcomes(outcomes []outcome) []error {
	errs := make([]error, len(outcomes))
	reqs := make([]broker.SettleRequest, 0, len(outcomes))
	index := make([]int, 0, len(outcomes)) // of each request's outcome
	for i, o := range outcomes {
		req, err := settleRequest(o.d.Tag(), o.state)
		if err != nil {
			errs[i] = err
			continue
		}
		reqs = append(reqs, req)
		index = append(index, i)
	}
	if len(reqs) == 0 {
		return errs
	}
	// The link may be gone by now: its peer's outcomes are made all the same.
	ctx := context.WithoutCancel(r.ctx)
	t, aerr := r.target(ctx)
	if aerr != nil {
		for _, i := range index {
			errs[i] = aerr
		}
		return errs
	}
	for k, res := range r.cs.h.cfg.Store.Settle(ctx, t, reqs) {
		errs[index[k]] = res.Err
	}
	return errs
}

// settleRequest is the settlement a disposition of the delivery tagged tag asks for.
func settleRequest(tag []byte, state amqp.DeliveryState) (broker.SettleRequest, error) {
	tok, ok := tagLock(tag)
	if !ok {
		return broker.SettleRequest{}, amqp.Errorf(condInvalidField, "The delivery tag is not a lock token.")
	}
	req := broker.SettleRequest{Token: tok}
	switch st := state.(type) {
	case amqp.Accepted:
		req.Op = broker.Complete
	case amqp.Released:
		req.Op = broker.Release
	case amqp.Modified:
		// Abandon counts the delivery whatever delivery-failed says: Java leaves it null.
		req.Op = broker.Abandon
		if st.UndeliverableHere {
			req.Op = broker.Defer
		}
		var err error
		if req.PropertiesToModify, err = modifications(st.MessageAnnotations, false); err != nil {
			return req, err
		}
	case amqp.Rejected:
		req.Op = broker.DeadLetter
		if st.Error != nil {
			// .NET puts the properties to modify in the error's info beside the reason and
			// description (AmqpReceiver.GetRejectedOutcome).
			var err error
			if req.PropertiesToModify, err = modifications(st.Error.Info, true); err != nil {
				return req, err
			}
			req.Reason, req.Description = deadLetterFields(st.Error.Info)
		}
	default:
		return req, unsupported("the delivery state %T is not a settlement", state)
	}
	return req, nil
}
