package sqlfilter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parser is a recursive-descent parser over the token slice. Predicates and value
// expressions share one grammar, from loosest to tightest binding:
//
//	or     := and { OR and }
//	and    := not { AND not }
//	not    := NOT not | cmp
//	cmp    := add [ (= | <> | != | < | <= | > | >=) add
//	              | IS [NOT] NULL
//	              | [NOT] IN ( add {, add} )
//	              | [NOT] LIKE add [ESCAPE add] ]
//	add    := mul { (+ | -) mul }
//	mul    := unary { (* | / | %) unary }
//	unary  := (+ | -) unary | primary
//	primary:= constant | @param | property | function | EXISTS ( property ) | ( or )
//
// One grammar lets a boolean property or parameter stand as a predicate and a predicate
// be a SET value; static checks then reject what the Service Bus grammar cannot mean
// (a constant or arithmetic where a predicate is required, arithmetic on a predicate).
// Subtrees made only of constants are evaluated at parse time, so 1=1 compiles to TRUE
// and 'a' + 1 or 1/0 fails at rule creation instead of on every message.
type parser struct {
	toks      []token
	i         int
	depth     int
	params    map[string]any // lower-cased names without the @
	dupParams map[string]bool
}

func newParser(src string, params map[string]any) (*parser, error) {
	if n := utf8.RuneCountInString(src); n > MaxExpressionLength {
		rest := src
		for range MaxExpressionLength {
			_, w := utf8.DecodeRuneInString(rest)
			rest = rest[w:]
		}
		return nil, &ParseError{Pos: MaxExpressionLength + 1, Near: nearText(rest), Err: ErrTooLong,
			Msg: fmt.Sprintf("expression is %d characters long; the limit is %d", n, MaxExpressionLength)}
	}
	toks, perr := lex(src)
	if perr != nil {
		return nil, perr
	}
	p := &parser{toks: toks}
	if len(params) > 0 {
		p.params = make(map[string]any, len(params))
		for k, v := range params {
			name := strings.ToLower(strings.TrimPrefix(k, "@"))
			if _, dup := p.params[name]; dup {
				if p.dupParams == nil {
					p.dupParams = make(map[string]bool)
				}
				p.dupParams[name] = true
			}
			p.params[name] = v
		}
	}
	return p, nil
}

func (p *parser) tok() token { return p.toks[p.i] }

func (p *parser) peek(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) take() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isKw(k keyword) bool {
	t := p.toks[p.i]
	return t.kind == tIdent && t.kw == k
}

func isWord(t token, w string) bool { return t.kind == tIdent && strings.EqualFold(t.text, w) }

func (p *parser) errAt(t token, msg string) *ParseError {
	return &ParseError{Pos: t.pos, Near: nearText(t.text), Msg: msg}
}

func (p *parser) expect(k tokKind, what string) error {
	if t := p.tok(); t.kind != k {
		return p.errAt(t, "expected "+what)
	}
	p.take()
	return nil
}

