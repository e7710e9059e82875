package amqp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// Interop tests: the real go-amqp v1.7.0 client (the one azservicebus uses) against the
// engine and the in-memory testBroker, over loopback.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, addr string, opts *goamqp.ConnOptions) *goamqp.Conn {
	t.Helper()
	if opts == nil {
		opts = &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()}
	}
	c, err := goamqp.Dial(testCtx(t), "amqp://"+addr, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func session(t *testing.T, c *goamqp.Conn) *goamqp.Session {
	t.Helper()
	s, err := c.NewSession(testCtx(t), nil)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return s
}

func newSender(t *testing.T, s *goamqp.Session, target string, opts *goamqp.SenderOptions) *goamqp.Sender {
	t.Helper()
	snd, err := s.NewSender(testCtx(t), target, opts)
	if err != nil {
		t.Fatalf("NewSender(%q): %v", target, err)
	}
	return snd
}

func newReceiver(t *testing.T, s *goamqp.Session, source string, opts *goamqp.ReceiverOptions) *goamqp.Receiver {
	t.Helper()
	r, err := s.NewReceiver(testCtx(t), source, opts)
	if err != nil {
		t.Fatalf("NewReceiver(%q): %v", source, err)
	}
	return r
}

func TestInteropSendReceive(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)

	snd := newSender(t, s, "q1", nil)
	for i := range 3 {
		msg := goamqp.NewMessage(fmt.Appendf(nil, "hello %d", i))
		msg.ApplicationProperties = map[string]any{"n": int64(i)}
		if err := snd.Send(ctx, msg, nil); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	ev := b.waitEvent("connect")
	if ev.conn.SASLMechanism() != "ANONYMOUS" || ev.conn.Hostname() == "" || ev.conn.ContainerID() == "" {
		t.Errorf("conn: mechanism %q hostname %q container %q", ev.conn.SASLMechanism(), ev.conn.Hostname(), ev.conn.ContainerID())
	}

	rcv := newReceiver(t, s, "q1", &goamqp.ReceiverOptions{Credit: 10})
	for i := range 3 {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if want := fmt.Sprintf("hello %d", i); string(m.GetData()) != want || m.ApplicationProperties["n"] != int64(i) {
			t.Errorf("message %d = %q %v; want %q n=%d", i, m.GetData(), m.ApplicationProperties, want, i)
		}
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatalf("AcceptMessage: %v", err)
		}
	}
	if err := rcv.Close(ctx); err != nil {
		t.Fatalf("Receiver.Close: %v", err)
	}
	if err := snd.Close(ctx); err != nil {
		t.Fatalf("Sender.Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Conn.Close: %v", err)
	}
	if ev := b.waitEvent("closed"); ev.err != nil {
		t.Errorf("Closed(%v); want nil after a clean close", ev.err)
	}
}

// amqpCondition returns the condition of the *goamqp.Error in err's chain ("" if none).
func amqpCondition(err error) string {
	var e *goamqp.Error
	if errors.As(err, &e) {
		return string(e.Condition)
	}
	return ""
}

func TestInteropSASL(t *testing.T) {
	type principal struct{ user string }
	_, addr := newTestBroker(t, Options{Authenticate: func(ctx context.Context, c SASLCredentials) (any, error) {
		switch {
		case c.Mechanism == "ANONYMOUS":
			return nil, nil
		case c.Identity == "user" && c.Password == "secret":
			return principal{c.Identity}, nil
		}
		return nil, errors.New("bad credentials")
	}})
	for _, tc := range []struct {
		name string
		sasl goamqp.SASLType
		ok   bool
	}{
		{"anonymous", goamqp.SASLTypeAnonymous(), true},
		{"plain", goamqp.SASLTypePlain("user", "secret"), true},
		{"plain bad password", goamqp.SASLTypePlain("user", "wrong"), false},
		{"plain unknown user", goamqp.SASLTypePlain("nobody", "secret"), false},
	} {
		c, err := goamqp.Dial(testCtx(t), "amqp://"+addr, &goamqp.ConnOptions{SASLType: tc.sasl})
		if (err == nil) != tc.ok {
			t.Errorf("%s: Dial error %v; want success %v", tc.name, err, tc.ok)
		}
		if err != nil {
			continue
		}
		// The connection works: a link round trip.
		s := session(t, c)
		snd := newSender(t, s, "sasl", nil)
		if err := snd.Send(testCtx(t), goamqp.NewMessage([]byte("x")), nil); err != nil {
			t.Errorf("%s: Send: %v", tc.name, err)
		}
		_ = c.Close()
	}
}

