package amqp

import (
	"context"
	"fmt"
	"log/slog"
	"unicode/utf8"
)

type linkState uint8

const (
	linkPending    linkState = iota // attached by the peer, not yet answered
	linkAttached                    // answered with a terminus
	linkDetachSent                  // we sent detach (or refused), waiting for the peer's
	linkGone
)

// linkEndpoint is a *ReceiverLink or a *SenderLink.
type linkEndpoint interface {
	base() *link
}

// link is what both kinds of link endpoint share. Guarded by the connection's mutex.
type link struct {
	sess       *Session
	name       string
	peerHandle uint32
	handle     uint32
	hasHandle  bool
	state      linkState
	peerAttach *Attach
	reply      *Attach
	req        *AttachRequest // while pending
	accepted   bool
	reported   bool
	detachErr  error

	deliveryCount uint32
	credit        uint32
	// attachBytes is the encoded size of the peer's attach, counted in Conn.attachBytes.
	attachBytes int
}

func (l *link) base() *link { return l }

// refusalAttach is the attach that answers a link the server will not serve: the terminus
// the peer asked of us is absent, which tells the peer a detach with the reason follows.
func (l *link) refusalAttach() *Attach {
	a := &Attach{
		Name:          l.name,
		Handle:        l.handle,
		Role:          !l.peerAttach.Role,
		SndSettleMode: l.peerAttach.SndSettleMode,
		RcvSettleMode: l.peerAttach.RcvSettleMode,
	}
	if l.peerAttach.Role == RoleSender {
		// We would have been the receiver: our target is what is missing.
		a.Source = l.peerAttach.Source
	} else {
		a.Target = l.peerAttach.Target
		var zero uint32
		a.InitialDeliveryCount = &zero
	}
	return a
}

// detachLocked detaches the link with err (nil for a clean detach); the link waits for the
// peer's detach.
func (l *link) detachLocked(err *Error) {
	if l.state != linkAttached {
		return
	}
	s := l.sess
	l.state = linkDetachSent
	if err != nil {
		l.detachErr = err
		s.conn.log.Info("amqp: detaching link", append(sloggedError(err), slog.String("link", l.name))...)
	}
	if sl, ok := s.handles[l.handle].(*SenderLink); ok && sl.queued > 0 {
		s.dropQueueLocked(sl)
	}
	_ = s.conn.sendLocked(s.channel, &Detach{Handle: l.handle, Closed: true, Error: err})
}

// checkLocked returns the error for operations on a link that is no longer attached.
func (l *link) checkLocked() error {
	if err := l.sess.checkLocked(); err != nil {
		return err
	}
	if l.state != linkAttached {
		return ErrLinkDetached
	}
	return nil
}

func sloggedError(e *Error) []any {
	return []any{slog.String("condition", string(e.Condition)), slog.String("description", e.Description)}
}

// AttachRequest is a link the peer attached, waiting for the handler's answer: exactly one
// of AcceptReceiver, AcceptSender or Refuse, from any goroutine. Its methods are safe for
// concurrent use.
type AttachRequest struct {
	sess   *Session
	attach *Attach
	rl     *ReceiverLink
	sl     *SenderLink
	ctx    context.Context
	cancel context.CancelFunc

	// Guarded by the connection's mutex.
	answered  bool
	abandoned bool
}

func contextWithCancel(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(parent)
}

// Context returns a context cancelled once the request is answered or can no longer be
// answered (the peer detached the link, the session or the connection ended). Work done to
// decide the attach should use it.
func (r *AttachRequest) Context() context.Context { return r.ctx }

// Conn returns the connection of the link.
func (r *AttachRequest) Conn() *Conn { return r.sess.conn }

// Session returns the session of the link.
func (r *AttachRequest) Session() *Session { return r.sess }

// Attach returns the peer's attach performative. It must not be modified.
func (r *AttachRequest) Attach() *Attach { return r.attach }

// Name returns the link's name.
func (r *AttachRequest) Name() string { return r.attach.Name }

// PeerRole returns the peer's role: RoleSender when the peer will send (answer with
// AcceptReceiver), RoleReceiver when it will receive (answer with AcceptSender).
func (r *AttachRequest) PeerRole() Role { return r.attach.Role }

