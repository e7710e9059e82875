package rest

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// Every request is bounded in time (issue 9: clients trickling a body one byte at a time held
// 19,900 connections). The server bounds the header (ReadHeaderTimeout) and idle keep-alive
// connections (IdleTimeout); the handlers bound the rest per request with
// http.ResponseController, because server-wide ReadTimeout and WriteTimeout count from the start
// of the request and would cut a long-poll receive, which may wait up to MaxReceiveWait:
//
//   - a body must arrive within BodyTimeout of the request's start; once it is read to its end
//     the read deadline is lifted (the server's background read for a closed connection would
//     otherwise fail at the deadline and cancel a receive or a send still at work);
//   - an answer must be written within WriteTimeout of its first byte, however long the request
//     waited before answering.

// bound arms the deadlines of one request and returns the writer and request to use.
func (s *Server) bound(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	rc := http.NewResponseController(w)
	dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: s.cfg.WriteTimeout}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)); err == nil {
			dw.body = &deadlineBody{ReadCloser: r.Body, rc: rc, remain: r.ContentLength}
			r2 := *r
			r2.Body = dw.body
			r = &r2
		}
	}
	return dw, r
}

// deadlineBody lifts the read deadline once the body has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	remain int64 // bytes still to come when the length was declared; -1 when not
	done   bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.remain > 0 {
		b.remain -= int64(n)
	}
	if !b.done && (err == io.EOF || b.remain == 0) {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyTimedOut reports whether a body read failed because the body did not arrive in time.
func bodyTimedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// deadlineWriter sets the write deadline when the answer starts. An answer to a request whose
// body was not read to its end (refused before or while reading it) closes the connection:
// net/http would otherwise read the rest of the body before answering, which a client that
// stalls holds up until the read deadline, and a body too large is not worth reading.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	body    *deadlineBody
	armed   bool
}

func (w *deadlineWriter) arm() {
	if !w.armed {
		w.armed = true
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
		if w.body != nil && !w.body.done {
			w.Header().Set("Connection", "close")
		}
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	w.arm()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
