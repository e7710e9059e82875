package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// entityColumns are read by scanEntity, in its order.
const entityColumns = `id, kind, path, parent_id, lock_duration, max_size_mb, requires_duplicate_detection,
	requires_session, default_ttl, dead_lettering_on_expiration, dead_lettering_on_filter_exceptions,
	duplicate_detection_window, max_delivery_count, enable_batched_operations, is_anonymous_accessible,
	status, forward_to, forward_dead_lettered_to, user_metadata, support_ordering, auto_delete_on_idle,
	enable_partitioning, enable_express, max_message_size_kb, filtering_messages_before_publishing,
	enable_subscription_partitioning, authorization_rules, created_at, updated_at, accessed_at`

func scanEntity(row pgx.Row) (*Entity, error) {
	var (
		e                                Entity
		parent                           pgtype.Int8
		lock, ttl, dupWindow, autoDelete pgtype.Interval
		status                           string
		rules                            []byte
		accessed                         pgtype.Timestamptz
		p                                = &e.Props
	)
	err := row.Scan(&e.ID, &e.Kind, &e.Path, &parent, &lock, &p.MaxSizeInMegabytes, &p.RequiresDuplicateDetection,
		&p.RequiresSession, &ttl, &p.DeadLetteringOnMessageExpiration, &p.DeadLetteringOnFilterEvaluation,
		&dupWindow, &p.MaxDeliveryCount, &p.EnableBatchedOperations, &p.IsAnonymousAccessible,
		&status, &p.ForwardTo, &p.ForwardDeadLetteredMessagesTo, &p.UserMetadata, &p.SupportOrdering, &autoDelete,
		&p.EnablePartitioning, &p.EnableExpress, &p.MaxMessageSizeInKilobytes, &p.FilteringMessagesBeforePublishing,
		&p.EnableSubscriptionPartitioning, &rules, &e.CreatedAt, &e.UpdatedAt, &accessed)
	if err != nil {
		return nil, err
	}
	e.ParentID = parent.Int64
	p.LockDuration, p.DefaultMessageTimeToLive = duration(lock), duration(ttl)
	p.DuplicateDetectionHistoryTimeWindow, p.AutoDeleteOnIdle = duration(dupWindow), duration(autoDelete)
	p.Status = Status(status)
	if len(rules) > 0 && string(rules) != "[]" {
		if err := json.Unmarshal(rules, &p.AuthorizationRules); err != nil {
			return nil, fmt.Errorf("decode authorization rules of %s: %w", e.Path, err)
		}
	}
	e.AccessedAt = accessed.Time
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	e.AccessedAt = e.AccessedAt.UTC()
	e.Name = e.Path
	if _, name, ok := SplitSubscriptionPath(e.Path); ok && e.Kind == KindSubscription {
		e.Name = name
	}
	return &e, nil
}

// propertyArgs returns the settable columns of p in the order of the insert and update statements.
func propertyArgs(p *Properties) ([]any, error) {
	rules := p.AuthorizationRules
	if rules == nil {
		rules = []AuthorizationRule{}
	}
	rulesJSON, err := json.Marshal(rules)
	if err != nil {
		return nil, err
	}
	return []any{interval(p.LockDuration), p.MaxSizeInMegabytes, p.RequiresDuplicateDetection, p.RequiresSession,
		interval(p.DefaultMessageTimeToLive), p.DeadLetteringOnMessageExpiration, p.DeadLetteringOnFilterEvaluation,
		interval(p.DuplicateDetectionHistoryTimeWindow), p.MaxDeliveryCount, p.EnableBatchedOperations,
		p.IsAnonymousAccessible, string(p.Status), p.ForwardTo, p.ForwardDeadLetteredMessagesTo, p.UserMetadata,
		p.SupportOrdering, interval(p.AutoDeleteOnIdle), p.EnablePartitioning, p.EnableExpress,
		p.MaxMessageSizeInKilobytes, p.FilteringMessagesBeforePublishing, p.EnableSubscriptionPartitioning,
		rulesJSON}, nil
}

