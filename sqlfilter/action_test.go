package sqlfilter

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	tests := []struct {
		action  string
		params  map[string]any
		wantUsr map[string]any // properties expected afterwards (nil value: present and null)
		gone    []string       // user properties expected to be absent
		wantSys map[string]any
	}{
		{action: "SET importance = 'critical'", wantUsr: map[string]any{"importance": "critical"}},
		{action: "set Region = 'us'", wantUsr: map[string]any{"Region": "us"}, gone: []string{"region"}},
		{action: "SET total = amount * price", wantUsr: map[string]any{"total": 1425.0}},
		{action: "SET a = 1; SET b = a + 1", wantUsr: map[string]any{"a": int64(1), "b": int64(2)}},
		{action: "SET a = 1, SET b = a * 10", wantUsr: map[string]any{"a": int64(1), "b": int64(10)}},
		{action: "SET a = 1;, SET b = 2;", wantUsr: map[string]any{"a": int64(1), "b": int64(2)}},
		// The separator is optional, as the Go SDK's own tests write actions.
		{action: "SET a = 1 SET b = a + 1 REMOVE a", wantUsr: map[string]any{"b": int64(2)}, gone: []string{"a"}},
		{action: "SET sys.MessageId = 'x' SET sys.MessageId = sys.MessageId + 'y'", wantSys: map[string]any{"MessageId": "xy"}},
		{action: "SET amount = amount + 1; SET amount = amount * 2", wantUsr: map[string]any{"amount": int64(302)}},
		{action: "SET price = 10", wantUsr: map[string]any{"price": 10.0}}, // implicit int → double
		{action: "SET region = 10", wantUsr: map[string]any{"region": int64(10)}},
		{action: "SET a = missing", wantUsr: map[string]any{"a": nil}},
		{action: "SET a = missing + 1", wantUsr: map[string]any{"a": nil}},
		{action: "SET big = amount > 100", wantUsr: map[string]any{"big": true}},
		{action: "SET a = @p", params: map[string]any{"p": "x"}, wantUsr: map[string]any{"a": "x"}},
		{action: "SET [my prop] = 'changed'", wantUsr: map[string]any{"my prop": "changed"}},
		{action: "SET user.\"q\"\"q\" = 1", wantUsr: map[string]any{`q"q`: int64(1)}},
		{action: "SET label = sys.Label", wantUsr: map[string]any{"label": "order-created"}},
		{action: "REMOVE region", gone: []string{"region"}},
		{action: "REMOVE REGION", gone: []string{"region"}},
		{action: "REMOVE missing", gone: []string{"missing"}},
		{action: "REMOVE region; SET r = region", wantUsr: map[string]any{"r": nil}, gone: []string{"region"}},
		{action: "SET sys.Label = 'routed'", wantSys: map[string]any{"Label": "routed"}},
		{action: "SET sys.label = sys.Label + '-x'", wantSys: map[string]any{"Label": "order-created-x"}},
		{action: "SET sys.CorrelationId = region", wantSys: map[string]any{"CorrelationId": "eu"}},
		{action: "REMOVE sys.To", wantSys: map[string]any{"To": nil}},
		{action: "SET sys.To = 'a'; SET where = sys.To", wantUsr: map[string]any{"where": "a"}, wantSys: map[string]any{"To": "a"}},
	}
	for _, tt := range tests {
		a, err := ParseAction(tt.action, tt.params)
		if err != nil {
			t.Errorf("ParseAction(%q): %v", tt.action, err)
			continue
		}
		if a.String() != tt.action {
			t.Errorf("String() = %q; want %q", a.String(), tt.action)
		}
		m := clone(sample())
		if err := a.Apply(m); err != nil {
			t.Errorf("Apply(%q): %v", tt.action, err)
			continue
		}
		for k, want := range tt.wantUsr {
			got, ok := m.Usr[k]
			if !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("Apply(%q): user %s = %#v, %v; want %#v", tt.action, k, got, ok, want)
			}
		}
		for _, k := range tt.gone {
			if _, ok := m.Usr[k]; ok {
				t.Errorf("Apply(%q): user %s still present", tt.action, k)
			}
		}
		for k, want := range tt.wantSys {
			if got := m.Sys[k]; !reflect.DeepEqual(got, want) {
				t.Errorf("Apply(%q): sys %s = %#v; want %#v", tt.action, k, got, want)
			}
		}
	}
}

