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
	"github.com/sbgate/sbgate/store/internal/sqlcdb"
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
		for _, sweep := range []struct {
			what string
			run  func() (n int64, ids []int64, err error)
		}{
			{"expire messages", func() (int64, []int64, error) {
				r, err := queries.ExpireMessages(ctx, tx, sqlcdb.ExpireMessagesParams{Now: now, Chunk: expireChunk})
				return r.N, r.Entities, err
			}},
			{"dead-letter messages whose last lock lapsed", func() (int64, []int64, error) {
				r, err := queries.DeadLetterLapsed(ctx, tx, sqlcdb.DeadLetterLapsedParams{Now: now, Chunk: expireChunk})
				return r.N, r.Entities, err
			}},
		} {
			for {
				n, ids, err := sweep.run()
				if err != nil {
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
		rows, err := queries.DeadLetterForwarders(ctx, tx)
		if err != nil {
			return err
		}
		forwarding, err := entities(rows)
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
		return queries.CompactCounts(ctx, tx)
	}))
	errs = append(errs, s.led(ctx, lockPruneDedup, func(tx pgx.Tx) error {
		if err := queries.PruneDedup(ctx, tx, now); err != nil {
			return err
		}
		return queries.ForgetIdleSessions(ctx, tx, now)
	}))
	errs = append(errs, s.autoDelete(ctx, now))
	return errors.Join(errs...)
}

// led runs fn in a transaction if this gateway gets the task's advisory lock; another gateway
// holding it means the task is being done.
func (s *Postgres) led(ctx context.Context, key int64, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		got, err := queries.TryTaskLock(ctx, tx, key)
		if err != nil || !got {
			return err
		}
		return fn(tx)
	})
	return interpretError(err)
}

func (s *Postgres) autoDelete(ctx context.Context, now time.Time) error {
	var paths []string
	err := s.led(ctx, lockAutoDelete, func(tx pgx.Tx) error {
		var err error
		paths, err = queries.IdleEntities(ctx, tx, now)
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
	err := queries.RecordAccess(ctx, s.pool, sqlcdb.RecordAccessParams{Ids: ids, Now: now})
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
