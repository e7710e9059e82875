package amqp

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbgate/sbgate/internal/eventually"
)

// Tests of what a peer that pays nothing can make the server hold (the findings of an outside
// attack on the listener): each measures the memory the server keeps, or what it answers, with
// a bound.

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A refused link is forgotten at once: a peer that attaches links the handler refuses, each with
// large properties, and never detaches them, makes the server keep nothing of them; past
// maxRefusedLinks outstanding refusals the connection is closed. A later detach of a refused
// handle is answered by nothing and ends nothing.
func TestRefusedAttachesAreNotKept(t *testing.T) {
	b, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.onAttach = func(req *AttachRequest) bool {
			_ = req.Refuse(Errorf(ErrCondUnauthorizedAccess, "no token for %s", req.TargetAddress()))
			return true
		}
	})
	_ = b
	props := Map{}
	for i := range 1500 { // about 50 KB, under the 64 KiB frames of the server
		props = append(props, MapEntry{Key: Symbol(fmt.Sprintf("p%05d", i)), Value: "some value of the property"})
	}
	r := rawDial(t, addr)
	r.handshake(nil)
	r.send(0, &Begin{NextOutgoingID: 0, IncomingWindow: 1000, OutgoingWindow: 1000, HandleMax: 255})
	expect[*Begin](r)
	// One refused and detached: the detach is ignored, the session lives on.
	r.send(0, &Attach{Name: "l0", Handle: 0, Role: RoleSender, Source: &Source{}, Target: &Target{Address: "q"}, Properties: props})
	expect[*Attach](r)
	if d := expect[*Detach](r); d.Error == nil || d.Error.Condition != ErrCondUnauthorizedAccess {
		t.Fatalf("refusal %#v", d)
	}
	r.send(0, &Detach{Handle: 0, Closed: true})

	before := heapInUse()
	for h := uint32(1); h <= maxRefusedLinks; h++ {
		r.send(0, &Attach{Name: fmt.Sprint("l", h), Handle: h, Role: RoleSender, Source: &Source{}, Target: &Target{Address: "q"}, Properties: props})
		expect[*Attach](r)
		expect[*Detach](r)
	}
	held := int64(heapInUse()) - int64(before)
	size := len(r.frame(FrameTypeAMQP, 0, &Attach{Name: "l", Role: RoleSender, Properties: props}))
	if held > int64(4*size) {
		t.Errorf("%d refused attaches of %d bytes each left %d bytes on the heap", maxRefusedLinks, size, held)
	}
	// One more refusal outstanding closes the connection.
	r.send(0, &Attach{Name: "last", Handle: maxRefusedLinks + 1, Role: RoleSender, Source: &Source{}, Target: &Target{Address: "q"}})
	expect[*Attach](r)
	expect[*Detach](r)
	r.expectClose(ErrCondResourceLimitExceeded)
}

// Decoded values are bounded by the bytes that carried them: an attach whose properties are a
// 240 KB map of null→null entries is a decode error, not 3.8 MB of Go values.
func TestNullMapAttachIsRefused(t *testing.T) {
	_, addr := newTestBroker(t, Options{MaxFrameSize: 512 << 10})
	r := rawDial(t, addr)
	r.handshake(&Open{ContainerID: "raw", MaxFrameSize: 65536})
	r.begin(0)
	nulls := Map{}
	for range 120_000 {
		nulls = append(nulls, MapEntry{})
	}
	r.send(0, &Attach{Name: "x", Handle: 0, Role: RoleSender, Source: &Source{}, Target: &Target{Address: "q"}, Properties: nulls})
	r.expectClose(ErrCondDecodeError)
	checkHealthy(t, addr)
}

// Error descriptions the server sends are clipped: a refusal quoting a 200,000-byte address
// does not send it back whole.
func TestErrorDescriptionsAreClipped(t *testing.T) {
	_, addr := newTestBroker(t, Options{MaxFrameSize: 512 << 10}, func(b *testBroker) {
		b.onAttach = func(req *AttachRequest) bool {
			_ = req.Refuse(Errorf(ErrCondNotFound, "no entity %q", req.TargetAddress()))
			return true
		}
	})
	r := rawDial(t, addr)
	r.handshake(&Open{ContainerID: "raw", MaxFrameSize: 512 << 10})
	r.begin(0)
	long := make([]byte, 200_000)
	for i := range long {
		long[i] = 'a'
	}
	r.send(0, &Attach{Name: "x", Handle: 0, Role: RoleSender, Source: &Source{}, Target: &Target{Address: string(long)}})
	expect[*Attach](r)
	d := expect[*Detach](r)
	if d.Error == nil || len(d.Error.Description) > maxErrorDescription+8 {
		t.Errorf("refusal description of %d bytes", len(d.Error.Description))
	}
}

