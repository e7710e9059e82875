package broker

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// SessionLock names a session a receiver holds: its id and the lock token it was accepted with.
type SessionLock struct {
	SessionID string
	Token     uuid.UUID
}

// Session is an accepted session.
type Session struct {
	ID          string
	LockToken   uuid.UUID
	LockedUntil time.Time
}

// SessionInfo describes a session for listing.
type SessionInfo struct {
	ID          string
	LockedUntil time.Time // zero when not locked
	HasMessages bool
	HasState    bool
}

// MaxSessionStateSize bounds a session's state.
const MaxSessionStateSize = 256 * 1024

// SessionLockLost is what every operation under a session lock answers once the lock is gone.
func SessionLockLost(e *Entity, sessionID string) error {
	return &Error{Code: CodeLockLost, Message: fmt.Sprintf(
		"The session lock has expired on the session '%s' of '%s', or it is held under another token. Accept the session again.", Clip(sessionID), e.Path)}
}

// CheckSessionLockID answers a session lock whose SessionId no session can have (not UTF-8
// text without NUL, which sends and accepts refuse, and which PostgreSQL's text cannot hold) as
// not held, without asking the database: there the id would fail the statement, and with it
// every settlement coalesced into it.
func CheckSessionLockID(e *Entity, sl *SessionLock) error {
	if sl != nil && !ValidText(sl.SessionID) {
		return SessionLockLost(e, sl.SessionID)
	}
	return nil
}

func CheckSessionful(e *Entity) error {
	switch {
	case e.Kind == KindTopic:
		return BadRequest("Sessions are accepted on queues and subscriptions, not on topic '%s'.", e.Path)
	case !e.Props.RequiresSession:
		return BadRequest("The entity '%s' does not require sessions; receive from it without a session.", e.Path)
	case e.Props.Status == StatusDisabled || e.Props.Status == StatusReceiveDisabled:
		return &Error{Code: CodeForbidden, Message: fmt.Sprintf(
			"SubCode=40301. The messaging entity '%s' is disabled for receiving (status %s).", e.Path, e.Props.Status)}
	}
	return nil
}

// CheckSessionState refuses a session state no lock can make right.
func CheckSessionState(e *Entity, sl SessionLock, state []byte) error {
	if err := CheckSessionLockID(e, &sl); err != nil {
		return err
	}
	if len(state) > MaxSessionStateSize {
		return &Error{Code: CodeTooLarge, Message: fmt.Sprintf("A session state may be at most %d bytes.", MaxSessionStateSize)}
	}
	return nil
}
