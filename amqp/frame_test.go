package amqp

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// samplePerformatives has every performative with every field set.
func samplePerformatives() []Performative {
	sessionFilter := Described{Descriptor: uint64(0x137000000c), Value: "session-1"}
	return []Performative{
		&Open{ContainerID: "c1", Hostname: "127.0.0.1:5672", MaxFrameSize: 65536, ChannelMax: 255,
			IdleTimeout: 30 * time.Second, OutgoingLocales: []Symbol{"en-US"}, IncomingLocales: []Symbol{"en-US", "fr"},
			OfferedCapabilities: []Symbol{"ANONYMOUS-RELAY"}, DesiredCapabilities: []Symbol{"x"},
			Properties: Map{{Key: Symbol("product"), Value: "sbgate"}}},
		&Begin{RemoteChannel: ptr(uint16(3)), NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: math.MaxUint32,
			HandleMax: 255, OfferedCapabilities: []Symbol{"a"}, DesiredCapabilities: []Symbol{"b"},
			Properties: Map{{Key: Symbol("k"), Value: int32(1)}}},
		&Attach{Name: "link-1", Handle: 7, Role: RoleReceiver, SndSettleMode: SenderSettleModeUnsettled,
			RcvSettleMode: ReceiverSettleModeSecond,
			Source: &Source{Address: "queue/Subscriptions/sub", Durable: 2, ExpiryPolicy: "never", Timeout: 60,
				Dynamic: true, DynamicNodeProperties: Map{{Key: Symbol("lifetime-policy"), Value: Described{Descriptor: uint64(0x2b), Value: List{}}}},
				DistributionMode: "move", Filter: Map{{Key: Symbol("com.microsoft:session-filter"), Value: sessionFilter}},
				DefaultOutcome: Modified{DeliveryFailed: true, UndeliverableHere: true, MessageAnnotations: Map{{Key: Symbol("x-opt-a"), Value: int64(1)}}},
				Outcomes:       []Symbol{"amqp:accepted:list", "amqp:rejected:list"}, Capabilities: []Symbol{"queue"}},
			Target: &Target{Address: "reply-1", Durable: 1, ExpiryPolicy: "link-detach", Timeout: 5, Dynamic: true,
				DynamicNodeProperties: Map{}, Capabilities: []Symbol{"temporary-queue"}},
			// Values inside maps decode generically: a delivery state there is a Described.
			Unsettled:            Map{{Key: []byte{1}, Value: Described{Descriptor: uint64(descAccepted), Value: List{}}}},
			IncompleteUnsettled:  true,
			InitialDeliveryCount: ptr(uint32(9)), MaxMessageSize: 1 << 20,
			OfferedCapabilities: []Symbol{"o"}, DesiredCapabilities: []Symbol{"d"},
			Properties: Map{{Key: Symbol("com.microsoft:locked-until-utc"), Value: int64(638400000000000000)}}},
		&Attach{Name: "txn", Handle: 0, Role: RoleSender, SndSettleMode: SenderSettleModeMixed,
			Source: &Source{}, Coordinator: &Coordinator{Capabilities: []Symbol{"amqp:local-transactions"}}},
		&Flow{NextIncomingID: ptr(uint32(1)), IncomingWindow: 2, NextOutgoingID: 3, OutgoingWindow: 4,
			Handle: ptr(uint32(5)), DeliveryCount: ptr(uint32(6)), LinkCredit: ptr(uint32(7)), Available: ptr(uint32(8)),
			Drain: true, Echo: true, Properties: Map{{Key: Symbol("p"), Value: nil}}},
		&Transfer{Handle: 1, DeliveryID: ptr(uint32(2)), DeliveryTag: []byte("tag"), MessageFormat: ptr(MessageFormatBatch),
			Settled: ptr(false), More: true, RcvSettleMode: ptr(ReceiverSettleModeSecond), State: Received{SectionNumber: 1, SectionOffset: 2},
			Resume: true, Aborted: true, Batchable: true, Payload: []byte("payload")},
		&Disposition{Role: RoleReceiver, First: 10, Last: ptr(uint32(20)), Settled: true,
			State: Rejected{Error: &Error{Condition: "com.microsoft:dead-letter", Description: "why",
				Info: Map{{Key: Symbol("DeadLetterReason"), Value: "r"}}}}, Batchable: true},
		&Disposition{Role: RoleSender, First: 1, State: Released{}},
		&Disposition{Role: RoleReceiver, First: 1, State: Accepted{}},
		&Detach{Handle: 4, Closed: true, Error: &Error{Condition: ErrCondNotFound}},
		&End{Error: &Error{Condition: ErrCondWindowViolation, Description: "w"}},
		&Close{Error: &Error{Condition: ErrCondFramingError, Description: "f", Info: Map{}}},
		&Close{},
		&SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS", "PLAIN"}},
		&SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00user\x00pw"), Hostname: "h"},
		&SASLChallenge{Challenge: []byte{1}},
		&SASLResponse{Response: []byte{}},
		&SASLOutcome{Code: SASLAuth, AdditionalData: []byte("x")},
	}
}

