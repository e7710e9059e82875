package compat_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/go-amqp"
	"github.com/coder/websocket"
)

// goScenarioSkips are the common scenarios the Go SDK cannot express. It has none: azservicebus
// v1.11.0 lists sessions (Client.NewListSessionsForQueuePager), and although it has no rule
// manager on the data plane, a Go application manages rules with admin.Client over REST, which
// is what the rules scenario does.
var goScenarioSkips = map[string]string{}

const (
	// goScenarioTimeout bounds one scenario; every SDK call takes a context under it.
	goScenarioTimeout = 90 * time.Second
	// goScenarioParallel is how many scenarios run at once, each with its own client.
	goScenarioParallel = 6
	// goReceiveWait is how long a receive waits for messages that were sent.
	goReceiveWait = 30 * time.Second
	// goAbsenceWait is how long a receive waits to show that nothing (more) arrives.
	goAbsenceWait = 2 * time.Second
)

// TestGoScenarios runs the common scenarios (commonScenarios) with the Go SDK, azservicebus
// v1.11.0, in this process, the way a Go application calls it: clients from the emulator
// connection string (UseDevelopmentEmulator=true: plain AMQP) for broker.AMQP, AMQP over
// WebSockets through ClientOptions.NewWebSocketConn for the websockets scenario, and
// admin.Client over https for what Go does over REST (rules). Each scenario has its own client
// and entities; they run goScenarioParallel at a time, each bounded by goScenarioTimeout, and are
// reported as "SCENARIO <name> PASS|FAIL <why>|SKIP <why>" lines, checked by checkVerdicts
// as a script's are. SB_SCENARIOS (comma-separated) runs a subset; AZURE_SDK_GO_LOGGING=all
// prints the SDK's log.
func TestGoScenarios(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	env := newGoScenarioEnv(t, b)

	want := wantedScenarios()
	start := time.Now()
	results := runGoScenarios(t, env, want)
	verdicts := make(map[string]string, len(results))
	for name, r := range results {
		verdicts[name] = r.verdict
	}
	checkVerdicts(t, want, verdicts, want, goScenarioSkips)

	var report strings.Builder
	for _, name := range want {
		r := results[name]
		fmt.Fprintf(&report, "  %6.1fs SCENARIO %s %s\n", r.took.Seconds(), name, r.verdict)
	}
	t.Logf("Go scenarios with azservicebus v1.11.0 ran in %s:\n%s", time.Since(start).Round(time.Millisecond), report.String())
}

// goScenarioEnv is what the Go scenarios share: the broker, the entities of each scenario and an
// https transport that trusts the broker's certificate.
type goScenarioEnv struct {
	b         *testBroker
	httpsHost string // 127.0.0.1:port of the https listener (REST and WebSockets)
	transport *http.Transport
	entities  map[string]map[string]string // scenario -> role ("queue", "topic", "subscription") -> name
}

func newGoScenarioEnv(t *testing.T, b *testBroker) *goScenarioEnv {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: b.Roots, MinVersion: tls.VersionTLS12}}
	// The admin client keeps connections alive: closed before the package's leak check.
	t.Cleanup(tr.CloseIdleConnections)
	return &goScenarioEnv{
		b:         b,
		httpsHost: strings.TrimPrefix(b.HTTPS, "https://"),
		transport: tr,
		// rules: the scenario's admin client creates the subscription and its rules over REST.
		entities: scenarioEntities(t, b, "go-", false),
	}
}

// conn is the emulator connection string (plain AMQP to broker.AMQP) for a key name.
func (e *goScenarioEnv) conn(keyName string) string { return connString(e.b.AMQP, keyName, true) }

// client is a data-plane client for a connection string, closed when the scenario ends.
func (e *goScenarioEnv) client(sc *goScenarioRun, connStr string, opts *azservicebus.ClientOptions) (*azservicebus.Client, error) {
	c, err := azservicebus.NewClientFromConnectionString(connStr, opts)
	if err != nil {
		return nil, fmt.Errorf("NewClientFromConnectionString: %w", err)
	}
	sc.onEnd(func(ctx context.Context) { _ = c.Close(ctx) })
	return c, nil
}

// sender is a data-plane client for a connection string (see client) and a sender for a queue
// or topic.
func (e *goScenarioEnv) sender(sc *goScenarioRun, connStr string, opts *azservicebus.ClientOptions, entity string) (*azservicebus.Client, *azservicebus.Sender, error) {
	c, err := e.client(sc, connStr, opts)
	if err != nil {
		return nil, nil, err
	}
	s, err := c.NewSender(entity, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("NewSender: %w", err)
	}
	return c, s, nil
}

// admin is an administration client for the https listener with the root key.
func (e *goScenarioEnv) admin() (*admin.Client, error) {
	return admin.NewClientFromConnectionString(connString(e.httpsHost, "RootManageSharedAccessKey", false), &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: e.transport}},
	})
}

// goScenarioRun is one scenario's run: its entities and what to close at its end.
type goScenarioRun struct {
	entities map[string]string
	mu       sync.Mutex
	closers  []func(context.Context)
}

func (sc *goScenarioRun) onEnd(f func(context.Context)) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.closers = append(sc.closers, f)
}

// end closes what the scenario opened, last first, each within a few seconds.
func (sc *goScenarioRun) end() {
	sc.mu.Lock()
	closers := sc.closers
	sc.closers = nil
	sc.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		closers[i](ctx)
		cancel()
	}
}

// errSkip is returned by a scenario the SDK cannot express.
type errSkip struct{ why string }

func (e errSkip) Error() string { return e.why }

