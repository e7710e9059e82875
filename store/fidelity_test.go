package store_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
)

// dotnetDecimal is 12.50 as Microsoft.Azure.Amqp encodes a .NET decimal (coefficient 1250,
// scale 2): its exponent field is 1568 − scale, not the standard 6176 − scale.
var dotnetDecimal = broker.Decimal128{0x0c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x04, 0xe2}

// everyType is one user property of every type the store keeps, at the edges of their ranges.
// Names sort as the store returns them.
func everyType() broker.UserProperties {
	return broker.UserProperties{
		{Name: "binary", Value: []byte{0, 0xff, 'x'}},
		{Name: "bool", Value: false},
		{Name: "byte", Value: uint8(255)},
		{Name: "char", Value: broker.Char('😀')},
		{Name: "datetime", Value: time.Date(2024, 2, 29, 23, 59, 59, 123_000_000, time.UTC)},
		{Name: "datetime-far", Value: time.UnixMilli(1 << 50).UTC()}, // year 37648, beyond RFC 3339
		{Name: "datetimeoffset", Value: broker.DateTimeOffsetOf(time.Date(2011, 3, 4, 8, 49, 37, 1234500, time.UTC))},
		{Name: "decimal128", Value: dotnetDecimal},
		{Name: "decimal32", Value: broker.Decimal32{0x32, 0x80, 0x00, 0x7b}},
		{Name: "decimal64", Value: broker.Decimal64{0x31, 0xa0, 0, 0, 0, 0, 0, 0x01}},
		{Name: "double", Value: 1.0000000000000002},
		{Name: "empty-binary", Value: []byte{}},
		{Name: "float", Value: float32(0.1)},
		{Name: "int", Value: int32(math.MinInt32)},
		{Name: "long", Value: int64(math.MinInt64)},
		{Name: "none", Value: nil}, // present, without a value (AMQP null)
		{Name: "sbyte", Value: int8(-128)},
		{Name: "short", Value: int16(math.MinInt16)},
		{Name: "string", Value: `text, "quoted", ünïcödé`},
		{Name: "symbol", Value: broker.Symbol("a:symbol")},
		{Name: "timespan", Value: broker.TimeSpan(-(((1*24+2)*3600+3*60+4)*10_000_000 + 5))},
		{Name: "uint", Value: uint32(math.MaxUint32)},
		{Name: "ulong", Value: uint64(math.MaxUint64)},
		{Name: "uri", Value: broker.URI("https://example.com/a?b=c#d")},
		{Name: "ushort", Value: uint16(math.MaxUint16)},
		{Name: "uuid", Value: uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e")},
	}
}

// amqpBody is a body that is not one data section: an amqp-value holding a long 1 in its 8-byte
// form, which the store must keep as these bytes.
var amqpBody = []byte{0x00, 0x53, 0x77, 0x81, 0, 0, 0, 0, 0, 0, 0, 1}

// exactMessages are a message of every property type with an AMQP body, and one with a data
// body, both in the session "" (which a queue without sessions keeps as any other property).
func exactMessages() []broker.Message {
	return []broker.Message{
		{Body: amqpBody, BodyType: broker.BodyAMQP, MessageID: "amqp", UserProperties: everyType(), HasSessionID: true},
		{Body: []byte("plain"), MessageID: "data", UserProperties: everyType(), HasSessionID: true},
	}
}

// checkExact fails unless got holds what sent did: body, body type, session and every property
// with its type.
func checkExact(t *testing.T, where string, got *broker.Message, sent broker.Message) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: no message", where)
		return
	}
	if string(got.Body) != string(sent.Body) || got.BodyType != sent.BodyType {
		t.Errorf("%s: body %q (type %d); want %q (type %d)", where, got.Body, got.BodyType, sent.Body, sent.BodyType)
	}
	if got.SessionID != sent.SessionID || !got.HasSessionID || !got.InSession() {
		t.Errorf("%s: session %q (present %v); want %q, present", where, got.SessionID, got.HasSessionID, sent.SessionID)
	}
	if diff := cmp.Diff(sent.UserProperties, got.UserProperties); diff != "" {
		t.Errorf("%s: user properties differ (-sent +got):\n%s", where, diff)
	}
}

