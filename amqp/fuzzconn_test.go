package amqp

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sbgate/sbgate/internal/eventually"
)

// FuzzConnection writes arbitrary byte streams — protocol headers, SASL, open, begin, attach,
// transfer, detach, close, in any order and state of damage — to a real listener of the engine
// and requires that the server ends each connection within its deadlines (it never hangs on a
// stream), never panics (a handler panic would close the connection with internal-error; an
// engine panic kills the test), and keeps serving: after each stream a real client connects and
// sends a message.
func FuzzConnection(f *testing.F) {
	for _, s := range connectionSeeds(f) {
		f.Add(s)
	}
	b, addr := newTestBroker(f, Options{HandshakeTimeout: time.Second, IdleTimeout: time.Second, CloseTimeout: 200 * time.Millisecond},
		func(b *testBroker) { b.quiet = true })
	f.Fuzz(func(t *testing.T, stream []byte) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = nc.Write(stream) // the server may close early: fine
		// Whatever the server answers, it must not be needed: reading a little of it keeps the
		// server's writes from blocking on a full socket.
		_ = nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, _ = io.Copy(io.Discard, nc)
		_ = nc.Close()
		checkHealthy(t, addr)
		// Every connection ends: the fuzzed one and the health check's.
		eventually.Within(5*time.Second).NoError(t, "the connections to end", func() error {
			if n := b.srv.Stats().Connections; n > 0 {
				return fmt.Errorf("%d connections still served after their peers closed", n)
			}
			return nil
		})
	})
}

// connectionSeeds are whole client streams: a sender's life, a receiver's, and a few broken
// ones.
func connectionSeeds(tb testing.TB) [][]byte {
	frame := func(typ uint8, ch uint16, p Performative) []byte {
		b, err := AppendFrame(nil, typ, ch, p)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	msg, err := Marshal(sampleMessage())
	if err != nil {
		tb.Fatal(err)
	}
	id, zero := uint32(0), uint32(0)
	settled := true
	handshake := cat(headerSASL[:], frame(FrameTypeSASL, 0, &SASLInit{Mechanism: "ANONYMOUS"}), headerAMQP[:],
		frame(FrameTypeAMQP, 0, &Open{ContainerID: "fuzz", MaxFrameSize: 65536, ChannelMax: 4}),
		frame(FrameTypeAMQP, 0, &Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 4}))
	sender := cat(handshake,
		frame(FrameTypeAMQP, 0, &Attach{Name: "s", Handle: 0, Role: RoleSender, Source: &Source{}, Target: &Target{Address: "q"}, InitialDeliveryCount: &zero}),
		frame(FrameTypeAMQP, 0, &Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &zero, Settled: &settled, Payload: msg}),
		frame(FrameTypeAMQP, 0, &Detach{Handle: 0, Closed: true}),
		frame(FrameTypeAMQP, 0, &End{}), frame(FrameTypeAMQP, 0, &Close{}))
	credit := uint32(10)
	receiver := cat(handshake,
		frame(FrameTypeAMQP, 0, &Attach{Name: "r", Handle: 1, Role: RoleReceiver, Source: &Source{Address: "q"}, Target: &Target{}}),
		frame(FrameTypeAMQP, 0, &Flow{NextIncomingID: &zero, IncomingWindow: 100, NextOutgoingID: 0, OutgoingWindow: 100, Handle: ptr(uint32(1)), DeliveryCount: &zero, LinkCredit: &credit, Drain: true}),
		frame(FrameTypeAMQP, 0, &Disposition{Role: RoleReceiver, First: 0, Settled: true, State: Accepted{}}),
		frame(FrameTypeAMQP, 0, &Close{}))
	return [][]byte{
		sender, receiver, handshake,
		sender[:len(sender)/2], // cut mid-stream
		cat(headerAMQP[:], frame(FrameTypeAMQP, 0, &Open{ContainerID: "no-sasl"})),               // SASL skipped
		cat(headerSASL[:], hx("0001000002010000")),                                               // a SASL frame announcing 64 KiB
		cat(handshake, frame(FrameTypeAMQP, 7, &Attach{Name: "x", Handle: 9, Role: RoleSender})), // no such session
	}
}
