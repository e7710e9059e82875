package amqp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/internal/eventually"
)

// Raw-socket tests: a hand-driven peer that misbehaves in ways real clients do not.

type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func rawDial(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawConn) frame(typ uint8, ch uint16, p Performative) []byte {
	r.t.Helper()
	b, err := AppendFrame(nil, typ, ch, p)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

func (r *rawConn) send(ch uint16, p Performative) { r.write(r.frame(FrameTypeAMQP, ch, p)) }

func (r *rawConn) readHeader() [8]byte {
	r.t.Helper()
	_ = r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h [8]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		r.t.Fatalf("read header: %v", err)
	}
	return h
}

// next reads the next frame, heartbeats included.
func (r *rawConn) next() (Frame, error) {
	_ = r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h [8]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return Frame{}, err
	}
	b := make([]byte, binary.BigEndian.Uint32(h[:]))
	copy(b, h[:])
	if _, err := io.ReadFull(r.br, b[8:]); err != nil {
		return Frame{}, err
	}
	f, _, err := ParseFrame(b, 0)
	return f, err
}

// read returns the next frame that is not a heartbeat.
func (r *rawConn) read() Performative {
	r.t.Helper()
	for {
		f, err := r.next()
		if err != nil {
			r.t.Fatalf("read frame: %v", err)
		}
		if f.Body != nil {
			return f.Body
		}
	}
}

// expect reads frames until one of type T arrives (skipping flows and dispositions the
// test does not care about) and returns it.
func expect[T Performative](r *rawConn) T {
	r.t.Helper()
	for {
		p := r.read()
		if v, ok := p.(T); ok {
			return v
		}
		switch p.(type) {
		case *Flow, *Disposition:
			continue
		}
		var zero T
		r.t.Fatalf("read %#v; want %T", p, zero)
	}
}

// expectEOF checks the server closed the socket.
func (r *rawConn) expectEOF() {
	r.t.Helper()
	for {
		f, err := r.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					r.t.Fatalf("server did not close the socket")
				}
			}
			return
		}
		if f.Body != nil {
			r.t.Fatalf("frame %#v where the server should have closed", f.Body)
		}
	}
}

// handshake runs SASL ANONYMOUS and the open exchange with open (nil: a default open).
func (r *rawConn) handshake(open *Open) *Open {
	r.t.Helper()
	r.write(headerSASL[:])
	if h := r.readHeader(); h != headerSASL {
		r.t.Fatalf("server header %q", h[:])
	}
	expect[*SASLMechanisms](r)
	r.write(r.frame(FrameTypeSASL, 0, &SASLInit{Mechanism: "ANONYMOUS"}))
	if o := expect[*SASLOutcome](r); o.Code != SASLOK {
		r.t.Fatalf("SASL outcome %d", o.Code)
	}
	r.write(headerAMQP[:])
	if h := r.readHeader(); h != headerAMQP {
		r.t.Fatalf("server header %q", h[:])
	}
	if open == nil {
		open = &Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 10}
	}
	r.send(0, open)
	return expect[*Open](r)
}

func (r *rawConn) begin(ch uint16) *Begin {
	r.t.Helper()
	r.send(ch, &Begin{NextOutgoingID: 0, IncomingWindow: 1000, OutgoingWindow: 1000, HandleMax: 10})
	return expect[*Begin](r)
}

// attachSender attaches a link on which the raw peer sends to target, and returns the
// server's answer and the credit it granted.
func (r *rawConn) attachSender(ch uint16, handle uint32, target string) (*Attach, uint32) {
	r.t.Helper()
	r.send(ch, &Attach{Name: "raw-" + target, Handle: handle, Role: RoleSender, Source: &Source{},
		Target: &Target{Address: target}, InitialDeliveryCount: ptr(uint32(0))})
	a := expect[*Attach](r)
	for {
		if f, ok := r.read().(*Flow); ok && f.LinkCredit != nil {
			return a, *f.LinkCredit
		}
	}
}

// expectClose reads up to the server's close, checks its condition, answers it and checks
// the server then closes the socket.
func (r *rawConn) expectClose(cond Symbol) {
	r.t.Helper()
	c := expect[*Close](r)
	if c.Error == nil || c.Error.Condition != cond {
		r.t.Fatalf("close %#v; want condition %s", c.Error, cond)
	}
	r.send(0, &Close{})
	r.expectEOF()
}

