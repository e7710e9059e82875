package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sbgate/sbgate/api/client"
)

// Scenarios beyond the basic operations; they run only when asked for (-ops), at
// Config.ScenarioClients, because their set-up takes a while.
const (
	// OpTopicSend sends single messages to a topic with Config.Subscriptions subscriptions, a
	// mix of SQL and correlation filters; with 100, each message matches about 8 of them.
	OpTopicSend = "topic-send"
	// OpSession accepts the next session of a session queue that also holds
	// Config.IdleSessions sessions with state but no messages, receives and deletes up to 10
	// of its messages and releases it: one iteration, counted in messages.
	OpSession = "session"
	// OpBacklog is peek-lock + complete on a queue holding Config.Backlog messages, to compare
	// with peek-lock on a queue holding only what the phase needs.
	OpBacklog = "backlog"
	// OpInflight is peek-lock + complete on a queue whose first Config.Inflight messages are
	// locked (LockDuration 5 minutes, renewed between phases) and never settled.
	OpInflight = "inflight"
	// OpManyQueues is peek-lock + complete with every client on a queue of its own: client i on
	// queue i mod Config.Queues.
	OpManyQueues = "many-queues"
	// OpWake measures long-poll wake-ups: receivers wait (timeout=30) on an empty queue and one
	// sender sends one message at a time; each row is the time from the send's 201 to a
	// receiver having the message. With two or more gateways it also runs with the receivers
	// on another gateway than the sender.
	OpWake = "wake"
	// OpHTTPFloor asks GET /healthz, which the gateway answers without its database, through
	// the same routing and metrics middleware (not the SAS check, about 2 µs a request) and
	// the same HTTP client as every other phase: the
	// most requests a second the machine serves when the broker does nothing, so the ceiling
	// of any operation that takes a request a message (half of it for peek-lock + complete).
	OpHTTPFloor = "http-floor"
)

// Scenarios are the operations outside the default run.
var Scenarios = []string{OpHTTPFloor, OpTopicSend, OpSession, OpBacklog, OpInflight, OpManyQueues, OpWake, OpSQLSend}

const (
	activeSessions = 100
	sessionBatch   = 10
	filterBuckets  = 10
	// inflightLockDuration keeps the inflight scenario's locks through a phase; they are renewed
	// before a phase once older than inflightRenewAfter.
	inflightLockDuration = "PT5M"
	inflightRenewAfter   = 2 * time.Minute
	// maxBatchLocks is the most locks one $batch or $settle request names.
	maxBatchLocks = 1000
)

func (r *runner) topicPath() string   { return r.cfg.Queue + "-topic" }
func (r *runner) sessionPath() string { return r.cfg.Queue + "-sessions" }

// setUpScenario creates what op needs, when op is a scenario.
func (r *runner) setUpScenario(ctx context.Context, op string) error {
	switch op {
	case OpTopicSend:
		return r.createTopic(ctx)
	case OpSession:
		return r.createSessionQueue(ctx)
	case OpBacklog:
		r.backlog = &queue{name: r.cfg.Queue + "-backlog"}
		if err := r.createEntity(ctx, r.backlog.name, queueDescription); err != nil {
			return err
		}
		return r.fillQueue(ctx, r.backlog, int64(r.cfg.Backlog))
	case OpInflight:
		return r.createInflight(ctx)
	case OpManyQueues:
		r.manyQueues = make([]*queue, r.cfg.Queues)
		for i := range r.manyQueues {
			r.manyQueues[i] = &queue{name: fmt.Sprintf("%s-q%03d", r.cfg.Queue, i)}
		}
		return parallel(ctx, len(r.manyQueues), func(i int) error {
			return r.createEntity(ctx, r.manyQueues[i].name, queueDescription)
		})
	case OpWake:
		r.wakeQueue = &queue{name: r.cfg.Queue + "-wake"}
		return r.createEntity(ctx, r.wakeQueue.name, queueDescription)
	case OpSQLSend:
		return r.createEntity(ctx, r.sqlQueue(), queueDescription)
	}
	return nil
}

