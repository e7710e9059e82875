package program

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/sbgate/sbgate/internal/eventually"
)

// chaosRounds is how many times the chaos test kills something. Each round waits for the load
// to make progress, so the test takes a few seconds a round.
const chaosRounds = 6

// TestChaos runs sends, peek-locks and completes against a gateway with an embedded PostgreSQL
// and, round after round, kills either the gateway (SIGKILL; a new one starts on the same data
// directory) or the postmaster (SIGKILL; the gateway's supervisor restarts it). Then it drains
// the queue and asserts the two promises: every message whose send got 201 is received (none
// lost), and no message whose complete got 200 is received by a receive that began after that
// answer (none redelivered once settled).
func TestChaos(t *testing.T) { runChaos(t, false) }

// TestChaosAMQP is TestChaos with the load over AMQP: senders whose message was accepted (a
// settled disposition) and peek-lock receivers (receiver-settle-mode second) whose complete the
// gateway confirmed with its settled disposition. The drain is over REST, as any client may read
// what another sent.
func TestChaosAMQP(t *testing.T) { runChaos(t, true) }

func runChaos(t *testing.T, overAMQP bool) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	dir := tempDataDir(t)
	readyFile := filepath.Join(dir, "ready.json")
	c := &chaos{t: t, dir: dir, readyFile: readyFile, out: &syncBuffer{},
		acked: map[string]bool{}, settled: map[string]time.Time{}, uncertain: map[string]bool{}}
	t.Cleanup(func() {
		if t.Failed() {
			lines := strings.Split(c.out.String(), "\n")
			t.Logf("gateway logs (last 150 lines):\n%s", strings.Join(lines[max(0, len(lines)-150):], "\n"))
		}
	})
	c.startGateway()

	const queueXML = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT5S</LockDuration><MaxDeliveryCount>1000</MaxDeliveryCount></QueueDescription></content></entry>`
	if st, _, body := call(t, http.MethodPut, c.endpoint()+"chaos", nil, queueXML); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		if overAMQP {
			wg.Go(func() { c.amqpSender(w, stop) })
			wg.Go(func() { c.amqpReceiver(stop) })
			continue
		}
		wg.Go(func() { c.sender(w, stop) })
		wg.Go(func() { c.receiver(stop) })
	}
	for round := range chaosRounds {
		sent, settled := c.sent.Load(), c.completes.Load()
		progress := fmt.Sprintf("round %d: load to make progress", round)
		eventually.Within(60*time.Second).True(t, progress, func() bool {
			return c.sent.Load() >= sent+30 && c.completes.Load() >= settled+10
		})
		// The first two rounds kill one of each; the rest choose at random.
		if round == 0 || (round > 1 && rng.IntN(2) == 0) {
			t.Logf("round %d: SIGKILL gateway", round)
			c.killGateway()
			c.startGateway()
		} else {
			t.Logf("round %d: SIGKILL postmaster", round)
			c.killPostmaster()
		}
	}
	// Let the last kill be followed by some work too.
	sent, settled := c.sent.Load(), c.completes.Load()
	eventually.Within(60*time.Second).True(t, "load to make progress after the last kill",
		func() bool { return c.sent.Load() >= sent+30 && c.completes.Load() >= settled+10 })
	close(stop)
	wg.Wait()

	// Drain: what was never settled comes back, at the latest when the locks taken by killed
	// gateways or lost answers expire (5 s).
	// A complete whose answer never came (or was a 5xx) may have settled the message: such a
	// message was received after its send, so it was not lost, but it need not come back.
	c.mu.Lock()
	missing := map[string]bool{}
	for id := range c.acked {
		if _, ok := c.settled[id]; !ok && !c.uncertain[id] {
			missing[id] = true
		}
	}
	acked, settledN, uncertainN := len(c.acked), len(c.settled), len(c.uncertain)
	c.mu.Unlock()
	// Each check drains what is there; in between, locks of lost answers expire.
	eventually.Within(60*time.Second).NoError(t, "the acknowledged messages", func() error {
		for {
			id, ok := c.receiveOnce(http.MethodDelete, "timeout=2")
			if !ok {
				break
			}
			delete(missing, id)
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d acknowledged messages lost, e.g. %v",
				len(missing), acked, firstKeys(missing, 5))
		}
		return nil
	})
	t.Logf("%d sends acknowledged, %d completes acknowledged, %d completes without an answer, %d redelivered after settlement, %d lost",
		acked, settledN, uncertainN, c.redelivered.Load(), len(missing))
	if n := c.redelivered.Load(); n > 0 {
		t.Errorf("%d messages received again after their complete got 200, e.g. %s", n, c.firstRedelivered.Load())
	}
	c.stopGateway()
}

// chaos is the state of one chaos test: the current gateway and what the load saw.
type chaos struct {
	t         *testing.T
	dir       string
	readyFile string
	out       *syncBuffer // every gateway's log

	ep       atomic.Pointer[string]
	amqpAddr atomic.Pointer[string] // host:port of the gateway's plain AMQP listener
	gateway  *os.Process
	exited   <-chan error

	mu        sync.Mutex
	acked     map[string]bool      // sends answered 201
	settled   map[string]time.Time // completes answered 200, and when the answer came
	uncertain map[string]bool      // completes answered by no response or a 5xx

	sent, completes  atomic.Int64
	redelivered      atomic.Int64
	firstRedelivered atomic.Value // string
}

func (c *chaos) endpoint() string { return *c.ep.Load() }

// startGateway starts a gateway on the data directory and waits for its ready file.
func (c *chaos) startGateway() {
	c.t.Helper()
	_ = os.Remove(c.readyFile) // a killed gateway leaves its own behind
	cmd, exited := sbgateProcess(c.t, c.out, "SBGATE_DATA_DIR="+c.dir, "SBGATE_SAS_KEY="+testKey,
		"SBGATE_READY_FILE="+c.readyFile)
	c.gateway, c.exited = cmd.Process, exited
	eventually.Within(2*time.Minute).True(c.t, "the gateway's ready file", func() bool {
		select {
		case err := <-exited:
			c.t.Fatalf("gateway exited before it was ready: %v", err)
		default:
		}
		b, err := os.ReadFile(c.readyFile)
		if err != nil {
			return false
		}
		var ri readyInfo
		if err := json.Unmarshal(b, &ri); err != nil {
			c.t.Fatalf("ready file %s: %v", b, err)
		}
		c.ep.Store(&ri.Endpoint)
		addr, _, _ := strings.Cut(strings.TrimPrefix(ri.AMQPConnectionString, "Endpoint=sb://"), ";")
		addr = strings.TrimSuffix(addr, "/")
		c.amqpAddr.Store(&addr)
		return true
	})
}

func (c *chaos) killGateway() {
	if err := c.gateway.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	<-c.exited
}

// stopGateway stops the gateway in order, so its PostgreSQL is shut down before the data
// directory is removed.
func (c *chaos) stopGateway() {
	if err := c.gateway.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	if err := <-c.exited; err != nil {
		c.t.Errorf("gateway exited with %v on SIGTERM", err)
	}
}

// killPostmaster kills the postmaster that postmaster.pid names once it is a live process (it
// may be missing or stale while the supervisor restarts the server).
func (c *chaos) killPostmaster() {
	c.t.Helper()
	eventually.Within(60*time.Second).True(c.t, "a postmaster to kill", func() bool {
		b, err := os.ReadFile(filepath.Join(c.dir, "pg", "postmaster.pid"))
		if err != nil {
			return false
		}
		first, _, _ := strings.Cut(string(b), "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(first))
		if err != nil || pid <= 0 {
			return false
		}
		return syscall.Kill(pid, syscall.SIGKILL) == nil
	})
}

var chaosClient = &http.Client{Timeout: 15 * time.Second}

func (c *chaos) do(method, path, brokerProps string, body string) (*http.Response, error) {
	ep := c.endpoint()
	req, err := http.NewRequest(method, ep+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", signFor(ep))
	if brokerProps != "" {
		req.Header.Set("BrokerProperties", brokerProps)
	}
	return chaosClient.Do(req)
}

// sender sends messages with unique ids until stop is closed.
func (c *chaos) sender(w int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		id := fmt.Sprintf("m-%d-%d", w, i)
		resp, err := c.do(http.MethodPost, "chaos/messages", `{"MessageId":"`+id+`"}`, id)
		if err != nil {
			time.Sleep(10 * time.Millisecond) // load's pause: the gateway is being replaced
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			c.mu.Lock()
			c.acked[id] = true
			c.mu.Unlock()
			c.sent.Add(1)
		}
	}
}

// receiver peek-locks and completes until stop is closed.
func (c *chaos) receiver(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if _, ok := c.receiveOnce(http.MethodPost, "timeout=1"); !ok {
			time.Sleep(10 * time.Millisecond) // load's pause: nothing to receive, or no gateway
		}
	}
}

// receiveOnce receives one message, peek-lock (POST) and complete, or receive-and-delete
// (DELETE), and checks it against the settled ones. It returns the message id and whether one
// was received.
func (c *chaos) receiveOnce(method, query string) (string, bool) {
	began := time.Now()
	resp, err := c.do(method, "chaos/messages/head?"+query, "", "")
	if err != nil {
		return "", false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", false
	}
	var bp struct{ MessageId string }
	if err := json.Unmarshal([]byte(resp.Header.Get("BrokerProperties")), &bp); err != nil || bp.MessageId == "" {
		c.t.Errorf("received message without an id: BrokerProperties %q", resp.Header.Get("BrokerProperties"))
		return "", false
	}
	c.checkRedelivery(bp.MessageId, began)
	if method == http.MethodDelete {
		return bp.MessageId, true
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Path == "" {
		c.t.Errorf("peek-lock answered Location %q", resp.Header.Get("Location"))
		return bp.MessageId, true
	}
	// The gateway may have been replaced since: settle through the current one.
	resp, err = c.do(http.MethodDelete, strings.TrimPrefix(loc.Path, "/"), "", "")
	switch {
	case err != nil || resp.StatusCode >= 500:
		c.mu.Lock()
		c.uncertain[bp.MessageId] = true
		c.mu.Unlock()
	case resp.StatusCode == http.StatusOK:
		c.mu.Lock()
		c.settled[bp.MessageId] = time.Now()
		c.mu.Unlock()
		c.completes.Add(1)
	}
	if resp != nil {
		resp.Body.Close()
	}
	return bp.MessageId, true
}

// amqpLink opens a connection to the current gateway's AMQP listener (SASL PLAIN with the
// namespace key) and a link made by open on a session of it.
func amqpLink[L any](c *chaos, open func(context.Context, *goamqp.Session) (L, error)) (*goamqp.Conn, L, error) {
	var zero L
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := goamqp.Dial(ctx, "amqp://"+*c.amqpAddr.Load(), &goamqp.ConnOptions{
		SASLType: goamqp.SASLTypePlain("RootManageSharedAccessKey", testKey)})
	if err != nil {
		return nil, zero, err
	}
	sess, err := conn.NewSession(ctx, nil)
	if err == nil {
		var l L
		if l, err = open(ctx, sess); err == nil {
			return conn, l, nil
		}
	}
	_ = conn.Close()
	return nil, zero, err
}

// amqpSender sends messages with unique ids over AMQP until stop is closed; a send is
// acknowledged when the gateway accepted it.
func (c *chaos) amqpSender(w int, stop <-chan struct{}) {
	var conn *goamqp.Conn
	var snd *goamqp.Sender
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if snd == nil {
			var err error
			if conn, snd, err = amqpLink(c, func(ctx context.Context, s *goamqp.Session) (*goamqp.Sender, error) {
				return s.NewSender(ctx, "chaos", nil)
			}); err != nil {
				time.Sleep(10 * time.Millisecond) // load's pause: the gateway is being replaced
				continue
			}
		}
		id := fmt.Sprintf("a-%d-%d", w, i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := snd.Send(ctx, &goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: id}, Data: [][]byte{[]byte(id)}}, nil)
		cancel()
		if err != nil {
			_ = conn.Close()
			conn, snd = nil, nil
			continue
		}
		c.mu.Lock()
		c.acked[id] = true
		c.mu.Unlock()
		c.sent.Add(1)
	}
}

// amqpReceiver peek-locks and completes over AMQP until stop is closed: a complete is
// acknowledged when the gateway's settled disposition confirms it.
func (c *chaos) amqpReceiver(stop <-chan struct{}) {
	var conn *goamqp.Conn
	var rcv *goamqp.Receiver
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if rcv == nil {
			var err error
			if conn, rcv, err = amqpLink(c, func(ctx context.Context, s *goamqp.Session) (*goamqp.Receiver, error) {
				return s.NewReceiver(ctx, "chaos", &goamqp.ReceiverOptions{Credit: 1,
					SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
			}); err != nil {
				time.Sleep(10 * time.Millisecond) // load's pause: the gateway is being replaced
				continue
			}
		}
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err := rcv.Receive(ctx, nil)
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) { // not a quiet second: the link or connection went
				_ = conn.Close()
				conn, rcv = nil, nil
			}
			continue
		}
		id, _ := m.Properties.MessageID.(string)
		c.checkRedelivery(id, began)
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		err = rcv.AcceptMessage(ctx, m)
		cancel()
		c.mu.Lock()
		if err != nil {
			c.uncertain[id] = true
		} else {
			c.settled[id] = time.Now()
		}
		c.mu.Unlock()
		if err != nil {
			_ = conn.Close()
			conn, rcv = nil, nil
			continue
		}
		c.completes.Add(1)
	}
}

// checkRedelivery counts a message received by a receive that began after its complete was
// acknowledged.
func (c *chaos) checkRedelivery(id string, began time.Time) {
	c.mu.Lock()
	at, settled := c.settled[id]
	c.mu.Unlock()
	if settled && at.Before(began) {
		if c.redelivered.Add(1) == 1 {
			c.firstRedelivered.Store(id)
		}
	}
}
