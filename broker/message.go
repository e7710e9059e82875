package broker

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

func (s SubQueue) State() State {
	if s == SubQueueDeadLetter {
		return StateDeadLetter
	}
	return StateActive
}

// BodyType says what a message's Body holds.
type BodyType int16

// Body types; the numbers are stored in messages.body_type.
const (
	// BodyData: Body is the bytes of the message, as REST sends them and as most AMQP
	// messages carry them (one AMQP data section, whose bytes Body is).
	BodyData BodyType = 0
	// BodyAMQP: Body is the AMQP encoding of the message's body sections, exactly as the sender
	// encoded them: several data sections, one amqp-value, or one or more amqp-sequence sections.
	BodyAMQP BodyType = 1
)

// Message is one message with its broker and user properties.
//
// On send, the sender-settable fields are read and the broker-set ones ignored. Messages returned
// by a receive have every field filled.
type Message struct {
	// Body is the message's body, as BodyType says; its length is what the message's body
	// counts for against size limits either way.
	Body        []byte
	BodyType    BodyType
	ContentType string

	MessageID     string
	CorrelationID string
	// SessionID is the message's session. "" is a session id too (AMQP's group-id "", REST's
	// "SessionId":""), when HasSessionID says so: a message is in a session when SessionID is
	// not "" or HasSessionID is set (InSession). Received messages have HasSessionID set
	// whenever they are in a session.
	SessionID        string
	HasSessionID     bool
	ReplyToSessionID string
	Label            string
	To               string
	ReplyTo          string
	PartitionKey     string
	// ViaPartitionKey is kept and returned as sent: on the service it picks the partition of a
	// transfer queue inside a transaction, which has no counterpart here.
	ViaPartitionKey string
	// TimeToLive is the sender's TTL; 0 means none was given and the entity default applies.
	// Received messages have the TTL that applies, the sender's capped by the entity's default.
	TimeToLive time.Duration
	// TimeToLiveFromSender says that TimeToLive is the sender's (capped) rather than the
	// entity's default: an AMQP receiver is told a header ttl only then, as by the service. Send
	// sets it from TimeToLive; received messages carry it.
	TimeToLiveFromSender bool
	// ScheduledEnqueueTime, when in the future, keeps the message invisible until then. A past
	// one is delivered at once and still returned as sent.
	ScheduledEnqueueTime time.Time

	// UserProperties keeps each application property with its type: any of those listed in
	// propvalue.go (string, the integer and floating-point types, bool, time.Time, []byte,
	// uuid.UUID, Char, the decimals, URI, DateTimeOffset, TimeSpan, Symbol).
	UserProperties UserProperties

	// AMQPSections is what an AMQP sender put in the message beyond the fields above, as the AMQP
	// encoding of the sections that hold it (package handlers/amqp writes and reads it: the header's
	// flags, delivery and message annotations, the properties no field models, the footer). The
	// store keeps the bytes as they are and never reads them; they count in the message's size
	// and go with every copy of it. nil when there is nothing (REST sends none).
	AMQPSections []byte

	// Set by the broker.
	SequenceNumber int64
	// EnqueuedSequenceNumber is, on an auto-forwarded message, the sequence number it was first
	// given where it was sent; 0 on a message that was not forwarded.
	EnqueuedSequenceNumber int64
	EnqueuedTime           time.Time
	ExpiresAt              time.Time // zero: never
	// DeliveryCount is the service's: the deliveries that failed (their lock expired, or they
	// were abandoned) plus one, so 1 on a first delivery. Deliveries from the dead-letter
	// subqueue, and of a deferred message by its number, do not add to it.
	DeliveryCount         int32
	LockToken             uuid.UUID // zero unless peek-locked
	LockedUntil           time.Time
	State                 State
	DeadLetterReason      string
	DeadLetterDescription string
	DeadLetterSource      string
}

// InSession reports whether m is in a session: its SessionID is not "", or HasSessionID says
// that "" is its session.
func (m *Message) InSession() bool { return m.SessionID != "" || m.HasSessionID }

// Property is one user property, or one parameter or correlation property of a rule.
type Property struct {
	Name string
	// Value is of one of the types propvalue.go lists; rule parameters may also be a
	// time.Duration. Rule parameters and correlation properties that come from Atom are
	// string, int64, float64, bool, time.Time or time.Duration.
	Value any

	// Type is the type a rule value was declared with (an XML Schema type by its local name,
	// such as "long", or TypeSerDuration, TypeSerGUID), so that a rule is read back in the type
	// its client wrote; "" lets the value's Go type decide. Message properties never have one.
	Type string
}

// UserProperties is an ordered list of user properties. Names are unique; order is the order the
// sender gave them in.
type UserProperties []Property

// Dead-letter reasons the broker sets.
const (
	ReasonMaxDeliveryCount    = "MaxDeliveryCountExceeded"
	ReasonTTLExpired          = "TTLExpiredException"
	ReasonFilterEvaluation    = "FilterEvaluationException"
	ReasonMaxTransferHopCount = "MaxTransferHopCountExceeded"
	// ReasonActionResult dead-letters a subscription's copy that its rule's action made too
	// large to keep or to receive (store.Options.CheckCopy).
	ReasonActionResult         = "RuleActionResultTooLarge"
	DescriptionMaxTransferHops = "The message was auto-forwarded more than 4 times."
)
