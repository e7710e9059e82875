package sqlfilter

import (
	"fmt"
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
