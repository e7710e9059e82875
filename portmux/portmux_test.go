package portmux_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"go.uber.org/goleak"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/portmux"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a ConnServer that reads what the client sends until it has want bytes, records
// them, answers "ok" and waits for the client to close.
type recorder struct {
	want int
	got  chan []byte
}

func newRecorder(want int) *recorder { return &recorder{want: want, got: make(chan []byte, 16)} }

func (r *recorder) ServeConn(ctx context.Context, c net.Conn) error {
	defer c.Close()
	buf := make([]byte, r.want)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	r.got <- buf
	if _, err := c.Write([]byte("ok")); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, c)
	return err
}

// served returns what the recorder read of the next connection it serves, failing the test
// (with what) when none is served within 30 seconds.
func (r *recorder) served(t *testing.T, what string) []byte {
	t.Helper()
	select {
	case got := <-r.got:
		return got
	case <-time.After(30 * time.Second):
		t.Fatal(what)
		return nil
	}
}

// fixture is a Mux on loopback with an http.Server on its HTTP listener, stopped when the test
// ends.
type fixture struct {
	mux    *portmux.Mux
	addr   string
	pool   *x509.CertPool // trusts the server certificate
	served chan error     // Serve's result
}

type fixtureOptions struct {
	tls         bool
	h2          bool // the TLS configuration offers h2 and http/1.1
	amqp        portmux.ConnServer
	timeout     time.Duration
	maxSniffing int
}

// echoRequest answers with the request's method, path, body and whether it came over TLS.
func echoRequest(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s %s tls=%v %s", r.Method, r.URL.Path, body, r.TLS != nil, r.Proto)
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := portmux.Options{AMQP: o.amqp, SniffTimeout: o.timeout, MaxSniffing: o.maxSniffing}
	f := &fixture{addr: ln.Addr().String(), served: make(chan error, 1)}
	if o.tls {
		// httptest's certificate covers 127.0.0.1; its server is only a way to get it.
		ts := httptest.NewUnstartedServer(nil)
		ts.StartTLS()
		ts.Close()
		opts.TLS = &tls.Config{Certificates: ts.TLS.Certificates, MinVersion: tls.VersionTLS12}
		if o.h2 {
			opts.TLS.NextProtos = []string{"h2", "http/1.1"}
		}
		f.pool = x509.NewCertPool()
		f.pool.AddCert(ts.Certificate())
	}
	f.mux = portmux.New(ln, opts)
	srv := &http.Server{Handler: http.HandlerFunc(echoRequest), TLSConfig: opts.TLS}
	portmux.ConfigureServer(srv)
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		_ = srv.Serve(f.mux.HTTPListener())
	}()
	go func() { f.served <- f.mux.Serve(context.Background()) }()
	t.Cleanup(func() {
		_ = f.mux.Close()
		_ = srv.Close()
		<-httpDone
	})
	return f
}

func (f *fixture) httpClient(h2 bool, alpn bool) *http.Client {
	tr := &http.Transport{ForceAttemptHTTP2: h2, DisableKeepAlives: !h2}
	if f.pool != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: f.pool}
		if !alpn {
			// Without ALPN, as Node's https module and most AMQP clients: the Mux must
			// look inside TLS.
			tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				d := tls.Dialer{Config: &tls.Config{RootCAs: f.pool, ServerName: "127.0.0.1"}}
				return d.DialContext(ctx, network, addr)
			}
		}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func post(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Post(url, "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	return string(b)
}

func TestHTTP(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	c := f.httpClient(false, false)
	if got, want := post(t, c, "http://"+f.addr+"/a/b"), "POST /a/b payload tls=false HTTP/1.1"; got != want {
		t.Errorf("plain HTTP = %q; want %q", got, want)
	}
}

func TestHTTPS(t *testing.T) {
	for _, tc := range []struct {
		name         string
		offerH2      bool
		clientH2     bool
		clientALPN   bool
		wantProtocol string
	}{
		// The client offers h2 and http/1.1; a server that offers neither (sbgate's TLS
		// configuration today) negotiates nothing and the Mux looks inside TLS.
		{"no ALPN agreed", false, true, true, "HTTP/1.1"},
		{"no ALPN sent", true, false, false, "HTTP/1.1"},
		{"ALPN http/1.1", true, false, true, "HTTP/1.1"},
		{"ALPN h2", true, true, true, "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{tls: true, h2: tc.offerH2})
			c := f.httpClient(tc.clientH2, tc.clientALPN)
			want := "POST /x payload tls=true " + tc.wantProtocol
			if got := post(t, c, "https://"+f.addr+"/x"); got != want {
				t.Errorf("HTTPS = %q; want %q", got, want)
			}
		})
	}
}

