// Package store holds sbgate's domain: entities, messages, their rules and errors, and the
// PostgreSQL implementation that keeps them. It knows nothing of HTTP.
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

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is what the HTTP layer needs from the broker. *Postgres implements it.
type Store interface {
	// CreateEntity creates a queue or topic at path (or a subscription when kind is
	// KindSubscription and path is "topic/Subscriptions/name"). Errors: ErrBadRequest (name or
	// properties invalid), ErrConflict (exists), ErrNotFound (the topic of a subscription).
	CreateEntity(ctx context.Context, kind Kind, path string, p Properties) (*Entity, error)
	// UpdateEntity replaces the description of an existing entity. Errors: ErrNotFound,
	// ErrBadRequest (invalid, an immutable property changed, or the entity is of another kind).
	UpdateEntity(ctx context.Context, kind Kind, path string, p Properties) (*Entity, error)
	// GetEntity returns the entity at path with its counts. Errors: ErrNotFound.
	GetEntity(ctx context.Context, path string) (*Entity, error)
	// DeleteEntity deletes the entity at path with its messages (and a topic's subscriptions).
	// Errors: ErrNotFound.
	DeleteEntity(ctx context.Context, path string) error
	// ListEntities lists entities of kind in path order, skipping skip and returning at most top,
	// with counts. For subscriptions, parent is the topic path.
	ListEntities(ctx context.Context, kind Kind, parent string, skip, top int) ([]*Entity, error)

	// CreateSubscription creates a subscription with rule as its first rule ($Default, every
	// message, when nil). Errors: as CreateEntity, and ErrBadRequest for an invalid rule.
	CreateSubscription(ctx context.Context, path string, p Properties, rule *Rule) (*Entity, error)
	// PutRule creates a rule on a subscription, or with update replaces one. Errors: ErrNotFound,
	// ErrConflict, ErrBadRequest (the filter or action does not compile; the message says where),
	// ErrQuota.
	PutRule(ctx context.Context, subPath string, r Rule, update bool) (*Rule, error)
	// GetRule returns a rule. Errors: ErrNotFound.
	GetRule(ctx context.Context, subPath, name string) (*Rule, error)
	// DeleteRule deletes a rule. Errors: ErrNotFound.
	DeleteRule(ctx context.Context, subPath, name string) error
	// ListRules lists a subscription's rules in name order. Errors: ErrNotFound.
	ListRules(ctx context.Context, subPath string, skip, top int) ([]*Rule, error)

	// Resolve returns the entity at path from a short-lived cache. Errors: ErrNotFound.
	Resolve(ctx context.Context, path string) (*Entity, error)
	// Send stores msgs in e atomically: all are committed when it returns nil, none otherwise.
	// Errors: ErrBadRequest, ErrTooLarge, ErrForbidden, ErrNotFound, ErrUnavailable.
	Send(ctx context.Context, e *Entity, msgs []Message) error
	// SendSequenced is Send that also returns, for each message, the number that cancels it
	// (CancelScheduled): its sequence number in e; for a message that has no row in e (sent to
	// a topic, whose copies are in its subscriptions, or moved on by auto-forwarding) the number
	// its copies share as their EnqueuedSequenceNumber; 0 for a duplicate, not stored.
	SendSequenced(ctx context.Context, e *Entity, msgs []Message) ([]int64, error)
	// Receive takes up to r.Max messages of r's target, waiting up to r.Wait for the first: it
	// returns every message available then, up to r.Max, in sequence order, or none when none
	// came in time. In PeekLock mode each is locked for the entity's LockDuration; in
	// ReceiveAndDelete mode they are removed. Errors: ErrBadRequest (r.Max out of
	// 1..MaxReceiveBatch, a topic, a session entity received without a session), ErrForbidden
	// (receiving disabled), ErrLockLost (the session lock is gone), ErrUnavailable.
	Receive(ctx context.Context, r ReceiveRequest) ([]*Message, error)
	// Settle completes, abandons, renews, defers or dead-letters locks of t's messages, each
	// request on its own; the results are in request order. A result's error is ErrLockLost when
	// the lock is not held (expired, settled, another message's, or outside t), ErrBadRequest for
	// a request t cannot take.
	Settle(ctx context.Context, t Target, reqs []SettleRequest) []SettleResult
	// CheckSend runs msgs through every check of a Send to e without storing them (a
	// transaction's sends are checked when made and stored when it commits). Errors: as Send.
	CheckSend(ctx context.Context, e *Entity, msgs []Message) error
	// ReserveSequenceNumbers draws n sequence numbers, for messages a transaction schedules
	// (TxSend.Numbers): their numbers are known before the commit.
	ReserveSequenceNumbers(ctx context.Context, n int) ([]int64, error)
	// CommitTransaction applies the sends and settlements of a client transaction in one
	// database transaction, all or nothing. Errors: ErrLockLost when a settlement's lock is no
	// longer held (nothing is applied), the errors of Send and Settle.
	CommitTransaction(ctx context.Context, w TxWork) error
	// Restore puts back, each as it was (sequence number, enqueue time, expiry, delivery count)
	// and receivable at once, messages a receive-and-delete removed from t that could not be
	// handed out: the receiver's link went before they were sent. It returns how many it put
	// back (one whose sequence number is in use again is not). Nothing a sender was told was
	// accepted is lost while the gateway lives.
	Restore(ctx context.Context, t Target, msgs []*Message) (int, error)
	// ReceiveDeferred takes the deferred messages of t with sequence numbers seqs, all or none,
	// and returns them in the order asked (a repeated one once, at its first place). When one
	// is not available nothing is taken (but a message past MaxDeliveryCount is still
	// dead-lettered). Errors: ErrNotFound naming the first missing one, ErrBadRequest (more than
	// MaxReceiveBatch), ErrLockLost (the session lock is gone).
	ReceiveDeferred(ctx context.Context, t Target, seqs []int64, mode ReceiveMode) ([]*Message, error)
	// Browse lists up to n messages of a subqueue from sequence number from on, without locks.
	Browse(ctx context.Context, e *Entity, sq SubQueue, from int64, n int) ([]*Message, error)
	// CancelScheduled removes messages still waiting for their scheduled time, all or none.
	// Errors: ErrNotFound naming those not waiting, ErrBadRequest (more than MaxCancelBatch).
	CancelScheduled(ctx context.Context, e *Entity, seqs []int64) error
	// Purge deletes every message of a subqueue and returns how many.
	Purge(ctx context.Context, e *Entity, sq SubQueue) (int64, error)
	// Resubmit moves dead-lettered messages back into the entity as new messages: the one with
	// sequence number seq, or (seq 0) every one match accepts. Errors: ErrNotFound for a seq.
	Resubmit(ctx context.Context, e *Entity, seq int64, match func(*Message) bool) (int64, error)

	// AcceptSession locks the session of a session entity named sessionID, "" included (it need
	// not hold messages). Errors: ErrBadRequest, ErrConflict (locked by another receiver).
	AcceptSession(ctx context.Context, e *Entity, sessionID string) (*Session, error)
	// AcceptNextSession locks the session of a session entity whose messages have waited
	// longest, waiting up to wait for one (nil, nil when none came). Errors: ErrBadRequest.
	AcceptNextSession(ctx context.Context, e *Entity, wait time.Duration) (*Session, error)
	// RenewSessionLock extends a session lock. Errors: ErrLockLost.
	RenewSessionLock(ctx context.Context, e *Entity, sl SessionLock) (time.Time, error)
	// ReleaseSession gives a session up. Errors: ErrLockLost.
	ReleaseSession(ctx context.Context, e *Entity, sl SessionLock) error
	// SessionState and SetSessionState read and replace a session's state under its lock.
	// Errors: ErrLockLost, ErrTooLarge.
	SessionState(ctx context.Context, e *Entity, sl SessionLock) ([]byte, error)
	SetSessionState(ctx context.Context, e *Entity, sl SessionLock, state []byte) error
	// ListSessions lists sessions holding messages or state, or locked.
	ListSessions(ctx context.Context, e *Entity, skip, top int) ([]SessionInfo, error)
	// ListSessionsUpdatedSince lists the ids of the sessions whose state was set after since.
	ListSessionsUpdatedSince(ctx context.Context, e *Entity, since time.Time, skip, top int) ([]string, error)
	// NamespaceKey returns the namespace-level key named name, creating it with a random key and
	// Manage rights when create is true and it does not exist yet.
	NamespaceKey(ctx context.Context, name string, create bool) (NamespaceKey, error)
	// NamespaceKeys lists the namespace-level keys kept in the database.
	NamespaceKeys(ctx context.Context) ([]NamespaceKey, error)
	// CreateNamespaceKey, RotateNamespaceKey and DeleteNamespaceKey manage them (Errors:
	// ErrConflict, ErrNotFound, ErrBadRequest).
	CreateNamespaceKey(ctx context.Context, name string, rights []string) (NamespaceKey, error)
	RotateNamespaceKey(ctx context.Context, name string, secondary bool) (NamespaceKey, error)
	DeleteNamespaceKey(ctx context.Context, name string) error
	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
}