func TestPerformativeRoundTrip(t *testing.T) {
	for _, p := range samplePerformatives() {
		typ := FrameTypeAMQP
		if p.descriptor() >= descSASLMechs {
			typ = FrameTypeSASL
		}
		b, err := AppendFrame(nil, typ, 3, p)
		if err != nil {
			t.Errorf("AppendFrame(%T) error %v", p, err)
			continue
		}
		f, n, err := ParseFrame(b, 0)
		if err != nil || n != len(b) {
			t.Errorf("ParseFrame(%T) = %d of %d bytes, error %v", p, n, len(b), err)
			continue
		}
		if f.Type != typ || f.Channel != 3 || !reflect.DeepEqual(f.Body, p) {
			t.Errorf("ParseFrame(AppendFrame(%T)) = %d %d %#v; want %#v", p, f.Type, f.Channel, f.Body, p)
		}
		// Trailing null fields are not written: re-encoding gives the same bytes.
		b2, _ := AppendFrame(nil, typ, 3, f.Body)
		if string(b2) != string(b) {
			t.Errorf("%T re-encoded differently:\n% x\n% x", p, b, b2)
		}
	}
}

// TestPerformativeDefaults checks the defaults decoding fills for absent fields and the
// symbolic descriptors a peer may use.
func TestPerformativeDefaults(t *testing.T) {
	body := func(desc any, fields ...any) []byte {
		b, err := AppendValue(nil, Described{Descriptor: desc, Value: List(fields)})
		if err != nil {
			t.Fatal(err)
		}
		f, _ := AppendFrame(nil, FrameTypeAMQP, 0, nil)
		f = append(f, b...)
		f[3] = byte(len(f))
		return f
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want Performative
	}{
		{"open minimal", body(uint64(descOpen), "c"), &Open{ContainerID: "c", MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16}},
		{"open nulls", body(uint64(descOpen), "c", nil, nil, nil, nil), &Open{ContainerID: "c", MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16}},
		{"open symbolic", body(Symbol("amqp:open:list"), "c", "h"), &Open{ContainerID: "c", Hostname: "h", MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16}},
		{"begin", body(uint64(descBegin), nil, uint32(0), uint32(1), uint32(2)), &Begin{IncomingWindow: 1, OutgoingWindow: 2, HandleMax: math.MaxUint32}},
		{"attach", body(uint64(descAttach), "n", uint32(0), false), &Attach{Name: "n", Role: RoleSender, SndSettleMode: SenderSettleModeMixed}},
		{"attach single symbol capabilities", body(uint64(descAttach), "n", uint32(0), true, nil, nil, nil, nil, nil, nil, nil, nil, Symbol("a")),
			&Attach{Name: "n", Role: RoleReceiver, SndSettleMode: SenderSettleModeMixed, OfferedCapabilities: []Symbol{"a"}}},
		{"detach", body(Symbol("amqp:detach:list"), uint32(1)), &Detach{Handle: 1}},
		{"end", body(uint64(descEnd)), &End{}},
		{"disposition", body(uint64(descDisposition), true, uint32(3), nil, true, Described{Descriptor: Symbol("amqp:accepted:list"), Value: List{}}),
			&Disposition{Role: RoleReceiver, First: 3, Settled: true, State: Accepted{}}},
	} {
		f, _, err := ParseFrame(tc.in, 0)
		if err != nil {
			t.Errorf("%s: ParseFrame error %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(f.Body, tc.want) {
			t.Errorf("%s: ParseFrame = %#v; want %#v", tc.name, f.Body, tc.want)
		}
	}
}

func TestParseFrameErrors(t *testing.T) {
	frame := func(typ uint8, fields any) []byte {
		b, err := AppendValue(nil, fields)
		if err != nil {
			t.Fatal(err)
		}
		f := append([]byte{0, 0, 0, 0, 2, typ, 0, 0}, b...)
		f[3] = byte(len(f))
		return f
	}
	isFraming := func(err error) bool {
		var e *Error
		return errors.As(err, &e) && e.Condition == ErrCondFramingError
	}
	isMalformed := func(err error) bool { return errors.Is(err, ErrMalformed) }
	for _, tc := range []struct {
		name  string
		in    []byte
		check func(error) bool
	}{
		{"size below header", hx("00000007 02 00 0000"), isFraming},
		{"size above max", hx("00010000 02 00 0000"), isFraming},
		{"doff below 2", hx("00000008 01 00 0000"), isFraming},
		{"doff beyond size", hx("00000008 03 00 0000"), isFraming},
		{"frame type 2", hx("00000008 02 02 0000"), isFraming},
		{"truncated", hx("00000010 02 00 0000 00"), isMalformed},
		{"garbage body", hx("0000000a 02 00 0000 ffff"), isMalformed},
		{"not described", frame(0, List{}), isMalformed},
		{"not a list", frame(0, Described{Descriptor: uint64(descOpen), Value: "x"}), isMalformed},
		{"unknown performative", frame(0, Described{Descriptor: uint64(0x99), Value: List{}}), IsNotImplemented},
		{"SASL performative in AMQP frame", frame(0, Described{Descriptor: uint64(descSASLInit), Value: List{Symbol("PLAIN")}}), IsNotImplemented},
		{"missing mandatory field", frame(0, Described{Descriptor: uint64(descAttach), Value: List{"n"}}), isMalformed},
		{"null mandatory field", frame(0, Described{Descriptor: uint64(descAttach), Value: List{"n", nil, true}}), isMalformed},
		{"field of the wrong type", frame(0, Described{Descriptor: uint64(descAttach), Value: List{"n", "h", true}}), isMalformed},
		{"settle mode out of range", frame(0, Described{Descriptor: uint64(descAttach), Value: List{"n", uint32(0), true, uint8(3)}}), isMalformed},
		{"unknown delivery state", frame(0, Described{Descriptor: uint64(descDisposition), Value: List{true, uint32(0), nil, true, Described{Descriptor: uint64(0x34), Value: List{}}}}), isMalformed},
		{"unknown target", frame(0, Described{Descriptor: uint64(descAttach), Value: List{"n", uint32(0), true, nil, nil, nil, Described{Descriptor: uint64(0x99), Value: List{}}}}), isMalformed},
		{"bytes after performative", append(frame(0, Described{Descriptor: uint64(descEnd), Value: List{}}), 0x40), isMalformed},
	} {
		in := tc.in
		if tc.name == "bytes after performative" {
			in[3]++
		}
		_, _, err := ParseFrame(in, 1024)
		if err == nil || !tc.check(err) {
			t.Errorf("%s: ParseFrame(% x) error %v", tc.name, in, err)
		}
	}
}

func TestParseFrameExtendedHeader(t *testing.T) {
	// doff 3: four bytes of extended header, ignored.
	in := hx("00000010 03 00 0001 deadbeef 00531745")
	f, n, err := ParseFrame(in, 0)
	if err != nil || n != 16 {
		t.Fatalf("ParseFrame = %d, %v", n, err)
	}
	if _, ok := f.Body.(*End); !ok || f.Channel != 1 {
		t.Errorf("ParseFrame = %#v", f)
	}
	// An empty frame is a heartbeat.
	f, _, err = ParseFrame(emptyFrame, 0)
	if err != nil || f.Body != nil {
		t.Errorf("ParseFrame(heartbeat) = %#v, %v", f, err)
	}
}
