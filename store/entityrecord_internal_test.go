package store

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
)

// entityColumnsNotRead are columns of the entities table that entityRecord leaves out on
// purpose, each with the reason. None today: every column is read (path_key too, since the
// insert writes it and reading it back costs nothing). A migration that adds a column must add
// it to entityRecord, or here with its reason.
var entityColumnsNotRead = map[string]string{}

// TestEntityRecordCoversTable: a migration that adds a column to entities without a field in
// entityRecord, or a record field whose column is renamed or dropped, fails here.
func TestEntityRecordCoversTable(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	rows, err := pool.Query(t.Context(), `SELECT attname::text FROM pg_attribute
		WHERE attrelid = 'entities'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`)
	if err != nil {
		t.Fatal(err)
	}
	table, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	record := dbColumns[entityRecord]()
	for _, c := range table {
		if !slices.Contains(record, c) && entityColumnsNotRead[c] == "" {
			t.Errorf("column entities.%s is neither in entityRecord nor in entityColumnsNotRead", c)
		}
	}
	for _, c := range record {
		if !slices.Contains(table, c) {
			t.Errorf("entityRecord has %s, which the entities table lacks", c)
		}
		if entityColumnsNotRead[c] != "" {
			t.Errorf("%s is in entityRecord and in entityColumnsNotRead", c)
		}
	}
	for c := range entityColumnsNotRead {
		if !slices.Contains(table, c) {
			t.Errorf("entityColumnsNotRead lists %s, which the entities table lacks", c)
		}
	}
}

// distinctProperties differs from DefaultProperties in every field, and its durations, integers
// and strings differ from each other, so a value written to or read from another field's
// column shows.
func distinctProperties(now time.Time) broker.Properties {
	return broker.Properties{
		LockDuration:                        17 * time.Second,
		MaxSizeInMegabytes:                  3072,
		RequiresDuplicateDetection:          true,
		RequiresSession:                     true,
		DefaultMessageTimeToLive:            3 * time.Hour,
		DeadLetteringOnMessageExpiration:    true,
		DeadLetteringOnFilterEvaluation:     false,
		DuplicateDetectionHistoryTimeWindow: 45 * time.Minute,
		MaxDeliveryCount:                    7,
		EnableBatchedOperations:             false,
		IsAnonymousAccessible:               true,
		AuthorizationRules: []broker.AuthorizationRule{{KeyName: "k", PrimaryKey: "p", SecondaryKey: "s",
			Rights: []string{"Listen", "Send"}, CreatedTime: now, ModifiedTime: now.Add(time.Minute)}},
		Status:                            broker.StatusSendDisabled,
		ForwardTo:                         "fwd-a",
		ForwardDeadLetteredMessagesTo:     "fwd-b",
		ForwardToURL:                      "sb://ns/fwd-a",
		ForwardDeadLetteredMessagesToURL:  "https://ns/fwd-b",
		UserMetadata:                      "owner=team-a",
		SupportOrdering:                   false,
		AutoDeleteOnIdle:                  9 * time.Hour,
		EnablePartitioning:                true,
		EnableExpress:                     true,
		MaxMessageSizeInKilobytes:         2048,
		FilteringMessagesBeforePublishing: true,
		EnableSubscriptionPartitioning:    true,
	}
}