// scenario runs one phase of a scenario other than wake.
func (r *runner) scenario(ctx context.Context, res Result) (Result, error) {
	clients := res.Clients
	switch res.Operation {
	case OpHTTPFloor:
		return r.measure(ctx, res, func(w int) (iteration, error) { return r.healthzWorker(r.gw(w)) })
	case OpTopicSend:
		res, err := r.measure(ctx, res, func(w int) (iteration, error) { return r.topicSendWorker(r.gw(w)) })
		if err != nil {
			return res, err
		}
		// Each send left about 8 copies behind; they go, as the sends' messages do.
		return res, parallel(ctx, r.cfg.Subscriptions, func(i int) error {
			return r.purge(ctx, r.topicPath()+"/subscriptions/"+subscriptionName(i))
		})
	case OpSession:
		if err := r.fillSessions(ctx, r.fillFor(OpSession, 0, clients, sessionBatch)); err != nil {
			return res, err
		}
		return r.measure(ctx, res, func(w int) (iteration, error) { return r.sessionWorker(r.gw(w)) })
	case OpBacklog:
		if err := r.fillQueue(ctx, r.backlog, int64(r.cfg.Backlog)); err != nil {
			return res, err
		}
		return r.measure(ctx, res, func(w int) (iteration, error) { return r.peekLockWorker(r.gw(w), r.backlog) })
	case OpInflight:
		if err := r.renewInflight(ctx); err != nil {
			return res, err
		}
		if err := r.fillQueue(ctx, r.inflight.q, r.fillFor(OpInflight, 0, clients, 1)); err != nil {
			return res, err
		}
		return r.measure(ctx, res, func(w int) (iteration, error) { return r.peekLockWorker(r.gw(w), r.inflight.q) })
	case OpManyQueues:
		used := min(len(r.manyQueues), clients)
		each := r.fillFor(OpManyQueues, 0, clients, 1)/int64(used) + 1
		for _, q := range r.manyQueues[:used] {
			if err := r.fillQueue(ctx, q, each); err != nil {
				return res, err
			}
		}
		return r.measure(ctx, res, func(w int) (iteration, error) {
			return r.peekLockWorker(r.gw(w), r.manyQueues[w%len(r.manyQueues)])
		})
	}
	return res, fmt.Errorf("bench: unknown operation %q", res.Operation)
}

const topicDescription = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<TopicDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`

const nsSB = `http://schemas.microsoft.com/netservices/2010/10/servicebus/connect`

func subscriptionName(i int) string { return fmt.Sprintf("s%03d", i) }

// subscriptionBody is subscription i with its one rule: even ones a SQL filter on a user
// property and a number, odd ones a correlation filter on the label.
func subscriptionBody(i int) string {
	bucket := i % filterBuckets
	var rule string
	if i%2 == 0 {
		rule = fmt.Sprintf(`<Filter xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="SqlFilter"><SqlExpression>region = 'r%d' AND amount &gt;= %d</SqlExpression></Filter>`, bucket, i%3)
	} else {
		rule = fmt.Sprintf(`<Filter xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="CorrelationFilter"><Label>l%d</Label></Filter>`, bucket)
	}
	return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><SubscriptionDescription xmlns="` + nsSB +
		`"><DefaultRuleDescription>` + rule + `<Name>bench</Name></DefaultRuleDescription></SubscriptionDescription></content></entry>`
}

func (r *runner) createTopic(ctx context.Context) error {
	if err := r.createEntity(ctx, r.topicPath(), topicDescription); err != nil {
		return err
	}
	return parallel(ctx, r.cfg.Subscriptions, func(i int) error {
		resp, err := r.gws[0].api.PutSubscriptionWithBody(ctx, r.topicPath(), subscriptionName(i), nil, "application/atom+xml",
			strings.NewReader(subscriptionBody(i)))
		if err != nil {
			return err
		}
		return expect(resp, http.StatusCreated)
	})
}

// topicSendWorker sends one message a request to the topic; message k's region, amount and
// label pick about 8 of 100 subscriptions (the SQL ones of its region bucket whose amount test
// passes, or the correlation ones of its label bucket). The filterBuckets kinds of request are
// built once.
func (r *runner) topicSendWorker(g *gateway) (iteration, error) {
	var kinds [filterBuckets]*http.Request
	for k := range kinds {
		bp := fmt.Sprintf(`{"Label":"l%d"}`, k)
		t, err := g.template(client.NewSendMessageRequestWithBody(g.server, r.topicPath(), &client.SendMessageParams{BrokerProperties: &bp},
			"application/octet-stream", bytes.NewReader(r.body)))
		if err != nil {
			return nil, err
		}
		t.Header.Set("region", fmt.Sprintf(`"r%d"`, k))
		t.Header.Set("amount", strconv.Itoa(k%5))
		kinds[k] = t
	}
	return func(ctx context.Context) (int, error) {
		k := r.counter.Add(1)
		resp, err := g.do(ctx, kinds[k%filterBuckets])
		if err != nil {
			return 0, err
		}
		return 1, expect(resp, http.StatusCreated)
	}, nil
}

