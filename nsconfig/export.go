package nsconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sbgate/sbgate/atom"
	"github.com/sbgate/sbgate/broker"
)

// Export reads ns into a File for namespace name (the emulator accepts only "sbemulatorns"; ""
// gives that). Queues and topics come in name order, subscriptions and rules as ns lists them.
// A subscription whose only rule is $Default taking every message is written without rules (a
// new subscription gets exactly that). What the emulator's format cannot hold is left out and
// listed in the notes: properties outside it (MaxSizeInMegabytes, AutoDeleteOnIdle, Status,
// authorization rules …) that differ from a new entity's, SQL parameters, and correlation values
// that are not strings, numbers or booleans (written as their text).
func Export(ctx context.Context, ns Namespace, name string) (*File, []string, error) {
	if name == "" {
		name = emulatorNamespace
	}
	st, err := readState(ctx, ns, nil)
	if err != nil {
		return nil, nil, err
	}
	f := &File{Name: "export", Namespace: name, Logging: "Console"}
	var notes []string
	byName := func(a, b *broker.Entity) int { return strings.Compare(broker.Key(a.Path), broker.Key(b.Path)) }
	queues := slices.SortedFunc(slices.Values(st.queues), byName)
	topics := slices.SortedFunc(slices.Values(st.topics), byName)
	for _, q := range queues {
		notes = append(notes, unexported(q)...)
		f.Queues = append(f.Queues, Queue{Name: q.Path, Props: propertiesOf(broker.KindQueue, q.Props)})
	}
	for _, t := range topics {
		notes = append(notes, unexported(t)...)
		ft := Topic{Name: t.Path, Props: propertiesOf(broker.KindTopic, t.Props)}
		for _, s := range st.subs[broker.Key(t.Path)] {
			notes = append(notes, unexported(s)...)
			_, subName, _ := broker.SplitSubscriptionPath(s.Path)
			fs := Subscription{Name: subName, Props: propertiesOf(broker.KindSubscription, s.Props)}
			rules := st.rules[broker.Key(s.Path)]
			if !(len(rules) == 1 && isDefaultRule(rules[0])) {
				fs.Rules = []Rule{}
				for _, r := range rules {
					out, rn := exportRule(s.Path, r)
					notes = append(notes, rn...)
					fs.Rules = append(fs.Rules, Rule{Rule: out})
				}
			}
			ft.Subscriptions = append(ft.Subscriptions, fs)
		}
		f.Topics = append(f.Topics, ft)
	}
	return f, notes, nil
}

// isDefaultRule reports whether r is what a new subscription gets: $Default, every message, no
// action.
func isDefaultRule(r *broker.Rule) bool {
	if !strings.EqualFold(r.Name, broker.DefaultRuleName) || r.Action != nil || len(r.Filter.Parameters) > 0 {
		return false
	}
	return r.Filter.Kind == broker.FilterTrue || r.Filter.Kind == broker.FilterSQL && strings.TrimSpace(r.Filter.SQLExpression) == "1=1"
}

