package store

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/store/internal/sqlcdb"
)

// notifyChannel is the one channel every gateway listens on. Payloads are
// "m:<id>[/<session>],<id>[/<session>]..." for entities (and sessions of them, escaped) that
// received messages, "e:<path key>" for an entity whose description changed, and "h" from a
// gateway that starts listening, so the others notify it from then on.
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
	pending  map[wakeTarget]struct{}
	entities []string
	hello    bool
	kick     chan struct{}
	peers    bool // another gateway listens

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newListener(s *Postgres) *listener {
	return &listener{s: s, pending: make(map[wakeTarget]struct{}), kick: make(chan struct{}, 1)}
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

// announceMessages records that entities (or sessions of them) received messages; the other
// gateways are told soon.
func (l *listener) announceMessages(targets []wakeTarget) {
	l.mu.Lock()
	if !l.peers {
		l.mu.Unlock()
		return
	}
	for _, t := range targets {
		l.pending[t] = struct{}{}
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
	n, err := queries.CountListeners(ctx, l.s.pool, listenAppName)
	if err != nil {
		return // the listen loop reports database trouble
	}
	l.mu.Lock()
	l.peers = n > 1
	l.mu.Unlock()
}

func (l *listener) flush(ctx context.Context) {
	l.mu.Lock()
	targets, entities, hello := l.pending, l.entities, l.hello
	if len(targets) == 0 && len(entities) == 0 && !hello {
		l.mu.Unlock()
		return
	}
	l.pending, l.entities, l.hello = make(map[wakeTarget]struct{}), nil, false
	l.mu.Unlock()

	var payloads []string
	if hello {
		payloads = append(payloads, "h")
	}
	for _, key := range entities {
		payloads = append(payloads, "e:"+key)
	}
	var b strings.Builder
	for t := range targets {
		if b.Len() > maxPayload {
			payloads = append(payloads, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString("m:")
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(t.entity, 10))
		if t.session != "" {
			b.WriteByte('/')
			b.WriteString(url.QueryEscape(t.session))
		}
	}
	if b.Len() > 0 {
		payloads = append(payloads, b.String())
	}
	err := queries.Notify(ctx, l.s.pool, sqlcdb.NotifyParams{Channel: notifyChannel, Payloads: payloads})
	if err != nil && ctx.Err() == nil {
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
	// Whatever happened while we were not listening is unknown: look again. And tell the other
	// gateways that one more listens, so they notify from now on.
	l.s.hub.WakeAll()
	l.s.cache.clear()
	l.mu.Lock()
	l.hello = true
	l.mu.Unlock()
	l.poke()
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
	case payload == "h":
		// Another gateway listens: from now on this one notifies (its own "h" reaches it too,
		// which the periodic check would correct).
		l.mu.Lock()
		l.peers = true
		l.mu.Unlock()
	case strings.HasPrefix(payload, "m:"):
		for _, f := range strings.Split(payload[2:], ",") {
			id, session, _ := strings.Cut(f, "/")
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				continue
			}
			t := wakeTarget{entity: n}
			if session != "" {
				if t.session, err = url.QueryUnescape(session); err != nil {
					t.session = ""
				}
			}
			l.s.wake(t)
		}
	case strings.HasPrefix(payload, "e:"):
		l.s.cache.invalidate(payload[2:])
	}
}