// checkHealthy runs a message through the server with go-amqp.
func checkHealthy(t *testing.T, addr string) {
	t.Helper()
	c := dial(t, addr, nil)
	s := session(t, c)
	snd := newSender(t, s, "health", nil)
	if err := snd.Send(testCtx(t), goamqp.NewMessage([]byte("ok")), nil); err != nil {
		t.Fatalf("server unhealthy: %v", err)
	}
	_ = c.Close()
}

func TestRawProtocolHeaders(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		in    string
		reply [8]byte
		open  bool
	}{
		{"HTTP", Options{}, "GET / HTTP/1.1\r\n\r\n", headerSASL, false},
		{"TLS header", Options{}, "AMQP\x02\x01\x00\x00", headerSASL, false},
		{"AMQP version 1.0.1", Options{}, "AMQP\x00\x01\x00\x01", headerSASL, false},
		{"AMQP without SASL", Options{}, "AMQP\x00\x01\x00\x00", headerSASL, false},
		{"AMQP without SASL allowed", Options{AllowNoSASL: true}, "AMQP\x00\x01\x00\x00", headerAMQP, true},
		{"garbage with SASL optional", Options{AllowNoSASL: true}, "\x00\x00\x00\x00\x00\x00\x00\x00", headerAMQP, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := newTestBroker(t, tc.opts)
			r := rawDial(t, addr)
			r.write([]byte(tc.in))
			if h := r.readHeader(); h != tc.reply {
				t.Fatalf("server answered %q; want %q", h[:], tc.reply[:])
			}
			if tc.open {
				r.send(0, &Open{ContainerID: "raw", MaxFrameSize: 512})
				if o := expect[*Open](r); o.ContainerID == "" {
					t.Errorf("server open %#v", o)
				}
				return
			}
			r.expectEOF()
			checkHealthy(t, addr)
		})
	}
}

func TestRawSASLFailures(t *testing.T) {
	_, addr := newTestBroker(t, Options{})
	for _, tc := range []struct {
		name string
		init Performative
		typ  uint8
		code SASLCode
	}{
		{"unknown mechanism", &SASLInit{Mechanism: "EXTERNAL"}, FrameTypeSASL, SASLAuth},
		{"PLAIN without separators", &SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("userpw")}, FrameTypeSASL, SASLAuth},
		{"not sasl-init", &SASLResponse{Response: []byte{}}, FrameTypeSASL, SASLSysPerm},
		{"AMQP frame", &Open{ContainerID: "x"}, FrameTypeAMQP, SASLSysPerm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rawDial(t, addr)
			r.write(headerSASL[:])
			r.readHeader()
			expect[*SASLMechanisms](r)
			r.write(r.frame(tc.typ, 0, tc.init))
			if o := expect[*SASLOutcome](r); o.Code != tc.code {
				t.Errorf("outcome %d; want %d", o.Code, tc.code)
			}
			r.expectEOF()
		})
	}
	checkHealthy(t, addr)
}

