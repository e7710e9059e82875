// Package rest is the REST door: it maps HTTP to the broker — the Service Bus REST protocol's
// paths, headers, Atom XML and SAS authorization on one side, broker.Store calls on the other,
// and one table from domain errors to Service Bus error responses. Its sibling handlers/amqp
// is the AMQP door to the same Store. It holds no SQL and links no database driver.
package rest

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqpws"
	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/console"
	"github.com/sbgate/sbgate/sas"
)

// Config is what the HTTP layer needs to know beyond the store.
type Config struct {
	// Namespace names this broker in Atom entries and error trackers.
	Namespace string
	// Access decides who may do what; sbgate serve gives the HTTP and AMQP doors the same one.
	// When nil, one is made of Keys, StoreKeys, KeyRefresh, ClockSkew and Now.
	Access *access.Layer
	// Keys are namespace-level shared access keys given in the configuration.
	Keys []sas.Key
	// StoreKeys adds the namespace-level keys kept in the database (sbgate key create/rotate/
	// revoke), read again at most KeyRefresh after the last read, so every gateway sees a new,
	// rotated or revoked key within KeyRefresh without a restart.
	StoreKeys  bool
	KeyRefresh time.Duration // 5s
	// DefaultReceiveWait is how long a receive waits when the request gives no timeout (60s).
	DefaultReceiveWait time.Duration
	// MaxReceiveWait caps the timeout a receive may ask for (DefaultMaxReceiveWait).
	MaxReceiveWait time.Duration
	// BodyTimeout is how long a request's body may take to arrive, from the request's start
	// (60s). A body that has not arrived by then is refused with 400 and the connection closed.
	BodyTimeout time.Duration
	// WriteTimeout is how long an answer may take to write, from its first byte (60s).
	WriteTimeout time.Duration
	// ClockSkew is how long past its expiry a token is still accepted (5 minutes).
	ClockSkew time.Duration
	// Started is when the namespace came up, reported by $namespaceinfo.
	Started time.Time
	// Now is the clock for token expiry and error timestamps.
	Now func() time.Time
	// Logger receives request logs and internal errors.
	Logger *slog.Logger
	// Metrics, when set, serves GET /metrics (no token needed, like the health checks).
	Metrics http.Handler
	// AMQPWebSocket, when set, serves AMQP over WebSockets at /$servicebus/websocket (no token
	// for the upgrade: the tunnel's AMQP connection authorizes itself); 404 otherwise.
	AMQPWebSocket *amqpws.Handler
	// Observe, when set, is told the operation, status and duration of every request.
	Observe func(operation string, status int, d time.Duration)
	// Drain, when set, ends when the server begins to shut down: receivers and session accepts
	// still waiting are answered at once with nothing (204), and new ones do not wait.
	Drain context.Context
	// Waiting, when set, is told when a receive or session accept begins (+1) and ends (-1)
	// waiting.
	Waiting func(delta int)
	// Live, when set, is asked by GET /healthz: an error means the process cannot recover by
	// itself (503 with the error's text), e.g. its embedded database was given up on.
	Live func() error
	// Ready, when set, is asked by GET /readyz before the database is pinged: an error means
	// the gateway should get no traffic for now (503), e.g. its embedded database is restarting.
	Ready func() error
	// TrustedProxies are the peers whose Forwarded / X-Forwarded-Proto / X-Forwarded-Host
	// headers say how the client reached them (proxy.go); from any other peer those headers are
	// user properties like any other.
	TrustedProxies []netip.Prefix
}

// Defaults of the Config settings that sbgate serve also offers as flags: its flag defaults are
// these, so each is written once.
const (
	DefaultMaxReceiveWait = 120 * time.Second
	DefaultBodyTimeout    = 60 * time.Second
	DefaultWriteTimeout   = 60 * time.Second
)

