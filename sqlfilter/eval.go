package sqlfilter

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// node is one operation of a compiled expression. Nodes are immutable after parsing, so
// a compiled Filter or Action is safe for concurrent use. Evaluation returns a value
// struct rather than an interface so that the common filters run without allocating.
//
// Every node can produce a value (eval) and a truth value (test). Predicates implement
// test and derive eval from it; value nodes do the reverse. AND, OR, NOT and Match call
// test, so the boolean skeleton of a filter never copies value structs.
type node interface {
	eval(bg *Budget) (value, error)
	test(bg *Budget) (tri, error)
}

// truth converts a value in a predicate position. The parser rejects constants and
// arithmetic there, so only properties can fail, and only at run time.
func truth(v value, err error, pos int) (tri, error) {
	if err != nil {
		return triUnknown, err
	}
	switch v.k {
	case kBool:
		return triOf(v.i != 0), nil
	case kNull:
		return triUnknown, nil
	}
	return triUnknown, &EvalError{Pos: pos, Msg: "expected a boolean, got " + v.k.String()}
}

// propRef is implemented by the nodes that read a property, so that IS NULL and EXISTS
// can ask "is it there" without the missing-system-property error.
type propRef interface {
	lookup(bg *Budget) (v value, present bool, err error)
}

// constNode is a constant, a bound parameter or a folded constant subtree. pred records
// that it was folded from a predicate, so NULL = NULL still counts as one.
type constNode struct {
	v    value
	pred bool
}

func (n *constNode) eval(*Budget) (value, error) { return n.v, nil }
func (n *constNode) test(*Budget) (tri, error)   { return truth(n.v, nil, 1) }

// propNode reads sys.name or user.name. Known system names are stored in canonical
// spelling.
type propNode struct {
	sys  bool
	name string
	pos  int
}

func readProperty(m Message, sys bool, name string, pos int) (value, bool, error) {
	var x any
	var ok bool
	if sys {
		x, ok = m.System(name)
	} else {
		x, ok = m.User(name)
	}
	if !ok {
		return nullValue, false, nil
	}
	v, ok := valueOf(x)
	if !ok {
		return nullValue, true, &EvalError{Pos: pos, Msg: fmt.Sprintf("property %s has unsupported type %T", scopedName(sys, name), x)}
	}
	return v, true, nil
}

func scopedName(sys bool, name string) string {
	if sys {
		return "sys." + name
	}
	return "user." + name
}

func missingSystem(name string, pos int) error {
	return &EvalError{Pos: pos, Msg: "system property " + name + " does not exist"}
}

func (n *propNode) lookup(bg *Budget) (value, bool, error) {
	return readProperty(bg.msg, n.sys, n.name, n.pos)
}

// eval makes a missing user property NULL (unknown) and a missing system property an
// error, as protocol.md §7.2 and the Service Bus docs require.
func (n *propNode) eval(bg *Budget) (value, error) {
	v, ok, err := readProperty(bg.msg, n.sys, n.name, n.pos)
	if !ok && err == nil && n.sys {
		return v, missingSystem(n.name, n.pos)
	}
	return v, err
}

func (n *propNode) test(bg *Budget) (tri, error) {
	v, err := n.eval(bg)
	return truth(v, err, n.pos)
}

// dynPropNode is property(name) / p(name) with a name only known per message. The name
// is "sys.X", "user.X" or plain "X" (user scope), as it would be written in a filter but
// without delimiters.
type dynPropNode struct {
	arg node
	pos int
}

func splitScope(name string) (sys bool, rest string) {
	if len(name) > 4 && strings.EqualFold(name[:4], "sys.") {
		return true, canonicalSystemName(name[4:])
	}
	if len(name) > 5 && strings.EqualFold(name[:5], "user.") {
		return false, name[5:]
	}
	return false, name
}

func (n *dynPropNode) resolve(bg *Budget) (sys bool, name string, null bool, err error) {
	a, err := n.arg.eval(bg)
	if err != nil {
		return false, "", false, err
	}
	switch a.k {
	case kNull:
		return false, "", true, nil
	case kString:
		sys, name = splitScope(a.s)
		return sys, name, false, nil
	}
	return false, "", false, &EvalError{Pos: n.pos, Msg: "property() needs a string name, got " + a.k.String()}
}

func (n *dynPropNode) lookup(bg *Budget) (value, bool, error) {
	sys, name, null, err := n.resolve(bg)
	if err != nil || null {
		return nullValue, false, err
	}
	return readProperty(bg.msg, sys, name, n.pos)
}

func (n *dynPropNode) test(bg *Budget) (tri, error) {
	v, err := n.eval(bg)
	return truth(v, err, n.pos)
}

