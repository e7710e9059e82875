// Package store implements broker.Store on PostgreSQL: the statements, run through package
// engine's group-commit batchers and per-target dispatchers (store gives them the claims, with
// their cursors, and the writes), the LISTEN/NOTIFY wake-ups across gateways, the maintenance
// loop and the SQL relay. The domain it keeps — entities, messages, rules, sessions, their
// limits and errors — is package broker's, which neither protocol door needs a database driver
// to use.
//
// Every lock is row state: a peek-lock sets lock_token and visible_at in one statement and holds
// no transaction; settlement matches the token and its expiry, so an expired lock simply stops
// matching. Sends are group-committed: concurrent requests share one INSERT and one WAL flush.
package store

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

// Options configures a Postgres store.
type Options struct {
	// Now is the clock every SQL statement uses; tests inject one to move time without sleeping.
	Now func() time.Time
	// Logger receives background errors.
	Logger *slog.Logger
	// SendWriters is how many group-commit writers run at once, for sends and, as many
	// again, for claims and for settlements (default 1). One writer makes the largest batches:
	// everything that arrives while a commit runs goes into the next one. More pay only when
	// the database is far enough away that a commit's round trip leaves it idle.
	SendWriters int
	// MaxBatchRows caps the messages one group commit inserts (default 1000).
	MaxBatchRows int
	// Recheck is the longest receivers waiting on an entity that has nothing for them go without
	// a look at the database (default 30s). They are woken by sends, abandons and releases (on
	// any gateway) and by timers set for the next scheduled message or lock end, so this is only
	// a backstop.
	Recheck time.Duration
	// EntityCacheTTL is how long a resolved entity is reused before it is read again (default 2s).
	EntityCacheTTL time.Duration
	// MaintenanceInterval is how often the background tasks run (default 1s): expiry, count
	// folding, duplicate-history pruning, idle-entity deletion. Zero keeps the default; tests
	// that call Maintain themselves set it long.
	MaintenanceInterval time.Duration
	// CheckCopy, when set, checks a subscription's copy that a rule action changed the way the
	// door a send came through checks a message (sbgate serve gives the REST check that every
	// HTTP client can read the properties back). A copy it refuses — or that the store's own
	// property limits refuse — is dead-lettered in its subscription, as it was before the
	// action, with ReasonActionResult; the send goes on.
	CheckCopy func(*broker.Message) error
}

// Defaults of the Options that sbgate serve also offers as flags: its flag defaults are these,
// so each is written once.
const (
	DefaultSendWriters = 1
	DefaultRecheck     = 30 * time.Second
)

func (o *Options) setDefaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SendWriters <= 0 {
		o.SendWriters = DefaultSendWriters
	}
	if o.MaxBatchRows <= 0 {
		o.MaxBatchRows = 1000
	}
	if o.Recheck <= 0 {
		o.Recheck = DefaultRecheck
	}
	if o.EntityCacheTTL <= 0 {
		o.EntityCacheTTL = 2 * time.Second
	}
	if o.MaintenanceInterval <= 0 {
		o.MaintenanceInterval = time.Second
	}
}

// Postgres is the PostgreSQL implementation of Store.
type Postgres struct {
	pool *pgxpool.Pool
	// hot, between Start and Stop, runs the claims and settlements, the statements of every
	// message: its connections use each statement's generic plan (see genericPlanPool).
	hot     atomic.Pointer[pgxpool.Pool]
	opts    Options
	log     *slog.Logger
	cache   *entityCache
	batcher *engine.Batcher[*sendRequest]
	// settler coalesces settlements the same way: one statement per kind for many locks.
	settler *engine.Batcher[*settleJob]
	// claimer coalesces the claims of different entities into rounds (newClaimer).
	claimer  *engine.Batcher[*claimJob]
	listener *listener
	// hub runs the dispatchers of the receivers waiting on this gateway.
	hub *engine.Hub
	// lifetime ends at Stop.
	lifetime    context.Context
	endLifetime context.CancelFunc
	touched     touches
	sizes       sizeCache
	// msgCounter numbers sent messages, so the rows of one message (its subscription copies)
	// are told apart from a duplicate of it in the same group commit.
	msgCounter atomic.Int64
	// claims counts the claim statements run, for tests and metrics.
	claims atomic.Int64
	// sharedClaims counts the statements that claimed for several targets at once.
	sharedClaims atomic.Int64
	// conflictRetries counts statements run again after PostgreSQL ended them in a deadlock or
	// a serialization failure (retryConflicts).
	conflictRetries atomic.Int64

	mu       sync.Mutex
	stopLoop context.CancelFunc
	loopDone chan struct{}
}