func TestInteropSASLPrincipal(t *testing.T) {
	b, addr := newTestBroker(t, Options{Authenticate: func(ctx context.Context, c SASLCredentials) (any, error) {
		return "principal:" + c.Identity, nil
	}})
	dial(t, addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("alice", "pw"), HostName: "ns.example"})
	ev := b.waitEvent("connect")
	if ev.conn.Principal() != "principal:alice" || ev.conn.SASLMechanism() != "PLAIN" || ev.conn.Hostname() != "ns.example" {
		t.Errorf("conn principal %v mechanism %q hostname %q", ev.conn.Principal(), ev.conn.SASLMechanism(), ev.conn.Hostname())
	}
}

// TestInteropSenderSettlement sends settled and unsettled; the broker's outcome (accepted,
// rejected with an error, released, modified) is what the client sees.
func TestInteropSenderSettlement(t *testing.T) {
	b, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.outcome = func(d *Delivery, m *Message) DeliveryState {
			v, _ := m.ApplicationProperties.Get("outcome")
			switch v {
			case "reject":
				return Rejected{Error: &Error{Condition: "com.microsoft:dead-letter", Description: "no thanks",
					Info: Map{{Key: Symbol("DeadLetterReason"), Value: "r"}}}}
			case "release":
				return Released{}
			case "modify":
				return Modified{DeliveryFailed: true, UndeliverableHere: true}
			}
			return Accepted{}
		}
	})
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	msg := func(outcome string) *goamqp.Message {
		m := goamqp.NewMessage([]byte(outcome))
		m.ApplicationProperties = map[string]any{"outcome": outcome}
		return m
	}

	settled := newSender(t, s, "settled", &goamqp.SenderOptions{SettlementMode: goamqp.SenderSettleModeSettled.Ptr()})
	if err := settled.Send(ctx, msg("accept"), nil); err != nil {
		t.Fatalf("settled Send: %v", err)
	}
	if ev := b.waitEvent("delivery"); !ev.d.Settled {
		t.Errorf("settled sender's delivery arrived unsettled")
	}

	snd := newSender(t, s, "unsettled", &goamqp.SenderOptions{SettlementMode: goamqp.SenderSettleModeUnsettled.Ptr()})
	if err := snd.Send(ctx, msg("accept"), nil); err != nil {
		t.Errorf("Send(accept): %v", err)
	}
	err := snd.Send(ctx, msg("reject"), nil)
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != "com.microsoft:dead-letter" || ae.Description != "no thanks" || ae.Info["DeadLetterReason"] != "r" {
		t.Errorf("Send(reject) error %#v; want the rejection's error", err)
	}
	for _, tc := range []struct {
		outcome string
		want    any
	}{
		{"release", &goamqp.StateReleased{}},
		{"modify", &goamqp.StateModified{DeliveryFailed: true, UndeliverableHere: true}},
		{"accept", &goamqp.StateAccepted{}},
	} {
		r, err := snd.SendWithReceipt(ctx, msg(tc.outcome), nil)
		if err != nil {
			t.Fatalf("SendWithReceipt: %v", err)
		}
		state, err := r.Wait(ctx)
		if err != nil || fmt.Sprintf("%#v", state) != fmt.Sprintf("%#v", tc.want) {
			t.Errorf("%s: state %#v, %v; want %#v", tc.outcome, state, err, tc.want)
		}
	}
}

