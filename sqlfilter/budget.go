package sqlfilter

import (
	"errors"
	"fmt"
)

// ErrBudgetExceeded is wrapped by the *EvalError of a filter or action that ran out of its
// Budget on a message.
var ErrBudgetExceeded = errors.New("filter evaluation budget exceeded")

// DefaultBudget is the evaluation work one message may cost one subscription's rules, in
// units of about one character compared. It is far above what a filter within the limits
// needs on a message within the property limits (a 1,024-character LIKE pattern with _
// against a 64 KB property costs about 1.1 million), and low enough that a send never
// waits more than milliseconds for one subscription's filters.
const DefaultBudget = 4 << 20

// Budget bounds the work of evaluating filters and actions on one message. The work
// that depends on the data rather than on the expression's size is charged: LIKE
// (per character searched, and the compilation of a pattern that comes from the
// message), string concatenation and string comparison (per byte). Once a charge would
// take it below zero, evaluation stops with an *EvalError wrapping ErrBudgetExceeded.
//
// A Budget is used by one evaluation at a time; it is not safe for concurrent use.
type Budget struct {
	msg   Message // the message being evaluated, set by Match and Apply
	limit int64
	left  int64
}

// NewBudget returns a budget of units.
func NewBudget(units int64) *Budget { return &Budget{limit: units, left: units} }

// Reset restores the full budget, for the next message or subscription.
func (b *Budget) Reset() { b.left = b.limit }

// Used is how much has been charged since NewBudget or Reset, overrun included.
func (b *Budget) Used() int64 { return b.limit - b.left }

// charge takes n units and reports exhaustion as an evaluation error at pos.
func (b *Budget) charge(n int64, pos int) error {
	b.left -= n
	if b.left < 0 {
		return b.exceeded(pos)
	}
	return nil
}

func (b *Budget) exceeded(pos int) error {
	return &EvalError{Pos: pos, Err: ErrBudgetExceeded,
		Msg: fmt.Sprintf("evaluation needs more than the budget of %d units for one message", b.limit)}
}
