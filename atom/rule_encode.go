package atom

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// AppendRuleEntry appends the Atom entry of one rule. Content: RuleDescription with xmlns and xmlns:i as for descriptions,
// children in order Filter, Action, CreatedAt, Name (protocol.md §4.8). Filter is ALWAYS written with i:type:
// SqlFilter/TrueFilter/FalseFilter as <SqlExpression>…</SqlExpression><CompatibilityLevel>20</CompatibilityLevel> plus
// <Parameters> when there are any; CorrelationFilter with only the set fields in the documented order plus <Properties>.
// Action ALWAYS written: <Action i:type="EmptyRuleAction"/> or SqlRuleAction with SqlExpression, CompatibilityLevel 20, Parameters.
// Typed values written as <KeyValueOfstringanyType><Key>…</Key><Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">…</Value></KeyValueOfstringanyType>
// with the type the value was declared with (broker.Property.Type, as DecodeRule gives it), so every client reads back what
// it wrote: Go and JS read only int|double|string|boolean|dateTime and write nothing else, .NET and Python also long and
// duration. A value without a declared type gets the type .NET gives its Go type: string, int (int64 within 32 bits),
// long (beyond), double, boolean, dateTime (ISO 8601 UTC), duration. No <author> for rule entries (info.Author is empty then anyway).
//
// Details beyond the above:
//   - TrueFilter and FalseFilter are written with "1=1" and "1=0" whatever r.Filter holds; a
//     filter without Kind is a TrueFilter, as broker.TrueRule builds it.
//   - <Properties> is written even when empty (every client reads an empty list as none), and a
//     SqlRuleAction's <Parameters> only when there are any, as for filters.
//   - The prefix is exactly "d6p1" and the type attribute exactly "i:type": the Go SDK compares
//     the whole attribute value with "d6p1:int" etc., and the JS SDK reads the attribute named
//     "i:type" and drops its first five characters.
//   - Only .NET and Python read long and duration back; the Go and JS SDKs fail on them, as they
//     would on the service's answer for the same rule. Types of the Serialization namespace
//     (ser:duration, ser:guid) are written in that namespace, still with the prefix d6p1.
//   - A decimal is written without exponent, as xs:decimal requires.
//   - A declared type that cannot hold the value (only a rule built by hand has one) is ignored.
//   - A value of another Go type (broker.Property documents the five above plus time.Duration) is
//     written as a string of its fmt.Sprint form, so that the document stays valid.
//
// It cannot fail.
func AppendRuleEntry(dst []byte, info EntryInfo, r *broker.Rule) []byte {
	info.Author = "" // the service writes <author> for queues and topics only
	dst = appendEntryOpen(dst, info)
	dst = append(dst, "<"+ruleDescriptionName+descAttrs...)
	dst = appendFilter(dst, &r.Filter)
	dst = appendAction(dst, r.Action)
	dst = appendTimeElem(dst, "CreatedAt", r.CreatedAt)
	dst = appendTextElem(dst, "Name", r.Name)
	return append(dst, "</"+ruleDescriptionName+"></content></entry>"...)
}

func appendFilter(dst []byte, f *broker.RuleFilter) []byte {
	switch f.Kind {
	case broker.FilterCorrelation:
		return appendCorrelationFilter(dst, f.Correlation)
	case broker.FilterFalse:
		return appendSQLBody(dst, `<Filter i:type="FalseFilter">`, "1=0", f.Parameters, "</Filter>")
	case broker.FilterTrue, "":
		return appendSQLBody(dst, `<Filter i:type="TrueFilter">`, "1=1", f.Parameters, "</Filter>")
	default:
		return appendSQLBody(dst, `<Filter i:type="SqlFilter">`, f.SQLExpression, f.Parameters, "</Filter>")
	}
}

// appendSQLBody writes a SQL filter or action: open tag, expression, compatibility level 20 (the
// Go SDK and the service's own answers carry it; JS tells SQL filters by SqlExpression), and the
// parameters when there are any.
func appendSQLBody(dst []byte, open, expr string, params []broker.Property, close string) []byte {
	dst = append(dst, open...)
	dst = appendTextElem(dst, "SqlExpression", expr)
	dst = append(dst, "<CompatibilityLevel>20</CompatibilityLevel>"...)
	if len(params) > 0 {
		dst = appendKeyValues(dst, "Parameters", params)
	}
	return append(dst, close...)
}

// appendCorrelationFilter writes the set fields in the order of protocol.md §4.8.
func appendCorrelationFilter(dst []byte, c *broker.CorrelationFilter) []byte {
	if c == nil {
		c = &broker.CorrelationFilter{}
	}
	dst = append(dst, `<Filter i:type="CorrelationFilter">`...)
	dst = appendOptionalElem(dst, "CorrelationId", c.CorrelationID)
	dst = appendOptionalElem(dst, "MessageId", c.MessageID)
	dst = appendOptionalElem(dst, "To", c.To)
	dst = appendOptionalElem(dst, "ReplyTo", c.ReplyTo)
	dst = appendOptionalElem(dst, "Label", c.Label)
	dst = appendOptionalElem(dst, "SessionId", c.SessionID)
	dst = appendOptionalElem(dst, "ReplyToSessionId", c.ReplyToSessionID)
	dst = appendOptionalElem(dst, "ContentType", c.ContentType)
	dst = appendKeyValues(dst, "Properties", c.Properties)
	return append(dst, "</Filter>"...)
}

