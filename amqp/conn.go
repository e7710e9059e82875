package amqp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// maxPendingEvents bounds the events a connection queues for its handler: past it the
// reader stops reading until the handler catches up, so a slow handler slows its peer
// instead of filling memory.
const maxPendingEvents = 4096

// Before the peer's open has been accepted a connection has paid nothing: it reads through a
// small buffer and takes frames of at most preOpenMaxFrame bytes (what SASL and an open need;
// the specification's minimum max-frame-size is 512), so a socket that announces a large frame
// and sends nothing costs little. Once open, the buffer grows to openReadBuffer.
const (
	preOpenReadBuffer = 512
	preOpenMaxFrame   = 4096
	openReadBuffer    = 64 << 10
)

// emptyFrame is a heartbeat: an AMQP frame with no body.
var emptyFrame = []byte{0, 0, 0, 8, 2, FrameTypeAMQP, 0, 0}

// Conn is one AMQP connection served by a Server. Its methods are safe for concurrent use.
type Conn struct {
	srv  *Server
	opts *Options
	nc   net.Conn
	br   *bufio.Reader
	log  *slog.Logger

	ctx       context.Context
	cancel    context.CancelFunc
	stopWatch func() bool

	// Set during the handshake, read-only afterwards. peerMaxFrame is set under mu: a Close
	// during the handshake reads it.
	principal    any
	mechanism    string
	saslHostname string
	peerOpen     *Open
	peerMaxFrame uint32
	peerIdle     time.Duration
	h            ConnHandler

	// Owned by the reader goroutine.
	rbuf    []byte
	scratch scratch

	writerDone   chan struct{}
	dispatchDone chan struct{}

	mu            sync.Mutex
	sessions      map[uint16]*Session
	links         int // links of all sessions, for Options.MaxLinks
	refused       int // refused links the peer has not detached (Session.refused)
	attachBytes   int // encoded size of the attaches of the links held, for maxAttachBytes
	frameLen      int // size of the frame being handled
	windowLow     []*Session
	closing       bool  // a close was sent (or the connection is going): nothing more is sent
	closeErr      error // what the close sent said, or why the connection went
	closeDeadline time.Time
	linger        bool // the stream is unparsable: after our close, drain it until the peer goes
	wbuf          []byte
	run           dispositionRun
	writerStop    bool
	writerFailed  bool
	wake          chan struct{}
	writable      chan struct{}
	waiters       int
	events        []event
	evAvail       *sync.Cond
	evSpace       *sync.Cond
	dispatchStop  bool
}

// scratch holds what the reader reuses from frame to frame: the decoder and the
// performatives it decodes most.
type scratch struct {
	dec         decoder
	hdr         [frameHeaderSize]byte
	transfer    Transfer
	flow        Flow
	disposition Disposition
}

func newConn(ctx context.Context, s *Server, nc net.Conn) *Conn {
	c := &Conn{
		srv:          s,
		opts:         &s.opts,
		nc:           nc,
		br:           bufio.NewReaderSize(nc, preOpenReadBuffer),
		log:          s.log.With(slog.String("remote", nc.RemoteAddr().String())),
		sessions:     make(map[uint16]*Session),
		wake:         make(chan struct{}, 1),
		writable:     make(chan struct{}),
		writerDone:   make(chan struct{}),
		dispatchDone: make(chan struct{}),
		peerMaxFrame: minMaxFrameSize,
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.evAvail = sync.NewCond(&c.mu)
	c.evSpace = sync.NewCond(&c.mu)
	// The parent context ending (Serve's ctx) closes the socket; the reader then tears down.
	c.stopWatch = context.AfterFunc(ctx, func() { _ = nc.Close() })
	return c
}

// Context returns a context cancelled when the connection ends. It carries the values of
// the context given to Serve or ServeConn.
func (c *Conn) Context() context.Context { return c.ctx }

// Logger returns the connection's logger (the server's, with the remote address).
func (c *Conn) Logger() *slog.Logger { return c.log }

// RemoteAddr returns the peer's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Principal returns what the Authenticator returned for this connection (nil without SASL).
func (c *Conn) Principal() any { return c.principal }

// SASLMechanism returns the SASL mechanism the peer used ("" without SASL).
func (c *Conn) SASLMechanism() string { return c.mechanism }

// ContainerID returns the container id of the peer's open.
func (c *Conn) ContainerID() string { return c.peerOpen.ContainerID }

// Hostname returns the hostname of the peer's open (or, when the open has none, of its
// sasl-init).
func (c *Conn) Hostname() string {
	if c.peerOpen.Hostname != "" {
		return c.peerOpen.Hostname
	}
	return c.saslHostname
}

// PeerOpen returns the peer's open performative. It must not be modified.
func (c *Conn) PeerOpen() *Open { return c.peerOpen }

// Close closes the connection with err (nil for a clean close): the engine sends close,
// waits for the peer's (at most Options.CloseTimeout) and tears the connection down; the
// handler's ReceiverDetached, SenderDetached, SessionEnded and Closed calls follow. Close does not wait. It
// returns ErrConnClosed if the connection is already closing.
func (c *Conn) Close(err *Error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrConnClosed
	}
	c.closeLocked(err)
	return nil
}