// TestInteropReceiveCredit checks that the server sends only within the credit the client
// grants, both with prefetch and with manual credit.
func TestInteropReceiveCredit(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	for i := range 25 {
		m, _ := Marshal(&Message{Value: int64(i)})
		b.enqueue("credit", queued{payload: m})
	}
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)

	rcv := newReceiver(t, s, "credit", &goamqp.ReceiverOptions{Credit: -1})
	if err := rcv.IssueCredit(3); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := rcv.Receive(ctx, nil)
		if err != nil || m.Value != int64(i) {
			t.Fatalf("Receive = %v, %v; want %d", m, err, i)
		}
		_ = rcv.AcceptMessage(ctx, m)
	}
	// The server's link has no credit left and keeps the rest queued.
	b.mu.Lock()
	left := len(b.queues["credit"])
	b.mu.Unlock()
	if left != 22 {
		t.Errorf("%d messages left in the queue after 3 credits; want 22", left)
	}
	if err := rcv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitEvent("detached")

	prefetch := newReceiver(t, s, "credit", &goamqp.ReceiverOptions{Credit: 5})
	for i := 3; i < 25; i++ {
		m, err := prefetch.Receive(ctx, nil)
		if err != nil || m.Value != int64(i) {
			t.Fatalf("Receive = %v, %v; want %d", m, err, i)
		}
		if err := prefetch.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInteropSettleModeSecond: the client settles in receiver-settle-mode second; the
// handler decides each final outcome, and may fail one (a lost lock).
func TestInteropSettleModeSecond(t *testing.T) {
	lockLost := &Error{Condition: "com.microsoft:message-lock-lost", Description: "lock expired"}
	b, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.final = func(state DeliveryState, m *Message) DeliveryState {
			if m != nil && m.Value == "lost" {
				return Rejected{Error: lockLost}
			}
			return state
		}
	})
	for _, v := range []string{"accept", "reject", "release", "modify", "lost"} {
		p, _ := Marshal(&Message{Value: v})
		b.enqueue("second", queued{payload: p})
	}
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	rcv := newReceiver(t, s, "second", &goamqp.ReceiverOptions{Credit: 10, SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
	recv := func(want string) *goamqp.Message {
		m, err := rcv.Receive(ctx, nil)
		if err != nil || m.Value != want {
			t.Fatalf("Receive = %v, %v; want %q", m, err, want)
		}
		return m
	}
	if err := rcv.AcceptMessage(ctx, recv("accept")); err != nil {
		t.Errorf("AcceptMessage: %v", err)
	}
	if ev := b.waitEvent("final"); fmt.Sprint(ev.state) != fmt.Sprint(Accepted{}) {
		t.Errorf("final state %#v; want accepted", ev.state)
	}
	dl := &goamqp.Error{Condition: "com.microsoft:dead-letter", Description: "d"}
	if err := rcv.RejectMessage(ctx, recv("reject"), dl); amqpCondition(err) != "com.microsoft:dead-letter" {
		// go-amqp returns the error of the rejected state the server echoes.
		t.Errorf("RejectMessage error %v; want the echoed rejection", err)
	}
	if ev := b.waitEvent("final"); !reflect.DeepEqual(ev.state, Rejected{Error: &Error{Condition: "com.microsoft:dead-letter", Description: "d"}}) {
		t.Errorf("final state %#v; want the client's rejection", ev.state)
	}
	if err := rcv.ReleaseMessage(ctx, recv("release")); err != nil {
		t.Errorf("ReleaseMessage: %v", err)
	}
	if ev := b.waitEvent("final"); fmt.Sprint(ev.state) != fmt.Sprint(Released{}) {
		t.Errorf("final state %#v; want released", ev.state)
	}
	if err := rcv.ModifyMessage(ctx, recv("modify"), &goamqp.ModifyMessageOptions{DeliveryFailed: true,
		Annotations: goamqp.Annotations{"x-opt-reason": "r"}}); err != nil {
		t.Errorf("ModifyMessage: %v", err)
	}
	ev := b.waitEvent("final")
	if mod, ok := ev.state.(Modified); !ok || !mod.DeliveryFailed || mod.UndeliverableHere || len(mod.MessageAnnotations) != 1 {
		t.Errorf("final state %#v; want the client's modification", ev.state)
	}
	err := rcv.AcceptMessage(ctx, recv("lost"))
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != "com.microsoft:message-lock-lost" {
		t.Errorf("AcceptMessage of a message whose lock was lost: %v; want message-lock-lost", err)
	}
}

// TestInteropDrain: go-amqp's DrainCredit (a flow with link-credit 0 and drain set, which
// revokes the credit it had granted) returns promptly, and credit works afterwards. The
// handler's CompleteDrain path, for drains that keep credit, is exercised by the rhea and
// raw-socket tests.
func TestInteropDrain(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	rcv := newReceiver(t, s, "drain", &goamqp.ReceiverOptions{Credit: -1})
	waitCredit := func(want uint32) {
		t.Helper()
		for {
			if ev := b.waitEvent("flow"); ev.credit == want {
				return
			}
		}
	}
	for round := range 3 {
		if err := rcv.IssueCredit(5); err != nil {
			t.Fatal(err)
		}
		waitCredit(5)
		for i := range round {
			p, _ := Marshal(&Message{Value: int64(i)})
			b.enqueue("drain", queued{payload: p})
		}
		for i := range round {
			m, err := rcv.Receive(ctx, nil)
			if err != nil || m.Value != int64(i) {
				t.Fatalf("round %d: Receive = %v, %v", round, m, err)
			}
			_ = rcv.AcceptMessage(ctx, m)
		}
		start := time.Now()
		if err := rcv.DrainCredit(ctx, nil); err != nil {
			t.Fatalf("round %d: DrainCredit: %v", round, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("round %d: drain took %v", round, d)
		}
	}
	b.mu.Lock()
	l := b.senders["drain"][0]
	b.mu.Unlock()
	if l.Credit() != 0 {
		t.Errorf("after drains the server's link has credit %d; want 0", l.Credit())
	}
	p, _ := Marshal(&Message{Value: "after"})
	b.enqueue("drain", queued{payload: p})
	if err := rcv.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	if m, err := rcv.Receive(ctx, nil); err != nil || m.Value != "after" {
		t.Fatalf("Receive after drains = %v, %v", m, err)
	}
}

// TestInteropMultiFrame sends and receives messages far larger than the frame size.
func TestInteropMultiFrame(t *testing.T) {
	b, addr := newTestBroker(t, Options{MaxFrameSize: 1024})
	c := dial(t, addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous(), MaxFrameSize: 600})
	s := session(t, c)
	ctx := testCtx(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 100000/16)
	snd := newSender(t, s, "big", nil)
	if err := snd.Send(ctx, goamqp.NewMessage(body), nil); err != nil {
		t.Fatalf("Send: %v", err)
	}
	ev := b.waitEvent("delivery")
	if m, err := ev.d.Message(); err != nil || !bytes.Equal(m.Data[0], body) {
		t.Fatalf("server reassembled %d bytes, %v", len(ev.d.Payload), err)
	}
	rcv := newReceiver(t, s, "big", &goamqp.ReceiverOptions{Credit: 1})
	m, err := rcv.Receive(ctx, nil)
	if err != nil || !bytes.Equal(m.GetData(), body) {
		t.Fatalf("Receive: %d bytes, %v", len(m.GetData()), err)
	}
}

func TestInteropMessageSizeLimit(t *testing.T) {
	_, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.onAttach = func(req *AttachRequest) bool {
			if req.TargetAddress() != "limited" {
				return false
			}
			if _, err := req.AcceptReceiver(b, ReceiverOptions{MaxMessageSize: 1000}); err != nil {
				t.Errorf("AcceptReceiver: %v", err)
			}
			return true
		}
	})
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	snd := newSender(t, s, "limited", nil)
	if snd.MaxMessageSize() != 1000 {
		t.Errorf("client sees max-message-size %d; want 1000", snd.MaxMessageSize())
	}
	if err := snd.Send(ctx, goamqp.NewMessage(make([]byte, 900)), nil); err != nil {
		t.Errorf("Send of 900 bytes: %v", err)
	}
	err := snd.Send(ctx, goamqp.NewMessage(make([]byte, 2000)), nil)
	if amqpCondition(err) != string(ErrCondMessageSizeExceeded) {
		t.Errorf("Send of 2000 bytes: %v; want message-size-exceeded", err)
	}
	// Links the server sends on announce the default to the client.
	other := newSender(t, s, "default", nil)
	if other.MaxMessageSize() != 64<<20 {
		t.Errorf("default max-message-size %d", other.MaxMessageSize())
	}
}