type goScenario func(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error

var goScenarios = map[string]goScenario{
	"send-property-types":     goSendPropertyTypes,
	"send-body-kinds":         goSendBodyKinds,
	"receive-and-delete":      goReceiveAndDelete,
	"peek-lock-complete":      goPeekLockComplete,
	"abandon-with-properties": goAbandonWithProperties,
	"defer-receive-deferred":  goDeferReceiveDeferred,
	"dead-letter-reason":      goDeadLetterReason,
	"renew-lock":              goRenewLock,
	"peek":                    goPeek,
	"schedule-cancel-queue":   goScheduleCancelQueue,
	"schedule-cancel-topic":   goScheduleCancelTopic,
	"session-state":           goSessionState,
	"session-empty-id":        goSessionEmptyID,
	"list-sessions":           goListSessions,
	"rules":                   goRules,
	"batch":                   goBatch,
	"large-message":           goLargeMessage,
	"websockets":              goWebSockets,
	"wrong-key":               goWrongKey,
	"missing-right":           goMissingRight,
	"missing-entity":          goMissingEntity,
}

type goScenarioResult struct {
	verdict string // PASS, FAIL <why>, SKIP <why>
	took    time.Duration
}

// runGoScenarios runs the named scenarios, goScenarioParallel at a time, and returns their
// verdicts. A scenario still running goScenarioTimeout (plus a grace period for the SDK to honour
// its context) after it started is reported FAIL and left behind.
func runGoScenarios(t *testing.T, env *goScenarioEnv, names []string) map[string]goScenarioResult {
	t.Helper()
	results := map[string]goScenarioResult{}
	var mu sync.Mutex
	sem := make(chan struct{}, goScenarioParallel)
	var wg sync.WaitGroup
	for _, name := range names {
		f, ok := goScenarios[name]
		if !ok {
			// Scenarios started before this one may be writing their results.
			mu.Lock()
			results[name] = goScenarioResult{verdict: "FAIL no such scenario in the Go scenarios"}
			mu.Unlock()
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			start := time.Now()
			done := make(chan string, 1)
			sc := &goScenarioRun{entities: env.entities[name]}
			ctx, cancel := context.WithTimeout(t.Context(), goScenarioTimeout)
			go func() {
				defer cancel()
				done <- runGoScenario(ctx, f, env, sc)
			}()
			var verdict string
			select {
			case verdict = <-done:
			case <-time.After(goScenarioTimeout + 15*time.Second):
				verdict = fmt.Sprintf("FAIL did not end within %s of its context's deadline", 15*time.Second)
			}
			line := "SCENARIO " + name + " " + strings.Join(strings.Fields(verdict), " ")
			fmt.Println(line) // as a script prints it, for whoever watches the run
			mu.Lock()
			results[name] = goScenarioResult{verdict: verdict, took: time.Since(start)}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results
}

// runGoScenario runs one scenario and closes what it opened; a panic is a failure.
func runGoScenario(ctx context.Context, f goScenario, env *goScenarioEnv, sc *goScenarioRun) (verdict string) {
	defer sc.end()
	defer func() {
		if p := recover(); p != nil {
			verdict = fmt.Sprintf("FAIL panic: %v\n%s", p, debug.Stack())
		}
	}()
	err := f(ctx, env, sc)
	var skip errSkip
	switch {
	case err == nil:
		return "PASS"
	case errors.As(err, &skip):
		return "SKIP " + skip.why
	default:
		return "FAIL " + err.Error()
	}
}

// ---- helpers ------------------------------------------------------------------------------

// messageReceiver is what Receiver and SessionReceiver share for receiving.
type messageReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// receive receives until n messages arrived or within passed.
func receive(ctx context.Context, r messageReceiver, n int, within time.Duration) ([]*azservicebus.ReceivedMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		got = append(got, msgs...)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return got, nil
			}
			return got, fmt.Errorf("ReceiveMessages: %w", err)
		}
	}
	return got, nil
}

// receiveOne receives exactly one message within goReceiveWait.
func receiveOne(ctx context.Context, r messageReceiver, what string) (*azservicebus.ReceivedMessage, error) {
	got, err := receive(ctx, r, 1, goReceiveWait)
	if err != nil {
		return nil, fmt.Errorf("receive %s: %w", what, err)
	}
	if len(got) != 1 {
		return nil, fmt.Errorf("%s: %d messages received within %s, want 1", what, len(got), goReceiveWait)
	}
	return got[0], nil
}

// expectNothing fails when a message arrives within goAbsenceWait.
func expectNothing(ctx context.Context, r messageReceiver, what string) error {
	ctx, cancel := context.WithTimeout(ctx, goAbsenceWait)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if len(msgs) > 0 {
		var ids []string
		for _, m := range msgs {
			ids = append(ids, fmt.Sprintf("%q (body %q)", m.MessageID, m.Body))
		}
		return fmt.Errorf("%s: %d unexpected message(s): %s", what, len(msgs), strings.Join(ids, ", "))
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: ReceiveMessages: %w", what, err)
	}
	return nil
}

// problems collects mismatches so that a scenario reports all of them at once.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// equal records a mismatch of value or Go type (so of AMQP type) between got and want.
func (p *problems) equal(what string, got, want any) {
	if gt, ok := got.(time.Time); ok {
		if wt, ok := want.(time.Time); ok && gt.Equal(wt) {
			return
		}
	}
	if !reflect.DeepEqual(got, want) {
		p.add("%s: got %#v (%T), want %#v (%T)", what, got, got, want, want)
	}
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return errors.New(strings.Join(p, "; "))
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func i64(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

func sendAll(ctx context.Context, s *azservicebus.Sender, msgs ...*azservicebus.Message) error {
	for _, m := range msgs {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			return fmt.Errorf("SendMessage %s: %w", str(m.MessageID), err)
		}
	}
	return nil
}

// queueClients is a client with the SendListen key, a sender for queue and a peek-lock receiver.
func queueClients(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) (*azservicebus.Client, *azservicebus.Sender, *azservicebus.Receiver, error) {
	q := sc.entities["queue"]
	c, s, err := e.sender(sc, e.conn("SendListen"), nil, q)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := c.NewReceiverForQueue(q, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("NewReceiverForQueue: %w", err)
	}
	return c, s, r, nil
}

// ---- scenarios ----------------------------------------------------------------------------

// goSendPropertyTypes sends an application property of every type the Go SDK sends (it hands
// ApplicationProperties to go-amqp, which encodes Go's sized integers, floats, bool, string,
// []byte, time.Time and amqp.UUID as the AMQP types of the same name, Go's int and uint as long
// and ulong, nil as null). go-amqp has no decimal, char or described types: it cannot encode
// them, and its decoder refuses decimal and char. Each property comes back with its value and
// Go type.
func goSendPropertyTypes(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	stamp := time.UnixMilli(1_700_000_000_123).UTC()
	uid := amqp.UUID{0x0f, 0x8f, 0xad, 0x5b, 0xd9, 0xcb, 0x46, 0x9f, 0xa1, 0x65, 0x70, 0x86, 0x77, 0x28, 0x95, 0x0e}
	// name -> [sent, read back]
	props := map[string][2]any{
		"byte":         {int8(-7), int8(-7)},
		"ubyte":        {uint8(200), uint8(200)},
		"short":        {int16(-300), int16(-300)},
		"ushort":       {uint16(60000), uint16(60000)},
		"int":          {int32(-70000), int32(-70000)},
		"small-int":    {int32(5), int32(5)},
		"uint":         {uint32(4_000_000_000), uint32(4_000_000_000)},
		"long":         {int64(-5_000_000_000), int64(-5_000_000_000)},
		"small-long":   {int64(7), int64(7)},
		"ulong":        {uint64(18_000_000_000_000_000_000), uint64(18_000_000_000_000_000_000)},
		"go-int":       {int(-42), int64(-42)},
		"go-uint":      {uint(42), uint64(42)},
		"float":        {float32(1.5), float32(1.5)},
		"double":       {2.25e100, 2.25e100},
		"string":       {"héllo wörld", "héllo wörld"},
		"empty-string": {"", ""},
		"bool-true":    {true, true},
		"bool-false":   {false, false},
		"uuid":         {uid, uid},
		"binary":       {[]byte{0, 1, 2, 0xfe, 0xff}, []byte{0, 1, 2, 0xfe, 0xff}},
		"timestamp":    {stamp, stamp},
	}
	sent := map[string]any{}
	for k, v := range props {
		sent[k] = v[0]
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("property types"), MessageID: to.Ptr("props-1"), ApplicationProperties: sent}, nil); err != nil {
		return fmt.Errorf("SendMessage: %w", err)
	}
	// A nil property (AMQP null) in a message of its own, so that its fate does not hide the
	// other types': the service keeps it (Azure.Messaging.ServiceBus's MessageLiveTests send
	// "null" and read it back as null).
	var p problems
	nullProps := map[string]any{"null": nil, "string": "x"}
	want := 1
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("null"), MessageID: to.Ptr("props-null"), ApplicationProperties: nullProps}, nil); err != nil {
		p.add("SendMessage of a message with a nil property: %v", err)
	} else {
		want = 2
	}
	got, err := receive(ctx, r, want, goReceiveWait)
	if err != nil {
		return err
	}
	byID := map[string]*azservicebus.ReceivedMessage{}
	for _, m := range got {
		byID[m.MessageID] = m
	}
	if m := byID["props-1"]; m == nil {
		p.add("the message with every property type was not received")
	} else {
		for k, v := range props {
			got, ok := m.ApplicationProperties[k]
			if !ok {
				p.add("%s missing", k)
				continue
			}
			p.equal(k, got, v[1])
		}
		for k := range m.ApplicationProperties {
			if _, ok := props[k]; !ok {
				p.add("unexpected property %s = %#v", k, m.ApplicationProperties[k])
			}
		}
	}
	if want == 2 {
		if m := byID["props-null"]; m == nil {
			p.add("the message with a nil property was not received")
		} else {
			p.equal("properties of the message with a nil property", m.ApplicationProperties, nullProps)
		}
	}
	for _, m := range got {
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			p.add("CompleteMessage: %v", err)
		}
	}
	return p.err()
}

