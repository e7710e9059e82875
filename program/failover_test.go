package program

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbgate/sbgate/internal/eventually"
)

// TestFailover builds a primary and a streaming standby from the installed PostgreSQL binaries,
// points one sbgate process at both with a multi-host URL (target_session_attrs=read-write),
// and SIGKILLs the primary (its whole process group) under load, then promotes the standby.
//
// With synchronous replication nothing acknowledged may be lost. With asynchronous replication
// the test measures and logs what was lost and how long before the kill those sends were
// acknowledged (the loss window the README documents); it still checks everything else.
func TestFailover(t *testing.T) {
	t.Parallel()
	t.Run("sync", func(t *testing.T) {
		t.Parallel()
		r := runFailover(t, true)
		if len(r.lost) > 0 {
			t.Errorf("synchronous replication: %d of %d acknowledged messages lost, e.g. %v", len(r.lost), r.acked, firstKeys(r.lost, 5))
		}
	})
	t.Run("async", func(t *testing.T) {
		t.Parallel()
		r := runFailover(t, false)
		if len(r.lost) == 0 {
			t.Logf("asynchronous replication: none of %d acknowledged messages lost this time", r.acked)
		} else {
			t.Logf("asynchronous replication: %d of %d acknowledged messages lost; their 201s arrived from %v before to %v after the SIGKILL was sent",
				len(r.lost), r.acked, -r.lossFrom, r.lossTo)
		}
	})
}

type failoverResult struct {
	acked int
	lost  map[string]bool
	// lossFrom and lossTo bound when the lost sends were acknowledged, relative to the SIGKILL
	// (negative: before it).
	lossFrom, lossTo time.Duration
}

// failoverLock is the lock duration of the test's queue: locks taken before the failover are
// still valid when the gateway serves again, and come back soon after.
const failoverLock = 10 * time.Second

