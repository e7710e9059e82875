package amqpws

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestHijackClearsDeadlines: a deadline armed for the upgrade request (the handlers arm one for
// every answer's write) does not reach the tunnel, which outlives any request.
func TestHijackClearsDeadlines(t *testing.T) {
	wrote := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(-time.Second))
		_ = rc.SetReadDeadline(time.Now().Add(-time.Second))
		nc, brw, err := (&hijackWriter{ResponseWriter: w}).Hijack()
		if err != nil {
			wrote <- err
			return
		}
		defer nc.Close()
		_, err = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		if err == nil {
			err = brw.Flush()
		}
		wrote <- err
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-wrote; err != nil {
		t.Fatalf("write on the hijacked connection: %v", err)
	}
}