// goSendBodyKinds sends, through SendAMQPAnnotatedMessage, bodies of one data section, three
// data sections, amqp-values (a string, a long, a map with a list) and amqp-sequences (one
// section and two); each comes back in RawAMQPMessage.Body unchanged, and a single data section
// is also ReceivedMessage.Body.
func goSendBodyKinds(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	bodies := []struct {
		id   string
		body azservicebus.AMQPAnnotatedMessageBody
	}{
		{"data-one", azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{{0, 1, 2, 3, 0x80, 0xff}}}},
		{"data-three", azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("one"), []byte("two"), []byte("three")}}},
		{"value-string", azservicebus.AMQPAnnotatedMessageBody{Value: "a string value"}},
		{"value-long", azservicebus.AMQPAnnotatedMessageBody{Value: int64(42)}},
		{"value-map", azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{
			"count": int64(3), "name": "sbgate", "items": []any{"a", int64(1)}, "ok": true}}},
		{"sequence-one", azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{int64(1), "two", true, 4.5}}}},
		{"sequence-two", azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{int64(1), int64(2)}, {"three"}}}},
	}
	for _, b := range bodies {
		m := &azservicebus.AMQPAnnotatedMessage{
			Body:       b.body,
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: b.id},
		}
		if err := s.SendAMQPAnnotatedMessage(ctx, m, nil); err != nil {
			return fmt.Errorf("SendAMQPAnnotatedMessage %s: %w", b.id, err)
		}
	}
	got, err := receive(ctx, r, len(bodies), goReceiveWait)
	if err != nil {
		return err
	}
	byID := map[string]*azservicebus.ReceivedMessage{}
	for _, m := range got {
		byID[m.MessageID] = m
	}
	var p problems
	for _, b := range bodies {
		m, ok := byID[b.id]
		if !ok {
			p.add("%s not received", b.id)
			continue
		}
		p.equal(b.id+" body", m.RawAMQPMessage.Body, b.body)
		if b.id == "data-one" {
			p.equal("data-one ReceivedMessage.Body", m.Body, b.body.Data[0])
		}
	}
	for _, m := range got {
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			p.add("CompleteMessage %s: %v", m.MessageID, err)
		}
	}
	return p.err()
}

func goReceiveAndDelete(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	c, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	q := sc.entities["queue"]
	for i := range 3 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: fmt.Appendf(nil, "rd-%d", i)}, nil); err != nil {
			return fmt.Errorf("SendMessage: %w", err)
		}
	}
	rd, err := c.NewReceiverForQueue(q, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		return fmt.Errorf("NewReceiverForQueue: %w", err)
	}
	got, err := receive(ctx, rd, 3, goReceiveWait)
	if err != nil {
		return err
	}
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
	}
	sort.Strings(bodies)
	var p problems
	p.equal("bodies received and deleted", bodies, []string{"rd-0", "rd-1", "rd-2"})
	// A peek-lock receiver finds nothing: the messages are gone, not locked.
	if err := expectNothing(ctx, r, "after receive-and-delete"); err != nil {
		p.add("%v", err)
	}
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil {
		p.add("PeekMessages: %v", err)
	}
	p.equal("messages peeked after receive-and-delete", len(peeked), 0)
	return p.err()
}

func goPeekLockComplete(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	before := time.Now().Add(-30 * time.Second)
	if err := s.SendMessage(ctx, &azservicebus.Message{
		Body: []byte("peek-lock"), MessageID: to.Ptr("msg-1"), Subject: to.Ptr("the-subject"),
		ContentType: to.Ptr("application/octet-stream"), CorrelationID: to.Ptr("corr-1"),
		To: to.Ptr("someone"), ReplyTo: to.Ptr("reply-queue"), ReplyToSessionID: to.Ptr("reply-session"),
		TimeToLive: to.Ptr(10 * time.Minute),
	}, nil); err != nil {
		return fmt.Errorf("SendMessage: %w", err)
	}
	m, err := receiveOne(ctx, r, "the message")
	if err != nil {
		return err
	}
	var p problems
	p.equal("body", string(m.Body), "peek-lock")
	p.equal("MessageID", m.MessageID, "msg-1")
	p.equal("Subject", str(m.Subject), "the-subject")
	p.equal("ContentType", str(m.ContentType), "application/octet-stream")
	p.equal("CorrelationID", str(m.CorrelationID), "corr-1")
	p.equal("To", str(m.To), "someone")
	p.equal("ReplyTo", str(m.ReplyTo), "reply-queue")
	p.equal("ReplyToSessionID", str(m.ReplyToSessionID), "reply-session")
	if m.TimeToLive == nil || *m.TimeToLive != 10*time.Minute {
		p.add("TimeToLive = %v, want 10m", m.TimeToLive)
	}
	// The Go SDK counts this delivery: header delivery-count 0 is DeliveryCount 1.
	p.equal("DeliveryCount of a first delivery", m.DeliveryCount, uint32(1))
	p.equal("State", m.State, azservicebus.MessageStateActive)
	if i64(m.SequenceNumber) <= 0 {
		p.add("SequenceNumber = %v", m.SequenceNumber)
	}
	if m.EnqueuedTime == nil || m.EnqueuedTime.Before(before) {
		p.add("EnqueuedTime = %v, want after %v", m.EnqueuedTime, before)
	} else if m.ExpiresAt == nil || !m.ExpiresAt.Equal(m.EnqueuedTime.Add(10*time.Minute)) {
		p.add("ExpiresAt = %v, want EnqueuedTime + 10m", m.ExpiresAt)
	}
	if m.LockedUntil == nil || !m.LockedUntil.After(time.Now()) {
		p.add("LockedUntil = %v, want in the future", m.LockedUntil)
	}
	if m.LockToken == [16]byte{} {
		p.add("no lock token")
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		return fmt.Errorf("CompleteMessage: %w (%v)", err, p.err())
	}
	if err := expectNothing(ctx, r, "after complete"); err != nil {
		p.add("%v", err)
	}
	return p.err()
}

