package amqp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	_ = bytes.Equal
	_ = errors.Is
}