func runFailover(t *testing.T, syncRepl bool) failoverResult {
	pair := newPGPair(t, syncRepl)
	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2&target_session_attrs=read-write",
		pair.primary.port, pair.standby.port)

	out := &syncBuffer{}
	_, exited := sbgateProcess(t, out, "DATABASE_URL="+dbURL, "SBGATE_SAS_KEY="+testKey)
	t.Cleanup(func() {
		if t.Failed() {
			lines := strings.Split(out.String(), "\n")
			t.Logf("gateway log (last 80 lines):\n%s", strings.Join(lines[max(0, len(lines)-80):], "\n"))
		}
	})
	ep := waitEndpoint(t, out, exited)
	f := &failover{t: t, ep: ep, acked: map[string]time.Time{}, settled: map[string]bool{}}

	queueXML := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT10S</LockDuration><MaxDeliveryCount>100</MaxDeliveryCount></QueueDescription></content></entry>`
	if st, _, body := call(t, http.MethodPut, ep+"fo", nil, queueXML); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	for i := range 40 {
		if st := f.send(fmt.Sprintf("pre-%d", i)); st != http.StatusCreated {
			t.Fatalf("send before the failover: %d", st)
		}
	}
	// Five messages received and completed before, ten locked before and settled (or not) after.
	for range 5 {
		id, lock := f.peekLock()
		if lock == "" {
			t.Fatal("peek-lock before the failover: nothing received")
		}
		if st := f.settle(lock); st != http.StatusOK {
			t.Fatalf("complete before the failover: %d", st)
		}
		f.settled[id] = true
	}
	var locks []string
	for range 10 {
		_, lock := f.peekLock()
		if lock == "" {
			t.Fatal("peek-lock before the failover: nothing received")
		}
		locks = append(locks, lock)
	}
	// The last lock ends failoverLock after this at the latest (taking ten locks on a loaded
	// machine took more than a second, and a drain timed from the first lock ended before the
	// last one did, calling its message lost).
	lockedAt := time.Now()

	// Four senders run through the whole failover.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if st := f.send(fmt.Sprintf("load-%d-%d", w, i)); st != http.StatusCreated {
					time.Sleep(50 * time.Millisecond) // load's pause when refused; not a wait
				}
			}
		})
	}
	eventually.Within(60*time.Second).True(t, "sends before the kill", func() bool {
		return f.sent.Load() >= 200
	})

	killedAt := time.Now()
	pair.primary.kill()
	t.Logf("primary killed after %d acknowledged sends", f.sent.Load())

	// No primary: every answer is a 503 with Retry-After, within the client's timeout.
	readyz := &http.Client{Timeout: 10 * time.Second}
	for time.Since(killedAt) < 3*time.Second {
		resp, err := readyz.Get(ep + "readyz")
		if err != nil {
			t.Fatalf("/readyz without a primary: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("/readyz without a primary: %d, want 503", resp.StatusCode)
		}
		if st := f.send(fmt.Sprintf("probe-%d", time.Now().UnixNano())); st != http.StatusServiceUnavailable {
			t.Errorf("send without a primary: %d, want 503", st)
		}
		time.Sleep(200 * time.Millisecond) // probes spread over the 3 s observed without a primary
	}

	promotedAt := time.Now()
	pair.standby.promote()
	sentAtPromotion := f.sent.Load()
	eventually.True(t, "a send to succeed after the promotion", func() bool {
		return f.sent.Load() > sentAtPromotion
	})
	if d := time.Since(promotedAt); d > 10*time.Second {
		t.Errorf("the gateway served again %v after the promotion; want within 10s", d)
	} else {
		t.Logf("serving again %v after the promotion", d.Round(time.Millisecond))
	}
	select {
	case err := <-exited:
		t.Fatalf("the gateway exited during the failover: %v", err)
	default:
	}
	eventually.Within(60*time.Second).True(t, "sends after the promotion", func() bool {
		return f.sent.Load() >= sentAtPromotion+100
	})
	close(stop)
	wg.Wait()

	// Locks taken before the failover still settle, or are lost (404) and their messages return;
	// the ones left unsettled return when their lock ends.
	for _, lock := range locks[:5] {
		switch st := f.settle(lock); st {
		case http.StatusOK:
			f.settled[lockMessageID(lock)] = true
		case http.StatusNotFound:
		default:
			t.Errorf("complete with a lock taken before the failover: %d, want 200 or 404", st)
		}
	}

	// Drain with receive-and-delete until every lock has ended and the queue is empty.
	f.mu.Lock()
	missing := map[string]bool{}
	for id := range f.acked {
		if !f.settled[id] {
			missing[id] = true
		}
	}
	acked := len(f.acked)
	f.mu.Unlock()
	received := map[string]int{}
	// Each check drains what is there; it is done once the queue is empty after the last lock.
	drained := "the queue to drain after the last lock"
	eventually.Within(90*time.Second).True(t, drained, func() bool {
		for {
			st, h, body := call(t, http.MethodDelete, ep+"fo/messages/head?timeout=2", nil, "")
			if st == http.StatusNoContent {
				return time.Since(lockedAt) > failoverLock+time.Second
			}
			if st != http.StatusOK {
				t.Fatalf("drain: %d %s", st, body)
			}
			id := messageID(t, h)
			received[id]++
			if received[id] == 2 {
				t.Errorf("message %s received twice", id)
			}
			if f.settled[id] {
				t.Errorf("message %s received after its complete got 200", id)
			}
			delete(missing, id)
		}
	})
	t.Logf("%d sends acknowledged, %d received in the drain, %d completed before", acked, len(received), len(f.settled))

	r := failoverResult{acked: acked, lost: missing}
	first := true
	for id := range missing {
		d := f.acked[id].Sub(killedAt)
		if first || d < r.lossFrom {
			r.lossFrom = d
		}
		if first || d > r.lossTo {
			r.lossTo = d
		}
		first = false
	}
	if len(missing) > 0 {
		ids := firstKeys(missing, 20)
		sort.Strings(ids)
		t.Logf("lost: %v", ids)
	}
	return r
}

type failover struct {
	t  *testing.T
	ep string

	mu      sync.Mutex
	acked   map[string]time.Time // message id → when its 201 arrived
	settled map[string]bool      // completes answered 200

	sent atomic.Int64
}

var failoverClient = &http.Client{Timeout: 15 * time.Second}

// send sends one message and returns the status. An answer other than 201 or 503 with
// Retry-After, or none within the client's timeout, fails the test.
func (f *failover) send(id string) int {
	req, _ := http.NewRequest(http.MethodPost, f.ep+"fo/messages", strings.NewReader(id))
	req.Header.Set("Authorization", signFor(f.ep))
	req.Header.Set("BrokerProperties", `{"MessageId":"`+id+`"}`)
	resp, err := failoverClient.Do(req)
	if err != nil {
		f.t.Errorf("send %s: no answer: %v", id, err)
		return 0
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusCreated:
		f.mu.Lock()
		f.acked[id] = time.Now()
		f.mu.Unlock()
		f.sent.Add(1)
	case http.StatusServiceUnavailable:
		if resp.Header.Get("Retry-After") == "" {
			f.t.Errorf("send %s: 503 without Retry-After", id)
		}
	default:
		f.t.Errorf("send %s: %d %s", id, resp.StatusCode, body)
	}
	return resp.StatusCode
}

// peekLock receives one message with a lock and returns its id and lock URI ("" when none came).
func (f *failover) peekLock() (id, lock string) {
	st, h, body := call(f.t, http.MethodPost, f.ep+"fo/messages/head?timeout=5", nil, "")
	if st == http.StatusNoContent {
		return "", ""
	}
	if st != http.StatusCreated {
		f.t.Fatalf("peek-lock: %d %s", st, body)
	}
	loc, err := url.Parse(h.Get("Location"))
	if err != nil || loc.Path == "" {
		f.t.Fatalf("peek-lock answered Location %q", h.Get("Location"))
	}
	id = messageID(f.t, h)
	lockIDs.Store(loc.Path, id)
	return id, loc.Path
}

// lockIDs maps a lock URI's path to its message's id.
var lockIDs sync.Map

func lockMessageID(lock string) string {
	v, _ := lockIDs.Load(lock)
	s, _ := v.(string)
	return s
}

func (f *failover) settle(lock string) int {
	st, _, body := call(f.t, http.MethodDelete, f.ep+strings.TrimPrefix(lock, "/"), nil, "")
	if st != http.StatusOK && st != http.StatusNotFound {
		f.t.Logf("settle: %d %s", st, body)
	}
	return st
}
