package sbamqp

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/store"
)

// Message annotations of the Service Bus profile (docs/amqp.md §3).
const (
	annSequenceNumber        amqp.Symbol = "x-opt-sequence-number"
	annEnqueuedTime          amqp.Symbol = "x-opt-enqueued-time"
	annLockedUntil           amqp.Symbol = "x-opt-locked-until"
	annMessageState          amqp.Symbol = "x-opt-message-state"
	annScheduledEnqueueTime  amqp.Symbol = "x-opt-scheduled-enqueue-time"
	annPartitionKey          amqp.Symbol = "x-opt-partition-key"
	annViaPartitionKey       amqp.Symbol = "x-opt-via-partition-key"
	annDeadLetterSource      amqp.Symbol = "x-opt-deadletter-source"
	annEnqueueSequenceNumber amqp.Symbol = "x-opt-enqueue-sequence-number"
	annLockToken             amqp.Symbol = "x-opt-lock-token"

	propDeadLetterReason      = "DeadLetterReason"
	propDeadLetterDescription = "DeadLetterErrorDescription"
)

// errUnsupported marks a message the store cannot keep as sent; the delivery is rejected with
// amqp:not-implemented rather than stored with something dropped.
type errUnsupported struct{ msg string }

func (e *errUnsupported) Error() string { return e.msg }

func unsupported(format string, args ...any) error {
	return &errUnsupported{fmt.Sprintf(format, args...)}
}

// toStore converts a message an SDK sent into the store's form: the same broker and user
// properties an HTTP send sets (docs/amqp.md §3). What the store cannot keep — a body other
// than one data section, an application property of a type it has no column for — is
// refused, never dropped.
func toStore(m *amqp.Message) (store.Message, error) {
	var sm store.Message
	switch {
	case len(m.Sequence) > 0 || m.Value != nil || m.HasValue:
		return sm, unsupported("only a body of data sections is supported, not amqp-value or amqp-sequence")
	case len(m.Data) == 1:
		sm.Body = m.Data[0]
	case len(m.Data) > 1:
		return sm, unsupported("a body of %d data sections is not supported; send one", len(m.Data))
	}
	if sm.Body == nil {
		sm.Body = []byte{}
	}
	if h := m.Header; h != nil {
		sm.TimeToLive = h.TTL
	}
	if p := m.Properties; p != nil {
		var err error
		if sm.MessageID, err = idString(p.MessageID); err != nil {
			return sm, err
		}
		if sm.CorrelationID, err = idString(p.CorrelationID); err != nil {
			return sm, err
		}
		sm.To, sm.Label, sm.ReplyTo = p.To, p.Subject, p.ReplyTo
		sm.ContentType = string(p.ContentType)
		sm.SessionID, sm.ReplyToSessionID = p.GroupID, p.ReplyToGroupID
	}
	for _, e := range m.MessageAnnotations {
		k, ok := annotationKey(e.Key)
		if !ok {
			continue
		}
		switch k {
		case annPartitionKey:
			s, ok := e.Value.(string)
			if !ok && e.Value != nil {
				return sm, unsupported("%s must be a string", k)
			}
			sm.PartitionKey = s
		case annViaPartitionKey:
			s, ok := e.Value.(string)
			if !ok && e.Value != nil {
				return sm, unsupported("%s must be a string", k)
			}
			sm.ViaPartitionKey = s
		case annScheduledEnqueueTime:
			t, ok := e.Value.(time.Time)
			if !ok && e.Value != nil {
				return sm, unsupported("%s must be a timestamp", k)
			}
			sm.ScheduledEnqueueTime = t
		}
	}
	for _, e := range m.ApplicationProperties {
		name, ok := e.Key.(string)
		if !ok {
			return sm, unsupported("application property keys must be strings, not %T", e.Key)
		}
		v, err := userValue(name, e.Value)
		if err != nil {
			return sm, err
		}
		sm.UserProperties = append(sm.UserProperties, store.Property{Name: name, Value: v})
	}
	return sm, nil
}

func annotationKey(k any) (amqp.Symbol, bool) {
	switch k := k.(type) {
	case amqp.Symbol:
		return k, true
	case string:
		return amqp.Symbol(k), true
	}
	return "", false
}

// idString turns a message or correlation id into the store's string: a string as is, the
// other id types in their usual text form (the SDKs send strings).
func idString(id any) (string, error) {
	switch id := id.(type) {
	case nil:
		return "", nil
	case string:
		return id, nil
	case uint64:
		return strconv.FormatUint(id, 10), nil
	case amqp.UUID:
		return uuid.UUID(id).String(), nil
	case []byte:
		return hex.EncodeToString(id), nil
	}
	return "", unsupported("message id of type %T", id)
}