func (c *Config) setDefaults() {
	if c.Namespace == "" {
		c.Namespace = "sbgate"
	}
	if c.DefaultReceiveWait <= 0 {
		c.DefaultReceiveWait = 60 * time.Second
	}
	if c.MaxReceiveWait <= 0 {
		c.MaxReceiveWait = DefaultMaxReceiveWait
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ClockSkew <= 0 {
		c.ClockSkew = 5 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Started.IsZero() {
		c.Started = c.Now()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.KeyRefresh <= 0 {
		c.KeyRefresh = 5 * time.Second
	}
}

// Server implements the generated api.ServerInterface over a store.
type Server struct {
	store  broker.Store
	cfg    Config
	log    *slog.Logger
	access *access.Layer
	routes *routes
}

var _ api.ServerInterface = (*Server)(nil)

// NewServer returns the HTTP handler of the whole API.
func NewServer(st broker.Store, cfg Config) http.Handler {
	cfg.setDefaults()
	s := &Server{store: st, cfg: cfg, log: cfg.Logger, access: cfg.Access}
	if s.access == nil {
		s.access = access.New(access.Config{Keys: cfg.Keys, Source: st, StoredKeys: cfg.StoreKeys,
			Refresh: cfg.KeyRefresh, Now: cfg.Now, ClockSkew: cfg.ClockSkew, Logger: cfg.Logger})
	}
	mux := chi.NewRouter()
	router := api.HandlerWithOptions(s, api.ChiServerOptions{
		BaseRouter: mux,
		// The generated default writes err.Error() as text/plain; parameter errors get the
		// Service Bus error body like every other error.
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			s.writeError(w, r, broker.BadRequest("%s", err.Error()))
		},
	})
	// The operations, their rights and labels are openapi.yaml's, read once from the spec the
	// generated code embeds; an operation without x-sbgate-right is a programming error.
	spec, err := api.GetSpec()
	if err != nil {
		panic("rest: the embedded openapi.yaml does not load: " + err.Error())
	}
	if s.routes, err = newRoutes(spec, mux); err != nil {
		panic("rest: " + err.Error())
	}
	api := s.recoverer(s.forwarded(s.front(router)))
	ui := console.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if console.Serves(r.URL.Path) {
			ui.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

func (s *Server) now() time.Time { return s.cfg.Now() }

// requestInfo is what front learned of a request: its route and, for an operation that needs a
// token, who the caller is. One value in the request's context carries both.
type requestInfo struct {
	route  route
	caller caller
}

type requestInfoKey struct{}

func routeFrom(ctx context.Context) (route, bool) {
	info, ok := ctx.Value(requestInfoKey{}).(*requestInfo)
	if !ok {
		return route{}, false
	}
	return info.route, true
}

// callerFrom is the caller front authorized; the zero caller for an operation that needs no
// token.
func callerFrom(ctx context.Context) caller {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return info.caller
	}
	return caller{}
}

// front finds each request's operation, authorizes it, and hands it to the generated router
// under its canonical path.
func (s *Server) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, r = s.bound(w, r)
		rt, ok := s.routes.route(r.Method, r.URL.EscapedPath())
		if s.cfg.Observe != nil {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			w = sw
			defer func() { s.cfg.Observe(rt.label(), sw.status, time.Since(start)) }()
		}
		if !ok {
			s.writeError(w, r, &broker.Error{Code: broker.CodeNotFound, Message: "No service is hosted at the specified address."})
			return
		}
		// The request is copied once, with the route and then the caller in its context, and
		// its URL replaced in the copy.
		info := &requestInfo{route: rt}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		if rt.op.token {
			caller, err := s.authorize(r, rt)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			info.caller = caller
		}
		u := *r.URL
		u.RawPath = rt.canonical
		if p, err := pathUnescape(rt.canonical); err == nil {
			u.Path = p
		}
		r.URL = &u
		if s.serveFast(w, r, rt) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// statusWriter remembers the status a handler answered with. It passes Flush on, which the
// chunked message responses need.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverer turns a panic into a 500 with a tracking id, never a dropped connection with a
// stack trace in the body.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic serving request", slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				s.writeError(w, r, &broker.Error{Code: broker.CodeInternal})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// Healthz answers 200 while the process serves HTTP and can recover by itself (Config.Live).
func (s *Server) Healthz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Live != nil {
		if err := s.cfg.Live(); err != nil {
			s.writeError(w, r, &broker.Error{Code: broker.CodeUnavailable, Message: err.Error()})
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// Metrics serves Config.Metrics, or 404 when metrics are not enabled.
func (s *Server) Metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		s.writeError(w, r, &broker.Error{Code: broker.CodeNotFound, Message: "Metrics are not enabled."})
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// Readyz answers 200 when the gateway may take traffic (Config.Ready) and the database answers.
func (s *Server) Readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			s.writeError(w, r, &broker.Error{Code: broker.CodeUnavailable, Message: err.Error()})
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.writeError(w, r, &broker.Error{Code: broker.CodeUnavailable, Message: "The database is not reachable."})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ready\n"))
}