// exportRule is r as the emulator's format holds it, and what it had to leave out.
func exportRule(sub string, r *broker.Rule) (broker.Rule, []string) {
	var notes []string
	out := broker.Rule{Name: r.Name}
	switch r.Filter.Kind {
	case broker.FilterCorrelation:
		c := *r.Filter.Correlation
		c.Properties = nil
		for _, p := range r.Filter.Correlation.Properties {
			v := p.Value
			switch x := v.(type) {
			case string, bool, int64:
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) {
					v = fmt.Sprint(x)
					notes = append(notes, fmt.Sprintf("rule %s of %s: correlation property %s = %v written as text (JSON has no such number)", r.Name, sub, p.Name, x))
				}
			case time.Time:
				v = atom.FormatTime(x)
				notes = append(notes, fmt.Sprintf("rule %s of %s: correlation property %s is a dateTime; written as the text %q", r.Name, sub, p.Name, v))
			case time.Duration:
				v = atom.FormatDuration(x)
				notes = append(notes, fmt.Sprintf("rule %s of %s: correlation property %s is a duration; written as the text %q", r.Name, sub, p.Name, v))
			default:
				v = fmt.Sprint(x)
				notes = append(notes, fmt.Sprintf("rule %s of %s: correlation property %s written as the text %q", r.Name, sub, p.Name, v))
			}
			c.Properties = append(c.Properties, broker.Property{Name: p.Name, Value: v})
		}
		out.Filter = broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: &c}
	case broker.FilterFalse:
		out.Filter = broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: "1=0"}
	case broker.FilterTrue, "":
		out.Filter = broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: "1=1"}
	default:
		out.Filter = broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: r.Filter.SQLExpression}
	}
	if len(r.Filter.Parameters) > 0 {
		notes = append(notes, fmt.Sprintf("rule %s of %s: the emulator's format has no filter parameters; %d left out", r.Name, sub, len(r.Filter.Parameters)))
	}
	if r.Action != nil {
		out.Action = &broker.RuleAction{SQLExpression: r.Action.SQLExpression}
		if len(r.Action.Parameters) > 0 {
			notes = append(notes, fmt.Sprintf("rule %s of %s: the emulator's format has no action parameters; %d left out", r.Name, sub, len(r.Action.Parameters)))
		}
	}
	return out, notes
}

// unexported names the properties of e that the emulator's format cannot hold and that differ
// from a new entity's.
func unexported(e *broker.Entity) []string {
	def := broker.DefaultProperties(e.Kind)
	p := e.Props
	var names []string
	check := func(name string, differs bool) {
		if differs {
			names = append(names, name)
		}
	}
	check("MaxSizeInMegabytes", p.MaxSizeInMegabytes != def.MaxSizeInMegabytes && e.Kind != broker.KindSubscription)
	check("AutoDeleteOnIdle", p.AutoDeleteOnIdle != def.AutoDeleteOnIdle)
	check("Status", p.Status != def.Status)
	check("UserMetadata", p.UserMetadata != def.UserMetadata)
	check("AuthorizationRules", len(p.AuthorizationRules) > 0)
	check("EnablePartitioning", p.EnablePartitioning)
	check("EnableBatchedOperations", p.EnableBatchedOperations != def.EnableBatchedOperations)
	check("MaxMessageSizeInKilobytes", p.MaxMessageSizeInKilobytes != def.MaxMessageSizeInKilobytes && e.Kind != broker.KindSubscription)
	check("DeadLetteringOnFilterEvaluationExceptions", p.DeadLetteringOnFilterEvaluation != def.DeadLetteringOnFilterEvaluation && e.Kind == broker.KindSubscription)
	check("SupportOrdering", p.SupportOrdering != def.SupportOrdering && e.Kind == broker.KindTopic)
	if e.Kind == broker.KindTopic {
		check("DeadLetteringOnMessageExpiration", p.DeadLetteringOnMessageExpiration)
	}
	if len(names) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s %s: %s not in the emulator's Config.json format, left out", strings.ToLower(e.Kind.String()), e.Path, strings.Join(names, ", "))}
}

