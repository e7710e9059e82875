package main

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/sbamqp"
	"github.com/sbgate/sbgate/store"
)

// serveAMQP runs the AMQP listener (the Service Bus profile of package sbamqp) on
// cfg.AMQPListen, when set, and returns the function that stops it.
func serveAMQP(ctx context.Context, cfg serveConfig, st store.Store, log *slog.Logger, key sas.Key) (func(), error) {
	if cfg.AMQPListen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.AMQPListen)
	if err != nil {
		return nil, err
	}
	keys := &amqpKeys{st: st, configured: configuredKeys(cfg, key), log: log}
	h := sbamqp.New(sbamqp.Config{Store: st, Keys: keys.get, MaxReceiveWait: cfg.MaxReceiveWait, Logger: log})
	srv := amqp.NewServer(h, amqp.Options{Authenticate: h.Authenticate, Logger: log})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(context.WithoutCancel(ctx), ln)
	}()
	hostPort := publicHostPort(ln.Addr().String())
	log.Info("sbgate serving AMQP", "endpoint", "amqp://"+hostPort,
		"connection_string", "Endpoint=sb://"+hostPort+";SharedAccessKeyName="+key.Name+";SharedAccessKey=<key>;UseDevelopmentEmulator=true")
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
		<-done
	}, nil
}

// amqpKeys gives the AMQP layer the namespace keys, as the HTTP handlers read them: the
// configured key and the database's, read at most every 10 seconds, the last ones read staying
// in force while the database cannot be read.
type amqpKeys struct {
	st         store.Store
	configured []sas.Key
	log        *slog.Logger

	mu   sync.Mutex
	keys []sas.Key
	read time.Time
	ok   bool
}

func (k *amqpKeys) get(ctx context.Context) []sas.Key {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ok && time.Since(k.read) < 10*time.Second {
		return k.keys
	}
	stored, err := k.st.NamespaceKeys(ctx)
	if err != nil {
		k.log.WarnContext(ctx, "read namespace keys", slog.Any("err", err))
		if k.ok {
			return k.keys
		}
		return k.configured
	}
	keys := append([]sas.Key(nil), k.configured...)
	for _, s := range stored {
		rights, err := sas.ParseRights(s.Rights)
		if err != nil {
			continue
		}
		keys = append(keys, sas.Key{Name: s.Name, Primary: s.PrimaryKey, Secondary: s.SecondaryKey, Rights: rights})
	}
	k.keys, k.read, k.ok = keys, time.Now(), true
	return keys
}
