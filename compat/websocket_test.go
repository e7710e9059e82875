package compat_test

import (
	"os"
	"strings"
	"testing"
)

// TestJSServiceBusClientWebSockets runs compat/js-admin/websocket.js: the official
// @azure/service-bus ServiceBusClient, given the `ws` package as webSocketOptions.webSocket,
// sends (a 200 KB message among them), receives, completes and dead-letters over AMQP over
// WebSockets, through the https server's /$servicebus/websocket: the connection string names the
// https port, where no AMQP listener is, so nothing but the tunnel can serve it.
func TestJSServiceBusClientWebSockets(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("js-admin/node_modules/ws"); err != nil {
		// make test runs npm ci only where node_modules is missing altogether.
		t.Fatalf("the ws package is not installed in compat/js-admin (run npm ci --prefix compat/js-admin): %v", err)
	}
	b := startBroker(t, nil)
	b.createQueue(t, "ws-q", nil)
	conn := connString(strings.TrimPrefix(b.HTTPS, "https://"), "RootManageSharedAccessKey", false)
	runNodeScript(t, "js-admin", "websocket.js", conn, []string{"QUEUE=ws-q", "CA_FILE=" + b.CAFile})
}
