package program

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// TestShutdownAnswersWaitingReceivers: 200 receivers waiting on an empty queue when the server
// is told to stop are answered 204 at once, and the server stops well inside its grace period
// (30 s) instead of holding them to it and answering 500.
func TestShutdownAnswersWaitingReceivers(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	endpoint, stop, out := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey))
	if st, _, body := call(t, http.MethodPut, endpoint+"q", nil, ""); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	const receivers = 200
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: receivers, MaxIdleConnsPerHost: receivers}}
	defer client.CloseIdleConnections()
	var done sync.WaitGroup
	done.Add(receivers)
	results := make(chan string, receivers)
	target := endpoint + "q/messages/head?timeout=60"
	for range receivers {
		go func() {
			defer done.Done()
			req, _ := http.NewRequest(http.MethodDelete, target, nil)
			req.Header.Set("Authorization", sas.Sign(target, "RootManageSharedAccessKey", testKey, time.Now().Add(time.Hour)))
			resp, err := client.Do(req)
			if err != nil {
				results <- err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}()
	}
	// Poll the gauge until every receiver waits in the server: a request still in the
	// listener's backlog when it closes is refused, which says nothing about draining.
	eventually.True(t, "every receiver to wait", func() bool {
		return strings.Contains(metricsText(t, endpoint),
			fmt.Sprintf("sbgate_receivers_waiting %d\n", receivers))
	})
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v\n%s", err, out)
		}
	case <-time.After(20 * time.Second): // the grace is 30 s: it waited for the long polls
		t.Fatalf("sbgate did not stop while %d receivers waited\n%s", receivers, out)
	}
	done.Wait()
	close(results)
	bad := 0
	for r := range results {
		if r != "204 " {
			bad++
			if bad <= 5 {
				t.Errorf("a waiting receiver got %q; want 204", r)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d waiting receivers were not answered 204", bad, receivers)
	}
}

func metricsText(t *testing.T, endpoint string) string {
	t.Helper()
	resp, err := http.Get(endpoint + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
