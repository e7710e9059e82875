package amqp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// putTokenAs sends a put-token request with the given message id, token type and reply-to ("":
// none) on c's $cbs link and returns the reply read from reply.
func putTokenAs(t *testing.T, c *cbsClient, reply *goamqp.Receiver, id any, typ, replyTo, audience, token string) *goamqp.Message {
	t.Helper()
	ctx := ctxT(t)
	props := &goamqp.MessageProperties{MessageID: id}
	if replyTo != "" {
		props.ReplyTo = &replyTo
	}
	return exchange(ctx, t, c.req, reply, &goamqp.Message{
		Properties:            props,
		ApplicationProperties: map[string]any{"operation": "put-token", "type": typ, "name": audience, "expiration": time.Now().Add(time.Hour)},
		Value:                 token,
	})
}

// status is the status code and description of a $cbs reply.
func status(m *goamqp.Message) (int32, string) {
	code, _ := m.ApplicationProperties["status-code"].(int32)
	desc, _ := m.ApplicationProperties["status-description"].(string)
	return code, desc
}

// Every SDK's put-token is served: a SAS token sent as type jwt (what token credentials send), a
// message-id of any AMQP type answered with a correlation-id of the same type, a missing entity
// answered 404, and the service's texts for refusals.
func TestPutTokenAsEverySDKSendsIt(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous())
	aud := "sb://" + b.amqpAddr + "/q"
	good := sas.Sign(aud, "root", "key", time.Now().Add(time.Hour))

	for _, id := range []any{"id-1", uint64(7), int64(3), goamqp.UUID{1, 2, 3}} {
		m := putTokenAs(t, c, c.reply, id, "jwt", "cbs-reply", aud, good)
		if code, desc := status(m); code != 202 {
			t.Errorf("put-token (jwt) with message-id %T: %d %s", id, code, desc)
		}
		if m.Properties == nil || m.Properties.CorrelationID != id {
			t.Errorf("message-id %#v answered with correlation-id %#v", id, m.Properties)
		}
	}
	if code, desc := status(putTokenAs(t, c, c.reply, "x", "something-else", "cbs-reply", aud, good)); code != 400 {
		t.Errorf("unknown token type: %d %s", code, desc)
	}
	missing := "sb://" + b.amqpAddr + "/nope"
	if code, desc := status(putTokenAs(t, c, c.reply, "x", "jwt", "cbs-reply", missing, sas.Sign(missing, "root", "key", time.Now().Add(time.Hour)))); code != 404 || !strings.Contains(desc, "nope") {
		t.Errorf("token for a missing entity: %d %s", code, desc)
	}
	expired := time.Now().Add(-time.Hour)
	if code, desc := status(putTokenAs(t, c, c.reply, "x", "jwt", "cbs-reply", aud, sas.Sign(aud, "root", "key", expired))); code != 401 ||
		!strings.Contains(desc, "ExpiredToken") || !strings.Contains(desc, "Expiration time: '"+expired.UTC().Format("2006-01-02 15:04:05")) {
		t.Errorf("expired token: %d %s", code, desc)
	}
	// An unknown key name and a wrong key read the same: the reply never tells which names exist.
	_, unknown := status(putTokenAs(t, c, c.reply, "x", "jwt", "cbs-reply", aud, sas.Sign(aud, "nobody", "key", time.Now().Add(time.Hour))))
	_, wrong := status(putTokenAs(t, c, c.reply, "x", "jwt", "cbs-reply", aud, sas.Sign(aud, "root", "bad", time.Now().Add(time.Hour))))
	if unknown != wrong || !strings.HasPrefix(unknown, "InvalidSignature") {
		t.Errorf("unknown key: %q; wrong key: %q", unknown, wrong)
	}
	// A token whose sr is the bare namespace host and port (how the SDKs sign a connection
	// string's SharedAccessSignature) is namespace-wide.
	bare := sas.Sign(b.amqpAddr, "root", "key", time.Now().Add(time.Hour))
	if code, desc := status(putTokenAs(t, c, c.reply, "x", "servicebus.windows.net:sastoken", "cbs-reply", aud, bare)); code != 202 {
		t.Errorf("token signed for the bare namespace: %d %s", code, desc)
	}
	if cond := c.attachSend(t, "q"); cond != "" {
		t.Errorf("send after the namespace token: %q", cond)
	}
}

