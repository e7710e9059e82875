// Package amqpws serves AMQP 1.0 over WebSockets, the transport every Service Bus SDK can use
// instead of TCP (for networks that only let HTTPS out): the client upgrades an HTTP request for
// /$servicebus/websocket to a WebSocket with the subprotocol AMQPWSB10 (JavaScript, Java,
// Python) or amqp (.NET), then carries the AMQP byte stream in binary WebSocket messages. A
// Handler accepts the upgrade and hands the tunnel, as a net.Conn, to the AMQP server that serves
// the TCP listeners (amqp.Server.ServeConn), so SASL, CBS, limits and timeouts are the same.
//
// The message stream is a byte stream: an AMQP frame may span messages and a message may hold
// several frames, as the AMQP WebSocket binding allows. Each write of the AMQP server is one
// binary message. What is not a binary message ends the tunnel: a text message (closed with
// 1003, unsupported data), a message over Options.MaxMessageSize (1009, message too big), or the
// client closing mid-frame (the AMQP server sees the stream end).
//
// It uses github.com/coder/websocket: a maintained RFC 6455 implementation whose NetConn turns a
// WebSocket into a net.Conn over a binary message stream, with deadlines, backpressure (a write
// returns only when the socket took it) and the close handshake done right — the part of
// tunnelling that is easy to get subtly wrong by hand. gorilla/websocket would have needed that
// adapter written here.
package amqpws

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The subprotocols the SDKs ask for: AMQPWSB10 is the OASIS AMQP WebSocket binding's name,
// which the JavaScript, Java and Python SDKs send; .NET (Microsoft.Azure.Amqp) sends amqp.
const (
	SubprotocolAMQPWSB10 = "AMQPWSB10"
	SubprotocolAMQP      = "amqp"
)

// Path is where the SDKs open the tunnel; .NET adds a trailing slash.
const Path = "/$servicebus/websocket"

// Defaults of Options.
const (
	DefaultMaxMessageSize = 128 << 20
	DefaultPingInterval   = 30 * time.Second
)

// ErrClosed is the refusal of an upgrade after Close.
var ErrClosed = errors.New("amqpws: closed")

// ConnServer serves one AMQP connection; *amqp.Server is one. ServeConn returns when the
// connection has ended, having closed nc.
type ConnServer interface {
	ServeConn(ctx context.Context, nc net.Conn) error
}

// Options configures a Handler. Zero fields take the defaults noted.
type Options struct {
	// Logger receives a debug line per tunnel; nil discards.
	Logger *slog.Logger
	// MaxMessageSize bounds one WebSocket message from the client: a message over it closes the
	// tunnel with 1009. Messages are streamed to the AMQP server as they arrive, never held
	// whole, so this is no memory bound (the AMQP server's frame and message limits are); it
	// only ends a client that never finishes a message. Default DefaultMaxMessageSize, which no
	// client write carrying AMQP frames within the server's limits reaches.
	MaxMessageSize int64
	// PingInterval is how often the server pings an open tunnel, so that proxies and load
	// balancers between the client and sbgate, which close WebSockets idle for a minute or
	// more, see traffic when AMQP has none (a client that announced no idle time-out gets no
	// AMQP heartbeats). A missing pong does not close the tunnel: while the AMQP server is not
	// reading (backpressure) pongs wait unread, and a vanished peer is found by the AMQP idle
	// time-out and write time-out. Default DefaultPingInterval; negative disables.
	PingInterval time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	return o
}

// Handler accepts WebSocket upgrades and serves each tunnel with a ConnServer.
type Handler struct {
	srv  ConnServer
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	closed  bool
	tunnels map[*tunnel]struct{}
	wg      sync.WaitGroup
}

// New returns a Handler that serves each tunnel with srv.
func New(srv ConnServer, opts Options) *Handler {
	opts = opts.withDefaults()
	return &Handler{srv: srv, opts: opts, log: opts.Logger, tunnels: map[*tunnel]struct{}{}}
}