// SourceAddress returns the address of the peer's source terminus ("" when absent).
func (r *AttachRequest) SourceAddress() string {
	if r.attach.Source == nil {
		return ""
	}
	return r.attach.Source.Address
}

// TargetAddress returns the address of the peer's target terminus ("" when absent).
func (r *AttachRequest) TargetAddress() string {
	if r.attach.Target == nil {
		return ""
	}
	return r.attach.Target.Address
}

// Filter returns the filter map of the peer's source terminus (nil when absent).
func (r *AttachRequest) Filter() Map {
	if r.attach.Source == nil {
		return nil
	}
	return r.attach.Source.Filter
}

// Properties returns the link properties of the peer's attach (nil when absent).
func (r *AttachRequest) Properties() Map { return r.attach.Properties }

func (r *AttachRequest) checkLocked() error {
	switch {
	case r.answered:
		return ErrAnswered
	case r.sess.conn.closing:
		return ErrConnClosed
	case r.sess.state != sessionActive:
		return ErrSessionEnded
	case r.abandoned:
		return ErrLinkDetached
	}
	return nil
}

// abandonLocked marks a request that can no longer be answered.
func (r *AttachRequest) abandonLocked() {
	r.abandoned = true
	r.cancel()
}

// ReceiverOptions is what the attach reply of a link on which the server receives carries.
// Nil and zero fields take the defaults noted.
type ReceiverOptions struct {
	// Source and Target replace the termini echoed to the peer (default: the peer's).
	// Coordinator replaces the peer's coordinator target (a transaction controller's link),
	// for example with the transaction capabilities the server supports.
	Source      *Source
	Target      *Target
	Coordinator *Coordinator
	// MaxMessageSize is advertised and enforced (a larger delivery detaches the link with
	// amqp:link:message-size-exceeded); default Options.MaxMessageSize.
	MaxMessageSize uint64
	// Credit is how many deliveries the handler holds unsettled at most: the engine grants
	// credit up to it and renews it as deliveries are settled; default Options.Credit.
	Credit uint32
	// RcvSettleMode is the server's settlement mode (default: what the peer asked).
	RcvSettleMode *ReceiverSettleMode
	// SndSettleMode echoes the peer's sender settlement mode unless set.
	SndSettleMode       *SenderSettleMode
	Properties          Map
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
}

// SenderOptions is what the attach reply of a link on which the server sends carries.
type SenderOptions struct {
	// Source and Target replace the termini echoed to the peer (default: the peer's). A
	// Service Bus session receiver's source echoes the session filter with the session id
	// chosen: copy the peer's source and set the filter's value.
	Source *Source
	Target *Target
	// SndSettleMode is the server's settlement mode (default: what the peer asked).
	SndSettleMode *SenderSettleMode
	// RcvSettleMode echoes the peer's receiver settlement mode unless set.
	RcvSettleMode *ReceiverSettleMode
	// InitialDeliveryCount is the link's first delivery-count; default 0.
	InitialDeliveryCount uint32
	// MaxMessageSize is announced in the attach (informational for this direction).
	MaxMessageSize      uint64
	Properties          Map
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
}

// AcceptReceiver accepts a link on which the peer sends: the engine answers the attach with
// opts, grants credit, and calls h for the link's events. It returns ErrWrongRole when the
// peer is not a sender, ErrAnswered, ErrLinkDetached (the peer detached meanwhile),
// ErrSessionEnded or ErrConnClosed when the request can no longer be accepted, and an error
// wrapping ErrEncode when opts cannot be encoded (the request then stays unanswered).
func (r *AttachRequest) AcceptReceiver(h ReceiverHandler, opts ReceiverOptions) (*ReceiverLink, error) {
	c := r.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.rl == nil && r.checkLocked() == nil {
		return nil, fmt.Errorf("%w: the peer receives on link %q", ErrWrongRole, r.attach.Name)
	}
	maxSize := c.opts.MaxMessageSize
	if opts.MaxMessageSize != 0 {
		maxSize = opts.MaxMessageSize
	}
	reply, err := r.answerLocked(r.rl, attachReply{role: RoleReceiver, source: opts.Source, target: opts.Target, coordinator: opts.Coordinator,
		snd: opts.SndSettleMode, rcv: opts.RcvSettleMode, maxMessageSize: maxSize,
		properties: opts.Properties, offered: opts.OfferedCapabilities, desired: opts.DesiredCapabilities})
	if err != nil {
		return nil, err
	}
	l := r.rl
	l.h = h
	l.maxMessageSize = reply.MaxMessageSize
	l.window = c.opts.Credit
	if opts.Credit != 0 {
		l.window = opts.Credit
	}
	if pa := r.attach; pa.InitialDeliveryCount != nil {
		l.deliveryCount = *pa.InitialDeliveryCount
	}
	l.credit = l.window
	r.sess.sendFlowLocked(l)
	return l, nil
}

