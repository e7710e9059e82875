package store

import (
	"time"
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
