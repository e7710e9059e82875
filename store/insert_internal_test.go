package store

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
)

// TestMessageColumnsCoverTable: messageColumns, which the message insert is built from, has a
// field for every column of the messages table and no other, with the column's type, so a
// migration that adds a column fails here until the row carries it. The columns the insert
// leaves out (tagged insert:"default") must have a default or take NULL.
func TestMessageColumnsCoverTable(t *testing.T) {
	t.Parallel()
	pool, err := db.Open(t.Context(), dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	type column struct {
		dataType string
		optional bool // has a default or takes NULL
	}
	table := map[string]column{}
	rows, err := pool.Query(t.Context(), `SELECT column_name, data_type, column_default IS NOT NULL OR is_nullable = 'YES'
		FROM information_schema.columns WHERE table_name = 'messages'
			AND table_schema = (SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = 'messages'::regclass)`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var c column
		if err := rows.Scan(&name, &c.dataType, &c.optional); err != nil {
			t.Fatal(err)
		}
		table[name] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(table) == 0 {
		t.Fatal("no columns found for table messages")
	}

	// The SQL types the insert casts its arrays to, as information_schema names them.
	dataTypes := map[string]string{"timestamptz": "timestamp with time zone"}
	inserted := map[string]string{} // column → SQL type
	for i, c := range insertColumnNames {
		inserted[c] = insertColumnTypes[i]
	}
	fields := map[string]bool{}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[messageColumns]()) {
		if f.Anonymous {
			continue
		}
		name := f.Tag.Get("db")
		fields[name] = true
		c, ok := table[name]
		if !ok {
			t.Errorf("messageColumns.%s is column %q, which the messages table does not have", f.Name, name)
			continue
		}
		if f.Tag.Get("insert") == "default" {
			if !c.optional {
				t.Errorf("column %q is left to its default by the insert, but has none and is NOT NULL", name)
			}
			if _, ok := inserted[name]; ok {
				t.Errorf("column %q is tagged insert:\"default\" but the insert writes it", name)
			}
			continue
		}
		sqlType, ok := inserted[name]
		if !ok {
			t.Errorf("the insert does not write column %q", name)
			continue
		}
		want := sqlType
		if dt, ok := dataTypes[want]; ok {
			want = dt
		}
		if c.dataType != want {
			t.Errorf("column %q is %s; the insert sends it as %s", name, c.dataType, sqlType)
		}
	}
	for name := range table {
		if !fields[name] {
			t.Errorf("column %q of messages has no field in messageColumns (row.go)", name)
		}
	}
	if len(inserted) != len(insertColumnNames) {
		t.Errorf("the insert lists a column twice: %v", insertColumnNames)
	}
}

// TestInsertRowKeepsEveryColumn writes, through the insert every send uses, a row with every
// column given a value of its own (the broker-set ones too: a dead letter forwarded with its
// reason, source and original sequence number) and reads it back whole.
func TestInsertRowKeepsEveryColumn(t *testing.T) {
	t.Parallel()
	pool, err := db.Open(t.Context(), dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := New(pool, Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	e, err := s.CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	m := broker.Message{
		Body:                   []byte("body\x00\xff"),
		BodyType:               broker.BodyAMQP,
		ContentType:            "content-type",
		MessageID:              "message-id",
		CorrelationID:          "correlation-id",
		SessionID:              "session-id",
		HasSessionID:           true,
		ReplyToSessionID:       "reply-to-session-id",
		Label:                  "label",
		To:                     "to",
		ReplyTo:                "reply-to",
		PartitionKey:           "partition-key", // not the SessionId: only a send insists they agree
		ViaPartitionKey:        "via-partition-key",
		TimeToLive:             3 * time.Hour,
		TimeToLiveFromSender:   true,
		AMQPSections:           []byte("amqp\x00sections"),
		ScheduledEnqueueTime:   now.Add(time.Hour),
		UserProperties:         broker.UserProperties{{Name: "n", Value: int64(5)}, {Name: "s", Value: "v"}},
		EnqueuedSequenceNumber: 12345,
		EnqueuedTime:           now.Add(time.Hour),
		ExpiresAt:              now.Add(4 * time.Hour),
		State:                  broker.StateDeadLetter,
		DeadLetterReason:       "reason",
		DeadLetterDescription:  "description",
		DeadLetterSource:       "source",
	}
	// What the insert leaves to the table's defaults; everything else must be set above.
	defaults := []string{"SequenceNumber", "DeliveryCount", "LockToken", "LockedUntil"}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[broker.Message]()) {
		if !slices.Contains(defaults, f.Name) && reflect.ValueOf(m).FieldByIndex(f.Index).IsZero() {
			t.Errorf("the test leaves Message.%s unset", f.Name)
		}
	}
	var r messageRow
	if err := r.set(e.ID, &m, nil, true); err != nil {
		t.Fatal(err)
	}
	seqs, err := s.insertRows(ctx, pool, []messageRow{r})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Browse(ctx, e, broker.SubQueueDeadLetter, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d dead letters; want 1", len(got))
	}
	want := m
	want.SequenceNumber = seqs[0]
	want.DeliveryCount = 1 // never delivered: no delivery failed
	if diff := cmp.Diff(want, *got[0]); diff != "" {
		t.Errorf("message read back differs (-want +got):\n%s", diff)
	}
	// The columns Message does not show.
	var entityID int64
	var size int32
	var visible *time.Time
	if err := pool.QueryRow(ctx, `SELECT entity_id, size, visible_at FROM messages WHERE seq = $1`, seqs[0]).Scan(&entityID, &size, &visible); err != nil {
		t.Fatal(err)
	}
	if entityID != e.ID || int(size) != int(r.Size) || r.Size == 0 || visible != nil {
		t.Errorf("entity_id, size, visible_at = %d, %d, %v; want %d, %d, NULL (a dead letter is receivable at once)", entityID, size, visible, e.ID, r.Size)
	}
	m.State, m.MessageID = broker.StateActive, "scheduled"
	r = messageRow{}
	if err := r.set(e.ID, &m, nil, true); err != nil {
		t.Fatal(err)
	}
	if seqs, err = s.insertRows(ctx, pool, []messageRow{r}); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT visible_at FROM messages WHERE seq = $1`, seqs[0]).Scan(&visible); err != nil {
		t.Fatal(err)
	}
	if visible == nil || !visible.Equal(m.ScheduledEnqueueTime) {
		t.Errorf("visible_at of a scheduled message = %v; want its scheduled time %v", visible, m.ScheduledEnqueueTime)
	}
}