// The file as the emulator's published sample writes it: members in its order, two-space
// indentation.
type (
	jsonFile struct {
		UserConfig jsonUserConfig `json:"UserConfig"`
	}
	jsonUserConfig struct {
		Namespaces []jsonNamespace `json:"Namespaces"`
		Logging    jsonLogging     `json:"Logging"`
	}
	jsonLogging struct {
		Type string `json:"Type"`
	}
	jsonNamespace struct {
		Name   string      `json:"Name"`
		Queues []jsonQueue `json:"Queues"`
		Topics []jsonTopic `json:"Topics"`
	}
	jsonQueue struct {
		Name       string         `json:"Name"`
		Properties jsonQueueProps `json:"Properties"`
	}
	jsonQueueProps struct {
		DeadLetteringOnMessageExpiration    bool   `json:"DeadLetteringOnMessageExpiration"`
		DefaultMessageTimeToLive            string `json:"DefaultMessageTimeToLive"`
		DuplicateDetectionHistoryTimeWindow string `json:"DuplicateDetectionHistoryTimeWindow"`
		ForwardDeadLetteredMessagesTo       string `json:"ForwardDeadLetteredMessagesTo"`
		ForwardTo                           string `json:"ForwardTo"`
		LockDuration                        string `json:"LockDuration"`
		MaxDeliveryCount                    int32  `json:"MaxDeliveryCount"`
		RequiresDuplicateDetection          bool   `json:"RequiresDuplicateDetection"`
		RequiresSession                     bool   `json:"RequiresSession"`
	}
	jsonTopic struct {
		Name          string             `json:"Name"`
		Properties    jsonTopicProps     `json:"Properties"`
		Subscriptions []jsonSubscription `json:"Subscriptions"`
	}
	jsonTopicProps struct {
		DefaultMessageTimeToLive            string `json:"DefaultMessageTimeToLive"`
		DuplicateDetectionHistoryTimeWindow string `json:"DuplicateDetectionHistoryTimeWindow"`
		RequiresDuplicateDetection          bool   `json:"RequiresDuplicateDetection"`
	}
	jsonSubscription struct {
		Name       string        `json:"Name"`
		Properties jsonSubProps  `json:"Properties"`
		Rules      []jsonRuleOut `json:"Rules,omitempty"`
	}
	jsonSubProps struct {
		DeadLetteringOnMessageExpiration bool   `json:"DeadLetteringOnMessageExpiration"`
		DefaultMessageTimeToLive         string `json:"DefaultMessageTimeToLive"`
		LockDuration                     string `json:"LockDuration"`
		MaxDeliveryCount                 int32  `json:"MaxDeliveryCount"`
		ForwardDeadLetteredMessagesTo    string `json:"ForwardDeadLetteredMessagesTo"`
		ForwardTo                        string `json:"ForwardTo"`
		RequiresSession                  bool   `json:"RequiresSession"`
	}
	jsonRuleOut struct {
		Name       string        `json:"Name"`
		Properties jsonRuleProps `json:"Properties"`
	}
	jsonRuleProps struct {
		FilterType        string           `json:"FilterType"`
		CorrelationFilter *jsonCorrelation `json:"CorrelationFilter,omitempty"`
		SqlFilter         *jsonSQL         `json:"SqlFilter,omitempty"`
		Action            *jsonSQL         `json:"Action,omitempty"`
	}
	jsonSQL struct {
		SqlExpression string `json:"SqlExpression"`
	}
	jsonCorrelation struct {
		ContentType      string          `json:"ContentType,omitempty"`
		CorrelationId    string          `json:"CorrelationId,omitempty"`
		Label            string          `json:"Label,omitempty"`
		MessageId        string          `json:"MessageId,omitempty"`
		ReplyTo          string          `json:"ReplyTo,omitempty"`
		ReplyToSessionId string          `json:"ReplyToSessionId,omitempty"`
		SessionId        string          `json:"SessionId,omitempty"`
		To               string          `json:"To,omitempty"`
		Properties       json.RawMessage `json:"Properties,omitempty"`
	}
)

