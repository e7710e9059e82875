package store_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store"
)

func (b *bundle) topic(t *testing.T, path string, edit func(p *broker.Properties)) *broker.Entity {
	t.Helper()
	p := broker.DefaultProperties(broker.KindTopic)
	if edit != nil {
		edit(&p)
	}
	e, err := b.store.CreateEntity(b.ctx, broker.KindTopic, path, p)
	if err != nil {
		t.Fatalf("create topic %s: %v", path, err)
	}
	return e
}

// sub creates a subscription with one rule (nil: $Default, everything).
func (b *bundle) sub(t *testing.T, topic, name string, rule *broker.Rule, edit func(p *broker.Properties)) *broker.Entity {
	t.Helper()
	p := broker.DefaultProperties(broker.KindSubscription)
	if edit != nil {
		edit(&p)
	}
	e, err := b.store.CreateSubscription(b.ctx, broker.SubscriptionPath(topic, name), p, rule)
	if err != nil {
		t.Fatalf("create subscription %s/%s: %v", topic, name, err)
	}
	return e
}

func sqlRule(name, expr string, params ...broker.Property) *broker.Rule {
	return &broker.Rule{Name: name, Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: expr, Parameters: params}}
}

// drain receives everything in e's subqueue and returns the bodies in order.
func (b *bundle) drain(t *testing.T, e *broker.Entity, sq broker.SubQueue) []*broker.Message {
	t.Helper()
	var out []*broker.Message
	for {
		msgs, err := receiveN(b.ctx, b.store, broker.Target{Entity: e, SubQueue: sq}, broker.ReceiveAndDelete, 100, 0)
		if err != nil {
			t.Fatalf("drain %s: %v", e.Path, err)
		}
		if len(msgs) == 0 {
			return out
		}
		out = append(out, msgs...)
	}
}

func bodies(msgs []*broker.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

func TestTopicRoutesBySQLAndCorrelationFilters(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "orders", nil)
	all := b.sub(t, "orders", "all", nil, nil)
	eu := b.sub(t, "orders", "eu", sqlRule("eu", "region = @r AND amount > 100", broker.Property{Name: "@r", Value: "eu"}), nil)
	corr := b.sub(t, "orders", "corr", &broker.Rule{Name: "c", Filter: broker.RuleFilter{Kind: broker.FilterCorrelation,
		Correlation: &broker.CorrelationFilter{Label: "urgent", Properties: []broker.Property{{Name: "prio", Value: int64(1)}}}}}, nil)
	none := b.sub(t, "orders", "none", &broker.Rule{Name: "never", Filter: broker.RuleFilter{Kind: broker.FilterFalse, SQLExpression: "1=0"}}, nil)

	send := func(body, label string, props ...broker.Property) {
		b.send(t, topic, broker.Message{Body: []byte(body), Label: label, UserProperties: props})
	}
	send("eu-big", "", broker.Property{Name: "Region", Value: "eu"}, broker.Property{Name: "amount", Value: int64(500)})
	send("eu-small", "", broker.Property{Name: "region", Value: "eu"}, broker.Property{Name: "amount", Value: 50.0})
	send("urgent", "urgent", broker.Property{Name: "prio", Value: 1.0})
	send("urgent-wrong-prio", "urgent", broker.Property{Name: "prio", Value: int64(2)})

	for _, tc := range []struct {
		sub  *broker.Entity
		want []string
	}{
		{all, []string{"eu-big", "eu-small", "urgent", "urgent-wrong-prio"}},
		{eu, []string{"eu-big"}},
		{corr, []string{"urgent"}},
		{none, nil},
	} {
		if diff := cmp.Diff(tc.want, bodies(b.drain(t, tc.sub, broker.SubQueueMain)), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s received (-want +got):\n%s", tc.sub.Path, diff)
		}
	}
	// Messages live in the subscriptions; the topic itself holds none.
	if c := b.counts(t, "orders"); c.Total() != 0 {
		t.Errorf("topic counts = %+v", c)
	}
	got, err := b.store.GetEntity(b.ctx, "orders")
	if err != nil || got.SubscriptionCount != 4 {
		t.Errorf("SubscriptionCount = %v, %v; want 4", got.SubscriptionCount, err)
	}
}