// closeLocked sends close with err and starts waiting for the peer's close.
func (c *Conn) closeLocked(err *Error) {
	if c.closing {
		return
	}
	_ = c.sendLocked(0, &Close{Error: err})
	c.closing = true
	if err != nil {
		c.closeErr = err
	}
	c.closeDeadline = time.Now().Add(c.opts.CloseTimeout)
	_ = c.nc.SetReadDeadline(c.closeDeadline)
}

// serve runs the connection to its end on the calling goroutine.
func (c *Conn) serve() error {
	defer c.srv.untrack(c)
	defer c.stopWatch()
	defer c.cancel()
	h, err := c.handshake()
	if err != nil {
		_ = c.nc.Close()
		c.log.Debug("amqp: handshake failed", slog.Any("error", err))
		return err
	}
	c.h = h
	go c.writeLoop()
	go c.dispatchLoop()
	c.log.Debug("amqp: connection open", slog.String("container", c.peerOpen.ContainerID),
		slog.String("hostname", c.Hostname()))
	reason := c.readLoop()
	c.teardown(reason)
	c.log.Debug("amqp: connection closed", slog.Any("reason", reason))
	return reason
}

// handshake runs the protocol header exchange, SASL and the peer's open, and asks the
// Handler for the connection's handler. It writes directly: the writer has not started.
// When it returns a handler the server's open has been queued.
func (c *Conn) handshake() (ConnHandler, error) {
	_ = c.nc.SetDeadline(time.Now().Add(c.opts.HandshakeTimeout))
	if err := c.exchangeHeaders(); err != nil {
		return nil, err
	}
	open, err := c.readOpen()
	if err != nil {
		return nil, err
	}
	c.peerOpen = open
	c.mu.Lock() // a Close (the server shutting down) may be encoding its frame under it
	c.peerMaxFrame = open.MaxFrameSize
	c.mu.Unlock()
	c.peerIdle = open.IdleTimeout
	if c.peerIdle > 0 && c.peerIdle < 100*time.Millisecond {
		// Heartbeats every few microseconds would be a denial of service on us.
		c.peerIdle = 100 * time.Millisecond
	}

	h, err := c.srv.h.Connect(c)
	c.mu.Lock()
	if c.closing && err == nil {
		// Connect called Close: its close must follow our open, as a refusal's does.
		err, c.closing, c.wbuf = c.closeErr, false, c.wbuf[:0]
		if err == nil {
			err = &Error{Condition: ErrCondConnectionForced}
		}
	}
	c.mu.Unlock()
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			c.log.Error("amqp: handler refused connection", slog.Any("error", err))
			e = &Error{Condition: ErrCondInternalError}
		}
		return nil, c.refuseOpen(e)
	}
	if h == nil {
		return nil, c.refuseOpen(&Error{Condition: ErrCondInternalError})
	}
	c.srv.opened(c)
	c.br = bufio.NewReaderSize(&prefixReader{prefix: c.buffered(), r: c.nc}, openReadBuffer)
	_ = c.nc.SetDeadline(time.Time{})
	c.mu.Lock()
	err = c.sendLocked(0, c.localOpen())
	c.mu.Unlock()
	if err != nil {
		// Only Options.Properties can fail to encode; the handler's connection still ends
		// through the ordinary path.
		c.log.Error("amqp: encode open", slog.Any("error", err))
		_ = c.nc.Close()
	}
	return h, nil
}