// amqpHeader is the SASL protocol header, as an AMQP client sends it first.
var amqpHeader = []byte("AMQP\x03\x01\x00\x00")

// TestAMQPReplaysEveryByte sends the header and more in writes of every size, so the Mux sees
// the first bytes split every way, and checks the server reads exactly what was sent.
func TestAMQPReplaysEveryByte(t *testing.T) {
	msg := append(append([]byte{}, amqpHeader...), "and the rest of the frame"...)
	for _, useTLS := range []bool{false, true} {
		for split := 1; split <= 9; split++ {
			t.Run(fmt.Sprintf("tls=%v/split=%d", useTLS, split), func(t *testing.T) {
				rec := newRecorder(len(msg))
				f := newFixture(t, fixtureOptions{tls: useTLS, amqp: rec})
				c := f.dial(t, useTLS)
				// Separate writes (with TCP_NODELAY, Go's default) reach the Mux as
				// separate reads unless the kernel merges them; either way the bytes must
				// arrive whole and in order.
				for rest := msg; len(rest) > 0; {
					n := min(split, len(rest))
					if _, err := c.Write(rest[:n]); err != nil {
						t.Fatal(err)
					}
					rest = rest[n:]
				}
				if got := rec.served(t, "the AMQP server got nothing"); !bytes.Equal(got, msg) {
					t.Errorf("server read %q; want %q", got, msg)
				}
				reply := make([]byte, 2)
				if _, err := io.ReadFull(c, reply); err != nil || string(reply) != "ok" {
					t.Errorf("reply = %q, %v; want ok", reply, err)
				}
			})
		}
	}
}

// dial connects to the Mux, over TLS without ALPN when useTLS, until the test ends.
func (f *fixture) dial(t *testing.T, useTLS bool) net.Conn {
	t.Helper()
	c, err := f.connect(useTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// connect connects to the Mux, over TLS without ALPN when useTLS; the caller closes the
// connection.
func (f *fixture) connect(useTLS bool) (net.Conn, error) {
	if !useTLS {
		return net.Dial("tcp", f.addr)
	}
	c, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: f.pool, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err // not a nil *tls.Conn in a non-nil net.Conn
	}
	return c, nil
}

// refuseAll is an amqp.Handler whose connections refuse every link.
type refuseAll struct{}

func (refuseAll) Connect(*amqp.Conn) (amqp.ConnHandler, error) { return refuseConn{}, nil }

type refuseConn struct{}

func (refuseConn) Attach(req *amqp.AttachRequest) {
	go func() { _ = req.Refuse(&amqp.Error{Condition: amqp.ErrCondNotFound, Description: "nothing here"}) }()
}
func (refuseConn) SessionEnded(*amqp.Session, error) {}
func (refuseConn) Closed(error)                      {}

// TestRealAMQPServer serves sbgate's AMQP engine through the Mux to the go-amqp client (what
// the Go SDK uses), plain and over TLS, on the same port as HTTP.
func TestRealAMQPServer(t *testing.T) {
	srv := amqp.NewServer(refuseAll{}, amqp.Options{})
	defer srv.Close()
	f := newFixture(t, fixtureOptions{tls: true, amqp: srv})
	for _, scheme := range []string{"amqp", "amqps"} {
		t.Run(scheme, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			conn, err := goamqp.Dial(ctx, scheme+"://"+f.addr, &goamqp.ConnOptions{
				SASLType:  goamqp.SASLTypeAnonymous(),
				TLSConfig: &tls.Config{RootCAs: f.pool, ServerName: "127.0.0.1"},
			})
			if err != nil {
				t.Fatalf("dial %s: %v", scheme, err)
			}
			defer conn.Close()
			sess, err := conn.NewSession(ctx, nil)
			if err != nil {
				t.Fatalf("session: %v", err)
			}
			_, err = sess.NewSender(ctx, "missing", nil)
			var ae *goamqp.Error
			if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound {
				t.Errorf("attach = %v; want the server's amqp:not-found", err)
			}
		})
	}
	if got := post(t, f.httpClient(true, true), "https://"+f.addr+"/same-port"); !strings.HasPrefix(got, "POST /same-port payload tls=true") {
		t.Errorf("HTTPS next to AMQP = %q", got)
	}
}