// TestEveryTypeAndBodyThroughEveryPath sends messages with a property of every type, with an
// AMQP body and with a data body, through every way the store copies or moves a message, and
// reads each back exactly.
func TestEveryTypeAndBodyThroughEveryPath(t *testing.T) {
	b := setup(t, manual)
	sent := exactMessages()
	byID := func(m *broker.Message) broker.Message {
		for _, s := range sent {
			if s.MessageID == m.MessageID {
				return s
			}
		}
		t.Fatalf("unknown message %q", m.MessageID)
		return broker.Message{}
	}
	checkAll := func(where string, msgs []*broker.Message) {
		t.Helper()
		if len(msgs) != len(sent) {
			t.Fatalf("%s: %d messages; want %d", where, len(msgs), len(sent))
		}
		for _, m := range msgs {
			checkExact(t, where+" "+m.MessageID, m, byID(m))
		}
	}

	// Send, peek, peek-lock, abandon, defer and receive deferred, dead-letter and receive from
	// the dead-letter subqueue, resubmit, receive-and-delete.
	b.throughQueue(t, b.queue(t, "q", nil), sent, checkAll)

	// Auto-forwarding, a topic's fan-out through a rule whose action changes another
	// property, and the forwarding of dead letters.
	dst := b.queue(t, "dst", nil)
	fwd := b.queue(t, "fwd", func(p *broker.Properties) { p.ForwardTo = "dst" })
	b.send(t, fwd, sent...)
	checkAll("forwarded", b.drain(t, dst, broker.SubQueueMain))

	topic := b.topic(t, "t", nil)
	plain := b.sub(t, "t", "plain", nil, nil)
	rule := sqlRule("typed", "user.short = -32768 AND user.char = '😀' AND user.ulong > 1.8e19 AND user.uuid = '0f8fad5b-d9cb-469f-a165-70867728950e'")
	rule.Action = &broker.RuleAction{SQLExpression: "SET user.added = user.sbyte + 1"}
	acted := b.sub(t, "t", "acted", rule, nil)
	b.send(t, topic, sent...)
	checkAll("subscription", b.drain(t, plain, broker.SubQueueMain))
	copies := b.drain(t, acted, broker.SubQueueMain)
	if len(copies) != 2 {
		t.Fatalf("the typed rule matched %d copies; want 2", len(copies))
	}
	for _, c := range copies {
		want := byID(c)
		want.UserProperties = append(broker.UserProperties{{Name: "added", Value: int64(-127)}}, want.UserProperties...)
		checkExact(t, "copy changed by an action "+c.MessageID, c, want)
	}

	collector := b.queue(t, "collector", nil)
	work := b.queue(t, "work", func(p *broker.Properties) { p.ForwardDeadLetteredMessagesTo = "collector" })
	b.send(t, work, sent...)
	b.deadLetterAll(t, work)
	checkAll("dead letters forwarded", b.drain(t, collector, broker.SubQueueMain))
}

