package program

import (
	"context"
	"crypto/tls"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbgate/sbgate/db/dbtest"
)

// TestServeAMQP checks that sbgate serve prints an AMQP connection string the Go SDK accepts
// as is (with the key filled in), and that a message sent over AMQP is received over HTTP.
func TestServeAMQP(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	endpoint, stop, out := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey))
	defer stop()
	m := regexp.MustCompile(`sbgate serving AMQP" endpoint=\S+ connection_string="?([^"\s]+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no AMQP connection string in the log:\n%s", out)
	}
	cs := strings.Replace(m[1], "<key>", testKey, 1)
	if !strings.Contains(cs, "UseDevelopmentEmulator=true") {
		t.Errorf("connection string %s does not select plain AMQP", cs)
	}
	if st, _, body := call(t, http.MethodPut, endpoint+"orders", nil, ""); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, s := goSender(t, cs, nil, "orders")
	defer c.Close(context.Background())
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over amqp")}, nil); err != nil {
		t.Fatal(err)
	}
	if st, _, body := call(t, http.MethodDelete, endpoint+"orders/messages/head?timeout=5", nil, ""); st != http.StatusOK || body != "over amqp" {
		t.Errorf("HTTP receive: %d %q", st, body)
	}
}

// TestServeAMQPS: with a certificate sbgate also serves AMQP over TLS, and the Go SDK, trusting
// the certificate, sends with the printed connection string (no UseDevelopmentEmulator: TLS).
func TestServeAMQPS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSignedCert(t)
	url := dbtest.NewDatabase(t)
	endpoint, stop, out := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey,
		"SBGATE_TLS_CERT", certFile, "SBGATE_TLS_KEY", keyFile))
	defer stop()
	m := regexp.MustCompile(`sbgate serving AMQPS" endpoint=\S+ connection_string="?([^"\s]+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no AMQPS connection string in the log:\n%s", out)
	}
	cs := strings.Replace(m[1], "<key>", testKey, 1)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if st := signedStatus(t, client, http.MethodPut, endpoint+"orders", "RootManageSharedAccessKey", testKey); st != http.StatusCreated {
		t.Fatalf("create queue: %d", st)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// The Go SDK verifies the certificate against "host:port" when the endpoint has a port, which
	// no certificate matches: a client of a port other than 5671 names the host itself.
	c, s := goSender(t, cs, &azservicebus.ClientOptions{
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"},
	}, "orders")
	defer c.Close(context.Background())
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over amqps")}, nil); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r, err := c.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "over amqps" {
		t.Fatalf("receive: %v %v", msgs, err)
	}
}