// TestRawConnectionErrors: input that breaks the connection gets a close with the
// specification's condition, and the server goes on serving others.
func TestRawConnectionErrors(t *testing.T) {
	b, addr := newTestBroker(t, Options{MaxFrameSize: 4096, ChannelMax: 7, HandleMax: 3})
	garbage := func(body []byte) []byte {
		f := append([]byte{0, 0, 0, 0, 2, 0, 0, 0}, body...)
		binary.BigEndian.PutUint32(f, uint32(len(f)))
		return f
	}
	enc := func(v any) []byte {
		b, err := AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		begin bool
		in    func(r *rawConn) []byte
		cond  Symbol
	}{
		{"frame larger than max-frame-size", false, func(r *rawConn) []byte { return hx("00010000 02 00 0000") }, ErrCondFramingError},
		{"frame size below header", false, func(r *rawConn) []byte { return hx("00000004 02 00 0000") }, ErrCondFramingError},
		{"bad data offset", false, func(r *rawConn) []byte { return hx("00000008 01 00 0000") }, ErrCondFramingError},
		{"garbage performative", false, func(r *rawConn) []byte { return garbage(hx("ff ff ff")) }, ErrCondDecodeError},
		{"truncated performative", false, func(r *rawConn) []byte { return garbage(hx("00 53 10 c0 10 05 a1")) }, ErrCondDecodeError},
		{"missing mandatory field", false, func(r *rawConn) []byte {
			return garbage(enc(Described{Descriptor: uint64(descBegin), Value: List{nil, uint32(0)}}))
		}, ErrCondDecodeError},
		{"unknown performative", false, func(r *rawConn) []byte {
			return garbage(enc(Described{Descriptor: uint64(0x99), Value: List{}}))
		}, ErrCondNotImplemented},
		{"SASL frame after SASL", false, func(r *rawConn) []byte { return r.frame(FrameTypeSASL, 0, &SASLInit{Mechanism: "PLAIN"}) }, ErrCondFramingError},
		{"second open", false, func(r *rawConn) []byte { return r.frame(0, 0, &Open{ContainerID: "again"}) }, ErrCondIllegalState},
		{"frame on a channel without session", false, func(r *rawConn) []byte {
			return r.frame(0, 5, &Flow{IncomingWindow: 1, OutgoingWindow: 1})
		}, ErrCondFramingError},
		{"channel beyond channel-max", false, func(r *rawConn) []byte {
			return r.frame(0, 8, &Begin{IncomingWindow: 1, OutgoingWindow: 1, HandleMax: 1})
		}, ErrCondFramingError},
		{"begin on a channel in use", true, func(r *rawConn) []byte {
			return r.frame(0, 1, &Begin{IncomingWindow: 1, OutgoingWindow: 1, HandleMax: 1})
		}, ErrCondNotAllowed},
		{"handle beyond handle-max", true, func(r *rawConn) []byte {
			return r.frame(0, 1, &Attach{Name: "x", Handle: 4, Role: RoleReceiver, Source: &Source{}})
		}, ErrCondFramingError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rawDial(t, addr)
			r.handshake(nil)
			if tc.begin {
				r.begin(1)
			}
			r.write(tc.in(r))
			r.expectClose(tc.cond)
			ev := b.waitEvent("closed")
			var e *Error
			if !errors.As(ev.err, &e) || e.Condition != tc.cond {
				t.Errorf("Closed(%v); want condition %s", ev.err, tc.cond)
			}
		})
	}
	checkHealthy(t, addr)
}

// TestRawSessionErrors: errors scoped to a session end it with the condition; the
// connection lives on.
func TestRawSessionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(r *rawConn)
		cond Symbol
	}{
		{"transfer on an unknown handle", func(r *rawConn) {
			r.send(1, &Transfer{Handle: 9, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{1}, Payload: []byte{0x00, 0x53, 0x77, 0x40}})
		}, ErrCondUnattachedHandle},
		{"detach of an unknown handle", func(r *rawConn) { r.send(1, &Detach{Handle: 9, Closed: true}) }, ErrCondUnattachedHandle},
		{"handle in use", func(r *rawConn) {
			r.attachSender(1, 0, "w")
			r.send(1, &Attach{Name: "other", Handle: 0, Role: RoleSender, Target: &Target{}})
		}, ErrCondHandleInUse},
		{"window violation", func(r *rawConn) {
			r.attachSender(1, 0, "w")
			var burst []byte
			for i := range 3 {
				burst = append(burst, r.frame(0, 1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(i)), DeliveryTag: []byte{byte(i)},
					Settled: ptr(true), Payload: []byte{0x00, 0x53, 0x77, 0x40}})...)
			}
			r.write(burst)
		}, ErrCondWindowViolation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, addr := newTestBroker(t, Options{SessionWindow: 2})
			r := rawDial(t, addr)
			r.handshake(nil)
			r.begin(1)
			tc.run(r)
			e := expect[*End](r)
			if e.Error == nil || e.Error.Condition != tc.cond {
				t.Fatalf("end %#v; want %s", e.Error, tc.cond)
			}
			r.send(1, &End{})
			if ev := b.waitEvent("session-ended"); condition(ev.err) != tc.cond {
				t.Errorf("SessionEnded(%v)", ev.err)
			}
			// The connection still works: a new session on the same channel.
			r.begin(1)
			r.send(0, &Close{})
			expect[*Close](r)
			r.expectEOF()
			checkHealthy(t, addr)
		})
	}
}

// condition returns the condition of the *Error in err's chain ("" if none).
func condition(err error) Symbol {
	var e *Error
	if errors.As(err, &e) {
		return e.Condition
	}
	return ""
}