// TestInteropBatchFormat: a batch (message format 0x80013700 whose data sections are
// encoded messages) reaches the handler with its format, and goes back out with it.
func TestInteropBatchFormat(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	var data [][]byte
	for _, id := range []string{"1", "2", "3"} {
		e, err := (&goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: id}, Data: [][]byte{[]byte("body" + id)}}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, e)
	}
	snd := newSender(t, s, "batch", nil)
	if err := snd.Send(ctx, &goamqp.Message{Format: MessageFormatBatch, Data: data}, nil); err != nil {
		t.Fatalf("Send: %v", err)
	}
	ev := b.waitEvent("delivery")
	if ev.d.MessageFormat != MessageFormatBatch {
		t.Errorf("message format %#x; want %#x", ev.d.MessageFormat, MessageFormatBatch)
	}
	outer, err := ev.d.Message()
	if err != nil || len(outer.Data) != 3 {
		t.Fatalf("batch = %v, %v", outer, err)
	}
	for i, d := range outer.Data {
		m, err := Unmarshal(d)
		if err != nil || m.Properties.MessageID != fmt.Sprint(i+1) {
			t.Errorf("batch element %d = %v, %v", i, m, err)
		}
	}
	rcv := newReceiver(t, s, "batch", nil)
	m, err := rcv.Receive(ctx, nil)
	if err != nil || m.Format != MessageFormatBatch || len(m.Data) != 3 {
		t.Fatalf("Receive = %v, %v", m, err)
	}
}