// waitClosed fails the test unless the server closes c (a read ends in EOF or a reset) within
// limit; a trickle, if set, keeps writing one byte of it every 10 ms meanwhile.
func waitClosed(t *testing.T, c net.Conn, limit time.Duration, trickle []byte) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if len(trickle) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := c.Write(trickle[i%len(trickle) : i%len(trickle)+1]); err != nil {
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open after %s", limit)
	}
}

// TestSniffDeadline: clients that do not say what they speak in time are closed at the
// deadline set when they connected, however they trickle.
func TestSniffDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	// A ClientHello record header announcing a long record, then endless bytes of it.
	helloHeader := []byte{0x16, 0x03, 0x01, 0x40, 0x00}
	for _, tc := range []struct {
		name    string
		tls     bool
		send    []byte // sent at once
		trickle []byte // then one byte every 10 ms, for ever
		inTLS   bool   // complete a TLS handshake first
	}{
		{name: "silent"},
		{name: "three bytes of AMQP", send: []byte("AMQ")},
		{name: "one byte of a TLS record", tls: true, send: []byte{0x16}},
		{name: "ClientHello trickled", tls: true, send: helloHeader, trickle: []byte{0x01, 0x02, 0x03}},
		{name: "silent inside TLS", tls: true, inTLS: true},
		{name: "three bytes of AMQP inside TLS", tls: true, inTLS: true, send: []byte("AMQ")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(1)
			f := newFixture(t, fixtureOptions{tls: tc.tls, amqp: rec, timeout: timeout})
			c := f.dial(t, tc.inTLS)
			if len(tc.send) > 0 {
				if _, err := c.Write(tc.send); err != nil {
					t.Fatal(err)
				}
			}
			waitClosed(t, c, 30*time.Second, tc.trickle)
			select {
			case got := <-rec.got:
				t.Errorf("the AMQP server got %q", got)
			default:
			}
		})
	}
}

// TestTLSRefusedWithoutConfig: a ClientHello to a Mux without TLS is closed, not handed to HTTP.
func TestTLSRefusedWithoutConfig(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, err := tls.Dial("tcp", f.addr, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		t.Fatal("a TLS handshake with a Mux without TLS succeeded")
	}
}

// TestAMQPRefusedWithoutServer: with no AMQP server, an AMQP client is closed.
func TestAMQPRefusedWithoutServer(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	c := f.dial(t, false)
	if _, err := c.Write(amqpHeader); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c, 30*time.Second, nil)
}

// TestCloseClosesEverything: Close ends connections being sniffed, served by AMQP and served by
// HTTP (an idle keep-alive one included), and Serve returns ErrClosed.
func TestCloseClosesEverything(t *testing.T) {
	rec := newRecorder(len(amqpHeader))
	f := newFixture(t, fixtureOptions{tls: true, amqp: rec})

	sniffing := f.dial(t, false)
	serving := f.dial(t, true)
	if _, err := serving.Write(amqpHeader); err != nil {
		t.Fatal(err)
	}
	<-rec.got
	keepAlive := f.dial(t, false)
	if _, err := io.WriteString(keepAlive, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(keepAlive), nil)
	if err != nil {
		t.Fatalf("keep-alive request: %v", err)
	}
	resp.Body.Close()

	if err := f.mux.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, c := range map[string]net.Conn{"sniffing": sniffing, "AMQP": serving, "HTTP": keepAlive} {
		t.Run(name, func(t *testing.T) { waitClosed(t, c, 30*time.Second, nil) })
	}
	if err := <-f.served; !errors.Is(err, portmux.ErrClosed) {
		t.Errorf("Serve = %v; want ErrClosed", err)
	}
	if _, err := net.Dial("tcp", f.addr); err == nil {
		t.Error("the listener still accepts after Close")
	}
	if err := f.mux.Serve(context.Background()); !errors.Is(err, portmux.ErrClosed) {
		t.Errorf("Serve after Close = %v; want ErrClosed", err)
	}
}

