package store_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/store"
)

// relayPending relays everything committed to the outbox and returns how many messages went.
func (b *bundle) relayPending(t *testing.T) int {
	t.Helper()
	n, err := store.NewRelay(b.store, store.RelayOptions{}).RelayPending(b.ctx)
	if err != nil {
		t.Fatalf("RelayPending: %v", err)
	}
	return n
}

// sqlSend calls sbgate.send in its own transaction, committed.
func (b *bundle) sqlSend(t *testing.T, path, body, message string) {
	t.Helper()
	if _, err := b.pool.Exec(b.ctx, `SELECT sbgate.send($1, convert_to($2, 'UTF8'), $3::jsonb)`, path, body, message); err != nil {
		t.Fatalf("sbgate.send(%q, %q, %s): %v", path, body, message, err)
	}
}

func (b *bundle) outboxRows(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM sbgate.outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSQLSendCommitDeliversOnce(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "orders", func(p *broker.Properties) { p.DefaultMessageTimeToLive = 30 * time.Second })

	tx, err := b.pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx) //nolint:errcheck
	var mid string
	if err := tx.QueryRow(b.ctx, `SELECT sbgate.send('Orders', convert_to('hello','UTF8'),
		'{"BrokerProperties":{"MessageId":"m1","Label":"new","TimeToLive":3600,"CorrelationId":"c","To":"t","ReplyTo":"r"},
		  "UserProperties":{"region":"eu","n":3,"f":1.5,"ok":true},"ContentType":"text/plain"}')`).Scan(&mid); err != nil {
		t.Fatal(err)
	}
	if mid != "m1" {
		t.Errorf("sbgate.send returned %q, want the MessageId m1", mid)
	}
	// Not committed: nothing to relay.
	if n := b.relayPending(t); n != 0 {
		t.Fatalf("relayed %d messages of an open transaction", n)
	}
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.relayPending(t); n != 1 {
		t.Fatalf("relayed %d messages after commit, want 1", n)
	}
	if n := b.relayPending(t); n != 0 {
		t.Fatalf("relayed %d more messages on a second pass", n)
	}
	if n := b.outboxRows(t); n != 0 {
		t.Errorf("outbox keeps %d rows after the relay", n)
	}
	got := b.drain(t, q, broker.SubQueueMain)
	if len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	m := got[0]
	want := broker.Message{Body: []byte("hello"), MessageID: "m1", Label: "new", CorrelationID: "c", To: "t", ReplyTo: "r",
		ContentType: "text/plain", TimeToLive: 30 * time.Second, TimeToLiveFromSender: true, // capped by the queue
		UserProperties: broker.UserProperties{{Name: "f", Value: 1.5}, {Name: "n", Value: int64(3)}, {Name: "ok", Value: true}, {Name: "region", Value: "eu"}}}
	if diff := cmp.Diff(want, *m, cmpopts.IgnoreFields(broker.Message{}, "SequenceNumber", "EnqueuedTime", "ExpiresAt", "LockToken", "LockedUntil", "DeliveryCount"),
		cmpopts.SortSlices(func(a, b broker.Property) bool { return a.Name < b.Name })); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
	if !m.EnqueuedTime.Equal(b.clock.Now()) {
		t.Errorf("EnqueuedTime = %v, want the relay's time %v", m.EnqueuedTime, b.clock.Now())
	}
}

