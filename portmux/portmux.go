// Package portmux serves AMQP, AMQP over TLS, HTTP and HTTPS on one listener, telling them apart
// by what the client sends first.
//
// Service Bus clients derive every endpoint from one host:port: the Go SDK's data client dials
// amqps://host:port (plain amqp:// with UseDevelopmentEmulator) and its administration client
// https://host:port/, and Dapr and others do the same. A Mux accepts on one listener and reads the
// first bytes of each connection under a deadline:
//
//   - a TLS record header of a handshake (0x16 0x03): the Mux completes the TLS handshake. When the
//     client and the server's configuration agreed on an HTTP protocol by ALPN ("h2",
//     "http/1.1") the *tls.Conn goes to the HTTP listener as it is, so net/http serves HTTP/2 and
//     fills Request.TLS itself. Otherwise the Mux reads the first decrypted bytes and decides
//     again, as below, on the decrypted stream;
//   - the AMQP protocol header "AMQP" (0x41 0x4d 0x51 0x50, the same for the AMQP and SASL
//     headers): the connection goes to Options.AMQP;
//   - anything else: the connection goes to the listener HTTPListener returns, for an
//     http.Server.
//
// The bytes read to decide are replayed, exactly and first, to whichever server gets the
// connection. A client that sends too little before Options.SniffTimeout (slowly or not at all)
// is closed: the deadline is fixed when the connection is accepted, so trickling bytes does not
// extend it.
package portmux

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// ErrClosed is returned by Serve after Close, and by the HTTP listener's Accept once the Mux or
// that listener is closed. It is net.ErrClosed, so net/http treats it as the end of a listener.
var ErrClosed = net.ErrClosed

// ConnServer serves one accepted connection until it closes. *amqp.Server is one.
type ConnServer interface {
	ServeConn(ctx context.Context, c net.Conn) error
}

// Options configures a Mux. Zero fields take the defaults noted.
type Options struct {
	// TLS is the configuration for clients that start a TLS handshake; nil refuses them (the
	// connection is closed). Offer "h2" and "http/1.1" in NextProtos for HTTP/2 over TLS.
	TLS *tls.Config
	// AMQP serves connections that start with the AMQP protocol header, in or out of TLS;
	// nil closes them.
	AMQP ConnServer
	// SniffTimeout bounds everything before a connection is handed over: the TLS handshake
	// and the first bytes; default 10 seconds.
	SniffTimeout time.Duration
	// Logger receives why connections were closed before being handed over; nil discards.
	Logger *slog.Logger
}

// Mux accepts connections on one listener and hands each to the server of its protocol.
type Mux struct {
	ln   net.Listener
	opts Options
	log  *slog.Logger
	http *httpListener

	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	closed  bool
	done    chan struct{} // closed by Close
	wg      sync.WaitGroup
	serving bool
}

// New returns a Mux that will accept on ln once Serve is called.
func New(ln net.Listener, opts Options) *Mux {
	if opts.SniffTimeout <= 0 {
		opts.SniffTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Mux{
		ln:    ln,
		opts:  opts,
		log:   opts.Logger,
		conns: make(map[*trackedConn]struct{}),
		done:  make(chan struct{}),
	}
	m.http = &httpListener{m: m, ch: make(chan net.Conn), done: make(chan struct{})}
	return m
}

// Addr is the address of the listener.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// HTTPListener returns the listener that yields the connections for HTTP, for
// http.Server.Serve. Closing it refuses later HTTP connections (they are closed) and leaves the
// Mux serving AMQP. A connection it yields that was sniffed inside TLS is not a *tls.Conn; see
// ConfigureServer.
func (m *Mux) HTTPListener() net.Listener { return m.http }

// Serve accepts connections until ctx is done, Close is called or the listener fails, and serves
// each on its own goroutine; ctx is the parent of the context given to Options.AMQP. When ctx is
// done the Mux closes as Close does. Serve returns ErrClosed after Close, ctx's error when ctx
// is done, or the listener's error (after which the Mux is closed too).
func (m *Mux) Serve(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	if m.serving {
		m.mu.Unlock()
		return errors.New("portmux: Serve called twice")
	}
	m.serving = true
	m.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = m.Close() })
	defer stop()

	var backoff time.Duration
	for {
		nc, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return ErrClosed
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Transient (for example out of file descriptors): retry, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				m.log.WarnContext(ctx, "portmux: accept failed, retrying", slog.Any("error", err), slog.Duration("backoff", backoff))
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-m.done:
					t.Stop()
				}
				continue
			}
			_ = m.Close()
			return fmt.Errorf("portmux: accept: %w", err)
		}
		backoff = 0
		c, ok := m.track(nc)
		if !ok {
			continue
		}
		go func() {
			defer m.wg.Done()
			m.dispatch(ctx, c)
		}()
	}
}

// Close closes the listener, the HTTP listener and every connection the Mux accepted, also
// those already handed over, and waits for the goroutines of the Mux (sniffs and
// Options.AMQP.ServeConn calls) to return. It returns the listener's Close error, if any.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return nil
	}
	m.closed = true
	close(m.done)
	err := m.ln.Close()
	conns := make([]*trackedConn, 0, len(m.conns))
	for c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	m.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// track registers an accepted connection (and one goroutine for it), or closes it when the Mux
// is closed.
func (m *Mux) track(nc net.Conn) (*trackedConn, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		_ = nc.Close()
		return nil, false
	}
	c := &trackedConn{Conn: nc, m: m}
	m.conns[c] = struct{}{}
	m.wg.Add(1)
	return c, true
}

func (m *Mux) untrack(c *trackedConn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
}

// protocol is what a connection's first bytes say it speaks.
type protocol int

