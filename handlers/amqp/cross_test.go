package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbgate/sbgate/broker"
)

// A message sent over AMQP is received over HTTP with its properties, and the other way round.
func TestCrossProtocol(t *testing.T) {
	b, c, ctx, s := sdkQueue(t, "q", nil)
	if err := s.SendMessage(ctx, &azservicebus.Message{
		Body: []byte("from amqp"), MessageID: to.Ptr("a1"), Subject: to.Ptr("lbl"), ContentType: to.Ptr("text/plain"),
		ApplicationProperties: map[string]any{"color": "red", "n": int64(5), "ok": true},
	}, nil); err != nil {
		t.Fatal(err)
	}
	resp := b.httpDo(t, "DELETE", "/q/messages/head?timeout=5", "", nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "from amqp" {
		t.Fatalf("HTTP receive: %s %q", resp.Status, body)
	}
	bp := resp.Header.Get("BrokerProperties")
	for _, want := range []string{`"MessageId":"a1"`, `"Label":"lbl"`} {
		if !strings.Contains(bp, want) {
			t.Errorf("BrokerProperties %s lacks %s", bp, want)
		}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("Content-Type = %q", ct)
	}
	for k, want := range map[string]string{"color": `"red"`, "n": "5", "ok": "true"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("user property %s = %q, want %q", k, got, want)
		}
	}

	resp = b.httpDo(t, "POST", "/q/messages", "from http", map[string]string{
		"BrokerProperties": `{"MessageId":"h1","CorrelationId":"c","Label":"L"}`,
		"Content-Type":     "application/json",
		"Price":            "2.5", "Name": `"n"`,
	})
	if resp.StatusCode != 201 {
		t.Fatalf("HTTP send: %s", resp.Status)
	}
	r := newReceiver(t, c, "q", nil)
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("AMQP receive: %v %v", msgs, err)
	}
	m := msgs[0]
	if string(m.Body) != "from http" || m.MessageID != "h1" || *m.CorrelationID != "c" || *m.Subject != "L" ||
		*m.ContentType != "application/json" || m.ApplicationProperties["price"] != 2.5 || m.ApplicationProperties["name"] != "n" {
		t.Errorf("message = %+v, properties %v", m, m.ApplicationProperties)
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
}