func TestSQLSendRollbackDeliversNothing(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "orders", nil)
	tx, err := b.pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx) //nolint:errcheck
	if _, err := tx.Exec(b.ctx, `SELECT sbgate.send_batch('orders', ARRAY[convert_to('a','UTF8'), convert_to('b','UTF8')])`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(b.ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.relayPending(t); n != 0 {
		t.Errorf("relayed %d messages of a rolled-back transaction", n)
	}
	if got := b.drain(t, q, broker.SubQueueMain); len(got) != 0 {
		t.Errorf("received %q", bodies(got))
	}
}

func TestSQLSendRefusesAtCallTime(t *testing.T) {
	b := setup(t, manual)
	b.queue(t, "small", func(p *broker.Properties) { p.MaxMessageSizeInKilobytes = 1 })
	b.queue(t, "sess", func(p *broker.Properties) { p.RequiresSession = true })
	b.queue(t, "off", func(p *broker.Properties) { p.Status = broker.StatusSendDisabled })
	b.topic(t, "t", nil)
	b.sub(t, "t", "s", nil, nil)

	for _, tc := range []struct {
		path, body, message string
		code, text          string
	}{
		{"nowhere", "x", `{}`, "SB404", "The messaging entity 'nowhere' could not be found."},
		{"small", strings.Repeat("x", 2000), `{}`, "SB413", "The message (size 2032 bytes) exceeds the limit of 1024 bytes allowed on entity 'small'."},
		{"sess", "x", `{}`, "SB400", "The SessionId was not set on a message, and it cannot be sent to the entity 'sess'. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value."},
		{"off", "x", `{}`, "SB403", "SubCode=40301. The messaging entity 'off' is disabled for sending (status SendDisabled)."},
		{"t/subscriptions/s", "x", `{}`, "SB400", "Messages cannot be sent to subscription 't/Subscriptions/s'; send them to its topic."},
		{"small", "x", `{"Body":"y"}`, "SB400", "'Body' is not a field of a message: give BrokerProperties, UserProperties and ContentType (the body is an argument of its own)."},
		{"small", "x", `{"BrokerProperties":{"TimeToLive":-1}}`, "SB400", "BrokerProperties.TimeToLive must be a positive number of seconds."},
		{"small", "x", `{"BrokerProperties":{"ScheduledEnqueueTimeUtc":"soon"}}`, "SB400", "BrokerProperties.ScheduledEnqueueTimeUtc 'soon' is not an RFC 1123 or ISO 8601 date."},
		{"small", "x", `{"BrokerProperties":{"SessionId":"a","PartitionKey":"b"}}`, "SB400", "The PartitionKey 'b' must be equal to the SessionId 'a'."},
		{"small", "x", `{"BrokerProperties":{"label":"a","Label":"b"}}`, "SB400", "BrokerProperties gives the same property more than once: 'Label' and 'label'."},
		{"small", "x", `{"UserProperties":{"a":{"b":1}}}`, "SB400", "user property 'a' must be a string, number or boolean."},
		{"small", "x", `{"UserProperties":{"Content-Type":"x"}}`, "SB400", "'Content-Type' cannot be a user property name."},
		{"small", "x", `{"UserProperties":{"a":"x\ny"}}`, "SB400", "user property 'a' contains control characters, which cannot be sent in an HTTP header."},
	} {
		_, err := b.pool.Exec(b.ctx, `SELECT sbgate.send($1, convert_to($2, 'UTF8'), $3::jsonb)`, tc.path, tc.body, tc.message)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != tc.code || pe.Message != tc.text {
			t.Errorf("sbgate.send(%q, %.20q, %s) = %v; want %s %q", tc.path, tc.body, tc.message, err, tc.code, tc.text)
		}
	}
	_, err := b.pool.Exec(b.ctx, `SELECT sbgate.send_batch('small', ARRAY[convert_to('a','UTF8'), convert_to('b','UTF8')],
		ARRAY['{}', '{"BrokerProperties":{"TimeToLive":"x"}}']::jsonb[])`)
	var pe *pgconn.PgError
	if want := "Message 2 of the batch: BrokerProperties.TimeToLive must be a positive number of seconds."; !errors.As(err, &pe) || pe.Message != want {
		t.Errorf("send_batch with a bad second message = %v; want %q", err, want)
	}
	if n := b.outboxRows(t); n != 0 {
		t.Errorf("refused sends left %d outbox rows", n)
	}
}

// A topic message sent through SQL reaches the same subscriptions, with the same rule actions
// and dead letters, as one sent through the store's send (what an HTTP send calls).
func TestSQLSendTopicFansOutAsASend(t *testing.T) {
	b := setup(t, manual)
	topic := b.topic(t, "orders", nil)
	subs := []*broker.Entity{
		b.sub(t, "orders", "all", nil, nil),
		b.sub(t, "orders", "eu", sqlRule("eu", "region = 'eu' AND amount > 100"), nil),
		b.sub(t, "orders", "corr", &broker.Rule{Name: "c", Filter: broker.RuleFilter{Kind: broker.FilterCorrelation,
			Correlation: &broker.CorrelationFilter{Label: "urgent"}}}, nil),
		b.sub(t, "orders", "act", &broker.Rule{Name: "a", Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: "1=1"},
			Action: &broker.RuleAction{SQLExpression: "SET tagged = 'yes'"}}, nil),
		b.sub(t, "orders", "broken", sqlRule("b", "amount / 0 > 1"), func(p *broker.Properties) { p.DeadLetteringOnFilterEvaluation = true }),
	}
	type sent struct {
		body, label string
		props       broker.UserProperties
	}
	cases := []sent{
		{"eu-big", "", broker.UserProperties{{Name: "amount", Value: int64(500)}, {Name: "region", Value: "eu"}}},
		{"eu-small", "urgent", broker.UserProperties{{Name: "amount", Value: 50.5}, {Name: "region", Value: "eu"}}},
		{"plain", "", nil},
	}
	received := func() map[string][]string {
		out := map[string][]string{}
		for _, s := range subs {
			for _, sq := range []broker.SubQueue{broker.SubQueueMain, broker.SubQueueDeadLetter} {
				for _, m := range b.drain(t, s, sq) {
					out[s.Path] = append(out[s.Path], fmt.Sprintf("%d %s %s %v %s", sq, m.Body, m.Label, m.UserProperties, m.DeadLetterReason))
				}
			}
		}
		return out
	}
	for _, c := range cases {
		b.send(t, topic, broker.Message{Body: []byte(c.body), Label: c.label, UserProperties: c.props})
	}
	viaSend := received()
	for _, c := range cases {
		up := map[string]any{}
		for _, p := range c.props {
			up[p.Name] = p.Value
		}
		msg := fmt.Sprintf(`{"BrokerProperties":{"Label":%q},"UserProperties":%s}`, c.label, mustJSON(t, up))
		b.sqlSend(t, "orders", c.body, msg)
	}
	if n := b.relayPending(t); n != len(cases) {
		t.Fatalf("relayed %d, want %d", n, len(cases))
	}
	viaSQL := received()
	if diff := cmp.Diff(viaSend, viaSQL); diff != "" {
		t.Errorf("subscriptions after a send (-) and a SQL send (+):\n%s", diff)
	}
	if len(viaSend["orders/Subscriptions/broken"]) == 0 || len(viaSend["orders/Subscriptions/act"]) != 3 {
		t.Errorf("the fan-out compared is not the one meant: %v", viaSend)
	}
}

