package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/store"
)

func TestMain(m *testing.M) {
	dbtest.Main(m)
}

// clock is a store clock tests move by hand, so lock expiry and TTL are tested without sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// bundle is what a store test works with.
type bundle struct {
	ctx   context.Context
	store *store.Postgres
	pool  *pgxpool.Pool
	clock *clock
}

type setupOptions struct {
	realClock bool
	opts      store.Options
}

// setup gives a test a store over its own database, started, with a fake clock unless asked for
// the real one. Tests run in parallel, so leaked goroutines are checked once for the package
// (dbtest.Main), not per test, where another test's goroutines would look like leaks.
func setup(t *testing.T, so ...setupOptions) *bundle {
	t.Helper()
	t.Parallel()
	var o setupOptions
	if len(so) > 0 {
		o = so[0]
	}
	pool := dbtest.NewPool(t)
	b := &bundle{ctx: t.Context(), clock: newClock(), pool: pool}
	opts := o.opts
	if !o.realClock {
		opts.Now = b.clock.Now
	}
	b.store = store.New(pool, opts)
	b.store.Start(context.Background())
	t.Cleanup(b.store.Stop)
	return b
}

// queue creates a queue with the default description changed by edit.
func (b *bundle) queue(t *testing.T, path string, edit func(p *broker.Properties)) *broker.Entity {
	t.Helper()
	p := broker.DefaultProperties(broker.KindQueue)
	if edit != nil {
		edit(&p)
	}
	e, err := b.store.CreateEntity(b.ctx, broker.KindQueue, path, p)
	if err != nil {
		t.Fatalf("CreateEntity(%q): %v", path, err)
	}
	return e
}

func (b *bundle) send(t *testing.T, e *broker.Entity, msgs ...broker.Message) {
	t.Helper()
	if err := b.store.Send(b.ctx, e, msgs); err != nil {
		t.Fatalf("Send to %s: %v", e.Path, err)
	}
}

// receive takes one message without waiting; nil when there is none.
func (b *bundle) receive(t *testing.T, e *broker.Entity, sq broker.SubQueue, mode broker.ReceiveMode) *broker.Message {
	t.Helper()
	m, err := receive1(b.ctx, b.store, broker.Target{Entity: e, SubQueue: sq}, mode, 0)
	if err != nil {
		t.Fatalf("Receive from %s: %v", e.Path, err)
	}
	return m
}

func (b *bundle) counts(t *testing.T, path string) broker.Counts {
	t.Helper()
	e, err := b.store.GetEntity(b.ctx, path)
	if err != nil {
		t.Fatalf("GetEntity(%q): %v", path, err)
	}
	return e.Counts
}

func body(s string) broker.Message { return broker.Message{Body: []byte(s)} }

// openPool opens a pool on url, closed when the test ends.
func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// receive1 takes one message of t, waiting up to wait; nil when none came.
func receive1(ctx context.Context, st broker.Store, t broker.Target, mode broker.ReceiveMode, wait time.Duration) (*broker.Message, error) {
	msgs, err := receiveN(ctx, st, t, mode, 1, wait)
	if len(msgs) == 0 {
		return nil, err
	}
	return msgs[0], err
}

// receiveN takes up to n messages of t, waiting up to wait for the first.
func receiveN(ctx context.Context, st broker.Store, t broker.Target, mode broker.ReceiveMode, n int, wait time.Duration) ([]*broker.Message, error) {
	return st.Receive(ctx, broker.ReceiveRequest{Target: t, Mode: mode, Max: n, Wait: wait})
}

// receiveDeferred1 takes the one deferred message of t with sequence number seq.
func receiveDeferred1(ctx context.Context, st broker.Store, t broker.Target, seq int64, mode broker.ReceiveMode) (*broker.Message, error) {
	msgs, err := st.ReceiveDeferred(ctx, t, []int64{seq}, mode)
	if err != nil {
		return nil, err
	}
	return msgs[0], nil
}

// settle1 settles one lock of t: the message with sequence number or MessageId id.
func settle1(ctx context.Context, st broker.Store, t broker.Target, op broker.Settlement, id string, token uuid.UUID) (time.Time, error) {
	res := st.Settle(ctx, t, []broker.SettleRequest{{Op: op, Token: token, ID: id}})[0]
	return res.LockedUntil, res.Err
}

// deadLetter1 dead-letters one locked message of t.
func deadLetter1(ctx context.Context, st broker.Store, t broker.Target, id string, token uuid.UUID, reason, description string) error {
	res := st.Settle(ctx, t, []broker.SettleRequest{{Op: broker.DeadLetter, Token: token, ID: id, Reason: reason, Description: description}})[0]
	return res.Err
}

// inSession is the target of a session held under sl.
func inSession(e *broker.Entity, sl broker.SessionLock) broker.Target {
	return broker.Target{Entity: e, Session: &sl}
}

// newSharedDatabase is a database of the test's own for several stores (gateways) to share.
func newSharedDatabase(t *testing.T) string { return dbtest.NewDatabase(t) }

// openStore starts a store over url with opts, stopped when the test ends: one gateway.
func openStore(t *testing.T, url string, opts ...store.Options) *store.Postgres {
	t.Helper()
	var o store.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	s := store.New(openPool(t, url), o)
	s.Start(context.Background())
	t.Cleanup(s.Stop)
	return s
}

// waitForLockWaiter waits until a statement whose text is like like (a LIKE pattern) waits for
// a lock in the test's database.
func (b *bundle) waitForLockWaiter(t *testing.T, like string) {
	t.Helper()
	eventually.True(t, "a statement like "+like+" to wait for a lock", func() bool {
		var waiting bool
		if err := b.pool.QueryRow(b.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1)`, like).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
}