// TestInteropRefuseAttach: a refused attach makes NewSender/NewReceiver fail with the
// handler's condition, and the connection stays usable.
func TestInteropRefuseAttach(t *testing.T) {
	_, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.onAttach = func(req *AttachRequest) bool {
			var addr string
			if req.PeerRole() == RoleSender {
				addr = req.TargetAddress()
			} else {
				addr = req.SourceAddress()
			}
			switch addr {
			case "missing":
				_ = req.Refuse(&Error{Condition: ErrCondNotFound, Description: "no entity missing"})
				return true
			case "forbidden":
				// Decided later, on another goroutine, as a database lookup would be.
				go func() { _ = req.Refuse(&Error{Condition: ErrCondUnauthorizedAccess, Description: "no"}) }()
				return true
			}
			return false
		}
	})
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	for _, tc := range []struct {
		addr, want string
	}{{"missing", "amqp:not-found"}, {"forbidden", "amqp:unauthorized-access"}} {
		_, err := s.NewSender(ctx, tc.addr, nil)
		if amqpCondition(err) != tc.want {
			t.Errorf("NewSender(%s) error %v; want %s", tc.addr, err, tc.want)
		}
		_, err = s.NewReceiver(ctx, tc.addr, nil)
		if amqpCondition(err) != tc.want {
			t.Errorf("NewReceiver(%s) error %v; want %s", tc.addr, err, tc.want)
		}
	}
	snd := newSender(t, s, "fine", nil)
	if err := snd.Send(ctx, goamqp.NewMessage([]byte("x")), nil); err != nil {
		t.Errorf("Send after refusals: %v", err)
	}
}