// goAbandonWithProperties abandons with properties to modify (AbandonMessageOptions
// .PropertiesToModify, sent as the modified outcome's message-annotations): the redelivery
// carries them, replacing a property of the same name and keeping the others.
func goAbandonWithProperties(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("abandon"), MessageID: to.Ptr("abandon-1"),
		ApplicationProperties: map[string]any{"keep": "original", "attempt": int64(1)}}, nil); err != nil {
		return fmt.Errorf("SendMessage: %w", err)
	}
	m, err := receiveOne(ctx, r, "the message")
	if err != nil {
		return err
	}
	if err := r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"attempt": int64(2), "reason": "retry"},
	}); err != nil {
		return fmt.Errorf("AbandonMessage: %w", err)
	}
	m2, err := receiveOne(ctx, r, "the abandoned message again")
	if err != nil {
		return err
	}
	var p problems
	p.equal("MessageID of the redelivery", m2.MessageID, "abandon-1")
	p.equal("SequenceNumber of the redelivery", i64(m2.SequenceNumber), i64(m.SequenceNumber))
	p.equal("DeliveryCount after one abandon", m2.DeliveryCount, uint32(2))
	p.equal("ApplicationProperties of the redelivery", m2.ApplicationProperties,
		map[string]any{"keep": "original", "attempt": int64(2), "reason": "retry"})
	if err := r.CompleteMessage(ctx, m2, nil); err != nil {
		p.add("CompleteMessage: %v", err)
	}
	return p.err()
}

func goDeferReceiveDeferred(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("deferred"), MessageID: to.Ptr("defer-1")}, nil); err != nil {
		return fmt.Errorf("SendMessage: %w", err)
	}
	m, err := receiveOne(ctx, r, "the message")
	if err != nil {
		return err
	}
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		return fmt.Errorf("DeferMessage: %w", err)
	}
	var p problems
	if err := expectNothing(ctx, r, "a deferred message is not received again"); err != nil {
		p.add("%v", err)
	}
	deferred, err := r.ReceiveDeferredMessages(ctx, []int64{i64(m.SequenceNumber)}, nil)
	if err != nil {
		return fmt.Errorf("ReceiveDeferredMessages: %w (%v)", err, p.err())
	}
	if len(deferred) != 1 {
		p.add("ReceiveDeferredMessages returned %d messages, want 1", len(deferred))
		return p.err()
	}
	d := deferred[0]
	p.equal("SequenceNumber", i64(d.SequenceNumber), i64(m.SequenceNumber))
	p.equal("MessageID", d.MessageID, "defer-1")
	p.equal("body", string(d.Body), "deferred")
	p.equal("State", d.State, azservicebus.MessageStateDeferred)
	if d.LockToken == [16]byte{} {
		p.add("the deferred message has no lock token")
	}
	if err := r.CompleteMessage(ctx, d, nil); err != nil {
		p.add("CompleteMessage of the deferred message: %v", err)
	}
	peeked, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))})
	if err != nil {
		p.add("PeekMessages: %v", err)
	}
	p.equal("messages peeked after completing the deferred message", len(peeked), 0)
	return p.err()
}

func goDeadLetterReason(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	c, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("to the dlq"), MessageID: to.Ptr("dlq-1")}, nil); err != nil {
		return fmt.Errorf("SendMessage: %w", err)
	}
	m, err := receiveOne(ctx, r, "the message")
	if err != nil {
		return err
	}
	if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
		Reason: to.Ptr("BadOrder"), ErrorDescription: to.Ptr("the price is missing"),
	}); err != nil {
		return fmt.Errorf("DeadLetterMessage: %w", err)
	}
	var p problems
	if err := expectNothing(ctx, r, "the dead-lettered message is not in the queue"); err != nil {
		p.add("%v", err)
	}
	dr, err := c.NewReceiverForQueue(sc.entities["queue"], &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		return fmt.Errorf("NewReceiverForQueue (dead-letter): %w", err)
	}
	d, err := receiveOne(ctx, dr, "the dead-lettered message")
	if err != nil {
		p.add("%v", err)
		return p.err()
	}
	p.equal("MessageID", d.MessageID, "dlq-1")
	p.equal("body", string(d.Body), "to the dlq")
	p.equal("DeadLetterReason", str(d.DeadLetterReason), "BadOrder")
	p.equal("DeadLetterErrorDescription", str(d.DeadLetterErrorDescription), "the price is missing")
	if err := dr.CompleteMessage(ctx, d, nil); err != nil {
		p.add("CompleteMessage in the dead-letter queue: %v", err)
	}
	return p.err()
}

// goRenewLock holds a message past its first lock (the queue's lock lasts 10 s) by renewing it
// every 2 s, then completes it, which only works if the renewals held the lock.
func goRenewLock(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("renew")}, nil); err != nil {
		return fmt.Errorf("SendMessage: %w", err)
	}
	m, err := receiveOne(ctx, r, "the message")
	if err != nil {
		return err
	}
	if m.LockedUntil == nil {
		return errors.New("the message has no LockedUntil")
	}
	first := *m.LockedUntil
	last := first
	renewals := 0
	// Renew every 2 s until the first lock has lapsed by a second.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for time.Now().Before(first.Add(time.Second)) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %d renewals: %w", renewals, ctx.Err())
		case <-tick.C:
		}
		if err := r.RenewMessageLock(ctx, m, nil); err != nil {
			return fmt.Errorf("RenewMessageLock (renewal %d): %w", renewals+1, err)
		}
		renewals++
		if m.LockedUntil == nil || m.LockedUntil.Before(last) || !m.LockedUntil.After(time.Now()) {
			return fmt.Errorf("LockedUntil after renewal %d = %v; previous %v", renewals, m.LockedUntil, last)
		}
		last = *m.LockedUntil
	}
	if !last.After(first.Add(time.Second)) {
		return fmt.Errorf("the renewed lock %v is not later than the first %v", last, first)
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		return fmt.Errorf("CompleteMessage after %d renewals, past the first lock %v: %w", renewals, first, err)
	}
	return expectNothing(ctx, r, "after completing the renewed message")
}

