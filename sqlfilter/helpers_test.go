package sqlfilter

import (
	"maps"
	"testing"
	"time"
)

var enqueued = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// sample is the message most tests run against.
func sample() *MapMessage {
	return &MapMessage{
		Sys: map[string]any{
			"MessageId":       "m-1",
			"Label":           "order-created",
			"To":              "eu-orders",
			"ContentType":     "application/json",
			"SequenceNumber":  int64(42),
			"EnqueuedTimeUtc": enqueued,
			"TimeToLive":      90 * time.Second,
			"DeliveryCount":   int32(1),
		},
		Usr: map[string]any{
			"region":   "eu",
			"Amount":   int64(150),
			"price":    9.5,
			"t":        true,
			"f":        false,
			"nothing":  nil,
			"name":     "Zoë",
			"when":     enqueued.Add(time.Hour),
			"my prop":  "spaced",
			"a]b":      int64(1),
			`say "hi"`: int64(2),
			"count":    int32(3),
			"big":      int64(1<<53 + 1),
			"nan":      nanValue(),
			"bytes":    []byte("x"),
			"pct":      "100%",
			"ABC":      "upper",
		},
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func clone(m *MapMessage) *MapMessage {
	return &MapMessage{Sys: maps.Clone(m.Sys), Usr: maps.Clone(m.Usr)}
}

// triState evaluates a predicate to "T", "F", "U" (unknown) or "E" (evaluation error),
// telling unknown from FALSE by also matching (expr) IS NULL.
func triState(t *testing.T, expr string, m Message) string {
	t.Helper()
	f, err := ParseFilter(expr, nil)
	if err != nil {
		t.Fatalf("ParseFilter(%q): %v", expr, err)
	}
	ok, err := f.Match(m)
	if err != nil {
		return "E"
	}
	if ok {
		return "T"
	}
	isNull, err := ParseFilter("("+expr+") IS NULL", nil)
	if err != nil {
		t.Fatalf("ParseFilter(%q IS NULL): %v", expr, err)
	}
	if u, _ := isNull.Match(m); u {
		return "U"
	}
	return "F"
}

// valueOfExpr evaluates a value expression through an action.
func valueOfExpr(t *testing.T, expr string, params map[string]any) (any, error) {
	t.Helper()
	a, err := ParseAction("SET [result] = "+expr, params)
	if err != nil {
		return nil, err
	}
	m := clone(sample())
	if err := a.Apply(m); err != nil {
		return nil, err
	}
	return m.Usr["result"], nil
}