// TestRawLinkErrors: errors scoped to a link detach it with the condition.
func TestRawLinkErrors(t *testing.T) {
	msg := []byte{0x00, 0x53, 0x77, 0x40}
	for _, tc := range []struct {
		name string
		run  func(r *rawConn)
		cond Symbol
	}{
		{"transfer without credit", func(r *rawConn) {
			for i := range 2 {
				r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(i)), DeliveryTag: []byte{byte(i)}, Payload: msg})
			}
		}, ErrCondTransferLimitExceeded},
		{"message larger than max-message-size", func(r *rawConn) {
			r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{0}, Payload: make([]byte, 101)})
		}, ErrCondMessageSizeExceeded},
		{"multi-frame message larger than max-message-size", func(r *rawConn) {
			r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{0}, More: true, Payload: make([]byte, 60)})
			r.send(1, &Transfer{Handle: 0, More: true, Payload: make([]byte, 60)})
		}, ErrCondMessageSizeExceeded},
		{"first transfer without delivery-id", func(r *rawConn) {
			r.send(1, &Transfer{Handle: 0, DeliveryTag: []byte{0}, Payload: msg})
		}, ErrCondNotAllowed},
		{"continuation of another delivery", func(r *rawConn) {
			r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{0}, More: true, Payload: msg})
			r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(1)), Payload: msg})
		}, ErrCondNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, addr := newTestBroker(t, Options{}, func(b *testBroker) {
				b.onAttach = func(req *AttachRequest) bool {
					if req.PeerRole() != RoleSender {
						return false
					}
					if _, err := req.AcceptReceiver(b, ReceiverOptions{Credit: 1, MaxMessageSize: 100}); err != nil {
						t.Errorf("AcceptReceiver: %v", err)
					}
					return true
				}
				b.onDeliver = func(l *ReceiverLink, d *Delivery) {} // holds every delivery: no credit comes back
			})
			r := rawDial(t, addr)
			r.handshake(nil)
			r.begin(1)
			a, credit := r.attachSender(1, 0, "limited")
			if a.MaxMessageSize != 100 || credit != 1 {
				t.Fatalf("attach reply max-message-size %d credit %d", a.MaxMessageSize, credit)
			}
			tc.run(r)
			d := expect[*Detach](r)
			if d.Error == nil || d.Error.Condition != tc.cond || !d.Closed {
				t.Fatalf("detach %#v; want closed with %s", d, tc.cond)
			}
			r.send(1, &Detach{Handle: 0, Closed: true})
			if ev := b.waitEvent("detached"); condition(ev.err) != tc.cond {
				t.Errorf("ReceiverDetached(%v)", ev.err)
			}
			// The session still works: the handle can be attached again.
			r.attachSender(1, 0, "limited")
			r.send(0, &Close{})
			expect[*Close](r)
		})
	}
}

// TestRawMultiFrameAndAbort: deliveries split over frames are reassembled; an aborted one
// never reaches the handler.
func TestRawMultiFrameAndAbort(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	r := rawDial(t, addr)
	r.handshake(nil)
	r.begin(1)
	r.attachSender(1, 0, "frames")
	whole, _ := Marshal(&Message{Value: "whole"})
	r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{0}, More: true, Payload: whole[:2]})
	r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(0)), More: true, Payload: whole[2:5]})
	r.send(1, &Transfer{Handle: 0, Payload: whole[5:]})
	r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(1)), DeliveryTag: []byte{1}, More: true, Payload: whole[:3]})
	r.send(1, &Transfer{Handle: 0, Aborted: true})
	r.send(1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(2)), DeliveryTag: []byte{2}, MessageFormat: ptr(uint32(7)), Payload: whole})
	for _, id := range []uint32{0, 2} {
		ev := b.waitEvent("delivery")
		m, err := ev.d.Message()
		if ev.d.ID != id || err != nil || m.Value != "whole" {
			t.Errorf("delivery %d: %v %v", ev.d.ID, m, err)
		}
	}
	r.send(0, &Close{})
	expect[*Close](r)
}

