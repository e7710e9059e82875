package amqp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
	"github.com/sbgate/sbgate/broker"
)

func TestSDKSessions(t *testing.T) {
	b, c, ctx, s := sessionQueue(t)
	for _, m := range []struct{ sid, body string }{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(m.body), SessionID: to.Ptr(m.sid)}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Next available: session a, whose message waited longest.
	ra, err := c.AcceptNextSessionForQueue(ctx, "sq", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ra.SessionID() != "a" || !ra.LockedUntil().After(time.Now()) {
		t.Errorf("accepted session %q locked until %v", ra.SessionID(), ra.LockedUntil())
	}
	// Peeking a session shows its messages only.
	peeked, err := ra.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 2 || string(peeked[0].Body) != "a1" || string(peeked[1].Body) != "a2" {
		t.Fatalf("session peek: %v %v", peeked, err)
	}
	// A named session held by another receiver cannot be locked.
	if _, err := c.AcceptSessionForQueue(ctx, "sq", "a", nil); err == nil {
		t.Error("accepting a locked session succeeded")
	}
	var got []string
	for _, m := range receiveAll(t, ctx, ra, 2) {
		if *m.SessionID != "a" {
			t.Errorf("session a got a message of session %q", *m.SessionID)
		}
		got = append(got, string(m.Body))
		if err := ra.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got[0] != "a1" || got[1] != "a2" {
		t.Errorf("session a: %v", got)
	}
	if st, err := ra.GetSessionState(ctx, nil); err != nil || st != nil {
		t.Errorf("initial state %q, %v", st, err)
	}
	if err := ra.SetSessionState(ctx, []byte("checkpoint"), nil); err != nil {
		t.Fatal(err)
	}
	if st, err := ra.GetSessionState(ctx, nil); err != nil || !bytes.Equal(st, []byte("checkpoint")) {
		t.Errorf("state %q, %v", st, err)
	}
	before := ra.LockedUntil()
	b.clock.Advance(10 * time.Second)
	if err := ra.RenewSessionLock(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if !ra.LockedUntil().After(before) {
		t.Errorf("renewed session lock until %v, was %v", ra.LockedUntil(), before)
	}
	if err := ra.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Closing released the session: it can be accepted by name at once, its state kept.
	ra2, err := c.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := ra2.GetSessionState(ctx, nil); err != nil || string(st) != "checkpoint" {
		t.Errorf("state after reaccept %q, %v", st, err)
	}
	_ = ra2.Close(ctx)

	rb, err := c.AcceptSessionForQueue(ctx, "sq", "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close(ctx)
	msgs, err := rb.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "b1" {
		t.Fatalf("session b: %v %v", msgs, err)
	}
	// Deferred inside the session, and received back by sequence number through $management.
	if err := rb.DeferMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	deferred, err := rb.ReceiveDeferredMessages(ctx, []int64{*msgs[0].SequenceNumber}, nil)
	if err != nil || len(deferred) != 1 || string(deferred[0].Body) != "b1" {
		t.Fatalf("session deferred: %v %v", deferred, err)
	}
	if err := rb.CompleteMessage(ctx, deferred[0], nil); err != nil {
		t.Fatal(err)
	}
	// Past its end, the session lock cannot be renewed: the SDK reads the lock as lost.
	b.clock.Advance(2 * time.Minute)
	err = rb.RenewSessionLock(ctx, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Errorf("renew after the lock ended: %v", err)
	}

	// Receiving from a session queue without a session is refused.
	r, err := c.NewReceiverForQueue("sq", nil)
	if err == nil {
		_, err = r.ReceiveMessages(ctx, 1, nil)
	}
	if err == nil {
		t.Error("receiving from a session queue without a session succeeded")
	}
}

// Receive-and-delete in a session and from a dead-letter subqueue go the same way as on a queue:
// each message once, in order, and nothing left behind.
func TestSDKReceiveAndDeleteInASessionAndDeadLetters(t *testing.T) {
	b, c, ctx, s := sessionQueue(t)
	for _, body := range []string{"a1", "a2", "a3"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body), SessionID: to.Ptr("a")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rad := &azservicebus.SessionReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}
	r, err := c.AcceptSessionForQueue(ctx, "sq", "a", rad)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range receiveAll(t, ctx, r, 3) {
		got = append(got, string(m.Body))
	}
	_ = r.Close(ctx)
	if strings.Join(got, ",") != "a1,a2,a3" {
		t.Errorf("received %v; want a1, a2, a3 once each", got)
	}
	if e, err := b.store.GetEntity(ctx, "sq"); err != nil || e.Counts.Total() != 0 {
		t.Fatalf("after receive-and-delete in the session: %+v, %v; want nothing left", e, err)
	}

	// A dead letter, received and deleted from the dead-letter subqueue.
	b.createQueue(t, "q", nil)
	q := newSender(t, c, "q")
	if err := q.SendMessage(ctx, &azservicebus.Message{Body: []byte("d")}, nil); err != nil {
		t.Fatal(err)
	}
	pl, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := pl.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("peek-lock: %v %v", msgs, err)
	}
	if err := pl.DeadLetterMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	dl, err := c.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter, ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	if msgs, err := dl.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 || string(msgs[0].Body) != "d" {
		t.Fatalf("dead-letter receive-and-delete: %v %v", msgs, err)
	}
	if e, err := b.store.GetEntity(ctx, "q"); err != nil || e.Counts.Total() != 0 {
		t.Fatalf("after receive-and-delete of the dead letter: %+v, %v; want nothing left", e, err)
	}
}

// receiveAll receives from r, two at a time, until it has n messages.
func receiveAll(t *testing.T, ctx context.Context, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, min(2, n-len(got)), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs...)
	}
	return got
}

