package amqp

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func sampleMessage() *Message {
	enq := time.UnixMilli(1700000000123).UTC()
	return &Message{
		Header:              &Header{Durable: true, Priority: 7, TTL: 90 * time.Second, FirstAcquirer: true, DeliveryCount: 2},
		DeliveryAnnotations: Map{{Key: Symbol("x-opt-lock-token"), Value: uuid1}},
		MessageAnnotations: Map{
			{Key: Symbol("x-opt-sequence-number"), Value: int64(42)},
			{Key: Symbol("x-opt-enqueued-time"), Value: enq},
			{Key: Symbol("x-opt-message-state"), Value: int32(1)},
			{Key: uint64(5), Value: "numeric key"},
		},
		Properties: &Properties{
			MessageID: "m-1", UserID: []byte("user"), To: "queue", Subject: "label", ReplyTo: "reply",
			CorrelationID: uuid1, ContentType: "application/json", ContentEncoding: "gzip",
			AbsoluteExpiryTime: enq.Add(time.Hour), CreationTime: enq, GroupID: "session-1", HasGroupID: true,
			GroupSequence: ptr(uint32(3)), ReplyToGroupID: "rs",
		},
		ApplicationProperties: Map{
			{Key: "s", Value: "v"}, {Key: "l", Value: int64(1)}, {Key: "i", Value: int32(2)},
			{Key: "d", Value: 2.5}, {Key: "b", Value: true}, {Key: "t", Value: enq}, {Key: "u", Value: uuid1},
			{Key: "bin", Value: []byte{0}}, {Key: "null", Value: nil},
		},
		Data:   [][]byte{[]byte("first"), {}, []byte("third")},
		Footer: Map{{Key: Symbol("f"), Value: uint32(1)}},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *Message
	}{
		{"every section", sampleMessage()},
		{"empty", &Message{}},
		{"empty sections", &Message{Header: &Header{Priority: 4}, Properties: &Properties{}, MessageAnnotations: Map{}, ApplicationProperties: Map{}}},
		{"ulong message id", &Message{Properties: &Properties{MessageID: uint64(7), CorrelationID: uint64(0)}}},
		{"binary message id", &Message{Properties: &Properties{MessageID: []byte{1, 2}, CorrelationID: "c"}}},
		{"amqp-value map", &Message{Value: Map{{Key: "operation", Value: "put-token"}}, HasValue: true}},
		{"amqp-value string", &Message{Value: "token", HasValue: true}},
		{"amqp-value null", &Message{HasValue: true}},
		{"amqp-sequence", &Message{Sequence: []List{{int64(1), "a"}, {}}}},
		{"large data", &Message{Data: [][]byte{bytes.Repeat([]byte("z"), 100000)}}},
	} {
		b, err := Marshal(tc.m)
		if err != nil {
			t.Errorf("%s: Marshal error %v", tc.name, err)
			continue
		}
		got, err := Unmarshal(b)
		if err != nil {
			t.Errorf("%s: Unmarshal error %v", tc.name, err)
			continue
		}
		// The raw body is the encoding of the body sections: the message without a body,
		// with its raw body, encodes as the whole message did.
		raw := got.RawBody
		got.RawBody = nil
		if !reflect.DeepEqual(got, tc.m) {
			t.Errorf("%s: Unmarshal(Marshal(m)) = %#v; want %#v", tc.name, got, tc.m)
		}
		b2, err := Marshal(got)
		if err != nil || !bytes.Equal(b, b2) {
			t.Errorf("%s: re-encoding differs (error %v)", tc.name, err)
		}
		bare := *tc.m
		bare.Data, bare.Sequence, bare.Value, bare.HasValue, bare.RawBody = nil, nil, nil, false, raw
		if b3, err := Marshal(&bare); err != nil || !bytes.Equal(b, b3) {
			t.Errorf("%s: the message rebuilt from its raw body = % x (error %v); want % x", tc.name, b3, err, b)
		}
	}
}