// uAMQP and the pure-Python client send put-token without reply-to and listen on a link whose
// source and target are $cbs: the reply goes there, not to another link of the connection.
func TestCBSReplyWithoutReplyTo(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous()) // its reply link: source $cbs, target cbs-reply
	ctx := ctxT(t)
	python, err := c.sess.NewReceiver(ctx, "$cbs", &goamqp.ReceiverOptions{TargetAddress: "$cbs", Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	aud := "sb://" + b.amqpAddr + "/q"
	m := putTokenAs(t, c, python, uint64(0), "servicebus.windows.net:sastoken", "", aud, sas.Sign(aud, "root", "key", time.Now().Add(time.Hour)))
	if code, desc := status(m); code != 202 || m.Properties.CorrelationID != uint64(0) {
		t.Errorf("put-token without reply-to: %d %s, correlation %#v", code, desc, m.Properties.CorrelationID)
	}
	// With only a link whose source is $cbs (and another target), that link gets the reply.
	c2 := dialCBS(t, b, goamqp.SASLTypeAnonymous())
	m = putTokenAs(t, c2, c2.reply, int64(0), "servicebus.windows.net:sastoken", "", aud, sas.Sign(aud, "root", "key", time.Now().Add(time.Hour)))
	if code, _ := status(m); code != 202 {
		t.Errorf("put-token without reply-to, reply link with its own target: %d", code)
	}
}

// The JS SDK authorizes an entity's management node with a token for "<entity>/$management":
// that token serves the entity's management operations (here, scheduling on a fresh connection),
// and nothing else of the entity.
func TestManagementToken(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous())
	aud := "sb://" + b.amqpAddr + "/q/$management"
	if code, desc := c.putToken(t, aud, sas.Sign(aud, "root", "key", time.Now().Add(time.Hour))); code != 202 {
		t.Fatalf("put-token for the management node: %d %s", code, desc)
	}
	mgmt := c.management(t, "q")
	msg, err := (&goamqp.Message{Data: [][]byte{[]byte("later")}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	code, cond, desc := mgmt("com.microsoft:schedule-message", map[string]any{
		"messages": []any{map[string]any{"message-id": "m1", "message": msg}},
	})
	if code != 200 {
		t.Errorf("schedule with the management token: %d %s %s", code, cond, desc)
	}
	if cond := c.attachSend(t, "q"); cond != goamqp.ErrCondUnauthorizedAccess {
		t.Errorf("send with only the management token: %q", cond)
	}
}

// get-message-sessions lists the sessions with messages or state (the Go SDK's session pager),
// and those changed after a time.
func TestListSessions(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "sq", func(p *broker.Properties) { p.RequiresSession = true })
	c := b.client(t, "root")
	ctx := ctxT(t)
	s := newSender(t, c, "sq")
	for _, sid := range []string{"b", "a", "c"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(sid), SessionID: &sid}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	pager := c.NewListSessionsForQueuePager("sq", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.Sessions...)
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Errorf("sessions = %v; want a,b,c", got)
	}

	mgmt := dialCBS(t, b, goamqp.SASLTypePlain("root", "key")).management(t, "sq")
	code, cond, desc := mgmt("com.microsoft:get-message-sessions", map[string]any{
		"last-updated-time": b.clock.Now().Add(time.Hour), "skip": int32(0), "top": int32(10),
	})
	if code != 204 {
		t.Errorf("sessions changed after a later time: %d %s %s", code, cond, desc)
	}
	empty := "empty"
	b.createQueue(t, empty, func(p *broker.Properties) { p.RequiresSession = true })
	if code, _, desc := dialCBS(t, b, goamqp.SASLTypePlain("root", "key")).management(t, empty)("com.microsoft:get-message-sessions",
		map[string]any{"last-updated-time": time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), "skip": int32(0), "top": int32(10)}); code != 204 {
		t.Errorf("sessions of an empty queue: %d %s", code, desc)
	}
}

