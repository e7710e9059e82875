package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

// Advisory lock keys of the background tasks. Every gateway runs the tasks; the lock makes one
// do each at a time, and a gateway that dies releases it with its connection.
const (
	lockCompactCounts int64 = 0x5b6a7e01 + iota
	lockExpire
	lockPruneDedup
	lockAutoDelete
)

// expireChunk bounds the expired messages one sweep statement handles per entity.
const expireChunk = 1000

// expireSQL removes expired messages that no valid lock holds, or dead-letters them
// (TTLExpiredException) where the entity says so, counting either. It visits entities one by
// one through the messages_expiry index, so its cost follows the number of expired messages,
// not the size of the table.
const expireSQL = `
WITH candidates AS (
	SELECT m.entity_id, m.seq, e.dead_lettering_on_expiration AS dl
	FROM entities e CROSS JOIN LATERAL (
		SELECT x.entity_id, x.seq FROM messages x
		WHERE x.entity_id = e.id AND x.expires_at <= $1 AND x.state <> ` + sqlDeadLetter + `
			AND (x.lock_token IS NULL OR x.visible_at <= $1)
		ORDER BY x.expires_at LIMIT $2 FOR UPDATE OF x SKIP LOCKED
	) m
	WHERE e.kind <> ` + sqlTopic + `
), dead_lettered AS (
	UPDATE messages m SET state = ` + sqlDeadLetter + `, lock_token = NULL, visible_at = NULL,
		delivery_count = m.delivery_count + CASE WHEN m.lock_token IS NOT NULL THEN 1 ELSE 0 END,
		dead_letter_reason = 'TTLExpiredException',
		dead_letter_description = 'The message expired and was dead lettered.'
	FROM candidates c WHERE c.dl AND m.entity_id = c.entity_id AND m.seq = c.seq
	RETURNING m.entity_id
), removed AS (
	DELETE FROM messages m USING candidates c WHERE NOT c.dl AND m.entity_id = c.entity_id AND m.seq = c.seq
	RETURNING m.entity_id, m.size
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM dead_lettered GROUP BY entity_id
	UNION ALL
	SELECT entity_id, -count(*), 0, -sum(size) FROM removed GROUP BY entity_id
)
SELECT (SELECT count(*) FROM dead_lettered) + (SELECT count(*) FROM removed),
	ARRAY(SELECT DISTINCT entity_id FROM dead_lettered)`

// deadLetterLapsedSQL moves to the dead-letter subqueue the messages whose lock ran out on the
// last delivery their entity allows (MaxDeliveryCountExceeded): on the service such a message is
// in the dead-letter subqueue (and counted there) once its lock lapses, not at the next receive,
// which may never come. Each entity is visited through messages_due, so the cost follows the
// locks that lapsed, not the size of the table.
const deadLetterLapsedSQL = `
WITH lapsed AS (
	SELECT x.entity_id, x.seq, e.max_delivery_count AS max_delivery FROM entities e CROSS JOIN LATERAL (
		SELECT x.entity_id, x.seq FROM messages x
		WHERE x.entity_id = e.id AND x.state IN (` + sqlActive + `, ` + sqlDeferred + `) AND x.visible_at <= $1
			AND x.lock_token IS NOT NULL AND x.delivery_count + 1 >= e.max_delivery_count
		LIMIT $2 FOR UPDATE OF x SKIP LOCKED
	) x
	WHERE e.kind <> ` + sqlTopic + `
), moved AS (
	UPDATE messages m SET state = ` + sqlDeadLetter + `, lock_token = NULL, visible_at = NULL,
		delivery_count = m.delivery_count + 1, dead_letter_reason = '` + broker.ReasonMaxDeliveryCount + `',
		dead_letter_description = 'Message could not be consumed after ' || l.max_delivery || ' delivery attempts.'
	FROM lapsed l WHERE m.entity_id = l.entity_id AND m.seq = l.seq
	RETURNING m.entity_id
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM moved GROUP BY entity_id
)
SELECT count(*), ARRAY(SELECT DISTINCT entity_id FROM moved) FROM moved`

// compactCountsSQL folds the count deltas into entity_counts in one statement: a reader sees the
// deltas either still in their table or already in the totals, never both or neither.
const compactCountsSQL = `
WITH folded AS (
	DELETE FROM entity_count_deltas RETURNING entity_id, main, dead, bytes
), summed AS (
	SELECT entity_id, sum(main) AS main, sum(dead) AS dead, sum(bytes) AS bytes FROM folded GROUP BY entity_id
)
INSERT INTO entity_counts (entity_id, main, dead, bytes)
SELECT s.entity_id, s.main, s.dead, s.bytes FROM summed s WHERE EXISTS (SELECT 1 FROM entities e WHERE e.id = s.entity_id)
ON CONFLICT (entity_id) DO UPDATE SET main = entity_counts.main + excluded.main,
	dead = entity_counts.dead + excluded.dead, bytes = entity_counts.bytes + excluded.bytes`

