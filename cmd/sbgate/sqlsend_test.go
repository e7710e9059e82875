package main

import (
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
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
	deadline := time.Now().Add(60 * time.Second)
	for delivered() < 1500 {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway relayed %d messages in 60s", delivered())
		}
		time.Sleep(2 * time.Millisecond)
	}
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
	deadline = time.Now().Add(60 * time.Second)
	for {
		var rows, distinct, staged int
		if err := app.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT message_id), (SELECT count(*) FROM sbgate.outbox)
			FROM messages`).Scan(&rows, &distinct, &staged); err != nil {
			t.Fatal(err)
		}
		if rows > distinct {
			t.Fatalf("%d messages delivered twice", rows-distinct)
		}
		if staged == 0 {
			if rows != senders*txsEach*perTx {
				t.Fatalf("%d messages in the queue and none staged; want %d", rows, senders*txsEach*perTx)
			}
			t.Logf("%d of %d relayed before the kill", before, rows)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still staged after 60s", staged)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
