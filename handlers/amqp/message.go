package amqp

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
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

// The described types the .NET SDK maps Uri, DateTimeOffset and TimeSpan properties to
// (amqp-sdks.md, "App-property types").
const (
	describedURI            amqp.Symbol = "com.microsoft:uri"             // a string: Uri.AbsoluteUri
	describedDateTimeOffset amqp.Symbol = "com.microsoft:datetime-offset" // a long: UtcTicks
	describedTimeSpan       amqp.Symbol = "com.microsoft:timespan"        // a long: Ticks
)

// errUnsupported marks a message the store cannot keep as sent; the delivery is rejected with
// amqp:not-implemented rather than stored with something dropped.
type errUnsupported struct{ msg string }

func (e *errUnsupported) Error() string { return e.msg }

func unsupported(format string, args ...any) error {
	return &errUnsupported{fmt.Sprintf(format, args...)}
}

// toStore converts a message an SDK sent into the store's form: the same broker and user
// properties an HTTP send sets (docs/amqp.md §3), the body and every application property as
// sent. A body of one data section is kept as its bytes, which REST shows as they are; any
// other body (several data sections, an amqp-value, amqp-sequence sections) as the bytes of
// its sections, exactly as the peer encoded them. Everything else the sender put in the message
// that no store field holds is kept in AMQPSections (senderSections). What the store cannot keep
// (an application property with a key that is not a string, or a list, map, array or unknown
// described value; an annotation whose key is not a symbol, ulong, string or long) is refused,
// never dropped.
func toStore(m *amqp.Message) (broker.Message, error) {
	var sm broker.Message
	oneData := len(m.Data) == 1 && len(m.Sequence) == 0 && m.Value == nil && !m.HasValue
	switch {
	case oneData:
		sm.Body = m.Data[0]
	case m.RawBody != nil:
		sm.Body, sm.BodyType = m.RawBody, broker.BodyAMQP
	case len(m.Data) == 0 && len(m.Sequence) == 0 && m.Value == nil && !m.HasValue:
		sm.Body = []byte{} // no body section: received as an empty data section
	default:
		// Not decoded from the wire, so without its sections' bytes: they are encoded.
		raw, err := amqp.Marshal(&amqp.Message{Data: m.Data, Sequence: m.Sequence, Value: m.Value, HasValue: m.HasValue})
		if err != nil {
			return sm, unsupported("the message body cannot be encoded: %v", err)
		}
		sm.Body, sm.BodyType = raw, broker.BodyAMQP
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
		sm.SessionID, sm.HasSessionID, sm.ReplyToSessionID = p.GroupID, p.HasGroupID, p.ReplyToGroupID
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
		sm.UserProperties = append(sm.UserProperties, broker.Property{Name: name, Value: v})
	}
	var err error
	if sm.AMQPSections, err = senderSections(m); err != nil {
		return sm, err
	}
	return sm, nil
}

// brokerMessageAnnotations are the message annotations the broker owns: it sets them on what it
// delivers, from its own fields, whatever the sender put under those keys. (It reads three of
// them on a send: x-opt-partition-key, x-opt-via-partition-key and x-opt-scheduled-enqueue-time,
// kept in the store's fields.) brokerDeliveryAnnotations are the delivery annotations it owns.
var (
	brokerMessageAnnotations = map[amqp.Symbol]bool{
		annSequenceNumber: true, annEnqueuedTime: true, annLockedUntil: true,
		annMessageState: true, annDeadLetterSource: true, annEnqueueSequenceNumber: true,
		annScheduledEnqueueTime: true, annPartitionKey: true, annViaPartitionKey: true,
	}
	brokerDeliveryAnnotations = map[amqp.Symbol]bool{annLockToken: true}
)

