package amqpws_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/sbgate/sbgate/amqpws"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/store"
)

// TestRefusals: what is no WebSocket upgrade an SDK sends is refused with the Service Bus error
// body, saying what to send, and never reaches the entity paths.
func TestRefusals(t *testing.T) {
	b := newBroker(t, amqpws.Options{})
	upgrade := map[string]string{
		"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
	}
	with := func(kv ...string) map[string]string {
		h := map[string]string{}
		for k, v := range upgrade {
			h[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(h, kv[i])
			} else {
				h[kv[i]] = kv[i+1]
			}
		}
		return h
	}
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		status             int
		detail             string
	}{
		{"plain GET", "GET", amqpws.Path, nil, 400, "The request is no WebSocket upgrade."},
		{"no subprotocol", "GET", amqpws.Path, upgrade, 400, "The request offers no subprotocol."},
		{"other subprotocols", "GET", amqpws.Path + "/", with("Sec-WebSocket-Protocol", "mqtt, wamp"), 400, `The request offers the subprotocols "mqtt, wamp", none of them AMQP.`},
		{"old version", "GET", amqpws.Path, with("Sec-WebSocket-Protocol", "amqp", "Sec-WebSocket-Version", "8"), 400, `The WebSocket version "8" is not supported.`},
		{"no key", "GET", amqpws.Path, with("Sec-WebSocket-Protocol", "amqp", "Sec-WebSocket-Key", ""), 400, "exactly one Sec-WebSocket-Key"},
		{"bad key", "GET", amqpws.Path, with("Sec-WebSocket-Protocol", "amqp", "Sec-WebSocket-Key", "c2hvcnQ="), 400, "The Sec-WebSocket-Key is not 16 bytes in base64."},
		// Other methods on the path are no operation; nor is it an entity's path.
		{"POST", "POST", amqpws.Path, with("Sec-WebSocket-Protocol", "amqp"), 404, "No service is hosted at the specified address."},
		{"PUT", "PUT", amqpws.Path, nil, 404, "No service is hosted at the specified address."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, b.http.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.detail) ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/xml") ||
				!strings.Contains(string(body), "<Code>") {
				t.Errorf("%s %s: %d %s\n%s\nwant %d with %q in the Service Bus error body", tc.method, tc.path, resp.StatusCode, resp.Header, body, tc.status, tc.detail)
			}
			if tc.status == 400 && !strings.Contains(string(body), "offering the subprotocol AMQPWSB10 or amqp") {
				t.Errorf("the refusal does not say what to send: %s", body)
			}
		})
	}
	// A WebSocket client offering no AMQP subprotocol is refused at the upgrade.
	_, resp, err := websocket.Dial(t.Context(), b.wsURL(false, amqpws.Path), &websocket.DialOptions{Subprotocols: []string{"mqtt"}})
	if err == nil || resp == nil || resp.StatusCode != 400 {
		t.Errorf("upgrade offering mqtt: %v, %+v", err, resp)
	}
	for _, path := range []string{"$servicebus", "$servicebus/websocket"} {
		if _, err := b.store.GetEntity(t.Context(), path); broker.ErrorCode(err) != broker.CodeNotFound {
			t.Errorf("entity %s: %v", path, err)
		}
	}
	b.waitTunnels(t, 0)
}

// TestNotEnabled: without a WebSocket handler the endpoint is 404, like /metrics.
func TestNotEnabled(t *testing.T) {
	t.Parallel()
	st := store.New(dbtest.NewPool(t), store.Options{})
	st.Start(context.Background())
	t.Cleanup(st.Stop)
	srv := httptest.NewServer(rest.NewServer(st, rest.Config{Keys: testKeys}))
	defer srv.Close()
	_, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http")+amqpws.Path, &websocket.DialOptions{Subprotocols: []string{amqpws.SubprotocolAMQPWSB10}})
	if err == nil || resp == nil || resp.StatusCode != 404 {
		t.Errorf("upgrade without a handler: %v, %+v", err, resp)
	}
}