// exchangeHeaders reads the client's protocol headers, runs SASL when the client asks for it
// (or refuses a client that skips it and must not), and answers the AMQP header.
func (c *Conn) exchangeHeaders() error {
	hdr, err := c.readHeader()
	if err != nil {
		return err
	}
	switch hdr {
	case headerSASL:
		if err := c.sasl(); err != nil {
			return err
		}
		if hdr, err = c.readHeader(); err != nil {
			return err
		}
		if hdr != headerAMQP {
			c.refuseHeader(headerAMQP)
			return fmt.Errorf("amqp: protocol header %q after SASL", hdr[:])
		}
	case headerAMQP:
		if !c.opts.AllowNoSASL {
			c.refuseHeader(headerSASL)
			return errors.New("amqp: client skipped SASL")
		}
	default:
		if c.opts.AllowNoSASL {
			c.refuseHeader(headerAMQP)
		} else {
			c.refuseHeader(headerSASL)
		}
		return fmt.Errorf("amqp: unsupported protocol header %q", hdr[:])
	}
	if _, err := c.nc.Write(headerAMQP[:]); err != nil {
		return fmt.Errorf("amqp: write protocol header: %w", err)
	}
	return nil
}

// readOpen reads the peer's first frame, which must be an acceptable open; otherwise it
// refuses the connection (refuseOpen) and returns the refusal.
func (c *Conn) readOpen() (*Open, error) {
	typ, _, body, err := c.readFrame(preOpenMaxFrame)
	if err != nil {
		return nil, fmt.Errorf("amqp: read open: %w", err)
	}
	var open *Open
	if typ == FrameTypeAMQP && len(body) > 0 {
		d := newDecoder(body)
		p, derr := decodePerformative(&d, true, nil)
		if derr == nil && d.off != len(body) {
			derr = d.errorf("bytes after open")
		}
		open, _ = p.(*Open)
		if derr != nil {
			err = derr
		}
	}
	switch {
	case err != nil:
		return nil, c.refuseOpen(protocolError(err))
	case open == nil:
		return nil, c.refuseOpen(Errorf(ErrCondIllegalState, "the first frame must be open"))
	case open.MaxFrameSize < minMaxFrameSize:
		return nil, c.refuseOpen(Errorf(ErrCondInvalidField, "max-frame-size %d is below 512",
			open.MaxFrameSize))
	}
	return open, nil
}

// refuseOpen answers the peer's open with an open and a close carrying e, and returns e.
func (c *Conn) refuseOpen(e *Error) error {
	c.handshakeClose(e)
	return e
}

func (c *Conn) localOpen() *Open {
	o := &Open{
		ContainerID:  c.opts.ContainerID,
		MaxFrameSize: c.opts.MaxFrameSize,
		ChannelMax:   c.opts.ChannelMax,
		Properties:   c.opts.Properties,
	}
	if c.opts.IdleTimeout > 0 {
		o.IdleTimeout = c.opts.IdleTimeout / 2
	}
	return o
}

// handshakeClose answers an open the server refuses: its own open, then close with e, as
// the specification requires; then it waits briefly for the peer's close.
func (c *Conn) handshakeClose(e *Error) {
	b, _ := AppendFrame(nil, FrameTypeAMQP, 0, c.localOpen())
	b, _ = AppendFrame(b, FrameTypeAMQP, 0, &Close{Error: e})
	_ = c.nc.SetDeadline(time.Now().Add(c.opts.CloseTimeout))
	if _, err := c.nc.Write(b); err != nil {
		return
	}
	c.lingerForClose()
}

// refuseHeader answers a protocol header the server will not speak with the one it would,
// as the specification says, before the connection is closed.
func (c *Conn) refuseHeader(h [8]byte) {
	if _, err := c.nc.Write(h[:]); err == nil {
		c.lingerFor(min(c.opts.CloseTimeout, time.Second))
	}
}

// lingerForClose is for a close sent on a stream the server cannot parse further.
func (c *Conn) lingerForClose() { c.lingerFor(c.opts.CloseTimeout) }

// lingerFor half-closes the socket, so the peer sees its end after the last bytes we sent,
// then reads and discards until the peer closes too (or d passes): closing a socket with
// unread input resets it, which can lose what we sent last.
func (c *Conn) lingerFor(d time.Duration) {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.br, 1<<20))
}

func (c *Conn) readHeader() ([8]byte, error) {
	var h [8]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return h, fmt.Errorf("amqp: read protocol header: %w", err)
	}
	return h, nil
}

