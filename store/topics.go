package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sqlfilter"
)

// subRoute is a subscription of a topic with its compiled rules.
type subRoute struct {
	sub   *broker.Entity
	rules []broker.CompiledRule
}

// routesOf returns the subscriptions of topic with their compiled rules, from the cache when
// fresh. Rule matching then runs in memory: a send does not query the database per
// subscription, let alone per message.
func (s *Postgres) routesOf(ctx context.Context, topic *broker.Entity) ([]subRoute, error) {
	key := broker.Key(topic.Path)
	if r, ok := s.cache.getRoutes(key); ok {
		return r, nil
	}
	rows, err := queries.TopicSubscriptions(ctx, s.pool, topic.ID)
	if err != nil {
		return nil, fmt.Errorf("read subscriptions of %s: %w", topic.Path, interpretError(err))
	}
	subs, err := entities(rows)
	if err != nil {
		return nil, fmt.Errorf("read subscriptions of %s: %w", topic.Path, interpretError(err))
	}
	ruleRows, err := queries.TopicRules(ctx, s.pool, topic.ID)
	if err != nil {
		return nil, fmt.Errorf("read rules of %s: %w", topic.Path, interpretError(err))
	}
	bySub := make(map[int64][]broker.CompiledRule)
	for _, row := range ruleRows {
		r, err := decodeRule(row.Name, row.Filter, row.Action, row.CreatedAt)
		if err == nil {
			var c broker.CompiledRule
			if c, err = broker.CompileRule(r); err == nil {
				bySub[row.SubscriptionID] = append(bySub[row.SubscriptionID], c)
				continue
			}
		}
		s.log.Error("skipping a rule that no longer compiles", "topic", topic.Path, "rule", row.Name, "err", err)
	}
	routes := make([]subRoute, len(subs))
	for i, sub := range subs {
		routes[i] = subRoute{sub: sub, rules: bySub[sub.ID]}
	}
	s.cache.putRoutes(key, routes)
	return routes, nil
}

// delivery builds the rows one send writes: the message in its entity, or its copies in a
// topic's matching subscriptions, each following auto-forwarding, all written in one statement.
type delivery struct {
	s        *Postgres
	ctx      context.Context
	now      time.Time
	rows     []messageRow
	msgIndex int
	// dedup is the entity whose duplicate history the message being delivered goes into, and
	// until when; zero when the entity the client sent to does not detect duplicates.
	dedupEntity int64
	dedupUntil  time.Time
	// encoded holds the user properties Send already encoded, by message; copies changed by an
	// action are not in it and are encoded when placed.
	encoded map[*broker.Message][]byte
	// starts holds, for each message prepareSend delivered, the index of its first row.
	starts []int
	// numberedIn, when not 0, is the entity the messages were sent to, which asked for a number
	// of their own even where they have no row there (prepareSendNumbered).
	numberedIn int64
}

func (s *Postgres) newDelivery(ctx context.Context, now time.Time) *delivery {
	return &delivery{s: s, ctx: ctx, now: now}
}

