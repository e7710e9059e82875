package amqp_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
)

// sdkWhole is the message the Azure SDK for Go's live test
// TestSender_SendAMQPMessageWithMultipleByteSlicesInData (azservicebus v1.11.0, sender_test.go)
// sends, which it must receive back from the service as sent, with what the service adds.
func sdkWhole() *azservicebus.AMQPAnnotatedMessage {
	return &azservicebus.AMQPAnnotatedMessage{
		DeliveryAnnotations:   map[any]any{"x-opt-delivery-annotation-test": "test-value"},
		MessageAnnotations:    map[any]any{"x-opt-message-annotation-test": "test-value"},
		Footer:                map[any]any{"x-opt-footer-test": "footer-value"},
		Header:                &azservicebus.AMQPAnnotatedMessageHeader{Priority: 100, Durable: true},
		Body:                  azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("Hello World"), []byte("And another message!")}},
		ApplicationProperties: map[string]any{"hello": "world"},
	}
}

// wantWhole is what a receiver of sdkWhole gets besides what was sent: the broker's message
// annotations (by name), whether the lock token is in the delivery annotations, the header's
// delivery count when it matters (-1: any), and the application properties the broker adds.
type wantWhole struct {
	broker        []string
	locked        bool
	deliveryCount int
	props         map[string]any
}

// checkWhole fails unless m is sdkWhole as the service gives it back (the SDK test's require.Equal,
// field by field): the header as sent (no ttl), the delivery annotations as sent (and the lock
// token), the message annotations as sent and the broker's in w.broker and no other, the footer
// as sent, properties with only a message-id, the two data sections, the application property.
func checkWhole(t *testing.T, where string, m *azservicebus.ReceivedMessage, w wantWhole) {
	t.Helper()
	raw := m.RawAMQPMessage
	sent := sdkWhole()
	if m.Body != nil {
		t.Errorf("%s: Body %q; want nil (the body is two data sections)", where, m.Body)
	}
	if h := raw.Header; h == nil {
		t.Errorf("%s: no header", where)
	} else {
		got := *h
		if w.deliveryCount < 0 {
			got.DeliveryCount = 0
		}
		want := azservicebus.AMQPAnnotatedMessageHeader{Priority: 100, Durable: true, DeliveryCount: uint32(max(w.deliveryCount, 0))}
		if got != want {
			t.Errorf("%s: header %+v; want %+v", where, *h, want)
		}
	}
	da := maps(sent.DeliveryAnnotations)
	if w.locked {
		da["x-opt-lock-token"] = goamqp.UUID(m.LockToken)
	}
	if !reflect.DeepEqual(raw.DeliveryAnnotations, da) {
		t.Errorf("%s: delivery annotations %v; want %v", where, raw.DeliveryAnnotations, da)
	}
	var keys []string
	for k, v := range raw.MessageAnnotations {
		s, _ := k.(string)
		keys = append(keys, s)
		if s == "x-opt-message-annotation-test" && v != "test-value" {
			t.Errorf("%s: %s = %#v; want %q", where, s, v, "test-value")
		}
	}
	slices.Sort(keys)
	wantKeys := append([]string{"x-opt-enqueued-time", "x-opt-message-annotation-test", "x-opt-sequence-number"}, w.broker...)
	slices.Sort(wantKeys)
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("%s: message annotations %v; want %v", where, keys, wantKeys)
	}
	if seq := raw.MessageAnnotations["x-opt-sequence-number"]; m.SequenceNumber == nil || seq != *m.SequenceNumber {
		t.Errorf("%s: x-opt-sequence-number %v", where, seq)
	}
	if !reflect.DeepEqual(raw.Footer, sent.Footer) {
		t.Errorf("%s: footer %v; want %v", where, raw.Footer, sent.Footer)
	}
	if p := raw.Properties; p == nil {
		t.Errorf("%s: no properties", where)
	} else if id, ok := p.MessageID.(string); !ok || id == "" ||
		!reflect.DeepEqual(*p, azservicebus.AMQPAnnotatedMessageProperties{MessageID: p.MessageID}) {
		t.Errorf("%s: properties %+v; want only a message-id", where, *p)
	}
	if !reflect.DeepEqual(raw.Body, sent.Body) {
		t.Errorf("%s: body %#v; want %#v", where, raw.Body, sent.Body)
	}
	props := map[string]any{"hello": "world"}
	for k, v := range w.props {
		props[k] = v
	}
	if !reflect.DeepEqual(raw.ApplicationProperties, props) {
		t.Errorf("%s: application properties %v; want %v", where, raw.ApplicationProperties, props)
	}
}

