package sqlfilter

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // regular identifier; kw says whether it is a reserved word
	tQuoted         // [delimited] or "quoted" identifier, decoded into val
	tString         // 'string constant', decoded into val
	tInt            // integer constant; converted by the parser, which knows about unary minus
	tFloat          // decimal or approximate-number constant
	tParam          // @name; val is the name without @
	tLParen
	tRParen
	tComma
	tSemi
	tDot
	tPlus
	tMinus
	tStar
	tSlash
	tPercent
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
)

// keyword marks reserved words. A regular identifier cannot be one of these
// (protocol.md §7.2; use [delimited] names instead); SET and REMOVE are not reserved
// because they only matter at the start of an action statement.
type keyword uint8

const (
	kwNone keyword = iota
	kwAnd
	kwOr
	kwNot
	kwIs
	kwNull
	kwIn
	kwLike
	kwEscape
	kwExists
	kwTrue
	kwFalse
)

var keywords = [...]string{kwAnd: "AND", kwOr: "OR", kwNot: "NOT", kwIs: "IS", kwNull: "NULL",
	kwIn: "IN", kwLike: "LIKE", kwEscape: "ESCAPE", kwExists: "EXISTS", kwTrue: "TRUE", kwFalse: "FALSE"}

func keywordOf(s string) keyword {
	if len(s) < 2 || len(s) > 6 {
		return kwNone
	}
	for k := kwAnd; k <= kwFalse; k++ {
		if strings.EqualFold(s, keywords[k]) {
			return k
		}
	}
	return kwNone
}

type token struct {
	kind tokKind
	kw   keyword
	pos  int    // 1-based character position
	text string // source text
	val  string // decoded name or string constant
}

// lexer turns the expression into tokens up front: expressions are at most 1024
// characters, and a slice makes the parser's one-token lookahead trivial.
type lexer struct {
	src  string
	i    int // byte offset
	rpos int // 1-based character position of src[i]
	toks []token
}

func (lx *lexer) peekRune(off int) rune {
	j := lx.i
	for ; off > 0 && j < len(lx.src); off-- {
		_, w := utf8.DecodeRuneInString(lx.src[j:])
		j += w
	}
	if j >= len(lx.src) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(lx.src[j:])
	return r
}

func (lx *lexer) advance() rune {
	r, w := utf8.DecodeRuneInString(lx.src[lx.i:])
	lx.i += w
	lx.rpos++
	return r
}