const (
	protoHTTP protocol = iota
	protoAMQP
	protoTLS
)

func (p protocol) String() string {
	switch p {
	case protoAMQP:
		return "amqp"
	case protoTLS:
		return "tls"
	default:
		return "http"
	}
}

// amqpHeader starts both the AMQP and the SASL protocol headers.
const amqpHeader = "AMQP"

// classify decides on the bytes read so far: ok is false while more are needed.
func classify(b []byte, tlsAllowed bool) (p protocol, ok bool) {
	if len(b) == 0 {
		return 0, false
	}
	if tlsAllowed && b[0] == 0x16 {
		// A TLS record of type handshake; its version's major byte is 3 for every SSL 3.0
		// and TLS version.
		if len(b) < 2 {
			return 0, false
		}
		if b[1] == 0x03 {
			return protoTLS, true
		}
		return protoHTTP, true
	}
	n := min(len(b), len(amqpHeader))
	if string(b[:n]) != amqpHeader[:n] {
		return protoHTTP, true
	}
	if n < len(amqpHeader) {
		return 0, false
	}
	return protoAMQP, true
}

// sniff reads from r until classify decides, never more than the four bytes of "AMQP", so the
// bytes it returns are all a server must be replayed.
func sniff(r io.Reader, tlsAllowed bool) (protocol, []byte, error) {
	buf := make([]byte, len(amqpHeader))
	n := 0
	for {
		k, err := r.Read(buf[n:])
		n += k
		if p, ok := classify(buf[:n], tlsAllowed); ok {
			return p, buf[:n], nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, buf[:n], err
		}
	}
}

// dispatch sniffs c and hands it to its server; it returns once c is handed to HTTP, after
// Options.AMQP has served it, or when c is closed.
func (m *Mux) dispatch(ctx context.Context, c *trackedConn) {
	remote := slog.String("remote", c.RemoteAddr().String())
	deadline := time.Now().Add(m.opts.SniffTimeout)
	if err := c.SetDeadline(deadline); err != nil {
		_ = c.Close()
		return
	}
	p, prefix, err := sniff(c, m.opts.TLS != nil)
	if err != nil {
		m.log.DebugContext(ctx, "portmux: closed before its protocol was known", remote, slog.Any("error", err))
		_ = c.Close()
		return
	}
	var conn net.Conn = &replayConn{Conn: c, prefix: prefix}
	if p == protoTLS {
		tc := tls.Server(conn, m.opts.TLS)
		hctx, cancel := context.WithDeadline(ctx, deadline)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			m.log.DebugContext(ctx, "portmux: TLS handshake failed", remote, slog.Any("error", err))
			_ = c.Close()
			return
		}
		switch tc.ConnectionState().NegotiatedProtocol {
		case "h2", "http/1.1":
			// The client said by ALPN that it speaks HTTP: net/http gets the *tls.Conn.
			_ = c.SetDeadline(time.Time{})
			m.handHTTP(ctx, tc)
			return
		}
		p, prefix, err = sniff(tc, false)
		if err != nil {
			m.log.DebugContext(ctx, "portmux: closed inside TLS before its protocol was known", remote, slog.Any("error", err))
			_ = c.Close()
			return
		}
		conn = &tlsReplayConn{replayConn: replayConn{Conn: tc, prefix: prefix}, tc: tc}
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		_ = c.Close()
		return
	}
	switch p {
	case protoAMQP:
		if m.opts.AMQP == nil {
			m.log.DebugContext(ctx, "portmux: AMQP is not served here", remote)
			_ = c.Close()
			return
		}
		if err := m.opts.AMQP.ServeConn(ctx, conn); err != nil {
			m.log.DebugContext(ctx, "portmux: AMQP connection ended", remote, slog.Any("error", err))
		}
		// The server closes what it serves; this covers one that returned early.
		_ = conn.Close()
	default:
		m.handHTTP(ctx, conn)
	}
}

// handHTTP waits for the HTTP listener to accept conn, or closes it when the Mux or that
// listener closes first.
func (m *Mux) handHTTP(ctx context.Context, conn net.Conn) {
	select {
	case m.http.ch <- conn:
	case <-m.http.done:
		m.log.DebugContext(ctx, "portmux: HTTP is not served here", slog.String("remote", conn.RemoteAddr().String()))
		_ = conn.Close()
	case <-m.done:
		_ = conn.Close()
	}
}

// httpListener yields the connections sniffed as HTTP.
type httpListener struct {
	m       *Mux
	ch      chan net.Conn
	done    chan struct{}
	closeMu sync.Once
}

func (l *httpListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, ErrClosed
	case <-l.m.done:
		return nil, ErrClosed
	}
}

func (l *httpListener) Close() error {
	l.closeMu.Do(func() { close(l.done) })
	return nil
}

func (l *httpListener) Addr() net.Addr { return l.m.ln.Addr() }

// trackedConn is an accepted connection the Mux closes when it closes.
type trackedConn struct {
	net.Conn
	m    *Mux
	once sync.Once
	err  error
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.m.untrack(c)
		c.err = c.Conn.Close()
	})
	return c.err
}

// replayConn reads prefix before the connection's own bytes.
type replayConn struct {
	net.Conn
	prefix []byte
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// tlsReplayConn is a connection sniffed inside TLS: it replays the decrypted bytes read and
// tells its TLS state (see ConfigureServer).
type tlsReplayConn struct {
	replayConn
	tc *tls.Conn
}

// ConnectionState is the state of the connection's TLS session.
func (c *tlsReplayConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// NetConn is the TLS connection the bytes are read from.
func (c *tlsReplayConn) NetConn() net.Conn { return c.tc }
