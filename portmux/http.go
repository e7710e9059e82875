package portmux

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
)

// tlsStateKey holds, in a connection's context, the TLS state of a connection sniffed inside
// TLS.
type tlsStateKey struct{}

// ConfigureServer prepares srv to serve a Mux's HTTP listener: requests that came over TLS get
// Request.TLS set even when the Mux had to read their first decrypted bytes (net/http sets it
// only for a *tls.Conn, and only then builds https URLs or answers r.TLS checks right). Call it
// once, before srv.Serve; it keeps srv's own ConnContext and Handler (nil: DefaultServeMux),
// wrapping them.
func ConfigureServer(srv *http.Server) {
	connContext := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if connContext != nil {
			ctx = connContext(ctx, c)
		}
		if tc, ok := c.(*tlsReplayConn); ok {
			st := tc.ConnectionState()
			ctx = context.WithValue(ctx, tlsStateKey{}, &st)
		}
		return ctx
	}
	h := srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
				r2 := *r
				r2.TLS = st
				r = &r2
			}
		}
		h.ServeHTTP(w, r)
	})
}
