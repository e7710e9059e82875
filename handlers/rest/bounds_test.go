package rest_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/handlers/rest"
)

// stalled reads prefix, then blocks until ctx ends: a client that stops sending midway.
func stalled(ctx context.Context, prefix string) io.Reader {
	return io.MultiReader(strings.NewReader(prefix), blockUntil{ctx})
}

type blockUntil struct{ ctx context.Context }

func (b blockUntil) Read([]byte) (int, error) {
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

// postStalled sends a chunked POST whose body stalls after prefix, and returns the status the
// server answered while the body was still open. The guard is far longer than the server
// needs; a server that waits for the rest of the body never answers.
func (b *bundle) postStalled(t *testing.T, path, contentType, prefix string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+path, stalled(ctx, prefix))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // chunked: the size is not declared
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", b.token(b.url+path, "root"))
	resp, err := b.http.Do(req)
	if err != nil {
		t.Fatalf("POST %s with a stalled body: %v (the server waited for the rest of the body)", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBodiesAreReadOnlyUpToTheLimit: a body of undeclared size is refused as soon as it passes
// the entity's limit, single or batch (checked message by message), without waiting for the
// rest of it; a declared size over the limit is refused before any of it is read.
func TestBodiesAreReadOnlyUpToTheLimit(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "small", "<MaxMessageSizeInKilobytes>1</MaxMessageSizeInKilobytes>")
	if st := b.postStalled(t, "/small/messages", "text/plain", strings.Repeat("x", 1025)); st != http.StatusForbidden {
		t.Errorf("single body past 1 KB, then stalled: %d; want 403", st)
	}
	item := `{"Body":"` + strings.Repeat("x", 600) + `"},`
	if st := b.postStalled(t, "/small/messages", atomContentTypeJSON, "["+item+item); st != http.StatusForbidden {
		t.Errorf("batch whose second message passes 1 KB, then stalled: %d; want 403", st)
	}
	// Declared too large: nothing is read, the answer comes at once.
	conn, err := net.Dial("tcp", b.host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /small/messages HTTP/1.1\r\nHost: "+b.host+"\r\nAuthorization: "+b.token(b.url+"/small/messages", "root")+
		"\r\nContent-Length: 104857600\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("declared 100 MB body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("declared 100 MB body: %d; want 403", resp.StatusCode)
	}
	if c := b.counts(t, "small"); c.Total() != 0 {
		t.Errorf("counts = %+v; want nothing stored", c)
	}
}

// rawExchange writes req on a new connection, stops sending, and reads until the server closes
// the connection. It returns what was read; it fails if the server keeps the connection past the
// guard.
func (b *bundle) rawExchange(t *testing.T, req string) string {
	t.Helper()
	conn, err := net.Dial("tcp", b.host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the server held a stalled request (read so far %q): %v", got, err)
	}
	return string(got)
}

// TestSlowBodiesAreCutOff: a client that sends the headers and then stops (or trickles) the body
// is answered and disconnected once BodyTimeout passes, with or without a valid token; a
// long-poll receive still waits its whole timeout although it is longer than both deadlines.
func TestSlowBodiesAreCutOff(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, config: func(c *rest.Config) {
		c.BodyTimeout = 300 * time.Millisecond
		c.WriteTimeout = 300 * time.Millisecond
	}})
	b.createQueue(t, "q", "")
	head := "POST /q/messages HTTP/1.1\r\nHost: " + b.host + "\r\nContent-Length: 100\r\n"
	got := b.rawExchange(t, head+"Authorization: "+b.token(b.url+"/q/messages", "root")+"\r\n\r\nx")
	if !strings.HasPrefix(got, "HTTP/1.1 400 ") || !strings.Contains(got, "did not arrive within 300ms") {
		t.Errorf("stalled body with a token: %q; want a 400 saying the body did not arrive", got)
	}
	got = b.rawExchange(t, head+"\r\nx")
	if !strings.HasPrefix(got, "HTTP/1.1 401 ") {
		t.Errorf("stalled body without a token: %q; want 401, then the connection closed", got)
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("counts = %+v; want nothing stored", c)
	}

	// A receive waits 1 s, longer than the body and write deadlines, and is answered normally.
	r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=1"})
	r.want(t, "receive waiting past the deadlines", http.StatusNoContent)
	b.send(t, "q", "after", nil)
	r = b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=1"}).want(t, "receive", http.StatusOK)
	if r.body != "after" {
		t.Errorf("received %q; want after", r.body)
	}
}
