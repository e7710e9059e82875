package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Server. Zero fields take the defaults noted.
type Options struct {
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// ContainerID is the container id the server's open announces; default a random one.
	ContainerID string
	// Properties are the properties of the server's open.
	Properties Map
	// Authenticate decides SASL exchanges (MSSBCBS, ANONYMOUS and PLAIN are offered); nil accepts
	// every exchange, with the identity as principal.
	Authenticate Authenticator
	// AllowNoSASL accepts a client that skips SASL and opens AMQP directly (its principal
	// is nil). By default such a client gets the SASL protocol header back and is
	// disconnected, as the specification says.
	AllowNoSASL bool
	// MaxFrameSize is the largest frame the server accepts (its open's max-frame-size);
	// default 64 KiB — what Service Bus announces, and what uAMQP (which refuses a frame over its
	// own 64 KiB whatever the peer announced) and .NET expect —, at least 512. The server's own
	// frames are split by the peer's max-frame-size.
	MaxFrameSize uint32
	// ChannelMax is the highest session channel the server accepts; default 1023.
	ChannelMax uint16
	// HandleMax is the highest link handle per session the server accepts; default 255.
	HandleMax uint32
	// MaxLinks bounds the links of one connection, all sessions together (attached,
	// awaiting the handler's answer, or detaching); an attach beyond it is refused with
	// amqp:resource-limit-exceeded without reaching the handler. Default 1024.
	MaxLinks int
	// IdleTimeout closes a connection on which nothing arrives for this long, with
	// amqp:resource-limit-exceeded. The open announces half of it, as the specification
	// advises. Default 2 minutes; negative disables it.
	IdleTimeout time.Duration
	// SessionWindow is each session's incoming window, in transfer frames; default 5000.
	SessionWindow uint32
	// Credit is the default credit window of links on which the server receives; default
	// 100. ReceiverOptions.Credit overrides it per link.
	Credit uint32
	// MaxMessageSize is the default max-message-size of links on which the server
	// receives, advertised and enforced; default 64 MiB. ReceiverOptions.MaxMessageSize
	// overrides it per link. A link holds at most its credit window of deliveries the
	// handler has not settled, plus one being reassembled, so this and Credit bound what a
	// peer can make the server hold per link.
	MaxMessageSize uint64
	// HandshakeTimeout bounds the protocol headers, SASL and open; default 10 seconds.
	HandshakeTimeout time.Duration
	// MaxConnections bounds the connections served at once. At the limit a new connection takes
	// the place of the oldest one still in its handshake, or, when every one is open, is closed
	// at once. Default 10,000.
	MaxConnections int
	// MaxHandshakes bounds the connections that have not completed their handshake (protocol
	// headers, SASL, open): when a new one would exceed it, the oldest of them is closed, so
	// sockets that never authenticate cannot keep a real client out. Default 4,096.
	MaxHandshakes int
	// CloseTimeout bounds the wait for the peer's close after the server sent one, and
	// the flushing of the last frames; default 5 seconds.
	CloseTimeout time.Duration
	// WriteTimeout closes a connection whose peer does not take a write within it;
	// default 1 minute.
	WriteTimeout time.Duration
	// WriteBufferLimit is the number of bytes a connection may hold unwritten before
	// SenderLink.Send waits; default 4 MiB.
	WriteBufferLimit int
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ContainerID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		o.ContainerID = "sbgate-" + hex.EncodeToString(b[:])
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = 64 << 10
	}
	o.MaxFrameSize = max(o.MaxFrameSize, minMaxFrameSize)
	if o.ChannelMax == 0 {
		o.ChannelMax = 1023
	}
	if o.HandleMax == 0 {
		o.HandleMax = 255
	}
	if o.MaxLinks == 0 {
		o.MaxLinks = 1024
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.SessionWindow == 0 {
		o.SessionWindow = 5000
	}
	if o.Credit == 0 {
		o.Credit = 100
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 64 << 20
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = 10_000
	}
	if o.MaxHandshakes == 0 {
		o.MaxHandshakes = 4096
	}
	if o.CloseTimeout == 0 {
		o.CloseTimeout = 5 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = time.Minute
	}
	if o.WriteBufferLimit == 0 {
		o.WriteBufferLimit = 4 << 20
	}
	return o
}

// Server serves AMQP 1.0 connections to a Handler.
type Server struct {
	h    Handler
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*Conn]struct{}
	// handshaking holds the connections still in their handshake, oldest first.
	handshaking []*Conn
	closed      bool
	wg          sync.WaitGroup

	refusedConns  atomic.Uint64
	evictedHandsh atomic.Uint64
}