// Marshal writes f as a Config.json the emulator reads: every property of every entity written
// out (so the file means the same whatever the defaults), durations in ISO 8601.
func Marshal(f *File) ([]byte, error) {
	ns := jsonNamespace{Name: f.Namespace, Queues: []jsonQueue{}, Topics: []jsonTopic{}}
	d := atom.FormatDuration
	for _, q := range f.Queues {
		p := q.Props
		ns.Queues = append(ns.Queues, jsonQueue{Name: q.Name, Properties: jsonQueueProps{
			DeadLetteringOnMessageExpiration: p.DeadLetteringOnMessageExpiration, DefaultMessageTimeToLive: d(p.DefaultMessageTimeToLive),
			DuplicateDetectionHistoryTimeWindow: d(p.DuplicateDetectionHistoryTimeWindow), ForwardDeadLetteredMessagesTo: p.ForwardDeadLetteredMessagesTo,
			ForwardTo: p.ForwardTo, LockDuration: d(p.LockDuration), MaxDeliveryCount: p.MaxDeliveryCount,
			RequiresDuplicateDetection: p.RequiresDuplicateDetection, RequiresSession: p.RequiresSession,
		}})
	}
	for _, t := range f.Topics {
		jt := jsonTopic{Name: t.Name, Subscriptions: []jsonSubscription{}, Properties: jsonTopicProps{
			DefaultMessageTimeToLive: d(t.Props.DefaultMessageTimeToLive), DuplicateDetectionHistoryTimeWindow: d(t.Props.DuplicateDetectionHistoryTimeWindow),
			RequiresDuplicateDetection: t.Props.RequiresDuplicateDetection,
		}}
		for _, s := range t.Subscriptions {
			p := s.Props
			js := jsonSubscription{Name: s.Name, Properties: jsonSubProps{
				DeadLetteringOnMessageExpiration: p.DeadLetteringOnMessageExpiration, DefaultMessageTimeToLive: d(p.DefaultMessageTimeToLive),
				LockDuration: d(p.LockDuration), MaxDeliveryCount: p.MaxDeliveryCount, ForwardDeadLetteredMessagesTo: p.ForwardDeadLetteredMessagesTo,
				ForwardTo: p.ForwardTo, RequiresSession: p.RequiresSession,
			}}
			for _, r := range s.Rules {
				jr, err := marshalRule(r.Rule)
				if err != nil {
					return nil, err
				}
				js.Rules = append(js.Rules, jr)
			}
			jt.Subscriptions = append(jt.Subscriptions, js)
		}
		ns.Topics = append(ns.Topics, jt)
	}
	logging := f.Logging
	if logging == "" {
		logging = "Console"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(jsonFile{UserConfig: jsonUserConfig{Namespaces: []jsonNamespace{ns}, Logging: jsonLogging{Type: logging}}}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func marshalRule(r broker.Rule) (jsonRuleOut, error) {
	out := jsonRuleOut{Name: r.Name}
	switch r.Filter.Kind {
	case broker.FilterCorrelation:
		c := r.Filter.Correlation
		out.Properties.FilterType = "Correlation"
		jc := &jsonCorrelation{ContentType: c.ContentType, CorrelationId: c.CorrelationID, Label: c.Label, MessageId: c.MessageID,
			ReplyTo: c.ReplyTo, ReplyToSessionId: c.ReplyToSessionID, SessionId: c.SessionID, To: c.To}
		if len(c.Properties) > 0 {
			raw, err := marshalValues(c.Properties)
			if err != nil {
				return out, err
			}
			jc.Properties = raw
		}
		out.Properties.CorrelationFilter = jc
	case broker.FilterTrue, "":
		out.Properties.FilterType, out.Properties.SqlFilter = "Sql", &jsonSQL{SqlExpression: "1=1"}
	case broker.FilterFalse:
		out.Properties.FilterType, out.Properties.SqlFilter = "Sql", &jsonSQL{SqlExpression: "1=0"}
	default:
		out.Properties.FilterType, out.Properties.SqlFilter = "Sql", &jsonSQL{SqlExpression: r.Filter.SQLExpression}
	}
	if r.Action != nil {
		out.Properties.Action = &jsonSQL{SqlExpression: r.Action.SQLExpression}
	}
	return out, nil
}

// marshalValues writes correlation properties as a JSON object, keeping each value's type as Parse
// reads it back: a whole number without a fraction (long), a double always with one ("2.0").
func marshalValues(props []broker.Property) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range props {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(p.Name)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		switch v := p.Value.(type) {
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		case float64:
			s := strconv.FormatFloat(v, 'g', -1, 64)
			if !strings.ContainsAny(s, ".eE") {
				s += ".0"
			}
			b.WriteString(s)
		default:
			vb, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("correlation property %s: %w", p.Name, err)
			}
			b.Write(vb)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
