package store

import (
	"time"

	"github.com/google/uuid"
)

// State is where a message is in its entity.
type State int16

// Message states; the numbers are stored in messages.state, and SQL names them by sqlActive,
// sqlDeferred and sqlDeadLetter. A scheduled message is active with a future visible time.
const (
	StateActive     State = 0
	StateDeferred   State = 1
	StateDeadLetter State = 2
)

// SubQueue selects the main queue of an entity or its dead-letter subqueue.
type SubQueue int

// Subqueues.
const (
	SubQueueMain SubQueue = iota
	SubQueueDeadLetter
)

func (s SubQueue) state() State {
	if s == SubQueueDeadLetter {
		return StateDeadLetter
	}
	return StateActive
}

// Message is one message with its broker and user properties.
//
// On send, the sender-settable fields are read and the broker-set ones ignored. Messages returned
// by a receive have every field filled.
type Message struct {
	Body        []byte
	ContentType string

	MessageID        string
	CorrelationID    string
	SessionID        string
	ReplyToSessionID string
	Label            string
	To               string
	ReplyTo          string
	PartitionKey     string
	// ViaPartitionKey is kept and returned as sent: on the service it picks the partition of a
	// transfer queue inside a transaction, which has no counterpart here.
	ViaPartitionKey string
	// TimeToLive is the sender's TTL; 0 means none was given and the entity default applies.
	TimeToLive time.Duration
	// ScheduledEnqueueTime, when in the future, keeps the message invisible until then. A past
	// one is delivered at once and still returned as sent.
	ScheduledEnqueueTime time.Time

	// UserProperties keeps each application property with its type: string, int64, float64,
	// bool or time.Time.
	UserProperties UserProperties

	// Set by the broker.
	SequenceNumber int64
	// EnqueuedSequenceNumber is, on an auto-forwarded message, the sequence number it was first
	// given where it was sent; 0 on a message that was not forwarded.
	EnqueuedSequenceNumber int64
	EnqueuedTime           time.Time
	ExpiresAt              time.Time // zero: never
	DeliveryCount          int32
	LockToken              uuid.UUID // zero unless peek-locked
	LockedUntil            time.Time
	State                  State
	DeadLetterReason       string
	DeadLetterDescription  string
	DeadLetterSource       string
}

// Property is one user property, or one parameter or correlation property of a rule.
type Property struct {
	Name  string
	Value any // string, int64, float64, bool, time.Time, or (rule parameters) time.Duration

	// Type is the type a rule value was declared with (an XML Schema type by its local name,
	// such as "long", or TypeSerDuration, TypeSerGUID), so that a rule is read back in the type
	// its client wrote; "" lets the value's Go type decide. Message properties never have one.
	Type string
}

// UserProperties is an ordered list of user properties. Names are unique; order is the order the
// sender gave them in.
type UserProperties []Property
