package rest

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sbgate/sbgate/broker"
)

// TestPropertyHeaderBoundIsNeverBelowTheCount: CheckDeliverable skips the exact count when the
// bound is within the limit, so the bound must never be below the count, whatever the strings
// escape to and whatever the user properties' types format to.
func TestPropertyHeaderBoundIsNeverBelowTheCount(t *testing.T) {
	worst := strings.Repeat("\x01\"\\<>&\u2028\u2029é", 40) // every escape JSON writes, and multi-byte runes
	msgs := []broker.Message{
		{},
		{MessageID: "m"},
		{MessageID: worst, CorrelationID: worst, Label: worst, PartitionKey: worst, ReplyTo: worst,
			ReplyToSessionID: worst, SessionID: worst, To: worst, ViaPartitionKey: worst, ContentType: "text/plain; x=" + worst},
		{UserProperties: broker.UserProperties{
			{Name: "s", Value: worst},
			{Name: "quotes", Value: strings.Repeat(`"\`, 100)},
			{Name: "tiny", Value: math.SmallestNonzeroFloat64},
			{Name: "huge", Value: -math.MaxFloat64},
			{Name: "third", Value: 1.0 / 3},
			{Name: "int", Value: int64(math.MinInt64)},
			{Name: "bool", Value: false},
			{Name: "time", Value: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", -11*3600))},
			{Name: "duration", Value: time.Duration(math.MinInt64)},
			{Name: "ulong", Value: uint64(math.MaxUint64)},
			{Name: "sbyte", Value: int8(math.MinInt8)},
			{Name: "float", Value: float32(-math.MaxFloat32)},
			{Name: "tinyfloat", Value: float32(math.SmallestNonzeroFloat32)},
			{Name: "binary", Value: []byte(worst)},
			{Name: "uri", Value: broker.URI(worst)},
			{Name: "symbol", Value: broker.Symbol(worst)},
			{Name: "char", Value: broker.Char('😀')},
			{Name: "uuid", Value: uuid.Max},
			{Name: "timespan", Value: broker.TimeSpan(math.MinInt64)},
			{Name: "dto", Value: broker.DateTimeOffset(math.MaxInt64)},
			// The longest decimal texts: 34 digits with 28 zeros, and 40 places after the point.
			{Name: "decimal-zeros", Value: broker.Decimal128{0xb0, 0x79, 0xed, 0x09, 0xbe, 0xad, 0x87, 0xc0, 0x37, 0x8d, 0x8e, 0x63, 0xff, 0xff, 0xff, 0xff}},
			{Name: "decimal-places", Value: broker.Decimal128{0xaf, 0xf0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
			{Name: "decimal64", Value: broker.Decimal64{0xb5, 0x5f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		}},
	}
	for i, m := range msgs {
		bound, count := propertyHeaderBound(&m), propertyHeaderBytes(&m)
		if bound < count {
			t.Errorf("message %d: bound %d < count %d", i, bound, count)
		}
		for _, p := range m.UserProperties {
			if b, n := propertyValueBound(p.Value), len(formatPropertyValue(p.Value)); b < n {
				t.Errorf("user property %s: bound %d < formatted %d", p.Name, b, n)
			}
		}
	}
	// A plain message is far within the limit by the bound alone.
	if b := propertyHeaderBound(&broker.Message{MessageID: "0123456789abcdef0123456789abcdef", Label: "order",
		UserProperties: broker.UserProperties{{Name: "tenant", Value: "contoso"}}}); b > maxPropertyHeaderBytes/4 {
		t.Errorf("bound of a plain message = %d; want well within %d", b, maxPropertyHeaderBytes)
	}
}

// TestPropertyHeaderCountCoversAReceive: what CheckDeliverable counts at send is never less
// than what a receive of the message writes, whatever the broker sets by then: an expiry from
// the entity's default TTL, a lock, the sequence number it was first given where it was sent
// (forwarded, or copied to a subscription), a dead letter's source.
func TestPropertyHeaderCountCoversAReceive(t *testing.T) {
	sent := broker.Message{MessageID: "m", Label: "l", ContentType: "text/plain", ScheduledEnqueueTime: longestTime,
		UserProperties: broker.UserProperties{{Name: "p", Value: "v"}, {Name: "n", Value: int64(7)}}}
	received := sent
	received.SequenceNumber = math.MaxInt64
	received.EnqueuedSequenceNumber = math.MaxInt64
	received.EnqueuedTime = longestTime
	received.ExpiresAt = longestTime
	received.LockedUntil = longestTime
	received.LockToken = uuid.Max
	received.DeliveryCount = math.MaxInt32
	received.TimeToLive = math.MaxInt64 - 1
	received.State = broker.StateDeferred
	received.DeadLetterSource = strings.Repeat("t", 260) + "/Subscriptions/" + strings.Repeat("s", 50)
	written := headerLineBytes("BrokerProperties", string(formatBrokerProperties(&received, longestTime))) +
		headerLineBytes("Content-Type", received.ContentType)
	for _, p := range received.UserProperties {
		written += headerLineBytes(p.Name, formatPropertyValue(p.Value))
	}
	if counted := propertyHeaderBytes(&sent); counted < written {
		t.Errorf("counted %d header bytes at send; a receive writes %d", counted, written)
	}
}
