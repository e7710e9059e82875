package rest_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbgate/sbgate/api/client"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// TestMain gives the package a real PostgreSQL server; each test clones its own database. After
// the run dbtest.Main fails the binary if any goroutine leaked (goleak.Find): with every test
// running in parallel that is the check that means something, since a per-test snapshot would
// see the other tests' goroutines come and go.
func TestMain(m *testing.M) { dbtest.Main(m) }

// Keys every test server knows. The names are the ones the tests sign with.
var testKeys = []sas.Key{
	{Name: "root", Primary: "key", Rights: sas.Manage},
	{Name: "sender", Primary: "k2", Rights: sas.Send},
	{Name: "listener", Primary: "k3", Rights: sas.Listen},
	{Name: "rotated", Primary: "old-primary", Secondary: "k4", Rights: sas.Manage},
}

func keyOf(name string) string {
	for _, k := range testKeys {
		if k.Name == name {
			if k.Secondary != "" {
				return k.Secondary
			}
			return k.Primary
		}
	}
	return "no-such-key"
}

// clock is the store's and the handlers' clock; tests move it to expire locks and tokens without
// sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

// start is a Sunday, which the RFC 1123 dates in the assertions spell out.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newClock() *clock { return &clock{t: start} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// bundle is what an HTTP test works with.
type bundle struct {
	url   string // http://127.0.0.1:port
	host  string // 127.0.0.1:port
	store *store.Postgres
	clock *clock
	now   func() time.Time // the clock the server uses (the fake one unless realClock)
	http  *http.Client
	api   *client.ClientWithResponses // signs every request with the root key
	// config adjusts the handlers' configuration (setupOptions.config).
	config func(*rest.Config)
	// namespaceWide makes do sign its default token for the whole namespace rather than for
	// the request's URL: such a token may name any entity as a forwarding target.
	namespaceWide bool

	trustedProxies []netip.Prefix
}

type setupOptions struct {
	realClock bool
	// wrap, when set, puts something between the handlers and the store.
	wrap func(broker.Store) broker.Store
	// config, when set, adjusts the handlers' configuration.
	config func(*rest.Config)
	// trustedProxies is rest.Config.TrustedProxies.
	trustedProxies []netip.Prefix
}

// setup starts a server over a fresh database and store. Everything is torn down when the test
// ends.
func setup(t *testing.T, opts ...setupOptions) *bundle {
	t.Helper()
	t.Parallel()
	var o setupOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	b := &bundle{clock: newClock(), config: o.config, trustedProxies: o.trustedProxies}
	b.now = b.clock.Now
	if o.realClock {
		b.now = time.Now
	}
	pool := dbtest.NewPool(t)
	b.store = store.New(pool, store.Options{Now: b.now, CheckCopy: rest.CheckDeliverable}) // as sbgate serve has it
	b.store.Start(context.Background())
	t.Cleanup(b.store.Stop)
	var st broker.Store = b.store
	if o.wrap != nil {
		st = o.wrap(st)
	}
	b.serve(t, st)
	return b
}

// serve runs the handlers over st on a test server.
func (b *bundle) serve(t *testing.T, st broker.Store) {
	t.Helper()
	cfg := rest.Config{Keys: testKeys, Now: b.now, TrustedProxies: b.trustedProxies}
	if b.config != nil {
		b.config(&cfg)
	}
	srv := httptest.NewServer(rest.NewServer(st, cfg))
	t.Cleanup(srv.Close) // also closes the idle connections of srv.Client()
	b.url = srv.URL
	b.host = strings.TrimPrefix(srv.URL, "http://")
	b.http = srv.Client()
	api, err := client.NewClientWithResponses(srv.URL, client.WithHTTPClient(b.http),
		client.WithRequestEditorFn(b.signWith("root")))
	if err != nil {
		t.Fatal(err)
	}
	b.api = api
}

// token signs resource with the named key, valid for an hour from the server's clock.
func (b *bundle) token(resource, keyName string) string {
	return sas.Sign(resource, keyName, keyOf(keyName), b.now().Add(time.Hour))
}

// signWith is a request editor for the generated client: it signs the request's own URL, as
// azure-sb does.
func (b *bundle) signWith(keyName string) client.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", b.token(req.URL.String(), keyName))
		return nil
	}
}

// call is one raw HTTP request.
type call struct {
	method string
	path   string // escaped path and query, sent as is: "/q/messages?timeout=0"
	body   string
	// header values are set under exactly the given names.
	header map[string]string
	// key signs the request (default root); "-" sends no token.
	key string
	// host overrides the Host header.
	host string
}

// result is a response read to the end.
type result struct {
	status int
	header http.Header
	body   string
	// chunked is whether the body came with Transfer-Encoding: chunked.
	chunked bool
}