func goPeek(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	c, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	var p problems
	empty, err := r.PeekMessages(ctx, 5, nil)
	if err != nil {
		return fmt.Errorf("PeekMessages of an empty queue: %w", err)
	}
	p.equal("messages peeked in an empty queue", len(empty), 0)
	for i := range 3 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: fmt.Appendf(nil, "peek-%d", i)}, nil); err != nil {
			return fmt.Errorf("SendMessage: %w", err)
		}
	}
	browser, err := c.NewReceiverForQueue(sc.entities["queue"], nil)
	if err != nil {
		return fmt.Errorf("NewReceiverForQueue: %w", err)
	}
	seen, err := browser.PeekMessages(ctx, 10, nil)
	if err != nil {
		return fmt.Errorf("PeekMessages: %w", err)
	}
	var bodies []string
	var seqs []int64
	for _, m := range seen {
		bodies = append(bodies, string(m.Body))
		seqs = append(seqs, i64(m.SequenceNumber))
		if m.LockToken != [16]byte{} {
			p.add("peeked message %s has lock token %x", m.Body, m.LockToken)
		}
		p.equal("State of a peeked message", m.State, azservicebus.MessageStateActive)
	}
	p.equal("peeked bodies", bodies, []string{"peek-0", "peek-1", "peek-2"})
	if len(seqs) != 3 || !slices.IsSorted(seqs) || seqs[0] == seqs[1] || seqs[1] == seqs[2] {
		p.add("peeked sequence numbers %v", seqs)
		return p.err()
	}
	from, err := browser.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seqs[1]})
	if err != nil {
		return fmt.Errorf("PeekMessages from %d: %w", seqs[1], err)
	}
	var fromSeqs []int64
	for _, m := range from {
		fromSeqs = append(fromSeqs, i64(m.SequenceNumber))
	}
	p.equal("peek from the second sequence number", fromSeqs, seqs[1:])
	// Peeking locked nothing: all three are received at their first delivery.
	got, err := receive(ctx, r, 3, goReceiveWait)
	if err != nil {
		return err
	}
	var counts []uint32
	bodies = bodies[:0]
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
		counts = append(counts, m.DeliveryCount)
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			p.add("CompleteMessage: %v", err)
		}
	}
	p.equal("bodies received after peeking", bodies, []string{"peek-0", "peek-1", "peek-2"})
	p.equal("DeliveryCount after peeking", counts, []uint32{1, 1, 1})
	return p.err()
}

// goScheduleCancel schedules two messages 8 s ahead (room for a loaded machine to peek before
// then), cancels the first, and receives the other no earlier than its time. Peek shows the scheduled message on a queue but not on a
// subscription: the service keeps a topic's scheduled messages in the topic until their time
// ("Message browsing": scheduled messages are included "Yes for queues. No for subscriptions").
// The sequence number ScheduleMessages returns is the scheduled message's; once active the
// message is "appended to the queue as if it had been enqueued at the current instant, which
// includes assigning a new SequenceNumber" ("Message sequencing and timestamps"), so the message
// received is recognised by its MessageID, and its EnqueuedTime is not before its time.
func goScheduleCancel(ctx context.Context, s *azservicebus.Sender, r *azservicebus.Receiver, topic bool) error {
	at := time.Now().Add(8 * time.Second).Truncate(time.Millisecond)
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{
		{Body: []byte("cancelled"), MessageID: to.Ptr("sched-1")},
		{Body: []byte("kept"), MessageID: to.Ptr("sched-2")},
	}, at, nil)
	if err != nil {
		return fmt.Errorf("ScheduleMessages: %w", err)
	}
	if len(seqs) != 2 || seqs[0] == seqs[1] {
		return fmt.Errorf("ScheduleMessages returned %v, want two sequence numbers", seqs)
	}
	if err := s.CancelScheduledMessages(ctx, seqs[:1], nil); err != nil {
		return fmt.Errorf("CancelScheduledMessages: %w", err)
	}
	var p problems
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil {
		return fmt.Errorf("PeekMessages: %w", err)
	}
	switch {
	case !time.Now().Before(at):
		p.add("the peek ended after the scheduled time %v: what it shows proves nothing", at)
	case topic:
		if len(peeked) != 0 {
			p.add("peek of the subscription before the scheduled time shows %d messages (first: %q, state %d, sequence number %d), "+
				"want none: scheduled messages stay in the topic", len(peeked), peeked[0].MessageID, peeked[0].State, i64(peeked[0].SequenceNumber))
		}
	case len(peeked) != 1:
		p.add("peek shows %d messages, want the one scheduled message left", len(peeked))
	default:
		p.equal("MessageID of the peeked message", peeked[0].MessageID, "sched-2")
		p.equal("SequenceNumber of the peeked message", i64(peeked[0].SequenceNumber), seqs[1])
		p.equal("State of the peeked message", peeked[0].State, azservicebus.MessageStateScheduled)
		if peeked[0].ScheduledEnqueueTime == nil || !peeked[0].ScheduledEnqueueTime.Equal(at) {
			p.add("ScheduledEnqueueTime of the peeked message = %v, want %v", peeked[0].ScheduledEnqueueTime, at)
		}
	}
	got, err := receive(ctx, r, 1, 40*time.Second)
	if err != nil {
		return err
	}
	arrived := time.Now()
	if len(got) != 1 {
		p.add("%d scheduled messages received within 40 s, want 1", len(got))
		return p.err()
	}
	m := got[0]
	p.equal("MessageID of the message received", m.MessageID, "sched-2")
	p.equal("body of the message received", string(m.Body), "kept")
	p.equal("State of the message received", m.State, azservicebus.MessageStateActive)
	if m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(at) {
		p.add("ScheduledEnqueueTime = %v, want %v", m.ScheduledEnqueueTime, at)
	}
	if arrived.Before(at.Add(-time.Second)) {
		p.add("received at %v, before its scheduled time %v", arrived, at)
	}
	if m.EnqueuedTime == nil || m.EnqueuedTime.Before(at.Add(-time.Second)) {
		p.add("EnqueuedTime = %v, want not before the scheduled time %v", m.EnqueuedTime, at)
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		p.add("CompleteMessage: %v", err)
	}
	if err := expectNothing(ctx, r, "the cancelled message"); err != nil {
		p.add("%v", err)
	}
	return p.err()
}

func goScheduleCancelQueue(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	return goScheduleCancel(ctx, s, r, false)
}

func goScheduleCancelTopic(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	c, s, err := e.sender(sc, e.conn("SendListen"), nil, sc.entities["topic"])
	if err != nil {
		return err
	}
	r, err := c.NewReceiverForSubscription(sc.entities["topic"], sc.entities["subscription"], nil)
	if err != nil {
		return fmt.Errorf("NewReceiverForSubscription: %w", err)
	}
	return goScheduleCancel(ctx, s, r, true)
}