// Duplicate detection and a batch's order hold for messages sent through SQL, as for a send.
func TestSQLSendBatchKeepsDuplicateDetection(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "dd", func(p *broker.Properties) {
		p.RequiresDuplicateDetection = true
		p.DuplicateDetectionHistoryTimeWindow = time.Minute
	})
	b.send(t, q, broker.Message{Body: []byte("first"), MessageID: "x"})
	var ids []string
	if err := b.pool.QueryRow(b.ctx, `SELECT sbgate.send_batch('dd',
		ARRAY[convert_to('dup','UTF8'), convert_to('new','UTF8'), convert_to('anon','UTF8')],
		ARRAY['{"BrokerProperties":{"MessageId":"x"}}', '{"BrokerProperties":{"MessageId":"y"}}']::jsonb[])`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] != "x" || ids[1] != "y" || len(ids[2]) != 32 {
		t.Errorf("send_batch returned %q", ids)
	}
	b.relayPending(t)
	if diff := cmp.Diff([]string{"first", "new", "anon"}, bodies(b.drain(t, q, broker.SubQueueMain))); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
}

// A message the relay cannot deliver stays, with the reason, for the operator; nothing is lost.
func TestSQLSendUndeliverableIsKept(t *testing.T) {
	b := setup(t, manual)
	b.queue(t, "gone", nil)
	b.sqlSend(t, "gone", "x", `{"BrokerProperties":{"MessageId":"m"}}`)
	if err := b.store.DeleteEntity(b.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if n := b.relayPending(t); n != 0 {
		t.Errorf("relayed %d", n)
	}
	var mid, reason string
	var retry *time.Time
	if err := b.pool.QueryRow(b.ctx, `SELECT message_id, last_error, retry_at FROM sbgate.undelivered`).Scan(&mid, &reason, &retry); err != nil {
		t.Fatal(err)
	}
	if mid != "m" || reason != "The messaging entity 'gone' could not be found." || retry != nil {
		t.Errorf("undelivered = %q, %q, retry %v", mid, reason, retry)
	}
	b.queue(t, "gone", nil)
	if n := b.relayPending(t); n != 0 {
		t.Errorf("relayed %d messages given up on", n)
	}
}

// Cancelling a scheduled message works before and after the relay, in the caller's transaction.
func TestSQLSendCancelScheduled(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: manual.opts})
	q := b.queue(t, "later", nil)
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC1123)
	b.sqlSend(t, "later", "a", fmt.Sprintf(`{"BrokerProperties":{"MessageId":"a","ScheduledEnqueueTimeUtc":%q}}`, at))
	b.sqlSend(t, "later", "b", fmt.Sprintf(`{"BrokerProperties":{"MessageId":"b","ScheduledEnqueueTimeUtc":%q}}`, at))
	if _, err := b.pool.Exec(b.ctx, `SELECT sbgate.cancel_scheduled('later', 'a')`); err != nil {
		t.Fatalf("cancel staged: %v", err)
	}
	if n := b.relayPending(t); n != 1 {
		t.Fatalf("relayed %d, want 1", n)
	}
	if c := b.counts(t, "later"); c.Scheduled != 1 {
		t.Fatalf("ScheduledMessageCount = %d, want 1", c.Scheduled)
	}
	// Rolled back, the cancel never happened.
	err := pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(b.ctx, `SELECT sbgate.cancel_scheduled('later', 'b')`); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatal(err)
	}
	if c := b.counts(t, "later"); c.Scheduled != 1 {
		t.Fatalf("ScheduledMessageCount = %d after a rolled-back cancel, want 1", c.Scheduled)
	}
	if _, err := b.pool.Exec(b.ctx, `SELECT sbgate.cancel_scheduled('later', 'b')`); err != nil {
		t.Fatalf("cancel relayed: %v", err)
	}
	b.store.Maintain(b.ctx) //nolint:errcheck // folds the count deltas
	if c := b.counts(t, "later"); c.Total() != 0 {
		t.Errorf("counts after cancelling = %+v", c)
	}
	_, err = b.pool.Exec(b.ctx, `SELECT sbgate.cancel_scheduled('later', 'b')`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "SB404" || pe.Message != "No scheduled message with MessageId 'b' is waiting in 'later'." {
		t.Errorf("second cancel = %v", err)
	}
	_ = q
}