var _ broker.Store = (*Postgres)(nil)

// New returns a store over pool. Call Start to run its background work and Stop to end it.
func New(pool *pgxpool.Pool, opts Options) *Postgres {
	opts.setDefaults()
	s := &Postgres{pool: pool, opts: opts, log: opts.Logger}
	s.lifetime, s.endLifetime = context.WithCancel(context.Background())
	s.hub = engine.NewHub(s.lifetime, s.now, s.log)
	// The cache expires by the wall clock: it is an optimisation, not part of the semantics that
	// tests move the store clock for.
	s.cache = newEntityCache(opts.EntityCacheTTL, time.Now)
	s.batcher = newSendBatcher(s)
	s.settler = newSettler(s)
	s.claimer = newClaimer(s)
	s.listener = newListener(s)
	return s
}

// Start runs the group-commit writers, the cross-gateway listener and the background tasks
// until Stop.
func (s *Postgres) Start(ctx context.Context) {
	if hot := genericPlanPool(s.pool); hot != nil && !s.hot.CompareAndSwap(nil, hot) {
		hot.Close() // started already
	}
	s.batcher.Start()
	s.settler.Start()
	s.claimer.Start()
	s.listener.start(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopLoop == nil {
		var loopCtx context.Context
		loopCtx, s.stopLoop = context.WithCancel(context.WithoutCancel(ctx))
		s.loopDone = make(chan struct{})
		go func() {
			defer close(s.loopDone)
			s.maintainLoop(loopCtx, s.opts.MaintenanceInterval)
		}()
	}
}

// Stop ends the background work started by Start and waits for it: receivers still waiting are
// answered with nothing, claims and writes under way finish. It is idempotent.
func (s *Postgres) Stop() {
	s.hub.Halt()
	s.mu.Lock()
	stop, done := s.stopLoop, s.loopDone
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	s.listener.stop()
	s.batcher.Stop()
	s.settler.Stop()
	s.claimer.Stop()
	s.endLifetime()
	if hot := s.hot.Swap(nil); hot != nil {
		hot.Close() // waits for the statements under way
	}
}

// ResetConnections drops every connection the store holds (its pool's and, while it runs, the
// generic-plan pool's), for after the database restarted: each would fail its next statement.
// Connections in use are dropped when they are released.
func (s *Postgres) ResetConnections() {
	s.pool.Reset()
	if hot := s.hot.Load(); hot != nil {
		hot.Reset()
	}
}

// hotPool is the pool for claims and settlements: the generic-plan pool while the store runs,
// else pool.
func (s *Postgres) hotPool() *pgxpool.Pool {
	if hot := s.hot.Load(); hot != nil {
		return hot
	}
	return s.pool
}

// genericPlanPool returns a second pool to pool's database whose connections plan each
// prepared statement once and then run that plan (plan_cache_mode force_generic_plan).
// PostgreSQL otherwise plans anew every execution while it judges a custom plan worth it, and
// for the claim it always did: 0.54 ms of planning a claim for 0.16 ms of execution (measured
// with pg_stat_statements.track_planning). The claim and settlement statements name in their
// own text the partial indexes they read and find rows by entity, sequence number and ctid, so
// their generic plan is the plan a custom one would be (claim_internal_test checks both plans);
// the maintenance and management statements, whose generic plans were far worse (a count by
// entity took 250 ms), stay on pool. It holds up to half of pool's connections, at least four.
func genericPlanPool(pool *pgxpool.Pool) *pgxpool.Pool {
	cfg := pool.Config()
	params := maps.Clone(cfg.ConnConfig.RuntimeParams)
	if params == nil {
		params = map[string]string{}
	}
	params["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.RuntimeParams = params
	cfg.MaxConns = max(4, cfg.MaxConns/2)
	cfg.MinConns = 0
	hot, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		// NewWithConfig fails only on a config it cannot use, and this one is a working pool's
		// with two settings changed; should it ever fail, the statements still run on pool.
		return nil
	}
	return hot
}

// Ping reports whether the database answers.
func (s *Postgres) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return interpretError(err)
	}
	return nil
}

// now returns the store clock truncated to PostgreSQL's microsecond precision, so a time written
// and read back compares equal.
func (s *Postgres) now() time.Time { return s.opts.Now().UTC().Truncate(time.Microsecond) }