// wakeTargets are the receivers the delivery's rows concern: each entity, and in a session
// entity each session (its other sessions' receivers need not look).
func (d *delivery) wakeTargets() []wakeTarget {
	var targets []wakeTarget
	for _, r := range d.rows {
		t := wakeTarget{entity: r.EntityID}
		if r.sessioned {
			t.session = r.SessionID.String
		}
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	return targets
}

// begin starts the delivery of one sent message to e: its rows get their own number, and e's
// duplicate history when e keeps one.
func (d *delivery) begin(e *broker.Entity) {
	d.msgIndex = int(d.s.msgCounter.Add(1))
	d.dedupEntity, d.dedupUntil = 0, time.Time{}
	if e.Props.RequiresDuplicateDetection {
		d.dedupEntity, d.dedupUntil = e.ID, d.now.Add(e.Props.DuplicateDetectionHistoryTimeWindow)
	}
}

// deliver places m (prepared for the entity the client sent to) in target, hops forwards into
// the chain. sent is the entity the message was last addressed to.
func (d *delivery) deliver(target *broker.Entity, m *broker.Message, sent *broker.Entity, hops int) error {
	if target.Kind == broker.KindTopic {
		return d.fanOut(target, m, hops)
	}
	if fwd := target.Props.ForwardTo; fwd != "" && m.State != broker.StateDeadLetter {
		if hops >= broker.MaxTransferHops {
			dl := *m
			dl.State, dl.DeadLetterReason, dl.DeadLetterDescription = broker.StateDeadLetter, broker.ReasonMaxTransferHopCount, broker.DescriptionMaxTransferHops
			return d.place(target, &dl, hops)
		}
		next, err := d.s.Resolve(d.ctx, fwd)
		if err != nil {
			// The target was deleted after the forwarding was set up: keep the message here
			// rather than lose it.
			if errors.Is(err, broker.ErrNotFound) {
				return d.place(target, m, hops)
			}
			return err
		}
		return d.deliver(next, m, sent, hops+1)
	}
	return d.place(target, m, hops)
}

// forwardDeadLetter delivers a dead letter of from to next, where from forwards its dead
// letters. One next refuses (a session entity refuses a message without a SessionId) leaves
// no row anywhere and reports false: it stays in from's dead-letter subqueue, as when the
// target is gone. Failing instead would undo the transaction that dead-lettered it — a
// settlement, a claim, the maintenance run of every entity — again at every attempt.
func (d *delivery) forwardDeadLetter(next *broker.Entity, m *broker.Message, from *broker.Entity) (bool, error) {
	n := len(d.rows)
	err := d.deliver(next, m, from, 1)
	if broker.ErrorCode(err) == broker.CodeBadRequest {
		d.rows = d.rows[:n]
		return false, nil
	}
	return err == nil, err
}

// place adds m as a row of entity e, dead-lettered ones going on to e's
// ForwardDeadLetteredMessagesTo when it has one. hops is how many times m was auto-forwarded to
// get here: a forwarded message carries the sequence number of its original send as its
// EnqueuedSequenceNumber, drawn with its row when it never had a row where it was sent.
func (d *delivery) place(e *broker.Entity, m *broker.Message, hops int) error {
	if e.Props.RequiresSession && !m.InSession() && m.State != broker.StateDeadLetter {
		// A copy no session could ever receive: refuse the send, as for a session queue.
		return broker.BadRequest("The SessionId was not set on a message, and it cannot be sent to the entity '%s', which requires sessions.", e.Path)
	}
	if m.State == broker.StateDeadLetter && e.Props.ForwardDeadLetteredMessagesTo != "" && m.DeadLetterSource == "" {
		if next, err := d.s.Resolve(d.ctx, e.Props.ForwardDeadLetteredMessagesTo); err == nil {
			fwd := *m
			fwd.State, fwd.DeadLetterSource = broker.StateActive, e.Path
			if ok, err := d.forwardDeadLetter(next, &fwd, e); ok || err != nil {
				return err
			}
			// Refused there: it stays in e's dead-letter subqueue.
		}
	}
	props, ok := d.encoded[m]
	d.rows = append(d.rows, messageRow{})
	r := &d.rows[len(d.rows)-1]
	if err := r.set(e.ID, m, props, !ok); err != nil {
		d.rows = d.rows[:len(d.rows)-1]
		return err
	}
	r.msgIndex = d.msgIndex
	if m.EnqueuedSequenceNumber == 0 && (hops > 0 || (d.numberedIn != 0 && e.ID != d.numberedIn)) {
		r.originOf = int64(d.msgIndex)
	}
	r.sessioned = e.Props.RequiresSession && m.InSession() && m.State != broker.StateDeadLetter
	if !d.dedupUntil.IsZero() {
		r.dedupEntity, r.dedupUntil = d.dedupEntity, timestamptz(d.dedupUntil)
	}
	return nil
}

// fanOut copies m into every subscription of topic whose rules match: one copy per matching
// rule, with the rule's action applied to that copy only. A filter or action that cannot be
// evaluated dead-letters one copy in the subscription when it says so
// (DeadLetteringOnFilterEvaluationExceptions), else drops it.
//
// The rules of one subscription share one sqlfilter.DefaultBudget per message: rules whose
// work grows with the message (LIKE on long properties) cannot stall the send, and when a
// subscription's rules run out, that subscription's copy is handled as an evaluation error
// while the other subscriptions are evaluated with budgets of their own.
// maxEvaluationDescription bounds the DeadLetterErrorDescription of a copy dead-lettered by a
// failing filter: the evaluation error quotes the expression, which may be long.
const maxEvaluationDescription = 300

func (d *delivery) fanOut(topic *broker.Entity, m *broker.Message, hops int) error {
	routes, err := d.s.routesOf(d.ctx, topic)
	if err != nil {
		return err
	}
	budget := sqlfilter.NewBudget(sqlfilter.DefaultBudget)
	for _, rt := range routes {
		sub := rt.sub
		if sub.Props.Status == broker.StatusDisabled {
			continue
		}
		budget.Reset()
		var evalErr error
		for _, rule := range rt.rules {
			ok, err := rule.Match(broker.FilterView(m), budget)
			if errors.Is(err, sqlfilter.ErrBudgetExceeded) {
				// The remaining rules would find the budget spent too; say which rule ran out.
				evalErr = fmt.Errorf("rule %s: %w", rule.Name, err)
				break
			}
			if err != nil {
				evalErr = fmt.Errorf("rule %s: %w", rule.Name, err)
				continue
			}
			if !ok {
				continue
			}
			c := copyFor(sub, m, d.now)
			if rule.Action != nil {
				if err := rule.Action.ApplyWithin(broker.FilterView(c), budget); err != nil {
					evalErr = fmt.Errorf("rule %s action: %w", rule.Name, err)
					if errors.Is(err, sqlfilter.ErrBudgetExceeded) {
						break
					}
					continue
				}
				if err := d.checkCopy(c); err != nil {
					// The action grew the copy past what may be kept or received: it is
					// dead-lettered as it was before the action, and the send goes on.
					c = copyFor(sub, m, d.now)
					c.State, c.DeadLetterReason = broker.StateDeadLetter, broker.ReasonActionResult
					c.DeadLetterDescription = broker.ClipTo(fmt.Sprintf("The action of rule %s: %s", rule.Name, broker.ErrorMessage(err)), maxEvaluationDescription)
				}
			}
			if err := d.deliver(sub, c, topic, hops); err != nil {
				return err
			}
		}
		if evalErr != nil && sub.Props.DeadLetteringOnFilterEvaluation {
			c := copyFor(sub, m, d.now)
			c.State, c.DeadLetterReason = broker.StateDeadLetter, broker.ReasonFilterEvaluation
			c.DeadLetterDescription = broker.ClipTo(evalErr.Error(), maxEvaluationDescription)
			if err := d.place(sub, c, hops); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCopy checks a copy a rule action changed: the store's property limits, then the door's
// (Options.CheckCopy).
func (d *delivery) checkCopy(c *broker.Message) error {
	if _, err := broker.EncodeUserProperties(c.UserProperties); err != nil {
		return err
	}
	if check := d.s.opts.CheckCopy; check != nil {
		return check(c)
	}
	return nil
}

// copyFor is a subscription's own copy of m: its properties can be changed by an action without
// touching the other copies, and its TTL is also capped by the subscription's default.
func copyFor(sub *broker.Entity, m *broker.Message, now time.Time) *broker.Message {
	c := *m
	c.UserProperties = slices.Clone(m.UserProperties)
	if c.TimeToLive > sub.Props.DefaultMessageTimeToLive {
		c.TimeToLive = sub.Props.DefaultMessageTimeToLive
		c.ExpiresAt = addClamped(c.EnqueuedTime, c.TimeToLive)
	}
	return &c
}

// checkForwarding validates ForwardTo and ForwardDeadLetteredMessagesTo of the entity at path:
// each target must exist and be a queue or topic, and following the forwarding from it must not
// lead back to path (a loop). Targets are stored as entity paths.
func (s *Postgres) checkForwarding(ctx context.Context, path string, p *broker.Properties) error {
	for _, f := range []struct {
		name   string
		target *string
	}{{"ForwardTo", &p.ForwardTo}, {"ForwardDeadLetteredMessagesTo", &p.ForwardDeadLetteredMessagesTo}} {
		t := *f.target
		if _, rest, ok := strings.Cut(t, "://"); ok { // sb://host/path: the entity is the path
			_, t, _ = strings.Cut(rest, "/")
		}
		t = strings.Trim(t, "/")
		*f.target = t
		if t == "" {
			continue
		}
		target, err := s.lookup(ctx, t)
		if errors.Is(err, broker.ErrNotFound) {
			return broker.BadRequest("SubCode=40400. The auto forwarding destination entity '%s' of %s doesn't exist.", broker.Clip(t), f.name)
		}
		if err != nil {
			return err
		}
		if target.Kind == broker.KindSubscription {
			return broker.BadRequest("The %s destination '%s' is a subscription; forward to a queue or topic.", f.name, target.Path)
		}
		*f.target = target.Path
		if loop, err := s.forwardsTo(ctx, target, broker.Key(path), 0); err != nil {
			return err
		} else if loop {
			return broker.BadRequest("SubCode=40000. %s '%s' would make messages go round in a loop back to '%s'.", f.name, target.Path, path)
		}
	}
	return nil
}

// forwardsTo reports whether messages arriving at e can come back to the entity with key back:
// e is it, or forwards (directly or through a topic's subscriptions) to something that does.
func (s *Postgres) forwardsTo(ctx context.Context, e *broker.Entity, back string, depth int) (bool, error) {
	if broker.Key(e.Path) == back {
		return true, nil
	}
	if depth > 2*broker.MaxTransferHops+2 {
		return false, nil // longer chains dead-letter anyway
	}
	var next []string
	switch e.Kind {
	case broker.KindTopic:
		if strings.HasPrefix(back, broker.Key(e.Path)+strings.ToLower(broker.SubscriptionsSegment)) {
			return true, nil // a subscription forwarding to its own topic
		}
		var err error
		if next, err = queries.ForwardingSubscriptions(ctx, s.pool, e.ID); err != nil {
			return false, interpretError(err)
		}
	default:
		if e.Props.ForwardTo != "" {
			next = []string{e.Props.ForwardTo}
		}
	}
	for _, n := range next {
		t, err := s.lookup(ctx, n)
		if errors.Is(err, broker.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if loop, err := s.forwardsTo(ctx, t, back, depth+1); loop || err != nil {
			return loop, err
		}
	}
	return false, nil
}

// transferDeadLetters moves the dead letters of e to its ForwardDeadLetteredMessagesTo target
// inside tx, as new messages of the target (through its rules if it is a topic) that name e as
// their DeadLetterSource. Called in the transaction that dead-lettered them, so they never wait
// in e's dead-letter subqueue, and by the background tasks for any an interrupted move left.
//
// It returns the entities that received messages, for the caller to wake once tx commits.
func (s *Postgres) transferDeadLetters(ctx context.Context, tx pgx.Tx, e *broker.Entity) ([]wakeTarget, error) {
	if e.Props.ForwardDeadLetteredMessagesTo == "" {
		return nil, nil
	}
	target, err := s.Resolve(ctx, e.Props.ForwardDeadLetteredMessagesTo)
	if errors.Is(err, broker.ErrNotFound) {
		return nil, nil // the target is gone: the dead letters stay where they are
	}
	if err != nil {
		return nil, err
	}
	var woken []wakeTarget
	const chunk = 500
	var after int64 // the chunks go on from here: those the target refused stay behind
	// A session queue refuses a message without a SessionId: those are not even read, so the
	// dead letters it refused cost nothing to every later dead-lettering of e. (A topic's
	// session subscriptions refuse them too; those are read, tried and left each time.)
	sessionsOnly := target.Kind == broker.KindQueue && target.Props.ForwardTo == "" && target.Props.RequiresSession
	for {
		now := s.now()
		rows, err := tx.Query(ctx, deadLettersToForward.sql, e.ID, now, chunk, after, sessionsOnly)
		if err != nil {
			return woken, err
		}
		msgs, err := collectMessages(rows)
		if err != nil || len(msgs) == 0 {
			return woken, err
		}
		after = msgs[len(msgs)-1].SequenceNumber
		d := s.newDelivery(ctx, now)
		seqs := make([]int64, 0, len(msgs)) // those moved
		for _, m := range msgs {
			d.begin(target)
			d.dedupUntil = time.Time{} // a forwarded dead letter is not a new send to deduplicate
			seq := m.SequenceNumber
			// A new message of the target: enqueued now, its time to live counted from now (an
			// expired dead letter would otherwise arrive expired), capped by the target's.
			m.State, m.DeadLetterSource = broker.StateActive, e.Path
			if m.EnqueuedSequenceNumber == 0 {
				m.EnqueuedSequenceNumber = m.SequenceNumber // its first sequence number, in e
			}
			m.LockToken, m.LockedUntil, m.DeliveryCount = [16]byte{}, time.Time{}, 0
			m.ScheduledEnqueueTime, m.EnqueuedTime = time.Time{}, now
			if m.TimeToLive > target.Props.DefaultMessageTimeToLive {
				m.TimeToLive = target.Props.DefaultMessageTimeToLive
			}
			m.ExpiresAt = addClamped(now, m.TimeToLive)
			moved, err := d.forwardDeadLetter(target, m, e)
			if err != nil {
				return woken, err
			}
			if moved {
				seqs = append(seqs, seq)
			}
		}
		if len(d.rows) > 0 {
			if _, err := s.insertRows(ctx, tx, d.rows); err != nil {
				return woken, err
			}
		}
		if len(seqs) > 0 {
			if _, err := tx.Exec(ctx, removeForwarded.sql, e.ID, seqs); err != nil {
				return woken, err
			}
		}
		woken = append(woken, d.wakeTargets()...)
		if len(msgs) < chunk {
			return woken, nil
		}
	}
}