// TestServeEndsWithContext: Serve returns ctx's error when ctx ends, having closed the Mux.
func TestServeEndsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(len(amqpHeader))
	m := portmux.New(ln, portmux.Options{AMQP: rec})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- m.Serve(ctx) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(amqpHeader); err != nil {
		t.Fatal(err)
	}
	<-rec.got
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v; want context.Canceled", err)
	}
	waitClosed(t, c, 30*time.Second, nil)
	if err := m.Close(); err != nil {
		t.Errorf("Close after the context ended: %v", err)
	}
}

// TestHTTPListenerClosed: closing the HTTP listener (as http.Server.Close does) refuses HTTP
// clients and keeps AMQP served.
func TestHTTPListenerClosed(t *testing.T) {
	rec := newRecorder(len(amqpHeader))
	f := newFixture(t, fixtureOptions{amqp: rec})
	if err := f.mux.HTTPListener().Close(); err != nil {
		t.Fatal(err)
	}
	c := f.dial(t, false)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c, 30*time.Second, nil)
	a := f.dial(t, false)
	if _, err := a.Write(amqpHeader); err != nil {
		t.Fatal(err)
	}
	rec.served(t, "AMQP not served after the HTTP listener closed")
}

// TestManyConnections: concurrent clients of every kind are each served their own protocol,
// and the Mux's goroutines end with their connections.
func TestManyConnections(t *testing.T) {
	rec := newRecorder(len(amqpHeader))
	f := newFixture(t, fixtureOptions{tls: true, h2: true, amqp: rec})
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 4 {
			case 0, 1:
				c, err := f.connect(i%4 == 1)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				if _, err := c.Write(amqpHeader); err != nil {
					errs <- err
					return
				}
				reply := make([]byte, 2)
				if _, err := io.ReadFull(c, reply); err != nil || string(reply) != "ok" {
					errs <- fmt.Errorf("AMQP client %d: reply %q, %v", i, reply, err)
				}
			case 2, 3:
				scheme := "http"
				if i%4 == 3 {
					scheme = "https"
				}
				c := f.httpClient(true, true)
				defer c.CloseIdleConnections()
				resp, err := c.Get(scheme + "://" + f.addr + "/")
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for range 8 {
		<-rec.got
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every client closed its connection: the Mux's goroutines for them end.
	eventually.NoError(t, "the Mux's goroutines to end", func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines remain; %d before the clients", n, before)
		}
		return nil
	})
}

// TestMaxSniffing: past Options.MaxSniffing, silent connections make room by closing the
// oldest of them, long before the sniff deadline, and a real client is served.
func TestMaxSniffing(t *testing.T) {
	rec := newRecorder(len(amqpHeader))
	f := newFixture(t, fixtureOptions{amqp: rec, maxSniffing: 2, timeout: 10 * time.Minute})
	silent := []net.Conn{f.dial(t, false), f.dial(t, false)}
	// Not silent in fact: each sends a byte short of a decision. The Mux accepts in the
	// order the clients connected, so both are sniffing when the third arrives.
	for _, c := range silent {
		if _, err := c.Write([]byte("A")); err != nil {
			t.Fatal(err)
		}
	}
	client := f.dial(t, false)
	if _, err := client.Write(amqpHeader); err != nil {
		t.Fatal(err)
	}
	rec.served(t, "the AMQP client was not served")
	waitClosed(t, silent[0], 30*time.Second, nil)
	if got := f.mux.Evicted(); got != 1 {
		t.Errorf("Evicted() = %d; want 1", got)
	}
	// The second silent connection is still open: a read waits.
	_ = silent[1].SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if _, err := silent[1].Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("the newer silent connection: read = %v; want it still open", err)
	}
}