// TestInteropHandlerDetach: the handler detaches a link with an error at any time (a token
// expired); the client sees the condition.
func TestInteropHandlerDetach(t *testing.T) {
	links := make(chan *SenderLink, 1)
	b, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.onAttach = func(req *AttachRequest) bool {
			l, err := req.AcceptSender(b, SenderOptions{})
			if err != nil {
				t.Errorf("AcceptSender: %v", err)
			}
			links <- l
			return true
		}
	})
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	rcv := newReceiver(t, s, "q", nil)
	l := <-links
	expired := &Error{Condition: ErrCondUnauthorizedAccess, Description: "token expired"}
	if err := l.Detach(expired); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	_, err := rcv.Receive(ctx, nil)
	if amqpCondition(err) != string(ErrCondUnauthorizedAccess) {
		t.Errorf("Receive after detach: %v; want unauthorized-access", err)
	}
	ev := b.waitEvent("detached")
	if !errors.Is(ev.err, expired) {
		t.Errorf("SenderDetached(%v); want the error the handler sent", ev.err)
	}
	if err := l.Detach(nil); !errors.Is(err, ErrLinkDetached) {
		t.Errorf("second Detach: %v; want ErrLinkDetached", err)
	}
	if _, err := l.Send(ctx, []byte("t"), []byte{0x00, 0x53, 0x77, 0x40}, nil); !errors.Is(err, ErrLinkDetached) {
		t.Errorf("Send on a detached link: %v; want ErrLinkDetached", err)
	}
}

// TestInteropRequestResponse routes replies the way $cbs and $management need: to the
// link whose target address, or else name, is the request's reply-to.
func TestInteropRequestResponse(t *testing.T) {
	_, addr := newTestBroker(t, Options{}) // the broker answers $cbs requests
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	snd := newSender(t, s, "$cbs", nil)
	for _, tc := range []struct {
		name string
		opts *goamqp.ReceiverOptions
		to   string
	}{
		{"by address", &goamqp.ReceiverOptions{TargetAddress: "cbs-reply-1", Credit: 10, SettlementMode: goamqp.ReceiverSettleModeFirst.Ptr(), RequestedSenderSettleMode: goamqp.SenderSettleModeSettled.Ptr()}, "cbs-reply-1"},
		{"by name", &goamqp.ReceiverOptions{Name: "reply-by-name", Credit: 10}, "reply-by-name"},
	} {
		rcv := newReceiver(t, s, "$cbs", tc.opts)
		req := &goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: tc.name, ReplyTo: &tc.to}, Value: tc.name}
		if err := snd.Send(ctx, req, nil); err != nil {
			t.Fatalf("%s: Send: %v", tc.name, err)
		}
		m, err := rcv.Receive(ctx, nil)
		if err != nil || m.Value != "ok:"+tc.name || m.ApplicationProperties["status-code"] != int32(200) || m.Properties.CorrelationID != tc.name {
			t.Fatalf("%s: reply %v, %v", tc.name, m, err)
		}
	}
}

// TestInteropAttachReply: what the handler sets in the attach reply reaches the client: a
// session filter echoing the session chosen, and link properties.
func TestInteropAttachReply(t *testing.T) {
	const filterName = Symbol("com.microsoft:session-filter")
	seen := make(chan any, 1)
	_, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.onAttach = func(req *AttachRequest) bool {
			if req.PeerRole() != RoleReceiver {
				return false
			}
			f, _ := req.Filter().Get(filterName)
			seen <- f
			src := *req.Attach().Source
			src.Filter = Map{{Key: filterName, Value: Described{Descriptor: f.(Described).Descriptor, Value: "session-7"}}}
			_, err := req.AcceptSender(b, SenderOptions{Source: &src, Properties: Map{
				{Key: Symbol("com.microsoft:locked-until-utc"), Value: int64(638400000000000000)},
			}})
			if err != nil {
				t.Errorf("AcceptSender: %v", err)
			}
			return true
		}
	})
	c := dial(t, addr, nil)
	s := session(t, c)
	rcv := newReceiver(t, s, "sessions", &goamqp.ReceiverOptions{
		Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter(string(filterName), 0x137000000c, nil)},
	})
	if f := <-seen; !reflect.DeepEqual(f, Described{Descriptor: uint64(0x137000000c), Value: nil}) {
		t.Errorf("handler saw filter %#v", f)
	}
	if v := rcv.LinkSourceFilterValue(string(filterName)); v != "session-7" {
		t.Errorf("client sees session filter %#v; want session-7", v)
	}
	if v := rcv.Properties()["com.microsoft:locked-until-utc"]; v != int64(638400000000000000) {
		t.Errorf("client sees locked-until %#v", v)
	}
}

