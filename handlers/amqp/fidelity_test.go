package amqp_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
)

// sdkTypes are application properties of every type the Go SDK sends (through go-amqp), at
// the edges of their ranges.
func sdkTypes() map[string]any {
	return map[string]any{
		"string": "text, ünïcödé", "bool": true,
		"sbyte": int8(math.MinInt8), "short": int16(math.MinInt16), "int": int32(math.MinInt32), "long": int64(math.MinInt64),
		"byte": uint8(math.MaxUint8), "ushort": uint16(math.MaxUint16), "uint": uint32(math.MaxUint32), "ulong": uint64(math.MaxUint64),
		"float": float32(0.1), "double": 1.0000000000000002,
		"time":   time.Date(2024, 2, 29, 23, 59, 59, 123_000_000, time.UTC),
		"binary": []byte{0, 0xff}, "uuid": goamqp.UUID{0x0f, 0x8f, 0xad, 0x5b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
		"null": nil, // present without a value: the .NET SDK's live tests send one
	}
}

// checkProps fails unless got holds exactly want's properties, each in its Go type.
func checkProps(t *testing.T, where string, got, want map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d properties; want %d: %v", where, len(got), len(want), got)
	}
	for k, w := range want {
		g := got[k]
		if wt, ok := w.(time.Time); ok {
			if gt, ok := g.(time.Time); !ok || !gt.Equal(wt) {
				t.Errorf("%s: %s = %#v; want %v", where, k, g, w)
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s = %#v (%T); want %#v (%T)", where, k, g, g, w, w)
		}
	}
}

// The Go SDK's AMQPAnnotatedMessage with an amqp-value, amqp-sequence and several data
// sections, and properties of every type it can send, is received back as it was sent: alone,
// in a batch, and scheduled through $management.
func TestSDKEveryBodyAndPropertyType(t *testing.T) {
	_, c, ctx, s := sdkQueue(t, "q", nil)
	// dense is a body of one-byte elements, 16 bytes of decoded value a byte: well-formed, so
	// accepted (the decoding budget gives body sections twice the others').
	dense := make([]any, 20_000)
	for i := range dense {
		dense[i] = i%2 == 0
	}
	bodies := map[string]azservicebus.AMQPAnnotatedMessageBody{
		"value":    {Value: map[string]any{"k": int64(1), "list": []any{"a", int32(2)}}},
		"sequence": {Sequence: [][]any{{"a", int64(1)}, {true}}},
		"data":     {Data: [][]byte{[]byte("first "), {}, []byte("third")}},
		"dense":    {Value: dense},
	}
	msg := func(id string) *azservicebus.AMQPAnnotatedMessage {
		return &azservicebus.AMQPAnnotatedMessage{
			Body:                  bodies[strings.Fields(id)[0]],
			Properties:            &azservicebus.AMQPAnnotatedMessageProperties{MessageID: id},
			ApplicationProperties: sdkTypes(),
		}
	}
	for id := range bodies {
		if err := s.SendAMQPAnnotatedMessage(ctx, msg(id), nil); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
	}
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id := range bodies {
		if err := batch.AddAMQPAnnotatedMessage(msg(id+" in a batch"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	var scheduled []*azservicebus.AMQPAnnotatedMessage
	for id := range bodies {
		scheduled = append(scheduled, msg(id+" scheduled"))
	}
	if _, err := s.ScheduleAMQPAnnotatedMessages(ctx, scheduled, time.Now().Add(-time.Minute), nil); err != nil {
		t.Fatal(err)
	}

	r := newReceiver(t, c, "q", nil)
	seen := map[string]bool{}
	for len(seen) < 3*len(bodies) {
		msgs, err := r.ReceiveMessages(ctx, 3*len(bodies)-len(seen), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			raw := m.RawAMQPMessage
			id, _ := raw.Properties.MessageID.(string)
			if seen[id] {
				t.Fatalf("%s received twice", id)
			}
			seen[id] = true
			if want := bodies[strings.Fields(id)[0]]; !reflect.DeepEqual(raw.Body, want) {
				t.Errorf("%s: body %#v; want %#v", id, raw.Body, want)
			}
			checkProps(t, id, raw.ApplicationProperties, sdkTypes())
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// dotnetProps are application properties as the .NET SDK encodes the types the Go SDK cannot
// send (amqp-sdks.md, "App-property types"; AmqpMessageConverter): char, decimal, the three
// described types (a long that fits a byte as a smalllong, as Microsoft.Azure.Amqp writes it),
// and a symbol. Names are in the order the broker returns them.
var dotnetProps = []struct {
	name, hex string
	value     any
}{
	{"char", "73 0001f600", amqp.Char('😀')},
	// 12.50: coefficient 1250, scale 2, with the exponent field Microsoft.Azure.Amqp writes.
	{"decimal", "94 0c3c0000 00000000 00000000 000004e2", amqp.Decimal128{0x0c, 0x3c, 14: 0x04, 15: 0xe2}},
	{"decimal32", "74 3280007b", amqp.Decimal32{0x32, 0x80, 0x00, 0x7b}},
	{"decimal64", "84 31a0000000000001", amqp.Decimal64{0x31, 0xa0, 7: 1}},
	{"dto", "00 a3 1d " + hex.EncodeToString([]byte("com.microsoft:datetime-offset")) + " 81 08cda3e2c8db0c07",
		amqp.Described{Descriptor: amqp.Symbol("com.microsoft:datetime-offset"), Value: int64(0x08cda3e2c8db0c07)}},
	{"short-timespan", "00 a3 16 " + hex.EncodeToString([]byte("com.microsoft:timespan")) + " 55 fb",
		amqp.Described{Descriptor: amqp.Symbol("com.microsoft:timespan"), Value: int64(-5)}},
	{"symbol", "a3 03 73796d", amqp.Symbol("sym")},
	{"timespan", "00 a3 16 " + hex.EncodeToString([]byte("com.microsoft:timespan")) + " 81 000000d18c2e2800",
		amqp.Described{Descriptor: amqp.Symbol("com.microsoft:timespan"), Value: int64(0xd18c2e2800)}},
	{"uri", "00 a3 11 " + hex.EncodeToString([]byte("com.microsoft:uri")) + " a1 0f " + hex.EncodeToString([]byte("https://x/y?z=1")),
		amqp.Described{Descriptor: amqp.Symbol("com.microsoft:uri"), Value: "https://x/y?z=1"}},
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawSender is a go-amqp sender to entity that sends encoded messages as they are, in the
// envelope of a Service Bus batch (whose data sections are encoded messages): what go-amqp
// cannot encode itself (char, decimal, described values) reaches the broker as .NET sends it.
func rawSender(t *testing.T, b *testBroker, entity string) func(raw ...[]byte) error {
	t.Helper()
	c := dialCBS(t, b, goamqp.SASLTypePlain("root", "key"))
	ctx := ctxT(t)
	s, err := c.sess.NewSender(ctx, entity, nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(raw ...[]byte) error {
		return s.Send(ctx, &goamqp.Message{Format: amqp.MessageFormatBatch, Data: raw}, nil)
	}
}

// peekRaw peeks at up to n messages of entity through $management (go-amqp cannot decode a
// delivery carrying a char or a decimal; the peek reply carries each message as its encoding).
func peekRaw(t *testing.T, b *testBroker, entity string, n int32) [][]byte {
	t.Helper()
	call := dialCBS(t, b, goamqp.SASLTypePlain("root", "key")).managementReply(t, entity)
	m := call("com.microsoft:peek-message", map[string]any{"from-sequence-number": int64(0), "message-count": n})
	if code := m.ApplicationProperties["statusCode"]; code != int32(200) {
		t.Fatalf("peek: status %v (%v)", code, m.ApplicationProperties["statusDescription"])
	}
	var out [][]byte
	list, _ := m.Value.(map[string]any)["messages"].([]any)
	for _, e := range list {
		entry, _ := e.(map[string]any)
		b, _ := entry["message"].([]byte)
		out = append(out, b)
	}
	return out
}

// peekOne is the one message of entity, peeked with peekRaw and decoded.
func peekOne(t *testing.T, b *testBroker, entity string) *amqp.Message {
	t.Helper()
	got := peekRaw(t, b, entity, 10)
	if len(got) != 1 {
		t.Fatalf("peeked %d messages; want 1", len(got))
	}
	m, err := amqp.Unmarshal(got[0])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The types only .NET sends (char, decimal, uri, datetime-offset, timespan) and a symbol, and a
// body in forms go-amqp would not write (an amqp-value holding a long in its 8-byte form), come
// back as they were sent: each property's encoding is the .NET encoding, the body's sections
// are the bytes sent.
func TestDotNetTypesKeptByteForByte(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	props := amqp.Map{}
	for _, p := range dotnetProps {
		enc, err := amqp.AppendValue(nil, p.value)
		if err != nil {
			t.Fatal(err)
		}
		if want := unhex(t, p.hex); !bytes.Equal(enc, want) {
			t.Fatalf("%s: the test encodes % x; .NET writes % x", p.name, enc, want)
		}
		props = append(props, amqp.MapEntry{Key: p.name, Value: p.value})
	}
	body := unhex(t, "00 53 77 81 0000000000000001")
	sent, err := amqp.Marshal(&amqp.Message{Properties: &amqp.Properties{MessageID: "dotnet"}, ApplicationProperties: props})
	if err != nil {
		t.Fatal(err)
	}
	sent = append(sent, body...)
	if err := rawSender(t, b, "q")(sent); err != nil {
		t.Fatal(err)
	}

	m := peekOne(t, b, "q")
	if !bytes.Equal(m.RawBody, body) {
		t.Errorf("body sections % x; want % x as sent", m.RawBody, body)
	}
	if len(m.ApplicationProperties) != len(dotnetProps) {
		t.Errorf("%d properties; want %d", len(m.ApplicationProperties), len(dotnetProps))
	}
	for i, p := range dotnetProps {
		if i >= len(m.ApplicationProperties) {
			break
		}
		e := m.ApplicationProperties[i]
		enc, err := amqp.AppendValue(nil, e.Value)
		if e.Key != p.name || err != nil || !bytes.Equal(enc, unhex(t, p.hex)) {
			t.Errorf("property %d: %v = % x (%v); want %s = % x", i, e.Key, enc, err, p.name, unhex(t, p.hex))
		}
	}
}

// What the broker cannot keep is refused with amqp:not-implemented, and nothing is stored: an
// application property with a key that is not a string, or whose value is null, compound or an
// unknown described type.
func TestPropertiesTheBrokerCannotKeepAreRefused(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	send := rawSender(t, b, "q")
	for name, props := range map[string]amqp.Map{
		"a ulong key":            {{Key: uint64(1), Value: "x"}},
		"a symbol key":           {{Key: amqp.Symbol("k"), Value: "x"}},
		"a list":                 {{Key: "k", Value: amqp.List{"a"}}},
		"a map":                  {{Key: "k", Value: amqp.Map{{Key: "a", Value: "b"}}}},
		"an array":               {{Key: "k", Value: amqp.Array{Type: amqp.TypeInt, Elems: []any{int32(1)}}}},
		"another described type": {{Key: "k", Value: amqp.Described{Descriptor: amqp.Symbol("x:y"), Value: "z"}}},
		"a uri that is a long":   {{Key: "k", Value: amqp.Described{Descriptor: amqp.Symbol("com.microsoft:uri"), Value: int64(1)}}},
	} {
		raw, err := amqp.Marshal(&amqp.Message{ApplicationProperties: props, Data: [][]byte{[]byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		var ae *goamqp.Error
		if err := send(raw); !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotImplemented {
			t.Errorf("%s: %v; want amqp:not-implemented", name, err)
		}
	}
	if e, err := b.store.GetEntity(ctxT(t), "q"); err != nil || e.Counts.Total() != 0 {
		t.Errorf("q holds %+v, %v; want nothing", e.Counts, err)
	}
}

// The session "" is a session: the Go SDK sends to it and accepts it by name, and a message
// without a session is still refused by a session queue.
func TestSDKEmptySessionID(t *testing.T) {
	b, c, ctx, s := sessionQueue(t)
	for _, body := range []string{"one", "two"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body), SessionID: to.Ptr("")}, nil); err != nil {
			t.Fatalf("send to session \"\": %v", err)
		}
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("other"), SessionID: to.Ptr("x")}, nil); err != nil {
		t.Fatal(err)
	}
	err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("none")}, nil)
	if err == nil {
		t.Error("a message without a session was accepted by a session queue")
	}
	r, err := c.AcceptSessionForQueue(ctx, "sq", "", nil)
	if err != nil {
		t.Fatalf("accept session \"\": %v", err)
	}
	t.Cleanup(func() { _ = r.Close(ctx) })
	if r.SessionID() != "" {
		t.Errorf("accepted session %q; want \"\"", r.SessionID())
	}
	if err := r.SetSessionState(ctx, []byte("st"), nil); err != nil {
		t.Errorf("set the state of \"\": %v", err)
	}
	var got []string
	for len(got) < 2 {
		msgs, err := r.ReceiveMessages(ctx, 2-len(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.SessionID == nil || *m.SessionID != "" {
				t.Errorf("%s: SessionID %v; want \"\"", m.Body, m.SessionID)
			}
			got = append(got, string(m.Body))
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if fmt.Sprint(got) != "[one two]" {
		t.Errorf("session \"\" gave %v", got)
	}
	if st, err := r.GetSessionState(ctx, nil); err != nil || string(st) != "st" {
		t.Errorf("state of \"\" = %q, %v", st, err)
	}
	// The next session is x's: "" holds nothing more.
	next, err := c.AcceptNextSessionForQueue(ctx, "sq", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close(ctx) })
	if next.SessionID() != "x" {
		t.Errorf("next session %q; want x", next.SessionID())
	}
	if list, err := b.store.ListSessions(ctx, mustResolve(t, b, "sq"), 0, 10); err != nil || len(list) != 2 || list[0].ID != "" || !list[0].HasState {
		t.Errorf("sessions %+v, %v; want \"\" with its state, and x", list, err)
	}
}

func mustResolve(t *testing.T, b *testBroker, path string) *broker.Entity {
	t.Helper()
	e, err := b.store.Resolve(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A message whose body and properties REST cannot show as they are is left exact by what REST
// does to it: a peek-lock and an abandon, a renewal, a dead-lettering; an AMQP receiver then
// gets it as it was sent.
func TestRESTLeavesAMQPMessagesExact(t *testing.T) {
	b, c, ctx, s := sdkQueue(t, "q", nil)
	sent := &azservicebus.AMQPAnnotatedMessage{
		Body:                  azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a", int64(1)}}},
		ApplicationProperties: sdkTypes(),
	}
	if err := s.SendAMQPAnnotatedMessage(ctx, sent, nil); err != nil {
		t.Fatal(err)
	}
	lock := func() string {
		t.Helper()
		resp := b.httpDo(t, "POST", "/q/messages/head?timeout=5", "", nil)
		if resp.StatusCode != 201 {
			t.Fatalf("REST peek-lock: %s", resp.Status)
		}
		return strings.TrimPrefix(resp.Header.Get("Location"), b.httpURL)
	}
	loc := lock()
	if resp := b.httpDo(t, "PUT", loc, "", nil); resp.StatusCode != 200 {
		t.Fatalf("REST abandon: %s", resp.Status)
	}
	loc = lock()
	if resp := b.httpDo(t, "POST", loc, "", nil); resp.StatusCode != 200 {
		t.Fatalf("REST renew: %s", resp.Status)
	}
	if resp := b.httpDo(t, "POST", loc+"/$deadletter", "", nil); resp.StatusCode != 200 && resp.StatusCode != 204 {
		t.Fatalf("REST dead-letter: %s", resp.Status)
	}
	dlq := newReceiver(t, c, "q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	msgs, err := dlq.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("dead-letter receive: %v, %v", msgs, err)
	}
	raw := msgs[0].RawAMQPMessage
	if !reflect.DeepEqual(raw.Body, sent.Body) {
		t.Errorf("body after REST: %#v; want %#v", raw.Body, sent.Body)
	}
	want := sdkTypes()
	for _, k := range []string{"DeadLetterReason", "DeadLetterErrorDescription"} { // the broker's own
		if v, ok := raw.ApplicationProperties[k]; ok {
			want[k] = v
		}
	}
	checkProps(t, "after REST", raw.ApplicationProperties, want)
	if msgs[0].DeliveryCount != 2 {
		t.Errorf("delivery count %d; want 2 (one REST abandon; dead-lettering and this receive from the dead-letter subqueue count none)", msgs[0].DeliveryCount)
	}
}