func goSessionState(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	q := sc.entities["queue"]
	c, s, err := e.sender(sc, e.conn("SendListen"), nil, q)
	if err != nil {
		return err
	}
	if err := sendAll(ctx, s,
		&azservicebus.Message{Body: []byte("s1-0"), MessageID: to.Ptr("s1-0"), SessionID: to.Ptr("s-1")},
		&azservicebus.Message{Body: []byte("s1-1"), MessageID: to.Ptr("s1-1"), SessionID: to.Ptr("s-1")},
		&azservicebus.Message{Body: []byte("s2"), MessageID: to.Ptr("s2"), SessionID: to.Ptr("s-2")},
	); err != nil {
		return err
	}
	var p problems
	sr, err := c.AcceptSessionForQueue(ctx, q, "s-1", nil)
	if err != nil {
		return fmt.Errorf("AcceptSessionForQueue s-1: %w", err)
	}
	p.equal("SessionID", sr.SessionID(), "s-1")
	if !sr.LockedUntil().After(time.Now()) {
		p.add("session LockedUntil %v is not in the future", sr.LockedUntil())
	}
	state, err := sr.GetSessionState(ctx, nil)
	if err != nil {
		return fmt.Errorf("GetSessionState of a new session: %w", err)
	}
	p.equal("state of a new session", state, []byte(nil))
	if err := sr.SetSessionState(ctx, []byte("\x00state-1"), nil); err != nil {
		return fmt.Errorf("SetSessionState: %w", err)
	}
	if state, err = sr.GetSessionState(ctx, nil); err != nil {
		return fmt.Errorf("GetSessionState: %w", err)
	}
	p.equal("state after SetSessionState", state, []byte("\x00state-1"))
	before := sr.LockedUntil()
	if err := sr.RenewSessionLock(ctx, nil); err != nil {
		return fmt.Errorf("RenewSessionLock: %w", err)
	}
	if sr.LockedUntil().Before(before) || !sr.LockedUntil().After(time.Now()) {
		p.add("LockedUntil after RenewSessionLock = %v; before %v", sr.LockedUntil(), before)
	}
	got, err := receive(ctx, sr, 2, goReceiveWait)
	if err != nil {
		return err
	}
	var bodies, sessions []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
		sessions = append(sessions, str(m.SessionID))
		if err := sr.CompleteMessage(ctx, m, nil); err != nil {
			p.add("CompleteMessage: %v", err)
		}
	}
	p.equal("bodies of session s-1, in order", bodies, []string{"s1-0", "s1-1"})
	p.equal("SessionID of its messages", sessions, []string{"s-1", "s-1"})
	if err := expectNothing(ctx, sr, "session s-1 after its two messages"); err != nil {
		p.add("%v", err)
	}
	if err := sr.Close(ctx); err != nil {
		p.add("Close: %v", err)
	}

	// The state outlives the receiver.
	sr, err = c.AcceptSessionForQueue(ctx, q, "s-1", nil)
	if err != nil {
		return fmt.Errorf("AcceptSessionForQueue s-1 again: %w (%v)", err, p.err())
	}
	if state, err = sr.GetSessionState(ctx, nil); err != nil {
		return fmt.Errorf("GetSessionState from the next receiver: %w", err)
	}
	p.equal("state seen by the next receiver of the session", state, []byte("\x00state-1"))
	if err := sr.SetSessionState(ctx, nil, nil); err != nil {
		return fmt.Errorf("SetSessionState(nil): %w", err)
	}
	if state, err = sr.GetSessionState(ctx, nil); err != nil {
		return fmt.Errorf("GetSessionState: %w", err)
	}
	p.equal("state after SetSessionState(nil)", state, []byte(nil))
	if err := sr.Close(ctx); err != nil {
		p.add("Close: %v", err)
	}

	// The next available session is the one with messages left.
	next, err := c.AcceptNextSessionForQueue(ctx, q, nil)
	if err != nil {
		return fmt.Errorf("AcceptNextSessionForQueue: %w (%v)", err, p.err())
	}
	p.equal("SessionID of the next available session", next.SessionID(), "s-2")
	m, err := receiveOne(ctx, next, "the message of the next available session")
	if err != nil {
		p.add("%v", err)
		return p.err()
	}
	p.equal("SessionID of its message", str(m.SessionID), "s-2")
	if err := next.CompleteMessage(ctx, m, nil); err != nil {
		p.add("CompleteMessage: %v", err)
	}
	return p.err()
}

// goSessionEmptyID: the session "" is a session like any other (the SDK's Message.SessionID
// says "an empty string is a valid session identifier").
func goSessionEmptyID(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	q := sc.entities["queue"]
	c, s, err := e.sender(sc, e.conn("SendListen"), nil, q)
	if err != nil {
		return err
	}
	if err := sendAll(ctx, s,
		&azservicebus.Message{Body: []byte("other"), MessageID: to.Ptr("other"), SessionID: to.Ptr("other")},
		&azservicebus.Message{Body: []byte("empty"), MessageID: to.Ptr("empty"), SessionID: to.Ptr("")},
	); err != nil {
		return err
	}
	var p problems
	sr, err := c.AcceptSessionForQueue(ctx, q, "", nil)
	if err != nil {
		return fmt.Errorf(`AcceptSessionForQueue "": %w`, err)
	}
	p.equal("SessionID of the receiver", sr.SessionID(), "")
	m, err := receiveOne(ctx, sr, `the message of session ""`)
	if err != nil {
		p.add("%v", err)
		return p.err()
	}
	p.equal("body", string(m.Body), "empty")
	if m.SessionID == nil || *m.SessionID != "" {
		p.add(`SessionID of the message = %v, want ""`, m.SessionID)
	}
	if err := sr.SetSessionState(ctx, []byte("empty-state"), nil); err != nil {
		return fmt.Errorf(`SetSessionState of session "": %w`, err)
	}
	state, err := sr.GetSessionState(ctx, nil)
	if err != nil {
		return fmt.Errorf(`GetSessionState of session "": %w`, err)
	}
	p.equal(`state of session ""`, state, []byte("empty-state"))
	if err := sr.CompleteMessage(ctx, m, nil); err != nil {
		p.add("CompleteMessage: %v", err)
	}
	if err := expectNothing(ctx, sr, `session "" after its message`); err != nil {
		p.add("%v", err)
	}
	if err := sr.Close(ctx); err != nil {
		p.add("Close: %v", err)
	}
	other, err := c.AcceptSessionForQueue(ctx, q, "other", nil)
	if err != nil {
		return fmt.Errorf("AcceptSessionForQueue other: %w (%v)", err, p.err())
	}
	m, err = receiveOne(ctx, other, "the message of session other")
	if err != nil {
		p.add("%v", err)
		return p.err()
	}
	p.equal("body of session other", string(m.Body), "other")
	if state, err = other.GetSessionState(ctx, nil); err != nil {
		return fmt.Errorf("GetSessionState of session other: %w", err)
	}
	p.equal("state of session other", state, []byte(nil))
	if err := other.CompleteMessage(ctx, m, nil); err != nil {
		p.add("CompleteMessage: %v", err)
	}
	return p.err()
}

// listSessions lists every session of a queue through the SDK's pager.
func listSessions(ctx context.Context, c *azservicebus.Client, q string, opts *azservicebus.ListSessionsOptions) ([]string, error) {
	var ids []string
	pager := c.NewListSessionsForQueuePager(q, opts)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return ids, fmt.Errorf("NewListSessionsForQueuePager: %w", err)
		}
		ids = append(ids, page.Sessions...)
	}
	sort.Strings(ids)
	return ids, nil
}

