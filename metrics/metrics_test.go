package metrics

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sbgate/sbgate/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// The table statistics are read from the database at scrape time.
func TestTableStatistics(t *testing.T) {
	var log bytes.Buffer
	m := New(dbtest.NewPool(t), slog.New(slog.NewTextHandler(&log, nil)))
	out := scrape(t, m)
	for _, want := range []string{`sbgate_db_dead_rows{table="messages"}`, `sbgate_db_live_rows{table="entities"}`, `sbgate_db_autovacuum_total{table="sessions"}`} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if log.Len() != 0 {
		t.Errorf("unexpected log: %s", log.String())
	}
}

// A scrape whose statistics query fails says so in the log and exports no table rows.
func TestTableStatisticsErrorIsLogged(t *testing.T) {
	var log bytes.Buffer
	pool := dbtest.NewPool(t)
	m := New(pool, slog.New(slog.NewTextHandler(&log, nil)))
	pool.Close()
	out := scrape(t, m)
	if strings.Contains(out, "sbgate_db_dead_rows{") {
		t.Errorf("dead rows exported from a closed pool")
	}
	if !strings.Contains(log.String(), "read table statistics for metrics") {
		t.Errorf("no warning logged: %q", log.String())
	}
}

// The AMQP listener's counters are exported as read at scrape time.
func TestAMQPStats(t *testing.T) {
	m := New(dbtest.NewPool(t), slog.New(slog.DiscardHandler))
	m.AMQP(func() AMQPStats {
		return AMQPStats{Connections: 3, Handshaking: 1, RefusedConnections: 7, EvictedHandshakes: 2}
	})
	out := scrape(t, m)
	for _, want := range []string{"sbgate_amqp_connections 3", "sbgate_amqp_handshaking_connections 1",
		"sbgate_amqp_refused_connections_total 7", "sbgate_amqp_evicted_handshakes_total 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