// throughQueue sends msgs to the queue q and moves them through every way a queue hands out or
// moves a message, calling check with each way's name and the messages read there: peek,
// peek-lock, abandon and peek-lock again, defer and receive by sequence number, dead-letter and
// peek at the dead-letter subqueue, resubmit and receive-and-delete.
func (b *bundle) throughQueue(t *testing.T, q *broker.Entity, msgs []broker.Message, check func(where string, got []*broker.Message)) {
	t.Helper()
	b.send(t, q, msgs...)
	check("peek", b.drainKeep(t, q, broker.SubQueueMain))
	target := broker.Target{Entity: q}
	locked := b.drainLocked(t, q)
	check("peek-lock", locked)
	for _, m := range locked {
		if _, err := settle1(b.ctx, b.store, target, broker.Abandon, "", m.LockToken); err != nil {
			t.Fatal(err)
		}
	}
	locked = b.drainLocked(t, q)
	check("after abandon", locked)
	var seqs []int64
	for _, m := range locked {
		if _, err := settle1(b.ctx, b.store, target, broker.Defer, "", m.LockToken); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.SequenceNumber)
	}
	deferred, err := b.store.ReceiveDeferred(b.ctx, target, seqs, broker.PeekLock)
	if err != nil {
		t.Fatal(err)
	}
	check("deferred", deferred)
	for _, m := range deferred {
		if err := deadLetter1(b.ctx, b.store, target, "", m.LockToken, "r", "d"); err != nil {
			t.Fatal(err)
		}
	}
	check("dead letters", b.drainKeep(t, q, broker.SubQueueDeadLetter))
	if n, err := b.store.Resubmit(b.ctx, q, 0, nil); err != nil || n != int64(len(msgs)) {
		t.Fatalf("Resubmit = %d, %v", n, err)
	}
	again, err := receiveN(b.ctx, b.store, target, broker.ReceiveAndDelete, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("resubmitted", again)
}

// deadLetterAll peek-locks every message of e's main queue and dead-letters it.
func (b *bundle) deadLetterAll(t *testing.T, e *broker.Entity) {
	t.Helper()
	for _, m := range b.drainLocked(t, e) {
		if err := deadLetter1(b.ctx, b.store, broker.Target{Entity: e}, "", m.LockToken, "r", "d"); err != nil {
			t.Fatal(err)
		}
	}
}

