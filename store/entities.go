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
)

// entityRecord is a row of the entities table, every column of it. Columns are matched to fields
// by name (pgx.RowToStructByName) and the select, insert and update lists are built from the db
// tags, so a settable property is one field here plus its line in entityRecordOf and entity:
// a statement that returns a column the struct lacks, or lacks one it has, fails instead of
// scanning values into the wrong fields. The tag options say which columns the statements do not
// write (see colGenerated, colInsertOnly).
type entityRecord struct {
	ID                                int64              `db:"id,generated"`
	Kind                              broker.Kind        `db:"kind,insertonly"`
	PathKey                           string             `db:"path_key,insertonly"`
	Path                              string             `db:"path,insertonly"`
	ParentID                          pgtype.Int8        `db:"parent_id,insertonly"`
	LockDuration                      pgtype.Interval    `db:"lock_duration"`
	MaxSizeMB                         int64              `db:"max_size_mb"`
	RequiresDuplicateDetection        bool               `db:"requires_duplicate_detection"`
	RequiresSession                   bool               `db:"requires_session"`
	DefaultTTL                        pgtype.Interval    `db:"default_ttl"`
	DeadLetteringOnExpiration         bool               `db:"dead_lettering_on_expiration"`
	DeadLetteringOnFilterExceptions   bool               `db:"dead_lettering_on_filter_exceptions"`
	DuplicateDetectionWindow          pgtype.Interval    `db:"duplicate_detection_window"`
	MaxDeliveryCount                  int32              `db:"max_delivery_count"`
	EnableBatchedOperations           bool               `db:"enable_batched_operations"`
	IsAnonymousAccessible             bool               `db:"is_anonymous_accessible"`
	Status                            string             `db:"status"`
	ForwardTo                         string             `db:"forward_to"`
	ForwardDeadLetteredTo             string             `db:"forward_dead_lettered_to"`
	ForwardToURL                      string             `db:"forward_to_url"`
	ForwardDeadLetteredToURL          string             `db:"forward_dead_lettered_to_url"`
	UserMetadata                      string             `db:"user_metadata"`
	SupportOrdering                   bool               `db:"support_ordering"`
	AutoDeleteOnIdle                  pgtype.Interval    `db:"auto_delete_on_idle"`
	EnablePartitioning                bool               `db:"enable_partitioning"`
	EnableExpress                     bool               `db:"enable_express"`
	MaxMessageSizeKB                  int64              `db:"max_message_size_kb"`
	FilteringMessagesBeforePublishing bool               `db:"filtering_messages_before_publishing"`
	EnableSubscriptionPartitioning    bool               `db:"enable_subscription_partitioning"`
	AuthorizationRules                []byte             `db:"authorization_rules"`
	CreatedAt                         time.Time          `db:"created_at,insertonly"`
	UpdatedAt                         time.Time          `db:"updated_at"`
	AccessedAt                        pgtype.Timestamptz `db:"accessed_at,insertonly"`
}

var (
	// entitySelect is the select list of an entity row.
	entitySelect = strings.Join(dbColumns[entityRecord](), ", ")
	// entityInsertColumns are written by insertEntitySQL; entityUpdateColumns by updateEntitySQL.
	entityInsertColumns = dbColumns[entityRecord](colGenerated)
	entityUpdateColumns = dbColumns[entityRecord](colGenerated, colInsertOnly)
)