// A body travels on byte for byte: Unmarshal keeps the sections as the peer encoded them, in
// forms Marshal would not choose itself, and Marshal writes them back so.
func TestRawBodyKeptExactly(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string // body sections, hex
	}{
		// amqp-value: a long 1 in its 8-byte form, in a map32.
		{"value", "00 53 77 d1 00000010 00000002 a1 01 6b 81 0000000000000001"},
		// amqp-value with the symbolic descriptor, holding a str32.
		{"symbolic value", "00 a3 11 616d71703a616d71702d76616c75653a2a b1 00000002 6869"},
		// Two amqp-sequence sections, the first a list32 of one smalluint 0 written as uint.
		{"sequences", "00 53 76 d0 00000009 00000001 70 00000000 00 53 76 45"},
		// Three data sections, one a vbin32.
		{"data", "00 53 75 a0 01 61 00 53 75 b0 00000001 62 00 53 75 a0 00"},
	} {
		props := hx("00 53 73 45")
		in := cat(props, hx(tc.body), hx("00 53 78 c1 01 00"))
		m, err := Unmarshal(in)
		if err != nil {
			t.Errorf("%s: Unmarshal: %v", tc.name, err)
			continue
		}
		if want := hx(tc.body); !bytes.Equal(m.RawBody, want) {
			t.Errorf("%s: RawBody = % x; want % x", tc.name, m.RawBody, want)
		}
		out, err := Marshal(m)
		if err != nil || !bytes.Equal(out, in) {
			t.Errorf("%s: Marshal(Unmarshal(b)) = % x (error %v); want % x", tc.name, out, err, in)
		}
		// Without its raw body, the message is encoded from its decoded sections: the same
		// values, in the encoder's own forms.
		m.RawBody = nil
		again, err := Marshal(m)
		if err != nil {
			t.Fatalf("%s: Marshal of the decoded body: %v", tc.name, err)
		}
		m2, err := Unmarshal(again)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		m.RawBody, m2.RawBody = nil, nil
		if !reflect.DeepEqual(m, m2) {
			t.Errorf("%s: re-encoded body decodes as %#v; want %#v", tc.name, m2, m)
		}
	}
	// The data sections of a decoded message are its raw body's, so they change with it only
	// through their own slices (capacity ends each at its section's end).
	m, err := Unmarshal(hx("00 53 75 a0 01 61 00 53 75 a0 01 62"))
	if err != nil {
		t.Fatal(err)
	}
	m.Data[0] = append(m.Data[0], 'x')
	if string(m.Data[1]) != "b" {
		t.Errorf("appending to one data section changed the next: %q", m.Data[1])
	}
}

// An empty group-id is a group: it survives a round trip, and go-amqp reads it as present.
func TestEmptyGroupID(t *testing.T) {
	b, err := Marshal(&Message{Properties: &Properties{HasGroupID: true}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Unmarshal(b)
	if err != nil || !m.Properties.HasGroupID || m.Properties.GroupID != "" {
		t.Fatalf("Unmarshal(empty group-id) = %#v, %v", m.Properties, err)
	}
	var gm goamqp.Message
	if err := gm.UnmarshalBinary(b); err != nil || gm.Properties == nil || gm.Properties.GroupID == nil || *gm.Properties.GroupID != "" {
		t.Errorf("go-amqp reads the empty group-id as %#v (%v)", gm.Properties, err)
	}
	empty := ""
	gb, err := (&goamqp.Message{Properties: &goamqp.MessageProperties{GroupID: &empty}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := Unmarshal(gb); err != nil || !m.Properties.HasGroupID {
		t.Errorf("go-amqp's empty group-id read as %#v (%v)", m.Properties, err)
	}
	// Absent, it stays absent.
	b, _ = Marshal(&Message{Properties: &Properties{Subject: "s"}})
	if m, err := Unmarshal(b); err != nil || m.Properties.HasGroupID {
		t.Errorf("no group-id read as %#v (%v)", m.Properties, err)
	}
}

func TestMarshalErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *Message
	}{
		{"Go int message id", &Message{Properties: &Properties{MessageID: 5}}},
		{"list correlation id", &Message{Properties: &Properties{CorrelationID: List{int32(5)}}}},
		{"data and value", &Message{Data: [][]byte{{}}, Value: "x"}},
		{"data and sequence", &Message{Data: [][]byte{{}}, Sequence: []List{{}}}},
		{"unencodable property", &Message{ApplicationProperties: Map{{Key: "x", Value: struct{}{}}}}},
	} {
		if _, err := Marshal(tc.m); !errors.Is(err, ErrEncode) {
			t.Errorf("%s: Marshal error %v; want ErrEncode", tc.name, err)
		}
	}
}

func TestUnmarshalStrict(t *testing.T) {
	section := func(code uint64, v any) []byte {
		b, err := AppendValue(nil, Described{Descriptor: code, Value: v})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	header := section(descHeader, List{})
	props := section(descProperties, List{})
	data := section(descData, []byte("x"))
	value := section(descValue, "x")
	seq := section(descSequence, List{})
	footer := section(descFooter, Map{})
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"properties before header", cat(props, header)},
		{"two headers", cat(header, header)},
		{"two values", cat(value, value)},
		{"data then value", cat(data, value)},
		{"sequence then data", cat(seq, data)},
		{"footer then data", cat(footer, data)},
		{"unknown section", section(0x79, List{})},
		{"not a section", hx("a1 01 61")},
		{"data not binary", section(descData, "x")},
		{"sequence not list", section(descSequence, "x")},
		{"annotations not a map", section(descMessageAnn, List{})},
		{"list message id", section(descProperties, List{List{int32(1)}})},
		{"map correlation id", section(descProperties, List{nil, nil, nil, nil, nil, Map{}})},
		{"truncated", data[:len(data)-1]},
		{"garbage after a section", cat(data, hx("ff"))},
	} {
		if _, err := Unmarshal(tc.in); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Unmarshal(% x) error %v; want ErrMalformed", tc.name, tc.in, err)
		}
	}
	// Null map sections read as empty maps; null list sections as defaults.
	m, err := Unmarshal(cat(section(descHeader, nil), section(descAppProperties, nil)))
	if err != nil || m.Header.Priority != 4 || m.ApplicationProperties == nil {
		t.Errorf("null sections: %#v, %v", m, err)
	}
}

