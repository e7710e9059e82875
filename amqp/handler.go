package amqp

import "context"

// Handler receives the connections a Server accepts. It is the layer above the engine
// (Service Bus, in sbgate).
type Handler interface {
	// Connect is called once per connection, after SASL and once the peer's open has
	// arrived, before the engine answers it: the Conn already reports the SASL principal
	// and the peer's container id and hostname. It returns the handler of the connection's
	// events, or an error to refuse the connection: the engine answers the open and closes
	// the connection at once with that error (an *Error is sent as is, any other error as
	// amqp:internal-error without its text).
	//
	// Connect is called from the connection's reader goroutine before any other callback
	// of that connection; it must return promptly.
	Connect(c *Conn) (ConnHandler, error)
}

// ConnHandler receives the events of one connection. Its methods, and those of the link
// handlers it installs, are called from one goroutine per connection, one at a time, in the
// order the events happened. They must return promptly and must not wait for anything that
// needs a later event of the same connection. They may call any method of this package.
type ConnHandler interface {
	// Attach is called for each link the peer attaches. The handler answers, now or later
	// and from any goroutine, with exactly one of req.AcceptReceiver (the peer sends on the
	// link), req.AcceptSender (the peer receives) or req.Refuse. Until it does, the peer
	// waits. req.Context is cancelled if the request can no longer be answered (the peer
	// detached, the session ended, the connection closed).
	Attach(req *AttachRequest)

	// SessionEnded is called when a session of the connection has ended, after the
	// ReceiverDetached and SenderDetached calls of its links. err is nil for a clean end by the peer, else the reason:
	// the *Error the peer or the engine sent, or the connection's error.
	SessionEnded(s *Session, err error)

	// Closed is called last, once, when the connection has closed, after every
	// ReceiverDetached, SenderDetached and SessionEnded call. err is nil for a clean close by the peer, else the reason: the
	// *Error the peer sent, the *Error the engine or the handler sent, or a network error
	// wrapping ErrConnClosed (the peer vanished or went silent).
	Closed(err error)
}

// ReceiverHandler receives the events of a link on which the peer sends and the server
// receives (an SDK's sender). Its method names differ from SenderHandler's so that one type
// may implement both.
type ReceiverHandler interface {
	// Deliver is called for each complete delivery. The handler settles it later, from any
	// goroutine, with d.Settle (or Accept, Reject, Release, Modify), exactly once, also when
	// it arrived settled: settling is what frees the link credit it took. A delivery that
	// arrived settled sends nothing when settled.
	Deliver(l *ReceiverLink, d *Delivery)

	// ReceiverDetached is called once when the link has gone: detached by the peer (err is the
	// peer's *Error, or nil), by the handler or the engine (err is the *Error sent), or with
	// its session or connection. Unsettled deliveries of the link can no longer be settled.
	ReceiverDetached(l *ReceiverLink, err error)
}

// SenderHandler receives the events of a link on which the server sends and the peer
// receives (an SDK's receiver).
type SenderHandler interface {
	// Flow is called when the peer's flow changes the link's credit or drain flag. credit is
	// how many deliveries the handler may send now. When drain is set the peer wants the
	// credit used up promptly: the handler sends what it has and, when it has nothing more
	// now, calls l.CompleteDrain (cheap, and callable from inside Flow). The engine answers
	// a drain by itself when credit reaches zero.
	Flow(l *SenderLink, credit uint32, drain bool)

	// Disposition is called when the peer reports a state for a delivery sent unsettled.
	// When settled is true the peer has settled it and the delivery is done. When settled
	// is false (the peer's receiver-settle-mode is second) the peer awaits the final
	// outcome: the handler calls d.Settle with it — the peer's state, or another one such as
	// Rejected with an error when the outcome could not be applied — and the engine sends it
	// settled.
	Disposition(l *SenderLink, d *OutgoingDelivery, state DeliveryState, settled bool)

	// SenderDetached is called once when the link has gone; see
	// ReceiverHandler.ReceiverDetached.
	// Deliveries the peer had not settled will not be settled.
	SenderDetached(l *SenderLink, err error)
}

// SASLCredentials is what a client presented in its sasl-init.
type SASLCredentials struct {
	// Mechanism is "MSSBCBS", "ANONYMOUS" or "PLAIN". MSSBCBS is anonymous at the SASL layer:
	// the peer authorizes later, with tokens (Service Bus's claims-based security).
	Mechanism string
	// AuthzID, Identity (authcid) and Password come from PLAIN's initial response. For
	// ANONYMOUS and MSSBCBS, Identity holds the optional initial response.
	AuthzID  string
	Identity string
	Password string
	// Hostname is the sasl-init's hostname field.
	Hostname string
}

// Authenticator decides a SASL exchange: it returns the principal to record on the
// connection (Conn.Principal), or an error to fail the exchange with the auth outcome. It
// runs on the connection's goroutine during the handshake; ctx is the connection's.
type Authenticator func(ctx context.Context, cred SASLCredentials) (principal any, err error)