// saslMechanisms are the mechanisms the server offers, in its order of preference. MSSBCBS is
// Service Bus's name for "anonymous now, claims-based security (a token put on $cbs) later": the
// .NET client (Microsoft.Azure.Amqp) and uAMQP ask for it and close the connection when it is not
// offered, and the service offers it first. The engine treats it as ANONYMOUS.
var saslMechanisms = []Symbol{"MSSBCBS", "ANONYMOUS", "PLAIN"}

// sasl runs the SASL exchange after the client's SASL header.
func (c *Conn) sasl() error {
	b := append([]byte(nil), headerSASL[:]...)
	b, _ = AppendFrame(b, FrameTypeSASL, 0, &SASLMechanisms{Mechanisms: saslMechanisms})
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("amqp: write sasl-mechanisms: %w", err)
	}
	typ, _, body, err := c.readFrame(preOpenMaxFrame)
	if err != nil {
		return fmt.Errorf("amqp: read sasl-init: %w", err)
	}
	var init *SASLInit
	if typ == FrameTypeSASL {
		d := newDecoder(body)
		p, derr := decodePerformative(&d, false, nil)
		if derr == nil {
			init, _ = p.(*SASLInit)
		}
	}
	outcome := func(code SASLCode) error {
		b, _ := AppendFrame(nil, FrameTypeSASL, 0, &SASLOutcome{Code: code})
		_, err := c.nc.Write(b)
		return err
	}
	if init == nil {
		_ = outcome(SASLSysPerm)
		return errors.New("amqp: expected sasl-init")
	}
	cred := SASLCredentials{Mechanism: string(init.Mechanism), Hostname: init.Hostname}
	switch init.Mechanism {
	case "ANONYMOUS", "MSSBCBS":
		cred.Identity = string(init.InitialResponse)
	case "PLAIN":
		parts := bytes.SplitN(init.InitialResponse, []byte{0}, 3)
		if len(parts) != 3 {
			_ = outcome(SASLAuth)
			return errors.New("amqp: malformed SASL PLAIN response")
		}
		cred.AuthzID, cred.Identity, cred.Password = string(parts[0]), string(parts[1]), string(parts[2])
	default:
		_ = outcome(SASLAuth)
		return fmt.Errorf("amqp: unsupported SASL mechanism %q", init.Mechanism)
	}
	principal := any(cred.Identity)
	if auth := c.opts.Authenticate; auth != nil {
		p, err := auth(c.ctx, cred)
		if err != nil {
			_ = outcome(SASLAuth)
			c.log.Info("amqp: SASL authentication failed", slog.String("mechanism", cred.Mechanism),
				slog.String("identity", cred.Identity), slog.Any("error", err))
			return fmt.Errorf("amqp: SASL %s authentication: %w", cred.Mechanism, err)
		}
		principal = p
	}
	if err := outcome(SASLOK); err != nil {
		return fmt.Errorf("amqp: write sasl-outcome: %w", err)
	}
	c.principal, c.mechanism, c.saslHostname = principal, cred.Mechanism, init.Hostname
	return nil
}

// readFrame reads one frame into the reader's buffer. body is valid until the next call. The
// buffer grows with the bytes that arrive, not with the size a header announces: a peer that
// announces a large frame and sends nothing more holds no more memory than it sent.
func (c *Conn) readFrame(maxSize uint32) (typ uint8, channel uint16, body []byte, err error) {
	h := &c.scratch.hdr
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return 0, 0, nil, err
	}
	size, doff, err := parseFrameHeader(h[:], maxSize)
	if err != nil {
		return 0, 0, nil, err
	}
	n := int(size) - frameHeaderSize
	buf := c.rbuf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n, max(2*cap(buf), 4096))-len(buf))
		}
		chunk := buf[len(buf):min(n, cap(buf))]
		if _, err := io.ReadFull(c.br, chunk); err != nil {
			c.rbuf = buf[:0]
			return 0, 0, nil, err
		}
		buf = buf[:len(buf)+len(chunk)]
	}
	c.rbuf = buf[:0]
	return h[5], binary.BigEndian.Uint16(h[6:]), buf[doff-frameHeaderSize:], nil
}

// buffered returns the bytes the reader holds that have not been read yet.
func (c *Conn) buffered() []byte {
	b, _ := c.br.Peek(c.br.Buffered())
	return append([]byte(nil), b...)
}

