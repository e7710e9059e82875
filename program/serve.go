package program

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/amqpws"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/emulator"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/metrics"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// database returns the URL of the configured database, or starts the embedded one (pg is then
// set; nil for an external database). onRestart is called when the embedded one came back from
// a crash. stop ends what was started (a no-op for an external database).
func database(ctx context.Context, cfg serveConfig, log *slog.Logger, onRestart func()) (url string, pg *db.Embedded, stop func(), err error) {
	if cfg.DatabaseURL != "" {
		return cfg.DatabaseURL, nil, func() {}, nil
	}
	dir := cfg.DataDir
	if dir == "" { // parseServeConfig and key set it; a hand-built config must too
		return "", nil, nil, errors.New("start embedded postgres: no data directory given")
	}
	pg, err = db.StartEmbedded(ctx, db.EmbeddedConfig{DataDir: dir, Logger: log, Restart: cfg.EmbeddedRestart, OnRestart: onRestart})
	if err != nil {
		return "", nil, nil, fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	log.Info("embedded PostgreSQL running", "data_dir", dir)
	return pg.URL(), pg, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := pg.Stop(ctx); err != nil {
			log.Error("stop embedded PostgreSQL", "err", err)
		}
	}, nil
}

// embeddedHealth answers /healthz and /readyz for the embedded PostgreSQL's supervisor (pg nil:
// an external database, whose availability only /readyz's ping tells).
type embeddedHealth struct{ pg *db.Embedded }

// live fails only when the supervisor gave up: nothing but a restart of sbgate helps then.
func (h embeddedHealth) live() error {
	if h.pg != nil && h.pg.Status() == db.StatusFailed {
		return errors.New("The embedded PostgreSQL crashed and could not be restarted; restart sbgate.")
	}
	return nil
}

// ready fails whenever the embedded server is not running.
func (h embeddedHealth) ready() error {
	if h.pg == nil {
		return nil
	}
	switch h.pg.Status() {
	case db.StatusRunning:
		return nil
	case db.StatusRestarting:
		return errors.New("The embedded PostgreSQL is restarting after a crash.")
	case db.StatusFailed:
		return errors.New("The embedded PostgreSQL crashed and could not be restarted; restart sbgate.")
	default:
		return errors.New("The embedded PostgreSQL is stopped.")
	}
}

