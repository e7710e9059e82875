// Package amqp is an AMQP 1.0 protocol engine for the server side of a connection: the type
// system and codec (part 1 of the OASIS specification), frames and performatives (part 2),
// messages (part 3), SASL ANONYMOUS, PLAIN and Service Bus's MSSBCBS (part 5) and a Server that runs the
// connection, session and link state machines and hands links and deliveries to a Handler.
//
// It knows nothing of Service Bus. The layer that implements Service Bus on top of it sees
// each connection's SASL principal and open (Handler.Connect), decides each attach and what
// the attach reply carries (ConnHandler.Attach, AttachRequest), receives deliveries and
// settles them when it likes (ReceiverHandler, Delivery), sends deliveries within the credit
// the peer grants and applies the peer's outcomes (SenderHandler, SenderLink,
// OutgoingDelivery), finds reply links for request/response nodes (Conn.ReplyLink), and is
// told of every end (ReceiverDetached, SenderDetached, SessionEnded, Closed).
//
// # Codec
//
// Values map to plain Go types where that is unambiguous and to the named types of this
// package where AMQP makes a distinction Go does not (Symbol, UUID, Char, Described, List,
// Map, Array, Decimal32/64/128); see Symbol's declaration for the full mapping. AppendValue
// and DecodeValue encode and decode single values, AppendFrame and ParseFrame frames,
// Marshal and Unmarshal messages. Encoding picks the smallest constructor. Decoding is strict
// and bounded: lengths and counts are checked against the input, nesting is limited, and no
// input makes it panic or allocate much more than the input's size.
//
// # Goroutines and blocking
//
// Each connection has three goroutines: a reader, which reads and processes frames; a
// writer, which writes what the engine queued, in batches, and sends heartbeats; and a
// dispatcher, which makes the handler calls. Handler.Connect and the Authenticator run on
// the reader during the handshake, before anything else of that connection. Every other
// handler method (of ConnHandler, ReceiverHandler and SenderHandler) runs on the
// dispatcher: one at a time per connection, in the order the events happened, so a
// handler's per-connection state needs no locking against its own callbacks.
//
// Handler methods should return promptly. While one runs, the reader goes on processing
// frames (acknowledging, granting session window, answering flows), queueing events; past
// a few thousand queued events it stops reading until the handler catches up, so a slow
// handler slows its peer rather than filling memory. A handler method must never wait for
// a later event of its own connection (a disposition, credit, a detach reply): that event
// can only be delivered after the method returns. Work that waits (a database, a timer)
// belongs on the handler's own goroutines.
//
// Every method of Conn, Session, AttachRequest, ReceiverLink, SenderLink, Delivery and
// OutgoingDelivery is safe to call from any goroutine, including from inside a handler
// method. None of them waits for the peer. The only ones that may block are SenderLink.Send
// and SendMessage, and only while the connection's unwritten output is over
// Options.WriteBufferLimit (the peer is not reading); they take a context for that reason.
//
// Callbacks that report an end — ReceiverHandler.ReceiverDetached,
// SenderHandler.SenderDetached, ConnHandler.SessionEnded and ConnHandler.Closed — are each
// called exactly once for every link, session and connection the handler accepted, whoever
// ended it and however (a clean close, an error, a vanished or silent peer, Server.Close).
// Links end before their session, sessions before their connection, and Closed comes last.
//
// # Protocol errors
//
// A peer that breaks the protocol is answered as the specification says: framing errors
// (a frame over max-frame-size, a bad header, a channel or handle beyond its maximum) close
// the connection with amqp:connection:framing-error, undecodable frames with
// amqp:decode-error, unknown performatives with amqp:not-implemented; a transfer on an
// unattached handle or beyond the session's incoming window ends the session
// (amqp:session:unattached-handle, amqp:session:window-violation); a transfer without link
// credit or over the link's max-message-size detaches the link
// (amqp:link:transfer-limit-exceeded, amqp:link:message-size-exceeded). A peer silent past
// Options.IdleTimeout is closed with amqp:resource-limit-exceeded.
//
// Transactions (part 4) are the handler's: a coordinator target decodes into Attach.Coordinator,
// a transfer's transactional-state into Delivery.State, a peer's disposition state into
// TransactionalState, and Declared and TransactionalState encode as outcomes.
//
// # Not implemented
//
// Link recovery and resumption (unsettled maps are decoded and ignored; deliveries die with their
// link), link stealing, sessions and links initiated by the server, and SASL mechanisms other
// than MSSBCBS, ANONYMOUS and PLAIN. The engine serves any net.Conn (ServeConn), so a
// WebSocket tunnel is served like TCP.
package amqp