func goListSessions(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	q := sc.entities["queue"]
	// The SDK's sender attaches no link until it first sends.
	c, s, err := e.sender(sc, e.conn("SendListen"), nil, q)
	if err != nil {
		return err
	}
	var p problems
	ids, err := listSessions(ctx, c, q, nil)
	if err != nil {
		return err
	}
	p.equal("sessions of an empty queue", ids, []string(nil))
	if err := sendAll(ctx, s,
		&azservicebus.Message{Body: []byte("a"), MessageID: to.Ptr("a"), SessionID: to.Ptr("a")},
		&azservicebus.Message{Body: []byte("b"), MessageID: to.Ptr("b"), SessionID: to.Ptr("b")},
		&azservicebus.Message{Body: []byte("c"), MessageID: to.Ptr("c"), SessionID: to.Ptr("c")},
	); err != nil {
		return err
	}
	// Session c keeps only its state: listed for the state, not for messages.
	sr, err := c.AcceptSessionForQueue(ctx, q, "c", nil)
	if err != nil {
		return fmt.Errorf("AcceptSessionForQueue c: %w", err)
	}
	if err := sr.SetSessionState(ctx, []byte("c-state"), nil); err != nil {
		return fmt.Errorf("SetSessionState c: %w", err)
	}
	m, err := receiveOne(ctx, sr, "the message of session c")
	if err != nil {
		return err
	}
	if err := sr.CompleteMessage(ctx, m, nil); err != nil {
		return fmt.Errorf("CompleteMessage: %w", err)
	}
	if err := sr.Close(ctx); err != nil {
		p.add("Close: %v", err)
	}
	if ids, err = listSessions(ctx, c, q, nil); err != nil {
		return fmt.Errorf("%w (%v)", err, p.err())
	}
	p.equal("sessions listed", ids, []string{"a", "b", "c"})

	// Only b's state changes after since. since is the next millisecond (the wire's precision),
	// so c's state, set before, is not after it; b's is set once the clock has passed it.
	since := time.Now().Truncate(time.Millisecond).Add(time.Millisecond)
	time.Sleep(time.Until(since)) // the clock must pass since (under 1 ms): a time, not an event
	sr, err = c.AcceptSessionForQueue(ctx, q, "b", nil)
	if err != nil {
		return fmt.Errorf("AcceptSessionForQueue b: %w (%v)", err, p.err())
	}
	if err := sr.SetSessionState(ctx, []byte("b-state"), nil); err != nil {
		return fmt.Errorf("SetSessionState b: %w", err)
	}
	if err := sr.Close(ctx); err != nil {
		p.add("Close: %v", err)
	}
	if ids, err = listSessions(ctx, c, q, &azservicebus.ListSessionsOptions{SessionStateUpdatedAfter: &since}); err != nil {
		return fmt.Errorf("%w (%v)", err, p.err())
	}
	p.equal("sessions whose state changed after "+since.Format(time.RFC3339Nano), ids, []string{"b"})
	return p.err()
}

// goRules manages the rules of a subscription. The Go SDK has no rule manager on the data
// plane: a Go application adds, lists and removes rules with admin.Client, over REST (https),
// which is what this does; the data plane then shows the rules at work.
func goRules(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	t, sub := sc.entities["topic"], sc.entities["subscription"]
	a, err := e.admin()
	if err != nil {
		return fmt.Errorf("admin.NewClientFromConnectionString: %w", err)
	}
	if _, err := a.CreateSubscription(ctx, t, sub, nil); err != nil {
		return fmt.Errorf("CreateSubscription: %w", err)
	}
	listRules := func() (map[string]admin.RuleProperties, []string, error) {
		rules := map[string]admin.RuleProperties{}
		var names []string
		pager := a.NewListRulesPager(t, sub, nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("ListRules: %w", err)
			}
			for _, r := range page.Rules {
				rules[r.Name] = r
				names = append(names, r.Name)
			}
		}
		sort.Strings(names)
		return rules, names, nil
	}
	var p problems
	rules, names, err := listRules()
	if err != nil {
		return err
	}
	p.equal("rules of a new subscription", names, []string{"$Default"})
	if _, ok := rules["$Default"].Filter.(*admin.TrueFilter); !ok {
		p.add("$Default filter = %#v, want *admin.TrueFilter", rules["$Default"].Filter)
	}
	if _, err := a.DeleteRule(ctx, t, sub, "$Default", nil); err != nil {
		return fmt.Errorf("DeleteRule $Default: %w", err)
	}
	if _, err := a.CreateRule(ctx, t, sub, &admin.CreateRuleOptions{
		Name:   to.Ptr("red"),
		Filter: &admin.SQLFilter{Expression: "color = 'red'"},
		Action: &admin.SQLAction{Expression: "SET routed = 'red'"},
	}); err != nil {
		return fmt.Errorf("CreateRule red: %w", err)
	}
	if _, err := a.CreateRule(ctx, t, sub, &admin.CreateRuleOptions{
		Name:   to.Ptr("order"),
		Filter: &admin.CorrelationFilter{CorrelationID: to.Ptr("order-1"), ApplicationProperties: map[string]any{"kind": "order"}},
	}); err != nil {
		return fmt.Errorf("CreateRule order: %w", err)
	}
	if rules, names, err = listRules(); err != nil {
		return err
	}
	p.equal("rule names", names, []string{"order", "red"})
	if f, ok := rules["red"].Filter.(*admin.SQLFilter); !ok || f.Expression != "color = 'red'" {
		p.add("red filter = %#v", rules["red"].Filter)
	}
	if act, ok := rules["red"].Action.(*admin.SQLAction); !ok || act.Expression != "SET routed = 'red'" {
		p.add("red action = %#v", rules["red"].Action)
	}
	if f, ok := rules["order"].Filter.(*admin.CorrelationFilter); !ok || str(f.CorrelationID) != "order-1" ||
		!reflect.DeepEqual(f.ApplicationProperties, map[string]any{"kind": "order"}) {
		p.add("order filter = %#v", rules["order"].Filter)
	}

	// The rules decide what the subscription receives.
	c, s, err := e.sender(sc, e.conn("SendListen"), nil, t)
	if err != nil {
		return err
	}
	if err := sendAll(ctx, s,
		&azservicebus.Message{Body: []byte("red"), MessageID: to.Ptr("red"), ApplicationProperties: map[string]any{"color": "red"}},
		&azservicebus.Message{Body: []byte("blue"), MessageID: to.Ptr("blue"), ApplicationProperties: map[string]any{"color": "blue"}},
		&azservicebus.Message{Body: []byte("order"), MessageID: to.Ptr("order"), CorrelationID: to.Ptr("order-1"), ApplicationProperties: map[string]any{"kind": "order"}},
		&azservicebus.Message{Body: []byte("not-order"), MessageID: to.Ptr("not-order"), CorrelationID: to.Ptr("order-2"), ApplicationProperties: map[string]any{"kind": "order"}},
	); err != nil {
		return err
	}
	r, err := c.NewReceiverForSubscription(t, sub, nil)
	if err != nil {
		return fmt.Errorf("NewReceiverForSubscription: %w", err)
	}
	got, err := receive(ctx, r, 2, goReceiveWait)
	if err != nil {
		return err
	}
	byID := map[string]*azservicebus.ReceivedMessage{}
	var ids []string
	for _, m := range got {
		byID[m.MessageID] = m
		ids = append(ids, m.MessageID)
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			p.add("CompleteMessage: %v", err)
		}
	}
	sort.Strings(ids)
	p.equal("messages the rules let through", ids, []string{"order", "red"})
	if red := byID["red"]; red != nil {
		p.equal("property set by the red rule's action", red.ApplicationProperties["routed"], "red")
	}
	if order := byID["order"]; order != nil {
		if v, ok := order.ApplicationProperties["routed"]; ok {
			p.add("the order message has routed = %#v, which only the red rule's action sets", v)
		}
	}
	if err := expectNothing(ctx, r, "messages no rule matches"); err != nil {
		p.add("%v", err)
	}
	if _, err := a.DeleteRule(ctx, t, sub, "order", nil); err != nil {
		return fmt.Errorf("DeleteRule order: %w (%v)", err, p.err())
	}
	if _, names, err = listRules(); err != nil {
		return err
	}
	p.equal("rules after deleting one", names, []string{"red"})
	return p.err()
}