// AcceptSender accepts a link on which the peer receives: the engine answers the attach
// with opts and calls h for the link's events. Credit the peer granted before the answer is
// reported by a Flow call that follows. Errors as for AcceptReceiver.
func (r *AttachRequest) AcceptSender(h SenderHandler, opts SenderOptions) (*SenderLink, error) {
	c := r.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.sl == nil && r.checkLocked() == nil {
		return nil, fmt.Errorf("%w: the peer sends on link %q", ErrWrongRole, r.attach.Name)
	}
	idc := opts.InitialDeliveryCount
	_, err := r.answerLocked(r.sl, attachReply{role: RoleSender, source: opts.Source, target: opts.Target,
		snd: opts.SndSettleMode, rcv: opts.RcvSettleMode, maxMessageSize: opts.MaxMessageSize, initialDeliveryCount: &idc,
		properties: opts.Properties, offered: opts.OfferedCapabilities, desired: opts.DesiredCapabilities})
	if err != nil {
		return nil, err
	}
	l := r.sl
	l.h = h
	l.deliveryCount = idc
	l.peerMaxMessageSize = r.attach.MaxMessageSize
	if f := l.pendingFlow; f != nil {
		l.pendingFlow = nil
		l.onFlowLocked(f)
	}
	return l, nil
}

// attachReply is what the server's attach answer carries beyond what it echoes of the peer's;
// nil termini and settle modes echo the peer's.
type attachReply struct {
	role                 Role
	source               *Source
	target               *Target
	coordinator          *Coordinator
	snd                  *SenderSettleMode
	rcv                  *ReceiverSettleMode
	maxMessageSize       uint64
	initialDeliveryCount *uint32
	properties           Map
	offered, desired     []Symbol
}

// answerLocked gives link e (the request's endpoint of the chosen role) a handle, sends the
// attach answer built from a, and marks the link attached and the request answered. A
// receiver's answer echoes the peer's coordinator unless a replaces the target.
func (r *AttachRequest) answerLocked(e linkEndpoint, a attachReply) (*Attach, error) {
	if err := r.checkLocked(); err != nil {
		return nil, err
	}
	s := r.sess
	handle, ok := s.allocHandleLocked(e)
	if !ok {
		return nil, r.refuseLocked(Errorf(ErrCondResourceLimitExceeded, "no link handle left"))
	}
	pa := r.attach
	reply := &Attach{
		Name:                 pa.Name,
		Handle:               handle,
		Role:                 a.role,
		SndSettleMode:        pa.SndSettleMode,
		RcvSettleMode:        pa.RcvSettleMode,
		Source:               pa.Source,
		Target:               pa.Target,
		InitialDeliveryCount: a.initialDeliveryCount,
		MaxMessageSize:       a.maxMessageSize,
		OfferedCapabilities:  a.offered,
		DesiredCapabilities:  a.desired,
		Properties:           a.properties,
	}
	if a.role == RoleReceiver && a.target == nil && pa.Coordinator != nil {
		reply.Coordinator = pa.Coordinator
		if a.coordinator != nil {
			reply.Coordinator = a.coordinator
		}
	}
	if a.source != nil {
		reply.Source = a.source
	}
	if a.target != nil {
		reply.Target = a.target
	}
	if a.snd != nil {
		reply.SndSettleMode = *a.snd
	}
	if a.rcv != nil {
		reply.RcvSettleMode = *a.rcv
	}
	l := e.base()
	if err := s.conn.sendLocked(s.channel, reply); err != nil {
		delete(s.handles, handle)
		l.hasHandle = false
		return nil, fmt.Errorf("attach reply for link %q: %w", pa.Name, err)
	}
	l.reply, l.state, l.accepted, l.req = reply, linkAttached, true, nil
	r.answered = true
	r.cancel()
	return reply, nil
}