// prefixReader reads prefix, then r: the bytes a small handshake reader had buffered, then the
// socket, for the larger reader an open connection gets.
type prefixReader struct {
	prefix []byte
	r      io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// readLoop reads and handles frames until the connection ends, and returns why: nil for a
// clean close, an *Error sent or received, or an error wrapping ErrConnClosed.
func (c *Conn) readLoop() error {
	for {
		c.mu.Lock()
		deadline := time.Time{}
		if c.opts.IdleTimeout > 0 {
			deadline = time.Now().Add(c.opts.IdleTimeout)
		}
		if c.closing && (deadline.IsZero() || c.closeDeadline.Before(deadline)) {
			deadline = c.closeDeadline
		}
		_ = c.nc.SetReadDeadline(deadline)
		c.mu.Unlock()

		typ, ch, body, err := c.readFrame(c.opts.MaxFrameSize)
		if err != nil {
			return c.readFailed(err)
		}
		c.mu.Lock()
		if c.closing {
			// Waiting for the peer's close; everything else is ignored.
			if typ == FrameTypeAMQP && isClose(body) {
				err := c.closeErr
				c.mu.Unlock()
				return err
			}
			c.mu.Unlock()
			continue
		}
		err = c.handleFrame(typ, ch, body)
		pc, isClose := err.(*peerClose)
		switch {
		case isClose:
			_ = c.sendLocked(0, &Close{})
			c.closing = true
			if pc.err != nil {
				c.closeErr = pc.err
			}
			c.mu.Unlock()
			return c.closeErr
		case err != nil:
			e := protocolError(err)
			c.log.Info("amqp: closing connection on protocol error", slog.String("condition", string(e.Condition)),
				slog.String("description", e.Description))
			c.closeLocked(e)
		}
		if c.br.Buffered() == 0 {
			c.replenishWindowsLocked()
		}
		for len(c.events) > maxPendingEvents && !c.dispatchStop {
			c.evSpace.Wait()
		}
		c.mu.Unlock()
	}
}

// peerClose is handleFrame's report of the peer's close.
type peerClose struct{ err *Error }

func (p *peerClose) Error() string { return "amqp: peer closed the connection" }

func isClose(body []byte) bool {
	d := newDecoder(body)
	code, _, err := d.describedHeader()
	return err == nil && code == descClose
}

// readFailed decides what a read error means.
func (c *Conn) readFailed(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ne net.Error
	var e *Error
	switch {
	case c.closing:
		// We sent close; the peer answered by going away or not at all.
		return c.closeErr
	case errors.As(err, &e):
		// A bad frame header: the stream cannot be parsed further.
		c.log.Info("amqp: closing connection on framing error", slog.String("description", e.Description))
		c.closeLocked(e)
		c.linger = true
		return e
	case errors.As(err, &ne) && ne.Timeout() && c.opts.IdleTimeout > 0:
		e := Errorf(ErrCondResourceLimitExceeded, "no frame received for %s (idle timeout)", c.opts.IdleTimeout)
		c.log.Info("amqp: closing idle connection", slog.Duration("idle_timeout", c.opts.IdleTimeout))
		c.closeLocked(e)
		return e
	}
	c.closing = true
	c.closeErr = fmt.Errorf("%w: %w", ErrConnClosed, err)
	return c.closeErr
}

// handleFrame handles one frame of an open connection. It returns a connection error (the
// connection is then closed with it) or a *peerClose.
func (c *Conn) handleFrame(typ uint8, ch uint16, body []byte) error {
	if typ != FrameTypeAMQP {
		return Errorf(ErrCondFramingError, "frame type %d after the SASL layer", typ)
	}
	if len(body) == 0 {
		return nil // heartbeat
	}
	d := &c.scratch.dec
	*d = newDecoder(body)
	c.frameLen = len(body)
	p, err := decodePerformative(d, true, &c.scratch)
	if err != nil {
		return err
	}
	if t, ok := p.(*Transfer); ok {
		t.Payload = body[d.off:]
	} else if d.off != len(body) {
		return d.errorf("%d bytes after the performative", len(body)-d.off)
	}
	switch p := p.(type) {
	case *Close:
		return &peerClose{err: p.Error}
	case *Open:
		return Errorf(ErrCondIllegalState, "second open")
	case *Begin:
		return c.onBegin(ch, p)
	}
	s := c.sessions[ch]
	if s == nil {
		return Errorf(ErrCondFramingError, "%T on channel %d, which has no session", p, ch)
	}
	return s.handle(p)
}

func (c *Conn) onBegin(ch uint16, b *Begin) error {
	switch {
	case b.RemoteChannel != nil:
		return Errorf(ErrCondNotAllowed, "begin answering a session the server did not begin")
	case ch > c.opts.ChannelMax:
		return Errorf(ErrCondFramingError, "channel %d exceeds channel-max %d", ch, c.opts.ChannelMax)
	case c.sessions[ch] != nil:
		return Errorf(ErrCondNotAllowed, "begin on channel %d, which is in use", ch)
	}
	s := newSession(c, ch, b)
	c.sessions[ch] = s
	return c.sendLocked(ch, &Begin{
		RemoteChannel:  &ch,
		NextOutgoingID: s.nextOutgoingID,
		IncomingWindow: s.incomingWindow,
		OutgoingWindow: outgoingWindow,
		HandleMax:      s.handleMax,
	})
}

// replenishWindowsLocked sends the session flows that reopen incoming windows consumed past
// half. The reader calls it when it has no buffered input, so that a peer that overruns a
// window within one burst is caught.
func (c *Conn) replenishWindowsLocked() {
	for _, s := range c.windowLow {
		s.windowFlagged = false
		if s.state == sessionActive && s.incomingWindow <= c.opts.SessionWindow/2 {
			s.incomingWindow = c.opts.SessionWindow
			s.sendFlowLocked(nil)
		}
	}
	clear(c.windowLow)
	c.windowLow = c.windowLow[:0]
}

// sendLocked queues a frame. Transfers go through Session.pump instead. It fails only when
// the performative cannot be encoded or exceeds the peer's max-frame-size; nothing is
// queued then.
func (c *Conn) sendLocked(ch uint16, p Performative) error {
	if c.closing {
		return ErrConnClosed
	}
	c.flushRunLocked()
	start := len(c.wbuf)
	b, err := AppendFrame(c.wbuf, FrameTypeAMQP, ch, p)
	if err != nil {
		c.wbuf = b[:start]
		return err
	}
	if size := len(b) - start; uint64(size) > uint64(c.peerMaxFrame) {
		c.wbuf = b[:start]
		return fmt.Errorf("%w: %T frame of %d bytes exceeds the peer's max-frame-size %d", ErrEncode, p, size, c.peerMaxFrame)
	}
	c.wbuf = b
	c.wakeWriter()
	return nil
}

func (c *Conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// dispositionRun is a disposition not yet encoded, extended while consecutive deliveries
// settle the same way, so that a burst of settlements goes out as one first..last frame.
type dispositionRun struct {
	active  bool
	ch      uint16
	role    Role
	first   uint32
	last    uint32
	settled bool
	state   DeliveryState
}

func batchable(s DeliveryState) bool {
	switch s.(type) {
	case nil, Accepted, Released:
		return true
	}
	return false
}

// queueDispositionLocked queues a disposition for one delivery.
func (c *Conn) queueDispositionLocked(ch uint16, role Role, id uint32, settled bool, state DeliveryState) error {
	if c.closing {
		return ErrConnClosed
	}
	r := &c.run
	if r.active && r.ch == ch && r.role == role && r.settled == settled && r.last+1 == id && batchable(state) && r.state == state {
		r.last = id
		return nil
	}
	if batchable(state) {
		c.flushRunLocked()
		*r = dispositionRun{active: true, ch: ch, role: role, first: id, last: id, settled: settled, state: state}
		c.wakeWriter()
		return nil
	}
	return c.sendLocked(ch, &Disposition{Role: role, First: id, Settled: settled, State: state})
}

func (c *Conn) flushRunLocked() {
	r := &c.run
	if !r.active {
		return
	}
	r.active = false
	// Encoded from scalars, not through Disposition, so nothing is allocated. Accepted and
	// Released encode infallibly and a disposition is far below 512 bytes.
	b, start := frameStart(c.wbuf, FrameTypeAMQP, r.ch)
	w := beginFields(b, descDisposition)
	w.bool(bool(r.role))
	w.uint(r.first)
	if r.last != r.first {
		w.uint(r.last)
	} else {
		w.null()
	}
	w.boolOpt(r.settled)
	switch r.state.(type) {
	case Accepted:
		w.b, _ = Accepted{}.appendAMQP(w.b)
		w.present()
	case Released:
		w.b, _ = Released{}.appendAMQP(w.b)
		w.present()
	default:
		w.null()
	}
	b, _ = w.finish()
	c.wbuf = frameEnd(b, start)
}

// writeLoop writes what the connection queued, in batches, and sends heartbeats so that the
// gap between two frames stays under half the peer's idle timeout.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	var tick <-chan time.Time
	var period time.Duration
	if c.peerIdle > 0 {
		period = c.peerIdle / 5
		t := time.NewTicker(period)
		defer t.Stop()
		tick = t.C
	}
	lastWrite := time.Now()
	var out []byte
	for {
		heartbeat := false
		select {
		case <-c.wake:
		case now := <-tick:
			if now.Sub(lastWrite) < period {
				continue
			}
			heartbeat = true
		}
		c.mu.Lock()
		c.flushRunLocked()
		out, c.wbuf = c.wbuf, out[:0]
		stop := c.writerStop
		c.mu.Unlock()
		if len(out) == 0 && heartbeat {
			out = append(out, emptyFrame...)
		}
		if len(out) > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
			if _, err := c.nc.Write(out); err != nil {
				c.mu.Lock()
				c.writerFailed = true
				c.mu.Unlock()
				c.log.Debug("amqp: write failed", slog.Any("error", err))
				_ = c.nc.Close() // the reader fails and tears down
				return
			}
			lastWrite = time.Now()
			if cap(out) > 4*c.opts.WriteBufferLimit {
				out = nil // do not keep a buffer grown by one huge message
			}
		}
		c.mu.Lock()
		if c.waiters > 0 {
			close(c.writable)
			c.writable = make(chan struct{})
		}
		more := len(c.wbuf) > 0 || c.run.active
		c.mu.Unlock()
		if stop && !more {
			return
		}
		if more {
			c.wakeWriter()
		}
	}
}