// appendAction writes the action; Go dereferences <Action> without a nil check, so a rule
// without one gets an explicit EmptyRuleAction.
func appendAction(dst []byte, a *broker.RuleAction) []byte {
	if a == nil {
		return append(dst, `<Action i:type="EmptyRuleAction"/>`...)
	}
	return appendSQLBody(dst, `<Action i:type="SqlRuleAction">`, a.SQLExpression, a.Parameters, "</Action>")
}

func appendKeyValues(dst []byte, list string, props []broker.Property) []byte {
	dst = appendOpen(dst, list)
	for _, p := range props {
		dst = append(dst, "<KeyValueOfstringanyType><Key>"...)
		dst = appendEscaped(dst, p.Name, false)
		dst = append(dst, "</Key>"...)
		dst = appendTypedValue(dst, p)
		dst = append(dst, "</KeyValueOfstringanyType>"...)
	}
	return appendClose(dst, list)
}

// appendTypedValue writes <Value i:type="d6p1:T" xmlns:d6p1="…XMLSchema">v</Value>: T is the type
// the value was declared with (p.Type), written in the namespace it came in; without one, the
// type .NET gives a value of p.Value's Go type (an integer beyond 32 bits is a long).
func appendTypedValue(dst []byte, p broker.Property) []byte {
	typ, ns := valueTypeName(p)
	dst = append(dst, `<Value i:type="d6p1:`...)
	dst = append(dst, typ...)
	dst = append(dst, `" xmlns:d6p1="`...)
	dst = append(dst, ns...)
	dst = append(dst, `">`...)
	switch v := p.Value.(type) {
	case string:
		dst = appendEscaped(dst, v, false)
	case int64:
		dst = strconv.AppendInt(dst, v, 10)
	case int:
		dst = strconv.AppendInt(dst, int64(v), 10)
	case int32:
		dst = strconv.AppendInt(dst, int64(v), 10)
	case float64:
		if typ == "decimal" { // xs:decimal has no exponent
			dst = strconv.AppendFloat(dst, v, 'f', -1, 64)
		} else {
			dst = appendXSDDouble(dst, v)
		}
	case float32:
		dst = appendXSDDouble(dst, float64(v))
	case bool:
		dst = strconv.AppendBool(dst, v)
	case time.Time:
		dst = appendTime(dst, v)
	case time.Duration:
		if v == -broker.Infinite { // appendDuration would spell out the magnitude
			dst = append(dst, "-"+infiniteText...)
		} else {
			dst = appendDuration(dst, v)
		}
	case nil:
	default:
		dst = appendEscaped(dst, fmt.Sprint(v), false)
	}
	return append(dst, "</Value>"...)
}

// valueTypeName returns the local name and namespace of the xsi:type p is written with.
func valueTypeName(p broker.Property) (string, string) {
	if p.Type != "" && typeMatches(p.Type, p.Value) {
		if local, ok := strings.CutPrefix(p.Type, "ser:"); ok {
			return local, nsSerialization
		}
		return p.Type, nsXSD
	}
	switch v := p.Value.(type) {
	case int64:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return "long", nsXSD
		}
		return "int", nsXSD
	case int:
		return valueTypeName(broker.Property{Value: int64(v)})
	case int32:
		return "int", nsXSD
	case float64, float32:
		return "double", nsXSD
	case bool:
		return "boolean", nsXSD
	case time.Time:
		return "dateTime", nsXSD
	case time.Duration:
		return "duration", nsXSD
	}
	return "string", nsXSD
}

// typeMatches reports whether a declared type that the decoder gives can hold v: the store
// checks this when it keeps a rule, so it fails only for a rule built by hand.
func typeMatches(typ string, v any) bool {
	kind, ok := xsdValueKinds[typ]
	if local, ser := strings.CutPrefix(typ, "ser:"); ser {
		kind, ok = serValueKinds[local]
	}
	if !ok {
		return false
	}
	switch v.(type) {
	case string:
		return kind == valueString || kind == valueGUID
	case int64:
		return kind == valueInt
	case float64:
		return kind == valueDouble
	case bool:
		return kind == valueBool
	case time.Time:
		return kind == valueDateTime
	case time.Duration:
		return kind == valueDuration
	}
	return false
}

// appendXSDDouble writes v as xs:double: shortest round-trip digits in .NET's "R" style (1.5,
// 1E+21, 1E-07), and INF, -INF, NaN for the values the decoder never produces.
func appendXSDDouble(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case math.IsInf(v, 1):
		return append(dst, "INF"...)
	case math.IsInf(v, -1):
		return append(dst, "-INF"...)
	}
	return strconv.AppendFloat(dst, v, 'G', -1, 64)
}