func maps(m map[any]any) map[any]any {
	out := make(map[any]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// receive1 receives one message of r.
func receive1(t *testing.T, r *azservicebus.Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	msgs, err := r.ReceiveMessages(ctxT(t), 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %d messages, %v", len(msgs), err)
	}
	return msgs[0]
}

// The Go SDK's whole message (header, delivery and message annotations, footer, several data
// sections) comes back as the service gives it on every way a message is received: peek-lock
// (with the lock token in the delivery annotations), peek, receive-and-delete, receive of a
// deferred message, from the dead-letter subqueue, after a REST client locked and abandoned it,
// and as a topic's copy, an action's copy and a forwarded copy.
func TestSDKWholeMessageEveryPath(t *testing.T) {
	b, c, ctx, s := sdkQueue(t, "q", func(p *broker.Properties) { p.DefaultMessageTimeToLive = time.Hour })
	if err := s.SendAMQPAnnotatedMessage(ctx, sdkWhole(), nil); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, c, "q", nil)
	m := receive1(t, r)
	if m.LockToken == [16]byte{} {
		t.Fatal("a peek-locked message without a lock token")
	}
	checkWhole(t, "peek-lock", m, wantWhole{broker: []string{"x-opt-locked-until"}, locked: true})
	if err := r.AbandonMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	peeked, err := r.PeekMessages(ctx, 1, nil)
	if err != nil || len(peeked) != 1 {
		t.Fatalf("peek: %v, %v", peeked, err)
	}
	checkWhole(t, "peek", peeked[0], wantWhole{deliveryCount: -1})

	// REST locks it and abandons it; it is kept whole for the next AMQP receiver.
	resp := b.httpDo(t, "POST", "/q/messages/head?timeout=5", "", nil)
	if resp.StatusCode != 201 {
		t.Fatalf("REST peek-lock: %s", resp.Status)
	}
	if resp := b.httpDo(t, "PUT", strings.TrimPrefix(resp.Header.Get("Location"), b.httpURL), "", nil); resp.StatusCode != 200 {
		t.Fatalf("REST abandon: %s", resp.Status)
	}
	m = receive1(t, r)
	checkWhole(t, "after REST", m, wantWhole{broker: []string{"x-opt-locked-until"}, locked: true, deliveryCount: -1})
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	deferred, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(deferred) != 1 {
		t.Fatalf("receive deferred: %v, %v", deferred, err)
	}
	checkWhole(t, "deferred", deferred[0], wantWhole{broker: []string{"x-opt-locked-until", "x-opt-message-state"}, locked: true, deliveryCount: -1})
	if err := r.DeadLetterMessage(ctx, deferred[0], &azservicebus.DeadLetterOptions{Reason: ptr("why"), ErrorDescription: ptr("because")}); err != nil {
		t.Fatal(err)
	}
	dlq := newReceiver(t, c, "q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dead := receive1(t, dlq)
	checkWhole(t, "dead-letter subqueue", dead, wantWhole{broker: []string{"x-opt-locked-until"}, locked: true, deliveryCount: -1,
		props: map[string]any{"DeadLetterReason": "why", "DeadLetterErrorDescription": "because"}})
	if err := dlq.CompleteMessage(ctx, dead, nil); err != nil {
		t.Fatal(err)
	}

	// Receive-and-delete: no lock, so no lock token.
	if err := s.SendAMQPAnnotatedMessage(ctx, sdkWhole(), nil); err != nil {
		t.Fatal(err)
	}
	rnd := newReceiver(t, c, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	checkWhole(t, "receive-and-delete", receive1(t, rnd), wantWhole{})

	// A topic's copies, one changed by a rule action, and a copy forwarded on.
	if _, err := b.store.CreateEntity(ctx, broker.KindTopic, "t", broker.DefaultProperties(broker.KindTopic)); err != nil {
		t.Fatal(err)
	}
	b.createQueue(t, "dst", nil)
	action := &broker.Rule{Name: "act", Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: "1=1"},
		Action: &broker.RuleAction{SQLExpression: "SET user.added = 'yes'"}}
	fwd := broker.DefaultProperties(broker.KindSubscription)
	fwd.ForwardTo = "dst"
	for name, sub := range map[string]struct {
		rule  *broker.Rule
		props broker.Properties
	}{"plain": {nil, broker.DefaultProperties(broker.KindSubscription)}, "acted": {action, broker.DefaultProperties(broker.KindSubscription)}, "fwd": {nil, fwd}} {
		if _, err := b.store.CreateSubscription(ctx, "t/Subscriptions/"+name, sub.props, sub.rule); err != nil {
			t.Fatal(err)
		}
	}
	if err := newSender(t, c, "t").SendAMQPAnnotatedMessage(ctx, sdkWhole(), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sub  string
		want wantWhole
	}{
		{"subscription copy", "plain", wantWhole{broker: []string{"x-opt-locked-until"}, locked: true}},
		{"action's copy", "acted", wantWhole{broker: []string{"x-opt-locked-until"}, locked: true, props: map[string]any{"added": "yes"}}},
	} {
		r, err := c.NewReceiverForSubscription("t", tc.sub, nil)
		m := receive1(t, closedAtEnd(t, r, err))
		checkWhole(t, tc.name, m, tc.want)
	}
	forwarded := receive1(t, newReceiver(t, c, "dst", nil))
	checkWhole(t, "forwarded copy", forwarded, wantWhole{broker: []string{"x-opt-locked-until", "x-opt-enqueue-sequence-number"}, locked: true})
}

// rawQueue is a queue and a go-amqp connection that sends to it and receives from it (peek-lock,
// settled by the test) without the SDK in between.
type rawQueue struct {
	send func(*goamqp.Message) error
	recv *goamqp.Receiver
}

func newRawQueue(t *testing.T, b *testBroker, name string) rawQueue {
	t.Helper()
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	ctx := ctxT(t)
	s, err := c.sess.NewSender(ctx, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.sess.NewReceiver(ctx, name, &goamqp.ReceiverOptions{SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(), Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return rawQueue{send: func(m *goamqp.Message) error { return s.Send(ctx, m, nil) }, recv: r}
}

func (q rawQueue) receive(t *testing.T) *goamqp.Message {
	t.Helper()
	ctx := ctxT(t)
	m, err := q.recv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.recv.AcceptMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// What a go-amqp sender puts in a message that no Service Bus property holds comes back as sent:
// the header's durable, priority and first-acquirer and its ttl; delivery and message annotations
// and the footer, with their keys' and values' types; the properties user-id, content-encoding,
// creation-time, absolute-expiry-time, group-sequence. The broker's own annotations are the
// broker's, whatever the sender put under their names.
func TestRawWholeMessage(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", func(p *broker.Properties) { p.DefaultMessageTimeToLive = time.Hour })
	q := newRawQueue(t, b, "q")
	created := time.UnixMilli(time.Now().UnixMilli()).UTC()
	sent := &goamqp.Message{
		Header: &goamqp.MessageHeader{Durable: true, Priority: 7, FirstAcquirer: true, TTL: 30 * time.Minute, DeliveryCount: 9},
		DeliveryAnnotations: goamqp.Annotations{
			"da": int32(-1), "x-opt-lock-token": "the sender's", int64(42): []byte{1, 2},
			"x-opt-sequence-number": "no broker's delivery annotation", // kept
		},
		Annotations: goamqp.Annotations{
			"ma": uint64(3), "x-opt-sequence-number": "the sender's", "x-opt-locked-until": "the sender's",
			"x-opt-enqueued-time": int32(0), "x-opt-partition-id": int16(2),
		},
		Properties: &goamqp.MessageProperties{
			MessageID: "raw", UserID: []byte("user"), ContentEncoding: ptr("gzip"), CreationTime: &created,
			AbsoluteExpiryTime: ptr(created.Add(30 * time.Minute)), GroupSequence: ptr(uint32(5)),
		},
		Data:   [][]byte{[]byte("body")},
		Footer: goamqp.Annotations{"f": time.UnixMilli(1).UTC(), "g": []any{"list", int64(1)}},
	}
	if err := q.send(sent); err != nil {
		t.Fatal(err)
	}
	got := q.receive(t)
	if want := (goamqp.MessageHeader{Durable: true, Priority: 7, FirstAcquirer: true, TTL: 30 * time.Minute}); got.Header == nil || *got.Header != want {
		t.Errorf("header %+v; want %+v (the sender's delivery-count is the broker's)", got.Header, want)
	}
	lock := got.DeliveryAnnotations["x-opt-lock-token"]
	if u, ok := lock.(goamqp.UUID); !ok || u == (goamqp.UUID{}) {
		t.Errorf("x-opt-lock-token %#v; want the lock token", lock)
	}
	if want := (goamqp.Annotations{"da": int32(-1), int64(42): []byte{1, 2}, "x-opt-lock-token": lock,
		"x-opt-sequence-number": "no broker's delivery annotation"}); !reflect.DeepEqual(got.DeliveryAnnotations, want) {
		t.Errorf("delivery annotations %#v; want %#v", got.DeliveryAnnotations, want)
	}
	if seq, ok := got.Annotations["x-opt-sequence-number"].(int64); !ok || seq <= 0 {
		t.Errorf("x-opt-sequence-number %#v; want the broker's", got.Annotations["x-opt-sequence-number"])
	}
	for _, k := range []string{"x-opt-enqueued-time", "x-opt-locked-until"} {
		if _, ok := got.Annotations[k].(time.Time); !ok {
			t.Errorf("%s %#v; want the broker's timestamp", k, got.Annotations[k])
		}
	}
	if len(got.Annotations) != 5 || got.Annotations["ma"] != uint64(3) || got.Annotations["x-opt-partition-id"] != int16(2) {
		t.Errorf("message annotations %#v; want the broker's three, ma and x-opt-partition-id", got.Annotations)
	}
	if f, ok := got.Footer["f"].(time.Time); !ok || !f.Equal(sent.Footer["f"].(time.Time)) || len(got.Footer) != 2 ||
		!reflect.DeepEqual(got.Footer["g"], sent.Footer["g"]) {
		t.Errorf("footer %#v; want %#v", got.Footer, sent.Footer)
	}
	// go-amqp reads timestamps in the local zone: compare the instants.
	gp, sp := *got.Properties, *sent.Properties
	if gp.CreationTime == nil || !gp.CreationTime.Equal(*sp.CreationTime) ||
		gp.AbsoluteExpiryTime == nil || !gp.AbsoluteExpiryTime.Equal(*sp.AbsoluteExpiryTime) {
		t.Errorf("creation-time %v, absolute-expiry-time %v; want %v, %v as sent",
			gp.CreationTime, gp.AbsoluteExpiryTime, sp.CreationTime, sp.AbsoluteExpiryTime)
	}
	gp.CreationTime, gp.AbsoluteExpiryTime, sp.CreationTime, sp.AbsoluteExpiryTime = nil, nil, nil, nil
	if !reflect.DeepEqual(gp, sp) {
		t.Errorf("properties %+v; want %+v", gp, sp)
	}

	// The peek through $management shows the same, without a lock token.
	if err := q.send(sent); err != nil {
		t.Fatal(err)
	}
	pm := peekOne(t, b, "q")
	if want := (amqp.Map{{Key: amqp.Symbol("da"), Value: int32(-1)}, {Key: int64(42), Value: []byte{1, 2}},
		{Key: amqp.Symbol("x-opt-sequence-number"), Value: "no broker's delivery annotation"}}); !sameMap(pm.DeliveryAnnotations, want) {
		t.Errorf("peeked delivery annotations %v; want %v", pm.DeliveryAnnotations, want)
	}
}

// sameMap reports whether a and b hold the same entries, in any order.
func sameMap(a, b amqp.Map) bool {
	if len(a) != len(b) {
		return false
	}
	for _, e := range b {
		if !slices.ContainsFunc(a, func(f amqp.MapEntry) bool { return reflect.DeepEqual(e, f) }) {
			return false
		}
	}
	return true
}

// A receiver is told a ttl only when the sender gave one, over AMQP or REST, as by the service:
// a message without one has no ttl, creation-time or absolute-expiry-time, whatever the entity's
// default (the store still expires it then). Without a header, the header is the defaults'
// (durable false, priority 4, first-acquirer false) with the delivery count.
func TestTTLOnlyFromTheSender(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", func(p *broker.Properties) { p.DefaultMessageTimeToLive = time.Hour })
	q := newRawQueue(t, b, "q")
	if err := q.send(&goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: "none"}, Data: [][]byte{[]byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if err := q.send(&goamqp.Message{Header: &goamqp.MessageHeader{TTL: 10 * time.Minute, Priority: 4},
		Properties: &goamqp.MessageProperties{MessageID: "ttl"}, Data: [][]byte{[]byte("x")}}); err != nil {
		t.Fatal(err)
	}
	// Longer than the queue's default: capped, and told.
	if err := q.send(&goamqp.Message{Header: &goamqp.MessageHeader{TTL: 2 * time.Hour, Priority: 4},
		Properties: &goamqp.MessageProperties{MessageID: "long"}, Data: [][]byte{[]byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if resp := b.httpDo(t, "POST", "/q/messages", "rest", map[string]string{"BrokerProperties": `{"MessageId":"rest-ttl","TimeToLive":60}`}); resp.StatusCode != 201 {
		t.Fatalf("REST send: %s", resp.Status)
	}
	if resp := b.httpDo(t, "POST", "/q/messages", "rest", map[string]string{"BrokerProperties": `{"MessageId":"rest"}`}); resp.StatusCode != 201 {
		t.Fatalf("REST send: %s", resp.Status)
	}
	want := map[string]time.Duration{"none": 0, "ttl": 10 * time.Minute, "long": time.Hour, "rest-ttl": time.Minute, "rest": 0}
	for range want {
		m := q.receive(t)
		id, _ := m.Properties.MessageID.(string)
		ttl, ok := want[id]
		if !ok {
			t.Fatalf("unknown message %q", id)
		}
		if h := (goamqp.MessageHeader{Priority: 4, TTL: ttl}); m.Header == nil || *m.Header != h {
			t.Errorf("%s: header %+v; want %+v", id, m.Header, h)
		}
		if m.Properties.CreationTime != nil || m.Properties.AbsoluteExpiryTime != nil {
			t.Errorf("%s: creation-time %v, absolute-expiry-time %v; want neither (the sender set none)",
				id, m.Properties.CreationTime, m.Properties.AbsoluteExpiryTime)
		}
	}
}

// What the broker cannot keep as sent is refused with a reason, and nothing is stored: an
// annotation whose key is neither a symbol nor a ulong (nor a string or long, kept as sent), and
// annotations larger than a message's header may be.
func TestSectionsTheBrokerCannotKeepAreRefused(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", func(p *broker.Properties) { p.MaxMessageSizeInKilobytes = 1024 })
	send := rawSender(t, b, "q")
	big := strings.Repeat("x", broker.MaxAMQPSectionsSize)
	for name, tc := range map[string]struct {
		m    amqp.Message
		cond goamqp.ErrCond
	}{
		"an int key":             {amqp.Message{MessageAnnotations: amqp.Map{{Key: int32(1), Value: "x"}}}, goamqp.ErrCondNotImplemented},
		"a binary key":           {amqp.Message{DeliveryAnnotations: amqp.Map{{Key: []byte("k"), Value: "x"}}}, goamqp.ErrCondNotImplemented},
		"a list key in a footer": {amqp.Message{Footer: amqp.Map{{Key: amqp.List{"k"}, Value: "x"}}}, goamqp.ErrCondNotImplemented},
		"64 KiB of annotations":  {amqp.Message{DeliveryAnnotations: amqp.Map{{Key: amqp.Symbol("big"), Value: big}}}, goamqp.ErrCondInvalidField},
		"64 KiB of a footer":     {amqp.Message{Footer: amqp.Map{{Key: amqp.Symbol("big"), Value: big}}}, goamqp.ErrCondInvalidField},
		"a user-id over 64 KiB":  {amqp.Message{Properties: &amqp.Properties{UserID: []byte(big)}}, goamqp.ErrCondInvalidField},
	} {
		tc.m.Data = [][]byte{[]byte("x")}
		raw, err := amqp.Marshal(&tc.m)
		if err != nil {
			t.Fatal(err)
		}
		var ae *goamqp.Error
		if err := send(raw); !errors.As(err, &ae) || ae.Condition != tc.cond {
			t.Errorf("%s: %v; want %s", name, err, tc.cond)
		} else if !strings.Contains(ae.Description, "key") && !strings.Contains(ae.Description, fmt.Sprint(broker.MaxAMQPSectionsSize)) {
			t.Errorf("%s: %q does not say why", name, ae.Description)
		}
	}
	if e, err := b.store.GetEntity(ctxT(t), "q"); err != nil || e.Counts.Total() != 0 {
		t.Errorf("q holds %+v, %v; want nothing", e.Counts, err)
	}
}