// TestBatchMessage checks the Service Bus batch format: each data section of the outer
// message is an encoded message.
func TestBatchMessage(t *testing.T) {
	var inner [][]byte
	for _, id := range []string{"a", "b", "c"} {
		b, err := Marshal(&Message{Properties: &Properties{MessageID: id}, Data: [][]byte{[]byte("body " + id)}})
		if err != nil {
			t.Fatal(err)
		}
		inner = append(inner, b)
	}
	outer, err := Marshal(&Message{MessageAnnotations: Map{{Key: Symbol("x-opt-partition-key"), Value: "p"}}, Data: inner})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Unmarshal(outer)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a", "b", "c"} {
		im, err := Unmarshal(m.Data[i])
		if err != nil || im.Properties.MessageID != id || string(im.Data[0]) != "body "+id {
			t.Errorf("batch element %d = %#v, %v", i, im, err)
		}
	}
}

// TestMessageGoAMQPInterop decodes what go-amqp encodes and the reverse.
func TestMessageGoAMQPInterop(t *testing.T) {
	to, subj, ct := "queue", "label", "text/plain"
	created := time.UnixMilli(1700000000123).UTC()
	gm := &goamqp.Message{
		Header:                &goamqp.MessageHeader{Durable: true, Priority: 4, TTL: time.Minute, DeliveryCount: 1},
		Annotations:           goamqp.Annotations{"x-opt-sequence-number": int64(9)},
		Properties:            &goamqp.MessageProperties{MessageID: "id", To: &to, Subject: &subj, ContentType: &ct, CreationTime: &created},
		ApplicationProperties: map[string]any{"k": "v", "n": int64(3)},
		Data:                  [][]byte{[]byte("payload")},
	}
	b, err := gm.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("Unmarshal(go-amqp message): %v", err)
	}
	if m.Header.TTL != time.Minute || !m.Header.Durable || m.Properties.MessageID != "id" || m.Properties.To != "queue" ||
		m.Properties.ContentType != "text/plain" || !m.Properties.CreationTime.Equal(created) || string(m.Data[0]) != "payload" {
		t.Errorf("decoded go-amqp message: %#v %#v", m.Header, m.Properties)
	}
	if v, _ := m.MessageAnnotations.Get(Symbol("x-opt-sequence-number")); v != int64(9) {
		t.Errorf("annotation = %#v", v)
	}
	if v, _ := m.ApplicationProperties.Get("n"); v != int64(3) {
		t.Errorf("application property = %#v", v)
	}

	ours, err := Marshal(sampleMessage())
	if err != nil {
		t.Fatal(err)
	}
	var back goamqp.Message
	if err := back.UnmarshalBinary(ours); err != nil {
		t.Fatalf("go-amqp UnmarshalBinary: %v", err)
	}
	if back.Properties.MessageID != "m-1" || *back.Properties.GroupID != "session-1" || back.Header.Priority != 7 ||
		back.Annotations["x-opt-sequence-number"] != int64(42) || back.ApplicationProperties["t"].(time.Time).UnixMilli() != 1700000000123 ||
		len(back.Data) != 3 || back.DeliveryAnnotations["x-opt-lock-token"] != goamqp.UUID(uuid1) {
		t.Errorf("go-amqp decoded our message as %#v", back)
	}
	if back.Annotations[uint64(5)] != "numeric key" {
		t.Errorf("numeric annotation key: %#v", back.Annotations)
	}
}