// enter guards every recursive construct so that hostile input cannot exhaust the stack.
func (p *parser) enter(t token) error {
	p.depth++
	if p.depth > MaxDepth {
		e := p.errAt(t, fmt.Sprintf("expression nested more than %d levels deep", MaxDepth))
		e.Err = ErrTooDeep
		return e
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// stype is what the parser knows about a node's result type.
type stype uint8

const (
	sAny   stype = iota // a property: known per message only
	sBool               // a predicate or boolean constant
	sValue              // a number, string, … — never a boolean
	sNull               // the NULL constant
)

func staticOf(n node) stype {
	switch n := n.(type) {
	case *constNode:
		switch {
		case n.v.k == kBool || n.pred:
			return sBool
		case n.v.k == kNull:
			return sNull
		}
		return sValue
	case *propNode, *dynPropNode:
		return sAny
	case *arithNode, *unaryNode, newidNode:
		return sValue
	}
	return sBool
}

func (p *parser) requirePredicate(n node, at token) error {
	switch staticOf(n) {
	case sBool, sAny:
		return nil
	case sNull:
		return p.errAt(at, "expected a predicate, found NULL")
	}
	what := "an arithmetic expression"
	if c, ok := n.(*constNode); ok {
		what = article(c.v.k.String()) + " constant"
	} else if _, ok := n.(newidNode); ok {
		what = "newid()"
	}
	return p.errAt(at, "expected a predicate (comparison, IN, LIKE, IS NULL, EXISTS or boolean), found "+what)
}

func article(noun string) string {
	if strings.IndexByte("aeiou", noun[0]) >= 0 {
		return "an " + noun
	}
	return "a " + noun
}

func (p *parser) requireOperand(n node, o op, at token) error {
	if staticOf(n) == sBool {
		return p.errAt(at, "operator "+o.String()+" cannot be applied to a boolean")
	}
	return nil
}

// fold evaluates n at parse time when all its operands are constants.
func (p *parser) fold(n node, at token, kids ...node) (node, error) {
	for _, k := range kids {
		if _, ok := k.(*constNode); !ok {
			return n, nil
		}
	}
	v, err := n.eval(nil)
	if err != nil {
		msg := err.Error()
		var ee *EvalError
		if errors.As(err, &ee) {
			msg = ee.Msg
		}
		return nil, p.errAt(at, msg)
	}
	return &constNode{v: v, pred: staticOf(n) == sBool}, nil
}

func (p *parser) parseOr() (node, error) {
	return p.parseLogical(kwOr, p.parseAnd, func(l, r node) node { return &orNode{l: l, r: r} })
}

func (p *parser) parseAnd() (node, error) {
	return p.parseLogical(kwAnd, p.parseNot, func(l, r node) node { return &andNode{l: l, r: r} })
}

// parseLogical parses operands joined by the keyword kw (AND or OR, left-associative): each
// operand must be a predicate, and constant parts are folded.
func (p *parser) parseLogical(kw keyword, operand func() (node, error), join func(l, r node) node) (node, error) {
	lt := p.tok()
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for p.isKw(kw) {
		p.take()
		rt := p.tok()
		r, err := operand()
		if err != nil {
			return nil, err
		}
		if err := p.requirePredicate(l, lt); err != nil {
			return nil, err
		}
		if err := p.requirePredicate(r, rt); err != nil {
			return nil, err
		}
		if l, err = p.fold(join(l, r), lt, l, r); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (p *parser) parseNot() (node, error) {
	if !p.isKw(kwNot) {
		return p.parseCmp()
	}
	t := p.take()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	xt := p.tok()
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	p.leave()
	if err := p.requirePredicate(x, xt); err != nil {
		return nil, err
	}
	return p.fold(&notNode{x: x}, t, x)
}

var cmpOps = map[tokKind]op{tEq: opEq, tNe: opNe, tLt: opLt, tLe: opLe, tGt: opGt, tGe: opGe}

func (p *parser) parseCmp() (node, error) {
	lt := p.tok()
	l, err := p.parseAdd()
	if err != nil {
		return nil, err
	}
	t := p.tok()
	if o, ok := cmpOps[t.kind]; ok {
		p.take()
		r, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		return p.fold(&cmpNode{o: o, l: l, r: r}, t, l, r)
	}
	if t.kind != tIdent {
		return l, nil
	}
	switch t.kw {
	case kwIs:
		p.take()
		not := p.isKw(kwNot)
		if not {
			p.take()
		}
		if !p.isKw(kwNull) {
			return nil, p.errAt(p.tok(), "expected NULL after IS")
		}
		p.take()
		return p.fold(&isNullNode{x: l, not: not}, lt, l)
	case kwNot:
		p.take()
		switch {
		case p.isKw(kwIn):
			return p.parseIn(l, true, lt)
		case p.isKw(kwLike):
			return p.parseLike(l, true, lt)
		}
		return nil, p.errAt(p.tok(), "expected IN or LIKE after NOT")
	case kwIn:
		return p.parseIn(l, false, lt)
	case kwLike:
		return p.parseLike(l, false, lt)
	}
	return l, nil
}

// parseIn parses the list after IN; the current token is IN.
func (p *parser) parseIn(x node, not bool, xt token) (node, error) {
	p.take()
	lp := p.tok()
	if err := p.expect(tLParen, "( after IN"); err != nil {
		return nil, err
	}
	if err := p.enter(lp); err != nil {
		return nil, err
	}
	n := &inNode{x: x, not: not}
	kids := []node{x}
	for {
		it, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, it)
		kids = append(kids, it)
		if p.tok().kind != tComma {
			break
		}
		p.take()
	}
	if err := p.expect(tRParen, ", or ) in the IN list"); err != nil {
		return nil, err
	}
	p.leave()
	consts := make([]value, 0, len(n.items))
	for _, it := range n.items {
		if c, ok := it.(*constNode); ok {
			consts = append(consts, c.v)
		}
	}
	if len(consts) == len(n.items) {
		n.consts = consts
	}
	return p.fold(n, xt, kids...)
}

// parseLike parses the pattern and escape after LIKE; the current token is LIKE.
func (p *parser) parseLike(x node, not bool, xt token) (node, error) {
	p.take()
	pt := p.tok()
	pat, err := p.parseAdd()
	if err != nil {
		return nil, err
	}
	n := &likeNode{x: x, patN: pat, not: not, pp: pt.pos}
	kids := []node{x, pat}
	var et token
	if p.isKw(kwEscape) {
		p.take()
		et = p.tok()
		if n.escN, err = p.parseAdd(); err != nil {
			return nil, err
		}
		kids = append(kids, n.escN)
	}
	pc, _ := pat.(*constNode)
	if pc != nil && pc.v.k != kNull && pc.v.k != kString {
		return nil, p.errAt(pt, "LIKE pattern must be a string, got "+pc.v.k.String())
	}
	esc := rune(-1)
	ec, _ := n.escN.(*constNode)
	if ec != nil && ec.v.k != kNull {
		if ec.v.k != kString {
			return nil, p.errAt(et, "ESCAPE must be a string, got "+ec.v.k.String())
		}
		r, w := utf8.DecodeRuneInString(ec.v.s)
		if w == 0 || w != len(ec.v.s) {
			return nil, p.errAt(et, fmt.Sprintf("ESCAPE must be one character, got %d", utf8.RuneCountInString(ec.v.s)))
		}
		esc = r
	}
	if pc != nil && pc.v.k == kString && (n.escN == nil || ec != nil && ec.v.k == kString) {
		var msg string
		if n.pat, msg = compileLike(pc.v.s, esc); msg != "" {
			return nil, p.errAt(pt, msg)
		}
	}
	return p.fold(n, xt, kids...)
}

var addOps = map[tokKind]op{tPlus: opAdd, tMinus: opSub}
var mulOps = map[tokKind]op{tStar: opMul, tSlash: opDiv, tPercent: opMod}

func (p *parser) parseAdd() (node, error) {
	return p.parseBinary(addOps, p.parseMul)
}

func (p *parser) parseMul() (node, error) {
	return p.parseBinary(mulOps, p.parseUnary)
}

func (p *parser) parseBinary(ops map[tokKind]op, next func() (node, error)) (node, error) {
	lt := p.tok()
	l, err := next()
	if err != nil {
		return nil, err
	}
	for {
		t := p.tok()
		o, ok := ops[t.kind]
		if !ok {
			return l, nil
		}
		p.take()
		rt := p.tok()
		r, err := next()
		if err != nil {
			return nil, err
		}
		if err := p.requireOperand(l, o, lt); err != nil {
			return nil, err
		}
		if err := p.requireOperand(r, o, rt); err != nil {
			return nil, err
		}
		if l, err = p.fold(&arithNode{o: o, l: l, r: r, pos: t.pos}, t, l, r); err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseUnary() (node, error) {
	t := p.tok()
	if t.kind != tPlus && t.kind != tMinus {
		return p.parsePrimary()
	}
	p.take()
	o := addOps[t.kind]
	// -9223372036854775808 is a valid long although its digits alone are not.
	if n := p.tok(); o == opSub && n.kind == tInt && strings.TrimLeft(n.text, "0") == "9223372036854775808" {
		p.take()
		return &constNode{v: intValue(math.MinInt64)}, nil
	}
	if err := p.enter(t); err != nil {
		return nil, err
	}
	xt := p.tok()
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	p.leave()
	if err := p.requireOperand(x, o, xt); err != nil {
		return nil, err
	}
	return p.fold(&unaryNode{o: o, x: x, pos: t.pos}, t, x)
}

func (p *parser) parsePrimary() (node, error) {
	t := p.tok()
	switch t.kind {
	case tInt:
		p.take()
		i, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, p.errAt(t, "integer constant out of range (write a decimal point for a double)")
		}
		return &constNode{v: intValue(i)}, nil
	case tFloat:
		p.take()
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil && (math.IsInf(f, 0) || !errors.Is(err, strconv.ErrRange)) {
			return nil, p.errAt(t, "numeric constant out of range")
		}
		return &constNode{v: floatValue(f)}, nil
	case tString:
		p.take()
		return &constNode{v: stringValue(t.val)}, nil
	case tParam:
		p.take()
		return p.param(t)
	case tLParen:
		p.take()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if err := p.expect(tRParen, ")"); err != nil {
			return nil, err
		}
		p.leave()
		return x, nil
	case tQuoted:
		return p.parseProperty()
	case tIdent:
		switch t.kw {
		case kwNone:
		case kwTrue:
			p.take()
			return &constNode{v: trueValue}, nil
		case kwFalse:
			p.take()
			return &constNode{v: falseValue}, nil
		case kwNull:
			p.take()
			return &constNode{v: nullValue}, nil
		case kwExists:
			p.take()
			if err := p.expect(tLParen, "( after EXISTS"); err != nil {
				return nil, err
			}
			pn, err := p.parseProperty()
			if err != nil {
				return nil, err
			}
			if err := p.expect(tRParen, ") after the EXISTS property"); err != nil {
				return nil, err
			}
			return &existsNode{p: pn}, nil
		default:
			return nil, p.errAt(t, "expected an expression")
		}
		if p.peek(1).kind == tLParen {
			return p.parseFunction()
		}
		return p.parseProperty()
	}
	return nil, p.errAt(t, "expected an expression")
}

func (p *parser) parseFunction() (node, error) {
	t := p.take()
	lp := p.take() // (
	switch {
	case strings.EqualFold(t.text, "newid"):
		if err := p.expect(tRParen, ") after newid("); err != nil {
			return nil, err
		}
		return newidNode{}, nil
	case strings.EqualFold(t.text, "property"), strings.EqualFold(t.text, "p"):
		if err := p.enter(lp); err != nil {
			return nil, err
		}
		at := p.tok()
		arg, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		if err := p.expect(tRParen, ")"); err != nil {
			return nil, err
		}
		p.leave()
		c, ok := arg.(*constNode)
		if !ok {
			return &dynPropNode{arg: arg, pos: t.pos}, nil
		}
		switch c.v.k {
		case kString:
			sys, name := splitScope(c.v.s)
			return &propNode{sys: sys, name: name, pos: t.pos}, nil
		case kNull:
			return c, nil
		}
		return nil, p.errAt(at, "property() needs a string name, got "+c.v.k.String())
	}
	return nil, p.errAt(t, "unknown function "+t.text+"()")
}

// parseProperty parses [sys.|user.]name where each part is a regular, [delimited] or
// "quoted" identifier.
func (p *parser) parseProperty() (*propNode, error) {
	t := p.tok()
	if err := p.checkName(t, "a property name"); err != nil {
		return nil, err
	}
	p.take()
	if p.tok().kind != tDot {
		return &propNode{name: t.val, pos: t.pos}, nil
	}
	var sys bool
	switch {
	case strings.EqualFold(t.val, "sys"):
		sys = true
	case strings.EqualFold(t.val, "user"):
	default:
		return nil, p.errAt(t, fmt.Sprintf("unknown scope %q: expected sys or user", t.val))
	}
	p.take()
	nt := p.tok()
	if err := p.checkName(nt, "a property name after "+t.text+"."); err != nil {
		return nil, err
	}
	p.take()
	if sys {
		return &propNode{sys: true, name: canonicalSystemName(nt.val), pos: t.pos}, nil
	}
	return &propNode{name: nt.val, pos: t.pos}, nil
}

func (p *parser) checkName(t token, what string) error {
	switch {
	case t.kind == tQuoted:
		return nil
	case t.kind == tIdent && t.kw != kwNone:
		return p.errAt(t, fmt.Sprintf("%s is a reserved word; write [%s] for a property of that name", strings.ToUpper(t.text), t.text))
	case t.kind == tIdent:
		return nil
	}
	return p.errAt(t, "expected "+what)
}

// param binds @name to its value now, so parameters cost nothing per message.
func (p *parser) param(t token) (node, error) {
	name := strings.ToLower(t.val)
	if p.dupParams[name] {
		return nil, p.errAt(t, "parameter @"+t.val+" is bound more than once")
	}
	x, ok := p.params[name]
	if !ok {
		return nil, p.errAt(t, "parameter @"+t.val+" is not bound")
	}
	v, ok := valueOf(x)
	if !ok {
		return nil, p.errAt(t, fmt.Sprintf("parameter @%s has unsupported type %T", t.val, x))
	}
	return &constNode{v: v}, nil
}

// Filter is a compiled SqlFilter expression. It is immutable and safe for concurrent use.
type Filter struct {
	expr string
	root node
}

// ParseFilter compiles a SqlFilter expression (protocol.md §7.2).
//
// params binds @name parameters; keys may be written with or without the leading @ and
// match case-insensitively. Values are nil, string, bool, int64 (or any Go integer),
// float64 (or float32), time.Time or time.Duration. An @parameter used in the
// expression but not bound, or bound to another type, is an error.
//
// Errors are *ParseError, whose message says where the problem is; expressions over the
// limits (1024 characters, nesting 64, 1024 tokens) wrap ErrTooLong, ErrTooDeep or
// ErrTooManyTokens. Constant subexpressions are evaluated here, so a type error or
// integer division by zero between constants is a *ParseError too.
func ParseFilter(expr string, params map[string]any) (*Filter, error) {
	p, err := newParser(expr, params)
	if err != nil {
		return nil, err
	}
	start := p.tok()
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.tok(); t.kind != tEOF {
		return nil, p.errAt(t, "expected AND, OR or the end of the expression")
	}
	if err := p.requirePredicate(root, start); err != nil {
		return nil, err
	}
	return &Filter{expr: expr, root: root}, nil
}

// Match evaluates the filter against m. It is true only when the filter is TRUE: unknown
// (from a missing user property or a NULL) counts as no match.
//
// An evaluation error — a system property m does not have, a type error such as
// user.s + 1 with a string s, an integer division by zero, a boolean-valued position
// holding a property that is not a boolean — is returned as an *EvalError with false;
// the caller dead-letters or drops the message as the subscription says.
func (f *Filter) Match(m Message) (bool, error) {
	t, err := f.root.test(m)
	return t == triTrue && err == nil, err
}

// String returns the expression the filter was compiled from.
func (f *Filter) String() string { return f.expr }

// Action is a compiled SqlRuleAction. It is immutable and safe for concurrent use.
type Action struct {
	expr  string
	stmts []statement
}

type statement struct {
	remove bool
	target *propNode
	x      node // SET only
}

// ParseAction compiles a SqlRuleAction (protocol.md §7.2): statements SET prop = expr and
// REMOVE prop, separated by ; or , (any run of them; a trailing one is allowed) or by nothing
// but whitespace, as the service accepts, at most 32 of them. The expression language, limits and params are those of ParseFilter; a SET
// value may also be a predicate, which stores a boolean.
//
// Errors are *ParseError; more than 32 statements wraps ErrTooManyStatements.
func ParseAction(expr string, params map[string]any) (*Action, error) {
	p, err := newParser(expr, params)
	if err != nil {
		return nil, err
	}
	a := &Action{expr: expr}
	for {
		t := p.tok()
		if len(a.stmts) == MaxStatements {
			e := p.errAt(t, fmt.Sprintf("more than %d statements", MaxStatements))
			e.Err = ErrTooManyStatements
			return nil, e
		}
		var s statement
		switch {
		case isWord(t, "SET"):
			p.take()
			if s.target, err = p.parseProperty(); err != nil {
				return nil, err
			}
			if err := p.expect(tEq, "= after the SET property"); err != nil {
				return nil, err
			}
			if s.x, err = p.parseOr(); err != nil {
				return nil, err
			}
		case isWord(t, "REMOVE"):
			p.take()
			s.remove = true
			if s.target, err = p.parseProperty(); err != nil {
				return nil, err
			}
		default:
			return nil, p.errAt(t, "expected SET or REMOVE")
		}
		a.stmts = append(a.stmts, s)
		if p.tok().kind == tEOF {
			return a, nil
		}
		if t := p.tok(); isWord(t, "SET") || isWord(t, "REMOVE") {
			continue // the separator is optional: SET a = 1 SET b = 2
		}
		if k := p.tok().kind; k != tSemi && k != tComma {
			return nil, p.errAt(p.tok(), "expected ; or , between statements")
		}
		for k := p.tok().kind; k == tSemi || k == tComma; k = p.tok().kind {
			p.take()
		}
		if p.tok().kind == tEOF {
			return a, nil
		}
	}
}

// Apply runs the statements in order on m, the subscription's copy of the message; each
// statement sees the changes of the ones before it.
//
// SET creates or replaces the property. Following the C# implicit conversion Service Bus
// applies, an int64 result stored over an existing float64 property becomes a float64;
// other values replace the old one whatever its type (the message's SetSystem may still
// refuse a type). REMOVE of a missing user property is a no-op.
//
// An expression referencing a missing system property, a type error, or SetSystem /
// RemoveSystem refusing the change stops Apply with an *EvalError (wrapping the
// message's error in the last case); statements before it have already been applied, so
// the caller should discard the copy and do what the subscription says.
func (a *Action) Apply(m MutableMessage) error {
	for _, s := range a.stmts {
		t := s.target
		if s.remove {
			if !t.sys {
				m.RemoveUser(t.name)
				continue
			}
			if err := m.RemoveSystem(t.name); err != nil {
				return &EvalError{Pos: t.pos, Msg: "REMOVE " + scopedName(true, t.name) + ": " + err.Error(), Err: err}
			}
			continue
		}
		v, err := s.x.eval(m)
		if err != nil {
			return err
		}
		x := v.toAny()
		if i, ok := x.(int64); ok {
			var old any
			if t.sys {
				old, _ = m.System(t.name)
			} else {
				old, _ = m.User(t.name)
			}
			if _, ok := old.(float64); ok {
				x = float64(i)
			}
		}
		if !t.sys {
			m.SetUser(t.name, x)
			continue
		}
		if err := m.SetSystem(t.name, x); err != nil {
			return &EvalError{Pos: t.pos, Msg: "SET " + scopedName(true, t.name) + ": " + err.Error(), Err: err}
		}
	}
	return nil
}

// String returns the expression the action was compiled from.
func (a *Action) String() string { return a.expr }