// waitWritableLocked waits until the connection's unwritten bytes are under the limit. It
// releases c.mu while waiting.
func (c *Conn) waitWritableLocked(ctx context.Context) error {
	for len(c.wbuf) > c.opts.WriteBufferLimit && !c.closing && !c.writerFailed {
		ch := c.writable
		c.waiters++
		c.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		case <-c.ctx.Done():
			err = ErrConnClosed
		}
		c.mu.Lock()
		c.waiters--
		if err != nil {
			return err
		}
	}
	return nil
}

// eventKind says which handler method an event calls.
type eventKind uint8

const (
	evAttach eventKind = iota + 1
	evDeliver
	evFlow
	evDisposition
	evReceiverDetached
	evSenderDetached
	evSessionEnded
	evClosed
)

// event is one handler call, queued under c.mu and made by the dispatcher.
type event struct {
	kind    eventKind
	req     *AttachRequest
	rl      *ReceiverLink
	sl      *SenderLink
	d       *Delivery
	od      *OutgoingDelivery
	s       *Session
	state   DeliveryState
	credit  uint32
	drain   bool
	settled bool
	err     error
}

func (c *Conn) emitLocked(ev event) {
	c.events = append(c.events, ev)
	c.evAvail.Signal()
}

// dispatchLoop makes the handler calls of the connection, in order, one at a time.
func (c *Conn) dispatchLoop() {
	defer close(c.dispatchDone)
	var batch []event
	for {
		c.mu.Lock()
		for len(c.events) == 0 && !c.dispatchStop {
			c.evAvail.Wait()
		}
		if len(c.events) == 0 {
			c.mu.Unlock()
			return
		}
		batch, c.events = c.events, batch[:0]
		c.evSpace.Broadcast()
		c.mu.Unlock()
		for i := range batch {
			c.dispatch(&batch[i])
			batch[i] = event{}
		}
	}
}