func TestRuleActionsChangeOnlyTheirCopy(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "t", nil)
	tagged := b.sub(t, "t", "tagged", &broker.Rule{Name: "tag", Filter: broker.RuleFilter{Kind: broker.FilterTrue, SQLExpression: "1=1"},
		Action: &broker.RuleAction{SQLExpression: "SET user.seen = 'yes'; SET sys.Label = 'relabelled'; SET total = amount * 2; REMOVE secret"}}, nil)
	plain := b.sub(t, "t", "plain", nil, nil)
	// Two matching rules give two copies, each with its own action.
	if _, err := b.store.PutRule(b.ctx, "t/Subscriptions/plain", broker.Rule{Name: "second",
		Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: "amount > 1"},
		Action: &broker.RuleAction{SQLExpression: "SET copy = 2"}}, false); err != nil {
		t.Fatal(err)
	}
	b.send(t, topic, broker.Message{Body: []byte("m"), Label: "orig", UserProperties: broker.UserProperties{
		{Name: "amount", Value: int64(21)}, {Name: "secret", Value: "s"}}})

	got := b.drain(t, tagged, broker.SubQueueMain)
	if len(got) != 1 {
		t.Fatalf("tagged got %d copies", len(got))
	}
	want := broker.UserProperties{{Name: "amount", Value: int64(21)}, {Name: "seen", Value: "yes"}, {Name: "total", Value: int64(42)}}
	if diff := cmp.Diff(want, got[0].UserProperties); diff != "" || got[0].Label != "relabelled" {
		t.Errorf("tagged copy: label %q, properties (-want +got):\n%s", got[0].Label, diff)
	}
	copies := b.drain(t, plain, broker.SubQueueMain)
	if len(copies) != 2 {
		t.Fatalf("plain got %d copies; want one per matching rule", len(copies))
	}
	var sawAction bool
	for _, c := range copies {
		if c.Label != "orig" {
			t.Errorf("plain copy relabelled to %q by another subscription's action", c.Label)
		}
		for _, p := range c.UserProperties {
			if p.Name == "copy" {
				sawAction = true
			}
			if p.Name == "seen" {
				t.Errorf("plain copy carries the other subscription's property")
			}
		}
	}
	if !sawAction {
		t.Errorf("the second rule's action did not apply to its copy")
	}
}

func TestFilterEvaluationErrors(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "t", nil)
	// sys.Nonsense is no broker property: evaluating it is an error.
	dl := b.sub(t, "t", "dl", sqlRule("bad", "sys.Nonsense = 1"), nil)
	drop := b.sub(t, "t", "drop", sqlRule("bad", "sys.Nonsense = 1"), func(p *broker.Properties) { p.DeadLetteringOnFilterEvaluation = false })
	b.send(t, topic, broker.Message{Body: []byte("x"), MessageID: "x"})
	if got := b.drain(t, dl, broker.SubQueueMain); len(got) != 0 {
		t.Errorf("dl subscription received %d messages", len(got))
	}
	dead := b.drain(t, dl, broker.SubQueueDeadLetter)
	if len(dead) != 1 || dead[0].DeadLetterReason != broker.ReasonFilterEvaluation || !strings.Contains(dead[0].DeadLetterDescription, "Nonsense") {
		t.Errorf("dl dead letters = %+v", dead)
	}
	if got := b.drain(t, drop, broker.SubQueueDeadLetter); len(got) != 0 {
		t.Errorf("drop subscription dead-lettered %d messages", len(got))
	}
}

