package amqp

// Accessors of ReceiverLink and SenderLink, written out for each so they are documented.

func (l *link) sourceAddress() string {
	if l.peerAttach.Source == nil {
		return ""
	}
	return l.peerAttach.Source.Address
}

func (l *link) targetAddress() string {
	if l.peerAttach.Target == nil {
		return ""
	}
	return l.peerAttach.Target.Address
}

// detach implements Detach for both link types.
func (l *link) detach(err *Error) error {
	c := l.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := l.checkLocked(); e != nil {
		return e
	}
	l.detachLocked(err)
	return nil
}

func (l *link) creditNow() uint32 {
	c := l.sess.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	return l.credit
}

// Name returns the link's name.
func (l *ReceiverLink) Name() string { return l.name }

// Session returns the link's session.
func (l *ReceiverLink) Session() *Session { return l.sess }

// Conn returns the link's connection.
func (l *ReceiverLink) Conn() *Conn { return l.sess.conn }

// PeerAttach returns the peer's attach performative. It must not be modified.
func (l *ReceiverLink) PeerAttach() *Attach { return l.peerAttach }

// LocalAttach returns the attach the server answered with. It must not be modified.
func (l *ReceiverLink) LocalAttach() *Attach { return l.reply }

// SourceAddress returns the address of the peer's source terminus ("" when absent).
func (l *ReceiverLink) SourceAddress() string { return l.sourceAddress() }

// TargetAddress returns the address of the peer's target terminus ("" when absent).
func (l *ReceiverLink) TargetAddress() string { return l.targetAddress() }

// Detach detaches the link with err (nil for a clean detach), for example when the token
// that authorized it expired. The handler's ReceiverDetached call follows when the peer answers, or
// when the session or connection ends. Detach does not wait. It returns ErrLinkDetached,
// ErrSessionEnded or ErrConnClosed when the link is already going.
func (l *ReceiverLink) Detach(err *Error) error { return l.detach(err) }

// Name returns the link's name.
func (l *SenderLink) Name() string { return l.name }

// Session returns the link's session.
func (l *SenderLink) Session() *Session { return l.sess }

// Conn returns the link's connection.
func (l *SenderLink) Conn() *Conn { return l.sess.conn }

// PeerAttach returns the peer's attach performative. It must not be modified.
func (l *SenderLink) PeerAttach() *Attach { return l.peerAttach }

// LocalAttach returns the attach the server answered with. It must not be modified.
func (l *SenderLink) LocalAttach() *Attach { return l.reply }

// SourceAddress returns the address of the peer's source terminus ("" when absent).
func (l *SenderLink) SourceAddress() string { return l.sourceAddress() }

// TargetAddress returns the address of the peer's target terminus ("" when absent).
func (l *SenderLink) TargetAddress() string { return l.targetAddress() }

// Detach detaches the link with err (nil for a clean detach), for example when the token
// that authorized it expired. The handler's SenderDetached call follows when the peer answers, or
// when the session or connection ends. Detach does not wait. It returns ErrLinkDetached,
// ErrSessionEnded or ErrConnClosed when the link is already going.
func (l *SenderLink) Detach(err *Error) error { return l.detach(err) }

// Credit returns how many more deliveries the peer may send before the engine renews the
// credit.
func (l *ReceiverLink) Credit() uint32 { return l.creditNow() }

// Credit returns how many deliveries the link may send now.
func (l *SenderLink) Credit() uint32 { return l.creditNow() }
