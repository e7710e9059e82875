package amqp

import (
	"math"
	"sort"
)

// maxAttachBytes bounds the encoded size of the attaches a connection's links hold (each link
// keeps its peer's attach): an attach is typically a few hundred bytes, so this is thousands of
// links; a peer that attaches with huge properties is refused beyond it.
const maxAttachBytes = 4 << 20

// outgoingWindow is the outgoing-window the server announces: it never limits its own
// sending by it (a peer limits it by its incoming-window).
const outgoingWindow = math.MaxInt32

type sessionState uint8

const (
	sessionActive  sessionState = iota
	sessionEndSent              // we sent end, waiting for the peer's
	sessionEnded
)

// Session is one AMQP session of a connection. Its methods are safe for concurrent use.
type Session struct {
	conn    *Conn
	channel uint16

	// Guarded by conn.mu.
	state  sessionState
	endErr error

	handleMax     uint32 // the highest handle the peer may use
	peerHandleMax uint32 // the highest handle we may use

	nextIncomingID uint32
	incomingWindow uint32
	windowFlagged  bool

	nextOutgoingID       uint32
	remoteIncomingWindow uint32
	nextDeliveryID       uint32

	links   map[uint32]linkEndpoint // by the peer's handle
	handles map[uint32]linkEndpoint // by our handle
	// refused are the peer's handles of links the server refused, until the peer's detach
	// frees them: the link itself is forgotten at once (a peer that never detaches must not
	// make the server keep its attach), and the frames that still name the handle are ignored.
	refused      map[uint32]struct{}
	unsettledOut map[uint32]*OutgoingDelivery
	unsettledIn  map[uint32]*Delivery

	// outq holds what waits for the peer's incoming window: transfers, and the flows of
	// links whose transfers wait (a flow must not overtake them).
	outq    []outItem
	outHead int
}

type outItem struct {
	od   *OutgoingDelivery
	flow *SenderLink
}

func newSession(c *Conn, ch uint16, b *Begin) *Session {
	return &Session{
		conn:                 c,
		channel:              ch,
		handleMax:            c.opts.HandleMax,
		peerHandleMax:        b.HandleMax,
		nextIncomingID:       b.NextOutgoingID,
		incomingWindow:       c.opts.SessionWindow,
		remoteIncomingWindow: b.IncomingWindow,
		links:                make(map[uint32]linkEndpoint),
		handles:              make(map[uint32]linkEndpoint),
		refused:              make(map[uint32]struct{}),
		unsettledOut:         make(map[uint32]*OutgoingDelivery),
		unsettledIn:          make(map[uint32]*Delivery),
	}
}

// Channel returns the session's channel number.
func (s *Session) Channel() uint16 { return s.channel }

// Conn returns the session's connection.
func (s *Session) Conn() *Conn { return s.conn }

// End ends the session with err (nil for a clean end). The handler learns of the end of
// its links and of the session when the peer answers, or when the connection closes. End
// does not wait. It returns ErrSessionEnded or ErrConnClosed when the session is already
// ending.
func (s *Session) End(err *Error) error {
	c := s.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrConnClosed
	}
	if s.state != sessionActive {
		return ErrSessionEnded
	}
	s.endLocked(err)
	return nil
}

// checkLocked returns the error for operations on a session that is no longer active.
func (s *Session) checkLocked() error {
	switch {
	case s.conn.closing:
		return ErrConnClosed
	case s.state != sessionActive:
		return ErrSessionEnded
	}
	return nil
}

// endLocked sends end with err; the session waits for the peer's end.
func (s *Session) endLocked(err *Error) {
	if s.state != sessionActive {
		return
	}
	s.state = sessionEndSent
	if err != nil {
		s.endErr = err
		s.conn.log.Info("amqp: ending session", sloggedError(err)...)
	}
	s.dropQueueLocked(nil)
	for _, e := range s.links {
		if l := e.base(); l.state == linkPending {
			l.req.abandonLocked()
		}
	}
	_ = s.conn.sendLocked(s.channel, &End{Error: err})
}