// TestRawBatchedDispositions: the server's settlements of consecutive deliveries go out as
// first..last ranges, and the peer's range dispositions reach the handler per delivery.
func TestRawBatchedDispositions(t *testing.T) {
	held := make(chan *Delivery, 100)
	b, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.onDeliver = func(l *ReceiverLink, d *Delivery) { held <- d }
	})
	r := rawDial(t, addr)
	r.handshake(nil)
	r.begin(1)
	r.attachSender(1, 0, "batch")
	msg, _ := Marshal(&Message{Value: "x"})
	var burst []byte
	for i := range 20 {
		burst = append(burst, r.frame(0, 1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(i)), DeliveryTag: []byte{byte(i)}, Payload: msg})...)
	}
	r.write(burst)
	var ds []*Delivery
	for range 20 {
		ds = append(ds, <-held)
	}
	for _, d := range ds {
		if err := d.Accept(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds[0].Accept(); !errors.Is(err, ErrSettled) {
		t.Errorf("second Accept: %v; want ErrSettled", err)
	}
	settled := 0
	frames := 0
	for settled < 20 {
		d := expect[*Disposition](r)
		last := d.First
		if d.Last != nil {
			last = *d.Last
		}
		if d.Role != RoleReceiver || !d.Settled || d.State != (Accepted{}) || d.First != uint32(settled) {
			t.Fatalf("disposition %#v after %d settled", d, settled)
		}
		settled = int(last) + 1
		frames++
	}
	if frames >= 20 {
		t.Errorf("20 consecutive settlements took %d disposition frames", frames)
	}

	// The peer receives: a range disposition settles each delivery.
	r.send(1, &Attach{Name: "out", Handle: 1, Role: RoleReceiver, Source: &Source{Address: "batch-out"}, Target: &Target{}})
	expect[*Attach](r)
	for range 5 {
		b.enqueue("batch-out", queued{payload: msg})
	}
	r.send(1, &Flow{NextIncomingID: ptr(uint32(0)), IncomingWindow: 100, NextOutgoingID: 20, OutgoingWindow: 100,
		Handle: ptr(uint32(1)), DeliveryCount: ptr(uint32(0)), LinkCredit: ptr(uint32(10))})
	for range 5 {
		expect[*Transfer](r)
	}
	r.send(1, &Disposition{Role: RoleReceiver, First: 0, Last: ptr(uint32(4)), Settled: true, State: Accepted{}})
	for range 5 {
		if ev := b.waitEvent("disposition"); !ev.settled || ev.state != (Accepted{}) {
			t.Errorf("disposition event %+v", ev)
		}
	}
	// A hostile range spanning every id costs nothing.
	r.send(1, &Disposition{Role: RoleReceiver, First: 0, Last: ptr(uint32(0xffffffff)), Settled: true, State: Accepted{}})
	r.send(0, &Close{})
	expect[*Close](r)
}

// TestRawCompleteDrain: a drain that keeps credit (as rhea sends it) is answered by the
// handler's CompleteDrain: delivery-count advanced, credit zero, drain echoed.
func TestRawCompleteDrain(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	r := rawDial(t, addr)
	r.handshake(nil)
	r.begin(1)
	r.send(1, &Attach{Name: "d", Handle: 0, Role: RoleReceiver, Source: &Source{Address: "dq"}, Target: &Target{}})
	expect[*Attach](r)
	flow := func(dc, credit uint32) {
		r.send(1, &Flow{NextIncomingID: ptr(uint32(0)), IncomingWindow: 100, NextOutgoingID: 0, OutgoingWindow: 100,
			Handle: ptr(uint32(0)), DeliveryCount: ptr(dc), LinkCredit: ptr(credit), Drain: true})
	}
	flow(0, 5)
	f := expect[*Flow](r)
	if !f.Drain || *f.DeliveryCount != 5 || *f.LinkCredit != 0 {
		t.Fatalf("drain answer %+v dc %d credit %d; want drain, 5, 0", f, *f.DeliveryCount, *f.LinkCredit)
	}
	msg, _ := Marshal(&Message{Value: "x"})
	b.enqueue("dq", queued{payload: msg})
	b.enqueue("dq", queued{payload: msg})
	flow(5, 5)
	expect[*Transfer](r)
	expect[*Transfer](r)
	f = expect[*Flow](r)
	if !f.Drain || *f.DeliveryCount != 10 || *f.LinkCredit != 0 {
		t.Fatalf("drain answer dc %d credit %d; want 10, 0", *f.DeliveryCount, *f.LinkCredit)
	}
	// Credit given from a stale delivery-count is reduced accordingly.
	r.send(1, &Flow{NextIncomingID: ptr(uint32(2)), IncomingWindow: 100, NextOutgoingID: 0, OutgoingWindow: 100,
		Handle: ptr(uint32(0)), DeliveryCount: ptr(uint32(8)), LinkCredit: ptr(uint32(3)), Echo: true})
	f = expect[*Flow](r)
	if *f.DeliveryCount != 10 || *f.LinkCredit != 1 {
		t.Errorf("echoed flow dc %d credit %d; want 10, 1", *f.DeliveryCount, *f.LinkCredit)
	}
	r.send(0, &Close{})
	expect[*Close](r)
}

// TestRawIdle: the server sends heartbeats within the peer's idle timeout, and closes a
// silent peer with amqp:resource-limit-exceeded.
func TestRawIdle(t *testing.T) {
	b, addr := newTestBroker(t, Options{IdleTimeout: 1500 * time.Millisecond})
	r := rawDial(t, addr)
	open := r.handshake(&Open{ContainerID: "silent", MaxFrameSize: 65536, IdleTimeout: time.Second})
	if open.IdleTimeout != 750*time.Millisecond {
		t.Errorf("server announces idle-time-out %v; want half of 1.5s", open.IdleTimeout)
	}
	// Heartbeats arrive at least every half second (half the peer's timeout).
	last := time.Now()
	for range 3 {
		f, err := r.next()
		if err != nil || f.Body != nil {
			t.Fatalf("expected a heartbeat, got %#v, %v", f.Body, err)
		}
		if gap := time.Since(last); gap > 600*time.Millisecond {
			t.Errorf("heartbeat gap %v", gap)
		}
		last = time.Now()
	}
	// Silent for more than the server's timeout: closed.
	r.expectClose(ErrCondResourceLimitExceeded)
	var e *Error
	if ev := b.waitEvent("closed"); !errors.As(ev.err, &e) || e.Condition != ErrCondResourceLimitExceeded {
		t.Errorf("Closed(%v)", ev.err)
	}
}

// TestRawDetachWhilePending: the peer detaches a link the handler has not answered; the
// request's context is cancelled and a later answer fails.
func TestRawDetachWhilePending(t *testing.T) {
	reqs := make(chan *AttachRequest, 1)
	b, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.onAttach = func(req *AttachRequest) bool { reqs <- req; return true }
	})
	r := rawDial(t, addr)
	r.handshake(nil)
	r.begin(1)
	r.send(1, &Attach{Name: "p", Handle: 0, Role: RoleReceiver, Source: &Source{Address: "q"}, Target: &Target{}})
	req := <-reqs
	r.send(1, &Detach{Handle: 0, Closed: true})
	a := expect[*Attach](r)
	if a.Source != nil {
		t.Errorf("answer to an abandoned attach has source %#v", a.Source)
	}
	expect[*Detach](r)
	<-req.Context().Done()
	if _, err := req.AcceptSender(b, SenderOptions{}); !errors.Is(err, ErrLinkDetached) {
		t.Errorf("AcceptSender after the peer detached: %v", err)
	}
	// The handle is free again. Credit granted before the answer is reported after it.
	r.send(1, &Attach{Name: "p2", Handle: 0, Role: RoleReceiver, Source: &Source{Address: "q"}, Target: &Target{}})
	r.send(1, &Flow{IncomingWindow: 100, OutgoingWindow: 100, Handle: ptr(uint32(0)), LinkCredit: ptr(uint32(7))})
	req = <-reqs
	if _, err := req.AcceptReceiver(b, ReceiverOptions{}); !errors.Is(err, ErrWrongRole) {
		t.Errorf("AcceptReceiver of a receiving peer: %v", err)
	}
	if _, err := req.AcceptSender(b, SenderOptions{}); err != nil {
		t.Errorf("AcceptSender: %v", err)
	}
	if err := req.Refuse(nil); !errors.Is(err, ErrAnswered) {
		t.Errorf("Refuse after accepting: %v", err)
	}
	if ev := b.waitEvent("flow"); ev.credit != 7 {
		t.Errorf("Flow(credit %d) after accepting; want the 7 granted before", ev.credit)
	}
	expect[*Attach](r)
	r.send(0, &Close{})
	expect[*Close](r)
}

