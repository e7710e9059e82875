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
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store/internal/sqlcdb"
)

// An entity is stored as a row of the entities table, read into sqlcdb.Entity: sqlc makes that
// type from the migrations and expands the `SELECT *` and `RETURNING *` of queries/entities.sql
// into every column, so no read can miss a column or put one into another's field. The insert
// and the update name their columns (sqlc checks each against the schema); a settable property
// is its line in entityRecordOf and entity, and in createEntityParams and updateEntityParams.
// entityrecord_internal_test.go fails until each of those is there.

// entityRecordOf returns the row that stores e.
func entityRecordOf(e *broker.Entity) (*sqlcdb.Entity, error) {
	p := &e.Props
	rules := p.AuthorizationRules
	if rules == nil {
		rules = []broker.AuthorizationRule{}
	}
	rulesJSON, err := json.Marshal(rules)
	if err != nil {
		return nil, fmt.Errorf("encode authorization rules of %s: %w", e.Path, err)
	}
	return &sqlcdb.Entity{
		ID:                                e.ID,
		Kind:                              int16(e.Kind),
		PathKey:                           broker.Key(e.Path),
		Path:                              e.Path,
		ParentID:                          pgtype.Int8{Int64: e.ParentID, Valid: e.ParentID != 0},
		LockDuration:                      interval(p.LockDuration),
		MaxSizeMb:                         p.MaxSizeInMegabytes,
		RequiresDuplicateDetection:        p.RequiresDuplicateDetection,
		RequiresSession:                   p.RequiresSession,
		DefaultTtl:                        interval(p.DefaultMessageTimeToLive),
		DeadLetteringOnExpiration:         p.DeadLetteringOnMessageExpiration,
		DeadLetteringOnFilterExceptions:   p.DeadLetteringOnFilterEvaluation,
		DuplicateDetectionWindow:          interval(p.DuplicateDetectionHistoryTimeWindow),
		MaxDeliveryCount:                  p.MaxDeliveryCount,
		EnableBatchedOperations:           p.EnableBatchedOperations,
		IsAnonymousAccessible:             p.IsAnonymousAccessible,
		Status:                            string(p.Status),
		ForwardTo:                         p.ForwardTo,
		ForwardDeadLetteredTo:             p.ForwardDeadLetteredMessagesTo,
		ForwardToUrl:                      p.ForwardToURL,
		ForwardDeadLetteredToUrl:          p.ForwardDeadLetteredMessagesToURL,
		UserMetadata:                      p.UserMetadata,
		SupportOrdering:                   p.SupportOrdering,
		AutoDeleteOnIdle:                  interval(p.AutoDeleteOnIdle),
		EnablePartitioning:                p.EnablePartitioning,
		EnableExpress:                     p.EnableExpress,
		MaxMessageSizeKb:                  p.MaxMessageSizeInKilobytes,
		FilteringMessagesBeforePublishing: p.FilteringMessagesBeforePublishing,
		EnableSubscriptionPartitioning:    p.EnableSubscriptionPartitioning,
		AuthorizationRules:                rulesJSON,
		CreatedAt:                         e.CreatedAt,
		UpdatedAt:                         e.UpdatedAt,
		AccessedAt:                        timestamptz(e.AccessedAt),
	}, nil
}

