package sqlfilter

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		expr string
		want bool
	}{
		// Comparisons and their operators.
		{"region = 'eu'", true},
		{"region = 'EU'", false}, // ordinal, case-sensitive
		{"region <> 'us'", true},
		{"region != 'us'", true},
		{"amount > 100", true},
		{"amount >= 150", true},
		{"amount < 150", false},
		{"amount <= 150", true},
		{"'b' > 'a'", true},
		{"name > 'Zo'", true},

		// Scopes, defaults and case-insensitive names.
		{"user.region = 'eu'", true},
		{"USER.REGION = 'eu'", true},
		{"sys.Label = 'order-created'", true},
		{"SYS.label = 'order-created'", true},
		{"sys.SequenceNumber = 42", true},
		{"sys.DeliveryCount = 1", true},
		{"abc = 'upper'", true},
		{"[ABC] = 'upper'", true},

		// Delimited and quoted identifiers, also with a scope.
		{"[my prop] = 'spaced'", true},
		{"user.[my prop] = 'spaced'", true},
		{`"my prop" = 'spaced'`, true},
		{`user."my prop" = 'spaced'`, true},
		{"[a]]b] = 1", true},
		{`"say ""hi""" = 2`, true},
		{"sys.[Label] = 'order-created'", true},
		{"[sys].[Label] = 'order-created'", true},
		{"[not] IS NULL", true}, // reserved word as a delimited name

		// Logic and precedence.
		{"region = 'eu' AND amount > 100", true},
		{"region = 'us' OR amount > 100", true},
		{"region = 'us' OR region = 'eu' AND amount > 1000", false},
		{"(region = 'us' OR region = 'eu') AND amount > 100", true},
		{"NOT region = 'us'", true},
		{"NOT NOT region = 'eu'", true},
		{"region = 'eu' AND NOT amount < 100", true},
		{"not (region = 'eu') or AMOUNT = 150", true},

		// Constants as predicates; TrueFilter and FalseFilter.
		{"TRUE", true},
		{"FALSE", false},
		{"1=1", true},
		{"1=0", false},
		{"true = TRUE", true},
		{"t", true},
		{"f", false},
		{"t AND NOT f", true},
		{"(t)", true},

		// Numbers.
		{"-2 * 3 + 4 = -2", true},
		{"2 + 3 * 4 = 14", true},
		{"(2 + 3) * 4 = 20", true},
		{"7 / 2 = 3", true},     // integer division
		{"7 / 2.0 = 3.5", true}, // promotion
		{"-7 % 3 = -1", true},   // C# remainder keeps the dividend's sign
		{"7.5 % 2 = 1.5", true},
		{"amount * price = 1425", true},
		{"amount = 150.0", true},
		{"1 = 1.0", true},
		{".5 = 0.5", true},
		{"2. = 2", true},
		{"1.5E2 = 150", true},
		{"1e-3 = 0.001", true},
		{"1E+3 = 1000", true},
		{"-9223372036854775808 < 0", true},
		{"9223372036854775807 > 0", true},
		{"- -1 = 1", true},
		{"+amount = 150", true},
		{"count = 3", true}, // int32 property
		{"big = 9007199254740993", true},
		{"1.0 / 0 > 1e308", true}, // IEEE infinity
		{"nan = nan", false},      // NaN equals nothing
		{"nan <> 1", true},

		// Strings.
		{"region + '-' + name = 'eu-Zoë'", true},
		{"'it''s' = 'it''s'", true},
		{"N'x' = 'x'", true},
		{"n'x' = 'x'", true},
		{"'' = ''", true},

		// Times and durations.
		{"when > sys.EnqueuedTimeUtc", true},
		{"sys.EnqueuedTimeUtc + sys.TimeToLive > sys.EnqueuedTimeUtc", true},
		{"when - sys.EnqueuedTimeUtc > sys.TimeToLive", true},

		// Incompatible types: FALSE, so NOT makes them TRUE.
		{"region = 1", false},
		{"region <> 1", false},
		{"NOT (region = 1)", true},
		{"t = 1", false},
		{"t > f", false}, // booleans are unordered
		{"t = TRUE", true},
		{"when = 'x'", false},

		// IS NULL and EXISTS.
		{"missing IS NULL", true},
		{"nothing IS NULL", true},
		{"region IS NULL", false},
		{"region IS NOT NULL", true},
		{"missing IS NOT NULL", false},
		{"sys.Nope IS NULL", true},          // not a system property: absent, no error
		{"sys.CorrelationId IS NULL", true}, // known but unset: null
		{"sys.Label IS NOT NULL", true},
		{"EXISTS(region)", true},
		{"EXISTS(nothing)", true}, // present with a null value
		{"EXISTS(missing)", false},
		{"EXISTS ( user.[my prop] )", true},
		{"EXISTS(sys.Label)", true},
		{"EXISTS(sys.CorrelationId)", false}, // unset
		{"EXISTS(sys.Nope)", false},
		{"NOT EXISTS(missing)", true},

		// IN.
		{"region IN ('us', 'eu')", true},
		{"region IN ('us')", false},
		{"region NOT IN ('us', 'ap')", true},
		{"amount IN (1, 150.0)", true},
		{"amount IN (100 + 50)", true},
		{"amount IN (price * 0, amount)", true},
		{"region IN ('eu', NULL)", true},
		{"sys.To IN ('Store5', 'eu-orders') OR region = 'x'", true},

		// LIKE.
		{"sys.Label LIKE 'order%'", true},
		{"sys.Label LIKE '%created'", true},
		{"sys.Label LIKE '%der-cr%'", true},
		{"sys.Label LIKE 'order'", false},
		{"sys.Label NOT LIKE 'x%'", true},
		{"name LIKE 'Zo_'", true},
		{"name LIKE 'Z_'", false},
		{"pct LIKE '100!%' ESCAPE '!'", true},
		{"pct LIKE '100\\%' ESCAPE '\\'", true},
		{"region LIKE 'e' + '%'", true},
		{"amount LIKE '1%'", false},    // not a string: FALSE
		{"amount NOT LIKE '1%'", true}, // …so NOT LIKE is TRUE

		// Functions and parameters-free dynamic property access.
		{"newid() <> newid()", true},
		{"newid() LIKE '________-____-____-____-____________'", true},
		{"property('region') = 'eu'", true},
		{"p('user.region') = 'eu'", true},
		{"p('sys.label') = 'order-created'", true},
		{"property('re' + 'gion') = 'eu'", true},
		{"property(sys.To) IS NULL", true},
		{"p(region) IS NULL", true},

		// Unknown never matches.
		{"missing = 1", false},
		{"missing <> 1", false},
		{"NOT missing = 1", false},
		{"missing + 1 = 2", false},
		{"-missing = 1", false},
		{"missing LIKE '%'", false},
		{"missing IN (1, 2)", false},
		{"missing NOT IN (1, 2)", false},
		{"nothing = NULL", false},
		{"NULL = NULL", false},
		{"(NULL = NULL) IS NULL", true},
		{"NULL IS NULL", true},

		// Short-circuit hides the error on the right.
		{"FALSE AND sys.Nope = 1", false},
		{"region = 'eu' OR sys.Nope = 1", true},
	}
	m := sample()
	for _, tt := range tests {
		f, err := ParseFilter(tt.expr, nil)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tt.expr, err)
			continue
		}
		got, err := f.Match(m)
		if err != nil {
			t.Errorf("Match(%q): %v", tt.expr, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Match(%q) = %v; want %v", tt.expr, got, tt.want)
		}
		if f.String() != tt.expr {
			t.Errorf("String() = %q; want %q", f.String(), tt.expr)
		}
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"a OR b AND c", "(user.a OR (user.b AND user.c))"},
		{"a AND b OR c", "((user.a AND user.b) OR user.c)"},
		{"NOT a = b", "(NOT (user.a = user.b))"},
		{"NOT a AND b", "((NOT user.a) AND user.b)"},
		{"NOT a OR NOT b AND c", "((NOT user.a) OR ((NOT user.b) AND user.c))"},
		{"-a * b + c = 1", "((((-user.a) * user.b) + user.c) = 1)"},
		{"a - b - c = 1", "(((user.a - user.b) - user.c) = 1)"},
		{"a / b * c = 1", "(((user.a / user.b) * user.c) = 1)"},
		{"a + b % c = 1", "((user.a + (user.b % user.c)) = 1)"},
		{"a + b = c * d", "((user.a + user.b) = (user.c * user.d))"},
		{"a + 1 IN (b, c - 1)", "((user.a + 1) IN (user.b, (user.c - 1)))"},
		{"a NOT LIKE b + '%'", "(user.a NOT LIKE (user.b + '%'))"},
		{"a LIKE 'x' ESCAPE e", "(user.a LIKE 'x' ESCAPE user.e)"},
		{"a + b IS NOT NULL", "((user.a + user.b) IS NOT NULL)"},
		{"(a OR b) AND c", "((user.a OR user.b) AND user.c)"},
		{"a = (1 + 2) * 3", "(user.a = 9)"}, // constants fold
		{"sys.label = user.LABEL", "(sys.Label = user.LABEL)"},
		{"p(x) = 1", "(property(user.x) = 1)"},
		{"a = -9223372036854775808", "(user.a = -9223372036854775808)"},
	}
	for _, tt := range tests {
		f, err := ParseFilter(tt.expr, nil)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tt.expr, err)
			continue
		}
		if got := format(f.root); got != tt.want {
			t.Errorf("ParseFilter(%q) = %s; want %s", tt.expr, got, tt.want)
		}
	}
}