// drainKeep peeks at every message of a subqueue without taking it.
func (b *bundle) drainKeep(t *testing.T, e *broker.Entity, sq broker.SubQueue) []*broker.Message {
	t.Helper()
	msgs, err := b.store.Browse(b.ctx, e, sq, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// drainLocked peek-locks every message of e's main queue.
func (b *bundle) drainLocked(t *testing.T, e *broker.Entity) []*broker.Message {
	t.Helper()
	msgs, err := receiveN(b.ctx, b.store, broker.Target{Entity: e}, broker.PeekLock, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// Rows written before property types had tags read back as they were written.
func TestUserPropertiesInThePreviousFormat(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("old"), MessageID: "old"})
	old := `{"s": {"s": "x"}, "i": {"i": -5}, "f": {"f": 2.5}, "b": {"b": true}, "d": {"d": "2024-01-02T03:04:05.5Z"}, "big": {"i": 9007199254740993}}`
	if _, err := b.pool.Exec(b.ctx, `UPDATE messages SET user_props = $1::jsonb WHERE message_id = 'old'`, old); err != nil {
		t.Fatal(err)
	}
	got := b.drainKeep(t, q, broker.SubQueueMain)
	want := broker.UserProperties{
		{Name: "b", Value: true},
		{Name: "big", Value: int64(9007199254740993)},
		{Name: "d", Value: time.Date(2024, 1, 2, 3, 4, 5, 500_000_000, time.UTC)},
		{Name: "f", Value: 2.5},
		{Name: "i", Value: int64(-5)},
		{Name: "s", Value: "x"},
	}
	if len(got) != 1 {
		t.Fatalf("%d messages", len(got))
	}
	if diff := cmp.Diff(want, got[0].UserProperties); diff != "" {
		t.Errorf("old row read back differs (-want +got):\n%s", diff)
	}
	// A row the store cannot read is an error, not a message with a property missing.
	if _, err := b.pool.Exec(b.ctx, `UPDATE messages SET user_props = '{"x": {"i": 300, "k": "byte"}}' WHERE message_id = 'old'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, 0, 10); err == nil || !strings.Contains(err.Error(), "byte") {
		t.Errorf("a byte of 300 read as %v; want an error", err)
	}
}

// What the store cannot keep is refused with ErrBadRequest, and nothing is stored.
func TestPropertyValuesRefused(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	for name, v := range map[string]any{
		"NaN float":     float32(math.NaN()),
		"infinite":      math.Inf(1),
		"surrogate":     broker.Char(0xd800),
		"NUL in a URI":  broker.URI("a\x00b"),
		"bad UTF-8":     broker.Symbol("\xff"),
		"a list":        []any{1},
		"an int":        7, // Go's int is no Service Bus type
		"a struct time": struct{ time.Time }{},
	} {
		err := b.store.Send(b.ctx, q, []broker.Message{{Body: []byte("x"), UserProperties: broker.UserProperties{{Name: "p", Value: v}}}})
		if !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("%s: Send error %v; want ErrBadRequest", name, err)
		}
	}
	for name, m := range map[string]broker.Message{
		"empty AMQP body":   {BodyType: broker.BodyAMQP},
		"unknown body type": {Body: []byte("x"), BodyType: 7},
	} {
		if err := b.store.Send(b.ctx, q, []broker.Message{m}); !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("%s: Send error %v; want ErrBadRequest", name, err)
		}
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("refused sends stored %d messages", c.Total())
	}
}

// An AMQP body counts its bytes against the entity's message size, as a data body does.
func TestAMQPBodySizeCounts(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxMessageSizeInKilobytes = 1 })
	big := append([]byte{0x00, 0x53, 0x75, 0xb0, 0, 0, 0x04, 0}, make([]byte, 1024)...)
	err := b.store.Send(b.ctx, q, []broker.Message{{Body: big, BodyType: broker.BodyAMQP}})
	if !errors.Is(err, broker.ErrTooLarge) {
		t.Errorf("a %d-byte AMQP body in a 1 KiB queue: %v; want ErrTooLarge", len(big), err)
	}
	b.send(t, q, broker.Message{Body: amqpBody, BodyType: broker.BodyAMQP})
	if c := b.counts(t, "q"); c.SizeInBytes < int64(len(amqpBody)) {
		t.Errorf("SizeInBytes %d; want at least the body's %d bytes", c.SizeInBytes, len(amqpBody))
	}
}

// The session "" is a session like any other: a session queue takes its messages (and still
// refuses messages without a session), it is accepted by its name, holds state, and its locks,
// settlements and release work as for any other; the next-session accept finds it too.
func TestEmptySessionID(t *testing.T) {
	b := setup(t, manual)
	q := b.sessionQueue(t, "q", nil)
	if err := b.store.Send(b.ctx, q, []broker.Message{body("no session")}); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("a message without a session: %v; want ErrBadRequest", err)
	}
	if err := b.store.Send(b.ctx, q, []broker.Message{{Body: []byte("x"), HasSessionID: true, PartitionKey: "p"}}); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("session \"\" with PartitionKey p: %v; want ErrBadRequest (they must be equal)", err)
	}
	b.send(t, q, broker.Message{Body: []byte("e1"), HasSessionID: true}, broker.Message{Body: []byte("other"), SessionID: "x"},
		broker.Message{Body: []byte("e2"), HasSessionID: true})

	s := b.accept(t, q, "")
	if s.ID != "" {
		t.Fatalf("accepted session %q; want \"\"", s.ID)
	}
	if _, err := b.store.AcceptSession(b.ctx, q, ""); !errors.Is(err, broker.ErrConflict) {
		t.Errorf("accepting \"\" while it is held: %v; want ErrConflict", err)
	}
	got := b.receiveIn(t, q, s, 10)
	if diff := cmp.Diff([]string{"e1", "e2"}, bodies(got)); diff != "" {
		t.Fatalf("session \"\" gave (-want +got):\n%s", diff)
	}
	for _, m := range got {
		if m.SessionID != "" || !m.HasSessionID || m.PartitionKey != "" {
			t.Errorf("%s: session %q (present %v), partition key %q; want \"\", present, \"\"", m.Body, m.SessionID, m.HasSessionID, m.PartitionKey)
		}
	}
	// The lock of another session, or none, does not settle them.
	x := b.accept(t, q, "x")
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(x)), broker.Complete, "", got[0].LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("complete under session x's lock: %v; want ErrLockLost", err)
	}
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Complete, "", got[0].LockToken); err != nil {
		t.Errorf("complete in session \"\": %v", err)
	}
	if _, err := settle1(b.ctx, b.store, inSession(q, lockOf(s)), broker.Abandon, "", got[1].LockToken); err != nil {
		t.Errorf("abandon in session \"\": %v", err)
	}
	if err := b.store.SetSessionState(b.ctx, q, lockOf(s), []byte("st")); err != nil {
		t.Fatal(err)
	}
	if st, err := b.store.SessionState(b.ctx, q, lockOf(s)); err != nil || string(st) != "st" {
		t.Errorf("state of \"\" = %q, %v", st, err)
	}
	if _, err := b.store.RenewSessionLock(b.ctx, q, lockOf(s)); err != nil {
		t.Errorf("renew the lock of \"\": %v", err)
	}
	list, err := b.store.ListSessions(b.ctx, q, 0, 10)
	if err != nil || len(list) != 2 || list[0].ID != "" || !list[0].HasState || !list[0].HasMessages {
		t.Errorf("ListSessions = %+v, %v; want \"\" (with state and a message) first", list, err)
	}
	if err := b.store.ReleaseSession(b.ctx, q, lockOf(s)); err != nil {
		t.Fatal(err)
	}
	// Released, with its abandoned message back: the next-session accept finds it.
	next := b.acceptNext(t, q)
	if next == nil || next.ID != "" {
		t.Fatalf("next session = %+v; want \"\"", next)
	}
	if again := b.receiveIn(t, q, next, 10); len(again) != 1 || string(again[0].Body) != "e2" || again[0].DeliveryCount != 2 {
		t.Errorf("session \"\" after its release gave %v", bodies(again))
	}

	// A topic's session subscription takes the session "" too, and a rule action can name it
	// or remove it.
	topic := b.topic(t, "t", nil)
	sub := b.sub(t, "t", "s", nil, func(p *broker.Properties) { p.RequiresSession = true })
	plain := b.sub(t, "t", "plain", sqlRule("r", "sys.SessionId = ''"), nil)
	removed := b.sub(t, "t", "removed", &broker.Rule{Name: "r", Filter: broker.RuleFilter{Kind: broker.FilterTrue, SQLExpression: "1=1"},
		Action: &broker.RuleAction{SQLExpression: "REMOVE sys.SessionId"}}, nil)
	b.send(t, topic, broker.Message{Body: []byte("to all"), HasSessionID: true})
	if s := b.accept(t, sub, ""); len(b.receiveIn(t, sub, s, 10)) != 1 {
		t.Error("the session subscription's session \"\" holds no message")
	}
	if got := b.drain(t, plain, broker.SubQueueMain); len(got) != 1 || !got[0].HasSessionID {
		t.Errorf("sys.SessionId = '' matched %d messages: %+v", len(got), got)
	}
	if got := b.drain(t, removed, broker.SubQueueMain); len(got) != 1 || got[0].InSession() {
		t.Errorf("REMOVE sys.SessionId left %+v", got)
	}
}

// TestSettleWithPropertiesToModify: an abandon, a defer and a dead-lettering set the properties
// they carry over the message's, by name, keeping the others and their types; settlements
// without modifications in the same call are made as they were.
func TestSettleWithPropertiesToModify(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", nil)
	target := broker.Target{Entity: q}
	props := broker.UserProperties{{Name: "change", Value: "old"}, {Name: "keep", Value: int32(7)}}
	for _, id := range []string{"abandon", "defer", "dead", "plain"} {
		b.send(t, q, broker.Message{Body: []byte(id), MessageID: id, UserProperties: props})
	}
	locked := b.drainLocked(t, q)
	tok := map[string]uuid.UUID{}
	for _, m := range locked {
		tok[m.MessageID] = m.LockToken
	}
	mods := broker.UserProperties{{Name: "change", Value: uint64(math.MaxUint64)}, {Name: "added", Value: broker.Char('é')}}
	res := b.store.Settle(b.ctx, target, []broker.SettleRequest{
		{Op: broker.Abandon, Token: tok["abandon"], PropertiesToModify: mods},
		{Op: broker.Defer, Token: tok["defer"], PropertiesToModify: mods},
		{Op: broker.DeadLetter, Token: tok["dead"], Reason: "r", Description: "d", PropertiesToModify: mods},
		{Op: broker.Abandon, Token: tok["plain"]},
	})
	for i, r := range res {
		if r.Err != nil {
			t.Errorf("request %d: %v", i, r.Err)
		}
	}
	want := broker.UserProperties{{Name: "added", Value: broker.Char('é')}, {Name: "change", Value: uint64(math.MaxUint64)}, {Name: "keep", Value: int32(7)}}
	all := append(b.drainKeep(t, q, broker.SubQueueMain), b.drainKeep(t, q, broker.SubQueueDeadLetter)...)
	if len(all) != 4 {
		t.Fatalf("%d messages", len(all))
	}
	for _, m := range all {
		w := want
		if m.MessageID == "plain" {
			w = props
		}
		if diff := cmp.Diff(w, m.UserProperties); diff != "" {
			t.Errorf("%s: properties differ (-want +got):\n%s", m.MessageID, diff)
		}
	}
	checkSize(t, b, "q")
}

// checkSize fails unless the entity's SizeInBytes is the sum of its messages' sizes.
func checkSize(t *testing.T, b *bundle, path string) {
	t.Helper()
	var sum int64
	if err := b.pool.QueryRow(b.ctx, `SELECT coalesce(sum(size), 0) FROM messages m JOIN entities e ON e.id = m.entity_id
		WHERE e.path = $1`, path).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if c := b.counts(t, path); c.SizeInBytes != sum {
		t.Errorf("%s: SizeInBytes %d; its messages hold %d", path, c.SizeInBytes, sum)
	}
}

// Properties to modify are checked as a send's: a request that breaks a rule fails alone with
// ErrBadRequest and changes nothing, its lock held still; settlements that cannot modify
// properties refuse them.
func TestSettleWithPropertiesToModifyRefused(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxMessageSizeInKilobytes = 40 })
	big := strings.Repeat("x", 30000)
	b.send(t, q, broker.Message{Body: []byte("full"), MessageID: "full", UserProperties: broker.UserProperties{{Name: "a", Value: big}}},
		broker.Message{Body: []byte("other"), MessageID: "other"})
	locked := b.drainLocked(t, q)
	full, other := locked[0], locked[1]
	target := broker.Target{Entity: q}
	sizeBefore := b.counts(t, "q").SizeInBytes
	for name, req := range map[string]broker.SettleRequest{
		"complete":                      {Op: broker.Complete, PropertiesToModify: broker.UserProperties{{Name: "x", Value: "y"}}},
		"renew":                         {Op: broker.RenewLock, PropertiesToModify: broker.UserProperties{{Name: "x", Value: "y"}}},
		"release":                       {Op: broker.Release, PropertiesToModify: broker.UserProperties{{Name: "x", Value: "y"}}},
		"bad type":                      {Op: broker.Abandon, PropertiesToModify: broker.UserProperties{{Name: "x", Value: struct{}{}}}},
		"twice the name":                {Op: broker.Abandon, PropertiesToModify: broker.UserProperties{{Name: "x", Value: "1"}, {Name: "x", Value: "2"}}},
		"over 64 KiB":                   {Op: broker.Abandon, PropertiesToModify: broker.UserProperties{{Name: "b", Value: big}, {Name: "c", Value: big}}},
		"over the queue's message size": {Op: broker.Defer, PropertiesToModify: broker.UserProperties{{Name: "b", Value: big}}},
	} {
		req.Token = full.LockToken
		res := b.store.Settle(b.ctx, target, []broker.SettleRequest{req, {Op: broker.RenewLock, Token: other.LockToken}})
		if !errors.Is(res[0].Err, broker.ErrBadRequest) {
			t.Errorf("%s: %v; want ErrBadRequest", name, res[0].Err)
		}
		if res[1].Err != nil {
			t.Errorf("%s: the other request of the call failed too: %v", name, res[1].Err)
		}
	}
	// Nothing changed, and the lock is still held: a plain abandon takes it.
	got := b.drainKeep(t, q, broker.SubQueueMain)
	if len(got[0].UserProperties) != 1 || got[0].State != broker.StateActive {
		t.Errorf("after the refusals: %d properties, state %v; want one property, active", len(got[0].UserProperties), got[0].State)
	}
	if c := b.counts(t, "q").SizeInBytes; c != sizeBefore {
		t.Errorf("SizeInBytes %d; want %d as before", c, sizeBefore)
	}
	if _, err := settle1(b.ctx, b.store, target, broker.Abandon, "", full.LockToken); err != nil {
		t.Errorf("abandon after the refusals: %v", err)
	}
	// A lost lock is lost, modifications or not.
	res := b.store.Settle(b.ctx, target, []broker.SettleRequest{{Op: broker.Abandon, Token: full.LockToken,
		PropertiesToModify: broker.UserProperties{{Name: "x", Value: "y"}}}})
	if !errors.Is(res[0].Err, broker.ErrLockLost) {
		t.Errorf("modifying abandon of a released lock: %v; want ErrLockLost", res[0].Err)
	}
	checkSize(t, b, "q")
}

// In a session, and for an entity that forwards its dead letters, a modifying settlement works
// as a plain one: the session lock is checked, the dead letter moves on with its properties.
func TestSettleWithPropertiesToModifyInASessionAndForwarded(t *testing.T) {
	b := setup(t, manual)
	b.queue(t, "collector", nil)
	q := b.sessionQueue(t, "q", func(p *broker.Properties) { p.ForwardDeadLetteredMessagesTo = "collector" })
	b.send(t, q, broker.Message{Body: []byte("m"), HasSessionID: true, UserProperties: broker.UserProperties{{Name: "k", Value: int8(1)}}})
	s := b.accept(t, q, "")
	m := b.receiveIn(t, q, s, 1)[0]
	mods := broker.UserProperties{{Name: "k", Value: broker.TimeSpan(5)}}
	other := broker.SessionLock{SessionID: "", Token: uuid.New()}
	res := b.store.Settle(b.ctx, inSession(q, other), []broker.SettleRequest{{Op: broker.DeadLetter, Token: m.LockToken, PropertiesToModify: mods}})
	if !errors.Is(res[0].Err, broker.ErrLockLost) {
		t.Errorf("dead-letter under a wrong session lock: %v; want ErrLockLost", res[0].Err)
	}
	res = b.store.Settle(b.ctx, inSession(q, lockOf(s)), []broker.SettleRequest{{Op: broker.DeadLetter, Token: m.LockToken, PropertiesToModify: mods}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	collector, _ := b.store.Resolve(b.ctx, "collector")
	got := b.drain(t, collector, broker.SubQueueMain)
	if len(got) != 1 || !got[0].HasSessionID || got[0].DeadLetterSource != "q" {
		t.Fatalf("collector got %+v", got)
	}
	if diff := cmp.Diff(mods, got[0].UserProperties); diff != "" {
		t.Errorf("forwarded dead letter's properties (-want +got):\n%s", diff)
	}
	checkSize(t, b, "q")
	checkSize(t, b, "collector")
}
