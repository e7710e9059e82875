package compat_test

import (
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
	b := startBroker(t, nil)
	b.createQueue(t, "ws-q", nil)
	conn := connString(strings.TrimPrefix(b.HTTPS, "https://"), "RootManageSharedAccessKey", false)
	runNodeScript(t, "js-admin", "websocket.js", conn, []string{"QUEUE=ws-q", "CA_FILE=" + b.CAFile})
}
