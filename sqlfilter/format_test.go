package sqlfilter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// String renders a value for test failures.
func (v value) String() string {
	switch v.k {
	case kNull:
		return "NULL"
	case kBool:
		if v.i != 0 {
			return "TRUE"
		}
		return "FALSE"
	case kString:
		return "'" + strings.ReplaceAll(v.s, "'", "''") + "'"
	}
	return fmt.Sprint(v.toAny())
}

// format renders a compiled expression fully parenthesised; tests use it to check
// precedence.
func format(n node) string {
	switch n := n.(type) {
	case *constNode:
		return n.v.String()
	case *propNode:
		return scopedName(n.sys, n.name)
	case *dynPropNode:
		return "property(" + format(n.arg) + ")"
	case newidNode:
		return "newid()"
	case *notNode:
		return "(NOT " + format(n.x) + ")"
	case *andNode:
		return "(" + format(n.l) + " AND " + format(n.r) + ")"
	case *orNode:
		return "(" + format(n.l) + " OR " + format(n.r) + ")"
	case *cmpNode:
		return "(" + format(n.l) + " " + n.o.String() + " " + format(n.r) + ")"
	case *arithNode:
		return "(" + format(n.l) + " " + n.o.String() + " " + format(n.r) + ")"
	case *unaryNode:
		return "(" + n.o.String() + format(n.x) + ")"
	case *isNullNode:
		if n.not {
			return "(" + format(n.x) + " IS NOT NULL)"
		}
		return "(" + format(n.x) + " IS NULL)"
	case *existsNode:
		return "EXISTS(" + format(n.p) + ")"
	case *inNode:
		var b strings.Builder
		b.WriteString("(" + format(n.x))
		if n.not {
			b.WriteString(" NOT")
		}
		b.WriteString(" IN (")
		for i, it := range n.items {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(format(it))
		}
		b.WriteString("))")
		return b.String()
	case *likeNode:
		s := "(" + format(n.x)
		if n.not {
			s += " NOT"
		}
		s += " LIKE " + format(n.patN)
		if n.escN != nil {
			s += " ESCAPE " + format(n.escN)
		}
		return s + ")"
	}
	return fmt.Sprintf("%T", n)
}

// source writes a compiled expression back as filter text that parses to the same tree:
// fully parenthesised, names delimited, constants as literals. ok is false for what the
// language has no literal for (a date or time span bound as a parameter, NaN, ±Inf).
func source(n node) (s string, ok bool) {
	defer func() {
		if r := recover(); r == errNoLiteral {
			s, ok = "", false
		} else if r != nil {
			panic(r)
		}
	}()
	return src(n), true
}

var errNoLiteral = new(int)

func delimited(name string) string { return "[" + strings.ReplaceAll(name, "]", "]]") + "]" }

func literal(v value, pred bool) string {
	if pred {
		switch {
		case v.k == kNull:
			return "(NULL = NULL)"
		case v.i != 0:
			return "(1 = 1)"
		}
		return "(1 = 0)"
	}
	switch v.k {
	case kNull, kBool, kString:
		return v.String()
	case kInt:
		if v.i < 0 {
			return "(" + strconv.FormatInt(v.i, 10) + ")"
		}
		return strconv.FormatInt(v.i, 10)
	case kFloat:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			panic(errNoLiteral)
		}
		s := strconv.FormatFloat(math.Abs(v.f), 'E', -1, 64)
		if math.Signbit(v.f) {
			return "(-" + s + ")"
		}
		return s
	}
	panic(errNoLiteral)
}

func src(n node) string {
	switch n := n.(type) {
	case *constNode:
		return literal(n.v, n.pred)
	case *propNode:
		switch {
		case n.sys:
			return "sys." + delimited(n.name)
		case n.name == "":
			return "property('')"
		}
		return "user." + delimited(n.name)
	case *dynPropNode:
		return "property(" + src(n.arg) + ")"
	case newidNode:
		return "newid()"
	case *notNode:
		return "(NOT " + src(n.x) + ")"
	case *andNode:
		return "(" + src(n.l) + " AND " + src(n.r) + ")"
	case *orNode:
		return "(" + src(n.l) + " OR " + src(n.r) + ")"
	case *cmpNode:
		return "(" + src(n.l) + " " + n.o.String() + " " + src(n.r) + ")"
	case *arithNode:
		return "(" + src(n.l) + " " + n.o.String() + " " + src(n.r) + ")"
	case *unaryNode:
		return "(" + n.o.String() + src(n.x) + ")"
	case *isNullNode:
		if n.not {
			return "(" + src(n.x) + " IS NOT NULL)"
		}
		return "(" + src(n.x) + " IS NULL)"
	case *existsNode:
		return "EXISTS(" + src(n.p) + ")"
	case *inNode:
		var b strings.Builder
		b.WriteString("(" + src(n.x))
		if n.not {
			b.WriteString(" NOT")
		}
		b.WriteString(" IN (")
		for i, it := range n.items {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(src(it))
		}
		b.WriteString("))")
		return b.String()
	case *likeNode:
		s := "(" + src(n.x)
		if n.not {
			s += " NOT"
		}
		s += " LIKE " + src(n.patN)
		if n.escN != nil {
			s += " ESCAPE " + src(n.escN)
		}
		return s + ")"
	}
	panic(fmt.Sprintf("source: unknown node %T", n))
}

// actionSource writes a compiled action back as text.
func actionSource(a *Action) (string, bool) {
	var parts []string
	for _, s := range a.stmts {
		target, _ := source(s.target)
		if s.remove {
			parts = append(parts, "REMOVE "+target)
			continue
		}
		x, ok := source(s.x)
		if !ok {
			return "", false
		}
		parts = append(parts, "SET "+target+" = "+x)
	}
	return strings.Join(parts, "; "), true
}