func TestSDKDeferRenewPeek(t *testing.T) {
	b, c, ctx, s := sdkQueue(t, "q", nil)
	sendBodies(t, ctx, s, "one", "two")
	r := newReceiver(t, c, "q", nil)
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 2 || string(peeked[0].Body) != "one" || string(peeked[1].Body) != "two" {
		t.Fatalf("peek: %v %v", peeked, err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	m := msgs[0]
	before := *m.LockedUntil
	b.clock.Advance(10 * time.Second)
	if err := r.RenewMessageLock(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	if !m.LockedUntil.After(before) {
		t.Errorf("renewed lock until %v, was %v", m.LockedUntil, before)
	}
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	deferred, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(deferred) != 1 || string(deferred[0].Body) != "one" || deferred[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("receive deferred: %v %v", deferred, err)
	}
	if err := r.CompleteMessage(ctx, deferred[0], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil); err == nil {
		t.Error("receiving a completed deferred message succeeded")
	}
}

func TestSDKAuthorizationAndMissingEntities(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	ctx := ctxT(t)
	code := func(err error) azservicebus.Code {
		var sbErr *azservicebus.Error
		if errors.As(err, &sbErr) {
			return sbErr.Code
		}
		return ""
	}

	// A wrong key: the put-token is refused.
	s, err := b.client(t, "wrong").NewSender("q", nil)
	if err == nil {
		err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	}
	if code(err) != azservicebus.CodeUnauthorizedAccess {
		t.Errorf("wrong key: %v", err)
	}
	// A Listen-only key cannot send; a Send-only key cannot receive.
	s, err = b.client(t, "listener").NewSender("q", nil)
	if err == nil {
		err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	}
	if code(err) != azservicebus.CodeUnauthorizedAccess {
		t.Errorf("send with Listen: %v", err)
	}
	r, err := b.client(t, "sender").NewReceiverForQueue("q", nil)
	if err == nil {
		_, err = r.ReceiveMessages(ctx, 1, nil)
	}
	if code(err) != azservicebus.CodeUnauthorizedAccess {
		t.Errorf("receive with Send: %v", err)
	}
	// A missing entity.
	s, err = b.client(t, "root").NewSender("nope", nil)
	if err == nil {
		err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	}
	// The put-token for it is answered 404, as the service does: the SDK's CodeNotFound.
	if code(err) != azservicebus.CodeNotFound {
		t.Errorf("missing entity: %v", err)
	}
	// Nothing was stored.
	if e, err := b.store.GetEntity(ctx, "q"); err != nil || e.Counts.Total() != 0 {
		t.Errorf("q: %+v %v", e.Counts, err)
	}
}

// A topic's subscriptions receive over AMQP what their SQL filters accept of what was sent to
// the topic over AMQP.
func TestSDKSubscriptionWithSQLFilter(t *testing.T) {
	b := newBroker(t)
	ctx := ctxT(t)
	if _, err := b.store.CreateEntity(ctx, broker.KindTopic, "t", broker.DefaultProperties(broker.KindTopic)); err != nil {
		t.Fatal(err)
	}
	rule := &broker.Rule{Name: "red", Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: "color = 'red'"}}
	if _, err := b.store.CreateSubscription(ctx, "t/Subscriptions/reds", broker.DefaultProperties(broker.KindSubscription), rule); err != nil {
		t.Fatal(err)
	}
	c := b.client(t, "root")
	s := newSender(t, c, "t")
	for _, color := range []string{"blue", "red"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(color), ApplicationProperties: map[string]any{"color": color}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.NewReceiverForSubscription("t", "reds", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	msgs, err := r.ReceiveMessages(ctx, 2, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "red" {
		t.Fatalf("subscription received %v, %v", msgs, err)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	// Receiving from the topic itself is refused.
	tr, err := c.NewReceiverForQueue("t", nil)
	if err == nil {
		_, err = tr.ReceiveMessages(ctx, 1, nil)
	}
	if err == nil {
		t.Error("receiving from a topic succeeded")
	}
}

// A message sent with a scheduled enqueue time stays invisible until then.
func TestSDKScheduledEnqueueTime(t *testing.T) {
	b, c, ctx, s := sdkQueue(t, "q", nil)
	at := b.clock.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("later"), ScheduledEnqueueTime: &at}, nil); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, c, "q", nil)
	peeked, err := r.PeekMessages(ctx, 1, nil)
	if err != nil || len(peeked) != 1 || peeked[0].State != azservicebus.MessageStateScheduled ||
		peeked[0].ScheduledEnqueueTime == nil || !peeked[0].ScheduledEnqueueTime.Equal(at) {
		t.Fatalf("peek: %+v %v", *peeked[0], err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	msgs, _ := r.ReceiveMessages(short, 1, nil)
	cancel()
	if len(msgs) != 0 {
		t.Fatalf("received a scheduled message early: %v", msgs)
	}
	b.clock.Advance(time.Hour + time.Second)
	msgs, err = r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "later" {
		t.Fatalf("after the scheduled time: %v %v", msgs, err)
	}
}

// ScheduleMessages answers the sequence numbers the messages are stored under, and
// CancelScheduledMessages removes them by those numbers before their time; on a topic, where no
// number could cancel the copies, scheduling is refused.
func TestSDKScheduleAndCancel(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	if _, err := b.store.CreateEntity(context.Background(), broker.KindTopic, "t", broker.DefaultProperties(broker.KindTopic)); err != nil {
		t.Fatal(err)
	}
	c := b.client(t, "root")
	ctx := ctxT(t)
	s := newSender(t, c, "q")
	at := b.clock.Now().Add(time.Hour).Truncate(time.Millisecond)
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("one")}, {Body: []byte("two")}, {Body: []byte("three")}}, at, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, c, "q", nil)
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 3 || len(seqs) != 3 {
		t.Fatalf("scheduled %v; peek %d messages, %v", seqs, len(peeked), err)
	}
	for i, m := range peeked {
		if *m.SequenceNumber != seqs[i] || m.State != azservicebus.MessageStateScheduled || !m.ScheduledEnqueueTime.Equal(at) {
			t.Errorf("peeked %s seq %d state %v at %v; scheduled as %d at %v", m.Body, *m.SequenceNumber, m.State, m.ScheduledEnqueueTime, seqs[i], at)
		}
	}
	// All or none: with a number that names nothing scheduled, nothing is cancelled (before,
	// those ahead of it were, and the request failed all the same).
	err = s.CancelScheduledMessages(ctx, []int64{seqs[0], seqs[2] + 100, seqs[2]}, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound {
		t.Fatalf("cancel with a missing number: %v; want not found", err)
	}
	if peeked, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seqs[0]}); err != nil || len(peeked) != 3 {
		t.Fatalf("after the refused cancel, peek = %d messages, %v; want all 3 still scheduled", len(peeked), err)
	}
	if err := s.CancelScheduledMessages(ctx, []int64{seqs[0], seqs[2]}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CancelScheduledMessages(ctx, []int64{seqs[0]}, nil); err == nil {
		t.Error("cancelling a cancelled message succeeded")
	}
	b.clock.Advance(time.Hour + time.Second)
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "two" || *msgs[0].SequenceNumber != seqs[1] {
		t.Fatalf("after the scheduled time: %v %v; want only 'two', seq %d", msgs, err, seqs[1])
	}
	if err := s.CancelScheduledMessages(ctx, []int64{seqs[1]}, nil); err == nil {
		t.Error("cancelling a message whose time has come succeeded")
	}

	// In a session queue, no session lock is needed to schedule or cancel.
	b.createQueue(t, "sq", func(p *broker.Properties) { p.RequiresSession = true })
	ss, err := c.NewSender("sq", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close(ctx)
	at = b.clock.Now().Add(time.Hour).Truncate(time.Millisecond) // the clock moved past the first
	sseqs, err := ss.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("s"), SessionID: to.Ptr("a")}}, at, nil)
	if err != nil || len(sseqs) != 1 {
		t.Fatalf("schedule in a session queue: %v %v", sseqs, err)
	}
	if e, err := b.store.GetEntity(context.Background(), "sq"); err != nil || e.Counts.Scheduled != 1 {
		t.Fatalf("session queue after scheduling: %+v %v", e.Counts, err)
	}
	if err := ss.CancelScheduledMessages(ctx, sseqs, nil); err != nil {
		t.Fatal(err)
	}
	if e, err := b.store.GetEntity(context.Background(), "sq"); err != nil || e.Counts.Total() != 0 {
		t.Errorf("session queue after cancelling: %+v %v", e.Counts, err)
	}

}