const sessionQueueDescription = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<QueueDescription xmlns="` + nsSB + `"><RequiresSession>true</RequiresSession></QueueDescription></content></entry>`

// createSessionQueue creates the session queue with its idle sessions: each accepted by name,
// given a state, and released, so it exists, is listed, and holds no message.
func (r *runner) createSessionQueue(ctx context.Context) error {
	r.sessions = &queue{name: r.sessionPath()}
	if err := r.createEntity(ctx, r.sessionPath(), sessionQueueDescription); err != nil {
		return err
	}
	n := r.cfg.IdleSessions
	if n < 0 {
		return nil
	}
	r.logf("  creating %d idle sessions...", n)
	api := r.gws[0].api
	return parallel(ctx, n, func(i int) error {
		id := fmt.Sprintf("idle-%05d", i)
		resp, err := api.AcceptSessionWithResponse(ctx, r.sessionPath(), id, nil)
		if err != nil {
			return err
		}
		if resp.JSON201 == nil {
			return fmt.Errorf("accept %s: status %d", id, resp.StatusCode())
		}
		tok := resp.JSON201.LockToken
		if resp, err := api.SetSessionStateWithBody(ctx, r.sessionPath(), id, tok, nil, "application/octet-stream", strings.NewReader("idle")); err != nil {
			return err
		} else if err := expect(resp, http.StatusOK); err != nil {
			return err
		}
		resp2, err := api.ReleaseSession(ctx, r.sessionPath(), id, tok, nil)
		if err != nil {
			return err
		}
		return expect(resp2, http.StatusOK)
	})
}

// fillSessions tops the session queue up to target messages, spread over activeSessions
// sessions, with batch sends. The activeSessions kinds of batch body are encoded once.
func (r *runner) fillSessions(ctx context.Context, target int64) error {
	need := target - r.sessions.left.Load()
	if need <= 0 {
		return nil
	}
	per := r.fillCount
	batches := int((need + int64(per) - 1) / int64(per))
	text := string(r.body)
	bodies := make([][]byte, activeSessions)
	for k := range bodies {
		items := make([]client.BatchMessage, per)
		for j := range items {
			sid := fmt.Sprintf("active-%03d", (k+j)%activeSessions)
			items[j] = client.BatchMessage{Body: &text, BrokerProperties: &client.BrokerProperties{SessionId: &sid}}
		}
		bodies[k], _ = json.Marshal(items)
	}
	var sent atomic.Int64
	stop := r.fillProgress(r.sessionPath(), int64(batches*per), &sent)
	defer stop()
	return parallel(ctx, batches, func(i int) error {
		resp, err := r.gw(i).api.SendMessageWithBody(ctx, r.sessionPath(), nil, batchContentType, bytes.NewReader(bodies[i%activeSessions]))
		if err != nil {
			return err
		}
		if err := expect(resp, http.StatusCreated); err != nil {
			return err
		}
		r.sessions.left.Add(int64(per))
		sent.Add(int64(per))
		return nil
	})
}

var sequenceNumberKey = []byte(`"SequenceNumber":`)

// sessionWorker accepts the next session, receives and deletes up to sessionBatch of its
// messages, and releases it.
func (r *runner) sessionWorker(g *gateway) (iteration, error) {
	zero, count := 0, sessionBatch
	accept, err := g.template(client.NewAcceptNextSessionRequest(g.server, r.sessionPath(), &client.AcceptNextSessionParams{Timeout: &zero}))
	if err != nil {
		return nil, err
	}
	params := &client.SessionReceiveAndDeleteBatchParams{Count: &count, Timeout: &zero}
	var buf bytes.Buffer
	var lock client.SessionLock
	return func(ctx context.Context) (int, error) {
		resp, err := g.do(ctx, accept)
		if err != nil {
			return 0, err
		}
		switch resp.StatusCode {
		case http.StatusNoContent:
			drain(resp)
			return 0, errEmpty
		case http.StatusCreated:
		default:
			return 0, expect(resp, http.StatusCreated)
		}
		buf.Reset()
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("accept session: %w", err)
		}
		if err := json.Unmarshal(buf.Bytes(), &lock); err != nil {
			return 0, fmt.Errorf("accept session: %w", err)
		}
		// The session's URLs change every iteration, so these go through the generated client.
		resp, err = g.api.SessionReceiveAndDeleteBatch(ctx, r.sessionPath(), lock.SessionId, lock.LockToken, params)
		if err != nil {
			return 0, err
		}
		n := 0
		switch resp.StatusCode {
		case http.StatusOK:
			buf.Reset()
			_, err = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if err != nil {
				return 0, fmt.Errorf("receive in session: %w", err)
			}
			n = bytes.Count(buf.Bytes(), sequenceNumberKey)
		case http.StatusNoContent:
			drain(resp)
		default:
			return 0, expect(resp, http.StatusOK)
		}
		r.sessions.left.Add(-int64(n))
		resp, err = g.api.ReleaseSession(ctx, r.sessionPath(), lock.SessionId, lock.LockToken, nil)
		if err != nil {
			return n, err
		}
		return n, expect(resp, http.StatusOK)
	}, nil
}

// inflightState is the inflight scenario's queue and the locks it holds at its head.
type inflightState struct {
	q        *queue
	tokens   [][]byte // lock tokens, as their 36 characters
	lockedAt time.Time
}

// createInflight creates the inflight queue (LockDuration 5 minutes), sends Config.Inflight
// messages and peek-locks every one of them, keeping the tokens to renew the locks with.
func (r *runner) createInflight(ctx context.Context) error {
	st := &inflightState{q: &queue{name: r.cfg.Queue + "-inflight"}}
	r.inflight = st
	desc := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="` + nsSB +
		`"><LockDuration>` + inflightLockDuration + `</LockDuration></QueueDescription></content></entry>`
	if err := r.createEntity(ctx, st.q.name, desc); err != nil {
		return err
	}
	if err := r.fillQueue(ctx, st.q, int64(r.cfg.Inflight)); err != nil {
		return err
	}
	g := r.gws[0]
	zero := 0
	var buf bytes.Buffer
	for len(st.tokens) < r.cfg.Inflight {
		count := min(maxBatchLocks, r.cfg.Inflight-len(st.tokens))
		resp, err := g.api.PeekLockBatch(ctx, st.q.name, &client.PeekLockBatchParams{Count: &count, Timeout: &zero})
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusCreated {
			return expect(resp, http.StatusCreated)
		}
		buf.Reset()
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		tokens := lockTokens(buf.Bytes())
		if len(tokens) == 0 {
			return fmt.Errorf("$batch locked nothing: %.200s", buf.Bytes())
		}
		st.tokens = append(st.tokens, tokens...)
	}
	st.q.left.Add(-int64(len(st.tokens)))
	st.lockedAt = time.Now()
	r.logf("  %d messages locked at the head of %s", len(st.tokens), st.q.name)
	return nil
}