func (n *dynPropNode) eval(bg *Budget) (value, error) {
	sys, name, null, err := n.resolve(bg)
	if err != nil || null {
		return nullValue, err
	}
	v, ok, err := readProperty(bg.msg, sys, name, n.pos)
	if !ok && err == nil && sys {
		return v, missingSystem(name, n.pos)
	}
	return v, err
}

type newidNode struct{}

func (newidNode) eval(*Budget) (value, error) { return stringValue(uuid.NewString()), nil }
func (n newidNode) test(bg *Budget) (tri, error) {
	v, err := n.eval(bg)
	return truth(v, err, 1)
}

type notNode struct {
	x node
}

func (n *notNode) eval(bg *Budget) (value, error) { return evalTest(n, bg) }

func (n *notNode) test(bg *Budget) (tri, error) {
	t, err := n.x.test(bg)
	return t.not(), err
}

func evalTest(n node, bg *Budget) (value, error) {
	t, err := n.test(bg)
	return t.value(), err
}

// andNode and orNode implement the three-valued truth tables of §7.2 and short-circuit:
// when the left side decides the result, the right side is not evaluated, so its errors
// (a missing system property, say) are not raised.
type andNode struct{ l, r node }

func (n *andNode) eval(bg *Budget) (value, error) { return evalTest(n, bg) }

func (n *andNode) test(bg *Budget) (tri, error) {
	a, err := n.l.test(bg)
	if err != nil || a == triFalse {
		return a, err
	}
	b, err := n.r.test(bg)
	if err != nil || b == triFalse {
		return b, err
	}
	if a == triUnknown {
		return a, nil
	}
	return b, nil
}

type orNode struct{ l, r node }

func (n *orNode) eval(bg *Budget) (value, error) { return evalTest(n, bg) }

func (n *orNode) test(bg *Budget) (tri, error) {
	a, err := n.l.test(bg)
	if err != nil || a == triTrue {
		return a, err
	}
	b, err := n.r.test(bg)
	if err != nil || b == triTrue {
		return b, err
	}
	if a == triUnknown {
		return a, nil
	}
	return b, nil
}

type cmpNode struct {
	o    op
	l, r node
}

func (n *cmpNode) eval(bg *Budget) (value, error) { return evalTest(n, bg) }

func (n *cmpNode) test(bg *Budget) (tri, error) {
	a, err := n.l.eval(bg)
	if err != nil {
		return triUnknown, err
	}
	b, err := n.r.eval(bg)
	if err != nil {
		return triUnknown, err
	}
	if (a.k == kString || a.k == kBinary) && a.k == b.k {
		if err := bg.charge(int64(min(len(a.s), len(b.s))), 1); err != nil {
			return triUnknown, err
		}
	}
	return compare(n.o, &a, &b), nil
}

type arithNode struct {
	o    op
	l, r node
	pos  int
}

func (n *arithNode) eval(bg *Budget) (value, error) {
	a, err := n.l.eval(bg)
	if err != nil {
		return a, err
	}
	b, err := n.r.eval(bg)
	if err != nil {
		return b, err
	}
	if a.k == kString && b.k == kString {
		if err := bg.charge(int64(len(a.s)+len(b.s)), n.pos); err != nil {
			return a, err
		}
	}
	v, msg := arith(n.o, a, b)
	if msg != "" {
		return v, &EvalError{Pos: n.pos, Msg: msg}
	}
	return v, nil
}

func (n *arithNode) test(bg *Budget) (tri, error) {
	v, err := n.eval(bg)
	return truth(v, err, n.pos)
}

type unaryNode struct {
	o   op
	x   node
	pos int
}

func (n *unaryNode) eval(bg *Budget) (value, error) {
	a, err := n.x.eval(bg)
	if err != nil {
		return a, err
	}
	v, msg := negate(n.o, a)
	if msg != "" {
		return v, &EvalError{Pos: n.pos, Msg: msg}
	}
	return v, nil
}

func (n *unaryNode) test(bg *Budget) (tri, error) {
	v, err := n.eval(bg)
	return truth(v, err, n.pos)
}

// isNullNode is true for a missing property or a null value. A missing system property
// counts as missing here rather than as an error: IS NULL is how a filter asks whether
// something is there, and an error would make the question unaskable.
type isNullNode struct {
	x   node
	not bool
}

func (n *isNullNode) eval(bg *Budget) (value, error) { return evalTest(n, bg) }

func (n *isNullNode) test(bg *Budget) (tri, error) {
	var v value
	var err error
	if p, ok := n.x.(propRef); ok {
		v, _, err = p.lookup(bg)
	} else {
		v, err = n.x.eval(bg)
	}
	if err != nil {
		return triUnknown, err
	}
	return triOf((v.k == kNull) != n.not), nil
}