// sessionQueue starts a broker with a session queue sq, and gives a client with the root key,
// the test's context and a sender to sq.
func sessionQueue(t *testing.T) (*testBroker, *azservicebus.Client, context.Context, *azservicebus.Sender) {
	t.Helper()
	return sdkQueue(t, "sq", func(p *broker.Properties) { p.RequiresSession = true })
}

// A session receiver whose peer settles first (go-amqp's default: it forgets a delivery once
// it has sent its outcome) accepts a message and closes the link: the session's release must
// not overtake the completion. It did (the release frees the session's message locks, and the
// completion ran in a goroutine of its own), and the next receiver of the session got the
// accepted message again (in most runs of this test).
func TestSessionAcceptThenCloseKeepsTheCompletion(t *testing.T) {
	b := newBroker(t)
	ctx := ctxT(t)
	q := b.createQueue(t, "q", func(p *broker.Properties) { p.RequiresSession = true })
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	filter := []goamqp.LinkFilter{goamqp.NewLinkFilter("com.microsoft:session-filter", 0x137000000C, "s1")}
	for round := range 20 {
		body := fmt.Sprint("m", round)
		if err := b.store.Send(ctx, q, []broker.Message{{Body: []byte(body), SessionID: "s1"}}); err != nil {
			t.Fatal(err)
		}
		r, err := c.sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 1, Filters: filter})
		if err != nil {
			t.Fatal(err)
		}
		m, err := r.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.GetData()) != body {
			t.Fatalf("round %d: received %q; want %q (an accepted message came back)", round, m.GetData(), body)
		}
		if err := r.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A deferred receive by sequence number in a session whose lock has ended answers
// com.microsoft:session-lock-lost, as the session's other $management operations do (it
// answered com.microsoft:message-lock-lost).
func TestReceiveDeferredAfterTheSessionLockEnded(t *testing.T) {
	b := newBroker(t)
	ctx := ctxT(t)
	q := b.createQueue(t, "q", func(p *broker.Properties) { p.RequiresSession = true })
	if err := b.store.Send(ctx, q, []broker.Message{{Body: []byte("a"), SessionID: "s1"}}); err != nil {
		t.Fatal(err)
	}
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	r, err := c.sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 1,
		Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter("com.microsoft:session-filter", 0x137000000C, "s1")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Receive(ctx, nil); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute) // past the session's lock
	code, cond, desc := c.management(t, "q")("com.microsoft:receive-by-sequence-number",
		map[string]any{"sequence-numbers": []int64{1}, "receiver-settle-mode": uint32(1), "session-id": "s1"})
	if code != 410 || cond != "com.microsoft:session-lock-lost" {
		t.Errorf("receive-by-sequence-number after the session lock ended: %d %s %s; want 410 com.microsoft:session-lock-lost", code, cond, desc)
	}
}