func goBatch(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		return fmt.Errorf("NewMessageBatch: %w", err)
	}
	for i := range 10 {
		if err := batch.AddMessage(&azservicebus.Message{Body: fmt.Appendf(nil, "batch-%d", i),
			ApplicationProperties: map[string]any{"i": int64(i)}}, nil); err != nil {
			return fmt.Errorf("AddMessage %d: %w", i, err)
		}
	}
	var p problems
	p.equal("messages in the batch", batch.NumMessages(), int32(10))
	// The batch is bounded by what the broker's attach announced (the queue's
	// MaxMessageSizeInKilobytes, 256 KB as on the Standard tier): a 1 MiB message is refused by
	// the batch, not sent.
	if err := batch.AddMessage(&azservicebus.Message{Body: make([]byte, 1<<20)}, nil); !errors.Is(err, azservicebus.ErrMessageTooLarge) {
		p.add("AddMessage of 1 MiB: %v, want ErrMessageTooLarge", err)
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		return fmt.Errorf("SendMessageBatch: %w", err)
	}
	got, err := receive(ctx, r, 10, goReceiveWait)
	if err != nil {
		return err
	}
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
		var i int64
		if _, err := fmt.Sscanf(string(m.Body), "batch-%d", &i); err == nil {
			p.equal("property i of "+string(m.Body), m.ApplicationProperties["i"], i)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			p.add("CompleteMessage: %v", err)
		}
	}
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("batch-%d", i))
	}
	p.equal("bodies received, in order", bodies, want)
	if err := expectNothing(ctx, r, "after the batch"); err != nil {
		p.add("%v", err)
	}
	return p.err()
}

func goLargeMessage(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	_, s, r, err := queueClients(ctx, e, sc)
	if err != nil {
		return err
	}
	body := make([]byte, 200*1024)
	if _, err := rand.Read(body); err != nil {
		return err
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: body, MessageID: to.Ptr("large")}, nil); err != nil {
		return fmt.Errorf("SendMessage of 200 KB: %w", err)
	}
	m, err := receiveOne(ctx, r, "the large message")
	if err != nil {
		return err
	}
	var p problems
	p.equal("body length", len(m.Body), len(body))
	if !bytes.Equal(m.Body, body) {
		p.add("the body differs from what was sent")
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		p.add("CompleteMessage: %v", err)
	}
	return p.err()
}

// goWebSockets sends and receives over AMQP over WebSockets: the connection string names the
// https listener (no emulator flag, as against Azure), and ClientOptions.NewWebSocketConn dials
// the URL the SDK gives it with github.com/coder/websocket, as the SDK's own example does,
// trusting the broker's certificate.
func goWebSockets(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	var mu sync.Mutex
	var dialled []string
	opts := &azservicebus.ClientOptions{
		NewWebSocketConn: func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
			mu.Lock()
			dialled = append(dialled, args.Host)
			mu.Unlock()
			ws, _, err := websocket.Dial(ctx, args.Host, &websocket.DialOptions{
				HTTPClient:   &http.Client{Transport: e.transport},
				Subprotocols: []string{"amqp"},
			})
			if err != nil {
				return nil, err
			}
			// The connection outlives the operation whose ctx dialled it; the SDK closes it.
			return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
		},
	}
	q := sc.entities["queue"]
	c, s, err := e.sender(sc, connString(e.httpsHost, "SendListen", false), opts, q)
	if err != nil {
		return err
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over websockets"), MessageID: to.Ptr("ws-1")}, nil); err != nil {
		return fmt.Errorf("SendMessage over WebSockets: %w", err)
	}
	r, err := c.NewReceiverForQueue(q, nil)
	if err != nil {
		return fmt.Errorf("NewReceiverForQueue: %w", err)
	}
	m, err := receiveOne(ctx, r, "the message over websockets")
	if err != nil {
		return err
	}
	var p problems
	p.equal("MessageID", m.MessageID, "ws-1")
	p.equal("body", string(m.Body), "over websockets")
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		p.add("CompleteMessage: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) == 0 {
		p.add("no WebSocket was dialled")
	}
	for _, u := range dialled {
		p.equal("WebSocket URL", u, "wss://"+e.httpsHost+"/$servicebus/websocket")
	}
	return p.err()
}

// sendRefused sends one message with connStr to queue and returns the *azservicebus.Error the
// send failed with.
func sendRefused(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun, connStr, queue, what string) (*azservicebus.Error, error) {
	_, s, err := e.sender(sc, connStr, nil, queue)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("must be refused")}, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) {
		return nil, fmt.Errorf("%s: SendMessage returned %v (%T), want an *azservicebus.Error", what, err, err)
	}
	return sbErr, nil
}

func goWrongKey(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	// A key name that exists, with another key's secret.
	wrong := strings.Replace(e.conn("SendListen"), sendListenKey, sendOnlyKey, 1)
	sbErr, err := sendRefused(ctx, e, sc, wrong, sc.entities["queue"], "send with a wrong key")
	if err != nil {
		return err
	}
	if sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		return fmt.Errorf("send with a wrong key: code %q (%v), want %q", sbErr.Code, sbErr, azservicebus.CodeUnauthorizedAccess)
	}
	return nil
}

func goMissingRight(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	q := sc.entities["queue"]
	// Listen is enough to receive; sending needs Send.
	c, err := e.client(sc, e.conn("ListenOnly"), nil)
	if err != nil {
		return err
	}
	r, err := c.NewReceiverForQueue(q, nil)
	if err != nil {
		return fmt.Errorf("NewReceiverForQueue: %w", err)
	}
	if err := expectNothing(ctx, r, "receive with a Listen-only key"); err != nil {
		return err
	}
	sbErr, err := sendRefused(ctx, e, sc, e.conn("ListenOnly"), q, "send with a Listen-only key")
	if err != nil {
		return err
	}
	if sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		return fmt.Errorf("send with a Listen-only key: code %q (%v), want %q", sbErr.Code, sbErr, azservicebus.CodeUnauthorizedAccess)
	}
	return nil
}

// goMissingEntity: the SDK's own TestNewClientNewSenderNotFound expects CodeNotFound within
// 10 s for a send to a queue that does not exist.
func goMissingEntity(ctx context.Context, e *goScenarioEnv, sc *goScenarioRun) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sbErr, err := sendRefused(ctx, e, sc, e.conn("SendListen"), sc.entities["queue"], "send to a missing queue")
	if err != nil {
		return err
	}
	if sbErr.Code != azservicebus.CodeNotFound {
		return fmt.Errorf("send to a missing queue: code %q (%v), want %q", sbErr.Code, sbErr, azservicebus.CodeNotFound)
	}
	return nil
}
