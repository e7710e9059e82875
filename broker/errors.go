package broker

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Code classifies a domain error. The REST door (handlers/rest) maps each code to one HTTP status and Service Bus
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

// BadRequest is the 400 error every package returns for bad client input; its message is
// shown to the client, so client-supplied values in it go through Clip.
func BadRequest(format string, args ...any) error {
	return &Error{Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// clipLimit is how many bytes of a client-supplied value an error message quotes.
const clipLimit = 64

// Clip shortens a client-supplied value quoted in an error message or log line, so that a
// hostile request cannot make the answer as large as itself, and makes it text every format of
// an answer can carry (XML, JSON, AMQP strings): invalid UTF-8 and NUL become U+FFFD.
func Clip(s string) string {
	if len(s) > 2*clipLimit {
		s = s[:2*clipLimit] // what is cut anyway; a rune split here is invalid, and replaced
	}
	return ClipTo(strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD"), clipLimit)
}

// ClipTo keeps at most limit bytes of s and marks a cut with "...". It never cuts a UTF-8
// sequence: the cut moves back to the start of the rune it would split. It is the one clipper;
// Clip is its use for error messages.
func ClipTo(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func NotFound(format string, args ...any) error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}
