package sqlfilter

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
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
		if got := likeMatch(p, tt.s); got != tt.want {
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
		if got := likeMatch(p, s); got != want {
			t.Errorf("%q LIKE %q ESCAPE '!' = %v; want %v", s, pattern, got, want)
		}
	}
}

func TestLikeIsNotExponential(t *testing.T) {
	// A backtracking matcher takes forever on this; the segment matcher is linear-ish.
	p, _ := compileLike(strings.Repeat("%a", 30)+"%b", -1)
	if likeMatch(p, strings.Repeat("a", 5000)) {
		t.Error("matched; want no match")
	}
}

// likeMatch matches without a practical budget limit.
func likeMatch(p *likePattern, s string) bool {
	left := int64(1 << 62)
	ok, _ := p.match(s, &left)
	return ok
}

// likeRegexp translates a LIKE pattern into an anchored regexp, the reference the matcher
// is checked against. ok is false for a pattern ending in the escape character.
func likeRegexp(pattern string, esc rune) (re *regexp.Regexp, ok bool) {
	var b strings.Builder
	b.WriteString("^(?s:")
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case esc >= 0 && r == esc:
			if i+1 == len(rs) {
				return nil, false
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		case r == '%':
			b.WriteString(".*")
		case r == '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(")$")
	return regexp.MustCompile(b.String()), true
}

// TestLikeLongSegments checks the multi-word shift-and search: middle segments with _ longer
// than 64 characters, where a carry between words is easy to get wrong.
func TestLikeLongSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	gen := func(alphabet string, n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 300 {
		seg := gen("ab_", 60+rng.IntN(140))
		pattern := gen("ab", rng.IntN(3)) + "%" + seg + "%" + gen("ab_", rng.IntN(3))
		if rng.IntN(2) == 0 {
			pattern = "%" + gen("a_", 70) + pattern
		}
		s := gen("aab", rng.IntN(600))
		if rng.IntN(3) == 0 {
			// Plant a match so that not every case is a miss.
			planted := strings.Map(func(r rune) rune {
				if r == '_' {
					return 'b'
				}
				return r
			}, seg)
			k := rng.IntN(len(s) + 1)
			s = s[:k] + planted + s[k:]
		}
		p, msg := compileLike(pattern, -1)
		if msg != "" {
			t.Fatalf("compileLike(%q): %s", pattern, msg)
		}
		re, _ := likeRegexp(pattern, -1)
		if got, want := likeMatch(p, s), re.MatchString(s); got != want {
			t.Fatalf("%q LIKE %q = %v; want %v", s, pattern, got, want)
		}
	}
}

// TestLikeWorkIsLinear counts the matcher's work, not its time: on patterns that make a
// sliding matcher do len(s)·len(pattern) comparisons (a long segment with _ that almost
// matches everywhere), the work charged stays within len(s)·⌈len(segment)/64⌉ plus the
// pattern, and the charge is what bounds the matcher: it stops once the budget is spent.
func TestLikeWorkIsLinear(t *testing.T) {
	s := strings.Repeat("a", 32*1024) + "b"
	for _, tt := range []struct {
		pattern string
		want    bool
	}{
		{"%" + strings.Repeat("_", 1022) + "%", true},            // only _: the 20,000 _ within the limit
		{"%" + strings.Repeat("a", 1020) + "_b%", true},          // almost matches everywhere
		{"%" + strings.Repeat("a_", 510) + "b%", true},           // alternating
		{"%" + strings.Repeat("a", 1021) + "b%", true},           // no _: strings.Index
		{"%" + strings.Repeat("_a", 255) + "b%" + "%x%", false},  // two segments
		{strings.Repeat("%a_", 300) + "b%", true},                // many short segments
		{"a" + strings.Repeat("_", 1000) + "%" + "b_%_b", false}, // prefix and suffix
		{"%" + strings.Repeat("a", 500) + "_" + "c%", false},     // never found
	} {
		p, msg := compileLike(tt.pattern, -1)
		if msg != "" {
			t.Fatalf("compileLike: %s", msg)
		}
		b := NewBudget(1 << 40)
		got, exhausted := p.match(s, &b.left)
		if exhausted {
			t.Fatalf("exhausted a budget of 2^40")
		}
		if got != tt.want {
			t.Errorf("LIKE %.20q… = %v; want %v", tt.pattern, got, tt.want)
		}
		words := int64(len(tt.pattern)/64 + 1)
		bound := (int64(len(s)) + int64(len(tt.pattern))) * words
		if used := b.Used(); used > bound {
			t.Errorf("LIKE %.20q… (%d characters) over %d characters: work %d; want at most %d",
				tt.pattern, len(tt.pattern), len(s), used, bound)
		}
		// Half the work it needs: the matcher stops instead of finishing.
		need := b.Used()
		left := need / 2
		if _, exhausted := p.match(s, &left); need > 1 && !exhausted {
			t.Errorf("LIKE %.20q… with half its budget (%d of %d) was not cut short", tt.pattern, need/2, need)
		}
	}
}

func TestLikePatternLimit(t *testing.T) {
	if _, msg := compileLike(strings.Repeat("ü", MaxPatternLength), -1); msg != "" {
		t.Errorf("a pattern of %d characters: %s", MaxPatternLength, msg)
	}
	_, msg := compileLike(strings.Repeat("_", MaxPatternLength+1), -1)
	if want := "LIKE pattern is 1025 characters long; the limit is 1024"; msg != want {
		t.Errorf("a pattern of %d characters: %q; want %q", MaxPatternLength+1, msg, want)
	}
}

// FuzzLike checks the matcher against the regexp translation on any pattern and string.
func FuzzLike(f *testing.F) {
	f.Add("abc", "a_c", "")
	f.Add("aXbYc", "a%b%c", "")
	f.Add("100%", "%!%", "!")
	f.Add("日本語", "_本_", "")
	f.Add(strings.Repeat("ab", 100), "%"+strings.Repeat("a_", 40)+"%", "")
	f.Fuzz(func(t *testing.T, s, pattern, escape string) {
		if !utf8.ValidString(s) || !utf8.ValidString(pattern) || utf8.RuneCountInString(escape) > 1 {
			// Invalid UTF-8 decodes to U+FFFD one way and compares as bytes the other;
			// the regexp reference cannot say which is right.
			return
		}
		esc := rune(-1)
		if escape != "" {
			esc, _ = utf8.DecodeRuneInString(escape)
		}
		p, msg := compileLike(pattern, esc)
		re, ok := likeRegexp(pattern, esc)
		if msg != "" {
			if ok && utf8.RuneCountInString(pattern) <= MaxPatternLength {
				t.Fatalf("compileLike(%q, %q): %s", pattern, escape, msg)
			}
			return
		}
		if !ok {
			t.Fatalf("compileLike(%q, %q) succeeded; want an error", pattern, escape)
		}
		if got, want := likeMatch(p, s), re.MatchString(s); got != want {
			t.Fatalf("%q LIKE %q ESCAPE %q = %v; want %v", s, pattern, escape, got, want)
		}
	})
}
