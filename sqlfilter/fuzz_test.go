package sqlfilter

import (
	"errors"
	"testing"
	"time"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"",
	"1=1",
	"user.region = 'eu' AND sys.Label LIKE 'order%' AND amount > 100",
	"a OR b AND NOT c",
	"-2 * 3 + 4 = -2",
	"region NOT IN ('us', NULL) OR EXISTS([my prop])",
	"pct LIKE '100!%' ESCAPE '!' AND name LIKE 'Zo_'",
	`"say ""hi""" = 2 AND [a]]b] = 1 AND N'x' = 'x'`,
	"property('sys.' + region) IS NULL OR p(x) = newid()",
	"sys.EnqueuedTimeUtc + sys.TimeToLive > when",
	"@p = 1.5E5 AND .5 < 1e-3",
	"((((a = 1))))",
	"-9223372036854775808 < 9223372036854775807",
	"'unterminated",
	"a = 1 AND",
	"SET a = 1; REMOVE b, SET sys.Label = 'x' + sys.Label",
}

// fuzzParams binds the one parameter the seeds use, so that successful parses are common.
var fuzzParams = map[string]any{"p": int64(1)}

func checkParseError(t *testing.T, input string, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ParseError", err, err)
	}
	n := utf8.RuneCountInString(input)
	if n > MaxExpressionLength {
		if !errors.Is(err, ErrTooLong) {
			t.Fatalf("%d characters: error %v; want ErrTooLong", n, err)
		}
		return
	}
	if pe.Pos < 1 || pe.Pos > n+1 {
		t.Fatalf("error position %d outside 1…%d: %v", pe.Pos, n+1, err)
	}
	_ = pe.Error()
}

func checkEvalError(t *testing.T, err error) {
	t.Helper()
	var ee *EvalError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("evaluation error %v (%T) is not an *EvalError", err, err)
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		start := time.Now()
		flt, err := ParseFilter(expr, fuzzParams)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("ParseFilter took %v", d)
		}
		if err != nil {
			checkParseError(t, expr, err)
			return
		}
		if flt.String() != expr {
			t.Fatalf("String() = %q; want %q", flt.String(), expr)
		}
		// A parsed filter written back as text parses to the same tree.
		if text, ok := source(flt.root); ok {
			again, err := ParseFilter(text, nil)
			switch {
			case errors.Is(err, ErrTooLong) || errors.Is(err, ErrTooDeep) || errors.Is(err, ErrTooManyTokens):
				// The parentheses made it longer or deeper than the limits allow.
			case err != nil:
				t.Fatalf("ParseFilter(%q) (%q written back) = %v", text, expr, err)
			case format(again.root) != format(flt.root):
				t.Fatalf("%q written back as %q parses as\n%s\nwant\n%s", expr, text, format(again.root), format(flt.root))
			}
		}
		for _, m := range []Message{sample(), &MapMessage{}} {
			start = time.Now()
			_, err := flt.Match(m)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("Match took %v", d)
			}
			checkEvalError(t, err)
		}
	})
}

func FuzzParseAction(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
		f.Add("SET x = " + s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		start := time.Now()
		a, err := ParseAction(expr, fuzzParams)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("ParseAction took %v", d)
		}
		if err != nil {
			checkParseError(t, expr, err)
			return
		}
		if a.String() != expr {
			t.Fatalf("String() = %q; want %q", a.String(), expr)
		}
		if text, ok := actionSource(a); ok {
			again, err := ParseAction(text, nil)
			switch {
			case errors.Is(err, ErrTooLong) || errors.Is(err, ErrTooDeep) || errors.Is(err, ErrTooManyTokens):
			case err != nil:
				t.Fatalf("ParseAction(%q) (%q written back) = %v", text, expr, err)
			default:
				want, _ := actionSource(a)
				if got, _ := actionSource(again); got != want {
					t.Fatalf("%q written back as %q reads back as %q", expr, want, got)
				}
			}
		}
		for _, m := range []*MapMessage{clone(sample()), {}} {
			start = time.Now()
			checkEvalError(t, a.Apply(m))
			if d := time.Since(start); d > time.Second {
				t.Fatalf("Apply took %v", d)
			}
		}
	})
}

// TestSourceRoundTrip makes sure the fuzzers' write-back check has teeth: every seed that
// parses can be written back, and reads back as the same tree.
func TestSourceRoundTrip(t *testing.T) {
	n := 0
	for _, expr := range append(fuzzSeeds, "[a]]b] = -1.5 AND p('') IS NULL AND x LIKE 'a!%' ESCAPE '!' AND -9223372036854775808 = y") {
		f, err := ParseFilter(expr, fuzzParams)
		if err != nil {
			continue
		}
		text, ok := source(f.root)
		if !ok {
			t.Errorf("source(%q) found no literal", expr)
			continue
		}
		again, err := ParseFilter(text, nil)
		if err != nil || format(again.root) != format(f.root) {
			t.Errorf("%q written back as %q: %v", expr, text, err)
		}
		n++
	}
	if n < 10 {
		t.Errorf("only %d seeds parse", n)
	}
}
