package amqpws_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/coder/websocket"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/amqpws"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

var (
	headerSASL = []byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
	headerAMQP = []byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
)

// frame appends one frame to b.
func frame(t *testing.T, b []byte, typ uint8, body amqp.Performative) []byte {
	t.Helper()
	b, err := amqp.AppendFrame(b, typ, 0, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reader reads the server's side of a raw tunnel: protocol headers and frames.
type reader struct {
	t  *testing.T
	br *bufio.Reader
}

func newReader(t *testing.T, ws *websocket.Conn) *reader {
	return &reader{t: t, br: bufio.NewReader(websocket.NetConn(ctxT(t), ws, websocket.MessageBinary))}
}

func (r *reader) header(want []byte) {
	r.t.Helper()
	got := make([]byte, 8)
	if _, err := io.ReadFull(r.br, got); err != nil {
		r.t.Fatalf("read protocol header: %v", err)
	}
	if !bytes.Equal(got, want) {
		r.t.Fatalf("protocol header %q, want %q", got, want)
	}
}

func (r *reader) frame() amqp.Performative {
	r.t.Helper()
	head, err := r.br.Peek(4)
	if err != nil {
		r.t.Fatalf("read frame: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(head))
	if _, err := io.ReadFull(r.br, b); err != nil {
		r.t.Fatalf("read frame: %v", err)
	}
	f, _, err := amqp.ParseFrame(b, 0)
	if err != nil {
		r.t.Fatalf("parse frame: %v", err)
	}
	return f.Body
}

// TestSeveralFramesInOneMessage sends the whole opening of a connection — SASL header,
// sasl-init, AMQP header and open — in one WebSocket message: the server reads the messages as
// one byte stream, not a frame per message.
func TestSeveralFramesInOneMessage(t *testing.T) {
	b := newBroker(t, amqpws.Options{})
	ws := b.dial(t, false, b.wsURL(false, amqpws.Path), nil)
	msg := append([]byte(nil), headerSASL...)
	msg = frame(t, msg, amqp.FrameTypeSASL, &amqp.SASLInit{Mechanism: "ANONYMOUS"})
	msg = append(msg, headerAMQP...)
	msg = frame(t, msg, amqp.FrameTypeAMQP, &amqp.Open{ContainerID: "raw", Hostname: "localhost", MaxFrameSize: 4096})
	if err := ws.Write(ctxT(t), websocket.MessageBinary, msg); err != nil {
		t.Fatal(err)
	}
	r := newReader(t, ws)
	r.header(headerSASL)
	if _, ok := r.frame().(*amqp.SASLMechanisms); !ok {
		t.Fatal("no sasl-mechanisms")
	}
	if o, ok := r.frame().(*amqp.SASLOutcome); !ok || o.Code != amqp.SASLOK {
		t.Fatalf("sasl-outcome %+v", o)
	}
	r.header(headerAMQP)
	if o, ok := r.frame().(*amqp.Open); !ok || o.ContainerID == "" {
		t.Fatalf("open %+v", o)
	}
}

// TestFramesSpanMessagesAndSmallFrames runs a raw go-amqp client whose every write is cut into
// WebSocket messages of 7 bytes (so frames span messages) and which offers max-frame-size 4096,
// as Java does over WebSockets: a message of 20 KB goes both ways, and no frame the server
// sends is over 4096 bytes.
func TestFramesSpanMessagesAndSmallFrames(t *testing.T) {
	b := newBroker(t, amqpws.Options{})
	b.createQueue(t, "q")
	ctx := ctxT(t)
	ws := b.dial(t, true, b.wsURL(true, amqpws.Path), nil)
	watch := &frameWatch{Conn: websocket.NetConn(context.Background(), ws, websocket.MessageBinary), chunk: 7}
	host := strings.TrimPrefix(b.https.URL, "https://")
	conn, err := goamqp.NewConn(ctx, watch, &goamqp.ConnOptions{
		SASLType: goamqp.SASLTypeAnonymous(), MaxFrameSize: 4096, HostName: host,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	putToken(t, sess, "sb://"+host+"/q")

	body := bytes.Repeat([]byte("0123456789abcdefghij"), 1000)
	snd, err := sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Send(ctx, &goamqp.Message{Data: [][]byte{body}}, nil); err != nil {
		t.Fatalf("send: %v", err)
	}
	rcv, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 1, SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if !bytes.Equal(m.GetData(), body) {
		t.Fatalf("received %d bytes, not what was sent", len(m.GetData()))
	}
	if err := rcv.AcceptMessage(ctx, m); err != nil {
		t.Fatalf("accept: %v", err)
	}
	b.waitEmpty(t, "q")
	largest, frames := watch.stats()
	if largest > 4096 || largest < 2048 || frames < 5 {
		t.Errorf("the server's largest frame is %d bytes of %d frames; want at most 4096, a 20 KB transfer split", largest, frames)
	}
}

// putToken authorizes the connection of sess for audience with the root key over $cbs.
func putToken(t *testing.T, sess *goamqp.Session, audience string) {
	t.Helper()
	ctx := ctxT(t)
	req, err := sess.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer req.Close(ctx)
	reply, err := sess.NewReceiver(ctx, "$cbs", &goamqp.ReceiverOptions{TargetAddress: "cbs-reply", Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer reply.Close(ctx)
	replyTo := "cbs-reply"
	err = req.Send(ctx, &goamqp.Message{
		Properties: &goamqp.MessageProperties{MessageID: "1", ReplyTo: &replyTo},
		ApplicationProperties: map[string]any{
			"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience,
		},
		Value: sas.Sign(audience, "root", rootKey, time.Now().Add(time.Hour)),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := reply.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = reply.AcceptMessage(ctx, m)
	if code := m.ApplicationProperties["status-code"]; code != int32(202) && code != int32(200) {
		t.Fatalf("put-token: %v %v", code, m.ApplicationProperties["status-description"])
	}
}

// frameWatch is a client's tunnel that writes each write in WebSocket messages of chunk bytes
// and parses the frames the server sends, keeping the size of the largest.
type frameWatch struct {
	net.Conn
	chunk int

	mu      sync.Mutex
	head    []byte // the start of a frame header or protocol header
	skip    int    // bytes of the current frame still to come
	largest int
	frames  int
}

func (w *frameWatch) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += w.chunk {
		if _, err := w.Conn.Write(p[i:min(i+w.chunk, len(p))]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

func (w *frameWatch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	for b := p[:n]; len(b) > 0; {
		if w.skip > 0 {
			k := min(w.skip, len(b))
			w.skip -= k
			b = b[k:]
			continue
		}
		w.head = append(w.head, b[0])
		b = b[1:]
		if len(w.head) < 4 {
			continue
		}
		if string(w.head) == "AMQP" { // a protocol header: 4 more bytes
			w.skip = 4
		} else {
			size := int(binary.BigEndian.Uint32(w.head))
			w.largest = max(w.largest, size)
			w.frames++
			w.skip = size - 4
		}
		w.head = w.head[:0]
	}
	return n, err
}

func (w *frameWatch) stats() (largest, frames int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.largest, w.frames
}

// closeStatus reads from ws until it fails and returns the close status the server sent.
func closeStatus(t *testing.T, ws *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx := ctxT(t)
	for {
		_, _, err := ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatal("the server did not end the tunnel")
			}
			return websocket.CloseStatus(err)
		}
	}
}

// TestTextMessageEndsTunnel: AMQP travels in binary messages; a text message ends the tunnel
// with 1003 (unsupported data), and the AMQP connection with it.
func TestTextMessageEndsTunnel(t *testing.T) {
	b := newBroker(t, amqpws.Options{})
	ws := b.dial(t, false, b.wsURL(false, amqpws.Path), nil)
	b.waitTunnels(t, 1)
	if err := ws.Write(ctxT(t), websocket.MessageText, headerSASL); err != nil {
		t.Fatal(err)
	}
	if got := closeStatus(t, ws); got != websocket.StatusUnsupportedData {
		t.Errorf("close status %v, want %v", got, websocket.StatusUnsupportedData)
	}
	b.waitTunnels(t, 0)
}

// TestOversizedMessageEndsTunnel: a message over MaxMessageSize ends the tunnel with 1009
// (message too big) even in the middle of a frame the AMQP server would take.
func TestOversizedMessageEndsTunnel(t *testing.T) {
	b := newBroker(t, amqpws.Options{MaxMessageSize: 1024})
	ws := b.dial(t, false, b.wsURL(false, amqpws.Path), nil)
	ctx := ctxT(t)
	if err := ws.Write(ctx, websocket.MessageBinary, headerSASL); err != nil {
		t.Fatal(err)
	}
	big := frame(t, nil, amqp.FrameTypeSASL, &amqp.SASLInit{Mechanism: "ANONYMOUS", InitialResponse: make([]byte, 2000)})
	if err := ws.Write(ctx, websocket.MessageBinary, big); err != nil {
		t.Fatal(err)
	}
	if got := closeStatus(t, ws); got != websocket.StatusMessageTooBig {
		t.Errorf("close status %v, want %v", got, websocket.StatusMessageTooBig)
	}
	b.waitTunnels(t, 0)
}

// TestCloseMidFrame: a client that closes its WebSocket in the middle of a frame ends the AMQP
// connection; the close handshake completes.
func TestCloseMidFrame(t *testing.T) {
	b := newBroker(t, amqpws.Options{})
	ws := b.dial(t, false, b.wsURL(false, amqpws.Path), nil)
	ctx := ctxT(t)
	init := frame(t, append([]byte(nil), headerSASL...), amqp.FrameTypeSASL, &amqp.SASLInit{Mechanism: "ANONYMOUS"})
	if err := ws.Write(ctx, websocket.MessageBinary, init[:len(init)-3]); err != nil {
		t.Fatal(err)
	}
	b.waitTunnels(t, 1)
	if err := ws.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Errorf("close handshake: %v", err)
	}
	b.waitTunnels(t, 0)
}

// TestPingPong: the server pings an idle tunnel, and answers the client's pings, while AMQP is
// quiet.
func TestPingPong(t *testing.T) {
	b := newBroker(t, amqpws.Options{PingInterval: 20 * time.Millisecond})
	var mu sync.Mutex
	pings := 0
	ws := b.dial(t, false, b.wsURL(false, amqpws.Path), &websocket.DialOptions{
		Subprotocols: []string{amqpws.SubprotocolAMQP},
		OnPingReceived: func(context.Context, []byte) bool {
			mu.Lock()
			pings++
			mu.Unlock()
			return true
		},
	})
	ctx := ctxT(t)
	// A reader, which the library needs to see pings and pongs.
	read := make(chan error, 1)
	go func() {
		_, _, err := ws.Read(ctx)
		read <- err
	}()
	eventually.True(t, "three pings", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return pings >= 3
	})
	if err := ws.Ping(ctx); err != nil {
		t.Errorf("the server did not answer a ping: %v", err)
	}
	_ = ws.CloseNow()
	if err := <-read; err == nil {
		t.Error("read a message from an idle tunnel")
	}
	b.waitTunnels(t, 0)
}

// TestShutdownClosesTunnels: shutting the AMQP server down closes tunnelled connections like
// the others, and Close refuses new upgrades.
func TestShutdownClosesTunnels(t *testing.T) {
	b := newBroker(t, amqpws.Options{})
	b.createQueue(t, "q")
	c := b.sdkClient(t, true, false, amqpws.SubprotocolAMQPWSB10, nil)
	ctx := ctxT(t)
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	received := make(chan struct{})
	go func() {
		defer close(received)
		_, _ = r.ReceiveMessages(ctx, 1, nil)
	}()
	b.waitTunnels(t, 1)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.amqp.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	b.waitTunnels(t, 0)
	<-received
	if err := b.ws.Close(); err != nil {
		t.Fatal(err)
	}
	_, resp, err := websocket.Dial(ctx, b.wsURL(false, amqpws.Path), &websocket.DialOptions{Subprotocols: []string{amqpws.SubprotocolAMQP}})
	if err == nil || resp == nil || resp.StatusCode != 503 {
		t.Errorf("upgrade after Close: %v, %+v", err, resp)
	}
}

// TestSlowReaderBackpressure: the tunnel holds no more than the sockets do. A client that does
// not read stalls the server's writes instead of making the server buffer them; once it reads,
// every byte arrives in order. The server here writes a counted byte stream (not AMQP): what is
// tested is the transport's flow, which AMQP's own limits then build on.
func TestSlowReaderBackpressure(t *testing.T) {
	t.Parallel()
	const total = 256 << 20
	w := &streamWriter{total: total}
	h := amqpws.New(w, amqpws.Options{})
	srv := newHTTPServer(t, h)
	ctx := ctxT(t)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &websocket.DialOptions{Subprotocols: []string{amqpws.SubprotocolAMQPWSB10}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// Stalled: the count stops growing while the client reads nothing, far below the total.
	const bound = 32 << 20
	last, since := int64(-1), time.Now()
	eventually.True(t, "the server's writes to stall", func() bool {
		n := w.written()
		if n > bound {
			t.Fatalf("the server wrote %d bytes to a client that reads nothing", n)
		}
		if n != last {
			last, since = n, time.Now()
		}
		return n > 0 && time.Since(since) >= 100*time.Millisecond // 100 ms without progress
	})
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	ws.SetReadLimit(-1)
	buf := make([]byte, 1<<20)
	var got int64
	for got < total {
		n, err := nc.Read(buf)
		for i := range n {
			if buf[i] != byte((got+int64(i))%251) {
				t.Fatalf("byte %d is %d, want %d", got+int64(i), buf[i], (got+int64(i))%251)
			}
		}
		got += int64(n)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", got, err)
		}
	}
	_ = nc.Close()
	eventually.True(t, "the tunnel to end", func() bool { return amqpws.OpenTunnels(h) == 0 })
}

// streamWriter is a ConnServer that writes total bytes (byte i is i mod 251) in 64 KiB writes,
// then waits for the peer to close.
type streamWriter struct {
	total int64
	mu    sync.Mutex
	n     int64
}

func (s *streamWriter) written() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *streamWriter) ServeConn(ctx context.Context, nc net.Conn) error {
	defer nc.Close()
	buf := make([]byte, 64<<10)
	for off := int64(0); off < s.total; off += int64(len(buf)) {
		for i := range buf {
			buf[i] = byte((off + int64(i)) % 251)
		}
		if _, err := nc.Write(buf); err != nil {
			return err
		}
		s.mu.Lock()
		s.n += int64(len(buf))
		s.mu.Unlock()
	}
	_, err := nc.Read(make([]byte, 1))
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
