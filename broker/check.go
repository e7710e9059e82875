package broker

import (
	"strings"
	"unicode/utf8"
)

// ValidText reports whether s can be stored as PostgreSQL text: valid UTF-8 without NUL.
func ValidText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// MessageSize is what counts against the entity's message size limit and SizeInBytes: the body,
// the application properties, the broker properties and the other AMQP sections the sender
// gave, as Service Bus counts them (the whole message, headers and body).
func MessageSize(m *Message, userPropsLen int) int {
	return len(m.Body) + len(m.AMQPSections) + userPropsLen + len(m.MessageID) + len(m.CorrelationID) + len(m.SessionID) +
		len(m.ReplyToSessionID) + len(m.Label) + len(m.To) + len(m.ReplyTo) + len(m.PartitionKey) + len(m.ViaPartitionKey) + len(m.ContentType)
}

// CheckSettleTarget refuses settlements the target cannot take.
func CheckSettleTarget(t Target) error {
	e := t.Entity
	switch {
	case e.Kind == KindTopic:
		return BadRequest("Messages are not settled on topic '%s'; settle them on the subscription they were received from.", e.Path)
	case t.Session == nil && t.SubQueue == SubQueueMain && e.Props.RequiresSession:
		return BadRequest("Messages of '%s' are settled in their session: use the session's settlement path.", e.Path)
	case t.Session != nil && (!e.Props.RequiresSession || t.SubQueue != SubQueueMain):
		return BadRequest("'%s' has no sessions to settle messages in.", t)
	}
	return CheckSessionLockID(e, t.Session)
}

// CheckSettleRequest refuses a request that cannot be right whatever the lock's state.
func CheckSettleRequest(t Target, r SettleRequest) error {
	if len(r.PropertiesToModify) > 0 {
		switch r.Op {
		case Abandon, Defer, DeadLetter:
			if _, err := EncodeUserProperties(r.PropertiesToModify); err != nil {
				return BadRequest("The properties to modify: %s", ErrorMessage(err))
			}
		default:
			return BadRequest("Properties are modified by an abandon, a defer or a dead-lettering, not by a %s.", r.Op.noun())
		}
	}
	switch r.Op {
	case Complete, Abandon, RenewLock, Defer, Release:
		// A dead letter cannot be deferred: its lock simply is not one that can be, which the
		// statement answers as a lost lock, as the service does.
	case DeadLetter:
		if t.SubQueue == SubQueueDeadLetter {
			return BadRequest("A dead-lettered message cannot be dead-lettered again.")
		}
		if !ValidText(r.Reason) || !ValidText(r.Description) || len(r.Reason) > MaxPropertySize || len(r.Description) > MaxPropertySize {
			return BadRequest("The dead-letter reason and description must be UTF-8 text of at most %d bytes.", MaxPropertySize)
		}
	default:
		return BadRequest("Unknown settlement %d.", r.Op)
	}
	return nil
}

// noun names a settlement as a noun, in errors.
func (op Settlement) noun() string {
	switch op {
	case Complete:
		return "completion"
	case RenewLock:
		return "lock renewal"
	case Release:
		return "release"
	}
	return op.String()
}

// String names a settlement in errors.
func (op Settlement) String() string {
	switch op {
	case Complete:
		return "complete"
	case Abandon:
		return "abandon"
	case RenewLock:
		return "renew the lock of"
	case Defer:
		return "defer"
	case DeadLetter:
		return "dead-letter"
	case Release:
		return "release"
	}
	return "settle"
}
