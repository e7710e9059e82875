package store

import (
	"errors"
	"fmt"
)

// Code classifies a domain error. handlers maps each code to one HTTP status and Service Bus
// error detail in a single table.
type Code string

// Error codes.
const (
	CodeBadRequest    Code = "bad_request"    // invalid input (a property, a name, a message)
	CodeNotFound      Code = "not_found"      // the entity does not exist
	CodeConflict      Code = "conflict"       // the entity already exists
	CodeLockLost      Code = "lock_lost"      // the lock token is unknown, expired or settled
	CodeTooLarge      Code = "too_large"      // the message exceeds the entity's size limit
	CodeQuotaExceeded Code = "quota_exceeded" // the entity is full
	CodeForbidden     Code = "forbidden"      // the entity's status forbids the operation
	CodeUnavailable   Code = "unavailable"    // the database cannot be reached
	CodeInternal      Code = "internal"
)

// Error is a domain error: a code for the machine and a message safe to show a client.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is makes errors.Is(err, ErrNotFound) match any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is. Each matches every *Error of its code.
var (
	ErrBadRequest  = &Error{Code: CodeBadRequest}
	ErrNotFound    = &Error{Code: CodeNotFound}
	ErrConflict    = &Error{Code: CodeConflict}
	ErrLockLost    = &Error{Code: CodeLockLost}
	ErrTooLarge    = &Error{Code: CodeTooLarge}
	ErrQuota       = &Error{Code: CodeQuotaExceeded}
	ErrForbidden   = &Error{Code: CodeForbidden}
	ErrUnavailable = &Error{Code: CodeUnavailable}
)

// ErrorCode returns the code of the first *Error in err's chain, or CodeInternal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the client-safe message of the first *Error in err's chain, or "".
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}

func badRequest(format string, args ...any) error {
	return &Error{Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}
