package program

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// TestServeReadyFile: serve -ready-file writes the endpoint, a working connection string and
// the embedded PostgreSQL's URL once it serves, and removes the file when it stops.
func TestServeReadyFile(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	path := filepath.Join(t.TempDir(), "ready.json")
	endpoint, stop, _ := startRun(t, env("SBGATE_DATA_DIR", dir, "SBGATE_SAS_KEY", testKey), "-ready-file", path)

	var ready readyInfo
	eventually.Within(time.Minute).True(t, "the ready file", func() bool {
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, &ready) == nil
	})
	if ready.Endpoint != endpoint {
		t.Errorf("ready endpoint %q; the log says %q", ready.Endpoint, endpoint)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("ready file mode: %v, %v; want 0600 (it holds the key)", fi.Mode(), err)
	}
	cs, err := sas.ParseConnectionString(ready.ConnectionString, "http")
	if err != nil {
		t.Fatalf("ready connection string %q: %v", ready.ConnectionString, err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, cs.Endpoint.String()+"ready-q", nil)
	req.Header.Set("Authorization", cs.Token(time.Now().Add(time.Hour)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("create a queue with the ready file's connection string: %d", resp.StatusCode)
	}
	// The AMQP connection string reaches the AMQP listener with the key.
	ac, err := sas.ParseConnectionString(ready.AMQPConnectionString, "http")
	if err != nil || !strings.HasSuffix(ready.AMQPConnectionString, ";UseDevelopmentEmulator=true") {
		t.Fatalf("ready AMQP connection string %q: %v", ready.AMQPConnectionString, err)
	}
	amqpConn, err := goamqp.Dial(t.Context(), "amqp://"+ac.Endpoint.Host, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(ac.KeyName, ac.Key)})
	if err != nil {
		t.Fatalf("dial the ready file's AMQP listener: %v", err)
	}
	if _, err := amqpConn.NewSession(t.Context(), nil); err != nil {
		t.Errorf("AMQP session: %v", err)
	}
	amqpConn.Close()
	conn, err := pgx.Connect(t.Context(), ready.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to the ready file's database URL %q: %v", ready.DatabaseURL, err)
	}
	var queues int
	err = conn.QueryRow(t.Context(), `SELECT count(*) FROM entities WHERE path = 'ready-q'`).Scan(&queues)
	conn.Close(context.Background())
	if err != nil || queues != 1 {
		t.Errorf("the queue in the ready file's database: %d, %v; want 1", queues, err)
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ready file still there after shutdown: %v", err)
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".ready.json*")); len(matches) > 0 {
		t.Errorf("temporary files left beside the ready file: %q", matches)
	}
}
