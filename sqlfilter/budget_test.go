package sqlfilter

import (
	"errors"
	"strings"
	"testing"
)

func TestParameterLengthLimit(t *testing.T) {
	long := strings.Repeat("_", MaxParameterLength+1)
	tests := []struct {
		expr   string
		params map[string]any
		pos    int
	}{
		{"s LIKE @p", map[string]any{"p": long}, 8},
		{"s = @P", map[string]any{"@p": long}, 5},
		{"s = 'x'", map[string]any{"unused": long}, 1}, // an unused parameter is stored too
	}
	for _, tt := range tests {
		_, err := ParseFilter(tt.expr, tt.params)
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, ErrTooLong) || pe.Pos != tt.pos ||
			!strings.Contains(pe.Msg, "1025 characters long; the limit is 1024") {
			t.Errorf("ParseFilter(%q) = %v; want ErrTooLong at %d", tt.expr, err, tt.pos)
		}
		if _, err := ParseAction("SET x = 1", tt.params); !errors.Is(err, ErrTooLong) {
			t.Errorf("ParseAction with a long parameter = %v; want ErrTooLong", err)
		}
	}
	ok := strings.Repeat("ü", MaxParameterLength)
	if _, err := ParseFilter("s LIKE @p", map[string]any{"p": ok}); err != nil {
		t.Errorf("a parameter of %d characters: %v", MaxParameterLength, err)
	}
}

func TestPatternLengthLimit(t *testing.T) {
	half := strings.Repeat("_", 600)
	// Folded at parse time: refused at rule creation.
	_, err := ParseFilter("s LIKE @p + @p", map[string]any{"p": half})
	if pe := (*ParseError)(nil); !errors.As(err, &pe) || pe.Pos != 8 || !strings.Contains(pe.Msg, "LIKE pattern is 1200 characters long") {
		t.Errorf("ParseFilter(s LIKE @p + @p) = %v; want the pattern limit at 8", err)
	}
	// Read from the message: an evaluation error, so the copy dead-letters.
	f, err := ParseFilter("s LIKE user.pat", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &MapMessage{Usr: map[string]any{"s": "abc", "pat": strings.Repeat("%", MaxPatternLength+1)}}
	ok, err := f.Match(m)
	var ee *EvalError
	if ok || !errors.As(err, &ee) || !strings.Contains(ee.Msg, "LIKE pattern is 1025 characters long") {
		t.Errorf("Match with a long pattern property = %v, %v; want an evaluation error", ok, err)
	}
	m.Usr["pat"] = strings.Repeat("%", MaxPatternLength)
	if ok, err := f.Match(m); !ok || err != nil {
		t.Errorf("Match with a pattern property at the limit = %v, %v; want true", ok, err)
	}
}

// TestBudget runs filters whose work depends on the message past a budget: each stops with
// ErrBudgetExceeded, after at most the budget plus one step of work, instead of finishing.
func TestBudget(t *testing.T) {
	long := strings.Repeat("a", 64*1024)
	params := map[string]any{"p": "%" + strings.Repeat("a_", 500) + "c%"}
	m := &MapMessage{Usr: map[string]any{"s": long, "pat": params["p"], "short": long[:16*1024]}}
	tests := []struct {
		expr string
		need int64 // about what it costs
	}{
		{"s LIKE @p", 64 * 1024 * 16},
		{"s LIKE user.pat", 64 * 1024 * 16},
		{"s LIKE @p OR s LIKE @p OR s LIKE @p", 3 * 64 * 1024 * 16},
		{"short + short + short + short = 'x'", 9 * 16 * 1024},
		{"s = s", 64 * 1024},
	}
	for _, tt := range tests {
		f, err := ParseFilter(tt.expr, params)
		if err != nil {
			t.Fatalf("ParseFilter(%q): %v", tt.expr, err)
		}
		b := NewBudget(1 << 40)
		if _, err := f.MatchWithin(m, b); err != nil {
			t.Fatalf("%q with a huge budget: %v", tt.expr, err)
		}
		used := b.Used()
		if used < tt.need/2 || used > 2*tt.need {
			t.Errorf("%q cost %d; want about %d", tt.expr, used, tt.need)
		}
		b = NewBudget(used - 1)
		ok, err := f.MatchWithin(m, b)
		var ee *EvalError
		if ok || !errors.As(err, &ee) || !errors.Is(err, ErrBudgetExceeded) {
			t.Errorf("%q with a budget of %d (it needs %d) = %v, %v; want ErrBudgetExceeded", tt.expr, used-1, used, ok, err)
		}
		if b.Used() > used {
			t.Errorf("%q with a budget of %d did %d work; want it to stop", tt.expr, used-1, b.Used())
		}
	}
}

// TestBudgetSharedByRules: one budget spans the filters and actions run on one message, so
// many rules cannot each spend a full budget.
func TestBudgetSharedByRules(t *testing.T) {
	long := strings.Repeat("a", 32*1024)
	f, err := ParseFilter("s LIKE @p", map[string]any{"p": "%" + strings.Repeat("a_", 500) + "c%"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAction("SET x = s + s", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &MapMessage{Usr: map[string]any{"s": long}}
	b := NewBudget(DefaultBudget)
	var err2 error
	runs := 0
	for err2 == nil && runs < 100 {
		runs++
		if _, err2 = f.MatchWithin(m, b); err2 == nil {
			err2 = a.ApplyWithin(clone(m), b)
		}
	}
	if !errors.Is(err2, ErrBudgetExceeded) || runs > 10 {
		t.Errorf("after %d rules: %v; want ErrBudgetExceeded within 10", runs, err2)
	}
	b.Reset()
	if _, err := f.MatchWithin(m, b); err != nil {
		t.Errorf("after Reset: %v", err)
	}
}
