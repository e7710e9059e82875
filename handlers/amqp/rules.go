package amqp

import (
	"context"
	"time"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
)

// maxListTop bounds the page a listing operation returns (get-message-sessions,
// enumerate-rules).
const maxListTop = 1000

// listLastUpdated is the last-updated-time from which get-message-sessions lists every session
// with messages or state rather than those changed after a time: the SDKs send DateTime.MaxValue
// (the Go SDK year 10000, which the service's decoder clamps to it).
var listLastUpdated = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// getMessageSessions lists the session ids of a session entity (com.microsoft:get-message-sessions):
// with a last-updated-time at DateTime.MaxValue, every session holding messages or state; with
// another, the sessions that changed after it. skip and top page through them; 204 when none.
func getMessageSessions(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	if q.sq != broker.SubQueueMain {
		return nil, badField("sessions are listed on the entity, not its dead-letter subqueue")
	}
	skip, top, err := page(q.body)
	if err != nil {
		return nil, err
	}
	since, _ := q.body.Get("last-updated-time")
	t, ok := since.(time.Time)
	if since != nil && !ok {
		return nil, badField("'last-updated-time' must be a timestamp")
	}
	var ids []string
	if since == nil || !t.Before(listLastUpdated) {
		infos, err := q.store().ListSessions(ctx, q.e, skip, top)
		if err != nil {
			return nil, err
		}
		for _, s := range infos {
			ids = append(ids, s.ID)
		}
	} else if ids, err = q.store().ListSessionsUpdatedSince(ctx, q.e, t, skip, top); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	elems := make([]any, len(ids))
	for i, id := range ids {
		elems[i] = id
	}
	return amqp.Map{
		{Key: "skip", Value: int32(skip + len(ids))},
		{Key: "sessions-ids", Value: amqp.Array{Type: amqp.TypeString, Elems: elems}},
	}, nil
}

// page reads the skip and top of a listing request (both optional; top defaults to and is capped
// at maxListTop).
func page(body amqp.Map) (skip, top int, err error) {
	top = maxListTop
	if _, ok := body.Get("skip"); ok {
		n, err := integer(body, "skip")
		if err != nil || n < 0 {
			return 0, 0, badField("'skip' must be an integer of at least 0")
		}
		skip = int(min(n, 1<<31-1))
	}
	if _, ok := body.Get("top"); ok {
		n, err := integer(body, "top")
		if err != nil || n < 1 {
			return 0, 0, badField("'top' must be an integer of at least 1")
		}
		top = int(min(n, maxListTop))
	}
	return skip, top, nil
}

// Descriptors of the rule descriptions enumerate-rules answers with, as the .NET and Java rule
// managers decode them (AmqpSqlFilterCodec and its siblings; Java's ServiceBusConstants; the
// request-response page). The filters' codes have one hex digit fewer than the description's and
// the actions' — 0x1370000006, not 0x13700000006 — so the SQL filter and the SQL action do not
// share a code.
const (
	descRuleDescription   uint64 = 0x0000013700000004
	descEmptyRuleAction   uint64 = 0x0000013700000005
	descSQLRuleAction     uint64 = 0x0000013700000006
	descSQLFilter         uint64 = 0x000001370000006
	descTrueFilter        uint64 = 0x000001370000007
	descFalseFilter       uint64 = 0x000001370000008
	descCorrelationFilter uint64 = 0x000001370000009
	// sqlCompatibilityLevel is the compatibility level the service reports for SQL expressions.
	sqlCompatibilityLevel int32 = 20
)

// subscriptionOf is the subscription a rule operation acts on.
func subscriptionOf(q *mgmtRequest) (*broker.Entity, error) {
	if q.e.Kind != broker.KindSubscription || q.sq != broker.SubQueueMain {
		return nil, badField("rules are managed on a subscription's $management node, not on '%s'", broker.Clip(q.e.Path))
	}
	return q.e, nil
}