// TestFilterEvaluationBudget: rules whose work grows with the message (LIKE with a long
// pattern over a long property) share one budget per subscription and message; the
// subscription that runs out gets its copy dead-lettered (or dropped, as it says) and the
// send goes on, while other subscriptions are evaluated as usual.
func TestFilterEvaluationBudget(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "t", nil)
	// Never matches, and costs about 2 × 30 Ki × 16 units a message: five such rules are more
	// than one subscription's budget.
	pattern := broker.Property{Name: "@p", Value: "%" + strings.Repeat("a_", 500) + "c%"}
	slow := func(name string, dl bool) *broker.Entity {
		e := b.sub(t, "t", name, sqlRule("r0", "s LIKE @p OR u LIKE @p", pattern), func(p *broker.Properties) { p.DeadLetteringOnFilterEvaluation = dl })
		for i := 1; i < 6; i++ {
			if _, err := b.store.PutRule(b.ctx, e.Path, *sqlRule(fmt.Sprintf("r%d", i), "s LIKE @p OR u LIKE @p", pattern), false); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	dl := slow("dl", true)
	drop := slow("drop", false)
	cheap := b.sub(t, "t", "cheap", sqlRule("has", "EXISTS(s) AND s LIKE 'a%'"), nil)
	b.send(t, topic, broker.Message{Body: []byte("x"), MessageID: "x",
		UserProperties: []broker.Property{{Name: "s", Value: strings.Repeat("a", 30*1024)}, {Name: "u", Value: strings.Repeat("a", 30*1024)}}})
	if got := b.drain(t, dl, broker.SubQueueMain); len(got) != 0 {
		t.Errorf("dl subscription received %d messages", len(got))
	}
	dead := b.drain(t, dl, broker.SubQueueDeadLetter)
	if len(dead) != 1 || dead[0].DeadLetterReason != broker.ReasonFilterEvaluation || !strings.Contains(dead[0].DeadLetterDescription, "budget") {
		t.Errorf("dl dead letters = %d, want 1 with reason %s and the budget in the description", len(dead), broker.ReasonFilterEvaluation)
		for _, m := range dead {
			t.Logf("%s: %s", m.DeadLetterReason, m.DeadLetterDescription)
		}
	}
	if got := len(b.drain(t, drop, broker.SubQueueMain)) + len(b.drain(t, drop, broker.SubQueueDeadLetter)); got != 0 {
		t.Errorf("drop subscription kept %d messages; want the copy dropped", got)
	}
	if got := b.drain(t, cheap, broker.SubQueueMain); len(got) != 1 {
		t.Errorf("cheap subscription received %d messages; want 1", len(got))
	}
}

// TestRuleParameterAndPatternLimits: parameters and patterns cannot escape the 1,024-character
// limit of the expression; a rule over them is refused at creation.
func TestRuleParameterAndPatternLimits(t *testing.T) {
	b := setup(t, manual)
	b.topic(t, "t", nil)
	b.sub(t, "t", "s", nil, nil)
	sp := "t/Subscriptions/s"
	long := broker.Property{Name: "@p", Value: strings.Repeat("_", 20000)}
	half := broker.Property{Name: "@p", Value: strings.Repeat("_", 600)}
	action := sqlRule("action", "1=1")
	action.Action = &broker.RuleAction{SQLExpression: "SET x = @p", Parameters: []broker.Property{long}}
	for _, bad := range []*broker.Rule{
		sqlRule("param", "s LIKE @p", long),
		sqlRule("unused", "s = 'x'", long),
		sqlRule("concat", "s LIKE @p + @p", half),
		action,
	} {
		_, err := b.store.PutRule(b.ctx, sp, *bad, false)
		if !errors.Is(err, broker.ErrBadRequest) || !strings.Contains(err.Error(), "limit is 1024") {
			t.Errorf("PutRule(%s) err = %v; want ErrBadRequest naming the limit", bad.Name, err)
		}
	}
	if _, err := b.store.PutRule(b.ctx, sp, *sqlRule("ok", "s LIKE @p", half), false); err != nil {
		t.Errorf("PutRule with a 600-character pattern: %v", err)
	}
}

func TestRuleManagement(t *testing.T) {
	b := setup(t, manual)
	b.topic(t, "t", nil)
	b.sub(t, "t", "s", nil, nil)
	sp := "t/Subscriptions/s"
	rules, err := b.store.ListRules(b.ctx, sp, 0, 100)
	if err != nil || len(rules) != 1 || rules[0].Name != "$Default" || rules[0].Filter.Kind != broker.FilterTrue {
		t.Fatalf("new subscription rules = %+v, %v; want $Default", rules, err)
	}
	r := sqlRule("big", "amount > @min AND sys.TimeToLive > @ttl", broker.Property{Name: "@min", Value: int64(10)},
		broker.Property{Name: "@ttl", Value: 90 * time.Second})
	r.Action = &broker.RuleAction{SQLExpression: "SET big = TRUE"}
	if _, err := b.store.PutRule(b.ctx, sp, *r, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.PutRule(b.ctx, sp, *r, false); !errors.Is(err, broker.ErrConflict) {
		t.Errorf("second create: err = %v; want ErrConflict", err)
	}
	got, err := b.store.GetRule(b.ctx, sp, "BIG")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Filter, got.Filter); diff != "" || got.Action == nil || got.Action.SQLExpression != r.Action.SQLExpression {
		t.Errorf("rule read back differs (-want +got):\n%s", diff)
	}
	for _, bad := range []broker.Rule{
		*sqlRule("syntax", "amount >"),
		*sqlRule("unbound", "amount > @nope"),
		{Name: "noaction", Filter: broker.RuleFilter{Kind: broker.FilterTrue, SQLExpression: "1=1"}, Action: &broker.RuleAction{SQLExpression: "SET"}},
		{Name: "emptycorr", Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{}}},
		*sqlRule("bad name!", "1=1"),
		*sqlRule("long", strings.Repeat("a = 1 OR ", 200)+"a = 1"),
	} {
		_, err := b.store.PutRule(b.ctx, sp, bad, false)
		if !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("PutRule(%s) err = %v; want ErrBadRequest", bad.Name, err)
		}
	}
	_, err = b.store.PutRule(b.ctx, sp, *sqlRule("syntax", "amount > AND x"), false)
	if err == nil || !strings.Contains(err.Error(), "position") {
		t.Errorf("syntax error %v does not say where", err)
	}
	if err := b.store.DeleteRule(b.ctx, sp, "$default"); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DeleteRule(b.ctx, sp, "$default"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("second delete: err = %v", err)
	}
	if _, err := b.store.PutRule(b.ctx, "t/Subscriptions/missing", *r, false); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("rule on a missing subscription: err = %v", err)
	}
}