// The rule operations of a subscription's $management node, as the .NET, Java and JS rule
// managers send them: add (SQL and correlation filters, with and without an action), enumerate
// (described rule descriptions), remove; an existing name is entity-already-exists.
func TestRuleOperations(t *testing.T) {
	b := newBroker(t)
	ctx := context.Background()
	if _, err := b.store.CreateEntity(ctx, broker.KindTopic, "t", broker.DefaultProperties(broker.KindTopic)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.CreateSubscription(ctx, "t/Subscriptions/s", broker.DefaultProperties(broker.KindSubscription), nil); err != nil {
		t.Fatal(err)
	}
	mgmt := dialCBS(t, b, goamqp.SASLTypePlain("root", "key")).management(t, "t/Subscriptions/s")
	if code, cond, desc := mgmt("com.microsoft:add-rule", map[string]any{
		"rule-name": "big",
		"rule-description": map[string]any{
			"sql-filter":      map[string]any{"expression": "amount > 10"},
			"sql-rule-action": map[string]any{"expression": "SET big = true"},
			"rule-name":       "big",
		},
	}); code != 200 {
		t.Fatalf("add-rule (SQL): %d %s %s", code, cond, desc)
	}
	if code, cond, desc := mgmt("com.microsoft:add-rule", map[string]any{
		"rule-name": "corr",
		"rule-description": map[string]any{
			"correlation-filter": map[string]any{
				"correlation-id": "c1", "message-id": nil, "to": nil, "reply-to": nil, "label": "L",
				"session-id": nil, "reply-to-session-id": nil, "content-type": nil,
				// A uuid comes back a uuid (it once made enumerate-rules drop its reply: the
				// store's type was not turned back into AMQP's).
				"properties": map[string]any{"color": "red", "id": goamqp.UUID{1, 2, 3}, "kind": goamqp.Symbol("k")},
			},
			"sql-rule-action": nil,
			"rule-name":       "corr",
		},
	}); code != 200 {
		t.Fatalf("add-rule (correlation): %d %s %s", code, cond, desc)
	}
	if code, cond, _ := mgmt("com.microsoft:add-rule", map[string]any{
		"rule-name": "big", "rule-description": map[string]any{"sql-filter": map[string]any{"expression": "1=1"}},
	}); code != 409 || cond != "com.microsoft:entity-already-exists" {
		t.Errorf("add-rule of an existing name: %d %s", code, cond)
	}
	rules, err := b.store.ListRules(ctx, "t/Subscriptions/s", 0, 10)
	if err != nil || len(rules) != 3 {
		t.Fatalf("rules = %v, %v", rules, err)
	}
	if r := rules[2]; r.Name != "corr" || r.Filter.Correlation == nil || r.Filter.Correlation.CorrelationID != "c1" ||
		r.Filter.Correlation.Label != "L" || len(r.Filter.Correlation.Properties) != 3 {
		t.Errorf("correlation rule stored as %+v", r)
	}
	// enumerate-rules answers the described rule descriptions the rule managers decode: the
	// filters' descriptor codes are one hex digit shorter than the description's and actions'.
	reply := dialCBS(t, b, goamqp.SASLTypePlain("root", "key")).managementReply(t, "t/Subscriptions/s")("com.microsoft:enumerate-rules",
		map[string]any{"skip": int32(0), "top": int32(10)})
	raw, err := reply.MarshalBinary() // go-amqp keeps described values in an internal type: read them with ours
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := amqp.Unmarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := decoded.Value.(amqp.Map)
	rv, _ := body.Get("rules")
	list, _ := rv.(amqp.List)
	if len(list) != 3 {
		t.Fatalf("enumerate-rules: %d rules in %#v", len(list), decoded.Value)
	}
	wantFilters := map[string]uint64{"$Default": 0x000001370000007, "big": 0x000001370000006, "corr": 0x000001370000009}
	for _, e := range list {
		entry, _ := e.(amqp.Map)
		v, _ := entry.Get("rule-description")
		rd, ok := v.(amqp.Described)
		fields, _ := rd.Value.(amqp.List)
		if !ok || rd.Descriptor != uint64(0x0000013700000004) || len(fields) != 4 {
			t.Fatalf("rule-description %#v", v)
		}
		name, _ := fields[2].(string)
		filter, _ := fields[0].(amqp.Described)
		action, _ := fields[1].(amqp.Described)
		if filter.Descriptor != wantFilters[name] {
			t.Errorf("rule %s: filter %#v", name, filter)
		}
		wantAction := uint64(0x0000013700000005)
		if name == "big" {
			wantAction = 0x0000013700000006
		}
		if action.Descriptor != wantAction {
			t.Errorf("rule %s: action %#v", name, action)
		}
		if name == "corr" {
			cf, _ := filter.Value.(amqp.List)
			var props amqp.Map
			if len(cf) == 9 {
				props, _ = cf[8].(amqp.Map)
			}
			id, _ := props.Get("id")
			kind, _ := props.Get("kind")
			if id != (amqp.UUID{1, 2, 3}) || kind != "k" { // a symbol is kept as its text
				t.Errorf("correlation filter properties %#v; want the uuid back as a uuid, the symbol as text", props)
			}
		}
	}
	if code, cond, desc := mgmt("com.microsoft:remove-rule", map[string]any{"rule-name": "$Default"}); code != 200 {
		t.Errorf("remove-rule: %d %s %s", code, cond, desc)
	}
	if code, cond, _ := mgmt("com.microsoft:remove-rule", map[string]any{"rule-name": "none"}); code != 404 || cond != "amqp:not-found" {
		t.Errorf("remove-rule of a missing rule: %d %s", code, cond)
	}
}

// A token signed with a queue's own key authorizes that queue only, even when its scope is the
// whole namespace: an entity's key holder must not reach the other entities.
func TestEntityKeyGrantStaysOnItsEntity(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", func(p *broker.Properties) {
		p.AuthorizationRules = []broker.AuthorizationRule{{KeyName: "qkey", PrimaryKey: "qsecret", Rights: []string{"Send", "Listen"}}}
	})
	b.createQueue(t, "other", nil)
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous())
	wide := sas.Sign("sb://"+b.amqpAddr+"/", "qkey", "qsecret", time.Now().Add(time.Hour))
	if code, desc := c.putToken(t, "sb://"+b.amqpAddr+"/q", wide); code != 202 {
		t.Fatalf("put-token with the queue's key: %d %s", code, desc)
	}
	if cond := c.attachSend(t, "q"); cond != "" {
		t.Errorf("send to q with its key: %q", cond)
	}
	if cond := c.attachSend(t, "other"); cond != goamqp.ErrCondUnauthorizedAccess {
		t.Errorf("send to another queue with q's key: %q", cond)
	}
}

