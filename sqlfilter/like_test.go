package sqlfilter

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestLike(t *testing.T) {
	tests := []struct {
		s, pattern string
		esc        rune
		want       bool
	}{
		{"abc", "abc", -1, true},
		{"abc", "ABC", -1, false}, // ordinal
		{"abc", "ab", -1, false},
		{"", "", -1, true},
		{"a", "", -1, false},
		{"", "%", -1, true},
		{"anything", "%", -1, true},
		{"", "_", -1, false},
		{"abc", "a%", -1, true},
		{"abc", "%c", -1, true},
		{"abc", "%b%", -1, true},
		{"abc", "%x%", -1, false},
		{"abc", "a_c", -1, true},
		{"abc", "___", -1, true},
		{"abc", "__", -1, false},
		{"aXbYc", "a%b%c", -1, true},
		{"acb", "a%b%c", -1, false},
		{"aa", "%a%a%", -1, true},
		{"a", "%a%a%", -1, false},
		{"aba", "ab%ba", -1, false}, // prefix and suffix must not overlap
		{"abba", "ab%ba", -1, true},
		{"a", "a%a", -1, false},
		{"aa", "a%a", -1, true},
		{"ab", "_%_", -1, true},
		{"a", "_%_", -1, false},
		{"xaybz", "%a_b%", -1, true},
		{"xaybz", "%a_c%", -1, false},
		{"abcabd", "%ab_", -1, true},
		{"abcabd", "%abc", -1, false},
		{"a%%b", "a%%b", -1, true},
		// Unicode: _ is one character, not one byte.
		{"Zoë", "Zo_", -1, true},
		{"Zoë", "Zo__", -1, false},
		{"ü", "_", -1, true},
		{"日本語", "_本_", -1, true},
		{"日本語", "%語", -1, true},
		{"日本語", "日%", -1, true},
		{"𝄞x", "_x", -1, true}, // outside the BMP: still one character
		// Escapes.
		{"ABC%", `ABC\%`, '\\', true},
		{"ABCD", `ABC\%`, '\\', false},
		{"a_b", "a!_b", '!', true},
		{"axb", "a!_b", '!', false},
		{"a!b", "a!!b", '!', true},
		{"100%", "%!%", '!', true},
		{"100", "%!%", '!', false},
		{"ab", "!ab", '!', true},    // an escaped ordinary character is itself
		{"a%b", "a\\%b", -1, false}, // no ESCAPE clause: backslash is literal
		{`a\xb`, `a\%b`, -1, true},
		{"ü%", "üé%", 'é', true}, // non-ASCII escape character
	}
	for _, tt := range tests {
		p, msg := compileLike(tt.pattern, tt.esc)
		if msg != "" {
			t.Errorf("compileLike(%q, %q): %s", tt.pattern, tt.esc, msg)
			continue
		}
		if got := p.match(tt.s); got != tt.want {
			t.Errorf("%q LIKE %q ESCAPE %q = %v; want %v", tt.s, tt.pattern, tt.esc, got, tt.want)
		}
	}
}

// TestLikeAgainstRegexp checks the segment matcher against a regexp translation on random
// patterns and strings over a small alphabet, where the tricky overlaps are frequent.
func TestLikeAgainstRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func(alphabet []string, n int) string {
		var b strings.Builder
		for range rng.IntN(n + 1) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 20000 {
		pattern := gen([]string{"a", "b", "ü", "%", "_", "!"}, 7)
		s := gen([]string{"a", "b", "ü", "%", "_", "!"}, 8)
		var re strings.Builder
		re.WriteString("^(?s:")
		ok := true
		rs := []rune(pattern)
		for i := 0; i < len(rs); i++ {
			switch r := rs[i]; r {
			case '!':
				if i+1 == len(rs) {
					ok = false
				} else {
					i++
					re.WriteString(regexp.QuoteMeta(string(rs[i])))
				}
			case '%':
				re.WriteString(".*")
			case '_':
				re.WriteString(".")
			default:
				re.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		re.WriteString(")$")
		p, msg := compileLike(pattern, '!')
		if !ok {
			if msg == "" {
				t.Errorf("compileLike(%q) succeeded; want an error", pattern)
			}
			continue
		}
		want := regexp.MustCompile(re.String()).MatchString(s)
		if got := p.match(s); got != want {
			t.Errorf("%q LIKE %q ESCAPE '!' = %v; want %v", s, pattern, got, want)
		}
	}
}

func TestLikeIsNotExponential(t *testing.T) {
	// A backtracking matcher takes forever on this; the segment matcher is linear-ish.
	p, _ := compileLike(strings.Repeat("%a", 30)+"%b", -1)
	if p.match(strings.Repeat("a", 5000)) {
		t.Error("matched; want no match")
	}
}
