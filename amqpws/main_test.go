package amqpws_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/amqpws"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	amqpdoor "github.com/sbgate/sbgate/handlers/amqp"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// TestMain gives the package a real PostgreSQL server; each test clones its own database. It
// fails the run if a goroutine outlives the tests (dbtest.Main checks with goleak).
func TestMain(m *testing.M) { dbtest.Main(m) }

const rootKey = "key"

var testKeys = []sas.Key{{Name: "root", Primary: rootKey, Rights: sas.Manage}}

// testBroker is sbgate as serve runs it, on its own database: one AMQP server, reachable through
// the WebSocket endpoint of the REST API over http and over https.
type testBroker struct {
	store *store.Postgres
	amqp  *amqp.Server
	ws    *amqpws.Handler
	http  *httptest.Server
	https *httptest.Server
}

// newBroker starts a broker whose WebSocket handler has opts; everything stops when the test
// ends.
func newBroker(t *testing.T, opts amqpws.Options) *testBroker {
	t.Helper()
	t.Parallel()
	st := store.New(dbtest.NewPool(t), store.Options{})
	st.Start(context.Background())
	t.Cleanup(st.Stop)
	ah := amqpdoor.New(amqpdoor.Config{Store: st, Access: access.New(access.Config{Keys: testKeys, Source: st})})
	srv := amqp.NewServer(ah, amqp.Options{Authenticate: ah.Authenticate})
	ws := amqpws.New(srv, opts)
	h := rest.NewServer(st, rest.Config{Keys: testKeys, AMQPWebSocket: ws})
	b := &testBroker{store: st, amqp: srv, ws: ws, http: httptest.NewServer(h), https: httptest.NewTLSServer(h)}
	t.Cleanup(b.http.Close)
	t.Cleanup(b.https.Close)
	// Runs first: the tunnels end before their HTTP servers close.
	t.Cleanup(func() {
		_ = srv.Close()
		_ = ws.Close()
	})
	return b
}

func (b *testBroker) createQueue(t *testing.T, name string) {
	t.Helper()
	if _, err := b.store.CreateEntity(t.Context(), broker.KindQueue, name, broker.DefaultProperties(broker.KindQueue)); err != nil {
		t.Fatal(err)
	}
}

// waitEmpty waits until the queue holds no message.
func (b *testBroker) waitEmpty(t *testing.T, queue string) {
	t.Helper()
	eventually.True(t, queue+" empty", func() bool {
		e, err := b.store.GetEntity(t.Context(), queue)
		return err == nil && e.Counts.Total() == 0
	})
}

// waitTunnels waits until the handler serves n tunnels.
func (b *testBroker) waitTunnels(t *testing.T, n int) {
	t.Helper()
	eventually.True(t, "open tunnels", func() bool { return amqpws.OpenTunnels(b.ws) == n })
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// server is the test server of the listener: https or plain http.
func (b *testBroker) server(tls bool) *httptest.Server {
	if tls {
		return b.https
	}
	return b.http
}

// wsURL is the WebSocket URL of path on the listener.
func (b *testBroker) wsURL(tls bool, path string) string {
	return "ws" + strings.TrimPrefix(b.server(tls).URL, "http") + path
}

// dial opens a WebSocket to url on the listener offering the subprotocols.
func (b *testBroker) dial(t *testing.T, tls bool, url string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	if opts == nil {
		opts = &websocket.DialOptions{Subprotocols: []string{amqpws.SubprotocolAMQPWSB10}}
	}
	opts.HTTPClient = b.server(tls).Client()
	c, _, err := websocket.Dial(ctxT(t), url, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// sdkClient is a Go SDK client with the root key that reaches the broker only through
// WebSockets: ClientOptions.NewWebSocketConn dials what the SDK asks for
// (wss://host:port/$servicebus/websocket), over plain ws when tls is false, with a trailing
// slash when slash (as .NET sends), offering subprotocol. The subprotocol the server chose is
// sent to chosen, one per connection.
func (b *testBroker) sdkClient(t *testing.T, tls, slash bool, subprotocol string, chosen chan<- string) *azservicebus.Client {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimPrefix(b.server(tls).URL, "https://"), "http://")
	// No UseDevelopmentEmulator: it would only matter for TCP, which this client never dials.
	cs := "Endpoint=sb://" + host + "/;SharedAccessKeyName=root;SharedAccessKey=" + rootKey
	c, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1},
		NewWebSocketConn: func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
			u := args.Host
			if want := "wss://" + host + "/$servicebus/websocket"; u != want {
				t.Errorf("the SDK asks for %q, want %q", u, want)
			}
			if !tls {
				u = "ws" + strings.TrimPrefix(u, "wss")
			}
			if slash {
				u += "/"
			}
			ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
				Subprotocols: []string{subprotocol},
				HTTPClient:   b.server(tls).Client(),
			})
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Errorf("upgrade status %d", resp.StatusCode)
			}
			select {
			case chosen <- ws.Subprotocol():
			default:
			}
			// The SDK closes the net.Conn; its context is not the dial's, which ends with the
			// dial.
			return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// newHTTPServer serves h alone over plain HTTP; h is closed, then the server, when the test
// ends.
func newHTTPServer(t *testing.T, h *amqpws.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	return srv
}