// Stats are counters of a Server, for metrics.
type Stats struct {
	// Connections is how many connections are served now, Handshaking how many of them have
	// not completed their handshake.
	Connections, Handshaking int
	// RefusedConnections counts connections closed at once for MaxConnections;
	// EvictedHandshakes those closed to make room under MaxHandshakes.
	RefusedConnections, EvictedHandshakes uint64
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Connections: len(s.conns), Handshaking: len(s.handshaking),
		RefusedConnections: s.refusedConns.Load(), EvictedHandshakes: s.evictedHandsh.Load(),
	}
}

// NewServer returns a Server that hands connections to h.
func NewServer(h Handler, opts Options) *Server {
	opts = opts.withDefaults()
	return &Server{
		h:         h,
		opts:      opts,
		log:       opts.Logger,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*Conn]struct{}),
	}
}

// Serve accepts connections on ln and serves each on its own goroutines until ln fails,
// ctx is done, or Shutdown or Close is called. ctx is the parent of every served
// connection's context; when it is done the listener and those connections are closed.
// Serve closes ln. It returns ErrServerClosed after Shutdown or Close, ctx's error when ctx
// is done, or the listener's error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer func() {
		stop()
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		_ = ln.Close()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			switch {
			case closed:
				return ErrServerClosed
			case ctx.Err() != nil:
				return ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Transient (for example out of file descriptors): retry, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.WarnContext(ctx, "amqp: accept failed, retrying", slog.Any("error", err), slog.Duration("backoff", backoff))
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
				continue
			}
			return fmt.Errorf("amqp: accept: %w", err)
		}
		backoff = 0
		c, ok := s.track(ctx, nc)
		if !ok {
			continue
		}
		go func() {
			defer s.wg.Done()
			_ = c.serve()
		}()
	}
}

// ServeConn serves one connection (already accepted, possibly TLS) and returns when it has
// closed: nil after a clean close, else the reason (see ConnHandler.Closed). It returns
// ErrServerClosed without serving after Shutdown or Close.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) error {
	c, ok := s.track(ctx, nc)
	if !ok {
		return ErrServerClosed
	}
	defer s.wg.Done()
	return c.serve()
}

// track registers a new connection, or closes nc when the server is closed or serves
// MaxConnections already. A new connection past MaxHandshakes closes the oldest one still in
// its handshake.
func (s *Server) track(ctx context.Context, nc net.Conn) (*Conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && len(s.conns) >= s.opts.MaxConnections && len(s.handshaking) > 0 {
		s.evictLocked() // room for this one: open connections prevail, handshakes take turns
	}
	if s.closed || len(s.conns) >= s.opts.MaxConnections {
		if !s.closed {
			if s.refusedConns.Add(1)%1000 == 1 {
				s.log.Warn("amqp: connection refused: the server serves its maximum of connections",
					slog.Int("max_connections", s.opts.MaxConnections), slog.String("remote", nc.RemoteAddr().String()))
			}
		}
		if nc != nil {
			_ = nc.Close()
		}
		return nil, false
	}
	if len(s.handshaking) >= s.opts.MaxHandshakes {
		s.evictLocked()
	}
	c := newConn(ctx, s, nc)
	s.conns[c] = struct{}{}
	s.handshaking = append(s.handshaking, c)
	s.wg.Add(1)
	return c, true
}

// evictLocked closes the oldest connection still in its handshake. It stops counting at once:
// its goroutine may take a moment to end, and the room is for the connection being accepted.
func (s *Server) evictLocked() {
	oldest := s.handshaking[0]
	s.handshaking = slices.Delete(s.handshaking, 0, 1)
	delete(s.conns, oldest)
	_ = oldest.nc.Close()
	if s.evictedHandsh.Add(1)%1000 == 1 {
		s.log.Warn("amqp: closed a connection still in its handshake to make room for a new one",
			slog.Int("max_handshakes", s.opts.MaxHandshakes), slog.String("remote", oldest.nc.RemoteAddr().String()))
	}
}

// opened records that c completed its handshake.
func (s *Server) opened(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropHandshakingLocked(c)
}

func (s *Server) dropHandshakingLocked(c *Conn) {
	if i := slices.Index(s.handshaking, c); i >= 0 {
		s.handshaking = slices.Delete(s.handshaking, i, i+1)
	}
}

func (s *Server) untrack(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.dropHandshakingLocked(c)
	s.mu.Unlock()
}

// Shutdown stops accepting, closes every connection with amqp:connection:forced and waits
// for them to finish their close handshakes. When ctx is done first it closes what remains
// as Close does and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.listeners {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.Close(&Error{Condition: ErrCondConnectionForced, Description: "server shutting down"})
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		_ = s.Close()
		<-done
		return ctx.Err()
	}
}

// Close stops accepting, closes every connection's socket at once and waits for their
// goroutines (and handler callbacks) to finish. It returns nil.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.listeners {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
