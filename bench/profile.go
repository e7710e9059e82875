package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Profiles of a run (Config.ProfileDir): for each phase, a CPU profile of each gateway that
// serves Go's profiles (Config.PprofAddrs), taken for the phase's duration, its allocation
// profile before and after, and, when the database has pg_stat_statements, what PostgreSQL
// spent on each statement during the phase (its execution and its planning).
// They say where a phase's CPU went; the rates and CPU columns of the report say how much.

// statementsSQL reads what pg_stat_statements counted since its reset, leaving out the queries
// of the profiler itself.
const statementsSQL = `SELECT calls, rows, total_exec_time, plans, total_plan_time, shared_blks_hit + shared_blks_read, wal_bytes, query
FROM pg_stat_statements
WHERE query NOT LIKE '%pg_stat_statements%'
ORDER BY total_exec_time + total_plan_time DESC LIMIT 25`

// profiler takes a phase's profiles.
type profiler struct {
	dir   string
	addrs []string
	db    *pgx.Conn // nil: no pg_stat_statements
	http  *http.Client
	n     int // phases profiled so far, to number the files
}

// newProfiler prepares Config.ProfileDir; the database side only when pg_stat_statements is
// loaded in the server (shared_preload_libraries), which it then enables in the database.
func newProfiler(ctx context.Context, cfg Config, progress func(string, ...any)) (*profiler, error) {
	if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: profiles: %w", err)
	}
	p := &profiler{dir: cfg.ProfileDir, addrs: cfg.PprofAddrs, http: &http.Client{}}
	if cfg.DatabaseURL == "" {
		return p, nil
	}
	c, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: profiles: %w", err)
	}
	var loaded bool
	err = c.QueryRow(ctx, `SELECT 'pg_stat_statements' = ANY(string_to_array(current_setting('shared_preload_libraries'), ','))`).Scan(&loaded)
	if err == nil && loaded {
		_, err = c.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	}
	if err != nil || !loaded {
		c.Close(context.WithoutCancel(ctx))
		progress("profiles: no pg_stat_statements in the database (%v); gateway profiles only", err)
		return p, nil
	}
	p.db = c
	return p, nil
}

func (p *profiler) close(ctx context.Context) {
	if p != nil && p.db != nil {
		p.db.Close(ctx)
	}
}

// start begins the profiles of the phase res is about to measure, for d; stop ends them and
// writes them, with what the phase moved.
func (p *profiler) start(ctx context.Context, res Result, label string, d time.Duration) (stop func(done Result)) {
	if p == nil {
		return func(Result) {}
	}
	p.n++
	name := fmt.Sprintf("%02d-%s-%d", p.n, fileName(label), res.Clients)
	if p.db != nil {
		if _, err := p.db.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
			p.note(name, err)
		}
	}
	seconds := int(math.Ceil(d.Seconds()))
	var wg sync.WaitGroup
	for i, addr := range p.addrs {
		// What the gateway allocated in the phase: its allocation profile (counted since it
		// started) before and after, to read with go tool pprof -base.
		gw := filepath.Join(p.dir, fmt.Sprintf("%s.gateway-%d", name, i))
		if err := p.fetch(ctx, addr, "allocs", gw+".allocs-before.pprof"); err != nil {
			p.note(name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.fetch(ctx, addr, fmt.Sprintf("profile?seconds=%d", seconds), gw+".pprof"); err != nil {
				p.note(name, err)
			}
			if err := p.fetch(ctx, addr, "allocs", gw+".allocs-after.pprof"); err != nil {
				p.note(name, err)
			}
		}()
	}
	return func(done Result) {
		wg.Wait()
		if p.db != nil {
			if err := p.statements(ctx, filepath.Join(p.dir, name+".statements.txt"), label, done); err != nil {
				p.note(name, err)
			}
		}
	}
}

// fetch writes the gateway at addr's profile (what follows /debug/pprof/) to path.
func (p *profiler) fetch(ctx context.Context, addr, profile, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+profile, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s profile of %s: status %d", profile, addr, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// statements writes what PostgreSQL spent per statement in the phase, per call and per message.
func (p *profiler) statements(ctx context.Context, path, label string, res Result) error {
	rows, err := p.db.Query(ctx, statementsSQL)
	if err != nil {
		return err
	}
	type stmt struct {
		calls, rows, plans, blocks int64
		total, plan                float64 // milliseconds
		wal                        float64
		query                      string
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stmt, error) {
		var s stmt
		err := r.Scan(&s.calls, &s.rows, &s.total, &s.plans, &s.plan, &s.blocks, &s.wal, &s.query)
		return s, err
	})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	msgs := float64(max(res.Messages, 1))
	var calls int64
	var total, plan, wal float64
	for _, s := range list {
		calls += s.calls
		total += s.total
		plan += s.plan
		wal += s.wal
	}
	fmt.Fprintf(w, "%s at %d clients: %d messages in %s; pg_stat_statements since the phase began\n", label, res.Clients, res.Messages, res.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "all statements: %.2f calls, %.1f µs execution, %.1f µs planning, %.0f WAL bytes a message\n\n",
		float64(calls)/msgs, total*1000/msgs, plan*1000/msgs, wal/msgs)
	fmt.Fprintf(w, "%10s %10s %10s %10s %10s %10s %10s %10s %8s  %s\n", "calls", "calls/msg", "rows/call", "µs/call", "µs/msg", "plans", "plan µs/msg", "blks/call", "WAL/msg", "statement")
	for _, s := range list {
		perCall := func(v float64) float64 { return v / float64(max(s.calls, 1)) }
		fmt.Fprintf(w, "%10d %10.3f %10.1f %10.1f %10.1f %10d %10.1f %10.1f %8.0f  %s\n", s.calls, float64(s.calls)/msgs, perCall(float64(s.rows)),
			perCall(s.total*1000), s.total*1000/msgs, s.plans, s.plan*1000/msgs, perCall(float64(s.blocks)), s.wal/msgs, oneLine(s.query, 400))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (p *profiler) note(name string, err error) {
	_ = os.WriteFile(filepath.Join(p.dir, name+".error.txt"), []byte(err.Error()+"\n"), 0o644)
}

// fileName makes a label usable in a file name.
func fileName(label string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(label) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	return strings.TrimSuffix(b.String(), "_")
}

// oneLine squeezes a statement's white space and cuts it at n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