// TestInteropClientVanishes: a client that disappears without closing; the handler learns
// of every link, the session and the connection.
func TestInteropClientVanishes(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := goamqp.NewConn(testCtx(t), nc, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s := session(t, c)
	newSender(t, s, "v", nil)
	newReceiver(t, s, "v", nil)
	_ = nc.Close()
	for range 2 {
		if ev := b.waitEvent("detached"); !errors.Is(ev.err, ErrConnClosed) {
			t.Errorf("link detached with %v; want ErrConnClosed", ev.err)
		}
	}
	if ev := b.waitEvent("session-ended"); !errors.Is(ev.err, ErrConnClosed) {
		t.Errorf("session ended with %v", ev.err)
	}
	if ev := b.waitEvent("closed"); !errors.Is(ev.err, ErrConnClosed) {
		t.Errorf("connection closed with %v", ev.err)
	}
}

// TestInteropHeartbeats: an idle connection stays open because both sides send heartbeats
// within the other's idle timeout.
func TestInteropHeartbeats(t *testing.T) {
	b, addr := newTestBroker(t, Options{IdleTimeout: 400 * time.Millisecond})
	c := dial(t, addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous(), IdleTimeout: 500 * time.Millisecond})
	s := session(t, c)
	b.waitEvent("connect")
	// Idle for several timeouts of both sides: the server must not close it, and the client
	// (which would fail its next operation) must not have closed it either.
	idle := time.NewTimer(2 * time.Second)
	defer idle.Stop()
	select {
	case ev := <-b.events:
		t.Fatalf("event %q (%v) while idle", ev.kind, ev.err)
	case <-idle.C:
	}
	snd := newSender(t, s, "hb", nil)
	if err := snd.Send(testCtx(t), goamqp.NewMessage([]byte("still here")), nil); err != nil {
		t.Errorf("Send after idling: %v", err)
	}
}