func (lx *lexer) errAt(pos int, near, msg string) *ParseError {
	return &ParseError{Pos: pos, Near: near, Msg: msg}
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool  { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
func isDigit(r rune) bool      { return r >= '0' && r <= '9' }

func lex(src string) ([]token, *ParseError) {
	lx := &lexer{src: src, rpos: 1}
	for {
		for lx.i < len(lx.src) {
			r := lx.peekRune(0)
			if !unicode.IsSpace(r) {
				break
			}
			lx.advance()
		}
		if lx.i >= len(lx.src) {
			lx.toks = append(lx.toks, token{kind: tEOF, pos: lx.rpos})
			return lx.toks, nil
		}
		if len(lx.toks) == MaxTokens {
			return nil, &ParseError{Pos: lx.rpos, Near: nearText(lx.src[lx.i:]),
				Msg: "more than 1024 tokens", Err: ErrTooManyTokens}
		}
		if err := lx.next(); err != nil {
			return nil, err
		}
	}
}

// nearText shortens the rest of the input for an error message.
func nearText(s string) string {
	n := 0
	for i := range s {
		if n == 20 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

func (lx *lexer) emit(k tokKind, start, pos int, val string) {
	t := token{kind: k, pos: pos, text: lx.src[start:lx.i], val: val}
	if k == tIdent {
		t.kw = keywordOf(t.text)
	}
	lx.toks = append(lx.toks, t)
}

func (lx *lexer) next() *ParseError {
	start, pos := lx.i, lx.rpos
	r := lx.advance()
	switch {
	case (r == 'N' || r == 'n') && lx.peekRune(0) == '\'':
		// N'…' is the T-SQL Unicode prefix; every string is Unicode here.
		lx.advance()
		return lx.quoted(start, pos, '\'', tString, "string constant")
	case isIdentStart(r):
		for lx.i < len(lx.src) && isIdentPart(lx.peekRune(0)) {
			lx.advance()
		}
		lx.emit(tIdent, start, pos, lx.src[start:lx.i])
		return nil
	case isDigit(r) || r == '.' && isDigit(lx.peekRune(0)):
		return lx.number(start, pos, r)
	}
	switch r {
	case '\'':
		return lx.quoted(start, pos, '\'', tString, "string constant")
	case '[':
		return lx.quoted(start, pos, ']', tQuoted, "delimited identifier")
	case '"':
		return lx.quoted(start, pos, '"', tQuoted, "quoted identifier")
	case '@':
		for lx.i < len(lx.src) && isIdentPart(lx.peekRune(0)) {
			lx.advance()
		}
		if lx.i == start+1 {
			return lx.errAt(pos, "@", "expected a parameter name after @")
		}
		lx.emit(tParam, start, pos, lx.src[start+1:lx.i])
		return nil
	case '(':
		lx.emit(tLParen, start, pos, "")
	case ')':
		lx.emit(tRParen, start, pos, "")
	case ',':
		lx.emit(tComma, start, pos, "")
	case ';':
		lx.emit(tSemi, start, pos, "")
	case '.':
		lx.emit(tDot, start, pos, "")
	case '+':
		lx.emit(tPlus, start, pos, "")
	case '-':
		lx.emit(tMinus, start, pos, "")
	case '*':
		lx.emit(tStar, start, pos, "")
	case '/':
		lx.emit(tSlash, start, pos, "")
	case '%':
		lx.emit(tPercent, start, pos, "")
	case '=':
		lx.emit(tEq, start, pos, "")
	case '!':
		if lx.peekRune(0) != '=' {
			return lx.errAt(pos, "!", "unexpected character '!' (did you mean != ?)")
		}
		lx.advance()
		lx.emit(tNe, start, pos, "")
	case '<':
		switch lx.peekRune(0) {
		case '=':
			lx.advance()
			lx.emit(tLe, start, pos, "")
		case '>':
			lx.advance()
			lx.emit(tNe, start, pos, "")
		default:
			lx.emit(tLt, start, pos, "")
		}
	case '>':
		if lx.peekRune(0) == '=' {
			lx.advance()
			lx.emit(tGe, start, pos, "")
		} else {
			lx.emit(tGt, start, pos, "")
		}
	default:
		near := lx.src[start:lx.i]
		if r == utf8.RuneError {
			return lx.errAt(pos, near, "invalid UTF-8")
		}
		return lx.errAt(pos, near, "unexpected character "+quoteRune(r))
	}
	return nil
}

func quoteRune(r rune) string {
	if r == '\'' {
		return `"'"`
	}
	return "'" + string(r) + "'"
}

// quoted scans the rest of a token closed by close, where a doubled close stands for
// itself: a quote doubled in a string, ]] in a delimited name.
func (lx *lexer) quoted(start, pos int, close rune, k tokKind, what string) *ParseError {
	var b strings.Builder
	segStart := lx.i
	for {
		if lx.i >= len(lx.src) {
			return lx.errAt(pos, nearText(lx.src[start:]), "unterminated "+what)
		}
		r := lx.advance()
		if r != close {
			continue
		}
		if lx.peekRune(0) == close {
			b.WriteString(lx.src[segStart:lx.i]) // keeps one close
			lx.advance()
			segStart = lx.i
			continue
		}
		val := lx.src[segStart : lx.i-utf8.RuneLen(close)]
		if b.Len() > 0 {
			b.WriteString(val)
			val = b.String()
		}
		if k == tQuoted && val == "" {
			return lx.errAt(pos, lx.src[start:lx.i], "empty "+what)
		}
		lx.emit(k, start, pos, val)
		return nil
	}
}

// number scans 12, 1.5, .5, 2., 1.5E5, 1e-3. Whether an integer fits in int64 is the
// parser's business because -9223372036854775808 is valid and 9223372036854775808 is not.
func (lx *lexer) number(start, pos int, first rune) *ParseError {
	k := tInt
	if first == '.' {
		k = tFloat
	}
	for isDigit(lx.peekRune(0)) {
		lx.advance()
	}
	if k == tInt && lx.peekRune(0) == '.' {
		k = tFloat
		lx.advance()
		for isDigit(lx.peekRune(0)) {
			lx.advance()
		}
	}
	if r := lx.peekRune(0); r == 'e' || r == 'E' {
		r1 := lx.peekRune(1)
		if isDigit(r1) || (r1 == '+' || r1 == '-') && isDigit(lx.peekRune(2)) {
			k = tFloat
			lx.advance()
			lx.advance()
			for isDigit(lx.peekRune(0)) {
				lx.advance()
			}
		}
	}
	if r := lx.peekRune(0); isIdentPart(r) || r == '.' {
		lx.advance()
		return lx.errAt(pos, lx.src[start:lx.i], "malformed number")
	}
	lx.emit(k, start, pos, "")
	return nil
}
