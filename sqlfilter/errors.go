package sqlfilter

import (
	"errors"
	"fmt"
)

// Sentinels wrapped by a *ParseError when an expression breaks one of the limits of
// protocol.md §7.1. They let the caller tell "too big" from "malformed" with errors.Is
// without parsing messages.
var (
	ErrTooLong           = errors.New("expression too long")
	ErrTooDeep           = errors.New("expression nested too deeply")
	ErrTooManyTokens     = errors.New("expression has too many tokens")
	ErrTooManyStatements = errors.New("action has too many statements")
)

// Limits. Lengths are counted in characters (Unicode code points), which matches the
// service's UTF-16 count for everything outside the supplementary planes.
const (
	MaxExpressionLength = 1024
	MaxDepth            = 64
	MaxTokens           = 1024
	MaxStatements       = 32
	// MaxParameterLength caps a string @parameter, like the expression it stands in.
	MaxParameterLength = 1024
	// maxStringLength caps strings built by + so that an action cannot double a property
	// 32 times and exhaust memory; it is the whole-message property budget of §7.1.
	maxStringLength = 64 * 1024
)

// ParseError reports an expression that cannot be compiled. Its text is meant for the
// 400 response detail at rule creation, so it says where the problem is.
type ParseError struct {
	// Pos is the 1-based character position of the offending token; one past the last
	// character when the input ended too early.
	Pos int
	// Near is the text of the offending token, "" at end of input.
	Near string
	Msg  string
	// Err is one of the limit sentinels (ErrTooLong, …) or nil.
	Err error
}

func (e *ParseError) Error() string {
	if e.Near == "" {
		return fmt.Sprintf("syntax error at position %d (end of input): %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("syntax error at position %d near %q: %s", e.Pos, e.Near, e.Msg)
}

func (e *ParseError) Unwrap() error { return e.Err }

// EvalError reports a filter or action that failed on one particular message: a
// reference to a system property the message does not have, a type error the parser
// could not see, an integer division by zero, or a system property the message refused
// to change. The caller dead-letters or drops the message as the subscription says
// (DeadLetteringOnFilterEvaluationExceptions); the rule itself stays valid.
type EvalError struct {
	// Pos is the 1-based character position in the expression of the failing operation.
	Pos int
	Msg string
	// Err is the error returned by MutableMessage.SetSystem or RemoveSystem, if that is
	// what failed.
	Err error
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("evaluation error at position %d: %s", e.Pos, e.Msg)
}

func (e *EvalError) Unwrap() error { return e.Err }
