package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store/internal/sqlcdb"
)

// The SQL send functions (migrations/000007_sql_send.up.sql) write messages into sbgate.outbox
// in the application's transaction, which at commit NOTIFYs outboxChannel unless a relay is
// polling already. Every gateway runs a Relay: woken by the notification (or its poll backstop,
// or polling while it has work), it claims
// committed rows with SKIP LOCKED, so gateways share the work, runs each message through the
// send path of an HTTP send (prepareSend: status, sessions, sizes, quota, TTL caps, duplicate
// detection, topic rules and actions, auto-forwarding), and in one transaction inserts the
// messages and deletes the rows. A gateway killed mid-relay has committed both or neither: the
// rows are claimed again, nothing is lost or doubled.
const (
	outboxChannel = "sbgate_outbox"
	relayAppName  = "sbgate-relay"
	// relayBatch is how many outbox rows one relay transaction takes: one INSERT of their
	// messages, like a group commit of HTTP sends.
	relayBatch = 500
	// relayMaxBackoff bounds how long a message the relay could not deliver for a reason that
	// may pass (the entity is full or disabled) waits before it is tried again.
	relayMaxBackoff = 5 * time.Minute
)

// RelayOptions configures a Relay.
type RelayOptions struct {
	// Poll is how often the relay looks at the outbox without being notified (default 2s): a
	// backstop for notifications missed while its connection was down, and the clock of
	// retries.
	Poll time.Duration
}

// Relay delivers the messages applications sent through the SQL functions. Start runs it until
// Stop; RelayPending runs one pass, for tests and the bench.
type Relay struct {
	s    *Postgres
	opts RelayOptions

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	// relayed counts the messages delivered, for tests.
	relayed int64
}

// NewRelay returns a relay for s.
func NewRelay(s *Postgres, opts RelayOptions) *Relay {
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	return &Relay{s: s, opts: opts}
}

// Start runs the relay in the background until Stop. It is idempotent.
func (r *Relay) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		r.loop(ctx)
	}()
}

// Stop ends the relay and waits for a pass under way to finish. It is idempotent.
func (r *Relay) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// loop relays whenever a sending transaction rings (NOTIFY) or the poll comes round. Once a
// pass found work it polls every busyPoll and holds the doorbell lock (sbgate.ring in migration
// 000007), so that senders need not NOTIFY, which would serialise their commits; it lets go
// after busyLinger without work, and relays once more after letting go.
func (r *Relay) loop(ctx context.Context) {
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	go r.listen(ctx, poke)
	ticker := time.NewTicker(r.opts.Poll)
	defer ticker.Stop()
	var bell doorbell
	defer bell.close()
	lastWork := time.Now()
	for {
		n, err := r.RelayPending(ctx)
		if err != nil && ctx.Err() == nil {
			r.s.log.Warn("relay SQL sends", "err", err)
		}
		if n > 0 {
			lastWork = time.Now()
			if !bell.held {
				bell.hold(ctx, r.s)
			}
		}
		if bell.held && time.Since(lastWork) > busyLinger {
			bell.release(ctx)
			continue // what was committed while senders did not ring
		}
		var busy <-chan time.Time
		if bell.held {
			busy = time.After(busyPoll)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-ticker.C:
		case <-busy:
		}
	}
}

// Polling while busy: how often, and for how long without work before going back to waiting
// for the doorbell.
const (
	busyPoll   = 5 * time.Millisecond
	busyLinger = 200 * time.Millisecond
)

// doorbell holds the advisory lock that tells senders a relay is polling (sbgate.ring), on a
// connection of its own: a session lock lives as long as its connection, so a relay that dies
// lets go of it and senders ring again.
type doorbell struct {
	conn *pgx.Conn
	held bool
}

func (b *doorbell) hold(ctx context.Context, s *Postgres) {
	if b.conn == nil {
		cfg := s.pool.Config().ConnConfig.Copy()
		cfg.RuntimeParams["application_name"] = relayAppName
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return // senders keep ringing
		}
		b.conn = conn
	}
	var err error
	if b.held, err = queries.HoldDoorbell(ctx, b.conn); err != nil {
		b.close() // another gateway may hold it: then it polls, and this one waits to be rung
	}
}

func (b *doorbell) release(ctx context.Context) {
	b.held = false
	if err := queries.ReleaseDoorbell(ctx, b.conn); err != nil {
		b.close()
	}
}

func (b *doorbell) close() {
	b.held = false
	if b.conn != nil {
		_ = b.conn.Close(context.Background())
		b.conn = nil
	}
}