func migrate(ctx context.Context, cfg serveConfig, stdout io.Writer) error {
	log := cfg.logger(stdout)
	url, _, stop, err := database(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer stop()
	v, err := db.Migrate(ctx, url)
	if err != nil {
		return err
	}
	log.Info("database migrated", "version", v)
	return nil
}

func serve(ctx context.Context, cfg serveConfig, stdout io.Writer) error {
	log := cfg.logger(stdout)
	if cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	// A wrong configuration file stops the start before anything else does.
	declared, err := readConfigFile(cfg.ConfigFile)
	if err != nil {
		return err
	}
	if cfg.Emulator {
		announceEmulatorMode(log, cfg)
	}
	b, stopped, err := startBackend(ctx, cfg, log)
	if stopped || err != nil {
		return err
	}
	defer b.stop()
	st := b.st

	key, generated, err := namespaceKey(ctx, cfg, st)
	if err != nil {
		return err
	}
	if declared != nil {
		// Before any listener: clients never see a namespace half way to the file.
		if err := applyConfigFile(ctx, cfg, st, declared, log); err != nil {
			return err
		}
	}
	return serveDoors(ctx, cfg, b, key, generated, log)
}

// serveDoors serves the broker over b until ctx ends or the REST API's server fails: the REST
// API and AMQP over WebSockets on -listen, AMQP on its own listeners, every protocol on the
// one-port listeners; and Go's profiles on -pprof-listen.
func serveDoors(ctx context.Context, cfg serveConfig, b *backend, key sas.Key, generated bool,
	log *slog.Logger) error {
	st := b.st
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	m := metrics.New(b.pool, log)
	// One access layer for both doors: the same keys, cache and refusals over HTTP and AMQP.
	acc := access.New(access.Config{Keys: configuredKeys(cfg, key), Source: st, StoredKeys: true, Logger: log})
	// One AMQP server for the AMQP listeners and for WebSocket tunnels through the HTTP one.
	amqpSrv := newAMQPServer(cfg, st, log, acc)
	m.AMQP(func() metrics.AMQPStats {
		s := amqpSrv.Stats()
		return metrics.AMQPStats{Connections: s.Connections, Handshaking: s.Handshaking,
			RefusedConnections: s.RefusedConnections, EvictedHandshakes: s.EvictedHandshakes}
	})
	tunnels := amqpws.New(amqpSrv, amqpws.Options{Logger: log})
	// Shutdown closes the listener, then waits for connections to go idle: draining first
	// answers every waiting receiver (204), so only sends and settlements still under way are
	// waited for, and the process exits in moments rather than at the end of long polls.
	drain, startDraining := context.WithCancel(context.Background())
	defer startDraining()
	handler := rest.NewServer(st, restConfig(cfg, acc, m, tunnels, drain, b.health, log))
	srv := newHTTPServer(handler, log)
	srv.RegisterOnShutdown(startDraining)
	ln, scheme, err := listenTLS(cfg, ln, srv)
	if err != nil {
		return err
	}
	announce(log, scheme, ln.Addr().String(), key, generated)
	log.Info("sbgate serving AMQP over WebSockets", "endpoint", strings.Replace(scheme, "http", "ws", 1)+"://"+publicHostPort(ln.Addr().String())+amqpws.Path)
	// The one-port listeners are registered before stopAMQP, so they stop after it: the AMQP
	// server first ends, gracefully, the AMQP connections they handed it too; then their HTTP
	// requests drain and they close.
	stopMuxes, emulatorHTTPAddr, err := serveMuxes(ctx, cfg, handler, b, srv.TLSConfig, amqpSrv,
		log, startDraining)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopMuxes()
	stopAMQP, amqpAddr, err := serveAMQP(ctx, cfg, amqpSrv, tunnels, log, key, srv.TLSConfig)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopAMQP()
	if cfg.PprofListen != "" {
		stopPprof, err := servePprof(cfg.PprofListen, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopPprof()
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if cfg.ReadyFile != "" {
		err := writeReadyFile(cfg.ReadyFile, scheme, ln.Addr().String(), amqpAddr, key, b.url)
		if err != nil {
			_ = srv.Close()
			<-served
			return err
		}
		defer os.Remove(cfg.ReadyFile)
	}
	if cfg.Emulator {
		announceEmulatorReady(log, amqpAddr, emulatorHTTPAddr)
	}
	return serveUntilDone(ctx, cfg, srv, served, log)
}

// listenTLS is ln, serving TLS when a certificate is configured (srv.TLSConfig is set then),
// and its URL scheme. When it fails it has closed ln.
func listenTLS(cfg serveConfig, ln net.Listener, srv *http.Server) (net.Listener, string, error) {
	if cfg.TLSCert == "" {
		return ln, "http", nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		ln.Close()
		return nil, "", fmt.Errorf("load TLS certificate: %w", err)
	}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return tls.NewListener(ln, srv.TLSConfig), "https", nil
}

// backend is what the listeners serve: the database, migrated, with the store and the relay
// over it.
type backend struct {
	url    string
	health embeddedHealth
	pool   *pgxpool.Pool
	st     *store.Postgres
	stops  []func() // in the order started
}

// stop stops what startBackend started, the last started first.
func (b *backend) stop() {
	for i := len(b.stops) - 1; i >= 0; i-- {
		b.stops[i]()
	}
}

// startBackend starts the embedded database, or waits for the external one to be a primary
// (stopped: ctx ended meanwhile), migrates it, and starts the store and the relay over it. When
// it returns no backend it has stopped what it started.
func startBackend(ctx context.Context, cfg serveConfig,
	log *slog.Logger) (_ *backend, stopped bool, err error) {
	// After a crash of the embedded server every pooled connection is dead; dropping them at
	// once spares the next requests a failed first attempt each: the pool's, and once the
	// store runs, its generic-plan pool's too (claims and settlements).
	var openPool atomic.Pointer[pgxpool.Pool]
	var openStore atomic.Pointer[store.Postgres]
	url, pg, stopDB, err := database(ctx, cfg, log, func() {
		if st := openStore.Load(); st != nil {
			st.ResetConnections()
		} else if p := openPool.Load(); p != nil {
			p.Reset()
		}
	})
	if err != nil {
		return nil, false, err
	}
	b := &backend{url: url, health: embeddedHealth{pg}, stops: []func(){stopDB}}
	defer func() {
		if stopped || err != nil {
			b.stop()
		}
	}()
	if pg == nil {
		if stopped, err = waitForPrimary(ctx, cfg, log, url); stopped || err != nil {
			return nil, stopped, err
		}
	}
	if _, err := db.Migrate(ctx, url); err != nil {
		return nil, false, err
	}
	pool, err := db.Open(ctx, url)
	if err != nil {
		return nil, false, err
	}
	b.stops = append(b.stops, pool.Close)
	openPool.Store(pool)

	st := store.New(pool, store.Options{Logger: log, SendWriters: cfg.SendWriters, Recheck: cfg.Recheck,
		CheckCopy: rest.CheckDeliverable})
	st.Start(ctx)
	b.stops = append(b.stops, st.Stop)
	openStore.Store(st)
	// Messages applications send with sbgate.send in their own transactions (README).
	relay := store.NewRelay(st, store.RelayOptions{})
	relay.Start(ctx)
	b.stops = append(b.stops, relay.Stop)
	b.pool, b.st = pool, st
	return b, false, nil
}

// restConfig is the REST API's configuration.
func restConfig(cfg serveConfig, acc *access.Layer, m *metrics.Metrics, tunnels *amqpws.Handler,
	drain context.Context, health embeddedHealth, log *slog.Logger) rest.Config {
	return rest.Config{
		Namespace:      cfg.Namespace,
		Access:         acc,
		MaxReceiveWait: cfg.MaxReceiveWait,
		BodyTimeout:    cfg.BodyTimeout,
		WriteTimeout:   cfg.WriteTimeout,
		Logger:         log,
		Metrics:        m.Handler(),
		AMQPWebSocket:  tunnels,
		Observe:        m.Observe,
		Drain:          drain,
		Waiting:        m.Waiting,
		Live:           health.live,
		Ready:          health.ready,
		TrustedProxies: cfg.TrustedProxies,
	}
}

// serveMuxes starts the listeners that serve every protocol on one port: -mux-listen, and the
// emulator's management port, whose address it returns. stop stops them, the last started
// first; on an error it has stopped those it started.
func serveMuxes(ctx context.Context, cfg serveConfig, handler http.Handler, b *backend,
	tlsConfig *tls.Config, amqpSrv *amqp.Server, log *slog.Logger,
	onShutdown func()) (stop func(), emulatorHTTPAddr string, err error) {
	muxes := []struct{ addr, name string }{{cfg.MuxListen, "one port"}}
	if cfg.Emulator {
		muxes = append(muxes, struct{ addr, name string }{cfg.EmulatorHTTPListen, "emulator management"})
	}
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, m := range muxes {
		if m.addr == "" {
			continue
		}
		h := handler
		if m.name == "emulator management" {
			h = emulator.Health(handler, func(r *http.Request) error {
				if err := b.health.ready(); err != nil {
					return err
				}
				return b.st.Ping(r.Context())
			})
		}
		stopMux, addr, err := serveMux(ctx, cfg, m.addr, m.name, h, tlsConfig, amqpSrv, log,
			onShutdown)
		if err != nil {
			stop()
			return nil, "", err
		}
		stops = append(stops, stopMux)
		if m.name == "emulator management" {
			emulatorHTTPAddr = addr
		}
	}
	return stop, emulatorHTTPAddr, nil
}

// serveUntilDone waits for srv (served receives what its Serve returned) to fail or ctx to
// end, then shuts it down gracefully within cfg.ShutdownGrace.
func serveUntilDone(ctx context.Context, cfg serveConfig, srv *http.Server, served chan error,
	log *slog.Logger) error {
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	// The context that ended the server is done; shutdown gets a fresh one.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("requests still in flight at shutdown", "err", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// servePprof serves Go's profiling endpoints on their own listener, so they are never reachable
// through the broker's address.
func servePprof(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("profiling endpoints serving", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// namespaceKey is the configured key, or the one kept in the database; generated says it was
// made by this start (the database had none).
func namespaceKey(ctx context.Context, cfg serveConfig, st broker.Store) (key sas.Key, generated bool, err error) {
	if cfg.Emulator {
		return sas.Key{Name: emulator.KeyName, Primary: emulator.Key, Rights: sas.Manage}, false, nil
	}
	if cfg.SASKey != "" {
		return sas.Key{Name: cfg.SASKeyName, Primary: cfg.SASKey, Rights: sas.Manage}, false, nil
	}
	k, err := st.NamespaceKey(ctx, cfg.SASKeyName, true)
	if err != nil {
		return sas.Key{}, false, err
	}
	rights, err := sas.ParseRights(k.Rights)
	if err != nil {
		return sas.Key{}, false, fmt.Errorf("key %s: %w", k.Name, err)
	}
	return sas.Key{Name: k.Name, Primary: k.PrimaryKey, Secondary: k.SecondaryKey, Rights: rights}, k.Created, nil
}

// configuredKeys is the key given in the configuration (SBGATE_SAS_KEY), if any: a key kept in
// the database is read from there on every gateway, so rotating or revoking it takes effect.
func configuredKeys(cfg serveConfig, key sas.Key) []sas.Key {
	var keys []sas.Key
	if cfg.Emulator {
		// The emulator's key, then the operator's own, if any (another name: parseServeConfig
		// made sure). The key of that name kept in the database is not in force meanwhile.
		keys = append(keys, key)
		key = sas.Key{Name: cfg.SASKeyName, Primary: cfg.SASKey, Rights: sas.Manage}
	}
	if cfg.SASKey == "" {
		return keys
	}
	return append(keys, key)
}

// announce logs where the broker listens and how to talk to it. The key, and a token made with
// it, are written only when this start generated the key: logs are read and kept by more people
// than should hold a Manage key, and the operator who supplied a key, or saw it at the first
// start, has it already.
func announce(log *slog.Logger, scheme, addr string, key sas.Key, generated bool) {
	hostPort := publicHostPort(addr)
	endpoint := scheme + "://" + hostPort + "/"
	if key.Name == emulator.KeyName && key.Primary == emulator.Key {
		// Emulator mode: the key is public, and printing it is the point.
		log.Info("sbgate serving", "endpoint", endpoint, "connection_string", connectionString(hostPort, key))
		return
	}
	if !generated {
		log.Info("sbgate serving", "endpoint", endpoint,
			"connection_string", connectionString(hostPort, sas.Key{Name: key.Name, Primary: "<key>"}))
		log.Info("get a token for curl with: sbgate token -connection-string '<connection string with the key>' (the key is not logged: it is SBGATE_SAS_KEY, or the one printed at the first start)")
		return
	}
	tok := sas.Sign(endpoint, key.Name, key.Primary, time.Now().Add(24*time.Hour))
	curl := strings.Join([]string{
		fmt.Sprintf("TOKEN='%s'", tok),
		fmt.Sprintf(`curl -i -X PUT -H "Authorization: $TOKEN" %sorders`, endpoint),
		fmt.Sprintf(`curl -i -X POST -H "Authorization: $TOKEN" -H 'BrokerProperties: {"Label":"hello"}' -d 'hello' %sorders/messages`, endpoint),
		fmt.Sprintf(`curl -i -X DELETE -H "Authorization: $TOKEN" %sorders/messages/head?timeout=5`, endpoint),
	}, "; ")
	log.Info("sbgate serving", "endpoint", endpoint, "connection_string", connectionString(hostPort, key))
	log.Warn("the namespace key was generated now and is kept in the database; it is logged only this once, so keep the connection string")
	log.Info("try it (token valid 24h)", "curl", curl)
}

// connectionString is what Service Bus clients are configured with.
func connectionString(hostPort string, key sas.Key) string {
	return "Endpoint=sb://" + hostPort + "/;SharedAccessKeyName=" + key.Name + ";SharedAccessKey=" + key.Primary
}

// newHTTPServer is the http.Server of every listener that serves the REST API (-listen, and the
// one-port listeners of serveMux), with its limits; its errors are logged at Warn.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler: h,
		// The header and idle keep-alive connections are bounded here; the body and the answer
		// per request by the handlers (ReadTimeout and WriteTimeout would cut long polls).
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Properties travel as headers; up to this size an oversized one gets the Service Bus
		// 400 that names the 10 KiB limit (handlers/limits.go), beyond it net/http's bare 431.
		MaxHeaderBytes: 1 << 20,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
