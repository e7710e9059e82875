package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store/internal/sqlcdb"
)

// ruleJSON is how a rule's filter and action are kept in the rules table.
type filterJSON struct {
	Kind        broker.FilterKind `json:"kind"`
	SQL         string            `json:"sql,omitempty"`
	Params      json.RawMessage   `json:"params,omitempty"`
	Correlation *correlationJSON  `json:"correlation,omitempty"`
}

type correlationJSON struct {
	CorrelationID    string          `json:"correlationId,omitempty"`
	MessageID        string          `json:"messageId,omitempty"`
	To               string          `json:"to,omitempty"`
	ReplyTo          string          `json:"replyTo,omitempty"`
	Label            string          `json:"label,omitempty"`
	SessionID        string          `json:"sessionId,omitempty"`
	ReplyToSessionID string          `json:"replyToSessionId,omitempty"`
	ContentType      string          `json:"contentType,omitempty"`
	Properties       json.RawMessage `json:"properties,omitempty"`
}

type actionJSON struct {
	SQL    string          `json:"sql"`
	Params json.RawMessage `json:"params,omitempty"`
}

// encodeTyped keeps typed values (rule parameters, correlation properties) as user properties
// are kept.
func encodeTyped(props []broker.Property) (json.RawMessage, error) {
	if len(props) == 0 {
		return nil, nil
	}
	s, err := broker.EncodeUserProperties(props)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func encodeRule(r broker.Rule) (filter, action []byte, err error) {
	f := filterJSON{Kind: r.Filter.Kind, SQL: r.Filter.SQLExpression}
	if f.Params, err = encodeTyped(r.Filter.Parameters); err != nil {
		return nil, nil, err
	}
	if c := r.Filter.Correlation; c != nil {
		f.Correlation = &correlationJSON{CorrelationID: c.CorrelationID, MessageID: c.MessageID, To: c.To, ReplyTo: c.ReplyTo,
			Label: c.Label, SessionID: c.SessionID, ReplyToSessionID: c.ReplyToSessionID, ContentType: c.ContentType}
		if f.Correlation.Properties, err = encodeTyped(c.Properties); err != nil {
			return nil, nil, err
		}
	}
	if filter, err = json.Marshal(f); err != nil {
		return nil, nil, err
	}
	if r.Action != nil {
		a := actionJSON{SQL: r.Action.SQLExpression}
		if a.Params, err = encodeTyped(r.Action.Parameters); err != nil {
			return nil, nil, err
		}
		if action, err = json.Marshal(a); err != nil {
			return nil, nil, err
		}
	}
	return filter, action, nil
}

func decodeRule(name string, filter, action []byte, created time.Time) (broker.Rule, error) {
	r := broker.Rule{Name: name, CreatedAt: created.UTC()}
	var f filterJSON
	if err := json.Unmarshal(filter, &f); err != nil {
		return r, fmt.Errorf("decode filter of rule %s: %w", name, err)
	}
	r.Filter = broker.RuleFilter{Kind: f.Kind, SQLExpression: f.SQL}
	var err error
	if r.Filter.Parameters, err = broker.DecodeUserProperties(f.Params); err != nil {
		return r, err
	}
	if c := f.Correlation; c != nil {
		r.Filter.Correlation = &broker.CorrelationFilter{CorrelationID: c.CorrelationID, MessageID: c.MessageID, To: c.To,
			ReplyTo: c.ReplyTo, Label: c.Label, SessionID: c.SessionID, ReplyToSessionID: c.ReplyToSessionID, ContentType: c.ContentType}
		if r.Filter.Correlation.Properties, err = broker.DecodeUserProperties(c.Properties); err != nil {
			return r, err
		}
	}
	if len(action) > 0 {
		var a actionJSON
		if err := json.Unmarshal(action, &a); err != nil {
			return r, fmt.Errorf("decode action of rule %s: %w", name, err)
		}
		r.Action = &broker.RuleAction{SQLExpression: a.SQL}
		if r.Action.Parameters, err = broker.DecodeUserProperties(a.Params); err != nil {
			return r, err
		}
	}
	return r, nil
}

func sortProperties(props []broker.Property) {
	sort.Slice(props, func(i, j int) bool { return props[i].Name < props[j].Name })
}

func insertRule(ctx context.Context, tx pgx.Tx, subID int64, r broker.Rule) error {
	filter, action, err := encodeRule(r)
	if err != nil {
		return err
	}
	n, err := queries.InsertRule(ctx, tx, sqlcdb.InsertRuleParams{SubscriptionID: subID,
		NameKey: strings.ToLower(r.Name), Name: r.Name, Filter: filter, Action: action, CreatedAt: r.CreatedAt})
	if err != nil {
		return err
	}
	if n == 0 {
		return &broker.Error{Code: broker.CodeConflict, Message: fmt.Sprintf("The messaging entity rule '%s' already exists.", r.Name)}
	}
	return nil
}

// subscription reads the subscription at path. Errors: ErrNotFound.
func (s *Postgres) subscription(ctx context.Context, path string) (*broker.Entity, error) {
	e, err := s.lookup(ctx, path)
	if err != nil {
		return nil, err
	}
	if e.Kind != broker.KindSubscription {
		return nil, broker.NotFound("The messaging entity '%s' is not a subscription.", broker.Clip(path))
	}
	return e, nil
}

// PutRule creates a rule on the subscription at subPath, or with update replaces an existing
// one. Errors: ErrNotFound (subscription, or the rule on update), ErrConflict (create of an
// existing rule), ErrBadRequest (invalid filter, action or name), ErrQuota (too many rules).
func (s *Postgres) PutRule(ctx context.Context, subPath string, r broker.Rule, update bool) (*broker.Rule, error) {
	if _, err := broker.CompileRule(r); err != nil {
		return nil, err
	}
	// Answer with the parameters in the order a later read gives them.
	sortProperties(r.Filter.Parameters)
	if r.Filter.Correlation != nil {
		sortProperties(r.Filter.Correlation.Properties)
	}
	if r.Action != nil {
		sortProperties(r.Action.Parameters)
	}
	sub, err := s.subscription(ctx, subPath)
	if err != nil {
		return nil, err
	}
	r.CreatedAt = s.now()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if update {
			filter, action, err := encodeRule(r)
			if err != nil {
				return err
			}
			created, err := queries.UpdateRule(ctx, tx, sqlcdb.UpdateRuleParams{SubscriptionID: sub.ID,
				NameKey: strings.ToLower(r.Name), Filter: filter, Action: action, Name: r.Name})
			if errors.Is(err, pgx.ErrNoRows) {
				return broker.NotFound("The rule '%s' does not exist on '%s'.", r.Name, sub.Path)
			}
			r.CreatedAt = created.UTC()
			return err
		}
		n, err := queries.CountRules(ctx, tx, sub.ID)
		if err != nil {
			return err
		}
		if n >= broker.MaxRulesPerSub {
			return &broker.Error{Code: broker.CodeQuotaExceeded, Message: fmt.Sprintf("SubCode=40300. The subscription '%s' already has %d rules, the most allowed.", sub.Path, n)}
		}
		return insertRule(ctx, tx, sub.ID, r)
	})
	if err != nil {
		return nil, fmt.Errorf("put rule %s on %s: %w", r.Name, sub.Path, interpretError(err))
	}
	s.entityChanged(ctx, sub.Path)
	return &r, nil
}