// existsNode is EXISTS(property). For a user property it is true when the key is
// present, even with a null value. A system property has no "absent" state in Service
// Bus — an unset one reads as null — so for sys scope EXISTS means "is set".
type existsNode struct{ p *propNode }

func (n *existsNode) eval(bg *Budget) (value, error) { return evalTest(n, bg) }

func (n *existsNode) test(bg *Budget) (tri, error) {
	v, ok, err := n.p.lookup(bg)
	if err != nil {
		return triUnknown, err
	}
	if n.p.sys {
		return triOf(ok && v.k != kNull), nil
	}
	return triOf(ok), nil
}

// inNode is x [NOT] IN (e, …), defined as in SQL-92 as x = e1 OR x = e2 …: unknown when x
// is null, TRUE on the first equal element, otherwise unknown if any element was null,
// otherwise FALSE. NOT IN is the negation, so x NOT IN (1, NULL) is never TRUE.
type inNode struct {
	x      node
	items  []node
	consts []value // the items, when all are constants (the usual case)
	not    bool
}

func (n *inNode) eval(bg *Budget) (value, error) { return evalTest(n, bg) }

func (n *inNode) test(bg *Budget) (tri, error) {
	v, err := n.x.eval(bg)
	if err != nil || v.k == kNull {
		return triUnknown, err
	}
	sawNull := false
	if n.consts != nil {
		for i := range n.consts {
			w := &n.consts[i]
			if w.k == kNull {
				sawNull = true
			} else if compare(opEq, &v, w) == triTrue {
				return triOf(!n.not), nil
			}
		}
	} else {
		for _, it := range n.items {
			w, err := it.eval(bg)
			if err != nil {
				return triUnknown, err
			}
			if w.k == kNull {
				sawNull = true
			} else if compare(opEq, &v, &w) == triTrue {
				return triOf(!n.not), nil
			}
		}
	}
	if sawNull {
		return triUnknown, nil
	}
	return triOf(n.not), nil
}

// likeNode is x [NOT] LIKE pattern [ESCAPE c]. With a constant pattern (the usual case)
// the pattern is compiled once by the parser.
type likeNode struct {
	x    node
	patN node         // the pattern expression
	escN node         // the escape expression, nil without ESCAPE
	pat  *likePattern // patN and escN compiled, when both are non-null constants
	not  bool
	pp   int // position of the pattern, for errors
}

func (n *likeNode) eval(bg *Budget) (value, error) { return evalTest(n, bg) }

func (n *likeNode) test(bg *Budget) (tri, error) {
	v, err := n.x.eval(bg)
	if err != nil {
		return triUnknown, err
	}
	p := n.pat
	if p == nil {
		pv, err := n.patN.eval(bg)
		if err != nil {
			return triUnknown, err
		}
		ev := value{k: kString}
		if n.escN != nil {
			if ev, err = n.escN.eval(bg); err != nil {
				return triUnknown, err
			}
		}
		if pv.k == kNull || ev.k == kNull {
			return triUnknown, nil
		}
		if pv.k == kString {
			if err := bg.charge(likeCompileCost(pv.s), n.pp); err != nil {
				return triUnknown, err
			}
		}
		var msg string
		if p, msg = likeFromValues(pv, ev, n.escN != nil); msg != "" {
			return triUnknown, &EvalError{Pos: n.pp, Msg: msg}
		}
	}
	if v.k == kNull {
		return triUnknown, nil
	}
	if v.k != kString {
		// Like a comparison of incomparable types: FALSE, so NOT LIKE is TRUE.
		return triOf(n.not), nil
	}
	matched, exhausted := p.match(v.s, &bg.left)
	if exhausted {
		return triUnknown, bg.exceeded(n.pp)
	}
	return triOf(matched != n.not), nil
}

// likeFromValues compiles a pattern from evaluated operands; both must be strings and the
// escape, when given, exactly one character.
func likeFromValues(pv, ev value, hasEsc bool) (*likePattern, string) {
	if pv.k != kString {
		return nil, "LIKE pattern must be a string, got " + pv.k.String()
	}
	esc := rune(-1)
	if hasEsc {
		if ev.k != kString {
			return nil, "ESCAPE must be a string, got " + ev.k.String()
		}
		rs := []rune(ev.s)
		if len(rs) != 1 {
			return nil, fmt.Sprintf("ESCAPE must be one character, got %d", len(rs))
		}
		esc = rs[0]
	}
	return compileLike(pv.s, esc)
}