// Clients number their requests with whatever scalar they like (the pure-Python client a long or
// an int): such a message-id decodes as sent and encodes back unchanged as a correlation-id.
func TestScalarMessageIDsRoundTrip(t *testing.T) {
	for _, id := range []any{int64(3), int32(0), Symbol("s"), uint32(9)} {
		b, err := Marshal(&Message{Properties: &Properties{MessageID: id, CorrelationID: id}})
		if err != nil {
			t.Fatalf("Marshal with message id %T: %v", id, err)
		}
		m, err := Unmarshal(b)
		if err != nil || m.Properties.MessageID != id || m.Properties.CorrelationID != id {
			t.Errorf("message id %#v came back as %#v / %#v (%v)", id, m.Properties.MessageID, m.Properties.CorrelationID, err)
		}
	}
}

// The header always carries its delivery-count, 0 included: the pure-Python client fills absent
// fields with None rather than the specification's defaults.
func TestHeaderKeepsDeliveryCount(t *testing.T) {
	b, err := Marshal(&Message{Header: &Header{Durable: true}})
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := DecodeValue(b)
	if err != nil {
		t.Fatal(err)
	}
	fields, _ := v.(Described).Value.(List)
	if len(fields) != 5 || fields[4] != uint32(0) {
		t.Errorf("header fields %#v; want five, the delivery-count 0", fields)
	}
}

// A broker keeps a body as it was encoded, so UnmarshalKeepingBody checks its sections without
// building their values: a well-formed body of one-byte elements (booleans, nulls, zeros), which
// would take 16 bytes of Go value a byte and which Unmarshal's decoding budget refuses, is
// accepted with its bytes in RawBody; the same density in an application-properties map is
// still refused, and a malformed body still is.
func TestDenseBodiesAreKept(t *testing.T) {
	bools := make(List, 60_000)
	for i := range bools {
		bools[i] = i%3 == 0
	}
	ubytes := make([]any, 60_000)
	for i := range ubytes {
		ubytes[i] = uint8(i)
	}
	nulls := make(List, 60_000)
	for name, m := range map[string]*Message{
		"amqp-value list of booleans":   {Value: bools, HasValue: true},
		"amqp-value array of ubytes":    {Value: &Array{Type: TypeUbyte, Elems: ubytes}, HasValue: true},
		"amqp-sequence of nulls":        {Sequence: []List{nulls}},
		"two amqp-sequences of nulls":   {Sequence: []List{nulls, nulls}},
		"properties, then a dense body": {ApplicationProperties: Map{{Key: "k", Value: "v"}}, Value: bools, HasValue: true},
	} {
		b, err := Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := Unmarshal(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Unmarshal gave %v; want its decoding budget to refuse it", name, err)
		}
		got, err := UnmarshalKeepingBody(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		body, err := Marshal(&Message{Value: m.Value, HasValue: m.HasValue, Sequence: m.Sequence})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.RawBody, body) || got.HasValue != m.HasValue || got.Value != nil || got.Sequence != nil {
			t.Errorf("%s: RawBody of %d bytes (want %d), HasValue %v, Value %T, Sequence %d",
				name, len(got.RawBody), len(body), got.HasValue, got.Value, len(got.Sequence))
		}
		if len(m.ApplicationProperties) > 0 && !reflect.DeepEqual(got.ApplicationProperties, m.ApplicationProperties) {
			t.Errorf("%s: application properties %v", name, got.ApplicationProperties)
		}
	}

	entries := make(Map, 60_000)
	b, err := Marshal(&Message{ApplicationProperties: entries, Value: "small", HasValue: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalKeepingBody(b); !errors.Is(err, ErrMalformed) {
		t.Errorf("application properties of 60,000 null entries: %v; want ErrMalformed", err)
	}
	bad, err := Marshal(&Message{Value: List{"x"}, HasValue: true})
	if err != nil {
		t.Fatal(err)
	}
	bad = bytes.Replace(bad, []byte("x"), []byte{0xff}, 1) // not UTF-8
	if _, err := UnmarshalKeepingBody(bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("a body string that is not UTF-8: %v; want ErrMalformed", err)
	}
}