// Refuse refuses the link with err (an *Error such as amqp:not-found or
// amqp:unauthorized-access): the engine answers the attach without the terminus the peer
// asked for, then detaches the link with err, as the specification describes and the SDKs
// expect. Errors as for AcceptReceiver.
func (r *AttachRequest) Refuse(err *Error) error {
	c := r.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := r.checkLocked(); e != nil {
		return e
	}
	return r.refuseLocked(err)
}

func (r *AttachRequest) refuseLocked(err *Error) error {
	s := r.sess
	var e linkEndpoint = r.rl
	if r.sl != nil {
		e = r.sl
	}
	l := e.base()
	if _, ok := s.allocHandleLocked(e); !ok {
		// Not even a handle to answer with: the peer broke its own handle-max.
		s.endLocked(Errorf(ErrCondResourceLimitExceeded, "no link handle left"))
		return nil
	}
	if err == nil {
		err = &Error{Condition: ErrCondInternalError}
	}
	if e := s.conn.sendLocked(s.channel, l.refusalAttach()); e != nil {
		return e
	}
	_ = s.conn.sendLocked(s.channel, &Detach{Handle: l.handle, Closed: true, Error: err})
	l.req, l.detachErr = nil, err
	r.answered = true
	r.cancel()
	// Nothing of a refused link is kept but its handle, until the peer detaches it.
	s.forgetLinkLocked(e)
	s.refused[l.peerHandle] = struct{}{}
	c := s.conn
	if c.refused++; c.refused > maxRefusedLinks {
		c.closeLocked(Errorf(ErrCondResourceLimitExceeded, "more than %d refused links were not detached", maxRefusedLinks))
	}
	return nil
}

// maxRefusedLinks bounds the refused links of a connection whose handles the peer has not
// detached: a client detaches a refused link at once; one that keeps attaching without doing so
// is closed.
const maxRefusedLinks = 64

// maxErrorDescription bounds the description of an error the server sends (every *Error is
// clipped as it is encoded): refusals quote entity paths and operation names taken from the
// peer, which may be long.
const maxErrorDescription = 1024

// clipError returns e with its description clipped to maxErrorDescription bytes (at a rune
// boundary).
func clipError(e *Error) *Error {
	if e == nil || len(e.Description) <= maxErrorDescription {
		return e
	}
	c := *e
	cut := maxErrorDescription
	for cut > 0 && !utf8.RuneStart(c.Description[cut]) {
		cut--
	}
	c.Description = c.Description[:cut] + "…"
	return &c
}

// ReceiverLink is a link on which the peer sends and the server receives. Its methods are
// safe for concurrent use.
type ReceiverLink struct {
	link
	h              ReceiverHandler
	maxMessageSize uint64
	window         uint32
	held           uint32 // delivered to the handler, not yet settled by it
	cur            *Delivery
	buf            []byte
}

// SenderLink is a link on which the server sends and the peer receives. Its methods are
// safe for concurrent use.
type SenderLink struct {
	link
	h                  SenderHandler
	drain              bool
	peerMaxMessageSize uint64
	queued             int // items in the session's queue
	pendingFlow        *Flow
}

// MaxMessageSize returns the largest message the link accepts (0: no limit): on a
// ReceiverLink the limit the server advertised and enforces, on a SenderLink the peer's.
func (l *ReceiverLink) MaxMessageSize() uint64 { return l.maxMessageSize }

// MaxMessageSize returns the peer's max-message-size (0: no limit); Send refuses larger
// payloads.
func (l *SenderLink) MaxMessageSize() uint64 { return l.peerMaxMessageSize }

func (l *ReceiverLink) onFlowLocked(f *Flow) {
	if f.DeliveryCount != nil {
		// The sender may advance its delivery-count (it had nothing to send): the credit
		// we granted ends at the same delivery-count + credit as before.
		limit := l.deliveryCount + l.credit
		l.deliveryCount = *f.DeliveryCount
		if d := limit - l.deliveryCount; d <= l.window {
			l.credit = d
		} else {
			l.credit = 0
		}
	}
	if f.Echo {
		l.sess.sendFlowLocked(l)
	}
	l.topUpLocked()
}

