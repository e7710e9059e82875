// Package compat runs real Service Bus client libraries against sbgate, so "existing clients
// work unchanged" is checked, not assumed. `make test` installs what they need (Node.js and the
// packages in each client's directory).
package compat_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/handlers"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const key = "Y29tcGF0LXRlc3Qta2V5LWZvci1zYmdhdGUtMTIzNDU2Nzg="

// TestAzureSB runs compat/azure-sb/smoke.js: the npm azure-sb client creates, reads, lists and
// deletes a queue, and sends, peek-locks, renews, unlocks, completes and receives messages with
// typed properties.
func TestAzureSB(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("azure-sb")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "azure-sb")); err != nil {
		t.Fatalf("azure-sb is not installed in compat/azure-sb (run `make test`, which runs npm ci there): %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found (run `make test`, which installs it): %v", err)
	}
	pool := dbtest.NewPool(t)
	st := store.New(pool, store.Options{})
	st.Start(context.Background())
	defer st.Stop()
	srv := httptest.NewServer(handlers.NewServer(st, handlers.Config{
		Keys: []sas.Key{{Name: "RootManageSharedAccessKey", Primary: key, Rights: sas.Manage}},
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "smoke.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CONN=Endpoint="+srv.URL+"/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+key)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all checks passed") {
		t.Fatalf("azure-sb against sbgate: %v\n%s", err, out)
	}
}