const insertEntitySQL = `
INSERT INTO entities (kind, path_key, path, parent_id, lock_duration, max_size_mb, requires_duplicate_detection,
	requires_session, default_ttl, dead_lettering_on_expiration, dead_lettering_on_filter_exceptions,
	duplicate_detection_window, max_delivery_count, enable_batched_operations, is_anonymous_accessible,
	status, forward_to, forward_dead_lettered_to, user_metadata, support_ordering, auto_delete_on_idle,
	enable_partitioning, enable_express, max_message_size_kb, filtering_messages_before_publishing,
	enable_subscription_partitioning, authorization_rules, created_at, updated_at, accessed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
	$23, $24, $25, $26, $27, $28, $28, $29)
ON CONFLICT (path_key) DO NOTHING
RETURNING ` + entityColumns

// CreateEntity creates a queue, topic or subscription. A subscription gets the $Default rule
// (every message). See Store.
func (s *Postgres) CreateEntity(ctx context.Context, kind Kind, path string, p Properties) (*Entity, error) {
	return s.createEntity(ctx, kind, path, p, nil)
}

// CreateSubscription creates a subscription whose first rule is rule ($Default, every message,
// when rule is nil). Errors: as CreateEntity, and ErrBadRequest for an invalid rule.
func (s *Postgres) CreateSubscription(ctx context.Context, path string, p Properties, rule *Rule) (*Entity, error) {
	return s.createEntity(ctx, KindSubscription, path, p, rule)
}

func (s *Postgres) createEntity(ctx context.Context, kind Kind, path string, p Properties, rule *Rule) (*Entity, error) {
	parentID, err := s.checkNewEntity(ctx, kind, path, &p)
	if err != nil {
		return nil, err
	}
	if err := s.checkForwarding(ctx, path, &p); err != nil {
		return nil, err
	}
	var first Rule
	if kind == KindSubscription {
		first = TrueRule(DefaultRuleName)
		if rule != nil {
			first = *rule
		}
		if _, err := compileRule(first); err != nil {
			return nil, err
		}
	}
	props, err := propertyArgs(&p)
	if err != nil {
		return nil, err
	}
	var parent pgtype.Int8
	if parentID != 0 {
		parent = pgtype.Int8{Int64: parentID, Valid: true}
	}
	now := s.now()
	args := append([]any{kind, Key(path), path, parent}, props...)
	// The service sets a new subscription's AccessedAt at creation; a new queue's or topic's
	// stays zero until first used.
	var accessed pgtype.Timestamptz
	if kind == KindSubscription {
		accessed = pgtype.Timestamptz{Time: now, Valid: true}
	}
	args = append(args, now, accessed)
	var e *Entity
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		e, err = scanEntity(tx.QueryRow(ctx, insertEntitySQL, args...))
		if errors.Is(err, pgx.ErrNoRows) {
			return &Error{Code: CodeConflict, Message: fmt.Sprintf("The messaging entity '%s' already exists.", path)}
		}
		if err != nil || kind != KindSubscription {
			return err
		}
		first.CreatedAt = now
		return insertRule(ctx, tx, e.ID, first)
	})
	if err != nil {
		return nil, fmt.Errorf("create %s %s: %w", kind, path, interpretError(err))
	}
	s.entityChanged(ctx, e.Path)
	return e, nil
}

// checkNewEntity validates the name and properties of an entity about to be created and returns
// the id of its parent topic for a subscription.
func (s *Postgres) checkNewEntity(ctx context.Context, kind Kind, path string, p *Properties) (int64, error) {
	if err := p.Validate(kind); err != nil {
		return 0, err
	}
	switch kind {
	case KindQueue, KindTopic:
		return 0, ValidateEntityPath(path)
	case KindSubscription:
		topic, name, ok := SplitSubscriptionPath(path)
		if !ok {
			return 0, BadRequest("'%s' is not a subscription path.", Clip(path))
		}
		if err := ValidateSubscriptionName(name); err != nil {
			return 0, err
		}
		t, err := s.lookup(ctx, topic)
		if err != nil {
			return 0, err
		}
		if t.Kind != KindTopic {
			return 0, notFound("The messaging entity '%s' is not a topic.", topic)
		}
		return t.ID, nil
	}
	return 0, BadRequest("unknown entity kind %d", kind)
}

