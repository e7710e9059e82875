// Package broker is sbgate's domain: entities and their properties, messages, rules, sessions,
// the limits and errors of Service Bus, and Store, the interface both protocol doors (REST in
// handlers/rest, AMQP in handlers/amqp) act through. It imports no database driver: package
// store implements Store on PostgreSQL.
package broker

import (
	"context"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// Store is what the protocol doors (REST in handlers/rest, AMQP in handlers/amqp) ask of the broker.
// store.Postgres implements it on PostgreSQL.
type Store interface {
	// CreateEntity creates a queue or topic at path (or a subscription when kind is
	// KindSubscription and path is "topic/Subscriptions/name"). Errors: ErrBadRequest (name or
	// properties invalid), ErrConflict (exists), ErrNotFound (the topic of a subscription).
	CreateEntity(ctx context.Context, kind Kind, path string, p Properties) (*Entity, error)
	// UpdateEntity replaces the description of an existing entity. Errors: ErrNotFound,
	// ErrBadRequest (invalid, an immutable property changed, or the entity is of another kind).
	UpdateEntity(ctx context.Context, kind Kind, path string, p Properties) (*Entity, error)
	// GetEntity returns the entity at path with its counts. Errors: ErrNotFound.
	GetEntity(ctx context.Context, path string) (*Entity, error)
	// DeleteEntity deletes the entity at path with its messages (and a topic's subscriptions).
	// Errors: ErrNotFound.
	DeleteEntity(ctx context.Context, path string) error
	// ListEntities lists entities of kind in path order, skipping skip and returning at most top,
	// with counts. For subscriptions, parent is the topic path.
	ListEntities(ctx context.Context, kind Kind, parent string, skip, top int) ([]*Entity, error)

	// CreateSubscription creates a subscription with rule as its first rule ($Default, every
	// message, when nil). Errors: as CreateEntity, and ErrBadRequest for an invalid rule.
	CreateSubscription(ctx context.Context, path string, p Properties, rule *Rule) (*Entity, error)
	// PutRule creates a rule on a subscription, or with update replaces one. Errors: ErrNotFound,
	// ErrConflict, ErrBadRequest (the filter or action does not compile; the message says where),
	// ErrQuota.
	PutRule(ctx context.Context, subPath string, r Rule, update bool) (*Rule, error)
	// GetRule returns a rule. Errors: ErrNotFound.
	GetRule(ctx context.Context, subPath, name string) (*Rule, error)
	// DeleteRule deletes a rule. Errors: ErrNotFound.
	DeleteRule(ctx context.Context, subPath, name string) error
	// ListRules lists a subscription's rules in name order. Errors: ErrNotFound.
	ListRules(ctx context.Context, subPath string, skip, top int) ([]*Rule, error)

	// Resolve returns the entity at path from a short-lived cache. Errors: ErrNotFound.
	Resolve(ctx context.Context, path string) (*Entity, error)
	// Send stores msgs in e atomically: all are committed when it returns nil, none otherwise.
	// Errors: ErrBadRequest, ErrTooLarge, ErrForbidden, ErrNotFound, ErrUnavailable.
	Send(ctx context.Context, e *Entity, msgs []Message) error
	// SendSequenced is Send that also returns, for each message, the number that cancels it
	// (CancelScheduled): its sequence number in e; for a message that has no row in e (sent to
	// a topic, whose copies are in its subscriptions, or moved on by auto-forwarding) the number
	// its copies share as their EnqueuedSequenceNumber; 0 for a duplicate, not stored.
	SendSequenced(ctx context.Context, e *Entity, msgs []Message) ([]int64, error)
	// Receive takes up to r.Max messages of r's target, waiting up to r.Wait for the first: it
	// returns every message available then, up to r.Max, in sequence order, or none when none
	// came in time. In PeekLock mode each is locked for the entity's LockDuration; in
	// ReceiveAndDelete mode they are removed. Errors: ErrBadRequest (r.Max out of
	// 1..MaxReceiveBatch, a topic, a session entity received without a session), ErrForbidden
	// (receiving disabled), ErrLockLost (the session lock is gone), ErrUnavailable.
	Receive(ctx context.Context, r ReceiveRequest) ([]*Message, error)
	// Settle completes, abandons, renews, defers or dead-letters locks of t's messages, each
	// request on its own; the results are in request order. A result's error is ErrLockLost when
	// the lock is not held (expired, settled, another message's, or outside t), ErrBadRequest for
	// a request t cannot take.
	Settle(ctx context.Context, t Target, reqs []SettleRequest) []SettleResult
	// CheckSend runs msgs through every check of a Send to e without storing them (a
	// transaction's sends are checked when made and stored when it commits). Errors: as Send.
	CheckSend(ctx context.Context, e *Entity, msgs []Message) error
	// ReserveSequenceNumbers draws n sequence numbers, for messages a transaction schedules
	// (TxSend.Numbers): their numbers are known before the commit.
	ReserveSequenceNumbers(ctx context.Context, n int) ([]int64, error)
	// CommitTransaction applies the sends and settlements of a client transaction in one
	// database transaction, all or nothing. Errors: ErrLockLost when a settlement's lock is no
	// longer held (nothing is applied), the errors of Send and Settle.
	CommitTransaction(ctx context.Context, w TxWork) error
	// Restore puts back, each as it was (sequence number, enqueue time, expiry, delivery count)
	// and receivable at once, messages a receive-and-delete removed from t that could not be
	// handed out: the receiver's link went before they were sent. It returns how many it put
	// back (one whose sequence number is in use again is not). Nothing a sender was told was
	// accepted is lost while the gateway lives.
	Restore(ctx context.Context, t Target, msgs []*Message) (int, error)
	// ReceiveDeferred takes the deferred messages of t with sequence numbers seqs, all or none,
	// and returns them in the order asked (a repeated one once, at its first place). When one
	// is not available nothing is taken (but a message past MaxDeliveryCount is still
	// dead-lettered). Errors: ErrNotFound naming the first missing one, ErrBadRequest (more than
	// MaxReceiveBatch), ErrLockLost (the session lock is gone).
	ReceiveDeferred(ctx context.Context, t Target, seqs []int64, mode ReceiveMode) ([]*Message, error)
	// Browse lists up to n messages of a subqueue from sequence number from on, without locks.
	Browse(ctx context.Context, e *Entity, sq SubQueue, from int64, n int) ([]*Message, error)
	// CancelScheduled removes messages still waiting for their scheduled time, all or none.
	// Errors: ErrNotFound naming those not waiting, ErrBadRequest (more than MaxCancelBatch).
	CancelScheduled(ctx context.Context, e *Entity, seqs []int64) error
	// Purge deletes every message of a subqueue and returns how many.
	Purge(ctx context.Context, e *Entity, sq SubQueue) (int64, error)
	// Resubmit moves dead-lettered messages back into the entity as new messages: the one with
	// sequence number seq, or (seq 0) every one match accepts. Errors: ErrNotFound for a seq.
	Resubmit(ctx context.Context, e *Entity, seq int64, match func(*Message) bool) (int64, error)

	// AcceptSession locks the session of a session entity named sessionID, "" included (it need
	// not hold messages). Errors: ErrBadRequest, ErrConflict (locked by another receiver).
	AcceptSession(ctx context.Context, e *Entity, sessionID string) (*Session, error)
	// AcceptNextSession locks the session of a session entity whose messages have waited
	// longest, waiting up to wait for one (nil, nil when none came). Errors: ErrBadRequest.
	AcceptNextSession(ctx context.Context, e *Entity, wait time.Duration) (*Session, error)
	// RenewSessionLock extends a session lock. Errors: ErrLockLost.
	RenewSessionLock(ctx context.Context, e *Entity, sl SessionLock) (time.Time, error)
	// ReleaseSession gives a session up. Errors: ErrLockLost.
	ReleaseSession(ctx context.Context, e *Entity, sl SessionLock) error
	// SessionState and SetSessionState read and replace a session's state under its lock.
	// Errors: ErrLockLost, ErrTooLarge.
	SessionState(ctx context.Context, e *Entity, sl SessionLock) ([]byte, error)
	SetSessionState(ctx context.Context, e *Entity, sl SessionLock, state []byte) error
	// ListSessions lists sessions holding messages or state, or locked.
	ListSessions(ctx context.Context, e *Entity, skip, top int) ([]SessionInfo, error)
	// ListSessionsUpdatedSince lists the ids of the sessions whose state was set after since.
	ListSessionsUpdatedSince(ctx context.Context, e *Entity, since time.Time, skip, top int) ([]string, error)
	// NamespaceKey returns the namespace-level key named name, creating it with a random key and
	// Manage rights when create is true and it does not exist yet.
	NamespaceKey(ctx context.Context, name string, create bool) (NamespaceKey, error)
	// NamespaceKeys lists the namespace-level keys kept in the database.
	NamespaceKeys(ctx context.Context) ([]NamespaceKey, error)
	// CreateNamespaceKey, RotateNamespaceKey and DeleteNamespaceKey manage them (Errors:
	// ErrConflict, ErrNotFound, ErrBadRequest).
	CreateNamespaceKey(ctx context.Context, name string, rights []string) (NamespaceKey, error)
	RotateNamespaceKey(ctx context.Context, name string, secondary bool) (NamespaceKey, error)
	DeleteNamespaceKey(ctx context.Context, name string) error
	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
}

// Target is where a message operation acts: an entity (a queue or subscription), its main queue
// or its dead-letter subqueue, and inside an accepted session the session, whose lock must be
// held.
type Target struct {
	Entity   *Entity
	SubQueue SubQueue
	Session  *SessionLock // nil outside a session
}

// ReceiveRequest asks for up to Max messages of a target, waiting up to Wait for the first.
type ReceiveRequest struct {
	Target
	Mode ReceiveMode
	Max  int
	Wait time.Duration
}

// ReceiveMode selects peek-lock or receive-and-delete.
type ReceiveMode int

// Receive modes.
const (
	PeekLock ReceiveMode = iota
	ReceiveAndDelete
)

// Settlement is what to do with a locked message.
type Settlement int

// Settlements.
const (
	Complete Settlement = iota
	Abandon
	RenewLock
	// Defer sets a locked message aside: it stays in the entity but is received only by its
	// sequence number (ReceiveDeferred).
	Defer
	// DeadLetter moves a locked message to the dead-letter subqueue with a reason and a
	// description.
	DeadLetter
	// Release unlocks a message as if it had not been delivered: unlike Abandon, the delivery
	// does not count (AMQP's released outcome, which the SDKs send for messages they took but
	// never gave the application).
	Release
)

// SettleRequest is one lock to settle and how.
type SettleRequest struct {
	Op    Settlement
	Token uuid.UUID
	// ID, when not empty, is the sequence number or MessageId the client addressed the message
	// by: the lock must be that message's. The token alone names its message.
	ID string
	// Reason and Description go with DeadLetter.
	Reason, Description string
	// PropertiesToModify, with Abandon, Defer or DeadLetter, are set on the message in the
	// statement that settles it: each replaces the message's user property of the same name
	// (names compare exactly, as AMQP's do) or is added. The message's properties as modified
	// must pass the checks of a send (types, text, count and sizes, the entity's message size
	// limit); a request that would break them fails alone with ErrBadRequest and changes
	// nothing. With any other settlement they are a bad request.
	PropertiesToModify UserProperties
}

// SettleResult is the outcome of one SettleRequest: the new lock expiry for RenewLock, or the
// error (ErrLockLost when the lock is gone, ErrBadRequest for an invalid request).
type SettleResult struct {
	LockedUntil time.Time
	Err         error
}

// NamespaceKey is a namespace-level shared access policy.
type NamespaceKey struct {
	Name         string
	PrimaryKey   string
	SecondaryKey string
	Rights       []string
	Created      bool // true when this call generated it
}

// String names a target in errors: the entity path, its subqueue, the session.
func (t Target) String() string {
	p := t.Entity.Path
	if t.SubQueue == SubQueueDeadLetter {
		p += "/$DeadLetterQueue"
	}
	if t.Session != nil {
		p += " (session " + strconv.Quote(Clip(t.Session.SessionID)) + ")"
	}
	return p
}