func TestThreeValuedLogic(t *testing.T) {
	// t, f are boolean properties; u is missing (unknown).
	operand := map[string]string{"T": "t", "F": "f", "U": "u"}
	and := map[string]string{
		"TT": "T", "TF": "F", "TU": "U",
		"FT": "F", "FF": "F", "FU": "F",
		"UT": "U", "UF": "F", "UU": "U",
	}
	or := map[string]string{
		"TT": "T", "TF": "T", "TU": "T",
		"FT": "T", "FF": "F", "FU": "U",
		"UT": "T", "UF": "U", "UU": "U",
	}
	m := sample()
	for pair, want := range and {
		expr := operand[pair[:1]] + " AND " + operand[pair[1:]]
		if got := triState(t, expr, m); got != want {
			t.Errorf("%q = %s; want %s", expr, got, want)
		}
	}
	for pair, want := range or {
		expr := operand[pair[:1]] + " OR " + operand[pair[1:]]
		if got := triState(t, expr, m); got != want {
			t.Errorf("%q = %s; want %s", expr, got, want)
		}
	}
	for in, want := range map[string]string{"T": "F", "F": "T", "U": "U"} {
		expr := "NOT " + operand[in]
		if got := triState(t, expr, m); got != want {
			t.Errorf("%q = %s; want %s", expr, got, want)
		}
	}
}