// A revoked or rotated key's links are detached within the key refresh (the access layer's
// cache bound), and a SASL PLAIN connection on such a key is closed: open connections do not
// keep a key alive until their token expires.
func TestRevocationReachesOpenLinks(t *testing.T) {
	b := newBrokerAccess(t, nil, func(c *access.Config) {
		c.StoredKeys, c.Refresh = true, 50*time.Millisecond
	})
	b.createQueue(t, "q", nil)
	ctx := ctxT(t)
	app, err := b.store.CreateNamespaceKey(ctx, "app", []string{"Send", "Listen"})
	if err != nil {
		t.Fatal(err)
	}
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous())
	aud := "sb://" + b.amqpAddr + "/q"
	if code, desc := c.putToken(t, aud, sas.Sign(aud, "app", app.PrimaryKey, time.Now().Add(time.Hour))); code != 202 {
		t.Fatalf("put-token: %d %s", code, desc)
	}
	snd, err := c.sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := c.sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Send(ctx, &goamqp.Message{Data: [][]byte{[]byte("before")}}, nil); err != nil {
		t.Fatal(err)
	}
	plain, err := goamqp.Dial(ctx, "amqp://"+b.amqpAddr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("app", app.PrimaryKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plainSess, err := plain.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := b.store.RotateNamespaceKey(ctx, "app", false); err != nil {
		t.Fatal(err)
	}
	unauthorized := func(err error) bool {
		var ae *goamqp.Error
		return errors.As(err, &ae) && ae.Condition == goamqp.ErrCondUnauthorizedAccess
	}
	// The receiver waits for a message (there is one: it gets it first, then the detach).
	for {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			if !unauthorized(err) {
				t.Fatalf("receiver after the rotation: %v", err)
			}
			break
		}
		_ = rcv.AcceptMessage(ctx, m)
	}
	if err := snd.Send(ctx, &goamqp.Message{Data: [][]byte{[]byte("after")}}, nil); !unauthorized(err) {
		t.Errorf("send after the rotation: %v", err)
	}
	// The PLAIN connection is closed at its own next check, within the refresh.
	eventually.NoError(t, "the PLAIN connection to be closed", func() error {
		l, err := plainSess.NewSender(ctx, "q", nil)
		if err != nil {
			return nil
		}
		_ = l.Close(ctx)
		return errors.New("the PLAIN connection of a rotated key still attaches links")
	})
}