func TestApplyErrors(t *testing.T) {
	tests := []struct {
		action string
		target error // wrapped by the *EvalError, or nil
		msg    string
		pos    int
	}{
		{"SET a = sys.Nope", nil, "system property Nope does not exist", 9},
		{"SET a = region + 1", nil, "operator + cannot be applied to string and integer", 16},
		{"SET sys.SequenceNumber = 1", ErrReadOnlySystemProperty, "SET sys.SequenceNumber", 5},
		{"SET sys.Nope = 1", ErrUnknownSystemProperty, "SET sys.Nope", 5},
		{"REMOVE sys.EnqueuedTimeUtc", ErrReadOnlySystemProperty, "REMOVE sys.EnqueuedTimeUtc", 8},
		{"REMOVE sys.Nope", ErrUnknownSystemProperty, "REMOVE sys.Nope", 8},
	}
	for _, tt := range tests {
		a, err := ParseAction(tt.action, nil)
		if err != nil {
			t.Errorf("ParseAction(%q): %v", tt.action, err)
			continue
		}
		err = a.Apply(clone(sample()))
		var ee *EvalError
		if !errors.As(err, &ee) || !strings.Contains(ee.Msg, tt.msg) || ee.Pos != tt.pos {
			t.Errorf("Apply(%q) = %v; want an *EvalError %q at %d", tt.action, err, tt.msg, tt.pos)
			continue
		}
		if tt.target != nil && !errors.Is(err, tt.target) {
			t.Errorf("Apply(%q) = %v; want it to wrap %v", tt.action, err, tt.target)
		}
	}

	// Statements before the failing one have been applied: the caller discards the copy.
	a, err := ParseAction("SET done = 1; SET x = sys.Nope; SET never = 1", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := clone(sample())
	if err := a.Apply(m); err == nil {
		t.Fatal("Apply succeeded; want an error")
	}
	if _, ok := m.Usr["done"]; !ok {
		t.Error("first statement not applied")
	}
	if _, ok := m.Usr["never"]; ok {
		t.Error("statement after the failure applied")
	}
}

func TestParseActionErrors(t *testing.T) {
	tests := []struct {
		action string
		pos    int
		msg    string
		err    error
	}{
		{"", 1, "expected SET or REMOVE", nil},
		{";", 1, "expected SET or REMOVE", nil},
		{"DELETE a", 1, "expected SET or REMOVE", nil},
		{"SET = 1", 5, "expected a property name", nil},
		{"SET a 1", 7, "expected = after the SET property", nil},
		{"SET a =", 8, "expected an expression", nil},
		{"SET a = 1 b = 2", 11, "expected ; or , between statements", nil},
		{"SET a = 1;; REMOVE", 19, "expected a property name", nil},
		{"REMOVE 1", 8, "expected a property name", nil},
		{"SET sys = 1", 9, "", nil}, // a user property named sys
		{"SET foo.bar = 1", 5, `unknown scope "foo"`, nil},
		{"SET a = @p", 9, "parameter @p is not bound", nil},
		{"SET a = 1 / 0", 11, "integer division by zero", nil},
		{"SET a = 'x", 9, "unterminated string constant", nil},
		{"SET p(a) = 1", 6, "expected = after the SET property", nil},
		{strings.Repeat("SET a = 1; ", 32), 0, "", nil},
		{strings.Repeat("SET a = 1; ", 33), 353, "more than 32 statements", ErrTooManyStatements},
		{"SET a = '" + strings.Repeat("x", 1020) + "'", 1025, "limit is 1024", ErrTooLong},
		{"SET a = " + strings.Repeat("(", 65) + "1" + strings.Repeat(")", 65), 73, "nested more than 64", ErrTooDeep},
	}
	for _, tt := range tests {
		_, err := ParseAction(tt.action, nil)
		if tt.msg == "" {
			if err != nil {
				t.Errorf("ParseAction(%q) = %v; want success", tt.action, err)
			}
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Pos != tt.pos || !strings.Contains(pe.Msg, tt.msg) {
			t.Errorf("ParseAction(%q) = %v; want %q at %d", tt.action, err, tt.msg, tt.pos)
			continue
		}
		if tt.err != nil && !errors.Is(err, tt.err) {
			t.Errorf("ParseAction(%q) = %v; want it to wrap %v", tt.action, err, tt.err)
		}
	}
}