// Scheduling on a topic, and on a queue that forwards its messages, returns a number that names
// every copy (in each subscription, in the forwarding target): cancelling it removes them all;
// a message not cancelled arrives everywhere at its time.
func TestSDKScheduleAndCancelOnTopicsAndForwarding(t *testing.T) {
	b := newBroker(t)
	bg := context.Background()
	if _, err := b.store.CreateEntity(bg, broker.KindTopic, "t", broker.DefaultProperties(broker.KindTopic)); err != nil {
		t.Fatal(err)
	}
	b.createQueue(t, "target", nil)
	for _, sub := range []string{"a", "b"} {
		p := broker.DefaultProperties(broker.KindSubscription)
		if sub == "b" {
			p.ForwardTo = "target" // a copy forwarded on: it lives in target
		}
		if _, err := b.store.CreateSubscription(bg, "t/Subscriptions/"+sub, p, nil); err != nil {
			t.Fatal(err)
		}
	}
	b.createQueue(t, "fwd", func(p *broker.Properties) { p.ForwardTo = "target" })
	c := b.client(t, "root")
	ctx := ctxT(t)
	at := b.clock.Now().Add(time.Hour).Truncate(time.Millisecond)
	for _, entity := range []string{"t", "fwd"} {
		s := newSender(t, c, entity)
		seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("cancelled")}, {Body: []byte("kept")}}, at, nil)
		if err != nil || len(seqs) != 2 || seqs[0] == 0 || seqs[1] == 0 || seqs[0] == seqs[1] {
			t.Fatalf("schedule on %s: %v, %v", entity, seqs, err)
		}
		if err := s.CancelScheduledMessages(ctx, seqs[:1], nil); err != nil {
			t.Fatalf("cancel on %s: %v", entity, err)
		}
		if err := s.CancelScheduledMessages(ctx, seqs[:1], nil); err == nil {
			t.Errorf("cancelling on %s again succeeded", entity)
		}
	}
	count := func(path string) int64 {
		e, err := b.store.GetEntity(bg, path)
		if err != nil {
			t.Fatal(err)
		}
		return e.Counts.Scheduled
	}
	// Left: the kept one in a, and in target from t's subscription b and from fwd.
	if a, tg := count("t/Subscriptions/a"), count("target"); a != 1 || tg != 2 {
		t.Fatalf("scheduled after the cancels: %d in t/a, %d in target; want 1 and 2", a, tg)
	}
	b.clock.Advance(time.Hour + time.Second)
	for path, n := range map[string]int{"t/Subscriptions/a": 1, "target": 2} {
		r, err := c.NewReceiverForSubscription("t", "a", nil)
		if path == "target" {
			r, err = c.NewReceiverForQueue("target", nil)
		}
		r = closedAtEnd(t, r, err)
		for _, m := range receiveAll(t, ctx, r, n) {
			if string(m.Body) != "kept" {
				t.Errorf("%s received %q", path, m.Body)
			}
		}
	}
}