// Target is where a message operation acts: an entity (a queue or subscription), its main queue
// or its dead-letter subqueue, and inside an accepted session the session, whose lock must be
// held.
type Target struct {
	Entity   *Entity
	SubQueue SubQueue
	Session  *SessionLock // nil outside a session
}

// ReceiveRequest asks for up to Max messages of a target, waiting up to Wait for the first.
type ReceiveRequest struct {
	Target
	Mode ReceiveMode
	Max  int
	Wait time.Duration
}

// ReceiveMode selects peek-lock or receive-and-delete.
type ReceiveMode int

// Receive modes.
const (
	PeekLock ReceiveMode = iota
	ReceiveAndDelete
)

// Settlement is what to do with a locked message.
type Settlement int

// Settlements.
const (
	Complete Settlement = iota
	Abandon
	RenewLock
	// Defer sets a locked message aside: it stays in the entity but is received only by its
	// sequence number (ReceiveDeferred).
	Defer
	// DeadLetter moves a locked message to the dead-letter subqueue with a reason and a
	// description.
	DeadLetter
	// Release unlocks a message as if it had not been delivered: unlike Abandon, the delivery
	// does not count (AMQP's released outcome, which the SDKs send for messages they took but
	// never gave the application).
	Release
)

// SettleRequest is one lock to settle and how.
type SettleRequest struct {
	Op    Settlement
	Token uuid.UUID
	// ID, when not empty, is the sequence number or MessageId the client addressed the message
	// by: the lock must be that message's. The token alone names its message.
	ID string
	// Reason and Description go with DeadLetter.
	Reason, Description string
	// PropertiesToModify, with Abandon, Defer or DeadLetter, are set on the message in the
	// statement that settles it: each replaces the message's user property of the same name
	// (names compare exactly, as AMQP's do) or is added. The message's properties as modified
	// must pass the checks of a send (types, text, count and sizes, the entity's message size
	// limit); a request that would break them fails alone with ErrBadRequest and changes
	// nothing. With any other settlement they are a bad request.
	PropertiesToModify UserProperties
}

