package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sbgate/sbgate/api/client"
)

// Scenarios beyond the basic operations; they are run only when asked for (-ops), because their
// setup takes a while.
const (
	// OpTopicSend sends single messages to a topic with Config.Subscriptions subscriptions, a
	// mix of SQL and correlation filters; with 100, each message matches about 8 of them.
	OpTopicSend = "topic-send"
	// OpSession accepts the next session of a session queue that also holds
	// Config.IdleSessions sessions with state but no messages, receives and deletes up to 10
	// of its messages and releases it: one iteration, counted in messages.
	OpSession = "session"
)

// Scenarios are the operations outside the default run.
var Scenarios = []string{OpTopicSend, OpSession}

const (
	activeSessions   = 100
	sessionBatch     = 10
	filterBuckets    = 10
	defaultSubs      = 100
	defaultIdleSess  = 10000
	setupConcurrency = 16
)

func (r *runner) topicPath() string   { return r.queue + "-topic" }
func (r *runner) sessionPath() string { return r.queue + "-sessions" }

// setUp creates what the scenarios in ops need.
func (r *runner) setUp(ctx context.Context, ops []string) error {
	for _, op := range ops {
		switch op {
		case OpTopicSend:
			if err := r.createTopic(ctx); err != nil {
				return fmt.Errorf("bench: set up %s: %w", op, err)
			}
		case OpSession:
			if err := r.createSessionQueue(ctx); err != nil {
				return fmt.Errorf("bench: set up %s: %w", op, err)
			}
		}
	}
	return nil
}

func (r *runner) tearDown() {
	ctx := context.Background()
	for _, p := range []string{r.topicPath(), r.sessionPath()} {
		if resp, err := r.api.DeleteEntity(ctx, p, nil); err == nil {
			drain(resp)
		}
	}
}

const topicDescription = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<TopicDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`

const nsSB = `http://schemas.microsoft.com/netservices/2010/10/servicebus/connect`

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
	resp, err := r.api.PutEntityWithBody(ctx, r.topicPath(), nil, "application/atom+xml", strings.NewReader(topicDescription))
	if err != nil {
		return err
	}
	if err := expect(resp, http.StatusCreated); err != nil {
		return err
	}
	n := r.cfg.Subscriptions
	if n <= 0 {
		n = defaultSubs
	}
	return parallel(ctx, n, func(i int) error {
		resp, err := r.api.PutSubscriptionWithBody(ctx, r.topicPath(), fmt.Sprintf("s%03d", i), nil, "application/atom+xml",
			strings.NewReader(subscriptionBody(i)))
		if err != nil {
			return err
		}
		return expect(resp, http.StatusCreated)
	})
}

// topicSend sends one message to the topic; its region, amount and label pick about 8 of 100
// subscriptions (the SQL ones of its region bucket whose amount test passes, or the correlation
// ones of its label bucket).
func (r *runner) topicSend(ctx context.Context) (int, error) {
	k := r.counter.Add(1)
	bp := fmt.Sprintf(`{"Label":"l%d"}`, k%filterBuckets)
	resp, err := r.api.SendMessageWithBody(ctx, r.topicPath(), &client.SendMessageParams{BrokerProperties: &bp}, "application/octet-stream",
		bytes.NewReader(r.body), func(_ context.Context, req *http.Request) error {
			req.Header.Set("region", fmt.Sprintf(`"r%d"`, k%filterBuckets))
			req.Header.Set("amount", fmt.Sprint(k%5))
			return nil
		})
	if err != nil {
		return 0, err
	}
	return 1, expect(resp, http.StatusCreated)
}