// topUpLocked renews the link's credit up to its window less the deliveries the handler
// holds, in batches of half the window, so flows stay rare under load.
func (l *ReceiverLink) topUpLocked() {
	if l.state != linkAttached || l.held >= l.window {
		return
	}
	want := l.window - l.held
	if want <= l.credit {
		return
	}
	if l.credit == 0 || want-l.credit >= max(1, l.window/2) {
		l.credit = want
		l.sess.sendFlowLocked(l)
	}
}

// onTransferLocked adds a transfer frame to the delivery in progress and hands complete
// deliveries to the handler.
func (l *ReceiverLink) onTransferLocked(t *Transfer) {
	d := l.cur
	if d == nil {
		switch {
		case t.DeliveryID == nil:
			l.detachLocked(Errorf(ErrCondNotAllowed, "first transfer of a delivery without delivery-id"))
			return
		case t.DeliveryTag == nil:
			l.detachLocked(Errorf(ErrCondNotAllowed, "first transfer of a delivery without delivery-tag"))
			return
		case l.credit == 0:
			l.detachLocked(Errorf(ErrCondTransferLimitExceeded, "transfer without link credit"))
			return
		}
		l.credit--
		l.deliveryCount++
		d = &Delivery{ID: *t.DeliveryID, Tag: t.DeliveryTag, link: l}
		if t.MessageFormat != nil {
			d.MessageFormat = *t.MessageFormat
		}
		l.cur = d
	} else if t.DeliveryID != nil && *t.DeliveryID != d.ID {
		l.detachLocked(Errorf(ErrCondNotAllowed, "transfer of delivery %d while delivery %d is incomplete", *t.DeliveryID, d.ID))
		return
	}
	if t.Settled != nil && *t.Settled {
		d.Settled = true
	}
	if t.State != nil {
		d.State = t.State
	}
	if t.Aborted {
		l.cur, l.buf = nil, l.buf[:0]
		l.topUpLocked()
		return
	}
	if l.maxMessageSize > 0 && uint64(len(l.buf))+uint64(len(t.Payload)) > l.maxMessageSize {
		l.cur, l.buf = nil, nil
		l.detachLocked(Errorf(ErrCondMessageSizeExceeded, "message larger than max-message-size %d", l.maxMessageSize))
		return
	}
	if t.More {
		l.buf = append(l.buf, t.Payload...)
		return
	}
	if len(l.buf) == 0 {
		d.Payload = append(make([]byte, 0, len(t.Payload)), t.Payload...)
	} else {
		d.Payload = append(l.buf, t.Payload...)
		l.buf = nil
	}
	l.cur = nil
	l.held++
	if !d.Settled {
		l.sess.unsettledIn[d.ID] = d
	}
	l.sess.conn.emitLocked(event{kind: evDeliver, rl: l, d: d})
	l.topUpLocked()
}

func (l *SenderLink) onFlowLocked(f *Flow) {
	if l.state == linkPending {
		l.pendingFlow = f.clone()
		return
	}
	if l.state != linkAttached {
		return
	}
	if f.LinkCredit != nil {
		peerCount := l.reply.initialDeliveryCount()
		if f.DeliveryCount != nil {
			peerCount = *f.DeliveryCount
		}
		// credit = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd), in serial
		// arithmetic; a receiver that is behind gets no negative credit.
		if c := peerCount + *f.LinkCredit - l.deliveryCount; c <= *f.LinkCredit {
			l.credit = c
		} else {
			l.credit = 0
		}
	}
	l.drain = f.Drain
	if f.Echo {
		l.sess.queueLinkFlowLocked(l)
	}
	if l.drain && l.credit == 0 {
		// Nothing can be sent: the drain is complete already; say so.
		l.sess.queueLinkFlowLocked(l)
	}
	l.sess.conn.emitLocked(event{kind: evFlow, sl: l, credit: l.credit, drain: l.drain})
}

// clone copies a flow decoded by the reader, whose optional fields point into storage it
// reuses for the next frame.
func (f *Flow) clone() *Flow {
	cp := *f
	for _, p := range []**uint32{&cp.NextIncomingID, &cp.Handle, &cp.DeliveryCount, &cp.LinkCredit, &cp.Available} {
		if *p != nil {
			v := **p
			*p = &v
		}
	}
	return &cp
}

