package amqp

import (
	"errors"
	"fmt"
)

// Error is the AMQP error type (part 2, section 2.8.14): what close, end, detach and the
// rejected outcome carry. It implements error.
type Error struct {
	Condition   Symbol
	Description string
	Info        Map
}

func (e *Error) Error() string {
	if e.Description == "" {
		return "amqp: " + string(e.Condition)
	}
	return fmt.Sprintf("amqp: %s: %s", e.Condition, e.Description)
}

// Errorf returns an *Error with condition and a formatted description.
func Errorf(condition Symbol, format string, args ...any) *Error {
	return &Error{Condition: condition, Description: fmt.Sprintf(format, args...)}
}

// Error conditions of the specification (part 2, sections 2.8.15 to 2.8.18).
const (
	ErrCondInternalError         Symbol = "amqp:internal-error"
	ErrCondNotFound              Symbol = "amqp:not-found"
	ErrCondUnauthorizedAccess    Symbol = "amqp:unauthorized-access"
	ErrCondDecodeError           Symbol = "amqp:decode-error"
	ErrCondResourceLimitExceeded Symbol = "amqp:resource-limit-exceeded"
	ErrCondNotAllowed            Symbol = "amqp:not-allowed"
	ErrCondInvalidField          Symbol = "amqp:invalid-field"
	ErrCondNotImplemented        Symbol = "amqp:not-implemented"
	ErrCondResourceLocked        Symbol = "amqp:resource-locked"
	ErrCondPreconditionFailed    Symbol = "amqp:precondition-failed"
	ErrCondResourceDeleted       Symbol = "amqp:resource-deleted"
	ErrCondIllegalState          Symbol = "amqp:illegal-state"
	ErrCondFrameSizeTooSmall     Symbol = "amqp:frame-size-too-small"

	ErrCondConnectionForced Symbol = "amqp:connection:forced"
	ErrCondFramingError     Symbol = "amqp:connection:framing-error"
	ErrCondConnRedirect     Symbol = "amqp:connection:redirect"

	ErrCondWindowViolation  Symbol = "amqp:session:window-violation"
	ErrCondErrantLink       Symbol = "amqp:session:errant-link"
	ErrCondHandleInUse      Symbol = "amqp:session:handle-in-use"
	ErrCondUnattachedHandle Symbol = "amqp:session:unattached-handle"

	ErrCondDetachForced          Symbol = "amqp:link:detach-forced"
	ErrCondTransferLimitExceeded Symbol = "amqp:link:transfer-limit-exceeded"
	ErrCondMessageSizeExceeded   Symbol = "amqp:link:message-size-exceeded"
	ErrCondLinkRedirect          Symbol = "amqp:link:redirect"
	ErrCondStolen                Symbol = "amqp:link:stolen"
)

// Errors returned by the engine's methods.
var (
	// ErrServerClosed is returned by Serve and ServeConn after Shutdown or Close.
	ErrServerClosed = errors.New("amqp: server closed")
	// ErrConnClosed is returned by methods of a connection, or of its sessions, links and
	// deliveries, once the connection is closing or closed.
	ErrConnClosed = errors.New("amqp: connection closed")
	// ErrSessionEnded is returned by methods of a session, or of its links and deliveries,
	// once the session is ending or ended.
	ErrSessionEnded = errors.New("amqp: session ended")
	// ErrLinkDetached is returned by methods of a link, or of its deliveries, once the link is
	// detaching or detached.
	ErrLinkDetached = errors.New("amqp: link detached")
	// ErrAnswered is returned by AttachRequest methods after the request was answered.
	ErrAnswered = errors.New("amqp: attach already answered")
	// ErrWrongRole is returned when an attach is accepted with the role the peer took.
	ErrWrongRole = errors.New("amqp: wrong link role")
	// ErrNoCredit is returned by SenderLink.Send when the peer has granted no credit.
	ErrNoCredit = errors.New("amqp: no link credit")
	// ErrMessageTooLarge is returned by SenderLink.Send for a payload larger than the
	// peer's max-message-size.
	ErrMessageTooLarge = errors.New("amqp: message larger than the peer accepts")
	// ErrSettled is returned when settling a delivery that is already settled.
	ErrSettled = errors.New("amqp: delivery already settled")
	// ErrInvalidTag is returned by SenderLink.Send for a delivery tag longer than 32 bytes.
	ErrInvalidTag = errors.New("amqp: delivery tag longer than 32 bytes")
)
