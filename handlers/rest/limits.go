package rest

import (
	"encoding/base64"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/sbgate/sbgate/broker"
)

// A received message travels in the response head: BrokerProperties, one header per user
// property, Content-Type, and on a dead letter its reason and description. The tightest common
// client is Node.js, whose HTTP parser refuses a response head over 16 KiB (its default
// --max-http-header-size), and Python's http.client refuses more than 100 header lines. A message
// whose properties do not fit could be accepted but never received, and under receive-and-delete
// it would be gone by the time the client fails to read it. So the budget is checked at send.
//
// The 16 KiB is split: up to maxPropertyHeaderBytes for what the sender controls (its broker and
// user properties and content type, as written on receive, with the broker's own fields at their
// longest), up to maxDeadLetterHeaderBytes for a dead letter's reason and description, and the
// rest (about 4 KiB) for the status line, Date, Transfer-Encoding and a Location naming an
// entity path of up to 260 characters, percent-encoded.
const (
	// maxPropertyHeaderBytes bounds the header bytes of a message's properties (protocol.md §7.1
	// allows 64 KB for the service's own header; no common HTTP client reads that much).
	maxPropertyHeaderBytes = 10 * 1024
	// maxDeadLetterHeaderBytes bounds DeadLetterReason plus DeadLetterErrorDescription as written.
	maxDeadLetterHeaderBytes = 2 * 1024
	// maxUserPropertiesHTTP keeps a received message under Python's 100 header lines, with room
	// for the seven the protocol itself writes and for proxies.
	maxUserPropertiesHTTP = 64
)

// CheckDeliverable refuses a message that no common HTTP client could receive: it computes the
// header bytes its properties take in a receive response, with every broker-set field at its
// longest. REST sends are checked with it, and sbgate serve has the store check with it the
// subscription copies that rule actions grow (store.Options.CheckCopy). Errors: a bad request
// naming the size and the limit.
func CheckDeliverable(m *broker.Message) error {
	if len(m.UserProperties) > maxUserPropertiesHTTP {
		return broker.BadRequest("A message may carry at most %d user properties (it has %d), so that every HTTP client can read it as headers.",
			maxUserPropertiesHTTP, len(m.UserProperties))
	}
	if propertyHeaderBound(m) <= maxPropertyHeaderBytes {
		return nil
	}
	if n := propertyHeaderBytes(m); n > maxPropertyHeaderBytes {
		return broker.BadRequest("The message's properties take %d bytes as HTTP headers; at most %d bytes are allowed, so that every client can receive the message.",
			n, maxPropertyHeaderBytes)
	}
	return nil
}

// longestTime formats as long as any time does in RFC 1123 (the format is fixed-width).
var longestTime = time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)

// propertyHeaderBytes is the number of bytes m's properties take in a receive response.
func propertyHeaderBytes(m *broker.Message) int {
	w := *m
	w.Body = nil
	w.SequenceNumber = math.MaxInt64
	w.EnqueuedSequenceNumber = math.MaxInt64 // set when the message is forwarded or copied to a subscription
	w.DeliveryCount = math.MaxInt32
	w.EnqueuedTime = longestTime
	w.ExpiresAt = longestTime // the entity's default TTL may give one to a message sent without
	w.LockedUntil = longestTime
	w.LockToken = uuid.Max
	w.ScheduledEnqueueTime = longestTime
	w.TimeToLive = math.MaxInt64 - 1 // the entity's default may replace the sender's: the longest number
	w.State = broker.StateDeferred
	// A dead letter names its source: a subscription path at its longest.
	w.DeadLetterSource = strings.Repeat("x", 260+len("/Subscriptions/")+50)
	n := headerLineBytes("BrokerProperties", string(formatBrokerProperties(&w, longestTime)))
	n += len(`,"State":"Scheduled"`) // the longest state name, in case Deferred is not it
	if m.ContentType != "" {
		n += headerLineBytes("Content-Type", m.ContentType)
	}
	for _, p := range m.UserProperties {
		n += headerLineBytes(p.Name, formatPropertyValue(p.Value))
	}
	return n
}

// propertyHeaderBound is at least propertyHeaderBytes(m), found without formatting anything (the
// formatting was a tenth of the gateway's CPU on sends): every broker property present at its
// longest, each string the sender gave escaped at its worst (six bytes a byte, as \u00XX), each
// user property value at the longest its type formats to. Only a message near the limit pays
// for the exact count.
func propertyHeaderBound(m *broker.Message) int {
	n := fixedPropertyHeaderBytes
	for _, s := range [...]string{m.CorrelationID, m.Label, m.MessageID, m.PartitionKey, m.ReplyTo,
		m.ReplyToSessionID, m.SessionID, m.To, m.ViaPartitionKey} {
		n += 6 * len(s)
	}
	if m.ContentType != "" {
		n += headerLineBytes("Content-Type", m.ContentType)
	}
	for _, p := range m.UserProperties {
		n += headerLineBytes(p.Name, "") + propertyValueBound(p.Value)
	}
	return n
}

// fixedPropertyHeaderBytes is what the broker properties take with every field present: the
// sender's strings as one byte each (propertyHeaderBound adds their length), the broker's fields at
// their longest.
var fixedPropertyHeaderBytes = func() int {
	x := "x"
	return propertyHeaderBytes(&broker.Message{CorrelationID: x, Label: x, MessageID: x, PartitionKey: x,
		ReplyTo: x, ReplyToSessionID: x, SessionID: x, To: x, ViaPartitionKey: x})
}()

// propertyValueBound is at least len(formatPropertyValue(v)).
func propertyValueBound(v any) int {
	switch x := v.(type) {
	case string:
		return 2 + 2*len(x) // quoted, each byte escaped at worst
	case broker.URI:
		return 2 + 2*len(x)
	case broker.Symbol:
		return 2 + 2*len(x)
	case float64:
		return 330 // 'f' format, shortest exact: up to 309 integer digits, or 5e-324's 326 characters
	case float32:
		return 60 // 'f' format: up to 39 integer digits, or 1e-45's 47 characters
	case []byte:
		return 2 + base64.StdEncoding.EncodedLen(len(x))
	case broker.Decimal128:
		return 90 // 34 digits, 40 zeros after the point at most, a sign, a point, or an exponent
	}
	// An integer, a bool, a char, a Guid, a quoted RFC 1123 time, a time span, a smaller decimal.
	return 64
}

// headerLineBytes is the size of "name: value\r\n".
func headerLineBytes(name, value string) int { return len(name) + len(value) + 4 }

// checkDeadLetterText bounds what a receiver may write as a dead letter's reason and description:
// both come back as headers when the dead letter is received.
func checkDeadLetterText(reason, description string) error {
	n := headerLineBytes("DeadLetterReason", formatPropertyValue(reason))
	if description != "" {
		n += headerLineBytes("DeadLetterErrorDescription", formatPropertyValue(description))
	}
	if n > maxDeadLetterHeaderBytes {
		return broker.BadRequest("The dead-letter reason and description take %d bytes as HTTP headers; at most %d bytes are allowed.",
			n, maxDeadLetterHeaderBytes)
	}
	return nil
}
