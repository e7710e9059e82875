package amqp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// cbsClient is a raw go-amqp connection with a $cbs request link and its reply link, for what
// the SDKs never send: tokens for the wrong entity, expired ones, malformed ones.
type cbsClient struct {
	conn  *goamqp.Conn
	sess  *goamqp.Session
	req   *goamqp.Sender
	reply *goamqp.Receiver
}

func dialCBS(t *testing.T, b *testBroker, sasl goamqp.SASLType) *cbsClient {
	t.Helper()
	ctx := ctxT(t)
	conn, err := goamqp.Dial(ctx, "amqp://"+b.amqpAddr, &goamqp.ConnOptions{SASLType: sasl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := sess.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := sess.NewReceiver(ctx, "$cbs", &goamqp.ReceiverOptions{TargetAddress: "cbs-reply", Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return &cbsClient{conn, sess, req, reply}
}

// putToken puts token for audience and returns the reply's status code and description.
func (c *cbsClient) putToken(t *testing.T, audience, token string) (int32, string) {
	t.Helper()
	ctx := ctxT(t)
	return status(exchange(ctx, t, c.req, c.reply, &goamqp.Message{
		Properties: &goamqp.MessageProperties{MessageID: "1", ReplyTo: ptr("cbs-reply")},
		ApplicationProperties: map[string]any{
			"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience,
		},
		Value: token,
	}))
}

// exchange sends the request m on req and returns the next message of reply, accepted: one
// request and its reply on a request/response pair of links ($cbs, $management).
func exchange(ctx context.Context, t *testing.T, req *goamqp.Sender, reply *goamqp.Receiver, m *goamqp.Message) *goamqp.Message {
	t.Helper()
	if err := req.Send(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	r, err := reply.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = reply.AcceptMessage(ctx, r)
	return r
}

func ptr[T any](v T) *T { return &v }

// attachSend attaches a sender to addr and sends one message; it returns the error condition
// met, or "" when the message was accepted.
func (c *cbsClient) attachSend(t *testing.T, addr string) goamqp.ErrCond {
	t.Helper()
	ctx := ctxT(t)
	s, err := c.sess.NewSender(ctx, addr, nil)
	if err == nil {
		err = s.Send(ctx, &goamqp.Message{Data: [][]byte{[]byte("x")}}, nil)
	}
	var ae *goamqp.Error
	if errors.As(err, &ae) {
		return ae.Condition
	}
	if err != nil {
		t.Fatalf("send to %s: %v", addr, err)
	}
	return ""
}

func TestCBSTokens(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	b.createQueue(t, "other", nil)
	aud := "amqp://" + b.amqpAddr + "/q"
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous())

	// No token yet: the link is refused.
	if cond := c.attachSend(t, "q"); cond != goamqp.ErrCondUnauthorizedAccess {
		t.Errorf("send without a token: %q", cond)
	}
	// A token signed for another entity does not cover q.
	if code, desc := c.putToken(t, aud, sas.Sign("amqp://"+b.amqpAddr+"/other", "root", "key", time.Now().Add(time.Hour))); code != 401 {
		t.Errorf("token for another entity: %d %s", code, desc)
	}
	// A bad signature, an expired token and a malformed one are refused.
	if code, _ := c.putToken(t, aud, sas.Sign(aud, "root", "wrong", time.Now().Add(time.Hour))); code != 401 {
		t.Errorf("bad signature: %d", code)
	}
	if code, desc := c.putToken(t, aud, sas.Sign(aud, "root", "key", time.Now().Add(-time.Hour))); code != 401 {
		t.Errorf("expired token: %d %s", code, desc)
	}
	if code, _ := c.putToken(t, aud, "not a token"); code != 401 {
		t.Errorf("malformed token: %d", code)
	}
	if cond := c.attachSend(t, "q"); cond != goamqp.ErrCondUnauthorizedAccess {
		t.Errorf("send after refused tokens: %q", cond)
	}
	// A Listen token does not give Send.
	if code, _ := c.putToken(t, aud, sas.Sign(aud, "listener", "k3", time.Now().Add(time.Hour))); code != 202 {
		t.Fatalf("listen token: %d", code)
	}
	if cond := c.attachSend(t, "q"); cond != goamqp.ErrCondUnauthorizedAccess {
		t.Errorf("send with a Listen token: %q", cond)
	}
	// A Send token for q (refreshing the grant on the same connection) opens q, not other.
	if code, _ := c.putToken(t, aud, sas.Sign(aud, "sender", "k2", time.Now().Add(time.Hour))); code != 202 {
		t.Fatalf("send token: %d", code)
	}
	if cond := c.attachSend(t, "q"); cond != "" {
		t.Errorf("send with a Send token: %q", cond)
	}
	if cond := c.attachSend(t, "other"); cond != goamqp.ErrCondUnauthorizedAccess {
		t.Errorf("send to another entity: %q", cond)
	}
	// A namespace-wide token covers every entity; a missing one is not found.
	if code, _ := c.putToken(t, "amqp://"+b.amqpAddr+"/", sas.Sign("amqp://"+b.amqpAddr+"/", "root", "key", time.Now().Add(time.Hour))); code != 202 {
		t.Fatal("namespace token refused")
	}
	if cond := c.attachSend(t, "other"); cond != "" {
		t.Errorf("send with a namespace token: %q", cond)
	}
	if cond := c.attachSend(t, "missing"); cond != goamqp.ErrCondNotFound {
		t.Errorf("send to a missing entity: %q", cond)
	}
	if cond := c.attachSend(t, "q/$DeadLetterQueue"); cond != goamqp.ErrCondNotAllowed {
		t.Errorf("send to a dead-letter queue: %q", cond)
	}
	e, err := b.store.GetEntity(context.Background(), "q")
	if err != nil || e.Counts.Active != 1 {
		t.Errorf("q holds %+v, %v; want the one accepted send", e.Counts, err)
	}
}

// SASL PLAIN with a namespace key authorizes without $cbs, with that key's rights; a wrong key
// fails the handshake.
func TestSASLPlain(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	c := dialCBS(t, b, goamqp.SASLTypePlain("sender", "k2"))
	if cond := c.attachSend(t, "q"); cond != "" {
		t.Errorf("send with PLAIN Send key: %q", cond)
	}
	ctx := ctxT(t)
	if _, err := c.sess.NewReceiver(ctx, "q", nil); err == nil {
		t.Error("a Send key opened a receiver")
	}
	if conn, err := goamqp.Dial(ctx, "amqp://"+b.amqpAddr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("root", "wrong")}); err == nil {
		conn.Close()
		t.Error("PLAIN with a wrong key connected")
	}
}

// A link authorized by a token that expires is refused its next delivery and detached with
// amqp:unauthorized-access; a refreshed token authorizes a new link.
func TestTokenExpiryOnALink(t *testing.T) {
	tokClock := &clock{t: time.Now()}
	b := newBrokerWith(t, tokClock.Now, nil)
	b.createQueue(t, "q", nil)
	aud := "amqp://" + b.amqpAddr + "/q"
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous())
	if code, _ := c.putToken(t, aud, sas.Sign(aud, "root", "key", time.Now().Add(time.Minute))); code != 202 {
		t.Fatal("token refused")
	}
	ctx := ctxT(t)
	s, err := c.sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, &goamqp.Message{Data: [][]byte{[]byte("in time")}}, nil); err != nil {
		t.Fatal(err)
	}
	tokClock.Advance(time.Hour) // past the expiry and the 5 minutes of skew tolerated
	err = s.Send(ctx, &goamqp.Message{Data: [][]byte{[]byte("too late")}}, nil)
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondUnauthorizedAccess {
		t.Errorf("send after expiry: %v", err)
	}
	if code, _ := c.putToken(t, aud, sas.Sign(aud, "root", "key", tokClock.Now().Add(time.Minute))); code != 202 {
		t.Fatal("refreshed token refused")
	}
	if cond := c.attachSend(t, "q"); cond != "" {
		t.Errorf("send with the refreshed token: %q", cond)
	}
	e, err := b.store.GetEntity(context.Background(), "q")
	if err != nil || e.Counts.Active != 2 {
		t.Errorf("q holds %+v, %v; want the two sends made in time", e.Counts, err)
	}
}

// Management requests the layer does not implement, or cannot read, get an error reply, never
// silence: an unknown operation is not implemented (501), a request without its fields (or
// with nothing to schedule) is a 400, a lock token never issued is lost (410).
func TestManagementRefusals(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	mgmt := dialCBS(t, b, goamqp.SASLTypePlain("root", "key")).management(t, "q")
	var cond string // the last reply's errorCondition
	call := func(op string, body map[string]any) (int32, string) {
		t.Helper()
		code, c, desc := mgmt(op, body)
		cond = c
		return code, desc
	}
	if code, desc := call("com.microsoft:schedule-message", map[string]any{"messages": []any{}}); code != 400 {
		t.Errorf("schedule-message: %d %s", code, desc)
	}
	if code, desc := call("com.microsoft:no-such-op", map[string]any{}); code != 501 {
		t.Errorf("unknown operation: %d %s", code, desc)
	}
	if code, desc := call("com.microsoft:schedule-message", map[string]any{"messages": []any{map[string]any{"message": []byte{0xff}}}}); code != 400 {
		t.Errorf("schedule-message of a message that does not decode: %d %s", code, desc)
	}
	// A missing message is com.microsoft:message-not-found, which the .NET and JS SDKs map to
	// MessageNotFound; amqp:not-found would read as a missing entity.
	if code, desc := call("com.microsoft:cancel-scheduled-message", map[string]any{"sequence-numbers": []int64{999}}); code != 404 || cond != "com.microsoft:message-not-found" {
		t.Errorf("cancel-scheduled-message of no message: %d %s %s", code, cond, desc)
	}
	if code, desc := call("com.microsoft:receive-by-sequence-number", map[string]any{"sequence-numbers": []int64{999}, "receiver-settle-mode": uint32(1)}); code != 404 || cond != "com.microsoft:message-not-found" {
		t.Errorf("receive-by-sequence-number of no message: %d %s %s", code, cond, desc)
	}
	if code, desc := call("com.microsoft:renew-lock", map[string]any{}); code != 400 {
		t.Errorf("renew-lock without lock-tokens: %d %s", code, desc)
	}
	if code, desc := call("com.microsoft:renew-lock", map[string]any{"lock-tokens": []goamqp.UUID{{1, 2, 3}}}); code != 410 {
		t.Errorf("renew-lock of an unknown token: %d %s", code, desc)
	}
	if code, desc := call("com.microsoft:peek-message", map[string]any{"from-sequence-number": int64(1), "message-count": int32(5)}); code != 204 {
		t.Errorf("peek of an empty queue: %d %s", code, desc)
	}
}

// A released delivery does not count: with MaxDeliveryCount 1 the message comes again, as a
// first delivery, however often it is released (the Go SDK releases messages that arrive on
// credit left over from an earlier receive).
func TestReleasedDeliveriesDoNotCount(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 1 })
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	if cond := c.attachSend(t, "q"); cond != "" {
		t.Fatal(cond)
	}
	ctx := ctxT(t)
	r, err := c.sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{
		SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(), Credit: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := r.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header == nil || m.Header.DeliveryCount != 0 {
			t.Fatalf("delivery %d: header %+v; want a first delivery", i, m.Header)
		}
		if i < 2 {
			if err := r.ReleaseMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := r.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	waitEmpty(t, b, "q")
}

// What the store cannot keep as sent is refused, not stored with parts dropped: a compound
// application property (fidelity_test.go has the rest; a null one is kept).
func TestUnsupportedMessagesAreRejected(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	ctx := ctxT(t)
	s, err := c.sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*goamqp.Message{
		"list property": {Value: "body", ApplicationProperties: map[string]any{"l": []any{int64(1)}}},
		"map property":  {Data: [][]byte{[]byte("a"), []byte("b")}, ApplicationProperties: map[string]any{"m": map[string]any{"k": "v"}}},
	} {
		err := s.Send(ctx, m, nil)
		var ae *goamqp.Error
		if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotImplemented {
			t.Errorf("%s: %v; want amqp:not-implemented", name, err)
		}
	}
	// The link stays usable, and nothing was stored.
	if err := s.Send(ctx, &goamqp.Message{Data: [][]byte{[]byte("fine")}}, nil); err != nil {
		t.Fatal(err)
	}
	if e, err := b.store.GetEntity(ctx, "q"); err != nil || e.Counts.Active != 1 {
		t.Errorf("q holds %+v, %v; want the one supported message", e.Counts, err)
	}
}

// management opens request and reply links to entity's $management on c's session, and returns
// a call that sends operation op with body and returns the reply's statusCode, errorCondition
// and statusDescription.
func (c *cbsClient) management(t *testing.T, entity string) func(op string, body map[string]any) (int32, string, string) {
	t.Helper()
	call := c.managementReply(t, entity)
	return func(op string, body map[string]any) (int32, string, string) {
		t.Helper()
		m := call(op, body)
		code, _ := m.ApplicationProperties["statusCode"].(int32)
		cond, _ := m.ApplicationProperties["errorCondition"].(string)
		desc, _ := m.ApplicationProperties["statusDescription"].(string)
		return code, cond, desc
	}
}

// managementReply is management returning the whole reply.
func (c *cbsClient) managementReply(t *testing.T, entity string) func(op string, body map[string]any) *goamqp.Message {
	t.Helper()
	ctx := ctxT(t)
	req, err := c.sess.NewSender(ctx, entity+"/$management", nil)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := c.sess.NewReceiver(ctx, entity+"/$management", &goamqp.ReceiverOptions{TargetAddress: "mgmt-reply", Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return func(op string, body map[string]any) *goamqp.Message {
		t.Helper()
		m := exchange(ctx, t, req, reply, &goamqp.Message{
			Properties:            &goamqp.MessageProperties{MessageID: op, ReplyTo: ptr("mgmt-reply")},
			ApplicationProperties: map[string]any{"operation": op},
			Value:                 body,
		})
		if m.Properties == nil || m.Properties.CorrelationID != op {
			t.Errorf("%s: reply correlates to %v", op, m.Properties)
		}
		return m
	}
}