// finishLocked ends the session for good (the end handshake completed, or the connection
// went): every link the handler holds is reported detached with reason (or
// ErrSessionEnded), then the session with reason.
func (s *Session) finishLocked(reason error) {
	if s.state == sessionEnded {
		return
	}
	if s.state == sessionEndSent && s.endErr != nil {
		reason = s.endErr
	}
	s.state = sessionEnded
	linkErr := reason
	if linkErr == nil {
		linkErr = ErrSessionEnded
	}
	handles := make([]uint32, 0, len(s.links))
	for h := range s.links {
		handles = append(handles, h)
	}
	sort.Slice(handles, func(i, j int) bool { return handles[i] < handles[j] })
	for _, h := range handles {
		l := s.links[h].base()
		if l.state == linkPending {
			l.req.abandonLocked()
		}
		if l.state == linkDetachSent && l.detachErr != nil {
			s.reportDetachedLocked(s.links[h], l.detachErr)
		} else {
			s.reportDetachedLocked(s.links[h], linkErr)
		}
	}
	s.conn.links -= len(s.links)
	for _, e := range s.links {
		s.conn.attachBytes -= e.base().attachBytes
	}
	s.conn.refused -= len(s.refused)
	clear(s.refused)
	clear(s.links)
	clear(s.handles)
	clear(s.unsettledIn)
	clear(s.unsettledOut)
	s.dropQueueLocked(nil)
	delete(s.conn.sessions, s.channel)
	s.conn.emitLocked(event{kind: evSessionEnded, s: s, err: reason})
}

// handle handles a frame on the session's channel. It returns only connection errors;
// session and link errors end the session or detach the link.
func (s *Session) handle(p Performative) error {
	if e, ok := p.(*End); ok {
		if s.state == sessionActive {
			_ = s.conn.sendLocked(s.channel, &End{})
		}
		var reason error
		if e.Error != nil {
			reason = e.Error
		}
		s.finishLocked(reason)
		return nil
	}
	if s.state != sessionActive {
		return nil // we sent end: frames in flight are ignored
	}
	switch p := p.(type) {
	case *Attach:
		return s.onAttach(p)
	case *Flow:
		return s.onFlow(p)
	case *Transfer:
		return s.onTransfer(p)
	case *Disposition:
		s.onDisposition(p)
		return nil
	case *Detach:
		return s.onDetach(p)
	}
	return Errorf(ErrCondNotAllowed, "%T on a session", p)
}

func (s *Session) onAttach(a *Attach) error {
	if a.Handle > s.handleMax {
		return Errorf(ErrCondFramingError, "attach handle %d exceeds handle-max %d", a.Handle, s.handleMax)
	}
	if _, used := s.links[a.Handle]; used {
		s.endLocked(Errorf(ErrCondHandleInUse, "handle %d is in use", a.Handle))
		return nil
	}
	if _, used := s.refused[a.Handle]; used {
		s.endLocked(Errorf(ErrCondHandleInUse, "handle %d is in use: the link refused on it was not detached", a.Handle))
		return nil
	}
	// The attach is decoded into a fresh value (only transfer, flow and disposition use
	// scratch space), so the request may keep it.
	req := &AttachRequest{sess: s, attach: a}
	base := link{sess: s, name: a.Name, peerHandle: a.Handle, peerAttach: a, state: linkPending, req: req}
	var e linkEndpoint
	if a.Role == RoleSender {
		rl := &ReceiverLink{link: base}
		req.rl = rl
		e = rl
	} else {
		sl := &SenderLink{link: base}
		req.sl = sl
		e = sl
	}
	req.ctx, req.cancel = contextWithCancel(s.conn.ctx)
	s.links[a.Handle] = e
	s.conn.links++
	e.base().attachBytes = s.conn.frameLen
	s.conn.attachBytes += s.conn.frameLen
	if s.conn.links > s.conn.opts.MaxLinks {
		return req.refuseLocked(Errorf(ErrCondResourceLimitExceeded, "more than %d links on the connection", s.conn.opts.MaxLinks))
	}
	if s.conn.attachBytes > maxAttachBytes {
		return req.refuseLocked(Errorf(ErrCondResourceLimitExceeded, "the attaches of the connection's links take more than %d bytes", maxAttachBytes))
	}
	s.conn.emitLocked(event{kind: evAttach, req: req})
	return nil
}