// namedRule is the subscription and the rule-name of an operation on one rule (add-rule,
// remove-rule).
func namedRule(q *mgmtRequest) (*broker.Entity, string, error) {
	sub, err := subscriptionOf(q)
	if err != nil {
		return nil, "", err
	}
	name, ok := mapString(q.body, "rule-name")
	if !ok || name == "" {
		return nil, "", badField("the request has no 'rule-name'")
	}
	return sub, name, nil
}

// addRule adds a rule to a subscription (com.microsoft:add-rule): rule-name and a
// rule-description map holding a sql-filter ({expression}) or a correlation-filter (its fields
// and properties), and an optional sql-rule-action ({expression}).
func addRule(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	sub, name, err := namedRule(q)
	if err != nil {
		return nil, err
	}
	dv, _ := q.body.Get("rule-description")
	desc, ok := dv.(amqp.Map)
	if !ok {
		return nil, badField("the request has no 'rule-description' map")
	}
	rule := broker.Rule{Name: name}
	sqlV, hasSQL := desc.Get("sql-filter")
	corrV, hasCorr := desc.Get("correlation-filter")
	hasSQL, hasCorr = hasSQL && sqlV != nil, hasCorr && corrV != nil
	switch {
	case hasSQL && hasCorr:
		return nil, badField("a rule has one filter: 'sql-filter' or 'correlation-filter', not both")
	case hasSQL:
		m, ok := sqlV.(amqp.Map)
		expr, _ := mapString(m, "expression")
		if !ok || expr == "" {
			return nil, badField("'sql-filter' must be a map with an 'expression'")
		}
		rule.Filter = broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: expr}
	case hasCorr:
		m, ok := corrV.(amqp.Map)
		if !ok {
			return nil, badField("'correlation-filter' must be a map")
		}
		cf, err := correlationFilter(m)
		if err != nil {
			return nil, err
		}
		rule.Filter = broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: cf}
	default:
		return nil, badField("the rule description has no 'sql-filter' or 'correlation-filter'")
	}
	if av, ok := desc.Get("sql-rule-action"); ok && av != nil {
		m, ok := av.(amqp.Map)
		expr, _ := mapString(m, "expression")
		if !ok || expr == "" {
			return nil, badField("'sql-rule-action' must be a map with an 'expression'")
		}
		rule.Action = &broker.RuleAction{SQLExpression: expr}
	}
	if _, err := q.store().PutRule(ctx, sub.Path, rule, false); err != nil {
		return nil, ruleErr(err)
	}
	return amqp.Map{}, nil
}

// correlationFilter reads the correlation-filter map of add-rule: each system property as a
// string (absent or null: not matched on) and the user properties to match.
func correlationFilter(m amqp.Map) (*broker.CorrelationFilter, error) {
	cf := &broker.CorrelationFilter{}
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"correlation-id", &cf.CorrelationID}, {"message-id", &cf.MessageID}, {"to", &cf.To},
		{"reply-to", &cf.ReplyTo}, {"label", &cf.Label}, {"session-id", &cf.SessionID},
		{"reply-to-session-id", &cf.ReplyToSessionID}, {"content-type", &cf.ContentType},
	} {
		v, _ := m.Get(f.key)
		switch v := v.(type) {
		case nil:
		case string:
			*f.dst = v
		default:
			return nil, badField("'%s' of the correlation filter must be a string", f.key)
		}
	}
	pv, _ := m.Get("properties")
	props, ok := pv.(amqp.Map)
	if pv != nil && !ok {
		return nil, badField("'properties' of the correlation filter must be a map")
	}
	for _, e := range props {
		name, ok := e.Key.(string)
		if !ok {
			return nil, badField("the correlation filter's property names must be strings")
		}
		v, err := userValue(name, e.Value)
		if err != nil {
			return nil, err
		}
		cf.Properties = append(cf.Properties, broker.Property{Name: name, Value: v})
	}
	return cf, nil
}