func (c *Conn) dispatch(ev *event) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("amqp: handler panicked", slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			_ = c.Close(&Error{Condition: ErrCondInternalError})
		}
	}()
	switch ev.kind {
	case evAttach:
		c.h.Attach(ev.req)
	case evDeliver:
		ev.rl.h.Deliver(ev.rl, ev.d)
	case evFlow:
		ev.sl.h.Flow(ev.sl, ev.credit, ev.drain)
	case evDisposition:
		ev.sl.h.Disposition(ev.sl, ev.od, ev.state, ev.settled)
	case evReceiverDetached:
		ev.rl.h.ReceiverDetached(ev.rl, ev.err)
	case evSenderDetached:
		ev.sl.h.SenderDetached(ev.sl, ev.err)
	case evSessionEnded:
		c.h.SessionEnded(ev.s, ev.err)
	case evClosed:
		c.h.Closed(ev.err)
	}
}

// teardown ends everything of the connection after the reader stopped: the handler learns
// of every link and session, then of the connection; the last frames are flushed and the
// socket closed.
func (c *Conn) teardown(reason error) {
	c.mu.Lock()
	c.closing = true
	if reason == nil && c.closeErr != nil {
		reason = c.closeErr
	}
	linkErr := reason
	if linkErr == nil {
		linkErr = ErrConnClosed
	}
	chans := make([]int, 0, len(c.sessions))
	for ch := range c.sessions {
		chans = append(chans, int(ch))
	}
	sort.Ints(chans)
	for _, ch := range chans {
		c.sessions[uint16(ch)].finishLocked(linkErr)
	}
	c.emitLocked(event{kind: evClosed, err: reason})
	c.writerStop = true
	c.wakeWriter()
	c.mu.Unlock()

	c.cancel()
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.CloseTimeout))
	<-c.writerDone
	c.mu.Lock()
	linger := c.linger
	c.mu.Unlock()
	if linger {
		c.lingerForClose()
	}
	_ = c.nc.Close()

	c.mu.Lock()
	c.dispatchStop = true
	c.evAvail.Signal()
	c.mu.Unlock()
	<-c.dispatchDone
}

