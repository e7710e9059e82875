package sqlfilter

import (
	"strings"
	"unicode/utf8"
)

// likePattern is a compiled LIKE pattern: the pattern split at each %. The first segment
// is anchored at the start of the string, the last at the end, and the ones between are
// found leftmost-first. Every segment has a fixed length in characters, so greedy
// placement is exact and matching is O(len(s)·len(pattern)) at worst — no backtracking
// blow-up whatever the pattern. Segments without _ compare with strings.HasPrefix and
// friends, which makes the common 'prefix%' a single comparison.
type likePattern struct {
	segs []likeSeg // len(segs) == 1 means the pattern has no %
}

type likeSeg struct {
	lit   string // the segment's text when it has no _
	runes []rune // otherwise: its characters, anyRune for _
}

const anyRune = -1

// compileLike builds a pattern. esc < 0 means no ESCAPE clause. The returned string is an
// error message, "" on success.
func compileLike(pattern string, esc rune) (*likePattern, string) {
	p := &likePattern{}
	var b strings.Builder
	var runes []rune
	wild := false
	flush := func() {
		s := likeSeg{lit: b.String()}
		if wild {
			s = likeSeg{runes: runes}
		}
		p.segs = append(p.segs, s)
		b.Reset()
		runes, wild = nil, false
	}
	lit := func(s string) {
		b.WriteString(s)
		r, _ := utf8.DecodeRuneInString(s)
		runes = append(runes, r)
	}
	for i := 0; i < len(pattern); {
		r, w := utf8.DecodeRuneInString(pattern[i:])
		switch {
		case esc >= 0 && r == esc:
			i += w
			if i >= len(pattern) {
				return nil, "LIKE pattern ends with the escape character"
			}
			// The escape makes the next character literal: %, _, the escape itself, or
			// any other character, which is then just itself.
			_, w = utf8.DecodeRuneInString(pattern[i:])
			lit(pattern[i : i+w])
		case r == '%':
			flush()
		case r == '_':
			runes = append(runes, anyRune)
			wild = true
		default:
			lit(pattern[i : i+w])
		}
		i += w
	}
	flush()
	return p, ""
}

// prefix matches s at the start of str and returns the number of bytes it covers.
func (s *likeSeg) prefix(str string) (int, bool) {
	if s.runes == nil {
		return len(s.lit), strings.HasPrefix(str, s.lit)
	}
	i := 0
	for _, want := range s.runes {
		if i >= len(str) {
			return 0, false
		}
		r, w := utf8.DecodeRuneInString(str[i:])
		if want != anyRune && want != r {
			return 0, false
		}
		i += w
	}
	return i, true
}

// suffix matches s at the end of str and returns where the match starts.
func (s *likeSeg) suffix(str string) (int, bool) {
	if s.runes == nil {
		return len(str) - len(s.lit), strings.HasSuffix(str, s.lit)
	}
	j := len(str)
	for k := len(s.runes) - 1; k >= 0; k-- {
		if j <= 0 {
			return 0, false
		}
		r, w := utf8.DecodeLastRuneInString(str[:j])
		if want := s.runes[k]; want != anyRune && want != r {
			return 0, false
		}
		j -= w
	}
	return j, true
}

// find returns the end of the leftmost match of s in str.
func (s *likeSeg) find(str string) (int, bool) {
	if s.runes == nil {
		i := strings.Index(str, s.lit)
		return i + len(s.lit), i >= 0
	}
	for i := 0; ; {
		if n, ok := s.prefix(str[i:]); ok {
			return i + n, true
		}
		if i >= len(str) {
			return 0, false
		}
		_, w := utf8.DecodeRuneInString(str[i:])
		i += w
	}
}

func (p *likePattern) match(str string) bool {
	first := &p.segs[0]
	n, ok := first.prefix(str)
	if !ok {
		return false
	}
	if len(p.segs) == 1 {
		return n == len(str)
	}
	str = str[n:]
	last := &p.segs[len(p.segs)-1]
	end, ok := last.suffix(str)
	if !ok {
		return false
	}
	str = str[:end]
	for k := 1; k < len(p.segs)-1; k++ {
		n, ok := p.segs[k].find(str)
		if !ok {
			return false
		}
		str = str[n:]
	}
	return true
}