// entity turns a row into an Entity (without counts).
func entity(r *sqlcdb.Entity) (*broker.Entity, error) {
	e := &broker.Entity{
		ID:       r.ID,
		Kind:     broker.Kind(r.Kind),
		Path:     r.Path,
		Name:     r.Path,
		ParentID: r.ParentID.Int64,
		Props: broker.Properties{
			LockDuration:                        duration(r.LockDuration),
			MaxSizeInMegabytes:                  r.MaxSizeMb,
			RequiresDuplicateDetection:          r.RequiresDuplicateDetection,
			RequiresSession:                     r.RequiresSession,
			DefaultMessageTimeToLive:            duration(r.DefaultTtl),
			DeadLetteringOnMessageExpiration:    r.DeadLetteringOnExpiration,
			DeadLetteringOnFilterEvaluation:     r.DeadLetteringOnFilterExceptions,
			DuplicateDetectionHistoryTimeWindow: duration(r.DuplicateDetectionWindow),
			MaxDeliveryCount:                    r.MaxDeliveryCount,
			EnableBatchedOperations:             r.EnableBatchedOperations,
			IsAnonymousAccessible:               r.IsAnonymousAccessible,
			Status:                              broker.Status(r.Status),
			ForwardTo:                           r.ForwardTo,
			ForwardDeadLetteredMessagesTo:       r.ForwardDeadLetteredTo,
			ForwardToURL:                        r.ForwardToUrl,
			ForwardDeadLetteredMessagesToURL:    r.ForwardDeadLetteredToUrl,
			UserMetadata:                        r.UserMetadata,
			SupportOrdering:                     r.SupportOrdering,
			AutoDeleteOnIdle:                    duration(r.AutoDeleteOnIdle),
			EnablePartitioning:                  r.EnablePartitioning,
			EnableExpress:                       r.EnableExpress,
			MaxMessageSizeInKilobytes:           r.MaxMessageSizeKb,
			FilteringMessagesBeforePublishing:   r.FilteringMessagesBeforePublishing,
			EnableSubscriptionPartitioning:      r.EnableSubscriptionPartitioning,
		},
		CreatedAt:  r.CreatedAt.UTC(),
		UpdatedAt:  r.UpdatedAt.UTC(),
		AccessedAt: timeOrZero(r.AccessedAt),
	}
	if rules := r.AuthorizationRules; len(rules) > 0 && string(rules) != "[]" {
		if err := json.Unmarshal(rules, &e.Props.AuthorizationRules); err != nil {
			return nil, fmt.Errorf("decode authorization rules of %s: %w", e.Path, err)
		}
	}
	if _, name, ok := broker.SplitSubscriptionPath(e.Path); ok && e.Kind == broker.KindSubscription {
		e.Name = name
	}
	return e, nil
}