// TestShutdown closes connected clients with amqp:connection:forced and waits for them.
func TestShutdown(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	c := dial(t, addr, nil)
	s := session(t, c)
	rcv := newReceiver(t, s, "q", nil)
	r := rawDial(t, addr)
	r.handshake(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.srv.Shutdown(ctx) }()
	// The raw peer answers the close; go-amqp does too.
	r.expectClose(ErrCondConnectionForced)
	if _, err := rcv.Receive(testCtx(t), nil); amqpCondition(err) != string(ErrCondConnectionForced) {
		t.Errorf("Receive during shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("server still accepts after Shutdown")
	}
}

// TestShutdownDuringHandshake: a connection whose peer has not sent its open yet when the server
// shuts down is refused once it does (the server's open, then its close), and Shutdown waits
// for it. (The close Shutdown queues is encoded under the peer's max-frame-size, which the
// handshake sets: the race detector once saw the two unsynchronized in amqpws's tests, when the
// close came just after the open was read. That window is too narrow to aim at here.)
func TestShutdownDuringHandshake(t *testing.T) {
	b, addr := newTestBroker(t, Options{})
	r := rawDial(t, addr)
	r.write(headerSASL[:])
	if h := r.readHeader(); h != headerSASL {
		t.Fatalf("server header %q", h[:])
	}
	expect[*SASLMechanisms](r)
	r.write(r.frame(FrameTypeSASL, 0, &SASLInit{Mechanism: "ANONYMOUS"}))
	if o := expect[*SASLOutcome](r); o.Code != SASLOK {
		t.Fatalf("SASL outcome %d", o.Code)
	}
	r.write(headerAMQP[:])
	if h := r.readHeader(); h != headerAMQP {
		t.Fatalf("server header %q", h[:])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.srv.Shutdown(ctx) }()
	// Shutdown closes the connections in the critical section that marks the server closed.
	eventually.Within(5*time.Second).NoError(t, "Shutdown to close the connections", func() error {
		b.srv.mu.Lock()
		defer b.srv.mu.Unlock()
		if !b.srv.closed {
			return errors.New("not yet")
		}
		return nil
	})
	r.send(0, &Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 10})
	expect[*Open](r)
	r.expectClose(ErrCondConnectionForced)
	_ = r.nc.Close() // the server lingers until the peer is gone
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestConnectCallsClose: a handler that closes the connection from Connect refuses it: the
// peer gets the server's open, then the close.
func TestConnectCallsClose(t *testing.T) {
	srv := NewServer(closingHandler{}, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(context.Background(), ln) }()
	defer srv.Close()
	r := rawDial(t, ln.Addr().String())
	r.handshake(nil)
	r.expectClose(ErrCondResourceLimitExceeded)
}

type closingHandler struct{ ConnHandler }

func (closingHandler) Connect(c *Conn) (ConnHandler, error) {
	_ = c.Close(&Error{Condition: ErrCondResourceLimitExceeded, Description: "too many connections"})
	return closingHandler{}, nil
}

// TestRawMaxLinks: attaches beyond Options.MaxLinks are refused without reaching the
// handler; detached links free their place.
func TestRawMaxLinks(t *testing.T) {
	b, addr := newTestBroker(t, Options{MaxLinks: 2})
	r := rawDial(t, addr)
	r.handshake(nil)
	r.begin(1)
	r.begin(2)
	r.attachSender(1, 0, "a")
	r.attachSender(2, 0, "b")
	r.send(1, &Attach{Name: "third", Handle: 1, Role: RoleSender, Target: &Target{Address: "c"}})
	if a := expect[*Attach](r); a.Target != nil {
		t.Errorf("third link answered with target %#v", a.Target)
	}
	if d := expect[*Detach](r); d.Error == nil || d.Error.Condition != ErrCondResourceLimitExceeded {
		t.Fatalf("third link detached with %#v", d.Error)
	}
	r.send(1, &Detach{Handle: 1, Closed: true})
	r.send(2, &Detach{Handle: 0, Closed: true})
	expect[*Detach](r)
	b.waitEvent("detached")
	r.attachSender(1, 1, "c")
	r.send(0, &Close{})
	expect[*Close](r)
}

// TestShutdownUnresponsivePeer: a peer that never answers the close does not hold
// Shutdown longer than Options.CloseTimeout.
func TestShutdownUnresponsivePeer(t *testing.T) {
	b, addr := newTestBroker(t, Options{CloseTimeout: 200 * time.Millisecond})
	r := rawDial(t, addr)
	r.handshake(nil)
	b.waitEvent("connect")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	if ev := b.waitEvent("closed"); condition(ev.err) != ErrCondConnectionForced {
		t.Errorf("Closed(%v)", ev.err)
	}
	expect[*Close](r)
	r.expectEOF()
}