const updateEntitySQL = `
UPDATE entities SET lock_duration = $2, max_size_mb = $3, requires_duplicate_detection = $4, requires_session = $5,
	default_ttl = $6, dead_lettering_on_expiration = $7, dead_lettering_on_filter_exceptions = $8,
	duplicate_detection_window = $9, max_delivery_count = $10, enable_batched_operations = $11,
	is_anonymous_accessible = $12, status = $13, forward_to = $14, forward_dead_lettered_to = $15,
	user_metadata = $16, support_ordering = $17, auto_delete_on_idle = $18, enable_partitioning = $19,
	enable_express = $20, max_message_size_kb = $21, filtering_messages_before_publishing = $22,
	enable_subscription_partitioning = $23, authorization_rules = $24, updated_at = $25
WHERE id = $1
RETURNING ` + entityColumns

// UpdateEntity replaces an entity's description. See Store.
func (s *Postgres) UpdateEntity(ctx context.Context, kind Kind, path string, p Properties) (*Entity, error) {
	if err := p.Validate(kind); err != nil {
		return nil, err
	}
	var updated *Entity
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		old, err := scanEntity(tx.QueryRow(ctx, `SELECT `+entityColumns+` FROM entities WHERE path_key = $1 FOR UPDATE`, Key(path)))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("The messaging entity '%s' could not be found.", path)
		}
		if err != nil {
			return err
		}
		if old.Kind != kind {
			return BadRequest("The messaging entity '%s' is a %s, not a %s.", path, strings.ToLower(old.Kind.String()), strings.ToLower(kind.String()))
		}
		if err := checkImmutable(old, &p); err != nil {
			return err
		}
		if p.EnablePartitioning && p.MaxSizeInMegabytes == old.Props.TotalMaxSizeInMegabytes() {
			// A description read back and sent again carries the partitioned total: keep the
			// size per partition.
			p.MaxSizeInMegabytes = old.Props.MaxSizeInMegabytes
		}
		if err := s.checkForwarding(ctx, old.Path, &p); err != nil {
			return err
		}
		props, err := propertyArgs(&p)
		if err != nil {
			return err
		}
		args := append([]any{old.ID}, props...)
		args = append(args, s.now())
		updated, err = scanEntity(tx.QueryRow(ctx, updateEntitySQL, args...))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update %s: %w", path, interpretError(err))
	}
	s.entityChanged(ctx, updated.Path)
	return updated, nil
}

// checkImmutable refuses changes to the properties Service Bus fixes at creation, in the
// service's words (the Service Bus resource manager exceptions document; the SDKs' own tests match
// on them): "The value for the RequiresSession property of an existing Queue cannot be changed",
// "Partitioning cannot be changed for Topic. ".
func checkImmutable(old *Entity, p *Properties) error {
	kind := old.Kind.String()
	switch {
	case old.Props.RequiresSession != p.RequiresSession:
		return BadRequest("SubCode=40000. The value for the RequiresSession property of an existing %s cannot be changed.", kind)
	case old.Props.RequiresDuplicateDetection != p.RequiresDuplicateDetection:
		return BadRequest("SubCode=40000. The value for the requires duplicate detection property of an existing %s cannot be changed.", kind)
	case old.Props.EnablePartitioning != p.EnablePartitioning:
		return BadRequest("SubCode=40000. Partitioning cannot be changed for %s. ", kind)
	}
	return nil
}

