package broker

import (
	"strings"
	"time"

	"github.com/sbgate/sbgate/sqlfilter"
)

// FilterKind names a rule's filter type as Atom's xsi:type does.
type FilterKind string

// Filter kinds.
const (
	FilterSQL         FilterKind = "SqlFilter"
	FilterTrue        FilterKind = "TrueFilter"
	FilterFalse       FilterKind = "FalseFilter"
	FilterCorrelation FilterKind = "CorrelationFilter"
)

// DefaultRuleName is the rule a subscription gets when it is created without one.
const DefaultRuleName = "$Default"

// MaxRuleNameLength bounds a rule name; MaxExpressionLength a filter or action expression.
const (
	MaxRuleNameLength   = 50
	MaxExpressionLength = 1024
	MaxRulesPerSub      = 2000
)

// Rule is a subscription rule: a filter that decides which messages of the topic the
// subscription gets, and an optional action that changes the subscription's copy.
type Rule struct {
	Name      string
	Filter    RuleFilter
	Action    *RuleAction // nil: EmptyRuleAction
	CreatedAt time.Time
}

// RuleFilter is a rule's filter. SQL, true and false filters carry an expression (TrueFilter is
// "1=1", FalseFilter "1=0"); a correlation filter carries its fields.
type RuleFilter struct {
	Kind          FilterKind
	SQLExpression string
	Parameters    []Property // @name parameters of a SqlFilter; values as in UserProperties
	Correlation   *CorrelationFilter
}

// CorrelationFilter matches messages whose set fields all equal the message's properties.
type CorrelationFilter struct {
	CorrelationID    string
	MessageID        string
	To               string
	ReplyTo          string
	Label            string
	SessionID        string
	ReplyToSessionID string
	ContentType      string
	Properties       []Property // user properties that must be equal
}

// RuleAction is a SqlRuleAction: SET and REMOVE statements applied to the subscription's copy.
type RuleAction struct {
	SQLExpression string
	Parameters    []Property
}

// Declared types of rule values (Property.Type): the XML Schema types by their local name, and
// the types of the .NET serialization namespace (http://schemas.microsoft.com/2003/10/Serialization/)
// with the prefix "ser:". Each holds values of one Go type: every integer type int64, every
// floating-point type float64, "ser:guid" a string (its text as sent).
const (
	TypeSerDuration = "ser:duration"
	TypeSerGUID     = "ser:guid"
)

// ruleValueTypeFits reports whether a value of v's Go type can have the declared type t.
func ruleValueTypeFits(t string, v any) bool {
	switch t {
	case "string", TypeSerGUID:
		_, ok := v.(string)
		return ok
	case "int", "long", "short", "byte", "unsignedByte", "unsignedShort", "unsignedInt", "unsignedLong":
		_, ok := v.(int64)
		return ok
	case "double", "float", "decimal":
		_, ok := v.(float64)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "dateTime":
		_, ok := v.(time.Time)
		return ok
	case "duration", TypeSerDuration:
		_, ok := v.(time.Duration)
		return ok
	}
	return false
}

// TrueRule is the $Default rule: every message.
func TrueRule(name string) Rule {
	return Rule{Name: name, Filter: RuleFilter{Kind: FilterTrue, SQLExpression: "1=1"}}
}

// CompiledRule is a rule ready to run on messages.
type CompiledRule struct {
	Name   string
	Match  func(sqlfilter.Message, *sqlfilter.Budget) (bool, error)
	Action *sqlfilter.Action // nil when the rule has none
}

func paramMap(props []Property) map[string]any {
	if len(props) == 0 {
		return nil
	}
	m := make(map[string]any, len(props))
	for _, p := range props {
		m[p.Name] = p.Value
	}
	return m
}

// CompileRule checks and compiles a rule. Errors: ErrBadRequest pointing at the problem.
func CompileRule(r Rule) (CompiledRule, error) {
	c := CompiledRule{Name: r.Name}
	if err := validateRuleName(r.Name); err != nil {
		return c, err
	}
	switch r.Filter.Kind {
	case FilterTrue:
		c.Match = func(sqlfilter.Message, *sqlfilter.Budget) (bool, error) { return true, nil }
	case FilterFalse:
		c.Match = func(sqlfilter.Message, *sqlfilter.Budget) (bool, error) { return false, nil }
	case FilterSQL:
		if len(r.Filter.SQLExpression) > MaxExpressionLength {
			return c, BadRequest("The filter expression of rule '%s' is longer than %d characters.", r.Name, MaxExpressionLength)
		}
		f, err := sqlfilter.ParseFilter(r.Filter.SQLExpression, paramMap(r.Filter.Parameters))
		if err != nil {
			return c, BadRequest("The filter of rule '%s' is not valid: %s", r.Name, err.Error())
		}
		c.Match = f.MatchWithin
	case FilterCorrelation:
		cf := r.Filter.Correlation
		if cf == nil || cf.CorrelationID+cf.MessageID+cf.To+cf.ReplyTo+cf.Label+cf.SessionID+cf.ReplyToSessionID+cf.ContentType == "" && len(cf.Properties) == 0 {
			return c, BadRequest("The correlation filter of rule '%s' sets no property; set at least one.", r.Name)
		}
		compiled := &sqlfilter.CorrelationFilter{CorrelationID: cf.CorrelationID, MessageID: cf.MessageID, To: cf.To,
			ReplyTo: cf.ReplyTo, Label: cf.Label, SessionID: cf.SessionID, ReplyToSessionID: cf.ReplyToSessionID,
			ContentType: cf.ContentType, Properties: paramMap(cf.Properties)}
		c.Match = func(m sqlfilter.Message, _ *sqlfilter.Budget) (bool, error) { return compiled.Match(m), nil }
	default:
		return c, BadRequest("Rule '%s' has an unknown filter type '%s'.", r.Name, Clip(string(r.Filter.Kind)))
	}
	if r.Action != nil {
		if len(r.Action.SQLExpression) > MaxExpressionLength {
			return c, BadRequest("The action of rule '%s' is longer than %d characters.", r.Name, MaxExpressionLength)
		}
		a, err := sqlfilter.ParseAction(r.Action.SQLExpression, paramMap(r.Action.Parameters))
		if err != nil {
			return c, BadRequest("The action of rule '%s' is not valid: %s", r.Name, err.Error())
		}
		c.Action = a
	}
	return c, nil
}

// ValidateRule checks a rule as PutRule and CreateSubscription would, without a database: its
// name, and that its filter and action compile. Declarative configuration (package nsconfig)
// checks every rule before it changes anything. Errors: ErrBadRequest saying what is wrong.
func ValidateRule(r Rule) error {
	_, err := CompileRule(r)
	return err
}

// validateRuleName allows what subscription names allow, plus a leading '$' ("$Default").
func validateRuleName(name string) error {
	if name == "" {
		return BadRequest("The rule name is empty.")
	}
	if len(name) > MaxRuleNameLength {
		return BadRequest("The rule name '%s' is longer than %d characters.", Clip(name), MaxRuleNameLength)
	}
	if reservedSegments[strings.ToLower(name)] {
		return BadRequest("'%s' is a reserved word and cannot be a rule name.", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && c != '.' && c != '-' && c != '_' && !(c == '$' && i == 0) {
			return BadRequest("The rule name '%s' contains character(s) that are not allowed: use letters, numbers, periods, hyphens and underscores.", Clip(name))
		}
	}
	return nil
}