// entities turns rows into Entities (without counts).
func entities(rows []sqlcdb.Entity) ([]*broker.Entity, error) {
	list := make([]*broker.Entity, len(rows))
	for i := range rows {
		var err error
		if list[i], err = entity(&rows[i]); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// createEntityParams is what CreateEntity writes of r: every column but the generated id.
func createEntityParams(r *sqlcdb.Entity) sqlcdb.CreateEntityParams {
	return sqlcdb.CreateEntityParams{
		Kind:                              r.Kind,
		PathKey:                           r.PathKey,
		Path:                              r.Path,
		ParentID:                          r.ParentID,
		LockDuration:                      r.LockDuration,
		MaxSizeMb:                         r.MaxSizeMb,
		RequiresDuplicateDetection:        r.RequiresDuplicateDetection,
		RequiresSession:                   r.RequiresSession,
		DefaultTtl:                        r.DefaultTtl,
		DeadLetteringOnExpiration:         r.DeadLetteringOnExpiration,
		DeadLetteringOnFilterExceptions:   r.DeadLetteringOnFilterExceptions,
		DuplicateDetectionWindow:          r.DuplicateDetectionWindow,
		MaxDeliveryCount:                  r.MaxDeliveryCount,
		EnableBatchedOperations:           r.EnableBatchedOperations,
		IsAnonymousAccessible:             r.IsAnonymousAccessible,
		Status:                            r.Status,
		ForwardTo:                         r.ForwardTo,
		ForwardDeadLetteredTo:             r.ForwardDeadLetteredTo,
		UserMetadata:                      r.UserMetadata,
		SupportOrdering:                   r.SupportOrdering,
		AutoDeleteOnIdle:                  r.AutoDeleteOnIdle,
		EnablePartitioning:                r.EnablePartitioning,
		EnableExpress:                     r.EnableExpress,
		MaxMessageSizeKb:                  r.MaxMessageSizeKb,
		FilteringMessagesBeforePublishing: r.FilteringMessagesBeforePublishing,
		EnableSubscriptionPartitioning:    r.EnableSubscriptionPartitioning,
		AuthorizationRules:                r.AuthorizationRules,
		CreatedAt:                         r.CreatedAt,
		UpdatedAt:                         r.UpdatedAt,
		AccessedAt:                        r.AccessedAt,
		ForwardToUrl:                      r.ForwardToUrl,
		ForwardDeadLetteredToUrl:          r.ForwardDeadLetteredToUrl,
	}
}

// updateEntityParams is what UpdateEntity writes of r: the description and updated_at, in the
// row r.ID.
func updateEntityParams(r *sqlcdb.Entity) sqlcdb.UpdateEntityParams {
	return sqlcdb.UpdateEntityParams{
		ID:                                r.ID,
		LockDuration:                      r.LockDuration,
		MaxSizeMb:                         r.MaxSizeMb,
		RequiresDuplicateDetection:        r.RequiresDuplicateDetection,
		RequiresSession:                   r.RequiresSession,
		DefaultTtl:                        r.DefaultTtl,
		DeadLetteringOnExpiration:         r.DeadLetteringOnExpiration,
		DeadLetteringOnFilterExceptions:   r.DeadLetteringOnFilterExceptions,
		DuplicateDetectionWindow:          r.DuplicateDetectionWindow,
		MaxDeliveryCount:                  r.MaxDeliveryCount,
		EnableBatchedOperations:           r.EnableBatchedOperations,
		IsAnonymousAccessible:             r.IsAnonymousAccessible,
		Status:                            r.Status,
		ForwardTo:                         r.ForwardTo,
		ForwardDeadLetteredTo:             r.ForwardDeadLetteredTo,
		UserMetadata:                      r.UserMetadata,
		SupportOrdering:                   r.SupportOrdering,
		AutoDeleteOnIdle:                  r.AutoDeleteOnIdle,
		EnablePartitioning:                r.EnablePartitioning,
		EnableExpress:                     r.EnableExpress,
		MaxMessageSizeKb:                  r.MaxMessageSizeKb,
		FilteringMessagesBeforePublishing: r.FilteringMessagesBeforePublishing,
		EnableSubscriptionPartitioning:    r.EnableSubscriptionPartitioning,
		AuthorizationRules:                r.AuthorizationRules,
		UpdatedAt:                         r.UpdatedAt,
		ForwardToUrl:                      r.ForwardToUrl,
		ForwardDeadLetteredToUrl:          r.ForwardDeadLetteredToUrl,
	}
}

// CreateEntity creates a queue, topic or subscription. A subscription gets the $Default rule
// (every message). See Store.
func (s *Postgres) CreateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties) (*broker.Entity, error) {
	return s.createEntity(ctx, kind, path, p, nil)
}

// CreateSubscription creates a subscription whose first rule is rule ($Default, every message,
// when rule is nil). Errors: as CreateEntity, and ErrBadRequest for an invalid rule.
func (s *Postgres) CreateSubscription(ctx context.Context, path string, p broker.Properties, rule *broker.Rule) (*broker.Entity, error) {
	return s.createEntity(ctx, broker.KindSubscription, path, p, rule)
}

func (s *Postgres) createEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties, rule *broker.Rule) (*broker.Entity, error) {
	parentID, err := s.checkNewEntity(ctx, kind, path, &p)
	if err != nil {
		return nil, err
	}
	if err := s.checkForwarding(ctx, path, &p); err != nil {
		return nil, err
	}
	var first broker.Rule
	if kind == broker.KindSubscription {
		first = broker.TrueRule(broker.DefaultRuleName)
		if rule != nil {
			first = *rule
		}
		if _, err := broker.CompileRule(first); err != nil {
			return nil, err
		}
	}
	now := s.now()
	e := &broker.Entity{Kind: kind, Path: path, ParentID: parentID, Props: p, CreatedAt: now, UpdatedAt: now}
	// The service sets a new subscription's AccessedAt at creation; a new queue's or topic's
	// stays zero until first used.
	if kind == broker.KindSubscription {
		e.AccessedAt = now
	}
	rec, err := entityRecordOf(e)
	if err != nil {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := queries.CreateEntity(ctx, tx, createEntityParams(rec))
		if errors.Is(err, pgx.ErrNoRows) {
			return &broker.Error{Code: broker.CodeConflict, Message: fmt.Sprintf("The messaging entity '%s' already exists.", path)}
		}
		if err != nil {
			return err
		}
		if e, err = entity(&row); err != nil || kind != broker.KindSubscription {
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
func (s *Postgres) checkNewEntity(ctx context.Context, kind broker.Kind, path string, p *broker.Properties) (int64, error) {
	if err := p.Validate(kind); err != nil {
		return 0, err
	}
	switch kind {
	case broker.KindQueue, broker.KindTopic:
		return 0, broker.ValidateEntityPath(path)
	case broker.KindSubscription:
		topic, name, ok := broker.SplitSubscriptionPath(path)
		if !ok {
			return 0, broker.BadRequest("'%s' is not a subscription path.", broker.Clip(path))
		}
		if err := broker.ValidateSubscriptionName(name); err != nil {
			return 0, err
		}
		t, err := s.lookup(ctx, topic)
		if err != nil {
			return 0, err
		}
		if t.Kind != broker.KindTopic {
			return 0, broker.NotFound("The messaging entity '%s' is not a topic.", topic)
		}
		return t.ID, nil
	}
	return 0, broker.BadRequest("unknown entity kind %d", kind)
}

// UpdateEntity replaces an entity's description. See Store.
func (s *Postgres) UpdateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties) (*broker.Entity, error) {
	if err := p.Validate(kind); err != nil {
		return nil, err
	}
	var updated *broker.Entity
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := queries.EntityForUpdate(ctx, tx, broker.Key(path))
		if errors.Is(err, pgx.ErrNoRows) {
			return broker.NotFound("The messaging entity '%s' could not be found.", path)
		}
		if err != nil {
			return err
		}
		old, err := entity(&row)
		if err != nil {
			return err
		}
		if old.Kind != kind {
			return broker.BadRequest("The messaging entity '%s' is a %s, not a %s.", path, strings.ToLower(old.Kind.String()), strings.ToLower(kind.String()))
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
		next := *old
		next.Props, next.UpdatedAt = p, s.now()
		rec, err := entityRecordOf(&next)
		if err != nil {
			return err
		}
		if row, err = queries.UpdateEntity(ctx, tx, updateEntityParams(rec)); err != nil {
			return err
		}
		updated, err = entity(&row)
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
func checkImmutable(old *broker.Entity, p *broker.Properties) error {
	kind := old.Kind.String()
	switch {
	case old.Props.RequiresSession != p.RequiresSession:
		return broker.BadRequest("SubCode=40000. The value for the RequiresSession property of an existing %s cannot be changed.", kind)
	case old.Props.RequiresDuplicateDetection != p.RequiresDuplicateDetection:
		return broker.BadRequest("SubCode=40000. The value for the requires duplicate detection property of an existing %s cannot be changed.", kind)
	case old.Props.EnablePartitioning != p.EnablePartitioning:
		return broker.BadRequest("SubCode=40000. Partitioning cannot be changed for %s. ", kind)
	}
	return nil
}

// lookup reads the entity at path without counts.
func (s *Postgres) lookup(ctx context.Context, path string) (*broker.Entity, error) {
	row, err := queries.Entity(ctx, s.pool, broker.Key(path))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, broker.NotFound("The messaging entity '%s' could not be found.", broker.Clip(path))
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", broker.Clip(path), interpretError(err))
	}
	e, err := entity(&row)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", broker.Clip(path), interpretError(err))
	}
	return e, nil
}

// GetEntity returns an entity with its counts. See Store.
func (s *Postgres) GetEntity(ctx context.Context, path string) (*broker.Entity, error) {
	e, err := s.lookup(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := s.fillCounts(ctx, []*broker.Entity{e}); err != nil {
		return nil, err
	}
	s.seenTouches([]*broker.Entity{e})
	return e, nil
}

// DeleteEntity deletes an entity and everything in it. See Store.
func (s *Postgres) DeleteEntity(ctx context.Context, path string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ids, err := queries.DeleteEntityTree(ctx, tx, broker.Key(path))
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return broker.NotFound("The messaging entity '%s' could not be found.", broker.Clip(path))
		}
		for _, del := range []func(context.Context, sqlcdb.DBTX, []int64) error{
			queries.DeleteEntitiesMessages,
			queries.DeleteEntitiesCounts,
			queries.DeleteEntitiesCountDeltas,
			queries.DeleteEntitiesDedup,
			queries.DeleteEntitiesSessions,
		} {
			if err := del(ctx, tx, ids); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", broker.Clip(path), interpretError(err))
	}
	s.entityChanged(ctx, path)
	return nil
}

// ListEntities lists entities of a kind. See Store.
func (s *Postgres) ListEntities(ctx context.Context, kind broker.Kind, parent string, skip, top int) ([]*broker.Entity, error) {
	var parentID int64
	if kind == broker.KindSubscription {
		t, err := s.lookup(ctx, parent)
		if err != nil {
			return nil, err
		}
		if t.Kind != broker.KindTopic {
			return nil, broker.NotFound("The messaging entity '%s' is not a topic.", parent)
		}
		parentID = t.ID
	}
	rows, err := queries.ListEntities(ctx, s.pool, sqlcdb.ListEntitiesParams{
		Kind: int16(kind), ParentID: parentID, Skip: int64(skip), Top: int64(top)})
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, interpretError(err))
	}
	list, err := entities(rows)
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, interpretError(err))
	}
	if err := s.fillCounts(ctx, list); err != nil {
		return nil, err
	}
	s.seenTouches(list)
	return list, nil
}

