package store

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// hub lets receivers of this gateway wait for messages on an entity. A send wakes them directly;
// sends through other gateways arrive as NOTIFY (see listener). Each entity with waiters has one
// channel that is closed on the next wake-up, so waking is O(1) and never blocks the sender.
type hub struct {
	mu sync.Mutex
	m  map[int64]*hubEntry
}

type hubEntry struct {
	ch      chan struct{}
	waiters int
}

func newHub() *hub { return &hub{m: make(map[int64]*hubEntry)} }

// wait returns a channel closed at the next wake-up of entity id, and a release function the
// waiter must call when it stops waiting. Call it before looking for a message, so that a message
// sent between the look and the wait is not missed.
func (h *hub) wait(id int64) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[id]
	if e == nil {
		e = &hubEntry{ch: make(chan struct{})}
		h.m[id] = e
	}
	e.waiters++
	return e.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		e.waiters--
		if e.waiters == 0 && h.m[id] == e {
			delete(h.m, id)
		}
	}
}

// wake wakes every receiver waiting on entity id.
func (h *hub) wake(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[id]; e != nil {
		close(e.ch)
		delete(h.m, id)
	}
}

// wakeAll wakes every waiting receiver, after notifications may have been missed.
func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, e := range h.m {
		close(e.ch)
		delete(h.m, id)
	}
}

// notifyChannel is the one channel every gateway listens on. Payloads are "m:<id>,<id>..." for
// entities that received messages and "e:<path key>" for an entity whose description changed.
const (
	notifyChannel = "sbgate"
	listenAppName = "sbgate-listen"
	maxPayload    = 7000 // PostgreSQL's limit is 8000 bytes
)

// listener holds one connection that LISTENs for the other gateways' sends and entity changes,
// and sends this gateway's, debounced: while one NOTIFY is being sent, the entities of later
// sends collect and go out together in the next. NOTIFY is sent only when another gateway
// listens, which a periodic check of pg_stat_activity tells; a lone gateway pays nothing.
type listener struct {
	s *Postgres

	mu       sync.Mutex
	pending  map[int64]struct{}
	entities []string
	kick     chan struct{}
	peers    bool // another gateway listens

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newListener(s *Postgres) *listener {
	return &listener{s: s, pending: make(map[int64]struct{}), kick: make(chan struct{}, 1)}
}

func (l *listener) start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.wg.Add(2)
	go func() { defer l.wg.Done(); l.listenLoop(ctx) }()
	go func() { defer l.wg.Done(); l.notifyLoop(ctx) }()
}

func (l *listener) stop() {
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		l.wg.Wait()
	}
}

// announceMessages records that entities received messages; the other gateways are told soon.
func (l *listener) announceMessages(ids []int64) {
	l.mu.Lock()
	if !l.peers {
		l.mu.Unlock()
		return
	}
	for _, id := range ids {
		l.pending[id] = struct{}{}
	}
	l.mu.Unlock()
	l.poke()
}

// announceEntityChange tells the other gateways to drop key from their entity caches.
func (l *listener) announceEntityChange(key string) {
	l.mu.Lock()
	l.entities = append(l.entities, key)
	l.mu.Unlock()
	l.poke()
}

func (l *listener) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *listener) notifyLoop(ctx context.Context) {
	peerCheck := time.NewTicker(2 * time.Second)
	defer peerCheck.Stop()
	l.checkPeers(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-peerCheck.C:
			l.checkPeers(ctx)
		case <-l.kick:
			l.flush(ctx)
		}
	}
}

func (l *listener) checkPeers(ctx context.Context) {
	var n int
	err := l.s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, listenAppName).Scan(&n)
	if err != nil {
		return // the listen loop reports database trouble
	}
	l.mu.Lock()
	l.peers = n > 1
	l.mu.Unlock()
}

func (l *listener) flush(ctx context.Context) {
	l.mu.Lock()
	ids, entities := l.pending, l.entities
	if len(ids) == 0 && len(entities) == 0 {
		l.mu.Unlock()
		return
	}
	l.pending, l.entities = make(map[int64]struct{}), nil
	l.mu.Unlock()

	var payloads []string
	for _, key := range entities {
		payloads = append(payloads, "e:"+key)
	}
	var b strings.Builder
	for id := range ids {
		if b.Len() > maxPayload {
			payloads = append(payloads, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString("m:")
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	if b.Len() > 0 {
		payloads = append(payloads, b.String())
	}
	if _, err := l.s.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) p`, notifyChannel, payloads); err != nil && ctx.Err() == nil {
		l.s.log.Warn("notify other gateways", "err", err)
	}
}

func (l *listener) listenLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		l.s.log.Warn("listen for other gateways", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *listener) listenOnce(ctx context.Context) error {
	cfg := l.s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenAppName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	// Whatever happened while we were not listening is unknown: look again.
	l.s.hub.wakeAll()
	l.s.cache.clear()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.dispatch(n.Payload)
	}
}

func (l *listener) dispatch(payload string) {
	switch {
	case strings.HasPrefix(payload, "m:"):
		for _, f := range strings.Split(payload[2:], ",") {
			if id, err := strconv.ParseInt(f, 10, 64); err == nil {
				l.s.hub.wake(id)
			}
		}
	case strings.HasPrefix(payload, "e:"):
		l.s.cache.invalidate(payload[2:])
	}
}