func TestUnknownAndNull(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"u = 1", "U"},
		{"u <> 1", "U"},
		{"u + 1 = 1", "U"},
		{"u LIKE 'a%'", "U"},
		{"region LIKE u", "U"},
		{"region LIKE 'a' ESCAPE u", "U"},
		{"u IN (1)", "U"},
		{"u NOT IN (1)", "U"},
		// SQL-92: x IN (…, NULL) with no equal element is unknown, and so is NOT IN.
		{"region IN ('us', NULL)", "U"},
		{"region NOT IN ('us', NULL)", "U"},
		{"region NOT IN ('eu', NULL)", "F"},
		{"region IN ('us', nothing)", "U"},
		{"nothing = nothing", "U"},
		{"u IS NULL", "T"},
		{"EXISTS(u)", "F"},
		{"region = 1", "F"}, // incompatible types: FALSE, not unknown
		{"sys.Nope = 1", "E"},
		{"sys.CorrelationId = 'x'", "U"}, // known but unset reads as null
		{"(1 = 1) = u", "U"},
	}
	m := sample()
	for _, tt := range tests {
		if got := triState(t, tt.expr, m); got != tt.want {
			t.Errorf("%q = %s; want %s", tt.expr, got, tt.want)
		}
	}
}

func TestValues(t *testing.T) {
	tests := []struct {
		expr string
		want any
	}{
		{"-2 * 3 + 4", int64(-2)},
		{"1 + 2.5", 3.5},
		{"10 / 4", int64(2)},
		{"10 / 4.0", 2.5},
		{"10 % 4", int64(2)},
		{"amount + 1", int64(151)},
		{"amount * price", 1425.0},
		{"9223372036854775807 + 1", int64(math.MinInt64)}, // unchecked, like C#
		{"'a' + 'b'", "ab"},
		{"region + name", "euZoë"},
		{"TRUE", true},
		{"amount > 100", true},
		{"missing", nil},
		{"missing + 1", nil},
		{"NULL", nil},
		{"sys.EnqueuedTimeUtc + sys.TimeToLive", enqueued.Add(90 * time.Second)},
		{"sys.TimeToLive + sys.EnqueuedTimeUtc", enqueued.Add(90 * time.Second)},
		{"sys.EnqueuedTimeUtc - sys.TimeToLive", enqueued.Add(-90 * time.Second)},
		{"when - sys.EnqueuedTimeUtc", time.Hour},
		{"sys.TimeToLive + sys.TimeToLive", 3 * time.Minute},
		{"-sys.TimeToLive", -90 * time.Second},
		{"count", int64(3)},
		{"1e0", 1.0},
		{"1.0 / 0", math.Inf(1)},
		{"-1.0 / 0", math.Inf(-1)},
	}
	for _, tt := range tests {
		got, err := valueOfExpr(t, tt.expr, nil)
		if err != nil {
			t.Errorf("eval(%q): %v", tt.expr, err)
			continue
		}
		if gt, ok := got.(time.Time); ok {
			if wt, ok := tt.want.(time.Time); !ok || !gt.Equal(wt) {
				t.Errorf("eval(%q) = %v; want %v", tt.expr, got, tt.want)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("eval(%q) = %#v; want %#v", tt.expr, got, tt.want)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		expr string
		pos  int
		msg  string
	}{
		{"sys.Nope = 1", 1, "system property Nope does not exist"},
		{"region = 'eu' AND sys.Nope = 1", 19, "does not exist"},
		{"region + 1 = 2", 8, "operator + cannot be applied to string and integer"},
		{"amount / zero = 1", 8, "integer division by zero"},
		{"amount % zero = 1", 8, "integer division by zero"},
		{"-region = 1", 1, "unary - cannot be applied to string"},
		{"region", 1, "expected a boolean, got string"},
		{"region AND t", 1, "expected a boolean, got string"},
		{"NOT amount", 5, "expected a boolean, got integer"},
		{"odd IS NULL", 1, "unsupported type struct {}"},
		{"odd = 1", 1, "unsupported type struct {}"},
		{"bytes + bytes = bytes", 7, "operator + cannot be applied to binary and binary"},
		{"region LIKE pct ESCAPE region", 13, "ESCAPE must be one character"},
		{"region LIKE amount", 13, "LIKE pattern must be a string"},
		{"region LIKE bang ESCAPE '!'", 13, "ends with the escape character"},
		{"property(amount) = 1", 1, "property() needs a string name, got integer"},
		{"property('sys.Nope') = 1", 1, "does not exist"},
		{"p('sys.' + region) = 1", 1, "system property eu does not exist"},
		{"region IN (sys.Nope)", 12, "does not exist"},
		{"min / -1 = 1", 5, "integer overflow"},
		{"huge + huge = ''", 6, "longer than 65536 bytes"},
	}
	m := sample()
	m.Usr["zero"] = int64(0)
	m.Usr["bang"] = "a!"
	m.Usr["min"] = int64(math.MinInt64)
	m.Usr["huge"] = strings.Repeat("x", 40000)
	m.Usr["odd"] = struct{}{}
	for _, tt := range tests {
		f, err := ParseFilter(tt.expr, nil)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tt.expr, err)
			continue
		}
		ok, err := f.Match(m)
		var ee *EvalError
		if !errors.As(err, &ee) {
			t.Errorf("Match(%q) = %v, %v; want an *EvalError", tt.expr, ok, err)
			continue
		}
		if ok || ee.Pos != tt.pos || !strings.Contains(ee.Msg, tt.msg) {
			t.Errorf("Match(%q) = %v, %q at %d; want false, %q at %d", tt.expr, ok, ee.Msg, ee.Pos, tt.msg, tt.pos)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		expr string
		pos  int
		msg  string
	}{
		{"", 1, "expected an expression"},
		{"   ", 4, "expected an expression"},
		{"a = 1 AND", 10, "expected an expression"},
		{"a = 1 OR", 9, "expected an expression"},
		{"AND a = 1", 1, "expected an expression"},
		{"name = 'abc", 8, "unterminated string constant"},
		{"name = 'it''s", 8, "unterminated string constant"},
		{"[abc = 1", 1, "unterminated delimited identifier"},
		{`"abc = 1`, 1, "unterminated quoted identifier"},
		{"[] = 1", 1, "empty delimited identifier"},
		{"foo(1) = 1", 1, "unknown function foo()"},
		{"1 +", 4, "expected an expression"},
		{"1 + = 2", 5, "expected an expression"},
		{"a == 1", 4, "expected an expression"},
		{"a = 1 b", 7, "expected AND, OR or the end"},
		{"a = 'x' )", 9, "expected AND, OR or the end"},
		{"(a = 1", 7, "expected )"},
		{"a = 1 = 2", 7, "expected AND, OR or the end"},
		{"a IS 1", 6, "expected NULL after IS"},
		{"a IS NOT", 9, "expected NULL after IS"},
		{"a NOT = 1", 7, "expected IN or LIKE after NOT"},
		{"a IN 1", 6, "expected ( after IN"},
		{"a IN ()", 7, "expected an expression"},
		{"a IN (1, 2", 11, "expected , or )"},
		{"a IN (1,)", 9, "expected an expression"},
		{"a LIKE 1", 8, "LIKE pattern must be a string, got integer"},
		{"a LIKE 'x' ESCAPE 'ab'", 19, "ESCAPE must be one character, got 2"},
		{"a LIKE 'x' ESCAPE ''", 19, "ESCAPE must be one character, got 0"},
		{"a LIKE 'x' ESCAPE 1", 19, "ESCAPE must be a string"},
		{"a LIKE 'x!' ESCAPE '!'", 8, "ends with the escape character"},
		{"a LIKE", 7, "expected an expression"},
		{"9223372036854775808 = 1", 1, "integer constant out of range"},
		{"a - 9223372036854775808 = 1", 5, "integer constant out of range"},
		{"1e999 = 1", 1, "out of range"},
		{"1 = 1 + 'a'", 7, "operator + cannot be applied to integer and string"},
		{"1 / 0 = 1", 3, "integer division by zero"},
		{"1 % 0 = 1", 3, "integer division by zero"},
		{"-'a' = 1", 1, "unary - cannot be applied to string"},
		{"'a'", 1, "expected a predicate"},
		{"1 + 2", 1, "expected a predicate"},
		{"a + 1", 1, "expected a predicate"},
		{"NULL", 1, "expected a predicate, found NULL"},
		{"newid()", 1, "found newid()"},
		{"a = 1 AND 5", 11, "found an integer constant"},
		{"5 OR a = 1", 1, "expected a predicate"},
		{"NOT 'x'", 5, "expected a predicate"},
		{"(a = 1) + 1 = 2", 1, "operator + cannot be applied to a boolean"},
		{"-(a = 1) = 2", 2, "operator - cannot be applied to a boolean"},
		{"TRUE + 1 = 2", 1, "operator + cannot be applied to a boolean"},
		{"foo.bar = 1", 1, `unknown scope "foo"`},
		{"sys. = 1", 6, "expected a property name after sys."},
		{"sys.1 = 1", 4, "expected AND, OR or the end"}, // ".1" lexes as a number
		{"user.and = 1", 6, "AND is a reserved word; write [and]"},
		{"like = 1", 1, "expected an expression"},
		{"EXISTS(1)", 8, "expected a property name"},
		{"EXISTS a", 8, "expected ( after EXISTS"},
		{"EXISTS(a", 9, ") after the EXISTS property"},
		{"EXISTS(null)", 8, "NULL is a reserved word"},
		{"a = 1 #", 7, "unexpected character '#'"},
		{"a ! b", 3, "unexpected character '!'"},
		{"@ = 1", 1, "expected a parameter name after @"},
		{"1abc = 1", 1, "malformed number"},
		{"1.2.3 = 1", 1, "malformed number"},
		{"newid(1) = 'x'", 7, "expected ) after newid("},
		{"property(1) = 2", 10, "property() needs a string name, got integer"},
		{"property('a' = 2", 14, "expected )"},
		{"a = @p", 5, "parameter @p is not bound"},
		{"'ü' = b AND", 12, "expected an expression"}, // positions count characters
		{"a = '\xff'", 5, ""},                         // invalid UTF-8 inside a string is kept
		{"a = \xff", 5, "invalid UTF-8"},
	}
	for _, tt := range tests {
		_, err := ParseFilter(tt.expr, nil)
		if tt.msg == "" {
			if err != nil {
				t.Errorf("ParseFilter(%q) = %v; want success", tt.expr, err)
			}
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseFilter(%q) = %v; want a *ParseError", tt.expr, err)
			continue
		}
		if pe.Pos != tt.pos || !strings.Contains(pe.Msg, tt.msg) {
			t.Errorf("ParseFilter(%q) = %q at %d; want %q at %d", tt.expr, pe.Msg, pe.Pos, tt.msg, tt.pos)
		}
	}
}

func TestParseErrorText(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"a = 1 AND AND b = 2", `syntax error at position 11 near "AND": expected an expression`},
		{"a = 1 AND", `syntax error at position 10 (end of input): expected an expression`},
		{"a = 'abcdefghijklmnopqrstuvwxyz", `syntax error at position 5 near "'abcdefghijklmnopqrs…": unterminated string constant`},
	}
	for _, tt := range tests {
		_, err := ParseFilter(tt.expr, nil)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseFilter(%q) = %v; want %s", tt.expr, err, tt.want)
		}
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name string
		expr string
		err  error
		pos  int
	}{
		{"1024 characters", "a = '" + strings.Repeat("x", 1018) + "'", nil, 0},
		{"1024 non-ASCII characters", "a = '" + strings.Repeat("ü", 1018) + "'", nil, 0},
		{"too long", "a = '" + strings.Repeat("x", 1019) + "'", ErrTooLong, 1025},
		{"64 parentheses", strings.Repeat("(", 64) + "a = 1" + strings.Repeat(")", 64), nil, 0},
		{"65 parentheses", strings.Repeat("(", 65) + "a = 1" + strings.Repeat(")", 65), ErrTooDeep, 65},
		{"65 NOTs", strings.Repeat("NOT ", 65) + "a = 1", ErrTooDeep, 257},
		{"65 minus signs", strings.Repeat("-", 65) + "a = 1", ErrTooDeep, 65},
		{"parentheses in an IN list", "a IN (" + strings.Repeat("(", 64) + "1" + strings.Repeat(")", 65), ErrTooDeep, 70},
		{"nested property()", strings.Repeat("p(", 65) + "'a'" + strings.Repeat(")", 65) + " = 1", ErrTooDeep, 130},
	}
	for _, tt := range tests {
		_, err := ParseFilter(tt.expr, nil)
		if tt.err == nil {
			if err != nil {
				t.Errorf("%s: ParseFilter = %v; want success", tt.name, err)
			}
			continue
		}
		var pe *ParseError
		if !errors.Is(err, tt.err) || !errors.As(err, &pe) {
			t.Errorf("%s: ParseFilter = %v; want %v", tt.name, err, tt.err)
			continue
		}
		if tt.pos != 0 && pe.Pos != tt.pos {
			t.Errorf("%s: error at %d; want %d", tt.name, pe.Pos, tt.pos)
		}
	}

	// 1024 characters cannot hold more than 1024 tokens, so the token limit is a backstop
	// that only the lexer can be shown to enforce.
	if _, perr := lex(strings.Repeat("a ", MaxTokens) + "a"); perr == nil || !errors.Is(perr, ErrTooManyTokens) {
		t.Errorf("lex(1025 tokens) = %v; want ErrTooManyTokens", perr)
	}
}

