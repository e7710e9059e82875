package program

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sbgate/sbgate/atom"
	"github.com/sbgate/sbgate/db"
)

// primaryPoll is how often a gateway waiting for a writable database looks again.
const primaryPoll = time.Second

// waitForPrimary returns at once when url leads to a writable server, or when no server answers
// (the migration that follows reports that, and sbgate exits, as before). When servers answer but all
// are read-only standbys, it says so in one log line and waits, looking again every second, while
// answering /healthz 200 and everything else (/readyz included) 503 with Retry-After on the
// configured address. stopped is true when ctx ended first.
func waitForPrimary(ctx context.Context, cfg serveConfig, log *slog.Logger, url string) (stopped bool, err error) {
	err = db.CheckWritable(ctx, url)
	if !errors.Is(err, db.ErrReadOnly) {
		return false, nil
	}
	ln, lerr := net.Listen("tcp", cfg.Listen)
	if lerr != nil {
		return false, lerr
	}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			ln.Close()
			return false, fmt.Errorf("load TLS certificate: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	log.Error("no writable PostgreSQL: waiting for a primary; /readyz answers 503 until one appears",
		"listen", ln.Addr().String(), "err", err)
	srv := &http.Server{Handler: http.HandlerFunc(waitingForPrimary), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close() // the gateway listens anew on the same address once it serves

	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-time.After(primaryPoll):
		}
		// Meanwhile the standby may be being promoted, or hosts may be down: keep waiting on
		// anything but success, quietly (the one line above said what is wrong).
		if db.CheckWritable(ctx, url) == nil {
			log.Info("a writable PostgreSQL appeared")
			return false, nil
		}
	}
}

// waitingForPrimary answers while no writable database is known: alive, not ready.
func waitingForPrimary(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	w.Header().Set("Retry-After", "2")
	w.Header().Set("Content-Type", atom.ErrorContentType)
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(atom.AppendError(nil, http.StatusServiceUnavailable,
		"The database has no writable server (only read-only standbys answer); retry shortly. Timestamp:"+time.Now().UTC().Format(time.RFC3339)))
}