// lockTokens returns the lock tokens of a $batch answer.
func lockTokens(batch []byte) [][]byte {
	var out [][]byte
	for {
		i := bytes.Index(batch, lockTokenKey)
		if i < 0 || len(batch) < i+len(lockTokenKey)+36 {
			return out
		}
		batch = batch[i+len(lockTokenKey):]
		out = append(out, bytes.Clone(batch[:36]))
		batch = batch[36:]
	}
}

// renewInflight renews the inflight locks once they are old enough to lapse during the phase.
func (r *runner) renewInflight(ctx context.Context) error {
	st := r.inflight
	if time.Since(st.lockedAt) < inflightRenewAfter {
		return nil
	}
	g := r.gws[0]
	lost := 0
	for i := 0; i < len(st.tokens); i += maxBatchLocks {
		chunk := st.tokens[i:min(len(st.tokens), i+maxBatchLocks)]
		body := []byte{'['}
		for j, t := range chunk {
			if j > 0 {
				body = append(body, ',')
			}
			body = appendSettlement(body, t, "RenewLock")
		}
		body = append(body, ']')
		resp, err := g.api.SettleMessagesWithBody(ctx, st.q.name, nil, "application/json", bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("bench: renew in-flight locks: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("bench: renew in-flight locks: %w", expect(resp, http.StatusOK))
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("bench: renew in-flight locks: %w", err)
		}
		lost += len(chunk) - bytes.Count(buf.Bytes(), []byte(`"Status":200`))
	}
	if lost > 0 {
		r.logf("  warning: %d of %d in-flight locks were lost before renewal", lost, len(st.tokens))
	}
	st.lockedAt = time.Now()
	return nil
}

// healthzWorker asks GET /healthz, one request an iteration, counted as one.
func (r *runner) healthzWorker(g *gateway) (iteration, error) {
	t, err := g.template(client.NewHealthzRequest(g.server))
	if err != nil {
		return nil, err
	}
	return expectWorker(g, t, http.StatusOK, func() int { return 1 }), nil
}