// userValue converts an application property to a user property type of the store: string,
// int64, float64, bool or time.Time. Narrower AMQP integers and floats widen; a symbol is its
// string, a uuid its text. Null, binary and compound values are refused.
func userValue(name string, v any) (any, error) {
	switch v := v.(type) {
	case string, int64, float64, bool:
		return v, nil
	case time.Time:
		return v.UTC(), nil
	case amqp.Symbol:
		return string(v), nil
	case amqp.UUID:
		return uuid.UUID(v).String(), nil
	case int32:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case int8:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case uint16:
		return int64(v), nil
	case uint8:
		return int64(v), nil
	case uint64:
		if v > math.MaxInt64 {
			return nil, unsupported("application property %q: %d is beyond a long", name, v)
		}
		return int64(v), nil
	case float32:
		return float64(v), nil
	}
	return nil, unsupported("application property %q of type %T is not supported (use string, integer, double, boolean, timestamp or uuid)", name, v)
}

// fromStore converts a stored message into what the SDKs expect on receive (docs/amqp.md §3).
// now tells a peeked message still waiting for its scheduled time (zero for a received one,
// which cannot be).
func fromStore(m *store.Message, now time.Time) *amqp.Message {
	am := &amqp.Message{
		Header: &amqp.Header{Durable: true, Priority: 4, TTL: m.TimeToLive},
		Properties: &amqp.Properties{
			To:             m.To,
			Subject:        m.Label,
			ReplyTo:        m.ReplyTo,
			ContentType:    amqp.Symbol(m.ContentType),
			GroupID:        m.SessionID,
			ReplyToGroupID: m.ReplyToSessionID,
			CreationTime:   m.EnqueuedTime,
		},
		Data: [][]byte{m.Body},
	}
	if m.DeliveryCount > 1 {
		am.Header.DeliveryCount = uint32(m.DeliveryCount - 1)
	}
	if m.MessageID != "" {
		am.Properties.MessageID = m.MessageID
	}
	if m.CorrelationID != "" {
		am.Properties.CorrelationID = m.CorrelationID
	}
	if !m.ExpiresAt.IsZero() {
		am.Properties.AbsoluteExpiryTime = m.ExpiresAt
	}
	ann := amqp.Map{
		{Key: annSequenceNumber, Value: m.SequenceNumber},
		{Key: annEnqueuedTime, Value: m.EnqueuedTime},
	}
	if !m.LockedUntil.IsZero() && m.LockToken != uuid.Nil {
		ann = append(ann, amqp.MapEntry{Key: annLockedUntil, Value: m.LockedUntil})
	}
	switch {
	case m.State == store.StateDeferred:
		ann = append(ann, amqp.MapEntry{Key: annMessageState, Value: int64(1)})
	case !now.IsZero() && m.State == store.StateActive && m.ScheduledEnqueueTime.After(now):
		ann = append(ann, amqp.MapEntry{Key: annMessageState, Value: int64(2)})
	}
	if !m.ScheduledEnqueueTime.IsZero() {
		ann = append(ann, amqp.MapEntry{Key: annScheduledEnqueueTime, Value: m.ScheduledEnqueueTime})
	}
	if m.PartitionKey != "" {
		ann = append(ann, amqp.MapEntry{Key: annPartitionKey, Value: m.PartitionKey})
	}
	if m.ViaPartitionKey != "" {
		ann = append(ann, amqp.MapEntry{Key: annViaPartitionKey, Value: m.ViaPartitionKey})
	}
	if m.DeadLetterSource != "" {
		ann = append(ann, amqp.MapEntry{Key: annDeadLetterSource, Value: m.DeadLetterSource})
	}
	if m.EnqueuedSequenceNumber != 0 {
		ann = append(ann, amqp.MapEntry{Key: annEnqueueSequenceNumber, Value: m.EnqueuedSequenceNumber})
	}
	am.MessageAnnotations = ann
	if len(m.UserProperties) > 0 || m.State == store.StateDeadLetter {
		props := make(amqp.Map, 0, len(m.UserProperties)+2)
		for _, p := range m.UserProperties {
			v := p.Value
			if d, ok := v.(time.Duration); ok { // rule parameters only; never on a message, but keep it typed
				v = int64(d / time.Millisecond)
			}
			props = append(props, amqp.MapEntry{Key: p.Name, Value: v})
		}
		if m.State == store.StateDeadLetter {
			if m.DeadLetterReason != "" {
				props.Set(propDeadLetterReason, m.DeadLetterReason)
			}
			if m.DeadLetterDescription != "" {
				props.Set(propDeadLetterDescription, m.DeadLetterDescription)
			}
		}
		am.ApplicationProperties = props
	}
	return am
}

// lockTag encodes a lock token as the SDKs read a delivery tag: the GUID's .NET byte order,
// whose first three fields are little-endian.
func lockTag(t uuid.UUID) []byte {
	b := make([]byte, 16)
	copy(b, t[:])
	b[0], b[1], b[2], b[3] = b[3], b[2], b[1], b[0]
	b[4], b[5] = b[5], b[4]
	b[6], b[7] = b[7], b[6]
	return b
}

// tagLock is lockTag's inverse; ok is false for a tag that is not 16 bytes.
func tagLock(tag []byte) (uuid.UUID, bool) {
	if len(tag) != 16 {
		return uuid.Nil, false
	}
	var u uuid.UUID
	copy(u[:], tag)
	u[0], u[1], u[2], u[3] = u[3], u[2], u[1], u[0]
	u[4], u[5] = u[5], u[4]
	u[6], u[7] = u[7], u[6]
	return u, true
}