// senderSections encodes what the sender put in m beyond what the store's fields hold, for
// fromStore to give back on every delivery (the service passes these through: the Azure SDK for
// Go's live test TestSender_SendAMQPMessageWithMultipleByteSlicesInData receives them as sent):
//
//   - the header's durable, priority and first-acquirer, when not their defaults (its ttl is
//     the store's TimeToLive; its delivery-count is the broker's);
//   - the delivery annotations but the broker's x-opt-lock-token;
//   - the message annotations but the broker's (brokerMessageAnnotations);
//   - the properties no store field holds: user-id, content-encoding, absolute-expiry-time,
//     creation-time, group-sequence;
//   - the footer.
//
// They are encoded as the sections of an AMQP message without a body, which amqp.Unmarshal
// reads back; nil when there is nothing to keep. The values are kept with their AMQP types (the
// body alone is kept byte for byte). Annotation keys are symbols or ulongs; a string or a long
// (go-amqp writes an integer key as a long) is kept too, and given back as sent; any other key is
// refused.
func senderSections(m *amqp.Message) ([]byte, error) {
	var x amqp.Message
	keep := false
	if h := m.Header; h != nil && (h.Durable || h.Priority != 4 || h.FirstAcquirer) {
		x.Header = &amqp.Header{Durable: h.Durable, Priority: h.Priority, FirstAcquirer: h.FirstAcquirer}
		keep = true
	}
	var err error
	if x.DeliveryAnnotations, err = senderAnnotations("delivery annotation", m.DeliveryAnnotations, brokerDeliveryAnnotations); err != nil {
		return nil, err
	}
	if x.MessageAnnotations, err = senderAnnotations("message annotation", m.MessageAnnotations, brokerMessageAnnotations); err != nil {
		return nil, err
	}
	if x.Footer, err = senderAnnotations("footer", m.Footer, nil); err != nil {
		return nil, err
	}
	keep = keep || x.DeliveryAnnotations != nil || x.MessageAnnotations != nil || x.Footer != nil
	if p := m.Properties; p != nil && (p.UserID != nil || p.ContentEncoding != "" || !p.AbsoluteExpiryTime.IsZero() ||
		!p.CreationTime.IsZero() || p.GroupSequence != nil) {
		x.Properties = &amqp.Properties{UserID: p.UserID, ContentEncoding: p.ContentEncoding,
			AbsoluteExpiryTime: p.AbsoluteExpiryTime, CreationTime: p.CreationTime, GroupSequence: p.GroupSequence}
		keep = true
	}
	if !keep {
		return nil, nil
	}
	b, err := amqp.Marshal(&x)
	if err != nil {
		return nil, unsupported("the message's annotations or footer cannot be kept: %v", err)
	}
	return b, nil
}