// raiseFileLimit lifts the soft limit on open files to the hard one and returns how many the
// test may use.
func raiseFileLimit(t *testing.T) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = lim.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return int(lim.Cur)
}

// 2,000 sockets that never complete a handshake — silent, a header only, a header and a SASL
// frame announcing 64 KiB, all but the last byte of a frame — cost the server under 50 MB of
// heap, and a real client still connects and sends meanwhile, within 100 ms.
func TestPreAuthSocketsCostLittle(t *testing.T) {
	n := 2000
	if limit := raiseFileLimit(t); 2*n+200 > limit {
		n = (limit - 200) / 2
		t.Logf("the open-file limit %d allows %d sockets", limit, n)
	}
	_, addr := newTestBroker(t, Options{})
	checkHealthy(t, addr) // warm up what every connection shares
	before := heapInUse()

	var wg sync.WaitGroup
	conns := make([]net.Conn, n)
	var mu sync.Mutex
	var dialErr error
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				mu.Lock()
				dialErr = err
				mu.Unlock()
				return
			}
			conns[i] = nc
			switch i % 4 {
			case 0: // silent
			case 1:
				_, _ = nc.Write(headerSASL[:])
			case 2: // a SASL frame header announcing a 64 KiB frame, then nothing
				var h [8]byte
				binary.BigEndian.PutUint32(h[:], 64<<10)
				h[4], h[5] = 2, FrameTypeSASL
				_, _ = nc.Write(append(headerSASL[:], h[:]...))
			case 3: // all but the last byte of a sasl-init
				f, _ := AppendFrame(nil, FrameTypeSASL, 0, &SASLInit{Mechanism: "ANONYMOUS", InitialResponse: make([]byte, 300)})
				_, _ = nc.Write(append(headerSASL[:], f[:len(f)-1]...))
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, nc := range conns {
			if nc != nil {
				_ = nc.Close()
			}
		}
	})
	if dialErr != nil {
		t.Fatalf("dial: %v", dialErr)
	}
	start := time.Now()
	checkHealthy(t, addr)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Logf("a real client took %s beside %d hostile sockets", d, n)
		if d > time.Second {
			t.Errorf("a real client took %s beside %d hostile sockets", d, n)
		}
	}
	grew := int64(heapInUse()) - int64(before)
	if grew > 50<<20 {
		t.Errorf("%d pre-auth sockets grew the heap by %d MB", n, grew>>20)
	}
	t.Logf("%d pre-auth sockets: heap +%d KB (%d bytes each)", n, grew>>10, grew/int64(n))
}

// Past MaxHandshakes the oldest connection still in its handshake is closed for the new one; at
// MaxConnections a new one takes the place of one still in its handshake, or is closed at once
// when every connection is open; each is counted.
func TestConnectionLimits(t *testing.T) {
	dialSilent := func(addr string) net.Conn {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		return nc
	}
	closed := func(nc net.Conn) bool {
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := nc.Read(make([]byte, 1))
		return err != nil
	}

	b, addr := newTestBroker(t, Options{MaxHandshakes: 2})
	s1 := dialSilent(addr)
	dialSilent(addr)
	eventually.True(t, "two handshakes", func() bool { return b.srv.Stats().Handshaking == 2 })
	dialSilent(addr) // the third evicts the first
	if !closed(s1) {
		t.Error("the oldest handshake was not closed")
	}
	dial(t, addr, nil) // a real client evicts the second and completes its handshake
	if s := b.srv.Stats(); s.EvictedHandshakes != 2 || s.Handshaking != 1 || s.Connections != 2 {
		t.Errorf("stats %+v; want two evictions, one handshake and two connections", s)
	}

	b, addr = newTestBroker(t, Options{MaxConnections: 2})
	dial(t, addr, nil)
	pending := dialSilent(addr)
	eventually.True(t, "one handshake", func() bool { return b.srv.Stats().Handshaking == 1 })
	dial(t, addr, nil) // takes the place of the one in its handshake
	if !closed(pending) {
		t.Error("a connection in its handshake was kept at MaxConnections for a new one")
	}
	if !closed(dialSilent(addr)) {
		t.Error("a connection past MaxConnections was served")
	}
	if s := b.srv.Stats(); s.RefusedConnections != 1 || s.EvictedHandshakes != 1 || s.Connections != 2 {
		t.Errorf("stats %+v; want one refused connection, one eviction and two connections", s)
	}
}