// RefusedError is why Serve refused a request, before writing anything but headers.
type RefusedError struct {
	// Status is the HTTP status the refusal deserves: 400 for a request that is no acceptable
	// WebSocket upgrade, 503 after Close.
	Status int
	// Message says what was wrong and what the client must send, for the response body.
	Message string
	// Err is ErrClosed after Close, else nil.
	Err error
}

func (e *RefusedError) Error() string { return e.Message }

func (e *RefusedError) Unwrap() error { return e.Err }

// ServeHTTP is Serve with refusals answered in plain text.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ref *RefusedError
	if err := h.Serve(w, r); errors.As(err, &ref) {
		http.Error(w, ref.Message, ref.Status)
	}
}

// Serve upgrades r to a WebSocket and serves the AMQP connection it carries until it ends. It
// returns a *RefusedError, having written nothing but response headers, when r is no WebSocket
// upgrade the SDKs send (HTTP/1.1 GET, Upgrade: websocket, version 13, a key, and the
// subprotocol AMQPWSB10 or amqp), or after Close; the caller answers it in its own format. It
// returns nil once an accepted tunnel has ended (it logs why at debug level).
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request) error {
	proto, ref := check(w, r)
	if ref != nil {
		return ref
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	t := &tunnel{cancel: cancel, done: make(chan struct{})}
	if !h.add(t) {
		return &RefusedError{Status: http.StatusServiceUnavailable, Message: "The server is shutting down.", Err: ErrClosed}
	}
	defer h.remove(t)

	ws, err := websocket.Accept(&hijackWriter{ResponseWriter: w}, r, &websocket.AcceptOptions{
		Subprotocols: []string{proto},
		// The tunnel carries no ambient credential (no cookie, no HTTP authentication: the
		// client authorizes each link in-band with CBS tokens), so a page of any origin may
		// open one, as it may against Service Bus; a cross-site request gains nothing.
		InsecureSkipVerify: true,
		// AMQP payloads are mostly small and often already compressed; per-message deflate
		// would cost every tunnel a compressor's memory for little.
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		// Accept answered already: the checks above leave it only a failed hijack (a
		// ResponseWriter that cannot, as over HTTP/2 — which check refuses — or a broken
		// connection).
		h.log.DebugContext(ctx, "amqpws: upgrade failed", slog.Any("err", err))
		return nil
	}
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	ws.SetReadLimit(h.opts.MaxMessageSize) // after NetConn, which lifts the limit
	t.Conn = nc
	t.ws = ws

	pinging := make(chan struct{})
	go func() {
		defer close(pinging)
		h.ping(ctx, t)
	}()
	log := h.log.With(slog.String("remote", r.RemoteAddr), slog.String("subprotocol", proto))
	log.DebugContext(ctx, "amqpws: tunnel open")
	err = h.srv.ServeConn(ctx, t)
	_ = t.Close()
	<-t.done
	cancel()
	<-pinging
	log.DebugContext(ctx, "amqpws: tunnel closed", slog.Any("reason", err))
	return nil
}

// check finds the subprotocol of an upgrade request, or why it is refused. It checks what
// websocket.Accept would otherwise answer in plain text itself.
func check(w http.ResponseWriter, r *http.Request) (string, *RefusedError) {
	const want = "This endpoint carries AMQP 1.0 over WebSockets: open it with an HTTP/1.1 GET " +
		"WebSocket upgrade (Connection: Upgrade, Upgrade: websocket, Sec-WebSocket-Version: 13) " +
		"offering the subprotocol AMQPWSB10 or amqp."
	refuse := func(what string) (string, *RefusedError) {
		return "", &RefusedError{Status: http.StatusBadRequest, Message: what + " " + want}
	}
	switch {
	case r.ProtoMajor != 1 || r.ProtoMinor < 1:
		return refuse(fmt.Sprintf("The request is %s.", r.Proto))
	case r.Method != http.MethodGet:
		return refuse(fmt.Sprintf("The request's method is %s.", r.Method))
	case !hasToken(r.Header, "Connection", "upgrade") || !hasToken(r.Header, "Upgrade", "websocket"):
		return refuse("The request is no WebSocket upgrade.")
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		w.Header().Set("Sec-WebSocket-Version", "13")
		return refuse(fmt.Sprintf("The WebSocket version %q is not supported.", r.Header.Get("Sec-WebSocket-Version")))
	case len(r.Header.Values("Sec-WebSocket-Key")) != 1:
		return refuse("The request needs exactly one Sec-WebSocket-Key.")
	}
	if key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(r.Header.Get("Sec-WebSocket-Key"))); err != nil || len(key) != 16 {
		return refuse("The Sec-WebSocket-Key is not 16 bytes in base64.")
	}
	offered := tokens(r.Header, "Sec-WebSocket-Protocol")
	// The client's order is its preference; both name the same binding.
	for _, p := range offered {
		if p == SubprotocolAMQPWSB10 || p == SubprotocolAMQP {
			return p, nil
		}
	}
	if len(offered) == 0 {
		return refuse("The request offers no subprotocol.")
	}
	return refuse(fmt.Sprintf("The request offers the subprotocols %q, none of them AMQP.", strings.Join(offered, ", ")))
}

// tokens are the comma-separated values of a header, in order.
func tokens(h http.Header, name string) []string {
	var out []string
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

func hasToken(h http.Header, name, token string) bool {
	for _, t := range tokens(h, name) {
		if strings.EqualFold(t, token) {
			return true
		}
	}
	return false
}

// ping pings t every PingInterval until ctx ends.
func (h *Handler) ping(ctx context.Context, t *tunnel) {
	if h.opts.PingInterval < 0 {
		return
	}
	tick := time.NewTicker(h.opts.PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A ping whose write cannot start within the interval (the AMQP server's own write is
		// stuck on a peer that does not read) is given up without harm; one whose write starts
		// but does not finish in time closes the connection, which the AMQP server's write
		// time-out would soon do too.
		pctx, cancel := context.WithTimeout(ctx, h.opts.PingInterval)
		err := t.ws.Ping(pctx)
		cancel()
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// add registers t, unless the Handler is closed.
func (h *Handler) add(t *tunnel) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.tunnels[t] = struct{}{}
	h.wg.Add(1)
	return true
}

func (h *Handler) remove(t *tunnel) {
	h.mu.Lock()
	delete(h.tunnels, t)
	h.mu.Unlock()
	h.wg.Done()
}

// open is the number of tunnels being served (for tests).
func (h *Handler) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.tunnels)
}

// Close refuses new upgrades, ends every open tunnel at once (its socket closed, the AMQP
// connection ending as on a vanished peer) and waits for them. Shut the AMQP server down first
// for AMQP close handshakes (amqp.Server.Shutdown closes tunnelled connections like the
// others). It returns nil.
func (h *Handler) Close() error {
	h.mu.Lock()
	h.closed = true
	for t := range h.tunnels {
		t.cancel()
	}
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}

// tunnel is one accepted WebSocket as the net.Conn the AMQP server serves.
type tunnel struct {
	net.Conn // websocket.NetConn; nil until accepted
	ws       *websocket.Conn
	cancel   context.CancelFunc

	closeOnce sync.Once
	done      chan struct{} // closed when the WebSocket is
}

// Close starts the WebSocket close handshake and returns at once. The handshake waits for the
// client's close frame (up to 5 s, then the socket is closed anyway); the AMQP server calls Close
// while it holds its connection table, so Close must not wait. A read or write under way fails
// at once. Serve waits for the handshake before it returns.
func (t *tunnel) Close() error {
	t.closeOnce.Do(func() {
		go func() {
			defer close(t.done)
			_ = t.Conn.Close()
		}()
	})
	return nil
}

// hijackWriter clears the deadlines of the hijacked connection: the HTTP server and handlers may
// have armed them for the upgrade request (its header read, its answer's write), and a tunnel
// lives far longer. The AMQP server arms its own on the tunnel.
type hijackWriter struct{ http.ResponseWriter }

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		_ = nc.SetDeadline(time.Time{})
	}
	return nc, brw, err
}

func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
