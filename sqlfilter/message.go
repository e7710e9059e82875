package sqlfilter

import (
	"errors"
	"fmt"
	"strings"
)

// Message is what filters read.
//
// System property names are matched case-insensitively against the broker properties
// (MessageId, CorrelationId, To, ReplyTo, Label, SessionId, ReplyToSessionId,
// ContentType, SequenceNumber, EnqueuedTimeUtc, ScheduledEnqueueTimeUtc, TimeToLive,
// DeliveryCount, Size, PartitionKey, …); user property names case-insensitively too.
// Filters pass known system names in their canonical spelling ("Label", not "label"),
// so a switch on the exact name is a fast path and EqualFold only a fallback.
//
// Values are nil, string, int64, float64, bool or time.Time; other integer and float
// types, time.Duration, uuid.UUID (read as its text), []byte (binary: equal to the same
// bytes only) and Valuer are accepted too. ok=false means the property is absent.
//
// For System, "absent" must mean "not a system property at all": Service Bus raises an
// error for those, but a known property the sender did not set (CorrelationId on a
// message without one) reads as null. Return (nil, true) for the latter, or every
// filter mentioning sys.CorrelationId fails on uncorrelated messages. MapMessage does
// this for you.
type Message interface {
	System(name string) (v any, ok bool)
	User(name string) (v any, ok bool)
}

// MutableMessage is what actions change: the subscription's copy of a message.
type MutableMessage interface {
	Message
	// SetSystem may refuse read-only or unknown system properties, or values of the
	// wrong type, with an error; Action.Apply then fails with an *EvalError wrapping it.
	SetSystem(name string, v any) error
	SetUser(name string, v any)
	RemoveUser(name string)
	RemoveSystem(name string) error
}

// systemProperty describes one broker property of protocol.md §3.1.
type systemProperty struct {
	name     string
	writable bool // may a rule action SET or REMOVE it
}

// systemProperties is the catalogue MapMessage uses and the parser canonicalises
// against. Broker-maintained properties are read-only to actions, as in Service Bus.
var systemProperties = []systemProperty{
	{"MessageId", true},
	{"CorrelationId", true},
	{"To", true},
	{"ReplyTo", true},
	{"Label", true},
	{"SessionId", true},
	{"ReplyToSessionId", true},
	{"ContentType", true},
	{"PartitionKey", true},
	{"ViaPartitionKey", true},
	{"TimeToLive", true},
	{"ScheduledEnqueueTimeUtc", true},
	{"ForcePersistence", true},
	{"SequenceNumber", false},
	{"EnqueuedSequenceNumber", false},
	{"EnqueuedTimeUtc", false},
	{"ExpiresAtUtc", false},
	{"DeliveryCount", false},
	{"Size", false},
	{"LockToken", false},
	{"LockedUntilUtc", false},
	{"State", false},
	{"DeadLetterSource", false},
}

// lookupSystem finds name in the catalogue, case-insensitively.
func lookupSystem(name string) (systemProperty, bool) {
	for _, p := range systemProperties {
		if len(p.name) == len(name) && strings.EqualFold(p.name, name) {
			return p, true
		}
	}
	return systemProperty{}, false
}

// canonicalSystemName returns the catalogue spelling of name, or name itself when it is
// not in the catalogue (the caller's Message decides whether it exists).
func canonicalSystemName(name string) string {
	if p, ok := lookupSystem(name); ok {
		return p.name
	}
	return name
}

// MapMessage is a map-backed MutableMessage for tests and for callers that keep
// properties in maps. Lookups are case-insensitive: an exact key is tried first, then
// the first key equal under Unicode case folding.
//
// System reports every property of the built-in catalogue (protocol.md §3.1) as present,
// with value nil when Sys has no entry, and anything else as absent. SetSystem and
// RemoveSystem refuse names outside the catalogue and broker-maintained properties
// (SequenceNumber, EnqueuedTimeUtc, DeliveryCount, Size, …).
type MapMessage struct {
	Sys, Usr map[string]any
}

var _ MutableMessage = (*MapMessage)(nil)

// Errors returned by MapMessage.SetSystem and RemoveSystem.
var (
	ErrUnknownSystemProperty  = errors.New("unknown system property")
	ErrReadOnlySystemProperty = errors.New("read-only system property")
)

func foldKey(m map[string]any, name string) (string, bool) {
	if _, ok := m[name]; ok {
		return name, true
	}
	for k := range m {
		if strings.EqualFold(k, name) {
			return k, true
		}
	}
	return "", false
}

// System implements Message.
func (m *MapMessage) System(name string) (any, bool) {
	if k, ok := foldKey(m.Sys, name); ok {
		return m.Sys[k], true
	}
	if _, ok := lookupSystem(name); ok {
		return nil, true
	}
	return nil, false
}

// User implements Message.
func (m *MapMessage) User(name string) (any, bool) {
	if k, ok := foldKey(m.Usr, name); ok {
		return m.Usr[k], true
	}
	return nil, false
}

func writableSystem(name string) (string, error) {
	p, ok := lookupSystem(name)
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnknownSystemProperty, name)
	}
	if !p.writable {
		return "", fmt.Errorf("%w %q", ErrReadOnlySystemProperty, p.name)
	}
	return p.name, nil
}

// SetSystem implements MutableMessage. It returns an error wrapping
// ErrUnknownSystemProperty or ErrReadOnlySystemProperty; it does not check value types.
func (m *MapMessage) SetSystem(name string, v any) error {
	canon, err := writableSystem(name)
	if err != nil {
		return err
	}
	if k, ok := foldKey(m.Sys, name); ok {
		delete(m.Sys, k)
	}
	if m.Sys == nil {
		m.Sys = make(map[string]any)
	}
	m.Sys[canon] = v
	return nil
}

// RemoveSystem implements MutableMessage with the errors of SetSystem. Removing an unset
// property is not an error.
func (m *MapMessage) RemoveSystem(name string) error {
	if _, err := writableSystem(name); err != nil {
		return err
	}
	if k, ok := foldKey(m.Sys, name); ok {
		delete(m.Sys, k)
	}
	return nil
}

// SetUser implements MutableMessage. An existing property whose name differs only in
// case is replaced, so the message never holds two spellings of one name.
func (m *MapMessage) SetUser(name string, v any) {
	if k, ok := foldKey(m.Usr, name); ok {
		delete(m.Usr, k)
	}
	if m.Usr == nil {
		m.Usr = make(map[string]any)
	}
	m.Usr[name] = v
}

// RemoveUser implements MutableMessage.
func (m *MapMessage) RemoveUser(name string) {
	if k, ok := foldKey(m.Usr, name); ok {
		delete(m.Usr, k)
	}
}
