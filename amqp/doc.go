// Package amqp is an AMQP 1.0 protocol engine for the server side of a connection: the type
// system and codec (part 1 of the OASIS specification), frames and performatives (part 2),
// messages (part 3), SASL (part 5, ANONYMOUS and PLAIN) and a Server that runs the
// connection/session/link state machines and hands links and deliveries to a Handler.
//
// It knows nothing of Service Bus: the layer that implements Service Bus on top of it sees
// each connection's SASL result and open, decides each attach (and what the attach reply
// carries), receives deliveries and settles them when it likes, and sends deliveries within
// the credit the peer grants.
//
// # Goroutines and blocking
//
// Each connection has two goroutines: a reader, which reads and processes frames, and a
// writer, which writes what the engine queued, in batches, and sends heartbeats. Every
// handler method (Handler, ConnHandler, ReceiverHandler, SenderHandler) is called from the
// connection's reader goroutine, one at a time per connection, so a handler's per-connection
// state needs no locking against its other callbacks. Handler methods must return promptly:
// while one runs, no frame of that connection is processed. They must never wait for
// something that needs the connection's reader (a disposition, credit, a detach reply):
// that would deadlock. Work that waits (a database, a timer) belongs on the handler's own
// goroutines.
//
// Every method of Conn, Session, AttachRequest, ReceiverLink, SenderLink, Delivery and
// OutgoingDelivery is safe to call from any goroutine, including from inside a handler
// method. None of them waits for the peer. The only method that may block is
// SenderLink.Send (and SendMessage), and only while the connection's outgoing buffer is over
// its limit (the peer is not reading fast enough); it takes a context for that reason.
//
// Callbacks that report an end — ReceiverHandler.ReceiverDetached, SenderHandler.SenderDetached,
// ConnHandler.SessionEnded and ConnHandler.Closed — are each called exactly once for every
// link, session and connection the handler accepted, whoever ended it and however (a clean
// close, an error, a vanished peer). Links end before their session, sessions before their
// connection.
package amqp