// entityRecordOf returns the row that stores e.
func entityRecordOf(e *broker.Entity) (*entityRecord, error) {
	p := &e.Props
	rules := p.AuthorizationRules
	if rules == nil {
		rules = []broker.AuthorizationRule{}
	}
	rulesJSON, err := json.Marshal(rules)
	if err != nil {
		return nil, fmt.Errorf("encode authorization rules of %s: %w", e.Path, err)
	}
	return &entityRecord{
		ID:                                e.ID,
		Kind:                              e.Kind,
		PathKey:                           broker.Key(e.Path),
		Path:                              e.Path,
		ParentID:                          pgtype.Int8{Int64: e.ParentID, Valid: e.ParentID != 0},
		LockDuration:                      interval(p.LockDuration),
		MaxSizeMB:                         p.MaxSizeInMegabytes,
		RequiresDuplicateDetection:        p.RequiresDuplicateDetection,
		RequiresSession:                   p.RequiresSession,
		DefaultTTL:                        interval(p.DefaultMessageTimeToLive),
		DeadLetteringOnExpiration:         p.DeadLetteringOnMessageExpiration,
		DeadLetteringOnFilterExceptions:   p.DeadLetteringOnFilterEvaluation,
		DuplicateDetectionWindow:          interval(p.DuplicateDetectionHistoryTimeWindow),
		MaxDeliveryCount:                  p.MaxDeliveryCount,
		EnableBatchedOperations:           p.EnableBatchedOperations,
		IsAnonymousAccessible:             p.IsAnonymousAccessible,
		Status:                            string(p.Status),
		ForwardTo:                         p.ForwardTo,
		ForwardDeadLetteredTo:             p.ForwardDeadLetteredMessagesTo,
		ForwardToURL:                      p.ForwardToURL,
		ForwardDeadLetteredToURL:          p.ForwardDeadLetteredMessagesToURL,
		UserMetadata:                      p.UserMetadata,
		SupportOrdering:                   p.SupportOrdering,
		AutoDeleteOnIdle:                  interval(p.AutoDeleteOnIdle),
		EnablePartitioning:                p.EnablePartitioning,
		EnableExpress:                     p.EnableExpress,
		MaxMessageSizeKB:                  p.MaxMessageSizeInKilobytes,
		FilteringMessagesBeforePublishing: p.FilteringMessagesBeforePublishing,
		EnableSubscriptionPartitioning:    p.EnableSubscriptionPartitioning,
		AuthorizationRules:                rulesJSON,
		CreatedAt:                         e.CreatedAt,
		UpdatedAt:                         e.UpdatedAt,
		AccessedAt:                        timestamptz(e.AccessedAt),
	}, nil
}

// entity turns a row into an Entity (without counts).
func (r *entityRecord) entity() (*broker.Entity, error) {
	e := &broker.Entity{
		ID:       r.ID,
		Kind:     r.Kind,
		Path:     r.Path,
		Name:     r.Path,
		ParentID: r.ParentID.Int64,
		Props: broker.Properties{
			LockDuration:                        duration(r.LockDuration),
			MaxSizeInMegabytes:                  r.MaxSizeMB,
			RequiresDuplicateDetection:          r.RequiresDuplicateDetection,
			RequiresSession:                     r.RequiresSession,
			DefaultMessageTimeToLive:            duration(r.DefaultTTL),
			DeadLetteringOnMessageExpiration:    r.DeadLetteringOnExpiration,
			DeadLetteringOnFilterEvaluation:     r.DeadLetteringOnFilterExceptions,
			DuplicateDetectionHistoryTimeWindow: duration(r.DuplicateDetectionWindow),
			MaxDeliveryCount:                    r.MaxDeliveryCount,
			EnableBatchedOperations:             r.EnableBatchedOperations,
			IsAnonymousAccessible:               r.IsAnonymousAccessible,
			Status:                              broker.Status(r.Status),
			ForwardTo:                           r.ForwardTo,
			ForwardDeadLetteredMessagesTo:       r.ForwardDeadLetteredTo,
			ForwardToURL:                        r.ForwardToURL,
			ForwardDeadLetteredMessagesToURL:    r.ForwardDeadLetteredToURL,
			UserMetadata:                        r.UserMetadata,
			SupportOrdering:                     r.SupportOrdering,
			AutoDeleteOnIdle:                    duration(r.AutoDeleteOnIdle),
			EnablePartitioning:                  r.EnablePartitioning,
			EnableExpress:                       r.EnableExpress,
			MaxMessageSizeInKilobytes:           r.MaxMessageSizeKB,
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

// queryEntities runs sql, which selects entitySelect, and reads every row as an entity.
func queryEntities(ctx context.Context, q querier, sql string, args ...any) ([]*broker.Entity, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*broker.Entity, error) {
		rec, err := pgx.RowToStructByName[entityRecord](r)
		if err != nil {
			return nil, err
		}
		return rec.entity()
	})
}

// queryEntity runs sql, which returns at most one row of entitySelect, and reads it as an
// entity; pgx.ErrNoRows when there is none.
func queryEntity(ctx context.Context, q querier, sql string, args ...any) (*broker.Entity, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rec, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[entityRecord])
	if err != nil {
		return nil, err
	}
	return rec.entity()
}