// A $management node on a path no entity can have is refused at once, whatever its length: no
// grant could cover it, and its refusals would quote it.
func TestManagementNodeOnAnImpossiblePath(t *testing.T) {
	b := newBroker(t)
	c := dialCBS(t, b, goamqp.SASLTypeAnonymous())
	ctx := ctxT(t)
	for _, path := range []string{"not a path", strings.Repeat("q", 60_000), "a//b"} {
		_, err := c.sess.NewSender(ctx, path+"/$management", nil)
		var ae *goamqp.Error
		if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound || len(ae.Description) > 1100 {
			t.Errorf("management node on %.20q…: %v", path, err)
		}
	}
}

// Properties to modify on settlement, in every form the SDKs send them: on the link (the Go SDK's
// abandon and defer are modified outcomes with message annotations, its dead-letter a rejected
// outcome with them in the error's info, as .NET does) and through $management
// update-disposition's properties-to-modify (after a deferred receive). Each is applied with the
// settlement and comes back, typed, on the next delivery.
func TestSettlementWithPropertiesToModify(t *testing.T) {
	b, c, ctx, s := sdkQueue(t, "q", nil)
	sendBodies(t, ctx, s, "m")
	r := newReceiver(t, c, "q", nil)
	receiveOne := func() *azservicebus.ReceivedMessage {
		t.Helper()
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v, %v", msgs, err)
		}
		return msgs[0]
	}
	m := receiveOne()
	if err := r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"attempt": int32(1), "why": "busy"},
	}); err != nil {
		t.Fatalf("abandon with properties: %v", err)
	}
	m = receiveOne()
	if m.ApplicationProperties["attempt"] != int32(1) || m.ApplicationProperties["why"] != "busy" || m.DeliveryCount != 2 {
		t.Errorf("after the abandon: properties %v, delivery count %d", m.ApplicationProperties, m.DeliveryCount)
	}
	if err := r.DeferMessage(ctx, m, &azservicebus.DeferMessageOptions{PropertiesToModify: map[string]any{"attempt": int32(2)}}); err != nil {
		t.Fatalf("defer with properties: %v", err)
	}
	deferred, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(deferred) != 1 || deferred[0].ApplicationProperties["attempt"] != int32(2) {
		t.Fatalf("deferred: %v, %v", deferred, err)
	}
	// The deferred message is settled through $management: update-disposition.
	if err := r.DeadLetterMessage(ctx, deferred[0], &azservicebus.DeadLetterOptions{
		Reason: ptr("Poison"), PropertiesToModify: map[string]any{"attempt": int32(3), "at": "the end"},
	}); err != nil {
		t.Fatalf("dead-letter with properties: %v", err)
	}
	dlq := newReceiver(t, c, "q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	msgs, err := dlq.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("dead letter: %v, %v", msgs, err)
	}
	dl := msgs[0]
	if dl.ApplicationProperties["attempt"] != int32(3) || dl.ApplicationProperties["at"] != "the end" || dl.ApplicationProperties["why"] != "busy" ||
		dl.DeadLetterReason == nil || *dl.DeadLetterReason != "Poison" {
		t.Errorf("dead letter: properties %v, reason %v", dl.ApplicationProperties, dl.DeadLetterReason)
	}
	// On the link: a dead-letter of a peek-locked delivery carries them in the rejected info.
	sendBodies(t, ctx, s, "n")
	m = receiveOne()
	if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{PropertiesToModify: map[string]any{"k": int64(7)}}); err != nil {
		t.Fatalf("dead-letter on the link: %v", err)
	}
	msgs, err = dlq.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || msgs[0].ApplicationProperties["k"] != int64(7) {
		t.Errorf("dead letter from the link: %v, %v", msgs, err)
	}
	_ = b
}

// A peer that settles first awaits no outcome, but a settlement the broker refuses must not
// vanish: the link is detached with why (here: a property to modify of a type no message can
// hold), and the message comes back when its lock ends.
func TestRefusedFirstSettledDispositionDetaches(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	ctx := ctxT(t)
	if cond := c.attachSend(t, "q"); cond != "" {
		t.Fatal(cond)
	}
	r, err := c.sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 1}) // settles first
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The detach may reach go-amqp before its settlement returns (which then returns the
	// detach's error) or after; either way the refusal reaches the peer.
	err = r.ModifyMessage(ctx, m, &goamqp.ModifyMessageOptions{Annotations: goamqp.Annotations{"bad": []any{int64(1)}}})
	if err == nil {
		_, err = r.Receive(ctx, nil)
	}
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotImplemented {
		t.Errorf("after a refused first-settled modify, the link: %v; want detached with amqp:not-implemented", err)
	}
}