// removeRule removes a rule of a subscription (com.microsoft:remove-rule).
func removeRule(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	sub, name, err := namedRule(q)
	if err != nil {
		return nil, err
	}
	if err := q.store().DeleteRule(ctx, sub.Path, name); err != nil {
		return nil, ruleErr(err)
	}
	return amqp.Map{}, nil
}

// enumerateRules lists a subscription's rules (com.microsoft:enumerate-rules) as the described
// rule descriptions the rule managers decode; 204 when the page is empty.
func enumerateRules(ctx context.Context, q *mgmtRequest) (amqp.Map, error) {
	sub, err := subscriptionOf(q)
	if err != nil {
		return nil, err
	}
	skip, top, err := page(q.body)
	if err != nil {
		return nil, err
	}
	rules, err := q.store().ListRules(ctx, sub.Path, skip, top)
	if err != nil {
		return nil, ruleErr(err)
	}
	if len(rules) == 0 {
		return nil, nil
	}
	list := make(amqp.List, len(rules))
	for i, r := range rules {
		list[i] = amqp.Map{{Key: "rule-description", Value: ruleDescription(r)}}
	}
	return amqp.Map{{Key: "rules", Value: list}}, nil
}

// ruleDescription encodes a rule as the described list com.microsoft:rule-description:list.
func ruleDescription(r *broker.Rule) amqp.Described {
	var filter amqp.Described
	switch r.Filter.Kind {
	case broker.FilterTrue:
		filter = amqp.Described{Descriptor: descTrueFilter, Value: amqp.List{}}
	case broker.FilterFalse:
		filter = amqp.Described{Descriptor: descFalseFilter, Value: amqp.List{}}
	case broker.FilterCorrelation:
		cf := r.Filter.Correlation
		if cf == nil {
			cf = &broker.CorrelationFilter{}
		}
		props := amqp.Map{}
		for _, p := range cf.Properties {
			props = append(props, amqp.MapEntry{Key: p.Name, Value: ruleValue(p.Value)})
		}
		filter = amqp.Described{Descriptor: descCorrelationFilter, Value: amqp.List{
			nullable(cf.CorrelationID), nullable(cf.MessageID), nullable(cf.To), nullable(cf.ReplyTo),
			nullable(cf.Label), nullable(cf.SessionID), nullable(cf.ReplyToSessionID), nullable(cf.ContentType), props,
		}}
	default:
		filter = amqp.Described{Descriptor: descSQLFilter, Value: amqp.List{r.Filter.SQLExpression, sqlCompatibilityLevel}}
	}
	action := amqp.Described{Descriptor: descEmptyRuleAction, Value: amqp.List{}}
	if r.Action != nil && r.Action.SQLExpression != "" {
		action = amqp.Described{Descriptor: descSQLRuleAction, Value: amqp.List{r.Action.SQLExpression, sqlCompatibilityLevel}}
	}
	return amqp.Described{Descriptor: descRuleDescription, Value: amqp.List{filter, action, r.Name, r.CreatedAt}}
}

// nullable is s, or null when empty (a correlation filter field not matched on).
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ruleValue is a correlation filter property's value as AMQP carries it: as a message's
// application property of its type (amqpValue), but a time span, which only rule parameters
// hold, as milliseconds.
func ruleValue(v any) any {
	if d, ok := v.(time.Duration); ok {
		return int64(d / time.Millisecond)
	}
	return amqpValue(v)
}

// ruleErr gives an existing rule the condition the rule managers map to "already exists" (a
// missing one is amqp:not-found, 404, as for any missing entity).
func ruleErr(err error) error {
	if broker.ErrorCode(err) == broker.CodeConflict {
		return &amqp.Error{Condition: condEntityAlreadyExists, Description: broker.ErrorMessage(err)}
	}
	return err
}