// senderAnnotations is the annotations map a (delivery or message annotations, or the footer)
// without the entries whose keys the broker owns; nil when that leaves none (an empty map is no
// annotation, and some clients send empty sections with every message).
func senderAnnotations(what string, a amqp.Map, owned map[amqp.Symbol]bool) (amqp.Map, error) {
	if len(a) == 0 {
		return nil, nil
	}
	out := make(amqp.Map, 0, len(a))
	for _, e := range a {
		switch k := e.Key.(type) {
		case amqp.Symbol, string, uint64, int64:
			if s, ok := annotationKey(k); ok && owned[s] {
				continue
			}
		default:
			return nil, unsupported("a %s key must be a symbol or a ulong, not %T", what, e.Key)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
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

// userValue converts an application property to the store's type for it, which keeps it
// exactly: the AMQP primitive types as their Go types (a uuid as a uuid.UUID, a char, decimal or
// symbol as the store's type of that name), and the three described types of the .NET SDK as
// broker.URI, broker.DateTimeOffset and broker.TimeSpan; null as nil (present, without a value).
// Compound values (list, map, array) and other described values are refused.
func userValue(name string, v any) (any, error) {
	switch v := v.(type) {
	case string, bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64, []byte:
		return v, nil
	case time.Time:
		return v.UTC(), nil
	case amqp.UUID:
		return uuid.UUID(v), nil
	case amqp.Char:
		return broker.Char(v), nil
	case amqp.Symbol:
		return broker.Symbol(v), nil
	case amqp.Decimal32:
		return broker.Decimal32(v), nil
	case amqp.Decimal64:
		return broker.Decimal64(v), nil
	case amqp.Decimal128:
		return broker.Decimal128(v), nil
	case amqp.Described:
		d, _ := v.Descriptor.(amqp.Symbol)
		switch x := v.Value.(type) {
		case string:
			if d == describedURI {
				return broker.URI(x), nil
			}
		case int64:
			switch d {
			case describedDateTimeOffset:
				return broker.DateTimeOffset(x), nil
			case describedTimeSpan:
				return broker.TimeSpan(x), nil
			}
		}
		return nil, unsupported("application property %q is a described value (%v, %T) the broker cannot keep; "+
			"of described types it keeps com.microsoft:uri (a string), com.microsoft:datetime-offset and com.microsoft:timespan (longs)",
			name, v.Descriptor, v.Value)
	case nil:
		return nil, nil // present without a value: kept as such (the .NET SDK's live tests send one)
	}
	return nil, unsupported("application property %q of type %T is not supported: application properties are "+
		"of simple types (the AMQP primitive types but list, map and array)", name, v)
}

// amqpValue is the AMQP value of a user property: userValue's inverse. A time.Duration, which
// only a rule action can give a property, is a TimeSpan.
func amqpValue(v any) any {
	switch v := v.(type) {
	case uuid.UUID:
		return amqp.UUID(v)
	case broker.Char:
		return amqp.Char(v)
	case broker.Symbol:
		return amqp.Symbol(v)
	case broker.Decimal32:
		return amqp.Decimal32(v)
	case broker.Decimal64:
		return amqp.Decimal64(v)
	case broker.Decimal128:
		return amqp.Decimal128(v)
	case broker.URI:
		return amqp.Described{Descriptor: describedURI, Value: string(v)}
	case broker.DateTimeOffset:
		return amqp.Described{Descriptor: describedDateTimeOffset, Value: int64(v)}
	case broker.TimeSpan:
		return amqp.Described{Descriptor: describedTimeSpan, Value: int64(v)}
	case time.Duration:
		return amqp.Described{Descriptor: describedTimeSpan, Value: int64(broker.TimeSpanOf(v))}
	}
	return v
}

// fromStore converts a stored message into what the SDKs expect on receive (docs/amqp.md §3):
// what the sender gave (AMQPSections: senderSections) merged with what the broker sets. now
// tells a peeked message (not zero; it is also whether one still waits for its scheduled time)
// from a delivered one (zero): a delivery under a lock carries the lock token in the delivery
// annotation x-opt-lock-token, as the service's do.
//
// The header is always sent, with the delivery-count (the Go SDK counts deliveries from it,
// Java reads its durable without checking that it is there): durable, priority and
// first-acquirer as the sender gave them (the defaults when it gave none: the service passes
// them through, and sets first-acquirer on no delivery), and a ttl only when the sender gave
// one (the TTL that applies, the sender's capped by the entity's default), as the service does
// (a message without one is received without a ttl, whatever the entity's default). The
// properties' creation-time and absolute-expiry-time are the sender's, never the broker's.
func fromStore(m *broker.Message, now time.Time) (*amqp.Message, error) {
	var x amqp.Message
	if len(m.AMQPSections) > 0 {
		sent, err := amqp.Unmarshal(m.AMQPSections)
		if err != nil {
			return nil, fmt.Errorf("decode the stored AMQP sections of message %d: %w", m.SequenceNumber, err)
		}
		x = *sent
	}
	am := &amqp.Message{
		Header: deliveryHeader(m, x.Header),
		Properties: &amqp.Properties{
			To:             m.To,
			Subject:        m.Label,
			ReplyTo:        m.ReplyTo,
			ContentType:    amqp.Symbol(m.ContentType),
			GroupID:        m.SessionID,
			HasGroupID:     m.InSession(),
			ReplyToGroupID: m.ReplyToSessionID,
		},
		DeliveryAnnotations: x.DeliveryAnnotations,
		Footer:              x.Footer,
	}
	if p := x.Properties; p != nil {
		am.Properties.UserID, am.Properties.ContentEncoding = p.UserID, p.ContentEncoding
		am.Properties.AbsoluteExpiryTime, am.Properties.CreationTime = p.AbsoluteExpiryTime, p.CreationTime
		am.Properties.GroupSequence = p.GroupSequence
	}
	if now.IsZero() && m.LockToken != uuid.Nil {
		am.DeliveryAnnotations = append(am.DeliveryAnnotations, amqp.MapEntry{Key: annLockToken, Value: amqp.UUID(m.LockToken)})
	}
	if m.BodyType == broker.BodyAMQP {
		am.RawBody = m.Body // the sections as the sender encoded them
	} else {
		am.Data = [][]byte{m.Body}
	}
	if m.MessageID != "" {
		am.Properties.MessageID = m.MessageID
	}
	if m.CorrelationID != "" {
		am.Properties.CorrelationID = m.CorrelationID
	}
	ann := brokerAnnotations(m, now, 4+len(x.MessageAnnotations))
	am.MessageAnnotations = append(ann, x.MessageAnnotations...) // the sender's hold none of the broker's
	if len(m.UserProperties) > 0 || m.State == broker.StateDeadLetter {
		am.ApplicationProperties = applicationProperties(m)
	}
	return am, nil
}

// deliveryHeader is the header of a delivery of m: sent, the sender's durable, priority and
// first-acquirer; the store's TimeToLive, when the sender set it; the broker's delivery-count.
func deliveryHeader(m *broker.Message, sent *amqp.Header) *amqp.Header {
	h := &amqp.Header{Priority: 4}
	if sent != nil {
		h.Durable, h.Priority, h.FirstAcquirer = sent.Durable, sent.Priority, sent.FirstAcquirer
	}
	if m.TimeToLiveFromSender && m.TimeToLive > 0 && m.TimeToLive != broker.Infinite {
		h.TTL = m.TimeToLive
	}
	if m.DeliveryCount > 1 {
		h.DeliveryCount = uint32(m.DeliveryCount - 1)
	}
	return h
}

// brokerAnnotations are the message annotations the broker sets on m (now: as in fromStore),
// in a map with room for capacity entries.
func brokerAnnotations(m *broker.Message, now time.Time, capacity int) amqp.Map {
	ann := make(amqp.Map, 0, capacity)
	ann = append(ann,
		amqp.MapEntry{Key: annSequenceNumber, Value: m.SequenceNumber},
		amqp.MapEntry{Key: annEnqueuedTime, Value: m.EnqueuedTime},
	)
	if !m.LockedUntil.IsZero() && m.LockToken != uuid.Nil {
		ann = append(ann, amqp.MapEntry{Key: annLockedUntil, Value: m.LockedUntil})
	}
	switch {
	case m.State == broker.StateDeferred:
		ann = append(ann, amqp.MapEntry{Key: annMessageState, Value: int32(1)}) // an int: Java reads nothing else
	case !now.IsZero() && m.State == broker.StateActive && m.ScheduledEnqueueTime.After(now):
		ann = append(ann, amqp.MapEntry{Key: annMessageState, Value: int32(2)})
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
	return ann
}

// applicationProperties are m's user properties and, for a dead letter, its dead-letter
// reason and description.
func applicationProperties(m *broker.Message) amqp.Map {
	props := make(amqp.Map, 0, len(m.UserProperties)+2)
	for _, p := range m.UserProperties {
		props = append(props, amqp.MapEntry{Key: p.Name, Value: amqpValue(p.Value)})
	}
	if m.State == broker.StateDeadLetter {
		if m.DeadLetterReason != "" {
			props.Set(propDeadLetterReason, m.DeadLetterReason)
		}
		if m.DeadLetterDescription != "" {
			props.Set(propDeadLetterDescription, m.DeadLetterDescription)
		}
	}
	return props
}

// encodeStored is the encoding of fromStore(m, now): a message as a link delivers it, or as
// $management's peek and receive-by-sequence-number replies carry it.
func encodeStored(m *broker.Message, now time.Time) ([]byte, error) {
	am, err := fromStore(m, now)
	if err != nil {
		return nil, err
	}
	return amqp.Marshal(am)
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
