package amqp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// testBroker is a small in-memory queue broker written on the engine: the handler the
// tests drive real clients against. Queues are named by link address; a link on which the
// server receives appends to the queue of its target, a link on which it sends takes from
// the queue of its source.
type testBroker struct {
	t   testing.TB
	srv *Server

	// Hooks, set before clients connect.
	onAttach  func(req *AttachRequest) bool               // true: handled by the hook
	outcome   func(d *Delivery, m *Message) DeliveryState // default Accepted
	final     func(state DeliveryState, msg *Message) DeliveryState
	onDeliver func(l *ReceiverLink, d *Delivery)
	quiet     bool // no events (benchmarks)

	mu      sync.Mutex
	queues  map[string][]queued
	senders map[string][]*SenderLink
	sent    map[*OutgoingDelivery]*Message
	held    map[*SenderLink][][]byte // replies waiting for credit
	tag     uint64
	conns   []*Conn

	events chan brokerEvent
}

type queued struct {
	payload []byte
	format  uint32
}

// brokerEvent is something the handler saw that a test may wait for.
type brokerEvent struct {
	kind    string // "connect", "closed", "detached", "session-ended", "delivery", "disposition", "final", "flow"
	link    string
	err     error
	state   DeliveryState
	settled bool
	d       *Delivery
	credit  uint32
	drain   bool
	conn    *Conn
}

// newTestBroker starts a broker on a loopback port; configure sets its hooks before it
// serves.
func newTestBroker(t testing.TB, opts Options, configure ...func(*testBroker)) (*testBroker, string) {
	t.Helper()
	b := &testBroker{
		t:       t,
		queues:  make(map[string][]queued),
		senders: make(map[string][]*SenderLink),
		sent:    make(map[*OutgoingDelivery]*Message),
		held:    make(map[*SenderLink][][]byte),
		events:  make(chan brokerEvent, 10000),
	}
	if opts.Logger == nil && testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, f := range configure {
		f(b)
	}
	b.srv = NewServer(b, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v; want ErrServerClosed", err)
		}
	})
	return b, ln.Addr().String()
}

func (b *testBroker) emit(ev brokerEvent) {
	if b.quiet {
		return
	}
	select {
	case b.events <- ev:
	default:
		b.t.Errorf("broker event buffer full; dropped %+v", ev)
	}
}

// waitEvent returns the next event of kind, discarding others, or fails the test.
func (b *testBroker) waitEvent(kind string) brokerEvent {
	b.t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev := <-b.events:
			if ev.kind == kind {
				return ev
			}
		case <-timeout.C:
			b.t.Fatalf("no %q event within 10s", kind)
		}
	}
}

func (b *testBroker) Connect(c *Conn) (ConnHandler, error) {
	b.mu.Lock()
	b.conns = append(b.conns, c)
	b.mu.Unlock()
	b.emit(brokerEvent{kind: "connect", conn: c})
	return b, nil
}

func (b *testBroker) Attach(req *AttachRequest) {
	if b.onAttach != nil && b.onAttach(req) {
		return
	}
	if req.PeerRole() == RoleSender {
		if _, err := req.AcceptReceiver(b, ReceiverOptions{}); err != nil {
			b.t.Errorf("AcceptReceiver: %v", err)
		}
		return
	}
	l, err := req.AcceptSender(b, SenderOptions{})
	if err != nil {
		b.t.Errorf("AcceptSender: %v", err)
		return
	}
	addr := l.SourceAddress()
	b.mu.Lock()
	b.senders[addr] = append(b.senders[addr], l)
	b.mu.Unlock()
}

func (b *testBroker) SessionEnded(s *Session, err error) {
	b.emit(brokerEvent{kind: "session-ended", err: err})
}

func (b *testBroker) Closed(err error) {
	b.emit(brokerEvent{kind: "closed", err: err})
}

func (b *testBroker) Deliver(l *ReceiverLink, d *Delivery) {
	b.emit(brokerEvent{kind: "delivery", link: l.Name(), d: d})
	if b.onDeliver != nil {
		b.onDeliver(l, d)
		return
	}
	if l.TargetAddress() == "$cbs" {
		b.answer(l, d)
		return
	}
	m, err := d.Message()
	if err != nil {
		_ = d.Reject(&Error{Condition: ErrCondDecodeError, Description: err.Error()})
		return
	}
	var state DeliveryState = Accepted{}
	if b.outcome != nil {
		state = b.outcome(d, m)
	}
	if _, ok := state.(Accepted); ok {
		b.enqueue(l.TargetAddress(), queued{payload: d.Payload, format: d.MessageFormat})
	}
	if err := d.Settle(state); err != nil && !gone(err) {
		b.t.Errorf("Settle: %v", err)
	}
}

