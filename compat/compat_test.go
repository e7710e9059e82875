// Package compat runs real Service Bus client libraries against sbgate, so "existing clients
// work unchanged" is checked, not assumed. `make test` installs what they need (Node.js and the
// packages in each client's directory).
package compat_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const (
	key           = "Y29tcGF0LXRlc3Qta2V5LWZvci1zYmdhdGUtMTIzNDU2Nzg="
	sendListenKey = "c2VuZC1saXN0ZW4ta2V5LWZvci1zYmdhdGUtY29tcGF0"
	sendOnlyKey   = "c2VuZC1vbmx5LWtleS1mb3Itc2JnYXRlLWNvbXBhdA=="
	listenOnlyKey = "bGlzdGVuLW9ubHkta2V5LWZvci1zYmdhdGUtY29tcGF0"
)

// TestAzureSB runs compat/azure-sb/smoke.js: the npm azure-sb client creates, reads, lists and
// deletes queues and topics, subscriptions and rules, and sends, peek-locks, renews, unlocks,
// completes and receives messages with typed properties.
func TestAzureSB(t *testing.T) {
	t.Parallel()
	srv := newServer(t, httptest.NewServer)
	runNode(t, "azure-sb", "Endpoint="+srv.URL+"/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+key, nil)
}

// TestJSAdministrationClient runs compat/js-admin/smoke.js: the official
// ServiceBusAdministrationClient of @azure/service-bus, which speaks only https and throws on
// any description element it misses, manages queues, topics, subscriptions and rules.
func TestJSAdministrationClient(t *testing.T) {
	t.Parallel()
	srv := newServer(t, httptest.NewTLSServer)
	// Node trusts the test server's certificate through NODE_EXTRA_CA_CERTS.
	ca := writeCertPEM(t, srv.Certificate().Raw)
	host := strings.TrimPrefix(srv.URL, "https://")
	runNode(t, "js-admin", "Endpoint=sb://"+host+"/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+key,
		[]string{"NODE_EXTRA_CA_CERTS=" + ca})
}

// newServer serves sbgate's REST API with the test keys on a real database through start
// (httptest.NewServer or NewTLSServer).
func newServer(t *testing.T, start func(http.Handler) *httptest.Server) *httptest.Server {
	t.Helper()
	pool := dbtest.NewPool(t)
	st := store.New(pool, store.Options{})
	st.Start(context.Background())
	t.Cleanup(st.Stop)
	srv := start(rest.NewServer(st, rest.Config{Keys: testKeys}))
	t.Cleanup(srv.Close)
	return srv
}

// runNode runs dir/smoke.js with the connection string in CONN and fails unless it reports
// success. The client's packages must be installed (make test runs npm ci there).
func runNode(t *testing.T, dir, conn string, env []string) {
	t.Helper()
	runNodeScript(t, dir, "smoke.js", conn, env)
}

// runNodeScript runs dir/script as runNode runs smoke.js.
func runNodeScript(t *testing.T, dir, script, conn string, env []string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		t.Fatalf("the client in compat/%s is not installed (run `make test`, which runs npm ci there): %v", dir, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found (run `make test`, which installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CONN="+conn), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all checks passed") {
		t.Fatalf("%s against sbgate: %v\n%s", dir, err, out)
	}
}
