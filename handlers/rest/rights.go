package rest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sbgate/sbgate/broker"
)

// managementDenied is the 401 for a management operation the caller's key has no Manage right
// for, in the service's words, which SDK users match on (the Go SDK's own tests do): one text
// for reading, one for writing and one for deleting a queue, topic or rule, and for
// subscriptions "SubCode=40100: Unauthorized : Unauthorized access for '<operation>' operation on
// endpoint '…'", which the service also sends as the HTTP reason phrase.
func managementDenied(r *http.Request, rt route) error {
	if strings.Contains(rt.op.pattern, "/Subscriptions") && !strings.Contains(rt.op.pattern, "/Rules") {
		sub := map[string]string{http.MethodGet: "GetSubscription", http.MethodPut: "CreateOrUpdateSubscription",
			http.MethodDelete: "DeleteSubscription"}[rt.op.method]
		if strings.HasSuffix(rt.op.pattern, "/Subscriptions") {
			sub = "EnumerateSubscriptions"
		}
		text := "SubCode=40100: Unauthorized : Unauthorized access for '" + sub + "' operation on endpoint 'sb://" +
			r.Host + "/" + broker.Clip(rt.scope) + "'."
		return &phrasedError{err: unauthorized(text), phrase: text}
	}
	switch rt.op.method {
	case http.MethodPut:
		return unauthorized("Authorization failed for specified action: Manage,EntityWrite.")
	case http.MethodDelete:
		return unauthorized("Authorization failed for specified action: Manage,EntityDelete.")
	}
	return unauthorized("Manage,EntityRead claims required for this operation.")
}

// phrasedError is an error the service answers with its text as the HTTP reason phrase too
// ("HTTP/1.1 401 SubCode=40100: Unauthorized : …"): clients such as the Go SDK show the status
// line in their error text, and their users match on it.
type phrasedError struct {
	err    error
	phrase string
}

func (e *phrasedError) Error() string { return e.err.Error() }
func (e *phrasedError) Unwrap() error { return e.err }

// writeWithReasonPhrase writes an HTTP/1.x response whose status line carries phrase, which
// net/http cannot do: it takes the connection over, writes the whole response and closes the
// connection (the client opens a new one). It reports false, having written nothing, when the
// connection cannot be taken over (HTTP/2 has no reason phrase); the caller answers as usual.
func writeWithReasonPhrase(w http.ResponseWriter, r *http.Request, status int, phrase, contentType string, body []byte) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	// Read what the client sent first, so closing the connection does not reset it under the
	// client before it reads the answer.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxDescriptionBytes))
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	defer conn.Close()
	if sw, ok := w.(*statusWriter); ok {
		sw.status = status
	}
	phrase = strings.Map(func(c rune) rune {
		if c < ' ' || c == 0x7f {
			return ' '
		}
		return c
	}, phrase)
	out := bufio.NewWriter(conn)
	if buf != nil && buf.Writer != nil {
		out = buf.Writer
	}
	fmt.Fprintf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", status, phrase, contentType, len(body))
	_, _ = out.Write(body)
	_ = out.Flush()
	return true
}

// errorPhrase is the reason phrase err asks for, or "".
func errorPhrase(err error) string {
	for err != nil {
		if p, ok := err.(*phrasedError); ok {
			return p.phrase
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return ""
		}
		err = u.Unwrap()
	}
	return ""
}

// manageDenied answers a request that needs Manage from a key without it. A GET of a queue or
// topic that does not exist gets the "Publicly Listed Services" feed as with any key, as on the
// service (it tells nothing a 401 would not): it returns nil and the handler answers.
func (s *Server) manageDenied(r *http.Request, rt route) error {
	if rt.op.method == http.MethodGet && rt.op.pattern == "/{entityPath}" {
		if _, err := s.store.Resolve(r.Context(), rt.entity); errors.Is(err, broker.ErrNotFound) {
			return nil
		}
	}
	return managementDenied(r, rt)
}
