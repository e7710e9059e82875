package program

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// TestServeAMQPOverWebSockets: sbgate serves AMQP over WebSockets on its HTTP and HTTPS listener,
// also with the AMQP listeners off; the Go SDK sends and receives through the endpoint it logs,
// each tunnel is counted in the request metrics, and shutting down ends open tunnels.
func TestServeAMQPOverWebSockets(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[secure], func(t *testing.T) {
			t.Parallel()
			args := []string{"-amqp-listen=off", "-amqps-listen=off"}
			vars := []string{"DATABASE_URL", dbtest.NewDatabase(t), "SBGATE_SAS_KEY", testKey}
			httpClient := http.DefaultClient
			if secure {
				certFile, keyFile, pool := selfSignedCert(t)
				vars = append(vars, "SBGATE_TLS_CERT", certFile, "SBGATE_TLS_KEY", keyFile)
				httpClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			}
			endpoint, stop, out := startRun(t, env(vars...), args...)
			m := regexp.MustCompile(`sbgate serving AMQP over WebSockets" endpoint=(\S+)`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no WebSocket endpoint in the log:\n%s", out)
			}
			wsURL := m[1]
			host := strings.TrimSuffix(strings.SplitN(endpoint, "://", 2)[1], "/")
			if want := map[bool]string{false: "ws://", true: "wss://"}[secure] + host + "/$servicebus/websocket"; wsURL != want {
				t.Errorf("logged endpoint %s, want %s", wsURL, want)
			}
			if strings.Contains(out.String(), `sbgate serving AMQP"`) || strings.Contains(out.String(), `sbgate serving AMQPS"`) {
				t.Errorf("AMQP listeners served though turned off:\n%s", out)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			var tunnelsMu sync.Mutex
			var tunnels []*endWatch
			c, err := azservicebus.NewClientFromConnectionString(
				"Endpoint=sb://"+host+"/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+testKey,
				&azservicebus.ClientOptions{
					RetryOptions: azservicebus.RetryOptions{MaxRetries: -1},
					NewWebSocketConn: func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
						ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}, HTTPClient: httpClient})
						if err != nil {
							return nil, err
						}
						tunnel := &endWatch{Conn: websocket.NetConn(context.Background(), ws, websocket.MessageBinary), ended: make(chan struct{})}
						tunnelsMu.Lock()
						tunnels = append(tunnels, tunnel)
						tunnelsMu.Unlock()
						return tunnel, nil
					},
				})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			req, _ := http.NewRequest(http.MethodPut, endpoint+"orders", nil)
			req.Header.Set("Authorization", sas.Sign(endpoint+"orders", "RootManageSharedAccessKey", testKey, time.Now().Add(time.Hour)))
			if resp, err := httpClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
				t.Fatalf("create queue: %v %v", resp, err)
			} else {
				resp.Body.Close()
			}
			s, err := c.NewSender("orders", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over websockets")}, nil); err != nil {
				t.Fatalf("send: %v\n%s", err, out)
			}
			r, err := c.NewReceiverForQueue("orders", nil)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := r.ReceiveMessages(ctx, 1, nil)
			if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "over websockets" {
				t.Fatalf("receive: %v %v", msgs, err)
			}
			if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
				t.Fatalf("complete: %v", err)
			}

			if !secure {
				// The open tunnel is an AMQP connection like the listeners' (they are off here:
				// it is the only one); once it ends it is one request of the AmqpWebSocket
				// operation, answered 101.
				waitMetric(t, httpClient, endpoint, "sbgate_amqp_connections 1")
				if err := c.Close(ctx); err != nil {
					t.Fatal(err)
				}
				waitMetric(t, httpClient, endpoint, `sbgate_http_requests_total{code="101",operation="AmqpWebSocket"} 1`)
				waitMetric(t, httpClient, endpoint, "sbgate_amqp_connections 0")
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				return
			}
			// Shutting down ends the tunnel of a waiting receiver: the client's WebSocket
			// reads its end.
			waiting := make(chan struct{})
			go func() {
				defer close(waiting)
				_, _ = r.ReceiveMessages(ctx, 1, nil)
			}()
			tunnelsMu.Lock()
			for _, tunnel := range tunnels {
				select {
				case <-tunnel.ended:
					t.Fatal("a tunnel ended before sbgate stopped")
				default:
				}
			}
			tunnelsMu.Unlock()
			if err := stop(); err != nil {
				t.Fatalf("stop: %v\n%s", err, out)
			}
			tunnelsMu.Lock()
			defer tunnelsMu.Unlock()
			for _, tunnel := range tunnels {
				select {
				case <-tunnel.ended:
				case <-ctx.Done():
					t.Fatal("a tunnel outlived sbgate")
				}
			}
			<-waiting
		})
	}
}

// endWatch is a client's tunnel that closes ended when it ends: a read fails, or the client
// closes it (as go-amqp does when the server closed the AMQP connection).
type endWatch struct {
	net.Conn
	once  sync.Once
	ended chan struct{}
}

func (w *endWatch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if err != nil {
		w.once.Do(func() { close(w.ended) })
	}
	return n, err
}

func (w *endWatch) Close() error {
	w.once.Do(func() { close(w.ended) })
	return w.Conn.Close()
}

// waitMetric polls sbgate's /metrics until a line is metric.
func waitMetric(t *testing.T, client *http.Client, endpoint, metric string) {
	t.Helper()
	eventually.NoError(t, metric+" in the metrics", func() error {
		resp, err := client.Get(endpoint + "metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if slices.Contains(strings.Split(string(body), "\n"), metric) {
			return nil
		}
		return fmt.Errorf("no %s in the metrics:\n%s", metric, body)
	})
}