func TestSubscriptionLifecycle(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "t", func(p *broker.Properties) { p.DefaultMessageTimeToLive = time.Hour })
	s := b.sub(t, "t", "s", nil, func(p *broker.Properties) { p.DefaultMessageTimeToLive = 10 * time.Minute; p.MaxDeliveryCount = 1 })
	if _, err := b.store.CreateSubscription(b.ctx, "missing/Subscriptions/s", broker.DefaultProperties(broker.KindSubscription), nil); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("subscription on a missing topic: err = %v", err)
	}
	if _, err := b.store.CreateSubscription(b.ctx, "t/Subscriptions/s", broker.DefaultProperties(broker.KindSubscription), nil); !errors.Is(err, broker.ErrConflict) {
		t.Errorf("second subscription: err = %v", err)
	}
	if err := b.store.Send(b.ctx, s, []broker.Message{body("x")}); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("send to a subscription: err = %v", err)
	}
	if _, err := receive1(b.ctx, b.store, broker.Target{Entity: topic, SubQueue: broker.SubQueueMain}, broker.PeekLock, 0); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("receive from a topic: err = %v", err)
	}
	// TTL: the message's, capped by the topic's, capped by the subscription's.
	b.send(t, topic, broker.Message{Body: []byte("ttl"), TimeToLive: 2 * time.Hour})
	m := b.receive(t, s, broker.SubQueueMain, broker.PeekLock)
	if m.TimeToLive != 10*time.Minute {
		t.Errorf("copy TTL = %v; want the subscription's 10m", m.TimeToLive)
	}
	// Locks, MaxDeliveryCount and the dead-letter subqueue work as on queues.
	b.clock.Advance(2 * time.Minute)
	if again := b.receive(t, s, broker.SubQueueMain, broker.PeekLock); again != nil {
		t.Errorf("message past MaxDeliveryCount delivered again")
	}
	if dl := b.drain(t, s, broker.SubQueueDeadLetter); len(dl) != 1 || dl[0].DeadLetterReason != broker.ReasonMaxDeliveryCount {
		t.Errorf("dead letters = %+v", dl)
	}
	// Deleting the topic deletes its subscriptions, rules and messages.
	b.send(t, topic, body("left"))
	if err := b.store.DeleteEntity(b.ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.GetEntity(b.ctx, "t/Subscriptions/s"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("subscription after its topic was deleted: err = %v", err)
	}
	var n int
	if err := b.pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM messages) + (SELECT count(*) FROM rules)`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d messages and rules left after deleting the topic (%v)", n, err)
	}
}

func TestTopicSendNeedsSessionForSessionSubscriptions(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "t", nil)
	plain := b.sub(t, "t", "plain", nil, nil)
	sessioned := b.sub(t, "t", "sess", nil, func(p *broker.Properties) { p.RequiresSession = true })
	if err := b.store.Send(b.ctx, topic, []broker.Message{body("no session")}); !errors.Is(err, broker.ErrBadRequest) {
		t.Fatalf("send without SessionId to a topic with a session subscription: err = %v; want ErrBadRequest", err)
	}
	if c := b.counts(t, plain.Path); c.Total() != 0 {
		t.Errorf("the refused send left %d copies in plain", c.Total())
	}
	b.send(t, topic, broker.Message{Body: []byte("with session"), SessionID: "s1"})
	s, err := b.store.AcceptNextSession(b.ctx, sessioned, 0)
	if err != nil || s == nil || s.ID != "s1" {
		t.Fatalf("accept on the session subscription = %+v, %v", s, err)
	}
}

func TestTopicDuplicateDetection(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "t", func(p *broker.Properties) { p.RequiresDuplicateDetection = true })
	a := b.sub(t, "t", "a", nil, nil)
	c := b.sub(t, "t", "c", nil, nil)
	for range 3 {
		b.send(t, topic, broker.Message{Body: []byte("once"), MessageID: "id-1"})
	}
	b.send(t, topic, broker.Message{Body: []byte("x"), MessageID: "id-2"}, broker.Message{Body: []byte("dup"), MessageID: "id-2"})
	for _, s := range []*broker.Entity{a, c} {
		if got := bodies(b.drain(t, s, broker.SubQueueMain)); !cmp.Equal(got, []string{"once", "x"}) {
			t.Errorf("%s received %q; want each id once, in every subscription", s.Path, got)
		}
	}
}

func TestAutoForwarding(t *testing.T) {
	b := setup(t, manual)
	final := b.queue(t, "final", nil)
	b.queue(t, "hop2", func(p *broker.Properties) { p.ForwardTo = "final" })
	hop1 := b.queue(t, "hop1", func(p *broker.Properties) { p.ForwardTo = "sb://somewhere.example/hop2" })
	if hop1.Props.ForwardTo != "hop2" {
		t.Errorf("ForwardTo stored as %q; want the entity path hop2", hop1.Props.ForwardTo)
	}
	topic := b.topic(t, "t", nil)
	b.sub(t, "t", "fwd", nil, func(p *broker.Properties) { p.ForwardTo = "hop1" })
	b.send(t, hop1, body("via queues"))
	b.send(t, topic, body("via topic"))
	if got := bodies(b.drain(t, final, broker.SubQueueMain)); !cmp.Equal(got, []string{"via queues", "via topic"}) {
		t.Errorf("final received %q", got)
	}
	for _, q := range []string{"hop1", "hop2", "t/Subscriptions/fwd"} {
		if c := b.counts(t, q); c.Total() != 0 {
			t.Errorf("%s kept messages: %+v", q, c)
		}
	}
	// A missing target, a subscription target and loops are refused.
	for _, tc := range []struct {
		path, fwd string
	}{
		{"x1", "nowhere"},
		{"x2", "t/Subscriptions/fwd"},
		{"final", "hop1"}, // final -> hop1 -> hop2 -> final
	} {
		p := broker.DefaultProperties(broker.KindQueue)
		p.ForwardTo = tc.fwd
		var err error
		if tc.path == "final" {
			_, err = b.store.UpdateEntity(b.ctx, broker.KindQueue, tc.path, p)
		} else {
			_, err = b.store.CreateEntity(b.ctx, broker.KindQueue, tc.path, p)
		}
		if !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("ForwardTo %s -> %s: err = %v; want ErrBadRequest", tc.path, tc.fwd, err)
		}
	}
	p := broker.DefaultProperties(broker.KindSubscription)
	p.ForwardTo = "t"
	if _, err := b.store.CreateSubscription(b.ctx, "t/Subscriptions/self", p, nil); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("a subscription forwarding to its own topic: err = %v; want ErrBadRequest", err)
	}
}

func TestForwardingHopLimit(t *testing.T) {
	b := setup(t, manual)
	// q0 -> q1 -> q2 -> q3 -> q4 -> q5: five hops, one too many.
	b.queue(t, "q5", nil)
	for i := 4; i >= 0; i-- {
		b.queue(t, fmt.Sprintf("q%d", i), func(p *broker.Properties) { p.ForwardTo = fmt.Sprintf("q%d", i+1) })
	}
	q0, _ := b.store.Resolve(b.ctx, "q0")
	b.send(t, q0, body("far"))
	q4, _ := b.store.Resolve(b.ctx, "q4")
	dead := b.drain(t, q4, broker.SubQueueDeadLetter)
	if len(dead) != 1 || dead[0].DeadLetterReason != broker.ReasonMaxTransferHopCount {
		t.Fatalf("q4 dead letters = %+v; want the message, with MaxTransferHopCountExceeded", dead)
	}
}

func TestForwardDeadLetteredMessages(t *testing.T) {
	b := setup(t, manual)
	dlq := b.queue(t, "collector", nil)
	q := b.queue(t, "work", func(p *broker.Properties) {
		p.ForwardDeadLetteredMessagesTo = "collector"
		p.DeadLetteringOnMessageExpiration = true
		p.MaxDeliveryCount = 1
		p.LockDuration = 10 * time.Second
	})
	b.send(t, q, broker.Message{Body: []byte("explicit"), MessageID: "e"}, broker.Message{Body: []byte("poison"), MessageID: "p"},
		broker.Message{Body: []byte("expiring"), MessageID: "x", TimeToLive: time.Minute})
	// Explicit dead-lettering.
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if err := deadLetter1(b.ctx, b.store, broker.Target{Entity: q}, m.MessageID, m.LockToken, "Bad", "bad input"); err != nil {
		t.Fatal(err)
	}
	// MaxDeliveryCount.
	b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	b.clock.Advance(11 * time.Second)
	b.receive(t, q, broker.SubQueueMain, broker.PeekLock) // dead-letters "poison", locks "expiring"
	// Expiry.
	b.clock.Advance(2 * time.Minute)
	b.maintain(t)

	if c := b.counts(t, "work"); c.DeadLetter != 0 {
		t.Errorf("work keeps %d dead letters; all should have moved", c.DeadLetter)
	}
	got := b.drain(t, dlq, broker.SubQueueMain)
	sort.Slice(got, func(i, j int) bool { return got[i].MessageID < got[j].MessageID })
	if len(got) != 3 {
		t.Fatalf("collector got %d messages; want 3", len(got))
	}
	for i, want := range []struct{ id, reason string }{{"e", "Bad"}, {"p", broker.ReasonMaxDeliveryCount}, {"x", broker.ReasonTTLExpired}} {
		if got[i].MessageID != want.id || got[i].DeadLetterReason != want.reason || got[i].DeadLetterSource != "work" {
			t.Errorf("collector[%d] = %s, reason %q, source %q; want %s, %q, work", i, got[i].MessageID, got[i].DeadLetterReason, got[i].DeadLetterSource, want.id, want.reason)
		}
	}
}

// TestConcurrentPublishersAndSubscriptionChanges: publishers send while subscriptions come and
// go. Every message reaches every subscription that existed for its whole send, and never a
// subscription after its deletion.
func TestConcurrentPublishersAndSubscriptionChanges(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: store.Options{MaintenanceInterval: time.Hour}})
	topic := b.topic(t, "t", nil)
	stable := b.sub(t, "t", "stable", nil, nil)
	const publishers, each = 6, 100
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // subscriptions churn
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("churn%d", i)
			if _, err := b.store.CreateSubscription(b.ctx, broker.SubscriptionPath("t", name), broker.DefaultProperties(broker.KindSubscription), nil); err != nil {
				t.Errorf("create %s: %v", name, err)
				return
			}
			if err := b.store.DeleteEntity(b.ctx, broker.SubscriptionPath("t", name)); err != nil {
				t.Errorf("delete %s: %v", name, err)
				return
			}
		}
	}()
	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			for i := range each {
				if err := b.store.Send(b.ctx, topic, []broker.Message{{Body: []byte("m"), MessageID: fmt.Sprintf("%d-%d", p, i)}}); err != nil {
					t.Errorf("publish: %v", err)
				}
			}
		}()
	}
	pubs.Wait()
	close(stop)
	wg.Wait()
	got := b.drain(t, stable, broker.SubQueueMain)
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.MessageID] {
			t.Errorf("%s delivered twice", m.MessageID)
		}
		seen[m.MessageID] = true
	}
	if len(seen) != publishers*each {
		t.Errorf("stable subscription got %d of %d messages", len(seen), publishers*each)
	}
	var orphans int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = m.entity_id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Logf("%d copies written to subscriptions deleted during the send", orphans)
	}
}

// Filters read the broker properties a message keeps as sent: ViaPartitionKey, and a past
// ScheduledEnqueueTimeUtc.
func TestFiltersReadPropertiesKeptAsSent(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "t", nil)
	sub := b.sub(t, "t", "s", &broker.Rule{Name: "r", Filter: broker.RuleFilter{Kind: broker.FilterSQL,
		SQLExpression: "sys.ViaPartitionKey = 'p1' AND sys.ScheduledEnqueueTimeUtc IS NOT NULL"}}, nil)
	past := b.clock.Now().Add(-time.Hour)
	b.send(t, topic, broker.Message{Body: []byte("match"), ViaPartitionKey: "p1", ScheduledEnqueueTime: past},
		broker.Message{Body: []byte("other via"), ViaPartitionKey: "p2", ScheduledEnqueueTime: past},
		broker.Message{Body: []byte("no schedule"), ViaPartitionKey: "p1"})
	if diff := cmp.Diff([]string{"match"}, bodies(b.drain(t, sub, broker.SubQueueMain))); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
}

// TestRuleValuesKeepTheirDeclaredType: every parameter and correlation property comes back from
// the store with the type its client declared (a long stays a long, a JS double a double, a Go
// int beyond 32 bits an int), and filters still compare the values by their Go type.
func TestRuleValuesKeepTheirDeclaredType(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "typed", nil)
	sp := "typed/Subscriptions/s"
	typed := func(name, typ string, v any) broker.Property { return broker.Property{Name: name, Value: v, Type: typ} }
	corr := &broker.Rule{Name: "corr", Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{
		Properties: []broker.Property{typed("big", "long", int64(5000000000)), typed("g", broker.TypeSerGUID, "{6F9619FF-8B86-D011-B42D-00CF4FC964FF}"), typed("n", "double", 5.0)}}}}
	sub := b.sub(t, "typed", "s", corr, nil)
	sql := sqlRule("sql", "go = @go AND s < @s AND d = @d AND w = @w",
		typed("@go", "int", int64(6000000000)), typed("@s", "short", int64(7)), typed("@d", "decimal", 0.5),
		typed("@w", broker.TypeSerDuration, 90*time.Second), broker.Property{Name: "@plain", Value: int64(1)})
	sql.Action = &broker.RuleAction{SQLExpression: "SET tag = @t", Parameters: []broker.Property{typed("@t", "unsignedInt", int64(4000000000))}}
	if _, err := b.store.PutRule(b.ctx, sp, *sql, false); err != nil {
		t.Fatal(err)
	}
	rules, err := b.store.ListRules(b.ctx, sp, 0, 10)
	if err != nil || len(rules) != 2 {
		t.Fatalf("ListRules = %v, %v", rules, err)
	}
	if diff := cmp.Diff(corr.Filter, rules[0].Filter); diff != "" {
		t.Errorf("correlation filter read back differs (-want +got):\n%s", diff)
	}
	got, err := b.store.GetRule(b.ctx, sp, "sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(sql.Filter.Parameters, func(i, j int) bool { return sql.Filter.Parameters[i].Name < sql.Filter.Parameters[j].Name })
	if diff := cmp.Diff(sql.Filter, got.Filter); diff != "" {
		t.Errorf("SQL filter read back differs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sql.Action, got.Action); diff != "" {
		t.Errorf("action read back differs (-want +got):\n%s", diff)
	}

	send := func(body string, props ...broker.Property) {
		b.send(t, topic, broker.Message{Body: []byte(body), UserProperties: props})
	}
	send("corr", broker.Property{Name: "big", Value: int64(5000000000)}, broker.Property{Name: "n", Value: int64(5)},
		broker.Property{Name: "g", Value: "{6F9619FF-8B86-D011-B42D-00CF4FC964FF}"})
	send("corr-other", broker.Property{Name: "big", Value: int64(5000000001)}, broker.Property{Name: "n", Value: int64(5)},
		broker.Property{Name: "g", Value: "{6F9619FF-8B86-D011-B42D-00CF4FC964FF}"})
	send("sql", broker.Property{Name: "go", Value: int64(6000000000)}, broker.Property{Name: "s", Value: 6.5},
		broker.Property{Name: "d", Value: 0.5}, broker.Property{Name: "w", Value: 90 * time.Second})
	msgs := b.drain(t, sub, broker.SubQueueMain)
	if diff := cmp.Diff([]string{"corr", "sql"}, bodies(msgs)); diff != "" {
		t.Fatalf("received (-want +got):\n%s", diff)
	}
	var tag any
	for _, p := range msgs[1].UserProperties {
		if p.Name == "tag" {
			tag = p.Value
			if p.Type != "" {
				t.Errorf("message property tag has the declared type %q", p.Type)
			}
		}
	}
	if tag != int64(4000000000) {
		t.Errorf("action set tag = %#v; want int64 4000000000", tag)
	}

	// A declared type that cannot hold its value is refused, not kept.
	bad := sqlRule("bad", "a = @a", typed("@a", "long", "text"))
	if _, err := b.store.PutRule(b.ctx, sp, *bad, false); !errors.Is(err, broker.ErrBadRequest) || !strings.Contains(err.Error(), "declared type 'long'") {
		t.Errorf("PutRule with a string declared long: err = %v; want ErrBadRequest", err)
	}
	bad = sqlRule("bad", "a = @a", typed("@a", "xs:int", int64(1)))
	if _, err := b.store.PutRule(b.ctx, sp, *bad, false); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("PutRule with an unknown declared type: err = %v; want ErrBadRequest", err)
	}
}

// TestRuleValuesStoredWithoutType: rules kept before values carried their declared type read
// back with none, so the encoder types them by their value.
func TestRuleValuesStoredWithoutType(t *testing.T) {
	b := setup(t, manual)
	b.topic(t, "old", nil)
	b.sub(t, "old", "s", sqlRule("legacy", "a = @a", broker.Property{Name: "@a", Value: int64(1), Type: "long"}), nil)
	if _, err := b.pool.Exec(b.ctx, `UPDATE rules SET filter = '{"kind":"SqlFilter","sql":"a = @a","params":{"@a":{"i":5000000000}}}' WHERE name = 'legacy'`); err != nil {
		t.Fatal(err)
	}
	got, err := b.store.GetRule(b.ctx, "old/Subscriptions/s", "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]broker.Property{{Name: "@a", Value: int64(5000000000)}}, got.Filter.Parameters); diff != "" {
		t.Errorf("legacy parameters (-want +got):\n%s", diff)
	}
}

// A dead letter its entity's ForwardDeadLetteredMessagesTo target refuses (a session queue, a
// message without a SessionId) stays in the entity's dead-letter subqueue, as when the target
// is gone. Before, the refusal undid the transaction that dead-lettered it: the abandon failed
// (the message stayed locked), and the maintenance run failed for every entity (an unrelated
// queue's expired message stayed).
func TestForwardedDeadLetterRefusedByTheTarget(t *testing.T) {
	b := setup(t, manual)
	b.queue(t, "sq", func(p *broker.Properties) { p.RequiresSession = true })
	q := b.queue(t, "q", func(p *broker.Properties) {
		p.MaxDeliveryCount = 1
		p.ForwardDeadLetteredMessagesTo = "sq"
	})
	other := b.queue(t, "other", nil)
	b.send(t, q, broker.Message{Body: []byte("plain"), MessageID: "plain"},
		broker.Message{Body: []byte("sessioned"), MessageID: "sessioned", SessionID: "s"})
	b.send(t, other, broker.Message{Body: []byte("short"), TimeToLive: time.Minute})
	for range 2 {
		m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
		// Its last delivery: the abandon dead-letters it, and forwards what sq takes.
		if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q}, broker.Abandon, "", m.LockToken); err != nil {
			t.Fatalf("abandon of %s: %v", m.MessageID, err)
		}
	}
	if dl := b.drain(t, q, broker.SubQueueDeadLetter); len(dl) != 1 || dl[0].MessageID != "plain" {
		t.Errorf("q's dead letters = %q; want plain, which sq refuses", bodies(dl))
	}
	b.clock.Advance(2 * time.Minute)
	b.send(t, q, broker.Message{Body: []byte("later"), MessageID: "later"})
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	b.clock.Advance(q.Props.LockDuration + time.Second) // its lock lapses: the sweep dead-letters it
	b.maintain(t)
	if c := b.counts(t, "other"); c.Total() != 0 {
		t.Errorf("other's counts after maintenance = %+v; want its expired message gone", c)
	}
	if dl := b.drain(t, q, broker.SubQueueDeadLetter); len(dl) != 1 || dl[0].MessageID != m.MessageID {
		t.Errorf("q's dead letters after maintenance = %q; want later", bodies(dl))
	}
	if c := b.counts(t, "sq"); c.Active != 1 || c.DeadLetter != 0 {
		t.Errorf("sq's counts = %+v; want the sessioned dead letter, forwarded", c)
	}
}

// Dead letters a topic's session subscription refuses are read and left at each forwarding;
// the forwarding pages past them, so more than a page of them (500) does not keep it reading
// the same page forever (it did without the paging: maintenance ran until its deadline).
func TestRefusedDeadLettersPastAPage(t *testing.T) {
	b := setup(t, manual)
	b.topic(t, "t", nil)
	b.sub(t, "t", "s", nil, func(p *broker.Properties) { p.RequiresSession = true })
	q := b.queue(t, "q", func(p *broker.Properties) {
		p.ForwardDeadLetteredMessagesTo = "t"
		p.DeadLetteringOnMessageExpiration = true
	})
	msgs := make([]broker.Message, 600)
	for i := range msgs {
		msgs[i] = broker.Message{Body: []byte("x"), TimeToLive: time.Minute}
	}
	b.send(t, q, msgs...)
	b.clock.Advance(2 * time.Minute)
	b.maintain(t) // expires them into q's dead-letter subqueue, where they stay
	b.maintain(t) // and forwards again, past the first page
	if c := b.counts(t, "q"); c.DeadLetter != 600 || c.Active != 0 {
		t.Errorf("q's counts = %+v; want the 600 dead letters the subscription refuses", c)
	}
}

// A subscription's browse leaves out the messages still waiting for their scheduled time: on the
// service they wait in the topic until then ("Message browsing": scheduled messages are peeked
// on queues, not on subscriptions). A queue's browse shows them.
func TestSubscriptionBrowseHidesScheduledMessages(t *testing.T) {
	b := setup(t)
	topic := b.topic(t, "t", nil)
	sub := b.sub(t, "t", "s", nil, nil)
	q := b.queue(t, "q", nil)
	at := b.clock.Now().Add(time.Hour)
	b.send(t, topic, broker.Message{Body: []byte("later"), ScheduledEnqueueTime: at})
	b.send(t, q, broker.Message{Body: []byte("later"), ScheduledEnqueueTime: at})
	browse := func(e *broker.Entity) int {
		t.Helper()
		msgs, err := b.store.Browse(b.ctx, e, broker.SubQueueMain, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}
	if n, m := browse(sub), browse(q); n != 0 || m != 1 {
		t.Errorf("before the time: the subscription shows %d, the queue %d; want 0 and 1", n, m)
	}
	b.clock.Advance(time.Hour + time.Second)
	if n := browse(sub); n != 1 {
		t.Errorf("after the time: the subscription shows %d; want 1", n)
	}
}

// A topic's runtime properties count the messages scheduled on it that have not come due (once
// each, however many subscriptions hold a copy) and the bytes its subscriptions hold, as the
// Go SDK's live test of the service checks (TestAdminClient_TopicAndSubscriptionRuntimeProperties).
func TestTopicCountsScheduledMessagesAndSize(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "t", nil)
	b.sub(t, "t", "a", nil, nil)
	b.sub(t, "t", "b", nil, nil)
	later := b.clock.Now().Add(2 * time.Hour)
	if _, err := b.store.SendSequenced(b.ctx, topic, []broker.Message{{Body: []byte("later"), ScheduledEnqueueTime: later}}); err != nil {
		t.Fatal(err)
	}
	e, err := b.store.GetEntity(b.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if e.SubscriptionCount != 2 || e.Counts.Scheduled != 1 || e.Counts.SizeInBytes <= 0 {
		t.Errorf("topic: %d subscriptions, counts %+v; want 2, 1 scheduled, some bytes", e.SubscriptionCount, e.Counts)
	}
	list, err := b.store.ListEntities(b.ctx, broker.KindTopic, "", 0, 10)
	if err != nil || len(list) != 1 || list[0].Counts != e.Counts {
		t.Errorf("listed topic: %v, %v; want counts %+v", list, err, e.Counts)
	}
	// One sent with a ScheduledEnqueueTime (REST, .NET, Java, Python) counts once too.
	if err := b.store.Send(b.ctx, topic, []broker.Message{{Body: []byte("later too"), MessageID: "m2", ScheduledEnqueueTime: later}}); err != nil {
		t.Fatal(err)
	}
	if e, err = b.store.GetEntity(b.ctx, "t"); err != nil || e.Counts.Scheduled != 2 {
		t.Errorf("topic after a scheduled send: %+v, %v; want 2 scheduled", e, err)
	}
	// Come due, they are in each subscription and no longer scheduled.
	b.clock.Advance(2*time.Hour + time.Second)
	if e, err = b.store.GetEntity(b.ctx, "t"); err != nil || e.Counts.Scheduled != 0 {
		t.Errorf("topic once the message came due: %+v, %v; want none scheduled", e, err)
	}
	for _, s := range []string{"t/Subscriptions/a", "t/Subscriptions/b"} {
		if c := b.counts(t, s); c.Active != 2 {
			t.Errorf("%s: %+v; want both messages", s, c)
		}
	}
}

// An entity used through this gateway shows that use in its AccessedAt at once, before the
// background flush writes it.
func TestAccessedAtShowsUseAtOnce(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	e, err := b.store.GetEntity(b.ctx, "q")
	if err != nil || !e.AccessedAt.IsZero() {
		t.Fatalf("new queue AccessedAt %v, %v; want zero", e.AccessedAt, err)
	}
	b.clock.Advance(time.Minute)
	b.send(t, q, broker.Message{Body: []byte("x")})
	e, err = b.store.GetEntity(b.ctx, "q")
	if err != nil || !e.AccessedAt.Equal(b.clock.Now()) {
		t.Errorf("AccessedAt after a send %v, %v; want %v", e.AccessedAt, err, b.clock.Now())
	}
	list, err := b.store.ListEntities(b.ctx, broker.KindQueue, "", 0, 10)
	if err != nil || len(list) != 1 || !list[0].AccessedAt.Equal(b.clock.Now()) {
		t.Errorf("listed AccessedAt %v, %v; want %v", list, err, b.clock.Now())
	}
}

// A use this gateway noted stays visible while the background flush is writing it: a read that
// comes between the flush taking the noted uses and its UPDATE committing still sees the access
// (the Go SDK's TestAdminClient_TopicAndSubscriptionRuntimeProperties once read a zero AccessedAt
// in that window).
func TestAccessedAtShowsUseWhileFlushing(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	b.clock.Advance(time.Minute)
	b.send(t, q, body("x"))
	used := b.clock.Now()
	tx, err := b.pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.ctx) }()
	if _, err := tx.Exec(b.ctx, `SELECT 1 FROM entities WHERE id = $1 FOR UPDATE`, q.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.store.Maintain(b.ctx) }()
	b.waitForLockWaiter(t, "%SET accessed_at%")
	e, err := b.store.GetEntity(b.ctx, "q")
	if err != nil || !e.AccessedAt.Equal(used) {
		t.Errorf("AccessedAt while the flush waits %v, %v; want %v", e.AccessedAt, err, used)
	}
	if err := tx.Rollback(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e, err = b.store.GetEntity(b.ctx, "q")
	if err != nil || !e.AccessedAt.Equal(used) {
		t.Errorf("AccessedAt after the flush %v, %v; want %v", e.AccessedAt, err, used)
	}
}
