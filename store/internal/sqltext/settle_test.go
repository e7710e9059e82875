package sqltext

import (
	"strings"
	"testing"

	"github.com/sbgate/sbgate/broker"
)

// TestSettleStatementsWithoutModifications: the statements of settlements that modify no
// properties (the hot path) are those of the modifying ones without what modifying adds, and
// neither read nor write user properties or sizes.
func TestSettleStatementsWithoutModifications(t *testing.T) {
	added := strings.NewReplacer(", @props::jsonb[], @size::int[]", "", ", props, size", "",
		"user_props = r.props, size = r.size, ", "", " AND r.props IS NOT NULL", "")
	for op, plain := range settleStatements {
		for _, word := range []string{"user_props", "props", "size = "} {
			if strings.Contains(plain, word) {
				t.Errorf("the %s statement mentions %q", op, word)
			}
		}
		modify, ok := modifyStatements[op]
		if !ok {
			if op == broker.Abandon || op == broker.Defer || op == broker.DeadLetter {
				t.Errorf("%s has no modifying statement", op)
			}
			continue
		}
		if got := added.Replace(modify); got != plain {
			t.Errorf("the modifying %s statement, without what modifying adds:\n%s\nwant the plain one:\n%s", op, got, plain)
		}
		if !strings.Contains(modify, "user_props = r.props") || !strings.Contains(modify, "r.props IS NOT NULL") {
			t.Errorf("the modifying %s statement does not write only checked properties:\n%s", op, modify)
		}
	}
	for _, op := range []broker.Settlement{broker.Complete, broker.RenewLock, broker.Release} {
		if _, ok := modifyStatements[op]; ok {
			t.Errorf("%s has a modifying statement", op)
		}
	}
}