// idleEntitiesSQL finds entities idle for their AutoDeleteOnIdle: no send, receive, browse or
// update since, and no scheduled message waiting (in them or, for a topic, its subscriptions).
const idleEntitiesSQL = `
SELECT e.path FROM entities e
WHERE e.auto_delete_on_idle IS NOT NULL
	AND greatest(e.created_at, e.updated_at, coalesce(e.accessed_at, e.created_at)) + e.auto_delete_on_idle <= $1
	AND NOT EXISTS (
		SELECT 1 FROM messages m
		WHERE m.entity_id IN (SELECT e.id UNION ALL SELECT s.id FROM entities s WHERE s.parent_id = e.id)
			AND m.lock_token IS NULL AND m.visible_at > $1)
ORDER BY e.id LIMIT 100`

// deadLetterForwardersSQL reads the entities whose dead letters Maintain moves on.
var deadLetterForwardersSQL = `SELECT ` + entitySelect + ` FROM entities WHERE forward_dead_lettered_to <> ''`

// Maintain runs every background task once: it records when entities were last used, folds
// count deltas, removes or dead-letters expired messages, prunes duplicate-detection history and
// deletes entities idle past their AutoDeleteOnIdle. Start runs it every MaintenanceInterval;
// tests call it after moving the clock. Safe with several gateways: each task is led by one
// gateway at a time through an advisory lock, and each is idempotent.
func (s *Postgres) Maintain(ctx context.Context) error {
	now := s.now()
	s.hub.ForgetCursors(time.Now().Add(-engine.CursorKeep))
	errs := []error{s.flushTouches(ctx, now)}
	var woken []wakeTarget
	errs = append(errs, s.led(ctx, lockExpire, func(tx pgx.Tx) error {
		for _, sweep := range []struct{ what, sql string }{
			{"expire messages", expireSQL},
			{"dead-letter messages whose last lock lapsed", deadLetterLapsedSQL},
		} {
			for {
				var n int64
				var ids []int64
				if err := tx.QueryRow(ctx, sweep.sql, now, expireChunk).Scan(&n, &ids); err != nil {
					return fmt.Errorf("%s: %w", sweep.what, err)
				}
				for _, id := range ids {
					woken = append(woken, wakeTarget{entity: id}) // dead-letter receivers
				}
				if n == 0 {
					break
				}
			}
		}
		// Dead letters of entities that forward them, expired ones just now included, move on in
		// the same transaction.
		forwarding, err := queryEntities(ctx, tx, deadLetterForwardersSQL)
		if err != nil {
			return err
		}
		for _, e := range forwarding {
			ids, err := s.transferDeadLetters(ctx, tx, e)
			if err != nil {
				return fmt.Errorf("forward dead letters of %s: %w", e.Path, err)
			}
			woken = append(woken, ids...)
		}
		return nil
	}))
	s.announce(woken...)
	errs = append(errs, s.led(ctx, lockCompactCounts, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, compactCountsSQL)
		return err
	}))
	errs = append(errs, s.led(ctx, lockPruneDedup, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM dedup WHERE expires_at <= $1`, now); err != nil {
			return err
		}
		// Sessions with no messages, no state and no lock are forgotten (they come back with
		// their next message).
		_, err := tx.Exec(ctx, `DELETE FROM sessions WHERE available_at IS NULL AND state IS NULL
			AND (locked_until IS NULL OR locked_until <= $1)`, now)
		return err
	}))
	errs = append(errs, s.autoDelete(ctx, now))
	return errors.Join(errs...)
}

// led runs fn in a transaction if this gateway gets the task's advisory lock; another gateway
// holding it means the task is being done.
func (s *Postgres) led(ctx context.Context, key int64, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, key).Scan(&got); err != nil || !got {
			return err
		}
		return fn(tx)
	})
	return interpretError(err)
}

func (s *Postgres) autoDelete(ctx context.Context, now time.Time) error {
	var paths []string
	err := s.led(ctx, lockAutoDelete, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, idleEntitiesSQL, now)
		if err != nil {
			return err
		}
		paths, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range paths {
		if err := s.DeleteEntity(ctx, p); err != nil && !errors.Is(err, broker.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		s.log.Info("deleted idle entity", "entity", p)
	}
	return errors.Join(errs...)
}

// touches records which entities were used since the last flush, and when last, for AccessedAt
// and AutoDeleteOnIdle, without a write on every request. Reads of an entity's description show
// what this gateway has not flushed yet (seenTouches), so a client that sends and then asks sees
// its access at once.
type touches struct {
	mu  sync.Mutex
	ids map[int64]time.Time
}

// touch notes that e (and, for a subscription, its topic) was used now.
func (s *Postgres) touch(e *broker.Entity) {
	now := s.now()
	s.touched.mu.Lock()
	defer s.touched.mu.Unlock()
	if s.touched.ids == nil {
		s.touched.ids = make(map[int64]time.Time)
	}
	s.touched.ids[e.ID] = now
	if e.ParentID != 0 {
		s.touched.ids[e.ParentID] = now
	}
}

// seenTouches moves the AccessedAt of each entity of list to the last use this gateway noted
// and has not flushed, when that is later.
func (s *Postgres) seenTouches(list []*broker.Entity) {
	s.touched.mu.Lock()
	defer s.touched.mu.Unlock()
	for _, e := range list {
		if t, ok := s.touched.ids[e.ID]; ok && t.After(e.AccessedAt) {
			e.AccessedAt = t.UTC()
		}
	}
}

func (s *Postgres) flushTouches(ctx context.Context, now time.Time) error {
	// The noted uses stay in the map until the UPDATE has committed: a description read while
	// the flush runs would otherwise find the access neither here nor in the table.
	s.touched.mu.Lock()
	flushed := make(map[int64]time.Time, len(s.touched.ids))
	ids := make([]int64, 0, len(s.touched.ids))
	for id, t := range s.touched.ids {
		ids = append(ids, id)
		flushed[id] = t
	}
	s.touched.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE entities SET accessed_at = $2 WHERE id = ANY($1) AND (accessed_at IS NULL OR accessed_at < $2)`, ids, now)
	if err != nil {
		return fmt.Errorf("record entity access: %w", interpretError(err))
	}
	s.touched.mu.Lock()
	for id, t := range flushed {
		if s.touched.ids[id].Equal(t) { // not used again since the snapshot
			delete(s.touched.ids, id)
		}
	}
	s.touched.mu.Unlock()
	return nil
}