func (b *bundle) do(t *testing.T, c call) result {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), c.method, b.url+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	if c.body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, v := range c.header {
		req.Header[k] = []string{v}
	}
	if c.host != "" {
		req.Host = c.host
	}
	switch c.key {
	case "-":
	case "":
		if b.namespaceWide {
			req.Header.Set("Authorization", b.token(b.url+"/", "root"))
		} else {
			req.Header.Set("Authorization", b.token(b.url+c.path, "root"))
		}
	default:
		req.Header.Set("Authorization", b.token(b.url+c.path, c.key))
	}
	resp, err := b.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", c.method, c.path, err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: string(body),
		chunked: len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"}
}

// want fails the test unless the response has the status.
func (r result) want(t *testing.T, what string, status int) result {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d; want %d\nheaders: %v\nbody: %s", what, r.status, status, r.header, r.body)
	}
	return r
}

// createQueue creates a queue with the given QueueDescription children (may be empty).
func (b *bundle) createQueue(t *testing.T, path, description string) {
	t.Helper()
	b.do(t, call{method: http.MethodPut, path: "/" + path, body: entryXML(description),
		header: map[string]string{"Content-Type": "application/atom+xml;type=entry;charset=utf-8"}}).
		want(t, "create queue "+path, http.StatusCreated)
}

func entryXML(description string) string {
	return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" ` +
		`xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` + description + `</QueueDescription></content></entry>`
}

// send posts one message with the given headers and expects 201.
func (b *bundle) send(t *testing.T, queue, body string, header map[string]string) {
	t.Helper()
	b.do(t, call{method: http.MethodPost, path: "/" + queue + "/messages", body: body, header: header, key: "sender"}).
		want(t, "send to "+queue, http.StatusCreated)
}

// counts reads the queue's counts from the store.
func (b *bundle) counts(t *testing.T, path string) broker.Counts {
	t.Helper()
	e, err := b.store.GetEntity(t.Context(), path)
	if err != nil {
		t.Fatalf("GetEntity(%q): %v", path, err)
	}
	return e.Counts
}

// serviceBusError is the error body every failure has.
type serviceBusError struct {
	XMLName xml.Name `xml:"Error"`
	Code    int      `xml:"Code"`
	Detail  string   `xml:"Detail"`
}

var trackingRE = regexp.MustCompile(` TrackingId:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, SystemTracker:[^,]+, Timestamp:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// wantError checks a Service Bus error response: the status, the XML content type, a numeric
// Code equal to the status, a Detail that contains detail and ends with the tracking suffix.
func (r result) wantError(t *testing.T, what string, status int, detail string) serviceBusError {
	t.Helper()
	r.want(t, what, status)
	if ct := r.header.Get("Content-Type"); ct != "application/xml; charset=utf-8" {
		t.Errorf("%s: Content-Type = %q; want %q", what, ct, "application/xml; charset=utf-8")
	}
	var e serviceBusError
	if err := xml.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("%s: error body %q: %v", what, r.body, err)
	}
	if !strings.HasPrefix(r.body, "<Error><Code>") {
		t.Errorf("%s: body = %q; want it to start with <Error><Code>", what, r.body)
	}
	if e.Code != status {
		t.Errorf("%s: Code = %d; want %d", what, e.Code, status)
	}
	if !strings.Contains(e.Detail, detail) {
		t.Errorf("%s: Detail = %q; want it to contain %q", what, e.Detail, detail)
	}
	if !trackingRE.MatchString(e.Detail) {
		t.Errorf("%s: Detail = %q; want it to end with the TrackingId/SystemTracker/Timestamp suffix", what, e.Detail)
	}
	return e
}

// brokerProperties decodes a BrokerProperties header, checking that its keys are in ordinal
// order as the service writes them.
func brokerProperties(t *testing.T, raw string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		t.Fatalf("BrokerProperties %q: not a JSON object", raw)
	}
	m := map[string]any{}
	prev := ""
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("BrokerProperties %q: %v", raw, err)
		}
		key := k.(string)
		if key <= prev {
			t.Errorf("BrokerProperties %q: key %q after %q; want ordinal order", raw, key, prev)
		}
		prev = key
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("BrokerProperties %q: %v", raw, err)
		}
		m[key] = v
	}
	return m
}

// settlePath is the path of a Location URL, which clients settle at.
func settlePath(t *testing.T, location string) string {
	t.Helper()
	u, err := url.Parse(location)
	if err != nil {
		t.Fatalf("Location %q: %v", location, err)
	}
	return u.EscapedPath()
}

func ptr[T any](v T) *T { return &v }