// TestInteropConnClose: the handler (or Shutdown) closes a connection with an error; the
// client sees it.
func TestInteropConnClose(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	c := dial(t, addr, nil)
	s := session(t, c)
	rcv := newReceiver(t, s, "q", nil)
	ev := b.waitEvent("connect")
	if err := ev.conn.Close(&Error{Condition: ErrCondUnauthorizedAccess, Description: "token expired"}); err != nil {
		t.Fatal(err)
	}
	_, err := rcv.Receive(testCtx(t), nil)
	if amqpCondition(err) != string(ErrCondUnauthorizedAccess) {
		t.Errorf("Receive after server close: %v", err)
	}
	if ev := b.waitEvent("closed"); amqpCondition(ev.err) != "" || !errors.Is(ev.err, &Error{}) && ev.err == nil {
		t.Errorf("Closed(%v)", ev.err)
	}
	if err := ev.conn.Close(nil); !errors.Is(err, ErrConnClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// TestInteropReceiverSettleModeSecond: a client sender that asks for receiver-settle-mode
// second gets it; the server's outcome goes out unsettled and the client settles.
func TestInteropReceiverSettleModeSecond(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	c := dial(t, addr, nil)
	s := session(t, c)
	ctx := testCtx(t)
	snd := newSender(t, s, "rsm2", &goamqp.SenderOptions{
		SettlementMode:              goamqp.SenderSettleModeUnsettled.Ptr(),
		RequestedReceiverSettleMode: goamqp.ReceiverSettleModeSecond.Ptr(),
	})
	for i := range 3 {
		if err := snd.Send(ctx, goamqp.NewMessage(fmt.Appendf(nil, "m%d", i)), nil); err != nil {
			t.Fatalf("Send: %v", err)
		}
		ev := b.waitEvent("delivery")
		if l := ev.d.Link(); l.LocalAttach().RcvSettleMode != ReceiverSettleModeSecond {
			t.Fatalf("server's receiver settle mode %d", l.LocalAttach().RcvSettleMode)
		}
	}
}

// TestServeConnAndTLS: ServeConn serves a single connection (here a net.Pipe), and Serve
// serves a TLS listener the caller made.
func TestServeConnAndTLS(t *testing.T) {
	b, _ := newTestBroker(t, Options{})
	client, server := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- b.srv.ServeConn(context.Background(), server) }()
	c, err := goamqp.NewConn(testCtx(t), client, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatalf("NewConn over a pipe: %v", err)
	}
	s := session(t, c)
	snd := newSender(t, s, "pipe", nil)
	if err := snd.Send(testCtx(t), goamqp.NewMessage([]byte("x")), nil); err != nil {
		t.Fatalf("Send: %v", err)
	}
	// go-amqp may race its own reader against closing its end of the conn; on a pipe that
	// surfaces as io.ErrClosedPipe, which its ConnError does not unwrap.
	if err := c.Close(); err != nil && !strings.Contains(err.Error(), io.ErrClosedPipe.Error()) {
		t.Fatalf("Close: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("ServeConn returned %v after a clean close", err)
	}

	cert := selfSignedCert(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.srv.Serve(context.Background(), ln) }()
	tc, err := goamqp.Dial(testCtx(t), "amqps://"+ln.Addr().String(), &goamqp.ConnOptions{
		SASLType: goamqp.SASLTypeAnonymous(), TLSConfig: &tls.Config{InsecureSkipVerify: true},
	})
	if err != nil {
		t.Fatalf("Dial amqps: %v", err)
	}
	defer tc.Close()
	ts := session(t, tc)
	tsnd := newSender(t, ts, "tls", nil)
	rcv := newReceiver(t, ts, "tls", nil)
	msg := &goamqp.Message{Value: "over tls"}
	if err := tsnd.Send(testCtx(t), msg, nil); err != nil {
		t.Fatalf("Send over TLS: %v", err)
	}
	if m, err := rcv.Receive(testCtx(t), nil); err != nil || m.Value != "over tls" {
		t.Fatalf("Receive over TLS: %v, %v", m, err)
	}
}

func selfSignedCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestServerClose: Close drops every connection at once; the handler still learns of
// each end, and Serve returns ErrServerClosed.
func TestServerClose(t *testing.T) {
	b := &testBroker{t: t, queues: map[string][]queued{}, senders: map[string][]*SenderLink{},
		sent: map[*OutgoingDelivery]*Message{}, held: map[*SenderLink][][]byte{}, events: make(chan brokerEvent, 100)}
	b.srv = NewServer(b, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- b.srv.Serve(context.Background(), ln) }()
	c := dial(t, ln.Addr().String(), nil)
	s := session(t, c)
	rcv := newReceiver(t, s, "q", nil)
	if err := b.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve returned %v", err)
	}
	if ev := b.waitEvent("closed"); !errors.Is(ev.err, ErrConnClosed) {
		t.Errorf("Closed(%v)", ev.err)
	}
	if _, err := rcv.Receive(testCtx(t), nil); err == nil {
		t.Error("Receive succeeded on a closed server")
	}
	if err := b.srv.ServeConn(context.Background(), nil); !errors.Is(err, ErrServerClosed) {
		t.Errorf("ServeConn after Close: %v", err)
	}
}
