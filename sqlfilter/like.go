package sqlfilter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// likePattern is a compiled LIKE pattern: the pattern split at each %. The first segment
// is anchored at the start of the string, the last at the end, and the ones between are
// found leftmost-first. Every segment has a fixed length in characters, so greedy
// placement is exact: each character of the string is looked at by at most one
// segment search, and nothing is ever retried.
//
// A middle segment without _ is found with strings.Index (linear). One with _ is found
// with the shift-and algorithm: the segment is a tiny NFA whose states are the bits of
// ⌈len/64⌉ machine words, advanced once per character of the string, so the search
// costs len(s)·⌈len(segment)/64⌉ word operations and never backtracks. A matcher that
// slides the segment along the string and compares (what this package did before) is
// len(s)·len(segment): 20,000 _ against a long property took seconds per message.
type likePattern struct {
	segs []likeSeg // len(segs) == 1 means the pattern has no %
}

type likeSeg struct {
	lit   string // the segment's text when it has no _
	runes []rune // otherwise: its characters, anyRune for _
	sa    *shiftAnd
}

const anyRune = -1

// MaxPatternLength is the longest LIKE pattern, in characters, whatever it comes from:
// a constant, an @parameter, a concatenation or a message property. A pattern written
// into the expression cannot be longer than the expression anyway; the limit is for
// the patterns that are not.
const MaxPatternLength = 1024

// shiftAnd holds the tables of a middle segment with _: for each character the segment
// contains, the positions where it (or _) may stand, and for every other character the
// positions of _ alone.
type shiftAnd struct {
	words  int
	last   uint64          // the bit of the final position in the last word
	ascii  [128]uint16     // index into masks, for characters below 128
	other  map[rune]uint16 // the same for the others
	masks  []uint64        // words per index; index 0 is "only the _ positions"
	allAny bool            // the segment is only _: it matches any len(runes) characters
}

// likeCompileCost is the work compileLike does for a pattern of n bytes, charged against
// the budget when a pattern is compiled per message.
func likeCompileCost(pattern string) int64 {
	n := int64(len(pattern))
	if n > utf8.UTFMax*MaxPatternLength {
		return n // refused after counting its characters
	}
	return n + n*(n/64+1)
}

// compileLike builds a pattern. esc < 0 means no ESCAPE clause. The returned string is an
// error message, "" on success.
func compileLike(pattern string, esc rune) (*likePattern, string) {
	if n := utf8.RuneCountInString(pattern); n > MaxPatternLength {
		return nil, fmt.Sprintf("LIKE pattern is %d characters long; the limit is %d", n, MaxPatternLength)
	}
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
	for k := 1; k < len(p.segs)-1; k++ {
		if s := &p.segs[k]; s.runes != nil {
			s.sa = newShiftAnd(s.runes)
		}
	}
	return p, ""
}

func newShiftAnd(runes []rune) *shiftAnd {
	n := len(runes)
	sa := &shiftAnd{words: (n + 63) / 64, last: 1 << ((n - 1) % 64), allAny: true}
	for _, r := range runes {
		if r != anyRune {
			sa.allAny = false
		}
	}
	if sa.allAny {
		return sa
	}
	index := func(r rune) uint16 {
		if r < 128 {
			return sa.ascii[r]
		}
		return sa.other[r]
	}
	sa.masks = make([]uint64, sa.words) // index 0: the _ positions
	for j, r := range runes {
		if r == anyRune {
			sa.masks[j/64] |= 1 << (j % 64)
		}
	}
	for _, r := range runes {
		if r == anyRune || index(r) != 0 {
			continue
		}
		i := uint16(len(sa.masks) / sa.words)
		if r < 128 {
			sa.ascii[r] = i
		} else {
			if sa.other == nil {
				sa.other = make(map[rune]uint16)
			}
			sa.other[r] = i
		}
		sa.masks = append(sa.masks, sa.masks[:sa.words]...)
	}
	for j, r := range runes {
		if r != anyRune {
			i := int(index(r))
			sa.masks[i*sa.words+j/64] |= 1 << (j % 64)
		}
	}
	return sa
}

func (sa *shiftAnd) mask(r rune) []uint64 {
	var i int
	if r >= 0 && r < 128 {
		i = int(sa.ascii[r])
	} else if sa.other != nil {
		i = int(sa.other[r])
	}
	return sa.masks[i*sa.words : (i+1)*sa.words]
}

// prefix matches s at the start of str and returns the number of bytes it covers.
func (s *likeSeg) prefix(str string, left *int64) (int, bool) {
	if s.runes == nil {
		*left -= int64(len(s.lit))
		return len(s.lit), strings.HasPrefix(str, s.lit)
	}
	*left -= int64(len(s.runes))
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
func (s *likeSeg) suffix(str string, left *int64) (int, bool) {
	if s.runes == nil {
		*left -= int64(len(s.lit))
		return len(str) - len(s.lit), strings.HasSuffix(str, s.lit)
	}
	*left -= int64(len(s.runes))
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

// find returns the end of the leftmost match of s in str. It charges its work to left
// as it goes and gives up, with ok false, once left is below zero.
func (s *likeSeg) find(str string, left *int64) (end int, found bool) {
	if s.runes == nil {
		*left -= int64(len(str)) + int64(len(s.lit))
		if *left < 0 {
			return 0, false
		}
		i := strings.Index(str, s.lit)
		return i + len(s.lit), i >= 0
	}
	sa := s.sa
	if sa.allAny {
		// Only _: the leftmost match is the first len(runes) characters.
		return s.prefix(str, left)
	}
	if sa.words == 1 {
		var d uint64
		for i, r := range str {
			if *left--; *left < 0 {
				return 0, false
			}
			d = (d<<1 | 1) & sa.mask(r)[0]
			if d&sa.last != 0 {
				return i + utf8.RuneLen(r), true
			}
		}
		return 0, false
	}
	d := make([]uint64, sa.words)
	w := int64(sa.words)
	for i, r := range str {
		if *left -= w; *left < 0 {
			return 0, false
		}
		m := sa.mask(r)
		carry := uint64(1) // a match may start at this character
		for k := range d {
			next := d[k] >> 63
			d[k] = (d[k]<<1 | carry) & m[k]
			carry = next
		}
		if d[len(d)-1]&sa.last != 0 {
			return i + utf8.RuneLen(r), true
		}
	}
	return 0, false
}

// match reports whether str matches. It charges its work against *left (one unit per
// character compared, ⌈len(segment)/64⌉ per character a segment with _ is searched
// over) and stops with exhausted true as soon as *left goes below zero.
func (p *likePattern) match(str string, left *int64) (matched, exhausted bool) {
	first := &p.segs[0]
	n, ok := first.prefix(str, left)
	if *left < 0 {
		return false, true
	}
	if !ok {
		return false, false
	}
	if len(p.segs) == 1 {
		return n == len(str), false
	}
	str = str[n:]
	last := &p.segs[len(p.segs)-1]
	end, ok := last.suffix(str, left)
	if *left < 0 {
		return false, true
	}
	if !ok || end < 0 {
		return false, false
	}
	str = str[:end]
	for k := 1; k < len(p.segs)-1; k++ {
		n, ok := p.segs[k].find(str, left)
		if *left < 0 {
			return false, true
		}
		if !ok {
			return false, false
		}
		str = str[n:]
	}
	return true, false
}
