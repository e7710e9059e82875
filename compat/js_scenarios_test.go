package compat_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jsScenarioSkips are the common scenarios @azure/service-bus 7.9.5 cannot express, with the
// reason (read in its dist/index.js; compat/js-admin/scenarios.js says more).
var jsScenarioSkips = map[string]string{
	"list-sessions": "@azure/service-bus 7.9.5 has no public API to list sessions: ManagementClient.listMessageSessions " +
		"(get-message-sessions) is internal, and no client or receiver exposes it",
	"session-empty-id": `@azure/service-bus 7.9.5 cannot accept the session "": MessageSession.createRheaLink treats the ` +
		`session id "" as none and throws its own SessionCannotBeLocked ("No unlocked sessions available")`,
}

// TestJSScenarios runs compat/js-admin/scenarios.js: the common scenarios with the official
// @azure/service-bus ServiceBusClient pinned in compat/js-admin/package.json, over plain AMQP
// (UseDevelopmentEmulator=true) and, for the websockets scenario, over AMQP over WebSockets on
// the https listener through the `ws` package. SB_SCENARIOS (comma-separated) runs a subset;
// DEBUG=azure*,rhea* prints the SDK's and rhea's log.
func TestJSScenarios(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"@azure/service-bus", "ws"} {
		if _, err := os.Stat(filepath.Join("js-admin", "node_modules", pkg)); err != nil {
			t.Fatalf("%s is not installed in compat/js-admin (run `make compat-clients`, part of `make test`): %v", pkg, err)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found (run `make test`, which installs it): %v", err)
	}
	b := startBroker(t, nil)
	// @azure/service-bus manages rules with the rule manager of a subscription that must exist.
	entities, err := json.Marshal(scenarioEntities(t, b, "js-", true))
	if err != nil {
		t.Fatal(err)
	}
	httpsHost := strings.TrimPrefix(b.HTTPS, "https://")
	cmd := scenarioCommand(t, node, "scenarios.js")
	cmd.Dir = "js-admin"
	cmd.Env = append(os.Environ(),
		"SB_CONN="+connString(b.AMQP, "SendListen", true),
		"SB_CONN_ROOT="+connString(b.AMQP, "RootManageSharedAccessKey", true),
		// A key name that exists, with another key's secret.
		"SB_CONN_WRONG_KEY="+strings.Replace(connString(b.AMQP, "SendListen", true), sendListenKey, sendOnlyKey, 1),
		"SB_CONN_LISTEN_ONLY="+connString(b.AMQP, "ListenOnly", true),
		// The https listener, with no AMQP listener on its port: only the WebSocket tunnel at
		// /$servicebus/websocket serves it.
		"SB_WS_CONN="+connString(httpsHost, "SendListen", false),
		"SB_CA_FILE="+b.CAFile,
		"SB_ENTITIES="+string(entities),
		"SB_SCENARIOS="+os.Getenv("SB_SCENARIOS"),
	)
	start := time.Now()
	results := scenarioResults(t, cmd, wantedScenarios(), jsScenarioSkips)
	t.Logf("JS scenarios: %d reported in %s", len(results), time.Since(start).Round(time.Millisecond))
}