func (a *Attach) initialDeliveryCount() uint32 {
	if a.InitialDeliveryCount == nil {
		return 0
	}
	return *a.InitialDeliveryCount
}

// Drain reports whether the peer's last flow asked for a drain.
func (l *SenderLink) Drain() bool {
	c := l.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	return l.drain
}

// CompleteDrain answers a drain when the handler has nothing more to send now: the link's
// remaining credit is used up (its delivery-count advanced) and the engine sends the flow
// that tells the peer. It returns false, and does nothing, when no drain is pending (no
// drain asked, or the credit is already zero) or the link is not attached.
func (l *SenderLink) CompleteDrain() bool {
	c := l.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.checkLocked() != nil || !l.drain || l.credit == 0 {
		return false
	}
	l.deliveryCount += l.credit
	l.credit = 0
	l.sess.queueLinkFlowLocked(l)
	return true
}

// SendOptions are the per-delivery options of SenderLink.Send.
type SendOptions struct {
	// Settled sends the delivery settled (receive-and-delete). The link's negotiated
	// sender settle mode overrides it when that mode is settled or unsettled.
	Settled bool
	// MessageFormat is the transfer's message-format; default 0.
	MessageFormat uint32
}

// Send sends one delivery: payload is an encoded message (see Marshal), tag its delivery
// tag (at most 32 bytes; Service Bus uses the lock token). It consumes one credit. It does
// not wait for credit or for the peer: it returns ErrNoCredit when the link has none. It
// waits only while the connection's unwritten output is over Options.WriteBufferLimit, until
// ctx is done. The engine keeps payload until it is written; the caller must not modify it.
// It returns ErrInvalidTag, ErrMessageTooLarge (larger than the peer's max-message-size),
// ErrLinkDetached, ErrSessionEnded, ErrConnClosed or ctx's error.
func (l *SenderLink) Send(ctx context.Context, tag, payload []byte, opts *SendOptions) (*OutgoingDelivery, error) {
	if len(tag) > 32 {
		return nil, ErrInvalidTag
	}
	if opts == nil {
		opts = &SendOptions{}
	}
	c := l.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.waitWritableLocked(ctx); err != nil {
		return nil, err
	}
	if err := l.checkLocked(); err != nil {
		return nil, err
	}
	if l.credit == 0 {
		return nil, ErrNoCredit
	}
	if l.peerMaxMessageSize > 0 && uint64(len(payload)) > l.peerMaxMessageSize {
		return nil, fmt.Errorf("%w: %d bytes, the peer accepts %d", ErrMessageTooLarge, len(payload), l.peerMaxMessageSize)
	}
	settled := opts.Settled
	switch l.reply.SndSettleMode {
	case SenderSettleModeSettled:
		settled = true
	case SenderSettleModeUnsettled:
		settled = false
	}
	od := &OutgoingDelivery{link: l, tag: tag, payload: payload, format: opts.MessageFormat, settled: settled}
	l.credit--
	l.deliveryCount++
	l.sess.queueTransferLocked(od)
	if l.drain && l.credit == 0 {
		l.sess.queueLinkFlowLocked(l)
	}
	return od, nil
}

// SendMessage encodes m and sends it as Send does. It also returns an error wrapping
// ErrEncode when m cannot be encoded.
func (l *SenderLink) SendMessage(ctx context.Context, tag []byte, m *Message, opts *SendOptions) (*OutgoingDelivery, error) {
	payload, err := Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("send on link %q: %w", l.name, err)
	}
	return l.Send(ctx, tag, payload, opts)
}

// Delivery is a complete message the peer sent on a ReceiverLink. Its fields are set
// before the handler sees it and not changed by the engine afterwards; its methods are safe
// for concurrent use.
type Delivery struct {
	// ID is the delivery-id (session-scoped).
	ID uint32
	// Tag is the delivery tag.
	Tag []byte
	// MessageFormat is the transfer's message-format: 0 for an ordinary message,
	// MessageFormatBatch for a Service Bus batch.
	MessageFormat uint32
	// Settled reports that the peer sent the delivery settled: there is no outcome to send.
	Settled bool
	// Payload is the encoded message, reassembled from all its transfer frames.
	Payload []byte
	// State is the state the peer's transfer carried, nil when none: a TransactionalState
	// for a message sent in a transaction.
	State DeliveryState

	link *ReceiverLink
	// Guarded by the connection's mutex.
	settledByUs bool
	peerSettled bool
}