func TestParameters(t *testing.T) {
	tests := []struct {
		expr   string
		params map[string]any
		want   bool
	}{
		{"region = @r", map[string]any{"@r": "eu"}, true},
		{"region = @r", map[string]any{"r": "eu"}, true},
		{"region = @R", map[string]any{"@r": "eu"}, true},
		{"region = @r", map[string]any{"@R": "us"}, false},
		{"amount = @n", map[string]any{"@n": 150}, true},         // Go int
		{"amount = @n", map[string]any{"@n": int32(150)}, true},  // .NET int
		{"amount = @n", map[string]any{"@n": 150.0}, true},       // JS sends doubles
		{"price = @n", map[string]any{"@n": float32(9.5)}, true}, // float32
		{"amount > @a AND amount < @b", map[string]any{"a": int64(100), "b": uint8(200)}, true},
		{"@flag", map[string]any{"flag": true}, true},
		{"@flag AND region = 'eu'", map[string]any{"flag": false}, false},
		{"when > @t", map[string]any{"t": enqueued}, true},
		{"sys.TimeToLive = @d", map[string]any{"d": 90 * time.Second}, true},
		{"region = @n", map[string]any{"n": nil}, false},
		{"@n IS NULL", map[string]any{"n": nil}, true},
		{"region IN (@a, @b)", map[string]any{"a": "us", "b": "eu"}, true},
		{"name LIKE @p", map[string]any{"p": "Z%"}, true},
		{"pct LIKE @p ESCAPE @e", map[string]any{"p": "100!%", "e": "!"}, true},
		{"region = @r", map[string]any{"r": "eu", "unused": []byte("ignored")}, true},
	}
	m := sample()
	for _, tt := range tests {
		f, err := ParseFilter(tt.expr, tt.params)
		if err != nil {
			t.Errorf("ParseFilter(%q, %v): %v", tt.expr, tt.params, err)
			continue
		}
		got, err := f.Match(m)
		if err != nil || got != tt.want {
			t.Errorf("Match(%q, %v) = %v, %v; want %v", tt.expr, tt.params, got, err, tt.want)
		}
	}

	errTests := []struct {
		expr   string
		params map[string]any
		msg    string
	}{
		{"region = @r", nil, "parameter @r is not bound"},
		{"region = @r", map[string]any{"@x": 1}, "parameter @r is not bound"},
		{"region = @r", map[string]any{"r": map[string]any{}}, "unsupported type map[string]interface {}"},
		{"region = @r", map[string]any{"r": struct{}{}}, "unsupported type struct {}"},
		{"region = @r", map[string]any{"r": "a", "@R": "b"}, "bound more than once"},
		{"@n", map[string]any{"n": 1}, "found an integer constant"},
		{"@a / @b = 1", map[string]any{"a": 1, "b": 0}, "integer division by zero"},
		{"a LIKE @p ESCAPE @e", map[string]any{"p": "x", "e": "ab"}, "ESCAPE must be one character"},
	}
	for _, tt := range errTests {
		_, err := ParseFilter(tt.expr, tt.params)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(pe.Msg, tt.msg) {
			t.Errorf("ParseFilter(%q, %v) = %v; want %q", tt.expr, tt.params, err, tt.msg)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	f, err := ParseFilter("user.region = 'eu' AND sys.Label LIKE 'order%' AND amount > 100 AND region IN ('us', 'eu') AND missing IS NULL", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := sample()
	allocs := testing.AllocsPerRun(100, func() {
		if ok, err := f.Match(m); !ok || err != nil {
			t.Fatalf("Match = %v, %v", ok, err)
		}
	})
	if allocs != 0 {
		t.Errorf("Match allocates %v times per run; want 0", allocs)
	}
}

func TestConcurrentMatch(t *testing.T) {
	f, err := ParseFilter("region = 'eu' AND sys.Label LIKE 'order%' AND newid() <> ''", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAction("SET n = amount + 1; SET sys.Label = 'x'", nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				m := clone(sample())
				if ok, err := f.Match(m); !ok || err != nil {
					t.Errorf("Match = %v, %v", ok, err)
					return
				}
				if err := a.Apply(m); err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