// linkLocked finds the link a frame's handle names; an unknown handle ends the session. A
// handle of a refused link finds nothing and ends nothing.
func (s *Session) linkLocked(h uint32, what string) (linkEndpoint, bool) {
	e, ok := s.links[h]
	if _, refused := s.refused[h]; !ok && refused {
		return nil, false
	}
	if !ok {
		s.endLocked(Errorf(ErrCondUnattachedHandle, "%s for handle %d, which is not attached", what, h))
	}
	return e, ok
}

func (s *Session) onDetach(dt *Detach) error {
	if _, ok := s.refused[dt.Handle]; ok {
		// The peer's answer to a refusal: the handle is free again.
		delete(s.refused, dt.Handle)
		s.conn.refused--
		return nil
	}
	e, ok := s.linkLocked(dt.Handle, "detach")
	if !ok {
		return nil
	}
	l := e.base()
	switch l.state {
	case linkPending:
		// Detached before the handler answered: answer the attach with no terminus, then
		// detach, as a refusal does.
		l.req.abandonLocked()
		if h, ok := s.allocHandleLocked(e); ok {
			_ = s.conn.sendLocked(s.channel, l.refusalAttach())
			_ = s.conn.sendLocked(s.channel, &Detach{Handle: h, Closed: true})
		}
		s.forgetLinkLocked(e)
	case linkAttached:
		_ = s.conn.sendLocked(s.channel, &Detach{Handle: l.handle, Closed: dt.Closed})
		var reason error
		if dt.Error != nil {
			reason = dt.Error
		}
		s.reportDetachedLocked(e, reason)
		s.forgetLinkLocked(e)
	case linkDetachSent:
		s.reportDetachedLocked(e, l.detachErr)
		s.forgetLinkLocked(e)
	}
	return nil
}

// reportDetachedLocked queues the handler's Detached call for a link it accepted, once.
func (s *Session) reportDetachedLocked(e linkEndpoint, err error) {
	l := e.base()
	if !l.accepted || l.reported {
		l.state = linkGone
		return
	}
	l.reported = true
	l.state = linkGone
	switch e := e.(type) {
	case *ReceiverLink:
		s.conn.emitLocked(event{kind: evReceiverDetached, rl: e, err: err})
	case *SenderLink:
		s.conn.emitLocked(event{kind: evSenderDetached, sl: e, err: err})
	}
}

// forgetLinkLocked frees both handles of a link and drops its deliveries.
func (s *Session) forgetLinkLocked(e linkEndpoint) {
	l := e.base()
	l.state = linkGone
	if _, ok := s.links[l.peerHandle]; ok {
		s.conn.links--
		s.conn.attachBytes -= l.attachBytes
	}
	delete(s.links, l.peerHandle)
	if l.hasHandle {
		delete(s.handles, l.handle)
	}
	for id, d := range s.unsettledIn {
		if d.link.base() == l {
			delete(s.unsettledIn, id)
		}
	}
	for id, od := range s.unsettledOut {
		if od.link.base() == l {
			delete(s.unsettledOut, id)
		}
	}
	if sl, ok := e.(*SenderLink); ok && sl.queued > 0 {
		s.dropQueueLocked(sl)
	}
}

// allocHandleLocked gives a link the lowest handle of ours that is free.
func (s *Session) allocHandleLocked(e linkEndpoint) (uint32, bool) {
	l := e.base()
	if l.hasHandle {
		return l.handle, true
	}
	for h := uint32(0); ; h++ {
		if _, used := s.handles[h]; !used {
			s.handles[h] = e
			l.handle, l.hasHandle = h, true
			return h, true
		}
		if h == s.peerHandleMax {
			return 0, false
		}
	}
}

func (s *Session) onFlow(f *Flow) error {
	next := uint32(0)
	if f.NextIncomingID != nil {
		next = *f.NextIncomingID
	}
	s.remoteIncomingWindow = next + f.IncomingWindow - s.nextOutgoingID
	if f.Handle == nil {
		if f.Echo {
			s.sendFlowLocked(nil)
		}
		s.pumpLocked()
		return nil
	}
	e, ok := s.linkLocked(*f.Handle, "flow")
	if !ok {
		return nil
	}
	switch l := e.(type) {
	case *SenderLink:
		l.onFlowLocked(f)
	case *ReceiverLink:
		l.onFlowLocked(f)
	}
	s.pumpLocked()
	return nil
}

