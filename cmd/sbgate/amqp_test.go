package main

import (
	"context"
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
	c, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over amqp")}, nil); err != nil {
		t.Fatal(err)
	}
	if st, _, body := call(t, http.MethodDelete, endpoint+"orders/messages/head?timeout=5", nil, ""); st != http.StatusOK || body != "over amqp" {
		t.Errorf("HTTP receive: %d %q", st, body)
	}
}
