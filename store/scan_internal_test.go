package store

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
)

// TestCollectRecords: collectRecords reads what pgx.RowToStructByName reads, matching columns to
// fields by name in whatever order they come, and refuses a result whose columns are not the
// record's fields.
func TestCollectRecords(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	s := New(pool, Options{})
	s.Start(t.Context())
	defer s.Stop()
	ctx := t.Context()
	e, err := s.CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []broker.Message{
		{Body: []byte("one"), Label: "l", SessionID: "", HasSessionID: true, CorrelationID: "c",
			UserProperties: broker.UserProperties{{Name: "n", Value: int64(7)}}},
		{Body: []byte{}, ContentType: "text/plain"},
	}
	if err := s.Send(ctx, e, msgs); err != nil {
		t.Fatal(err)
	}
	// The shared claim's columns: the message's, then k before the two the record has first.
	query := `SELECT ` + strings.Join(messageRecordColumns, ", ") + `, 1::bigint AS k, visible_at AS claimed_due_at, NULL::timestamptz AS due_left
		FROM messages WHERE entity_id = $1 ORDER BY seq`
	rows, _ := pool.Query(ctx, query, e.ID)
	want, err := pgx.CollectRows(rows, pgx.RowToStructByName[claimedManyRecord])
	if err != nil || len(want) != 2 {
		t.Fatalf("pgx reads %d rows, %v", len(want), err)
	}
	rows, _ = pool.Query(ctx, query, e.ID)
	got, err := collectRecords[claimedManyRecord](rows, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(claimedManyRecord{}, claimedRecord{}, messageRecord{}, presentText{})); diff != "" {
		t.Errorf("collectRecords differs from pgx.RowToStructByName (-pgx +collectRecords):\n%s", diff)
	}
	if got[0].Label.String != "l" || !got[0].SessionID.Valid || got[1].ContentType.String != "text/plain" || got[0].K != 1 {
		t.Errorf("records %+v", got)
	}

	for _, bad := range []struct{ name, query string }{
		{"a column missing", `SELECT ` + strings.Join(messageRecordColumns, ", ") + `, 1::bigint AS k, visible_at AS claimed_due_at FROM messages`},
		{"a column more", `SELECT ` + strings.Join(messageRecordColumns, ", ") + `, 1::bigint AS k, NULL::timestamptz AS claimed_due_at, NULL::timestamptz AS due_left, 1 AS x FROM messages`},
		{"a column twice", `SELECT ` + strings.Join(messageRecordColumns, ", ") + `, 1::bigint AS k, NULL::timestamptz AS claimed_due_at, NULL::timestamptz AS claimed_due_at FROM messages`},
	} {
		rows, _ := pool.Query(ctx, bad.query)
		if _, err := collectRecords[claimedManyRecord](rows, 2); err == nil || !strings.Contains(err.Error(), "claimedManyRecord") {
			t.Errorf("%s: collectRecords = %v; want an error naming the record", bad.name, err)
		}
	}
}