// propertyColumns names the column of each field of Properties, written out here rather than
// taken from entityRecord's tags: SQL outside entityRecord (maintenance, sbgate.send) reads these
// columns by name, so two tags swapped between fields of one type, which a round trip through
// entityRecord cannot see, must fail a test too.
var propertyColumns = map[string]string{
	"LockDuration":                        "lock_duration",
	"MaxSizeInMegabytes":                  "max_size_mb",
	"RequiresDuplicateDetection":          "requires_duplicate_detection",
	"RequiresSession":                     "requires_session",
	"DefaultMessageTimeToLive":            "default_ttl",
	"DeadLetteringOnMessageExpiration":    "dead_lettering_on_expiration",
	"DeadLetteringOnFilterEvaluation":     "dead_lettering_on_filter_exceptions",
	"DuplicateDetectionHistoryTimeWindow": "duplicate_detection_window",
	"MaxDeliveryCount":                    "max_delivery_count",
	"EnableBatchedOperations":             "enable_batched_operations",
	"IsAnonymousAccessible":               "is_anonymous_accessible",
	"AuthorizationRules":                  "authorization_rules",
	"Status":                              "status",
	"ForwardTo":                           "forward_to",
	"ForwardDeadLetteredMessagesTo":       "forward_dead_lettered_to",
	"ForwardToURL":                        "forward_to_url",
	"ForwardDeadLetteredMessagesToURL":    "forward_dead_lettered_to_url",
	"UserMetadata":                        "user_metadata",
	"SupportOrdering":                     "support_ordering",
	"AutoDeleteOnIdle":                    "auto_delete_on_idle",
	"EnablePartitioning":                  "enable_partitioning",
	"EnableExpress":                       "enable_express",
	"MaxMessageSizeInKilobytes":           "max_message_size_kb",
	"FilteringMessagesBeforePublishing":   "filtering_messages_before_publishing",
	"EnableSubscriptionPartitioning":      "enable_subscription_partitioning",
}