// sendFlowLocked sends a flow with the session's state and, when l is not nil, the state
// of one of its links.
func (s *Session) sendFlowLocked(e linkEndpoint) {
	c := s.conn
	if c.closing {
		return
	}
	c.flushRunLocked()
	b, start := frameStart(c.wbuf, FrameTypeAMQP, s.channel)
	w := beginFields(b, descFlow)
	w.uint(s.nextIncomingID)
	w.uint(s.incomingWindow)
	w.uint(s.nextOutgoingID)
	w.uint(outgoingWindow)
	if e != nil {
		l := e.base()
		w.uint(l.handle)
		w.uint(l.deliveryCount)
		w.uint(l.credit)
		w.null() // available
		if sl, ok := e.(*SenderLink); ok {
			w.boolOpt(sl.drain)
		}
	}
	b, _ = w.finish() // numbers only: cannot fail, far below 512 bytes
	c.wbuf = frameEnd(b, start)
	c.wakeWriter()
}

func (s *Session) onTransfer(t *Transfer) error {
	if s.incomingWindow == 0 {
		s.endLocked(Errorf(ErrCondWindowViolation, "transfer beyond the incoming window"))
		return nil
	}
	s.incomingWindow--
	s.nextIncomingID++
	if s.incomingWindow <= s.conn.opts.SessionWindow/2 && !s.windowFlagged {
		s.windowFlagged = true
		s.conn.windowLow = append(s.conn.windowLow, s)
	}
	e, ok := s.linkLocked(t.Handle, "transfer")
	if !ok {
		return nil
	}
	switch l := e.(type) {
	case *ReceiverLink:
		switch l.state {
		case linkAttached:
			l.onTransferLocked(t)
		case linkPending:
			s.endLocked(Errorf(ErrCondNotAllowed, "transfer on handle %d before the link was attached", t.Handle))
		}
	case *SenderLink:
		if l.state == linkAttached {
			l.detachLocked(Errorf(ErrCondNotAllowed, "transfer from the receiving end of link %q", l.name))
		}
	}
	return nil
}

// onDisposition applies the peer's disposition to deliveries first..last. The range is
// walked over the deliveries that exist, never over the ids it spans.
func (s *Session) onDisposition(dp *Disposition) {
	last := dp.First
	if dp.Last != nil {
		last = *dp.Last
	}
	span := last - dp.First // serial arithmetic: wraps like the ids do
	in := func(id uint32) bool { return id-dp.First <= span }
	if dp.Role == RoleReceiver {
		// The peer receives: our outgoing deliveries.
		var ids []uint32
		if uint64(span) < uint64(len(s.unsettledOut)) {
			for i := uint64(0); i <= uint64(span); i++ {
				if _, ok := s.unsettledOut[dp.First+uint32(i)]; ok {
					ids = append(ids, dp.First+uint32(i))
				}
			}
		} else {
			for id := range s.unsettledOut {
				if in(id) {
					ids = append(ids, id)
				}
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i]-dp.First < ids[j]-dp.First })
		}
		for _, id := range ids {
			od := s.unsettledOut[id]
			od.peerState = dp.State
			if dp.Settled {
				od.peerSettled = true
				od.settled = true
				delete(s.unsettledOut, id)
			}
			if od.link.state == linkAttached {
				s.conn.emitLocked(event{kind: evDisposition, sl: od.link, od: od, state: dp.State, settled: dp.Settled})
			}
		}
		return
	}
	// The peer sends: deliveries we received.
	if !dp.Settled {
		return
	}
	if uint64(span) < uint64(len(s.unsettledIn)) {
		for i := uint64(0); i <= uint64(span); i++ {
			if d, ok := s.unsettledIn[dp.First+uint32(i)]; ok {
				d.peerSettled = true
				delete(s.unsettledIn, d.ID)
			}
		}
		return
	}
	for id, d := range s.unsettledIn {
		if in(id) {
			d.peerSettled = true
			delete(s.unsettledIn, id)
		}
	}
}

