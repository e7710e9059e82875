package amqp_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	amqpdoor "github.com/sbgate/sbgate/handlers/amqp"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// TestMain gives the package a real PostgreSQL server; each test clones its own database.
func TestMain(m *testing.M) { dbtest.Main(m) }

var testKeys = []sas.Key{
	{Name: "root", Primary: "key", Rights: sas.Manage},
	{Name: "sender", Primary: "k2", Rights: sas.Send},
	{Name: "listener", Primary: "k3", Rights: sas.Listen},
}

// testBroker is a store with both protocols in front of it, as sbgate serve runs them.
type testBroker struct {
	clock    *clock // the store's
	store    *store.Postgres
	amqpAddr string // 127.0.0.1:port
	httpURL  string
}

func newBroker(t *testing.T) *testBroker { return newBrokerWith(t, nil, nil) }

// newBrokerWith starts a broker whose AMQP layer checks token expiry against tokenNow (nil: the
// real clock, which the SDKs sign with) and, with wrap, reaches the store through what wrap
// makes of it.
func newBrokerWith(t *testing.T, tokenNow func() time.Time, wrap func(broker.Store) broker.Store) *testBroker {
	t.Helper()
	return newBrokerAccess(t, wrap, func(c *access.Config) { c.Now = tokenNow })
}

// newBrokerAccess starts a broker whose access layer is the test keys' changed by mod.
func newBrokerAccess(t *testing.T, wrap func(broker.Store) broker.Store, mod func(*access.Config)) *testBroker {
	t.Helper()
	t.Parallel()
	return startBroker(t, wrap, mod)
}

// newBrokerConfig starts a broker whose AMQP configuration is the tests' changed by mod.
func newBrokerConfig(t *testing.T, mod func(*amqpdoor.Config)) *testBroker {
	t.Helper()
	t.Parallel()
	return startBrokerConfig(t, nil, nil, mod)
}

// newBrokerAlone starts a broker for a test that measures the process (its heap), so it does
// not run beside the package's parallel tests: they wait until it ends.
func newBrokerAlone(t *testing.T) *testBroker {
	t.Helper()
	return startBroker(t, nil, nil)
}

func startBroker(t *testing.T, wrap func(broker.Store) broker.Store, mod func(*access.Config)) *testBroker {
	t.Helper()
	return startBrokerConfig(t, wrap, mod, nil)
}

func startBrokerConfig(t *testing.T, wrap func(broker.Store) broker.Store, mod func(*access.Config), cfgMod func(*amqpdoor.Config)) *testBroker {
	t.Helper()
	clk := &clock{t: time.Now()}
	st := store.New(dbtest.NewPool(t), store.Options{Now: clk.Now})
	st.Start(context.Background())
	t.Cleanup(st.Stop)

	var amqpStore broker.Store = st
	if wrap != nil {
		amqpStore = wrap(st)
	}
	ac := access.Config{Keys: testKeys, Source: st}
	if mod != nil {
		mod(&ac)
	}
	cfg := amqpdoor.Config{
		Store:  amqpStore,
		Access: access.New(ac),
		// Store receives wait this long before a link asks again, so a receive notices a move
		// of the test clock (the store's timers run on the real one).
		MaxReceiveWait: 200 * time.Millisecond,
	}
	if cfgMod != nil {
		cfgMod(&cfg)
	}
	h := amqpdoor.New(cfg)
	srv := amqp.NewServer(h, amqp.Options{Authenticate: h.Authenticate})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(context.Background(), ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	hs := httptest.NewServer(rest.NewServer(st, rest.Config{Keys: testKeys}))
	t.Cleanup(hs.Close)
	return &testBroker{clock: clk, store: st, amqpAddr: ln.Addr().String(), httpURL: hs.URL}
}

// connString is what sbgate prints for its AMQP listener.
func (b *testBroker) connString(key string) string {
	k := map[string]string{"root": "key", "sender": "k2", "listener": "k3", "wrong": "nope"}[key]
	name := key
	if key == "wrong" {
		name = "root"
	}
	return "Endpoint=sb://" + b.amqpAddr + ";SharedAccessKeyName=" + name + ";SharedAccessKey=" + k + ";UseDevelopmentEmulator=true"
}

func (b *testBroker) client(t *testing.T, key string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(b.connString(key), &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (b *testBroker) createQueue(t *testing.T, name string, mut func(*broker.Properties)) *broker.Entity {
	t.Helper()
	p := broker.DefaultProperties(broker.KindQueue)
	if mut != nil {
		mut(&p)
	}
	e, err := b.store.CreateEntity(t.Context(), broker.KindQueue, name, p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// httpDo sends one HTTP request signed with the root key.
func (b *testBroker) httpDo(t *testing.T, method, path, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.httpURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = []string{v}
	}
	req.Header.Set("Authorization", sas.Sign(b.httpURL+path, "root", "key", time.Now().Add(time.Hour)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// clock is the store's clock, which tests move instead of sleeping. Tokens are checked against
// the real clock: the SDK signs them with it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

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

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSender is a sender of c to entity, closed when the test ends.
func newSender(t *testing.T, c *azservicebus.Client, entity string) *azservicebus.Sender {
	t.Helper()
	s, err := c.NewSender(entity, nil)
	return closedAtEnd(t, s, err)
}

// newReceiver is a receiver of c for queue (opts may be nil), closed when the test ends.
func newReceiver(t *testing.T, c *azservicebus.Client, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := c.NewReceiverForQueue(queue, opts)
	return closedAtEnd(t, r, err)
}

// closedAtEnd is v, opened (or failed to open, with err), closed when the test ends.
func closedAtEnd[T interface{ Close(context.Context) error }](t *testing.T, v T, err error) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close(context.Background()) })
	return v
}

// sendBodies sends one message a body through s.
func sendBodies(t *testing.T, ctx context.Context, s *azservicebus.Sender, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// sdkQueue is a broker with the queue name (mut may set its properties), a client with the root
// key, the test's context and a sender to the queue.
func sdkQueue(t *testing.T, name string, mut func(*broker.Properties)) (*testBroker, *azservicebus.Client, context.Context, *azservicebus.Sender) {
	t.Helper()
	b := newBroker(t)
	b.createQueue(t, name, mut)
	c := b.client(t, "root")
	return b, c, ctxT(t), newSender(t, c, name)
}