// fillCounts sets the counts of the entities of list (EntityCounts), and those of the topics
// among them (TopicCounts, TopicRuleCounts).
func (s *Postgres) fillCounts(ctx context.Context, list []*broker.Entity) error {
	if len(list) == 0 {
		return nil
	}
	byID := make(map[int64]*broker.Entity, len(list))
	ids := make([]int64, 0, len(list))
	for _, e := range list {
		byID[e.ID] = e
		ids = append(ids, e.ID)
	}
	counts, err := queries.EntityCounts(ctx, s.pool, sqlcdb.EntityCountsParams{Ids: ids, Now: s.now()})
	if err != nil {
		return fmt.Errorf("count messages: %w", interpretError(err))
	}
	for _, r := range counts {
		e := byID[r.ID]
		if e == nil {
			continue
		}
		// An expired message the sweep has not reached is already gone for a client, or already
		// dead-lettered where the entity says so.
		c := broker.Counts{Active: r.Main - r.Scheduled - r.Expired, DeadLetter: r.Dead,
			Scheduled: r.Scheduled, SizeInBytes: r.Bytes}
		if e.Props.DeadLetteringOnMessageExpiration {
			c.DeadLetter += r.Expired
		} else {
			c.SizeInBytes -= r.ExpiredBytes
		}
		e.Counts = c
	}
	var topics []int64
	for _, e := range list {
		if e.Kind == broker.KindTopic {
			topics = append(topics, e.ID)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	subs, err := queries.TopicCounts(ctx, s.pool, sqlcdb.TopicCountsParams{Ids: topics, Now: s.now()})
	if err != nil {
		return fmt.Errorf("count subscriptions: %w", interpretError(err))
	}
	for _, r := range subs {
		byID[r.ID].SubscriptionCount = r.Subscriptions
		byID[r.ID].Counts.SizeInBytes, byID[r.ID].Counts.Scheduled = r.Bytes, r.Scheduled
	}
	rules, err := queries.TopicRuleCounts(ctx, s.pool, topics)
	if err != nil {
		return fmt.Errorf("count rules: %w", interpretError(err))
	}
	for _, r := range rules {
		byID[r.ParentID.Int64].SQLFilterCount = r.SqlFilters
		byID[r.ParentID.Int64].CorrelationFilterCount = r.CorrelationFilters
	}
	return nil
}

// entityChanged drops path from this gateway's cache and tells the other gateways to do the same.
func (s *Postgres) entityChanged(ctx context.Context, path string) {
	s.cache.invalidate(broker.Key(path))
	s.listener.announceEntityChange(broker.Key(path))
}

// Resolve returns the entity at path from the cache, reading it when absent or stale. See Store.
func (s *Postgres) Resolve(ctx context.Context, path string) (*broker.Entity, error) {
	key := broker.Key(path)
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
	e       *broker.Entity
	expires time.Time
}

type cachedRoutes struct {
	routes  []subRoute
	expires time.Time
}

func newEntityCache(ttl time.Duration, now func() time.Time) *entityCache {
	return &entityCache{ttl: ttl, now: now, m: make(map[string]cachedEntity), routes: make(map[string]cachedRoutes)}
}

func (c *entityCache) get(key string) *broker.Entity {
	c.mu.Lock()
	defer c.mu.Unlock()
	ce, ok := c.m[key]
	if !ok || c.now().After(ce.expires) {
		return nil
	}
	return ce.e
}

func (c *entityCache) put(key string, e *broker.Entity) {
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
	if topic, _, ok := broker.SplitSubscriptionPath(key); ok {
		delete(c.routes, topic)
	}
	prefix := key + strings.ToLower(broker.SubscriptionsSegment)
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