// listen LISTENs on outboxChannel and pokes on every notification, reconnecting with backoff.
// Each (re)connection pokes too: what was committed while it was down is unknown.
func (r *Relay) listen(ctx context.Context, poke func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := func() error {
			cfg := r.s.pool.Config().ConnConfig.Copy()
			cfg.RuntimeParams["application_name"] = relayAppName
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(ctx))
			// LISTEN is a utility statement, which sqlc does not take; its text is a constant.
			if _, err := conn.Exec(ctx, "LISTEN "+outboxChannel); err != nil {
				return err
			}
			backoff = 100 * time.Millisecond
			poke()
			for {
				if _, err := conn.WaitForNotification(ctx); err != nil {
					return err
				}
				poke()
			}
		}()
		if ctx.Err() != nil {
			return
		}
		r.s.log.Warn("listen for SQL sends", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// RelayPending relays committed outbox rows until none is left that is due, and returns how
// many messages it delivered. Rows another gateway is relaying are left to it.
func (r *Relay) RelayPending(ctx context.Context) (int, error) {
	total := 0
	for {
		n, claimed, err := r.pass(ctx, relayBatch)
		if err != nil && claimed > 1 && !errors.Is(err, broker.ErrUnavailable) && ctx.Err() == nil {
			// One message broke the shared INSERT: relay the rows one at a time, so the others
			// go and the culprit is recorded with its error.
			for range claimed {
				n, _, err = r.pass(ctx, 1)
				if err != nil {
					return total, err
				}
				total += n
			}
			continue
		}
		total += n
		if err != nil {
			return total, err
		}
		if claimed < relayBatch {
			return total, nil
		}
	}
}

type relayed struct {
	e     *broker.Entity
	size  int
	wakes []wakeTarget
}

// pass relays up to limit rows in one transaction. It returns the messages delivered and the
// rows claimed.
func (r *Relay) pass(ctx context.Context, limit int) (delivered, claimed int, err error) {
	s := r.s
	var done []relayed
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		batch, err := claimOutbox(ctx, tx, s.now(), limit)
		if err != nil {
			return err
		}
		claimed = len(batch)
		if claimed == 0 {
			return nil
		}
		var o relayOutcome
		if o, err = r.prepareBatch(ctx, batch, s.now()); err != nil {
			return err
		}
		done = o.done
		if len(o.msgRows) > 0 {
			if _, err := s.insertRows(ctx, tx, o.msgRows); err != nil {
				if claimed == 1 {
					// Alone, so this message is the cause: keep it with its error and retry it
					// later, in a transaction of its own below.
					return &relayInsertError{id: batch[0].id, attempts: batch[0].attempts, err: err}
				}
				return err
			}
		}
		return queries.RelayDone(ctx, tx, sqlcdb.RelayDoneParams{DoneIds: o.ids,
			FailedIds: o.failedIDs, Failures: o.failures, Retries: o.retries})
	})
	var ie *relayInsertError
	if errors.As(err, &ie) {
		s.log.Error("relay SQL send: the message cannot be stored", "outbox_id", ie.id, "err", ie.err)
		err = queries.RelayDone(ctx, s.pool, sqlcdb.RelayDoneParams{DoneIds: []int64{},
			FailedIds: []int64{ie.id}, Failures: []string{"The message could not be stored."},
			Retries: []pgtype.Timestamptz{retryTime(broker.CodeInternal, ie.attempts, s.now())}})
		return 0, claimed, interpretError(err)
	}
	if err != nil {
		return 0, claimed, fmt.Errorf("relay SQL sends: %w", interpretError(err))
	}
	for _, d := range done {
		s.announce(d.wakes...)
		s.grew(d.e.ID, int64(d.size))
		s.touch(d.e)
	}
	r.mu.Lock()
	r.relayed += int64(len(done))
	r.mu.Unlock()
	return len(done), claimed, nil
}

// outboxRow is an outbox row claimed for relaying.
type outboxRow struct {
	id       int64
	path     string
	m        broker.Message
	attempts int
}