// TestEntityPropertiesSurviveEveryPath writes descriptions that each differ from the default in
// one property (a bool swapped with another bool shows only when one of them is set alone), and
// one that differs in all, through create and update, and reads them back through every
// statement that reads entities: a column written to or read from the wrong field fails here.
// Each single-property description must also change exactly that property's column (see
// propertyColumns) in the table itself.
func TestEntityPropertiesSurviveEveryPath(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := New(pool, Options{Now: func() time.Time { return now }})
	ctx := t.Context()

	distinct := distinctProperties(now)
	var variants []broker.Properties
	var columns []string // the one column each variant but the last changes
	dv, defaults := reflect.ValueOf(distinct), reflect.ValueOf(broker.DefaultProperties(broker.KindQueue))
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		if reflect.DeepEqual(dv.Field(i).Interface(), defaults.Field(i).Interface()) {
			t.Fatalf("distinctProperties().%s is the default; give it another value", name)
		}
		if propertyColumns[name] == "" {
			t.Fatalf("propertyColumns lacks %s", name)
		}
		p := broker.DefaultProperties(broker.KindQueue)
		reflect.ValueOf(&p).Elem().Field(i).Set(dv.Field(i))
		variants = append(variants, p)
		columns = append(columns, propertyColumns[name])
	}
	variants = append(variants, distinct)

	// The description columns of a row, as the database holds them, to find which ones a
	// description set apart from the default.
	described := func(path string) map[string]any {
		t.Helper()
		var row map[string]any
		err := pool.QueryRow(ctx, `SELECT to_jsonb(e) - '{id,kind,path_key,path,parent_id,created_at,updated_at,accessed_at}'::text[]
			FROM entities e WHERE path = $1`, path).Scan(&row)
		if err != nil {
			t.Fatal(err)
		}
		return row
	}
	changed := func(path string, base map[string]any) []string {
		t.Helper()
		var cols []string
		for c, v := range described(path) {
			if !reflect.DeepEqual(v, base[c]) {
				cols = append(cols, c)
			}
		}
		return cols
	}

	for _, path := range []string{"fwd-a", "fwd-b"} {
		if _, err := s.CreateEntity(ctx, broker.KindQueue, path, broker.DefaultProperties(broker.KindQueue)); err != nil {
			t.Fatal(err)
		}
	}
	topic, err := s.CreateEntity(ctx, broker.KindTopic, "t", broker.DefaultProperties(broker.KindTopic))
	if err != nil {
		t.Fatal(err)
	}

	want := make(map[string]*broker.Entity) // by path
	check := func(how string, got *broker.Entity) {
		t.Helper()
		w := want[got.Path]
		if w == nil {
			t.Fatalf("%s: unexpected entity %s", how, got.Path)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", how, got.Path, diff)
		}
	}
	checkList := func(how string, list []*broker.Entity, paths []string) {
		t.Helper()
		seen := 0
		for _, e := range list {
			if want[e.Path] != nil {
				check(how, e)
				seen++
			}
		}
		if seen != len(paths) {
			t.Errorf("%s: %d of the %d entities written", how, seen, len(paths))
		}
	}

	if _, err := s.CreateEntity(ctx, broker.KindQueue, "base", broker.DefaultProperties(broker.KindQueue)); err != nil {
		t.Fatal(err)
	}
	base := described("base")

	created := now
	var queues, subs, forwarders []string
	for i, p := range variants {
		q := fmt.Sprintf("q%02d", i)
		e, err := s.CreateEntity(ctx, broker.KindQueue, q, p)
		if err != nil {
			t.Fatalf("create %s: %v", q, err)
		}
		want[q] = &broker.Entity{ID: e.ID, Kind: broker.KindQueue, Path: q, Name: q, Props: p, CreatedAt: created, UpdatedAt: created}
		check("CreateEntity", e)

		sub := "t/Subscriptions/s" + fmt.Sprint(i)
		e, err = s.CreateSubscription(ctx, sub, p, nil)
		if err != nil {
			t.Fatalf("create %s: %v", sub, err)
		}
		want[sub] = &broker.Entity{ID: e.ID, Kind: broker.KindSubscription, Path: sub, Name: "s" + fmt.Sprint(i), ParentID: topic.ID,
			Props: p, CreatedAt: created, UpdatedAt: created, AccessedAt: created}
		check("CreateSubscription", e)

		// Created with the defaults (but the properties fixed at creation), then updated to p a
		// minute later: the update writes every settable column and leaves created_at.
		u := fmt.Sprintf("u%02d", i)
		first := broker.DefaultProperties(broker.KindQueue)
		first.RequiresSession, first.RequiresDuplicateDetection, first.EnablePartitioning =
			p.RequiresSession, p.RequiresDuplicateDetection, p.EnablePartitioning
		e, err = s.CreateEntity(ctx, broker.KindQueue, u, first)
		if err != nil {
			t.Fatalf("create %s: %v", u, err)
		}
		now = now.Add(time.Minute)
		want[u] = &broker.Entity{ID: e.ID, Kind: broker.KindQueue, Path: u, Name: u, Props: p, CreatedAt: created, UpdatedAt: now}
		e, err = s.UpdateEntity(ctx, broker.KindQueue, u, p)
		if err != nil {
			t.Fatalf("update %s: %v", u, err)
		}
		check("UpdateEntity", e)
		now = created

		if i < len(columns) {
			for _, path := range []string{q, u} {
				if got := changed(path, base); !slices.Equal(got, columns[i:i+1]) {
					t.Errorf("%s set apart from the default: columns %q changed; want %q", path, got, columns[i])
				}
			}
		}

		queues = append(queues, q, u)
		subs = append(subs, sub)
		if p.ForwardDeadLetteredMessagesTo != "" {
			forwarders = append(forwarders, q, u, sub)
		}
	}

	for _, path := range append(queues, subs...) {
		e, err := s.GetEntity(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		check("GetEntity", e)
		if e, err = s.Resolve(ctx, path); err != nil {
			t.Fatal(err)
		}
		check("Resolve", e)
	}
	list, err := s.ListEntities(ctx, broker.KindQueue, "", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	checkList("ListEntities(queues)", list, queues)
	if list, err = s.ListEntities(ctx, broker.KindSubscription, topic.Path, 0, 1000); err != nil {
		t.Fatal(err)
	}
	checkList("ListEntities(subscriptions)", list, subs)
	routes, err := s.routesOf(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	list = list[:0]
	for _, r := range routes {
		list = append(list, r.sub)
	}
	checkList("routesOf", list, subs)
	if list, err = queryEntities(ctx, pool, deadLetterForwardersSQL); err != nil {
		t.Fatal(err)
	}
	checkList("deadLetterForwardersSQL", list, forwarders)
}