// Only a role granted sbgate_sender may send, and it reaches no table.
func TestSQLSendNeedsItsGrant(t *testing.T) {
	b := setup(t, manual)
	b.queue(t, "q", nil)
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	role := "app_" + hex.EncodeToString(rb[:])
	if _, err := b.pool.Exec(b.ctx, `CREATE ROLE `+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = b.pool.Exec(t.Context(), `DROP ROLE `+role) })
	asRole := func(sql string) error {
		return pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(b.ctx, `SET LOCAL ROLE `+role); err != nil {
				return err
			}
			_, err := tx.Exec(b.ctx, sql)
			return err
		})
	}
	denied := func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "42501"
	}
	send := `SELECT sbgate.send('q', '\x01'::bytea)`
	if err := asRole(send); !denied(err) {
		t.Errorf("send without the grant = %v; want permission denied", err)
	}
	if _, err := b.pool.Exec(b.ctx, `GRANT sbgate_sender TO `+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = b.pool.Exec(t.Context(), `REVOKE sbgate_sender FROM `+role) })
	if err := asRole(send); err != nil {
		t.Errorf("send with the grant: %v", err)
	}
	for _, sql := range []string{`SELECT * FROM messages`, `SELECT * FROM entities`, `SELECT * FROM sbgate.outbox`,
		`DELETE FROM sbgate.outbox`, `SELECT sbgate.stage(null, '\x01', '{}', '')`} {
		if err := asRole(sql); !denied(err) {
			t.Errorf("%s as the sender = %v; want permission denied", sql, err)
		}
	}
	// A caller's search_path cannot redirect the functions to its own tables.
	if err := asRole(`SET LOCAL search_path = pg_temp; CREATE TEMP TABLE entities (path_key text); ` + send); err != nil {
		t.Errorf("send with a hostile search_path: %v", err)
	}
	if n := b.relayPending(t); n != 2 {
		t.Errorf("relayed %d, want 2", n)
	}
}

