package program

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
)

// cliBroker is a running sbgate on its own database and the connection string of its
// namespace key.
type cliBroker struct {
	endpoint, conn, dbURL string
}

func startCLIBroker(t *testing.T) cliBroker {
	t.Helper()
	url := dbtest.NewDatabase(t)
	endpoint, _, _ := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey))
	host := strings.TrimPrefix(endpoint, "http://")
	return cliBroker{endpoint: endpoint, dbURL: url,
		conn: "Endpoint=sb://" + host + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey}
}

// sb runs one sbgate command against b and returns what it printed and its error.
func (b cliBroker) sb(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return b.sbAs(t, b.conn, args...)
}

func (b cliBroker) sbAs(t *testing.T, conn string, args ...string) (string, error) {
	t.Helper()
	var out, errOut syncBuffer
	err := run(t.Context(), args, env("SBGATE_CONNECTION_STRING", conn), &out, &errOut)
	return out.String() + errOut.String(), err
}

// ok runs a command that must succeed.
func (b cliBroker) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, err := b.sb(t, args...)
	if err != nil {
		t.Fatalf("sbgate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// refused runs a command that must fail with an error holding every one of want.
func (b cliBroker) refused(t *testing.T, want []string, args ...string) {
	t.Helper()
	out, err := b.sb(t, args...)
	if err == nil {
		t.Fatalf("sbgate %s succeeded:\n%s\nwant an error with %q", strings.Join(args, " "), out, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("sbgate %s: error %q lacks %q", strings.Join(args, " "), err, w)
		}
	}
}

type cliMessage struct {
	Body             *string
	BodyBase64       []byte
	ContentType      string
	BrokerProperties map[string]any
	UserProperties   map[string]any
}

func (b cliBroker) messages(t *testing.T, args ...string) []cliMessage {
	t.Helper()
	out := b.ok(t, append(args, "-o", "json")...)
	var ms []cliMessage
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatalf("sbgate %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return ms
}

func TestCLIQueuesAndMessages(t *testing.T) {
	t.Parallel()
	b := startCLIBroker(t)

	out := b.ok(t, "queue", "create", "orders", "-p", "MaxDeliveryCount=3", "-p", "LockDuration=PT45S")
	for _, want := range []string{"PROPERTY", "MaxDeliveryCount", "LockDuration  ", "PT45S", "Name"} {
		if !strings.Contains(out, want) {
			t.Errorf("queue create printed no %q:\n%s", want, out)
		}
	}
	// Refusals carry the broker's status and detail.
	b.refused(t, []string{"409 Conflict", "orders"}, "queue", "create", "orders")
	b.refused(t, []string{"400 Bad Request", "MaxDeliveryCount"}, "queue", "create", "bad", "-p", "MaxDeliveryCount=many")
	b.refused(t, []string{"want 1 argument(s), got 0"}, "queue", "show")
	b.refused(t, []string{"created, but the broker ignored -p MaxDeliveryCont: not a property of a QueueDescription"}, "queue", "create", "typo", "-p", "MaxDeliveryCont=5")
	b.ok(t, "queue", "delete", "typo")

	// Bodies from an argument, a file and stdin; properties as flags, typed.
	b.ok(t, "send", "orders", "first <b>bold</b>", "-label", "l1", "-message-id", "m-1", "-p", "amount=12.5", "-p", "region=eu", "-p", `code="7"`, "-p", "rush=true")
	file := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(file, []byte(`{"n":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b.ok(t, "send", "orders", "-file", file, "-content-type", "application/json", "-ttl", "10m")
	if err := os.WriteFile(file, []byte("third\x00\xff"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.ok(t, "send", "orders", "-file", file)

	ms := b.messages(t, "peek", "orders")
	if len(ms) != 3 {
		t.Fatalf("peek: %d messages; want 3", len(ms))
	}
	if ms[0].Body == nil || *ms[0].Body != "first <b>bold</b>" || ms[0].BrokerProperties["Label"] != "l1" || ms[0].BrokerProperties["MessageId"] != "m-1" {
		t.Errorf("first message = %+v", ms[0])
	}
	if u := ms[0].UserProperties; u["amount"] != 12.5 || u["region"] != "eu" || u["code"] != "7" || u["rush"] != true {
		t.Errorf("user properties = %#v; want amount 12.5, region eu, code \"7\", rush true", u)
	}
	if ms[1].Body == nil || *ms[1].Body != `{"n":2}` || ms[1].ContentType != "application/json" || ms[1].BrokerProperties["TimeToLive"] != 600.0 {
		t.Errorf("second message = %+v", ms[1])
	}
	if string(ms[2].BodyBase64) != "third\x00\xff" {
		t.Errorf("third message = %+v; want the binary body of the file", ms[2])
	}

	// Tables: counts per queue, and message rows where control characters cannot reach the terminal.
	out = b.ok(t, "queue", "list")
	if !regexp.MustCompile(`(?m)^NAME +ACTIVE +DEAD-LETTER +SCHEDULED +SIZE +STATUS\n^orders +3 +0 +0 +\d+ +Active`).MatchString(out) {
		t.Errorf("queue list:\n%s", out)
	}
	out = b.ok(t, "peek", "orders")
	if !strings.Contains(out, `(7 bytes) 746869726400ff`) || !strings.Contains(out, "amount=12.5") || strings.ContainsRune(out, 0) {
		t.Errorf("peek table:\n%q", out)
	}

	// Peek-lock and complete by default: two are gone, one is left.
	got := b.messages(t, "receive", "orders", "-n", "2")
	if len(got) != 2 || got[0].BrokerProperties["LockToken"] == nil {
		t.Fatalf("receive -n 2 = %+v", got)
	}
	if left := b.messages(t, "peek", "orders"); len(left) != 1 {
		t.Errorf("after receive -n 2 (complete): %d left; want 1", len(left))
	}
	// -settle none keeps the lock: the message stays, not receivable again for now.
	if got := b.messages(t, "receive", "orders", "-settle", "none"); len(got) != 1 {
		t.Fatalf("receive -settle none = %+v", got)
	}
	if got := b.messages(t, "receive", "orders"); len(got) != 0 {
		t.Errorf("receive while the only message is locked = %+v; want none", got)
	}
	if left := b.messages(t, "peek", "orders"); len(left) != 1 {
		t.Errorf("after receive -settle none: %d left; want 1", len(left))
	}
	b.ok(t, "send", "orders", "four")
	if got := b.messages(t, "receive", "orders", "-delete", "-n", "5"); len(got) != 1 || *got[0].Body != "four" {
		t.Errorf("receive -delete = %+v; want the one unlocked message", got)
	}
	if out := b.ok(t, "receive", "orders", "-delete", "-wait", "1s"); !strings.Contains(out, "no messages") {
		t.Errorf("receive from an empty queue: %q", out)
	}

	// A JSON list for scripts carries the counts.
	var qs []map[string]any
	if err := json.Unmarshal([]byte(b.ok(t, "queue", "list", "-o", "json")), &qs); err != nil || len(qs) != 1 {
		t.Fatalf("queue list -o json: %v %v", qs, err)
	}
	if cd, _ := qs[0]["CountDetails"].(map[string]any); qs[0]["Name"] != "orders" || cd["ActiveMessageCount"] != "1" || qs[0]["MaxDeliveryCount"] != "3" {
		t.Errorf("queue list -o json = %v", qs[0])
	}

	b.refused(t, []string{"404", "missing"}, "send", "missing", "x")
	b.refused(t, []string{"no queue of that name"}, "queue", "show", "missing")
	b.ok(t, "queue", "delete", "orders")
	b.refused(t, []string{"no queue of that name"}, "queue", "delete", "orders")
}

// TestCLISendFromStdin is not parallel: it replaces the package's stdin, which no other test
// reads.
func TestCLISendFromStdin(t *testing.T) {
	b := startCLIBroker(t)
	b.ok(t, "queue", "create", "in")
	stdin = strings.NewReader("from stdin\n")
	b.ok(t, "send", "in")
	stdin = strings.NewReader("second")
	b.ok(t, "send", "in", "-file", "-")
	stdin = strings.NewReader("")
	ms := b.messages(t, "peek", "in")
	if len(ms) != 2 || ms[0].Body == nil || *ms[0].Body != "from stdin\n" || ms[1].Body == nil || *ms[1].Body != "second" {
		t.Errorf("bodies from stdin arrived as %+v", ms)
	}
}

func TestCLIDeadLetters(t *testing.T) {
	t.Parallel()
	b := startCLIBroker(t)
	b.ok(t, "queue", "create", "jobs", "-p", "MaxDeliveryCount=1")
	for _, body := range []string{"a", "b", "c"} {
		b.ok(t, "send", "jobs", body, "-p", "kind="+body)
	}
	// Abandoning the only allowed delivery dead-letters each message.
	if got := b.messages(t, "receive", "jobs", "-n", "3", "-settle", "abandon"); len(got) != 3 {
		t.Fatalf("receive -settle abandon = %d messages", len(got))
	}
	dl := b.messages(t, "dlq", "list", "jobs")
	if len(dl) != 3 || dl[0].BrokerProperties["DeadLetterReason"] != "MaxDeliveryCountExceeded" {
		t.Fatalf("dlq list = %+v", dl)
	}
	out := b.ok(t, "dlq", "list", "jobs")
	if !strings.Contains(out, "REASON") || !strings.Contains(out, "MaxDeliveryCountExceeded") {
		t.Errorf("dlq list table:\n%s", out)
	}

	out = b.ok(t, "dlq", "resubmit", "jobs", "-filter", "kind = 'a'")
	if !strings.Contains(out, "resubmitted 1 dead letters of jobs") {
		t.Errorf("dlq resubmit -filter: %q", out)
	}
	seq := int64(dl[1].BrokerProperties["SequenceNumber"].(float64))
	out = b.ok(t, "dlq", "resubmit", "jobs", "-o", "json", strings.TrimSpace(jsonNumber(seq)))
	if !strings.Contains(out, `"Resubmitted": 1`) {
		t.Errorf("dlq resubmit SEQ: %q", out)
	}
	if ms := b.messages(t, "peek", "jobs"); len(ms) != 2 || *ms[0].Body != "a" || *ms[1].Body != "b" {
		t.Errorf("after resubmitting a and b, jobs holds %+v", ms)
	}
	b.refused(t, []string{"give sequence numbers, -filter or -all"}, "dlq", "resubmit", "jobs")
	b.refused(t, []string{"400 Bad Request"}, "dlq", "resubmit", "jobs", "-filter", "kind = ")
	b.refused(t, []string{"404"}, "dlq", "resubmit", "jobs", "999999")

	out = b.ok(t, "dlq", "purge", "jobs")
	if !strings.Contains(out, "purged 1 dead letters of jobs") {
		t.Errorf("dlq purge: %q", out)
	}
	if dl := b.messages(t, "dlq", "list", "jobs"); len(dl) != 0 {
		t.Errorf("after purge: %+v", dl)
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestCLITopicsSubscriptionsRules(t *testing.T) {
	t.Parallel()
	b := startCLIBroker(t)
	b.ok(t, "topic", "create", "events")
	b.ok(t, "subscription", "create", "events", "big", "-p", "MaxDeliveryCount=5")
	b.ok(t, "subscription", "create", "events", "eu")
	b.ok(t, "rule", "delete", "events", "big", "$Default")
	out := b.ok(t, "rule", "create", "events", "big", "over", "-sql", "amount > @min", "-param", "@min=10", "-action", "SET sys.Label = 'big'")
	if !strings.Contains(out, "SqlFilter") || !strings.Contains(out, "amount > @min") {
		t.Errorf("rule create printed:\n%s", out)
	}
	b.ok(t, "rule", "delete", "events", "eu", "$Default")
	b.ok(t, "rule", "create", "events", "eu", "region", "-correlation", "Label=order", "-correlation", "region=eu")
	// A rule that does not parse is refused with the broker's words, saying where.
	b.refused(t, []string{"400 Bad Request", "syntax error at position 9"}, "rule", "create", "events", "big", "bad", "-sql", "amount >")
	b.refused(t, []string{"exactly one filter"}, "rule", "create", "events", "big", "two", "-sql", "1=1", "-true")

	out = b.ok(t, "rule", "list", "events", "big")
	if !regexp.MustCompile(`over +amount > @min \(@min=10\) +SET sys.Label = 'big'`).MatchString(out) {
		t.Errorf("rule list:\n%s", out)
	}
	out = b.ok(t, "rule", "list", "events", "eu")
	if !strings.Contains(out, "correlation: Label=order, region=eu") {
		t.Errorf("rule list (correlation):\n%s", out)
	}

	b.ok(t, "send", "events", "small", "-p", "amount=5", "-label", "order", "-p", "region=eu")
	b.ok(t, "send", "events", "large", "-p", "amount=50", "-label", "order", "-p", "region=us")
	if ms := b.messages(t, "peek", "events/Subscriptions/big"); len(ms) != 1 || *ms[0].Body != "large" || ms[0].BrokerProperties["Label"] != "big" {
		t.Errorf("big subscription holds %+v; want 'large' with the action's label", ms)
	}
	if ms := b.messages(t, "receive", "events/Subscriptions/eu"); len(ms) != 1 || *ms[0].Body != "small" {
		t.Errorf("eu subscription gave %+v; want 'small'", ms)
	}

	out = b.ok(t, "subscription", "list", "events")
	if !regexp.MustCompile(`(?m)^big +1 +0 +0 +Active\n^eu +0 +0`).MatchString(out) {
		t.Errorf("subscription list:\n%s", out)
	}
	out = b.ok(t, "topic", "list")
	if !regexp.MustCompile(`(?m)^events +2 +0`).MatchString(out) {
		t.Errorf("topic list:\n%s", out)
	}
	var sub map[string]any
	if err := json.Unmarshal([]byte(b.ok(t, "subscription", "show", "events", "big", "-o", "json")), &sub); err != nil || sub["MaxDeliveryCount"] != "5" {
		t.Errorf("subscription show -o json = %v, %v", sub, err)
	}
	// A queue command never acts on a topic of that name.
	b.refused(t, []string{"not a queue but a Topic"}, "queue", "delete", "events")
	b.ok(t, "rule", "delete", "events", "big", "over")
	b.ok(t, "subscription", "delete", "events", "eu")
	b.ok(t, "topic", "delete", "events")
	if out := b.ok(t, "topic", "list"); !strings.Contains(out, "no topics") {
		t.Errorf("topic list after delete: %q", out)
	}
}

// TestCLIKeys: a wrong key and a key without Manage are refused with the broker's own status
// and words.
func TestCLIKeys(t *testing.T) {
	t.Parallel()
	b := startCLIBroker(t)
	wrong := strings.Replace(b.conn, testKey, "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktMTI=", 1)
	out, err := b.sbAs(t, wrong, "queue", "list")
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("queue list with a wrong key: %v\n%s", err, out)
	}

	var keyOut syncBuffer
	if err := run(t.Context(), []string{"key", "create", "-database-url", b.dbURL, "-rights", "Send", "sender"}, env(), &keyOut, &keyOut); err != nil {
		t.Fatalf("key create: %v\n%s", err, keyOut.String())
	}
	m := regexp.MustCompile(`SharedAccessKey=([A-Za-z0-9+/=]+)`).FindStringSubmatch(keyOut.String())
	if m == nil {
		t.Fatalf("key create printed no key:\n%s", keyOut.String())
	}
	sender := "Endpoint=" + b.endpoint + ";SharedAccessKeyName=sender;SharedAccessKey=" + m[1]
	b.ok(t, "queue", "create", "q")
	// The gateway learns of the new key within seconds; poll until a send with it works.
	eventually.NoError(t, "a send with the new Send key", func() error {
		_, err := b.sbAs(t, sender, "send", "q", "hi")
		return err
	})
	_, err = b.sbAs(t, sender, "queue", "create", "other")
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "Manage") {
		t.Errorf("queue create with a Send key: %v; want 401 naming Manage", err)
	}
	_, err = b.sbAs(t, sender, "peek", "q")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("peek with a Send key: %v; want 401", err)
	}
}
