package amqp_test

import (
	"context"
	"log"
	"net"
	"sync"

	"github.com/sbgate/sbgate/amqp"
)

// echoHandler is a minimal Handler: every message sent to "echo" is sent back on the
// connection's link whose source is "echo". It shows the shape of a real handler: attach
// decisions made off the callback goroutine, deliveries settled asynchronously, sending on
// Flow, and drains answered when there is nothing to send.
type echoHandler struct{}

func (echoHandler) Connect(c *amqp.Conn) (amqp.ConnHandler, error) {
	return &echoConn{}, nil
}

type echoConn struct {
	mu      sync.Mutex
	pending [][]byte
	out     *amqp.SenderLink
}

func (h *echoConn) Attach(req *amqp.AttachRequest) {
	// A real handler looks the entity up and checks authorization on its own goroutine,
	// with req.Context(); the peer waits for the answer.
	go func() {
		switch {
		case req.PeerRole() == amqp.RoleSender && req.TargetAddress() == "echo":
			_, _ = req.AcceptReceiver(h, amqp.ReceiverOptions{MaxMessageSize: 1 << 20})
		case req.PeerRole() == amqp.RoleReceiver && req.SourceAddress() == "echo":
			l, err := req.AcceptSender(h, amqp.SenderOptions{})
			if err == nil {
				h.mu.Lock()
				h.out = l
				h.mu.Unlock()
			}
		default:
			_ = req.Refuse(&amqp.Error{Condition: amqp.ErrCondNotFound, Description: "no such node"})
		}
	}()
}

func (h *echoConn) Deliver(l *amqp.ReceiverLink, d *amqp.Delivery) {
	h.mu.Lock()
	h.pending = append(h.pending, d.Payload)
	h.mu.Unlock()
	h.send()
	_ = d.Accept() // frees the credit the delivery took
}

func (h *echoConn) Flow(l *amqp.SenderLink, credit uint32, drain bool) {
	h.send()
	if drain {
		l.CompleteDrain() // nothing more now: give the credit back at once
	}
}

// send sends what is pending while the outgoing link has credit.
func (h *echoConn) send() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.out != nil && len(h.pending) > 0 && h.out.Credit() > 0 {
		if _, err := h.out.Send(context.Background(), []byte("tag"), h.pending[0], &amqp.SendOptions{Settled: true}); err != nil {
			return
		}
		h.pending = h.pending[1:]
	}
}

func (h *echoConn) Disposition(l *amqp.SenderLink, d *amqp.OutgoingDelivery, state amqp.DeliveryState, settled bool) {
	if !settled {
		_ = d.Settle(state) // receiver settle mode second: confirm the peer's outcome
	}
}

func (h *echoConn) ReceiverDetached(l *amqp.ReceiverLink, err error) {}

func (h *echoConn) SenderDetached(l *amqp.SenderLink, err error) {
	h.mu.Lock()
	if h.out == l {
		h.out = nil
	}
	h.mu.Unlock()
}

func (h *echoConn) SessionEnded(s *amqp.Session, err error) {}

func (h *echoConn) Closed(err error) {}

func ExampleServer() {
	srv := amqp.NewServer(echoHandler{}, amqp.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:5672")
	if err != nil {
		log.Fatal(err)
	}
	// Serve returns when the listener fails or the server is shut down (Shutdown, Close).
	if err := srv.Serve(context.Background(), ln); err != nil {
		log.Print(err)
	}
}