const sessionQueueDescription = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<QueueDescription xmlns="` + nsSB + `"><RequiresSession>true</RequiresSession></QueueDescription></content></entry>`

// createSessionQueue creates the session queue with its idle sessions: each accepted by name,
// given a state, and released, so it exists, is listed, and holds no message.
func (r *runner) createSessionQueue(ctx context.Context) error {
	resp, err := r.api.PutEntityWithBody(ctx, r.sessionPath(), nil, "application/atom+xml", strings.NewReader(sessionQueueDescription))
	if err != nil {
		return err
	}
	if err := expect(resp, http.StatusCreated); err != nil {
		return err
	}
	n := r.cfg.IdleSessions
	if n == 0 {
		n = defaultIdleSess
	}
	if n < 0 {
		return nil
	}
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "  creating %d idle sessions...\n", n)
	}
	return parallel(ctx, n, func(i int) error {
		id := fmt.Sprintf("idle-%05d", i)
		resp, err := r.api.AcceptSessionWithResponse(ctx, r.sessionPath(), id, nil)
		if err != nil {
			return err
		}
		if resp.JSON201 == nil {
			return fmt.Errorf("accept %s: status %d", id, resp.StatusCode())
		}
		tok := resp.JSON201.LockToken
		if resp, err := r.api.SetSessionStateWithBody(ctx, r.sessionPath(), id, tok, nil, "application/octet-stream", strings.NewReader("idle")); err != nil {
			return err
		} else if err := expect(resp, http.StatusOK); err != nil {
			return err
		}
		resp2, err := r.api.ReleaseSession(ctx, r.sessionPath(), id, tok, nil)
		if err != nil {
			return err
		}
		return expect(resp2, http.StatusOK)
	})
}

// fillSessions sends enough messages, spread over activeSessions sessions, for a session phase.
func (r *runner) fillSessions(ctx context.Context, clients int) error {
	need := r.fillTarget(clients) - r.sessionBacklog.Load()
	if need <= 0 {
		return nil
	}
	batches := int((need + int64(r.cfg.BatchSize) - 1) / int64(r.cfg.BatchSize))
	text := string(r.body)
	return parallel(ctx, batches, func(i int) error {
		items := make([]client.BatchMessage, r.cfg.BatchSize)
		for j := range items {
			sid := fmt.Sprintf("active-%03d", (i*r.cfg.BatchSize+j)%activeSessions)
			items[j] = client.BatchMessage{Body: &text, BrokerProperties: &client.BrokerProperties{SessionId: &sid}}
		}
		raw, _ := json.Marshal(items)
		resp, err := r.api.SendMessageWithBody(ctx, r.sessionPath(), nil, "application/vnd.microsoft.servicebus.json", bytes.NewReader(raw))
		if err != nil {
			return err
		}
		if err := expect(resp, http.StatusCreated); err != nil {
			return err
		}
		r.sessionBacklog.Add(int64(r.cfg.BatchSize))
		return nil
	})
}

// sessionOnce accepts the next session, receives and deletes up to sessionBatch of its messages,
// and releases it.
func (r *runner) sessionOnce(ctx context.Context) (int, error) {
	zero := 0
	acc, err := r.api.AcceptNextSessionWithResponse(ctx, r.sessionPath(), &client.AcceptNextSessionParams{Timeout: &zero})
	if err != nil {
		return 0, err
	}
	if acc.StatusCode() == http.StatusNoContent {
		return 0, errEmpty
	}
	if acc.JSON201 == nil {
		return 0, fmt.Errorf("accept: status %d", acc.StatusCode())
	}
	sid, tok := acc.JSON201.SessionId, acc.JSON201.LockToken
	count := sessionBatch
	got, err := r.api.SessionReceiveAndDeleteBatchWithResponse(ctx, r.sessionPath(), sid, tok,
		&client.SessionReceiveAndDeleteBatchParams{Count: &count, Timeout: &zero})
	if err != nil {
		return 0, err
	}
	n := 0
	if got.JSON200 != nil {
		n = len(*got.JSON200)
	} else if got.StatusCode() != http.StatusNoContent {
		return 0, fmt.Errorf("receive in session: status %d", got.StatusCode())
	}
	r.sessionBacklog.Add(-int64(n))
	rel, err := r.api.ReleaseSession(ctx, r.sessionPath(), sid, tok, nil)
	if err != nil {
		return n, err
	}
	return n, expect(rel, http.StatusOK)
}

// parallel runs fn(0..n-1) on setupConcurrency goroutines and returns the first error.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(setupConcurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