// GetRule returns one rule of the subscription at subPath. Errors: ErrNotFound.
func (s *Postgres) GetRule(ctx context.Context, subPath, name string) (*broker.Rule, error) {
	sub, err := s.subscription(ctx, subPath)
	if err != nil {
		return nil, err
	}
	row, err := queries.Rule(ctx, s.pool, sqlcdb.RuleParams{SubscriptionID: sub.ID, NameKey: strings.ToLower(name)})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, broker.NotFound("The rule '%s' does not exist on '%s'.", broker.Clip(name), sub.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("get rule %s: %w", broker.Clip(name), interpretError(err))
	}
	r, err := decodeRule(row.Name, row.Filter, row.Action, row.CreatedAt)
	return &r, err
}

// DeleteRule deletes a rule. Errors: ErrNotFound.
func (s *Postgres) DeleteRule(ctx context.Context, subPath, name string) error {
	sub, err := s.subscription(ctx, subPath)
	if err != nil {
		return err
	}
	n, err := queries.DeleteRule(ctx, s.pool, sqlcdb.DeleteRuleParams{SubscriptionID: sub.ID, NameKey: strings.ToLower(name)})
	if err != nil {
		return fmt.Errorf("delete rule %s: %w", broker.Clip(name), interpretError(err))
	}
	if n == 0 {
		return broker.NotFound("The rule '%s' does not exist on '%s'.", broker.Clip(name), sub.Path)
	}
	s.entityChanged(ctx, sub.Path)
	return nil
}

// ListRules lists a subscription's rules in name order. Errors: ErrNotFound.
func (s *Postgres) ListRules(ctx context.Context, subPath string, skip, top int) ([]*broker.Rule, error) {
	sub, err := s.subscription(ctx, subPath)
	if err != nil {
		return nil, err
	}
	return s.rulesOf(ctx, sub.ID, skip, top)
}

func (s *Postgres) rulesOf(ctx context.Context, subID int64, skip, top int) ([]*broker.Rule, error) {
	rows, err := queries.Rules(ctx, s.pool, sqlcdb.RulesParams{SubscriptionID: subID, Skip: int64(skip), Top: int64(top)})
	if err != nil {
		return nil, fmt.Errorf("list rules: %w", interpretError(err))
	}
	rules := make([]*broker.Rule, 0, len(rows))
	for _, row := range rows {
		r, err := decodeRule(row.Name, row.Filter, row.Action, row.CreatedAt)
		if err != nil {
			return nil, err
		}
		rules = append(rules, &r)
	}
	return rules, nil
}