// SettleResult is the outcome of one SettleRequest: the new lock expiry for RenewLock, or the
// error (ErrLockLost when the lock is gone, ErrBadRequest for an invalid request).
type SettleResult struct {
	LockedUntil time.Time
	Err         error
}

// NamespaceKey is a namespace-level shared access policy.
type NamespaceKey struct {
	Name         string
	PrimaryKey   string
	SecondaryKey string
	Rights       []string
	Created      bool // true when this call generated it
}

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
	CheckCopy func(*Message) error
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
	batcher *batcher[*sendRequest]
	// settler coalesces settlements the same way: one statement per kind for many locks.
	settler *batcher[*settleJob]
	// claimer coalesces the claims of different entities into rounds (newClaimer).
	claimer  *batcher[*claimJob]
	listener *listener
	waiting  waiting
	// dispatchers counts the running dispatchers; lifetime ends at Stop.
	dispatchers sync.WaitGroup
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

var _ Store = (*Postgres)(nil)

// New returns a store over pool. Call Start to run its background work and Stop to end it.
func New(pool *pgxpool.Pool, opts Options) *Postgres {
	opts.setDefaults()
	s := &Postgres{pool: pool, opts: opts, log: opts.Logger}
	s.waiting.byEntity = make(map[int64]map[waitKey]waker)
	s.lifetime, s.endLifetime = context.WithCancel(context.Background())
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
	s.batcher.start()
	s.settler.start()
	s.claimer.start()
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
	s.haltReceivers()
	s.mu.Lock()
	stop, done := s.stopLoop, s.loopDone
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	s.listener.stop()
	s.batcher.stop()
	s.settler.stop()
	s.claimer.stop()
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