// insertEntitySQL writes every column but the generated id; a path taken already returns no row.
// It and updateEntitySQL take pgx.StructArgs of an entityRecord: every @name in them comes from a
// tag, so none is missing, and the fields a statement does not write (id here) are ignored.
var insertEntitySQL = `INSERT INTO entities (` + strings.Join(entityInsertColumns, ", ") + `)
VALUES (@` + strings.Join(entityInsertColumns, ", @") + `)
ON CONFLICT (path_key) DO NOTHING
RETURNING ` + entitySelect

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
		var err error
		e, err = queryEntity(ctx, tx, insertEntitySQL, pgx.StructArgs(rec))
		if errors.Is(err, pgx.ErrNoRows) {
			return &broker.Error{Code: broker.CodeConflict, Message: fmt.Sprintf("The messaging entity '%s' already exists.", path)}
		}
		if err != nil || kind != broker.KindSubscription {
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

// updateEntitySQL writes the columns an update may change: the description and updated_at.
var updateEntitySQL = `UPDATE entities SET ` + func() string {
	set := make([]string, len(entityUpdateColumns))
	for i, c := range entityUpdateColumns {
		set[i] = c + " = @" + c
	}
	return strings.Join(set, ", ")
}() + `
WHERE id = @id
RETURNING ` + entitySelect

// UpdateEntity replaces an entity's description. See Store.
func (s *Postgres) UpdateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties) (*broker.Entity, error) {
	if err := p.Validate(kind); err != nil {
		return nil, err
	}
	var updated *broker.Entity
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		old, err := queryEntity(ctx, tx, `SELECT `+entitySelect+` FROM entities WHERE path_key = $1 FOR UPDATE`, broker.Key(path))
		if errors.Is(err, pgx.ErrNoRows) {
			return broker.NotFound("The messaging entity '%s' could not be found.", path)
		}
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
		updated, err = queryEntity(ctx, tx, updateEntitySQL, pgx.StructArgs(rec))
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
	e, err := queryEntity(ctx, s.pool, `SELECT `+entitySelect+` FROM entities WHERE path_key = $1`, broker.Key(path))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, broker.NotFound("The messaging entity '%s' could not be found.", broker.Clip(path))
	}
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
		rows, err := tx.Query(ctx, `DELETE FROM entities WHERE path_key = $1 OR parent_id IN
			(SELECT id FROM entities WHERE path_key = $1) RETURNING id`, broker.Key(path))
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return broker.NotFound("The messaging entity '%s' could not be found.", broker.Clip(path))
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
	list, err := queryEntities(ctx, s.pool, `SELECT `+entitySelect+` FROM entities
		WHERE kind = $1 AND ($2 = 0 OR parent_id = $2) ORDER BY path_key OFFSET $3 LIMIT $4`,
		kind, parentID, skip, top)
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, interpretError(err))
	}
	if err := s.fillCounts(ctx, list); err != nil {
		return nil, err
	}
	s.seenTouches(list)
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

// topicCountsSQL reads, for each topic, its subscriptions, the bytes they hold (each copy
// counted: the service stores a message once per topic, sbgate once per subscription it reaches)
// and the messages scheduled on it that have not come due: on the service those wait in the
// topic, and its runtime properties count them (the Go SDK's live tests check it); here they wait
// as copies in the subscriptions, counted once per scheduled message: the copies of one
// scheduled through $management share its number (EnqueuedSequenceNumber), those of one sent
// with a ScheduledEnqueueTime share its MessageId and enqueue time.
const topicCountsSQL = `
SELECT t.id, count(s.id),
	coalesce(sum(coalesce(c.bytes, 0) + coalesce(d.bytes, 0)), 0)::bigint,
	(SELECT count(DISTINCT (m.enqueued_seq, CASE WHEN m.enqueued_seq IS NULL THEN m.message_id END,
			CASE WHEN m.enqueued_seq IS NULL THEN m.enqueued_at END)) FROM entities x JOIN messages m ON m.entity_id = x.id
		WHERE x.parent_id = t.id AND m.lock_token IS NULL AND m.visible_at > $2 AND m.scheduled_at IS NOT NULL)
FROM unnest($1::bigint[]) AS t(id)
LEFT JOIN entities s ON s.parent_id = t.id
LEFT JOIN entity_counts c ON c.entity_id = s.id
LEFT JOIN LATERAL (SELECT sum(bytes) AS bytes FROM entity_count_deltas x WHERE x.entity_id = s.id) d ON true
GROUP BY t.id`

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
		c := broker.Counts{Active: main - scheduled - expired, DeadLetter: dead, Scheduled: scheduled, SizeInBytes: bytes}
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
		if e.Kind == broker.KindTopic {
			topics = append(topics, e.ID)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	subRows, err := s.pool.Query(ctx, topicCountsSQL, topics, s.now())
	if err != nil {
		return fmt.Errorf("count subscriptions: %w", interpretError(err))
	}
	defer subRows.Close()
	for subRows.Next() {
		var id, n, bytes, scheduled int64
		if err := subRows.Scan(&id, &n, &bytes, &scheduled); err != nil {
			return fmt.Errorf("count subscriptions: %w", err)
		}
		byID[id].SubscriptionCount = n
		byID[id].Counts.SizeInBytes, byID[id].Counts.Scheduled = bytes, scheduled
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