// lookup reads the entity at path without counts.
func (s *Postgres) lookup(ctx context.Context, path string) (*Entity, error) {
	e, err := scanEntity(s.pool.QueryRow(ctx, `SELECT `+entityColumns+` FROM entities WHERE path_key = $1`, Key(path)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("The messaging entity '%s' could not be found.", Clip(path))
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", Clip(path), interpretError(err))
	}
	return e, nil
}

// GetEntity returns an entity with its counts. See Store.
func (s *Postgres) GetEntity(ctx context.Context, path string) (*Entity, error) {
	e, err := s.lookup(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := s.fillCounts(ctx, []*Entity{e}); err != nil {
		return nil, err
	}
	return e, nil
}

// DeleteEntity deletes an entity and everything in it. See Store.
func (s *Postgres) DeleteEntity(ctx context.Context, path string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM entities WHERE path_key = $1 OR parent_id IN
			(SELECT id FROM entities WHERE path_key = $1) RETURNING id`, Key(path))
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return notFound("The messaging entity '%s' could not be found.", Clip(path))
		}
		for _, sql := range []string{
			`DELETE FROM messages WHERE entity_id = ANY($1)`,
			`DELETE FROM entity_counts WHERE entity_id = ANY($1)`,
			`DELETE FROM entity_count_deltas WHERE entity_id = ANY($1)`,
			`DELETE FROM dedup WHERE entity_id = ANY($1)`,
			`DELETE FROM sessions WHERE entity_id = ANY($1)`,
		} {
			if _, err := tx.Exec(ctx, sql, ids); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", Clip(path), interpretError(err))
	}
	s.entityChanged(ctx, path)
	return nil
}

// ListEntities lists entities of a kind. See Store.
func (s *Postgres) ListEntities(ctx context.Context, kind Kind, parent string, skip, top int) ([]*Entity, error) {
	var parentID int64
	if kind == KindSubscription {
		t, err := s.lookup(ctx, parent)
		if err != nil {
			return nil, err
		}
		if t.Kind != KindTopic {
			return nil, notFound("The messaging entity '%s' is not a topic.", parent)
		}
		parentID = t.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entityColumns+` FROM entities
		WHERE kind = $1 AND ($2 = 0 OR parent_id = $2) ORDER BY path_key OFFSET $3 LIMIT $4`,
		kind, parentID, skip, top)
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, interpretError(err))
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Entity, error) { return scanEntity(r) })
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, interpretError(err))
	}
	if err := s.fillCounts(ctx, list); err != nil {
		return nil, err
	}
	return list, nil
}

// countsSQL reads the counts of several entities: the kept totals plus the deltas not yet folded
// in, less the messages whose time has not come (scheduled) and those expired but not yet swept,
// each found through a small partial index. Nothing here scans an entity's messages.
const countsSQL = `
SELECT e.id,
	coalesce(c.main, 0) + coalesce(d.main, 0),
	coalesce(c.dead, 0) + coalesce(d.dead, 0),
	coalesce(c.bytes, 0) + coalesce(d.bytes, 0),
	sch.n, exp.n, exp.bytes
FROM unnest($1::bigint[]) AS e(id)
LEFT JOIN entity_counts c ON c.entity_id = e.id
LEFT JOIN LATERAL (SELECT sum(main) AS main, sum(dead) AS dead, sum(bytes) AS bytes
	FROM entity_count_deltas x WHERE x.entity_id = e.id) d ON true
CROSS JOIN LATERAL (SELECT count(*) AS n FROM messages m
	WHERE m.entity_id = e.id AND m.lock_token IS NULL AND m.visible_at > $2) sch
CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(sum(m.size), 0) AS bytes FROM messages m
	WHERE m.entity_id = e.id AND m.expires_at <= $2 AND m.state <> ` + sqlDeadLetter + `
		AND NOT (m.lock_token IS NOT NULL AND m.visible_at > $2)) exp`

func (s *Postgres) fillCounts(ctx context.Context, list []*Entity) error {
	if len(list) == 0 {
		return nil
	}
	byID := make(map[int64]*Entity, len(list))
	ids := make([]int64, 0, len(list))
	for _, e := range list {
		byID[e.ID] = e
		ids = append(ids, e.ID)
	}
	rows, err := s.pool.Query(ctx, countsSQL, ids, s.now())
	if err != nil {
		return fmt.Errorf("count messages: %w", interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id, main, dead, bytes, scheduled, expired, expiredBytes int64
		if err := rows.Scan(&id, &main, &dead, &bytes, &scheduled, &expired, &expiredBytes); err != nil {
			return fmt.Errorf("count messages: %w", err)
		}
		e := byID[id]
		if e == nil {
			continue
		}
		// An expired message the sweep has not reached is already gone for a client, or already
		// dead-lettered where the entity says so.
		c := Counts{Active: main - scheduled - expired, DeadLetter: dead, Scheduled: scheduled, SizeInBytes: bytes}
		if e.Props.DeadLetteringOnMessageExpiration {
			c.DeadLetter += expired
		} else {
			c.SizeInBytes -= expiredBytes
		}
		e.Counts = c
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count messages: %w", interpretError(err))
	}
	var topics []int64
	for _, e := range list {
		if e.Kind == KindTopic {
			topics = append(topics, e.ID)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	subRows, err := s.pool.Query(ctx, `SELECT parent_id, count(*) FROM entities WHERE parent_id = ANY($1) GROUP BY parent_id`, topics)
	if err != nil {
		return fmt.Errorf("count subscriptions: %w", interpretError(err))
	}
	defer subRows.Close()
	for subRows.Next() {
		var id, n int64
		if err := subRows.Scan(&id, &n); err != nil {
			return fmt.Errorf("count subscriptions: %w", err)
		}
		byID[id].SubscriptionCount = n
	}
	if err := subRows.Err(); err != nil {
		return interpretError(err)
	}
	ruleRows, err := s.pool.Query(ctx, `SELECT e.parent_id,
		count(*) FILTER (WHERE r.filter->>'kind' <> 'CorrelationFilter'),
		count(*) FILTER (WHERE r.filter->>'kind' = 'CorrelationFilter')
		FROM rules r JOIN entities e ON e.id = r.subscription_id WHERE e.parent_id = ANY($1) GROUP BY e.parent_id`, topics)
	if err != nil {
		return fmt.Errorf("count rules: %w", interpretError(err))
	}
	defer ruleRows.Close()
	for ruleRows.Next() {
		var id, sql, corr int64
		if err := ruleRows.Scan(&id, &sql, &corr); err != nil {
			return fmt.Errorf("count rules: %w", err)
		}
		byID[id].SQLFilterCount, byID[id].CorrelationFilterCount = sql, corr
	}
	return interpretError(ruleRows.Err())
}

// entityChanged drops path from this gateway's cache and tells the other gateways to do the same.
func (s *Postgres) entityChanged(ctx context.Context, path string) {
	s.cache.invalidate(Key(path))
	s.listener.announceEntityChange(Key(path))
}

// Resolve returns the entity at path from the cache, reading it when absent or stale. See Store.
func (s *Postgres) Resolve(ctx context.Context, path string) (*Entity, error) {
	key := Key(path)
	if e := s.cache.get(key); e != nil {
		return e, nil
	}
	e, err := s.lookup(ctx, path)
	if err != nil {
		return nil, err
	}
	s.cache.put(key, e)
	return e, nil
}

// entityCache keeps resolved entities, and each topic's subscriptions with their compiled rules,
// for a short time, so the hot paths (send, receive, settle) do not read them on every request.
// Changes made through this gateway invalidate it at once; changes made through another gateway
// arrive by NOTIFY, with the TTL as a backstop.
type entityCache struct {
	ttl    time.Duration
	now    func() time.Time
	mu     sync.Mutex
	m      map[string]cachedEntity
	routes map[string]cachedRoutes // by topic key
}

type cachedEntity struct {
	e       *Entity
	expires time.Time
}

type cachedRoutes struct {
	routes  []subRoute
	expires time.Time
}

func newEntityCache(ttl time.Duration, now func() time.Time) *entityCache {
	return &entityCache{ttl: ttl, now: now, m: make(map[string]cachedEntity), routes: make(map[string]cachedRoutes)}
}

func (c *entityCache) get(key string) *Entity {
	c.mu.Lock()
	defer c.mu.Unlock()
	ce, ok := c.m[key]
	if !ok || c.now().After(ce.expires) {
		return nil
	}
	return ce.e
}

func (c *entityCache) put(key string, e *Entity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = cachedEntity{e: e, expires: c.now().Add(c.ttl)}
}

func (c *entityCache) getRoutes(topicKey string) ([]subRoute, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr, ok := c.routes[topicKey]
	if !ok || c.now().After(cr.expires) {
		return nil, false
	}
	return cr.routes, true
}

func (c *entityCache) putRoutes(topicKey string, routes []subRoute) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.routes[topicKey] = cachedRoutes{routes: routes, expires: c.now().Add(c.ttl)}
}

// invalidate forgets the entity at key: a topic with its subscriptions and routes, a
// subscription with its topic's routes (its rules or description changed).
func (c *entityCache) invalidate(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
	delete(c.routes, key)
	if topic, _, ok := SplitSubscriptionPath(key); ok {
		delete(c.routes, topic)
	}
	prefix := key + strings.ToLower(subscriptionsSegment)
	for k := range c.m {
		if strings.HasPrefix(k, prefix) {
			delete(c.m, k)
		}
	}
}

func (c *entityCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	clear(c.routes)
}
