package atom

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sbgate/sbgate/store"
)

// AppendRuleEntry appends the Atom entry of one rule. Content: RuleDescription with xmlns and xmlns:i as for descriptions,
// children in order Filter, Action, CreatedAt, Name (protocol.md §4.8). Filter is ALWAYS written with i:type:
// SqlFilter/TrueFilter/FalseFilter as <SqlExpression>…</SqlExpression><CompatibilityLevel>20</CompatibilityLevel> plus
// <Parameters> when there are any; CorrelationFilter with only the set fields in the documented order plus <Properties>.
// Action ALWAYS written: <Action i:type="EmptyRuleAction"/> or SqlRuleAction with SqlExpression, CompatibilityLevel 20, Parameters.
// Typed values written as <KeyValueOfstringanyType><Key>…</Key><Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">…</Value></KeyValueOfstringanyType>
// using xsd types string, int (for int64 — JS accepts only int|double|string|boolean|dateTime), double, boolean, dateTime
// (ISO 8601 UTC), duration. No <author> for rule entries (info.Author is empty then anyway).
//
// Details beyond the above:
//   - TrueFilter and FalseFilter are written with "1=1" and "1=0" whatever r.Filter holds; a
//     filter without Kind is a TrueFilter, as store.TrueRule builds it.
//   - <Properties> is written even when empty (every client reads an empty list as none), and a
//     SqlRuleAction's <Parameters> only when there are any, as for filters.
//   - The prefix is exactly "d6p1" and the type attribute exactly "i:type": the Go SDK compares
//     the whole attribute value with "d6p1:int" etc., and the JS SDK reads the attribute named
//     "i:type" and drops its first five characters.
//   - Only .NET and Python read duration back; the Go and JS SDKs fail on it, as they would on
//     the service's answer for the same rule.
//   - A value of another Go type (store.Property documents the five above plus time.Duration) is
//     written as a string of its fmt.Sprint form, so that the document stays valid.
//
// It cannot fail.
func AppendRuleEntry(dst []byte, info EntryInfo, r *store.Rule) []byte {
	info.Author = "" // the service writes <author> for queues and topics only
	dst = appendEntryOpen(dst, info)
	dst = append(dst, "<"+ruleDescriptionName+descAttrs...)
	dst = appendFilter(dst, &r.Filter)
	dst = appendAction(dst, r.Action)
	dst = appendTimeElem(dst, "CreatedAt", r.CreatedAt)
	dst = appendTextElem(dst, "Name", r.Name)
	return append(dst, "</"+ruleDescriptionName+"></content></entry>"...)
}

func appendFilter(dst []byte, f *store.RuleFilter) []byte {
	switch f.Kind {
	case store.FilterCorrelation:
		return appendCorrelationFilter(dst, f.Correlation)
	case store.FilterFalse:
		return appendSQLBody(dst, `<Filter i:type="FalseFilter">`, "1=0", f.Parameters, "</Filter>")
	case store.FilterTrue, "":
		return appendSQLBody(dst, `<Filter i:type="TrueFilter">`, "1=1", f.Parameters, "</Filter>")
	default:
		return appendSQLBody(dst, `<Filter i:type="SqlFilter">`, f.SQLExpression, f.Parameters, "</Filter>")
	}
}

// appendSQLBody writes a SQL filter or action: open tag, expression, compatibility level 20 (the
// Go SDK and the service's own answers carry it; JS tells SQL filters by SqlExpression), and the
// parameters when there are any.
func appendSQLBody(dst []byte, open, expr string, params []store.Property, close string) []byte {
	dst = append(dst, open...)
	dst = appendTextElem(dst, "SqlExpression", expr)
	dst = append(dst, "<CompatibilityLevel>20</CompatibilityLevel>"...)
	if len(params) > 0 {
		dst = appendKeyValues(dst, "Parameters", params)
	}
	return append(dst, close...)
}

// appendCorrelationFilter writes the set fields in the order of protocol.md §4.8.
func appendCorrelationFilter(dst []byte, c *store.CorrelationFilter) []byte {
	if c == nil {
		c = &store.CorrelationFilter{}
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
func appendAction(dst []byte, a *store.RuleAction) []byte {
	if a == nil {
		return append(dst, `<Action i:type="EmptyRuleAction"/>`...)
	}
	return appendSQLBody(dst, `<Action i:type="SqlRuleAction">`, a.SQLExpression, a.Parameters, "</Action>")
}

func appendKeyValues(dst []byte, list string, props []store.Property) []byte {
	dst = appendOpen(dst, list)
	for _, p := range props {
		dst = append(dst, "<KeyValueOfstringanyType><Key>"...)
		dst = appendEscaped(dst, p.Name, false)
		dst = append(dst, "</Key>"...)
		dst = appendTypedValue(dst, p.Value)
		dst = append(dst, "</KeyValueOfstringanyType>"...)
	}
	return appendClose(dst, list)
}

// appendTypedValue writes <Value i:type="d6p1:T" xmlns:d6p1="…XMLSchema">v</Value>.
func appendTypedValue(dst []byte, v any) []byte {
	const mid = `" xmlns:d6p1="` + nsXSD + `">`
	dst = append(dst, `<Value i:type="d6p1:`...)
	switch v := v.(type) {
	case string:
		dst = append(dst, "string"+mid...)
		dst = appendEscaped(dst, v, false)
	case int64:
		dst = append(dst, "int"+mid...)
		dst = strconv.AppendInt(dst, v, 10)
	case int:
		dst = append(dst, "int"+mid...)
		dst = strconv.AppendInt(dst, int64(v), 10)
	case int32:
		dst = append(dst, "int"+mid...)
		dst = strconv.AppendInt(dst, int64(v), 10)
	case float64:
		dst = append(dst, "double"+mid...)
		dst = appendXSDDouble(dst, v)
	case float32:
		dst = append(dst, "double"+mid...)
		dst = appendXSDDouble(dst, float64(v))
	case bool:
		dst = append(dst, "boolean"+mid...)
		dst = strconv.AppendBool(dst, v)
	case time.Time:
		dst = append(dst, "dateTime"+mid...)
		dst = appendTime(dst, v)
	case time.Duration:
		dst = append(dst, "duration"+mid...)
		if v == -store.Infinite { // appendDuration would spell out the magnitude
			dst = append(dst, "-"+infiniteText...)
		} else {
			dst = appendDuration(dst, v)
		}
	case nil:
		dst = append(dst, "string"+mid...)
	default:
		dst = append(dst, "string"+mid...)
		dst = appendEscaped(dst, fmt.Sprint(v), false)
	}
	return append(dst, "</Value>"...)
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