// queueTransferLocked queues a delivery and sends what the window allows.
func (s *Session) queueTransferLocked(od *OutgoingDelivery) {
	s.outq = append(s.outq, outItem{od: od})
	od.link.queued++
	s.pumpLocked()
}

// queueLinkFlowLocked sends a sending link's flow, behind its queued transfers if any.
func (s *Session) queueLinkFlowLocked(l *SenderLink) {
	if l.queued == 0 {
		s.sendFlowLocked(l)
		return
	}
	s.outq = append(s.outq, outItem{flow: l})
	l.queued++
}

// pumpLocked sends queued transfer frames while the peer's incoming window allows.
func (s *Session) pumpLocked() {
	for s.outHead < len(s.outq) && !s.conn.closing {
		it := &s.outq[s.outHead]
		if it.flow != nil {
			if it.flow.state == linkAttached {
				s.sendFlowLocked(it.flow)
			}
			it.flow.queued--
			s.popLocked()
			continue
		}
		od := it.od
		if od.link.state != linkAttached {
			od.link.queued--
			s.popLocked()
			continue
		}
		if s.remoteIncomingWindow == 0 {
			break
		}
		done := s.writeTransferFrameLocked(od)
		s.nextOutgoingID++
		s.remoteIncomingWindow--
		if done {
			od.link.queued--
			od.payload = nil
			s.popLocked()
		}
	}
	if s.outHead == len(s.outq) {
		clear(s.outq)
		s.outq, s.outHead = s.outq[:0], 0
	}
}

func (s *Session) popLocked() {
	s.outq[s.outHead] = outItem{}
	s.outHead++
}

// dropQueueLocked drops the queued items of one link (nil: of every link).
func (s *Session) dropQueueLocked(only *SenderLink) {
	kept := s.outq[:s.outHead]
	for _, it := range s.outq[s.outHead:] {
		l := it.flow
		if it.od != nil {
			l = it.od.link
		}
		if only != nil && l != only {
			kept = append(kept, it)
			continue
		}
		l.queued--
	}
	clear(s.outq[len(kept):])
	s.outq = kept
	if s.outHead == len(s.outq) {
		s.outq, s.outHead = s.outq[:0], 0
	}
}

// writeTransferFrameLocked writes the next transfer frame of od, as large as the peer's
// max-frame-size allows, and reports whether it was the delivery's last.
func (s *Session) writeTransferFrameLocked(od *OutgoingDelivery) bool {
	c := s.conn
	l := od.link
	first := !od.started
	if first {
		od.id, od.started = s.nextDeliveryID, true
		s.nextDeliveryID++
		if !od.settled {
			s.unsettledOut[od.id] = od
		}
	}
	rest := od.payload[od.offset:]
	c.flushRunLocked()
	b, start := frameStart(c.wbuf, FrameTypeAMQP, s.channel)
	b = appendTransferPerformative(b, l.handle, od, first, false)
	room := int(c.peerMaxFrame) - (len(b) - start)
	done := len(rest) <= room
	if !done {
		b, _ = frameStart(b[:start], FrameTypeAMQP, s.channel)
		b = appendTransferPerformative(b, l.handle, od, first, true)
		room = int(c.peerMaxFrame) - (len(b) - start)
		rest = rest[:room]
	}
	c.wbuf = frameEnd(append(b, rest...), start)
	od.offset += len(rest)
	c.wakeWriter()
	return done
}

// appendTransferPerformative encodes the transfer performative of one frame of od from
// scalars: the hot path allocates nothing (the Transfer type's encoder would move its
// optional fields to the heap). The first frame carries the tag, format and settlement;
// continuation frames only the handle, delivery-id and more.
func appendTransferPerformative(b []byte, handle uint32, od *OutgoingDelivery, first, more bool) []byte {
	w := beginFields(b, descTransfer)
	w.uint(handle)
	w.uint(od.id)
	if first {
		w.binary(od.tag) // at most 32 bytes: cannot fail
		w.uint(od.format)
		w.bool(od.settled)
	} else {
		w.null()
		w.null()
		w.null()
	}
	w.boolOpt(more)
	b, _ = w.finish()
	return b
}
