package program

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// TestKilledGatewayLosesNothing: a 201 means committed. The gateway is killed with SIGKILL while
// eight senders are busy; a new gateway on the same database then hands out every message that
// was acknowledged, and every message the dead gateway had locked comes back once its lock
// expires (5 s, the shortest lock a queue may have).
func TestKilledGatewayLosesNothing(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	out1 := &syncBuffer{}
	p1, exited := sbgateProcess(t, out1, "DATABASE_URL="+url, "SBGATE_SAS_KEY="+testKey)
	endpoint := waitEndpoint(t, out1, exited)

	const queueXML = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT5S</LockDuration></QueueDescription></content></entry>`
	if st, _, body := call(t, http.MethodPut, endpoint+"crash", nil, queueXML); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	for i := range 40 {
		id := fmt.Sprintf("pre-%d", i)
		if st, _, body := call(t, http.MethodPost, endpoint+"crash/messages", map[string]string{"BrokerProperties": `{"MessageId":"` + id + `"}`}, id); st != http.StatusCreated {
			t.Fatalf("send %s: %d %s", id, st, body)
		}
		acked[id] = true
	}
	locked := map[string]bool{}
	for range 15 {
		st, h, body := call(t, http.MethodPost, endpoint+"crash/messages/head?timeout=5", nil, "")
		if st != http.StatusCreated {
			t.Fatalf("peek-lock: %d %s", st, body)
		}
		locked[messageID(t, h)] = true
	}

	// Eight senders; the gateway dies under them.
	var wg sync.WaitGroup
	var sent atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 10 * time.Second}
			for i := 0; ; i++ {
				id := fmt.Sprintf("load-%d-%d", w, i)
				req, _ := http.NewRequest(http.MethodPost, endpoint+"crash/messages", strings.NewReader(id))
				req.Header.Set("Authorization", signFor(endpoint))
				req.Header.Set("BrokerProperties", `{"MessageId":"`+id+`"}`)
				resp, err := client.Do(req)
				if err != nil {
					return // the gateway is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
					sent.Add(1)
				}
			}
		}()
	}
	eventually.Within(time.Minute).True(t, "300 acknowledged sends before the kill", func() bool {
		return sent.Load() >= 300
	})
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	<-exited

	out2 := &syncBuffer{}
	_, exited2 := sbgateProcess(t, out2, "DATABASE_URL="+url, "SBGATE_SAS_KEY="+testKey)
	endpoint = waitEndpoint(t, out2, exited2)

	mu.Lock()
	missing := make(map[string]bool, len(acked))
	for id := range acked {
		missing[id] = true
	}
	mu.Unlock()
	redelivered := 0
	// Each check drains what is there; the messages locked before the crash come back when
	// their locks end.
	eventually.Within(90*time.Second).NoError(t, "the acknowledged messages", func() error {
		for len(missing) > 0 {
			st, h, body := call(t, http.MethodDelete, endpoint+"crash/messages/head?timeout=10",
				nil, "")
			if st == http.StatusNoContent {
				break
			}
			if st != http.StatusOK {
				t.Fatalf("receive after restart: %d %s", st, body)
			}
			id := messageID(t, h)
			delete(missing, id)
			if locked[id] {
				redelivered++
				var bp struct{ DeliveryCount int }
				_ = json.Unmarshal([]byte(h.Get("BrokerProperties")), &bp)
				if bp.DeliveryCount != 2 {
					t.Errorf("message %s locked before the crash came back with DeliveryCount %d;"+
						" want 2", id, bp.DeliveryCount)
				}
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d acknowledged messages lost after SIGKILL, e.g. %v",
				len(missing), len(acked), firstKeys(missing, 5))
		}
		return nil
	})
	if redelivered != len(locked) {
		t.Errorf("%d of %d messages locked by the killed gateway came back", redelivered, len(locked))
	}
}

// signFor is a namespace-wide token for the test key.
func signFor(endpoint string) string {
	return sas.Sign(endpoint, "RootManageSharedAccessKey", testKey, time.Now().Add(time.Hour))
}

func messageID(t *testing.T, h http.Header) string {
	t.Helper()
	var bp struct{ MessageId string }
	if err := json.Unmarshal([]byte(h.Get("BrokerProperties")), &bp); err != nil || bp.MessageId == "" {
		t.Fatalf("BrokerProperties %q: %v", h.Get("BrokerProperties"), err)
	}
	return bp.MessageId
}

func firstKeys(m map[string]bool, n int) []string {
	var out []string
	for k := range m {
		if len(out) == n {
			break
		}
		out = append(out, k)
	}
	return out
}