// Two gateways relaying the same outbox deliver every committed message exactly once.
func TestSQLSendTwoRelaysDeliverOnce(t *testing.T) {
	t.Parallel()
	url := newSharedDatabase(t)
	s1, s2 := openStore(t, url), openStore(t, url)
	q, err := s1.CreateEntity(t.Context(), broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*store.Postgres{s1, s2} {
		r := store.NewRelay(s, store.RelayOptions{Poll: 50 * time.Millisecond})
		r.Start(t.Context())
		t.Cleanup(r.Stop)
	}
	app := openPool(t, url)
	const senders, perTx, txs = 8, 25, 4
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range txs {
				err := pgx.BeginFunc(t.Context(), app, func(tx pgx.Tx) error {
					for i := range perTx {
						id := fmt.Sprintf("%d-%d-%d", g, k, i)
						if _, err := tx.Exec(t.Context(), `SELECT sbgate.send('q', convert_to($1, 'UTF8'))`, id); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]int{}
	eventually.NoError(t, "every message sent through SQL", func() error {
		msgs, err := receiveN(t.Context(), s1, broker.Target{Entity: q}, broker.ReceiveAndDelete,
			100, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			seen[string(m.Body)]++
		}
		if len(seen) < senders*perTx*txs {
			return fmt.Errorf("received %d distinct messages, want %d",
				len(seen), senders*perTx*txs)
		}
		return nil
	})
	if len(seen) != senders*perTx*txs {
		t.Fatalf("received %d distinct messages, want %d", len(seen), senders*perTx*txs)
	}
	for body, n := range seen {
		if n != 1 {
			t.Errorf("%s received %d times", body, n)
		}
	}
	if msgs, _ := receiveN(t.Context(), s2, broker.Target{Entity: q}, broker.ReceiveAndDelete, 100, 0); len(msgs) != 0 {
		t.Errorf("%d more messages", len(msgs))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A relay waiting for the doorbell is woken by the commit of a sending transaction: its poll is
// an hour, so nothing else could bring it. The second send comes after the relay stopped polling
// and let go of the doorbell lock.
func TestSQLSendRingsAnIdleRelay(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: manual.opts})
	q := b.queue(t, "q", nil)
	r := store.NewRelay(b.store, store.RelayOptions{Poll: time.Hour})
	r.Start(b.ctx)
	defer r.Stop()
	for i := range 2 {
		b.sqlSend(t, "q", fmt.Sprint(i), `{}`)
		m, err := receive1(b.ctx, b.store, broker.Target{Entity: q}, broker.ReceiveAndDelete, 20*time.Second)
		if err != nil || m == nil || string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("message %d: %v, %v", i, m, err)
		}
		// Until the relay has let go of the doorbell lock, it is polling, not waiting.
		eventually.True(t, "the relay to let go of the doorbell lock", func() bool {
			var free bool
			if err := b.pool.QueryRow(b.ctx, `SELECT pg_try_advisory_lock_shared(7367, 1) AND pg_advisory_unlock_shared(7367, 1)`).Scan(&free); err != nil {
				t.Fatal(err)
			}
			return free
		})
	}
}

// A message sent through SQL to an entity that is full (MaxSizeInMegabytes) is not lost and not
// forced in: the relay keeps it with the quota refusal and a retry time, and delivers it once the
// entity has room and that time has come.
func TestSQLSendWaitsForRoomInAFullEntity(t *testing.T) {
	b := setup(t, manual)
	q := b.queue(t, "full", nil) // 1024 MB
	// Fill the queue's count to its quota without writing a gigabyte.
	fill := func(bytes int64) {
		t.Helper()
		if _, err := b.pool.Exec(b.ctx, `INSERT INTO entity_count_deltas (entity_id, main, dead, bytes) VALUES ($1, 0, 0, $2)`, q.ID, bytes); err != nil {
			t.Fatal(err)
		}
		b.maintain(t)
	}
	fill(1024 << 20)
	// The size is remembered for a second.
	eventually.True(t, "the full queue to refuse a send", func() bool {
		return errors.Is(b.store.Send(b.ctx, q, []broker.Message{body("probe")}), broker.ErrQuota)
	})
	b.sqlSend(t, "full", "x", `{"BrokerProperties":{"MessageId":"waits"}}`)
	if n := b.relayPending(t); n != 0 {
		t.Fatalf("relayed %d messages into a full entity", n)
	}
	var mid, reason string
	var retry *time.Time
	if err := b.pool.QueryRow(b.ctx, `SELECT message_id, last_error, retry_at FROM sbgate.undelivered`).Scan(&mid, &reason, &retry); err != nil {
		t.Fatal(err)
	}
	if mid != "waits" || !strings.Contains(reason, "quota") && !strings.Contains(reason, "size") || retry == nil {
		t.Fatalf("undelivered = %q, %q, retry %v; want the quota refusal and a retry time", mid, reason, retry)
	}
	fill(-(1024 << 20))
	eventually.NoError(t, "a send to the emptied queue", func() error {
		return b.store.Send(b.ctx, q, []broker.Message{body("room")})
	})
	if n := b.relayPending(t); n != 0 {
		t.Fatalf("relayed %d messages before their retry time", n)
	}
	b.clock.Advance(retry.Sub(b.clock.Now()) + time.Second)
	if n := b.relayPending(t); n != 1 {
		t.Fatalf("relayed %d messages once there was room; want 1", n)
	}
}