// claimOutbox claims up to limit outbox rows due at now, in tx (ClaimOutbox).
func claimOutbox(ctx context.Context, tx pgx.Tx, now time.Time, limit int) ([]outboxRow, error) {
	rows, err := queries.ClaimOutbox(ctx, tx, sqlcdb.ClaimOutboxParams{Now: now, N: int64(limit)})
	if err != nil {
		return nil, err
	}
	var batch []outboxRow
	for _, r := range rows {
		st := outboxRow{id: r.ID, path: r.Path, attempts: int(r.Attempts), m: broker.Message{
			Body: r.Body, MessageID: r.MessageID, CorrelationID: r.CorrelationID,
			SessionID: r.SessionID, ReplyToSessionID: r.ReplyToSessionID, Label: r.Label,
			To: r.ToAddr, ReplyTo: r.ReplyTo, PartitionKey: r.PartitionKey,
			ViaPartitionKey: r.ViaPartitionKey, ContentType: r.ContentType,
		}}
		if r.TtlSeconds.Valid {
			st.m.TimeToLive = secondsToTTL(r.TtlSeconds.Float64)
		}
		if r.ScheduledAt.Valid {
			if r.ScheduledAt.InfinityModifier != pgtype.Finite {
				// As the scan into a time.Time refused it before: no time to schedule at.
				return nil, fmt.Errorf("outbox row %d: scheduled_at is %s", st.id,
					r.ScheduledAt.InfinityModifier)
			}
			st.m.ScheduledEnqueueTime = r.ScheduledAt.Time
		}
		if st.m.UserProperties, err = decodeStagedProperties(r.UserProps); err != nil {
			return nil, fmt.Errorf("outbox row %d: %w", st.id, err)
		}
		batch = append(batch, st)
	}
	return batch, nil
}

// relayOutcome is what one pass makes of its claimed rows: the rows to insert into the
// entities and the outbox rows they came from (ids), the outbox rows that failed with the
// reason and when to retry, and what to announce once committed.
type relayOutcome struct {
	ids       []int64
	failedIDs []int64
	failures  []string
	retries   []pgtype.Timestamptz
	msgRows   []messageRow
	done      []relayed
}

// prepareBatch prepares the sends of batch; a send the message itself fails (not the database)
// is set aside to retry after a delay that depends on now.
func (r *Relay) prepareBatch(ctx context.Context, batch []outboxRow,
	now time.Time) (relayOutcome, error) {
	var o relayOutcome
	for _, st := range batch {
		d, size, e, err := r.prepare(ctx, st.path, st.m)
		if err != nil {
			var se *broker.Error
			if !errors.As(err, &se) || se.Code == broker.CodeUnavailable || se.Code == broker.CodeInternal {
				return o, err // the database, not the message: try the whole pass again later
			}
			o.failedIDs = append(o.failedIDs, st.id)
			o.failures = append(o.failures, se.Message)
			o.retries = append(o.retries, retryTime(se.Code, st.attempts, now))
			continue
		}
		o.ids = append(o.ids, st.id)
		o.msgRows = append(o.msgRows, d.rows...)
		o.done = append(o.done, relayed{e: e, size: size, wakes: d.wakeTargets()})
	}
	return o, nil
}

type relayInsertError struct {
	id       int64
	attempts int
	err      error
}

func (e *relayInsertError) Error() string { return e.err.Error() }

// prepare runs one staged message through the checks and routing of an HTTP send.
func (r *Relay) prepare(ctx context.Context, path string, m broker.Message) (*delivery, int, *broker.Entity, error) {
	e, err := r.s.Resolve(ctx, path)
	if err != nil {
		return nil, 0, nil, err
	}
	d, size, err := r.s.prepareSend(ctx, e, []broker.Message{m})
	return d, size, e, err
}

// retryTime is when a message refused with code is tried again: never for a refusal that the
// message itself earned (it would be refused again), with a doubling wait for one that may pass.
func retryTime(code broker.Code, attempts int, now time.Time) pgtype.Timestamptz {
	switch code {
	case broker.CodeBadRequest, broker.CodeNotFound, broker.CodeTooLarge:
		return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	wait := time.Second << min(attempts, 20)
	return timestamptz(now.Add(min(wait, relayMaxBackoff)))
}

// secondsToTTL turns a TimeToLive in seconds, as the wire and the outbox give it, into a
// duration; anything beyond what a duration holds never expires (as handlers read it).
func secondsToTTL(secs float64) time.Duration {
	if secs >= broker.Infinite.Seconds() {
		return broker.Infinite
	}
	return max(time.Duration(secs*float64(time.Second)), time.Nanosecond)
}

// decodeStagedProperties reads the user properties the SQL functions checked: a JSON object of
// strings, numbers and booleans. Numbers are typed as in a batch send: integers int64, others
// float64. They are sorted by name, the order jsonb keeps.
func decodeStagedProperties(raw []byte) (broker.UserProperties, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	props := make(broker.UserProperties, 0, len(obj))
	for name, v := range obj {
		switch x := v.(type) {
		case json.Number:
			if n, err := x.Int64(); err == nil {
				v = n
			} else if f, err := x.Float64(); err == nil {
				v = f
			} else {
				return nil, fmt.Errorf("user property %q: %w", name, err)
			}
		case string, bool:
		default:
			return nil, fmt.Errorf("user property %q has type %T", name, v)
		}
		props = append(props, broker.Property{Name: name, Value: v})
	}
	sort.Slice(props, func(i, j int) bool { return props[i].Name < props[j].Name })
	return props, nil
}