// ReceiveDeferredMessages is all or nothing: when one of the sequence numbers asked for is not an
// available deferred message, a receive-and-delete request fails with not-found and deletes
// none of them (before, the messages ahead of the missing one were deleted and never sent);
// when all are, they come back in the order asked. Peek-lock likewise locks none or all. An
// empty list answers an empty list, as the .NET SDK answers it without asking; more than
// broker.MaxReceiveBatch is a bad request.
func TestSDKReceiveDeferredMessagesAllOrNothing(t *testing.T) {
	_, c, ctx, s := sdkQueue(t, "q", nil)
	sendBodies(t, ctx, s, "a", "b")
	r := newReceiver(t, c, "q", nil)
	msgs := receiveAll(t, ctx, r, 2)
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		if err := r.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		seqs[i] = *m.SequenceNumber
	}
	rd := newReceiver(t, c, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	missing := seqs[1] + 100
	_, err := rd.ReceiveDeferredMessages(ctx, []int64{seqs[0], missing}, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound || !strings.Contains(err.Error(), fmt.Sprint(missing)) {
		t.Fatalf("receive-and-delete of a deferred and a missing message: err = %v; want not found naming %d", err, missing)
	}
	peeked, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seqs[0]})
	if err != nil || len(peeked) != 2 || peeked[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("after the failed request, peek = %v, %v; want both messages still deferred", peeked, err)
	}

	// Both there, asked in reverse order (and one twice): each comes once, in the order asked.
	got, err := rd.ReceiveDeferredMessages(ctx, []int64{seqs[1], seqs[0], seqs[1]}, nil)
	if err != nil || len(got) != 2 || string(got[0].Body) != "b" || string(got[1].Body) != "a" {
		t.Fatalf("receive-and-delete of both = %v, %v; want b then a", got, err)
	}
	if left, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seqs[0]}); err != nil || len(left) != 0 {
		t.Errorf("after receive-and-delete, peek = %v, %v; want nothing", left, err)
	}

	// Peek-lock: the failed request locks nothing; then both come back locked, each under a
	// lock token that settles it.
	sendBodies(t, ctx, s, "c", "d")
	msgs = receiveAll(t, ctx, r, 2)
	for i, m := range msgs {
		if err := r.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		seqs[i] = *m.SequenceNumber
	}
	if _, err := r.ReceiveDeferredMessages(ctx, []int64{seqs[0], missing + 100}, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound {
		t.Fatalf("peek-lock of a deferred and a missing message: err = %v; want not found", err)
	}
	locked, err := r.ReceiveDeferredMessages(ctx, []int64{seqs[1], seqs[0]}, nil)
	if err != nil || len(locked) != 2 || string(locked[0].Body) != "d" || string(locked[1].Body) != "c" {
		t.Fatalf("peek-lock of both = %v, %v; want d then c", locked, err)
	}
	for _, m := range locked {
		if m.DeliveryCount != 1 {
			t.Errorf("%s: DeliveryCount %d; want 1 (neither deferring, nor the failed request, nor a receive by number counts)", m.Body, m.DeliveryCount)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Errorf("complete %s: %v", m.Body, err)
		}
	}

	if none, err := rd.ReceiveDeferredMessages(ctx, []int64{}, nil); err != nil || len(none) != 0 {
		t.Errorf("receive deferred of no sequence numbers = %v, %v; want none", none, err)
	}
	tooMany := make([]int64, broker.MaxReceiveBatch+1)
	for i := range tooMany {
		tooMany[i] = int64(i + 1)
	}
	if _, err := rd.ReceiveDeferredMessages(ctx, tooMany, nil); err == nil || !strings.Contains(err.Error(), fmt.Sprint(broker.MaxReceiveBatch)) {
		t.Errorf("receive deferred of %d sequence numbers: err = %v; want a bad request naming the limit", len(tooMany), err)
	}
}
