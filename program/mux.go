package program

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/portmux"
)

// serveMux serves h and the AMQP server on one listener at addr (package portmux): plain AMQP,
// HTTP, and with tlsConfig (sbgate serves https) AMQP over TLS and HTTPS, each connection told
// apart by its first bytes; AMQP over WebSockets is h's. name says which listener it is in the
// log. It returns the function that stops it (HTTP requests drain for up to the shutdown grace;
// call it before the AMQP server stops, which ends the AMQP connections) and the address
// bound.
func serveMux(ctx context.Context, cfg serveConfig, addr, name string, h http.Handler, tlsConfig *tls.Config, srv *amqp.Server, log *slog.Logger, onShutdown func()) (func(), string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	mux := portmux.New(ln, portmux.Options{TLS: tlsConfig, AMQP: srv, Logger: log})
	hs := newHTTPServer(h, log)
	hs.TLSConfig = tlsConfig
	hs.RegisterOnShutdown(onShutdown)
	portmux.ConfigureServer(hs)
	served := make(chan struct{}, 2)
	go func() {
		_ = hs.Serve(mux.HTTPListener())
		served <- struct{}{}
	}()
	go func() {
		_ = mux.Serve(context.WithoutCancel(ctx))
		served <- struct{}{}
	}()
	bound := ln.Addr().String()
	hostPort := publicHostPort(bound)
	protocols := "amqp, http"
	if tlsConfig != nil {
		protocols = "amqp, amqps, http, https"
	}
	log.Info("sbgate serving every protocol on one port", "listener", name, "address", bound, "protocols", protocols,
		"endpoint", "sb://"+hostPort, "websocket", strings.Replace(schemeOf(tlsConfig), "http", "ws", 1)+"://"+hostPort+"/$servicebus/websocket")
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("requests still in flight at shutdown", "listener", name, "err", err)
		}
		_ = mux.Close()
		<-served
		<-served
	}, bound, nil
}

func schemeOf(tlsConfig *tls.Config) string {
	if tlsConfig != nil {
		return "https"
	}
	return "http"
}
