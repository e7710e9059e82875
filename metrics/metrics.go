// Package metrics exports sbgate's Prometheus metrics: requests by operation and status, their
// latency, the database pool, and the dead rows of the busiest tables, which are the main
// long-run risk of a SKIP LOCKED queue (design.md §5). It uses the Prometheus client library
// rather than hand-written exposition: the text format, histograms and the Go runtime
// collectors are its job and done right there.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the registry and the request instruments.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	waiting  prometheus.Gauge
}

// New registers the Go runtime and process collectors, the request instruments, and collectors
// that read pool statistics and table statistics from pool at scrape time.
func New(pool *pgxpool.Pool, log *slog.Logger) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sbgate_http_requests_total",
			Help: "HTTP requests by operation and status code.",
		}, []string{"operation", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sbgate_http_request_duration_seconds",
			Help:    "HTTP request latency by operation (long-polling receives included).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"operation"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sbgate_receivers_waiting",
			Help: "Long-poll receives and session accepts waiting in this gateway.",
		}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.latency, m.waiting,
		&poolCollector{pool: pool},
		&tableCollector{pool: pool, log: log},
	)
	return m
}

// Observe records one request.
func (m *Metrics) Observe(operation string, code int, d time.Duration) {
	m.requests.WithLabelValues(operation, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(operation).Observe(d.Seconds())
}

// Waiting counts receivers that begin (+1) or end (-1) waiting.
func (m *Metrics) Waiting(delta int) { m.waiting.Add(float64(delta)) }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

var (
	poolAcquired = prometheus.NewDesc("sbgate_db_pool_acquired_connections", "Database connections in use.", nil, nil)
	poolIdle     = prometheus.NewDesc("sbgate_db_pool_idle_connections", "Idle database connections.", nil, nil)
	poolTotal    = prometheus.NewDesc("sbgate_db_pool_connections", "Database connections open.", nil, nil)
	poolWaits    = prometheus.NewDesc("sbgate_db_pool_empty_acquire_total", "Acquires that had to wait for a connection.", nil, nil)
	deadRows     = prometheus.NewDesc("sbgate_db_dead_rows", "Dead rows (n_dead_tup) of a table, which vacuum has yet to reclaim.", []string{"table"}, nil)
	liveRows     = prometheus.NewDesc("sbgate_db_live_rows", "Live rows (n_live_tup, an estimate) of a table.", []string{"table"}, nil)
	vacuums      = prometheus.NewDesc("sbgate_db_autovacuum_total", "Autovacuum runs on a table.", []string{"table"}, nil)
)

// poolCollector reports the pgx pool's statistics.
type poolCollector struct{ pool *pgxpool.Pool }

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolAcquired
	ch <- poolIdle
	ch <- poolTotal
	ch <- poolWaits
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(poolAcquired, prometheus.GaugeValue, float64(st.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(poolIdle, prometheus.GaugeValue, float64(st.IdleConns()))
	ch <- prometheus.MustNewConstMetric(poolTotal, prometheus.GaugeValue, float64(st.TotalConns()))
	ch <- prometheus.MustNewConstMetric(poolWaits, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
}

// tableCollector reads pg_stat_user_tables for sbgate's tables at scrape time.
type tableCollector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (c *tableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- deadRows
	ch <- liveRows
	ch <- vacuums
}

// tableStatsTimeout keeps a slow database from stalling a scrape.
const tableStatsTimeout = 2 * time.Second

// tableStats is one row of pg_stat_user_tables, in the query's column order.
type tableStats struct {
	Table            string
	Dead, Live, Vacs int64
}

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), tableStatsTimeout)
	defer cancel()
	rows, _ := c.pool.Query(ctx, `SELECT relname, n_dead_tup, n_live_tup, autovacuum_count FROM pg_stat_user_tables
		WHERE relname IN ('messages', 'entities', 'entity_count_deltas', 'entity_counts', 'dedup', 'sessions', 'rules')`)
	// CollectRows reports the query's, every scan's and the result's error (rows.Err) alike; a
	// partial answer is not exported, so a scrape never shows some tables silently missing.
	stats, err := pgx.CollectRows(rows, pgx.RowToStructByPos[tableStats])
	if err != nil {
		c.log.Warn("read table statistics for metrics", "err", err)
		return
	}
	for _, st := range stats {
		ch <- prometheus.MustNewConstMetric(deadRows, prometheus.GaugeValue, float64(st.Dead), st.Table)
		ch <- prometheus.MustNewConstMetric(liveRows, prometheus.GaugeValue, float64(st.Live), st.Table)
		ch <- prometheus.MustNewConstMetric(vacuums, prometheus.CounterValue, float64(st.Vacs), st.Table)
	}
}

// AMQPStats are the counters of the AMQP listener that metrics exports (amqp.Server.Stats,
// without importing the engine here).
type AMQPStats struct {
	Connections, Handshaking              int
	RefusedConnections, EvictedHandshakes uint64
}

var (
	amqpConns     = prometheus.NewDesc("sbgate_amqp_connections", "AMQP connections served (TCP, TLS and WebSocket).", nil, nil)
	amqpHandshake = prometheus.NewDesc("sbgate_amqp_handshaking_connections", "AMQP connections that have not completed their handshake (SASL and open).", nil, nil)
	amqpRefused   = prometheus.NewDesc("sbgate_amqp_refused_connections_total", "AMQP connections closed at once because the listener served its maximum.", nil, nil)
	amqpEvicted   = prometheus.NewDesc("sbgate_amqp_evicted_handshakes_total", "AMQP connections closed in their handshake to make room for new ones.", nil, nil)
)

// AMQP exports the AMQP listener's counters, read from stats at scrape time.
func (m *Metrics) AMQP(stats func() AMQPStats) {
	m.registry.MustRegister(amqpCollector(stats))
}

type amqpCollector func() AMQPStats

func (c amqpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- amqpConns
	ch <- amqpHandshake
	ch <- amqpRefused
	ch <- amqpEvicted
}

func (c amqpCollector) Collect(ch chan<- prometheus.Metric) {
	s := c()
	ch <- prometheus.MustNewConstMetric(amqpConns, prometheus.GaugeValue, float64(s.Connections))
	ch <- prometheus.MustNewConstMetric(amqpHandshake, prometheus.GaugeValue, float64(s.Handshaking))
	ch <- prometheus.MustNewConstMetric(amqpRefused, prometheus.CounterValue, float64(s.RefusedConnections))
	ch <- prometheus.MustNewConstMetric(amqpEvicted, prometheus.CounterValue, float64(s.EvictedHandshakes))
}