// Link returns the link the delivery arrived on.
func (d *Delivery) Link() *ReceiverLink { return d.link }

// Message decodes the payload (each call decodes it again). For MessageFormatBatch the
// returned message's Data sections each hold an encoded message, to decode with Unmarshal.
func (d *Delivery) Message() (*Message, error) {
	m, err := Unmarshal(d.Payload)
	if err != nil {
		return nil, fmt.Errorf("delivery %d on link %q: %w", d.ID, d.link.name, err)
	}
	return m, nil
}

// Settle gives the delivery its outcome (Accepted{}, Rejected{...}, Released{},
// Modified{...}) and frees the credit it took. Dispositions of consecutive deliveries
// settled alike are sent as one frame. For a delivery that arrived settled nothing is sent.
// In receiver settle mode second the outcome is sent unsettled and the peer settles. It
// returns ErrSettled on a second call, ErrLinkDetached, ErrSessionEnded or ErrConnClosed
// when the link is gone (the credit is gone with it), or an error wrapping ErrEncode when
// state cannot be encoded (nothing changes then).
func (d *Delivery) Settle(state DeliveryState) error {
	l := d.link
	c := l.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.settledByUs {
		return ErrSettled
	}
	if err := l.checkLocked(); err != nil {
		d.settledByUs = true
		return err
	}
	if !d.Settled && !d.peerSettled {
		second := l.reply.RcvSettleMode == ReceiverSettleModeSecond
		if err := c.queueDispositionLocked(l.sess.channel, RoleReceiver, d.ID, !second, state); err != nil {
			return err
		}
		if !second {
			delete(l.sess.unsettledIn, d.ID)
		}
	}
	d.settledByUs = true
	l.held--
	l.topUpLocked()
	return nil
}

// Accept settles the delivery as Accepted; see Settle.
func (d *Delivery) Accept() error { return d.Settle(Accepted{}) }

// Reject settles the delivery as Rejected with err; see Settle.
func (d *Delivery) Reject(err *Error) error { return d.Settle(Rejected{Error: err}) }

// Release settles the delivery as Released; see Settle.
func (d *Delivery) Release() error { return d.Settle(Released{}) }

// Modify settles the delivery as m; see Settle.
func (d *Delivery) Modify(m Modified) error { return d.Settle(m) }

// OutgoingDelivery is a delivery the server sent on a SenderLink. Its methods are safe for
// concurrent use.
type OutgoingDelivery struct {
	link    *SenderLink
	tag     []byte
	payload []byte
	format  uint32

	// Guarded by the connection's mutex.
	id          uint32
	started     bool
	offset      int
	settled     bool
	peerSettled bool
	peerState   DeliveryState
}

// Tag returns the delivery tag.
func (d *OutgoingDelivery) Tag() []byte { return d.tag }

// Link returns the link the delivery was sent on.
func (d *OutgoingDelivery) Link() *SenderLink { return d.link }

// Settle settles the delivery with its final state: in receiver settle mode second, the
// outcome the handler applied after the peer's unsettled disposition (the peer's state, or
// another such as Rejected{Error: ...} when it could not be applied). The engine sends a
// settled disposition with state. It returns ErrSettled when the delivery is already
// settled (sent settled, or settled by the peer or by an earlier call), ErrLinkDetached,
// ErrSessionEnded or ErrConnClosed when the link is gone, or an error wrapping ErrEncode
// when state cannot be encoded.
func (d *OutgoingDelivery) Settle(state DeliveryState) error {
	l := d.link
	c := l.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.settled {
		return ErrSettled
	}
	if err := l.checkLocked(); err != nil {
		return err
	}
	if d.started {
		if err := c.queueDispositionLocked(l.sess.channel, RoleSender, d.id, true, state); err != nil {
			return err
		}
		delete(l.sess.unsettledOut, d.id)
	}
	// Not yet on the wire (the peer's window is closed): it goes out settled.
	d.settled = true
	return nil
}
