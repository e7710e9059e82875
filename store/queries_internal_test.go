package store

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
)

// TestQueriesNameStateNumerals: the statements sqlc reads (queries/*.sql) cannot take the SQL
// names of the Go statements, so each number they compare a state or kind with says which name
// it stands for, in a comment (`state <> 2 /* sqlDeadLetter */`), and is that name's value.
func TestQueriesNameStateNumerals(t *testing.T) {
	values := map[string]string{
		"sqlActive": sqlActive, "sqlDeferred": sqlDeferred, "sqlDeadLetter": sqlDeadLetter, "sqlTopic": sqlTopic,
	}
	named := regexp.MustCompile(`\b([0-9]+)\s*/\*\s*(\w+)\s*\*/`)
	numeral := regexp.MustCompile(`\b(state|kind)\s*(=|<>|!=|<|>|<=|>=)\s*[0-9]|\b(state|kind)\s+IN\s*\([^)]*\b[0-9]|::smallint\s*=\s*[0-9]`)
	files, err := filepath.Glob("queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries/*.sql (%v)", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			for _, m := range named.FindAllStringSubmatch(line, -1) {
				if want, ok := values[m[2]]; !ok {
					t.Errorf("%s:%d: %q names no state or kind", f, i+1, m[0])
				} else if m[1] != want {
					t.Errorf("%s:%d: %q: %s is %s", f, i+1, m[0], m[2], want)
				}
			}
			if m := numeral.FindString(named.ReplaceAllString(line, "$2")); m != "" {
				t.Errorf("%s:%d: %q compares a state or kind with a bare number; name it (0 /* sqlActive */)", f, i+1, m)
			}
		}
	}
}

// TestQueriesSpellReasons: the dead-letter reasons the maintenance statements set are the
// constants the Go code and its tests compare with.
func TestQueriesSpellReasons(t *testing.T) {
	src, err := os.ReadFile("queries/maintain.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{broker.ReasonMaxDeliveryCount, broker.ReasonTTLExpired} {
		if !strings.Contains(string(src), "'"+reason+"'") {
			t.Errorf("queries/maintain.sql does not set the reason %q", reason)
		}
	}
}

// TestNullTimeKeepsInfinity: a time sqlc leaves untyped reads as it did typed. An infinite one
// (a message that never comes due by itself) stays infinite, not NULL: a session whose next
// message is infinitely far is not stale.
func TestNullTimeKeepsInfinity(t *testing.T) {
	t.Parallel()
	s, _ := startedQueue(t, Options{})
	for _, c := range []struct {
		sql  string
		want pgtype.Timestamptz
	}{
		{`SELECT CASE WHEN true THEN 'infinity'::timestamptz END`, pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}},
		{`SELECT CASE WHEN false THEN now() END`, pgtype.Timestamptz{}},
		{`SELECT CASE WHEN true THEN '2026-03-01 12:00:00+00'::timestamptz END`,
			pgtype.Timestamptz{Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Valid: true}},
	} {
		var v any
		if err := s.pool.QueryRow(t.Context(), c.sql).Scan(&v); err != nil {
			t.Fatal(err)
		}
		got := nullTime(v)
		if got.Valid != c.want.Valid || got.InfinityModifier != c.want.InfinityModifier || !got.Time.Equal(c.want.Time) {
			t.Errorf("%s: nullTime(%#v) = %+v; want %+v", c.sql, v, got, c.want)
		}
	}
}