func (b *testBroker) enqueue(addr string, q queued) {
	b.mu.Lock()
	b.queues[addr] = append(b.queues[addr], q)
	b.mu.Unlock()
	b.pump(addr)
}

// pump sends queued messages of addr to its consumers while they have credit.
func (b *testBroker) pump(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.senders[addr] {
		for len(b.queues[addr]) > 0 && l.Credit() > 0 {
			q := b.queues[addr][0]
			b.tag++
			tag := binary.BigEndian.AppendUint64(nil, b.tag)
			od, err := l.Send(context.Background(), tag, q.payload, &SendOptions{MessageFormat: q.format})
			if err != nil {
				if !gone(err) {
					b.t.Errorf("Send: %v", err)
				}
				break
			}
			if b.final != nil {
				if m, err := Unmarshal(q.payload); err == nil {
					b.sent[od] = m
				}
			}
			b.queues[addr] = b.queues[addr][1:]
		}
	}
}

// gone reports the errors of operations on links that went meanwhile: expected when a test
// ends a link, session or connection under the broker.
func gone(err error) bool {
	return errors.Is(err, ErrLinkDetached) || errors.Is(err, ErrConnClosed) || errors.Is(err, ErrSessionEnded)
}

// answer treats d as a request to a $cbs-like node: it replies "ok:<request value>" with
// status-code 200 on the link the request's reply-to names.
func (b *testBroker) answer(l *ReceiverLink, d *Delivery) {
	m, err := d.Message()
	if err != nil {
		b.t.Errorf("request: %v", err)
		return
	}
	_ = d.Accept()
	if m.Properties == nil {
		b.t.Errorf("request without properties")
		return
	}
	reply := l.Conn().ReplyLink(m.Properties.ReplyTo, l)
	if reply == nil {
		b.t.Errorf("no reply link for %q", m.Properties.ReplyTo)
		return
	}
	p, err := Marshal(&Message{
		Properties:            &Properties{CorrelationID: m.Properties.MessageID},
		ApplicationProperties: Map{{Key: "status-code", Value: int32(200)}},
		Value:                 fmt.Sprint("ok:", m.Value),
	})
	if err != nil {
		b.t.Errorf("Marshal: %v", err)
		return
	}
	b.reply(reply, p)
}

// reply sends payload settled on l, or holds it until l has credit: a client's reply link
// may not have granted credit yet when the request arrives.
func (b *testBroker) reply(l *SenderLink, payload []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held[l] = append(b.held[l], payload)
	b.flushHeldLocked(l)
}

func (b *testBroker) flushHeldLocked(l *SenderLink) {
	for len(b.held[l]) > 0 {
		_, err := l.Send(context.Background(), []byte("r"), b.held[l][0], &SendOptions{Settled: true})
		if errors.Is(err, ErrNoCredit) {
			return
		}
		if err != nil && !gone(err) {
			b.t.Errorf("Send reply: %v", err)
		}
		b.held[l] = b.held[l][1:]
	}
}

func (b *testBroker) Flow(l *SenderLink, credit uint32, drain bool) {
	b.emit(brokerEvent{kind: "flow", link: l.Name(), credit: credit, drain: drain})
	b.mu.Lock()
	b.flushHeldLocked(l)
	b.mu.Unlock()
	b.pump(l.SourceAddress())
	if drain {
		l.CompleteDrain()
	}
}

func (b *testBroker) Disposition(l *SenderLink, d *OutgoingDelivery, state DeliveryState, settled bool) {
	b.emit(brokerEvent{kind: "disposition", link: l.Name(), state: state, settled: settled})
	if settled {
		return
	}
	final := state
	if b.final != nil {
		b.mu.Lock()
		m := b.sent[d]
		b.mu.Unlock()
		final = b.final(state, m)
	}
	if err := d.Settle(final); err != nil && !gone(err) {
		b.t.Errorf("OutgoingDelivery.Settle: %v", err)
	}
	b.emit(brokerEvent{kind: "final", link: l.Name(), state: final})
}

func (b *testBroker) ReceiverDetached(l *ReceiverLink, err error) {
	b.emit(brokerEvent{kind: "detached", link: l.Name(), err: err})
}

func (b *testBroker) SenderDetached(l *SenderLink, err error) {
	b.mu.Lock()
	addr := l.SourceAddress()
	for i, s := range b.senders[addr] {
		if s == l {
			b.senders[addr] = append(b.senders[addr][:i:i], b.senders[addr][i+1:]...)
			break
		}
	}
	b.mu.Unlock()
	b.emit(brokerEvent{kind: "detached", link: l.Name(), err: err})
}

var (
	_ ReceiverHandler = (*testBroker)(nil)
	_ SenderHandler   = (*testBroker)(nil)
)