// maintainLoop runs Maintain every interval until ctx ends.
func (s *Postgres) maintainLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Maintain(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("background maintenance", "err", err)
			}
		}
	}
}

// sizeCache remembers each entity's size for a second, so enforcing MaxSizeInMegabytes costs a
// count read per entity per second rather than one per send. An entity can overshoot its quota
// by what arrives within that second, as on the service, where the quota is checked
// asynchronously too.
type sizeCache struct {
	mu sync.Mutex
	m  map[int64]cachedSize
}

type cachedSize struct {
	bytes int64
	read  time.Time
}

const sizeCacheTTL = time.Second

// checkQuota refuses a send of size bytes to an entity that is full.
func (s *Postgres) checkQuota(ctx context.Context, e *broker.Entity, size int64) error {
	s.sizes.mu.Lock()
	c, ok := s.sizes.m[e.ID]
	s.sizes.mu.Unlock()
	if !ok || time.Since(c.read) > sizeCacheTTL {
		probe := *e
		if err := s.fillCounts(ctx, []*broker.Entity{&probe}); err != nil {
			return err
		}
		c = cachedSize{bytes: probe.Counts.SizeInBytes, read: time.Now()}
		s.sizes.mu.Lock()
		if s.sizes.m == nil {
			s.sizes.m = make(map[int64]cachedSize)
		}
		s.sizes.m[e.ID] = c
		s.sizes.mu.Unlock()
	}
	limit := e.Props.TotalMaxSizeInMegabytes() << 20
	if c.bytes+size > limit {
		return &broker.Error{Code: broker.CodeQuotaExceeded, Message: fmt.Sprintf(
			"SubCode=40300. The maximum entity size has been reached or exceeded for %s: '%s'. Size of entity in bytes: %d, Max entity size in bytes: %d.",
			e.Kind, e.Path, c.bytes, limit)}
	}
	return nil
}

// grew adds a committed send to the cached size of its entity.
func (s *Postgres) grew(id, size int64) {
	s.sizes.mu.Lock()
	defer s.sizes.mu.Unlock()
	if c, ok := s.sizes.m[id]; ok {
		c.bytes += size
		s.sizes.m[id] = c
	}
}
