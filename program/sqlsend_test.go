package program

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
)

// TestSQLSendsSurviveAKilledRelay: 16 application transactions at a time send 10,000 messages
// through sbgate.send_batch while the gateway relays them; it is killed with SIGKILL in the
// middle, a new gateway takes over, and every message is in the queue exactly once.
func TestSQLSendsSurviveAKilledRelay(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	out1 := &syncBuffer{}
	p1, exited := sbgateProcess(t, out1, "DATABASE_URL="+url, "SBGATE_SAS_KEY="+testKey)
	endpoint := waitEndpoint(t, out1, exited)
	if st, _, body := call(t, http.MethodPut, endpoint+"outbox", nil, `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}

	app, err := db.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	const senders, txsEach, perTx = 16, 25, 25 // 10,000 messages
	delivered := func() (n int) {
		if err := app.QueryRow(t.Context(), `SELECT count(*) FROM messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range txsEach {
				bodies, props := make([][]byte, perTx), make([]string, perTx)
				for i := range perTx {
					id := fmt.Sprintf("%d-%d-%d", g, k, i)
					bodies[i], props[i] = []byte(id), `{"BrokerProperties":{"MessageId":"`+id+`"}}`
				}
				if err := pgx.BeginFunc(t.Context(), app, func(tx pgx.Tx) error {
					_, err := tx.Exec(t.Context(), `SELECT sbgate.send_batch('outbox', $1, $2::jsonb[])`, bodies, props)
					return err
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Kill the gateway once it has relayed part of the messages, while more are committed.
	eventually.Within(60*time.Second).NoError(t, "1500 relayed messages", func() error {
		if n := delivered(); n < 1500 {
			return fmt.Errorf("the gateway relayed %d messages", n)
		}
		return nil
	})
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	before := delivered()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("application transaction: %v", err)
	}
	if before >= senders*txsEach*perTx {
		t.Fatalf("the gateway had relayed everything (%d) before it was killed: nothing tested", before)
	}

	out2 := &syncBuffer{}
	_, exited2 := sbgateProcess(t, out2, "DATABASE_URL="+url, "SBGATE_SAS_KEY="+testKey)
	waitEndpoint(t, out2, exited2)
	var rows int
	eventually.Within(60*time.Second).NoError(t, "every staged message relayed", func() error {
		var distinct, staged int
		if err := app.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT message_id), (SELECT count(*) FROM sbgate.outbox)
			FROM messages`).Scan(&rows, &distinct, &staged); err != nil {
			t.Fatal(err)
		}
		if rows > distinct {
			t.Fatalf("%d messages delivered twice", rows-distinct)
		}
		if staged > 0 {
			return fmt.Errorf("%d messages still staged", staged)
		}
		return nil
	})
	if rows != senders*txsEach*perTx {
		t.Fatalf("%d messages in the queue and none staged; want %d", rows, senders*txsEach*perTx)
	}
	t.Logf("%d of %d relayed before the kill", before, rows)
}

// TestSQLSendFansOutAsHTTP: the same messages sent to a topic once through an HTTP batch send and
// once through sbgate.send_batch reach the same subscriptions with the same rule actions and
// dead letters.
func TestSQLSendFansOutAsHTTP(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	endpoint, _, _ := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey))
	const ns = `http://schemas.microsoft.com/netservices/2010/10/servicebus/connect`
	if st, _, body := call(t, http.MethodPut, endpoint+"shop", nil, `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><TopicDescription xmlns="`+ns+`"/></content></entry>`); st != http.StatusCreated {
		t.Fatalf("create topic: %d %s", st, body)
	}
	subs := map[string]string{
		"all":    ``,
		"eu":     `<DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>region = 'eu' AND amount &gt; 100</SqlExpression></Filter><Name>eu</Name></DefaultRuleDescription>`,
		"corr":   `<DefaultRuleDescription><Filter i:type="CorrelationFilter"><Label>urgent</Label></Filter><Name>c</Name></DefaultRuleDescription>`,
		"act":    `<DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>1=1</SqlExpression></Filter><Action i:type="SqlRuleAction"><SqlExpression>SET tagged = 'yes'</SqlExpression></Action><Name>a</Name></DefaultRuleDescription>`,
		"broken": `<DeadLetteringOnFilterEvaluationExceptions>true</DeadLetteringOnFilterEvaluationExceptions><DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>amount / 0 &gt; 1</SqlExpression></Filter><Name>b</Name></DefaultRuleDescription>`,
	}
	for name, rule := range subs {
		desc := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><SubscriptionDescription xmlns="` + ns +
			`" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` + rule + `</SubscriptionDescription></content></entry>`
		if st, _, body := call(t, http.MethodPut, endpoint+"shop/subscriptions/"+name, nil, desc); st != http.StatusCreated {
			t.Fatalf("create subscription %s: %d %s", name, st, body)
		}
	}
	type element struct {
		Body             string         `json:"Body"`
		BrokerProperties map[string]any `json:"BrokerProperties"`
		UserProperties   map[string]any `json:"UserProperties"`
	}
	sent := []element{
		{"eu-big", map[string]any{"Label": "new"}, map[string]any{"region": "eu", "amount": 500}},
		{"eu-small", map[string]any{"Label": "urgent"}, map[string]any{"region": "eu", "amount": 50.5}},
		{"plain", map[string]any{"Label": "new"}, nil},
	}
	received := func() map[string][]string {
		out := map[string][]string{}
		for name := range subs {
			for _, q := range []string{"", "/$DeadLetterQueue"} {
				st, _, body := call(t, http.MethodDelete, endpoint+"shop/subscriptions/"+name+q+"/messages/$batch?count=50&timeout=0", nil, "")
				if st == http.StatusNoContent {
					continue
				}
				var got []element
				if st != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
					t.Fatalf("receive from %s%s: %d %s", name, q, st, body)
				}
				for _, m := range got {
					out[name] = append(out[name], fmt.Sprintf("%s%s %s %v %v", q, m.Body, m.BrokerProperties["Label"], m.UserProperties, m.BrokerProperties["DeadLetterReason"]))
				}
			}
			sort.Strings(out[name])
		}
		return out
	}

	batch, _ := json.Marshal(sent)
	if st, _, body := call(t, http.MethodPost, endpoint+"shop/messages", map[string]string{"Content-Type": "application/vnd.microsoft.servicebus.json"}, string(batch)); st != http.StatusCreated {
		t.Fatalf("batch send: %d %s", st, body)
	}
	viaHTTP := received()

	app, err := db.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	bodies, props := make([][]byte, len(sent)), make([]string, len(sent))
	for i, e := range sent {
		p, _ := json.Marshal(element{BrokerProperties: e.BrokerProperties, UserProperties: e.UserProperties})
		var m map[string]any
		_ = json.Unmarshal(p, &m)
		delete(m, "Body") // the body is an argument of its own
		p, _ = json.Marshal(m)
		bodies[i], props[i] = []byte(e.Body), string(p)
	}
	if _, err := app.Exec(t.Context(), `SELECT sbgate.send_batch('shop', $1, $2::jsonb[])`, bodies, props); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, "the SQL send to be relayed", func() error {
		var staged int
		if err := app.QueryRow(t.Context(), `SELECT count(*) FROM sbgate.outbox`).Scan(&staged); err != nil {
			t.Fatal(err)
		}
		if staged > 0 {
			return fmt.Errorf("%d messages not relayed", staged)
		}
		return nil
	})
	viaSQL := received()
	if diff := cmp.Diff(viaHTTP, viaSQL); diff != "" {
		t.Errorf("subscriptions after an HTTP send (-) and a SQL send (+):\n%s", diff)
	}
	if len(viaHTTP["broken"]) == 0 || len(viaHTTP["act"]) != 3 || len(viaHTTP["eu"]) != 1 || len(viaHTTP["corr"]) != 1 {
		t.Errorf("the fan-out compared is not the one meant: %v", viaHTTP)
	}
}
