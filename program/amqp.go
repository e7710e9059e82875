package program

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/amqpws"
	"github.com/sbgate/sbgate/broker"
	amqpdoor "github.com/sbgate/sbgate/handlers/amqp"
	"github.com/sbgate/sbgate/sas"
)

// newAMQPServer is the AMQP server (the AMQP door, package handlers/amqp) behind every AMQP
// entry: the AMQP listeners, and WebSocket tunnels on the HTTP(S) listener (package amqpws), so
// all share one set of limits, keys and connections to shut down.
func newAMQPServer(cfg serveConfig, st broker.Store, log *slog.Logger, acc *access.Layer) *amqp.Server {
	h := amqpdoor.New(amqpdoor.Config{Store: st, Access: acc, MaxReceiveWait: cfg.MaxReceiveWait, Logger: log})
	return amqp.NewServer(h, amqp.Options{Authenticate: h.Authenticate, Logger: log,
		MaxConnections: cfg.AMQPMaxConnections, MaxHandshakes: cfg.AMQPMaxHandshakes})
}

// serveAMQP runs srv's listeners: plain AMQP on cfg.AMQPListen, and AMQP over TLS on
// cfg.AMQPSListen when tlsConfig is set (sbgate serves https). It returns the function that
// stops srv — its listeners and every connection, the WebSocket tunnels included, which end
// with their AMQP connections (ws is then closed, to wait for them) — and the plain AMQP
// listener's address ("" when off).
func serveAMQP(ctx context.Context, cfg serveConfig, srv *amqp.Server, ws *amqpws.Handler, log *slog.Logger, key sas.Key, tlsConfig *tls.Config) (func(), string, error) {
	var lns []net.Listener
	var plainAddr string
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	if cfg.AMQPListen != "" {
		ln, err := net.Listen("tcp", cfg.AMQPListen)
		if err != nil {
			return nil, "", err
		}
		lns = append(lns, ln)
		plainAddr = ln.Addr().String()
	}
	if cfg.AMQPSListen != "" && tlsConfig != nil {
		ln, err := net.Listen("tcp", cfg.AMQPSListen)
		if err != nil {
			closeAll()
			return nil, "", err
		}
		lns = append(lns, tls.NewListener(ln, tlsConfig))
	}
	var wg sync.WaitGroup
	for i, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.Serve(context.WithoutCancel(ctx), ln)
		}()
		hostPort := publicHostPort(ln.Addr().String())
		cs := "Endpoint=sb://" + hostPort + ";SharedAccessKeyName=" + key.Name + ";SharedAccessKey=<key>"
		if i == 0 && cfg.AMQPListen != "" {
			// The SDKs dial plain AMQP only with this flag; without it they dial TLS.
			log.Info("sbgate serving AMQP", "endpoint", "amqp://"+hostPort, "connection_string", cs+";UseDevelopmentEmulator=true")
		} else {
			if host, port, err := net.SplitHostPort(hostPort); err == nil && port == "5671" {
				// The SDKs dial 5671 when the endpoint names no port; the Go SDK checks the
				// certificate against "host:port" when it does.
				cs = "Endpoint=sb://" + host + ";SharedAccessKeyName=" + key.Name + ";SharedAccessKey=<key>"
			}
			log.Info("sbgate serving AMQPS", "endpoint", "amqps://"+hostPort, "connection_string", cs)
		}
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
		wg.Wait()
		_ = ws.Close()
	}, plainAddr, nil
}