// SenderLinks returns the attached links on which the server sends.
func (c *Conn) SenderLinks() []*SenderLink {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*SenderLink
	for _, s := range c.sessions {
		for _, e := range s.links {
			if l, ok := e.(*SenderLink); ok && l.state == linkAttached {
				out = append(out, l)
			}
		}
	}
	return out
}

// ReceiverLinks returns the attached links on which the server receives.
func (c *Conn) ReceiverLinks() []*ReceiverLink {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*ReceiverLink
	for _, s := range c.sessions {
		for _, e := range s.links {
			if l, ok := e.(*ReceiverLink); ok && l.state == linkAttached {
				out = append(out, l)
			}
		}
	}
	return out
}

// ReplyLink finds the link the reply to a request that arrived on the link from goes on, for
// request/response nodes such as $cbs and $management. With a reply-to address it is the
// attached link on which the server sends whose target address is replyTo, else the one whose
// name is replyTo (the Node SDK's $cbs reply link has no address). Without one (uAMQP and the
// pure-Python client send none) it is the link on which the server sends in from's session whose
// source is the node from's target names — the client's receiving half of the pair — preferring
// one whose target names the node too (both Python clients attach source = target = node). It
// returns nil when there is none. Clients grant the reply link's credit only after its attach
// completes, so a request may arrive before the reply can be sent: a reply that meets
// ErrNoCredit waits for the link's SenderHandler.Flow.
func (c *Conn) ReplyLink(replyTo string, from *ReceiverLink) *SenderLink {
	c.mu.Lock()
	defer c.mu.Unlock()
	if replyTo == "" {
		if from == nil {
			return nil
		}
		node := from.targetAddress()
		var bySource *SenderLink
		for _, e := range from.sess.links {
			l, ok := e.(*SenderLink)
			if !ok || l.state != linkAttached || !strings.EqualFold(l.sourceAddress(), node) {
				continue
			}
			if strings.EqualFold(l.targetAddress(), node) {
				return l
			}
			if bySource == nil || l.handle < bySource.handle {
				bySource = l
			}
		}
		return bySource
	}
	var byName *SenderLink
	for _, s := range c.sessions {
		for _, e := range s.links {
			l, ok := e.(*SenderLink)
			if !ok || l.state != linkAttached {
				continue
			}
			if t := l.peerAttach.Target; t != nil && t.Address == replyTo {
				return l
			}
			if byName == nil && l.name == replyTo {
				byName = l
			}
		}
	}
	return byName
}

// SenderLinkByName returns the attached link named name on which the server sends, or nil.
func (c *Conn) SenderLinkByName(name string) *SenderLink {
	for _, l := range c.SenderLinks() {
		if l.name == name {
			return l
		}
	}
	return nil
}

// ReceiverLinkByName returns the attached link named name on which the server receives, or
// nil.
func (c *Conn) ReceiverLinkByName(name string) *ReceiverLink {
	for _, l := range c.ReceiverLinks() {
		if l.name == name {
			return l
		}
	}
	return nil
}
