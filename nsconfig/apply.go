package nsconfig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/sbgate/sbgate/atom"
	"github.com/sbgate/sbgate/broker"
)

// Namespace is where a configuration is applied and what Export reads. Errors wrap the store's
// sentinels (broker.ErrNotFound, broker.ErrConflict, broker.ErrBadRequest …) where the
// implementation can tell them.
type Namespace interface {
	// ListEntities lists every entity of kind (queues, topics, or the subscriptions of topic
	// parent), with its properties.
	ListEntities(ctx context.Context, kind broker.Kind, parent string) ([]*broker.Entity, error)
	// ListRules lists every rule of the subscription at subPath.
	ListRules(ctx context.Context, subPath string) ([]*broker.Rule, error)
	// CreateEntity creates a queue, topic or subscription; a subscription gets first as its
	// first rule ($Default, every message, when nil).
	CreateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties, first *broker.Rule) error
	// UpdateEntity replaces an entity's properties.
	UpdateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties) error
	// DeleteEntity deletes an entity with its messages (a topic with its subscriptions).
	DeleteEntity(ctx context.Context, kind broker.Kind, path string) error
	// PutRule creates a rule, or with update replaces one.
	PutRule(ctx context.Context, subPath string, r broker.Rule, update bool) error
	// DeleteRule deletes a rule.
	DeleteRule(ctx context.Context, subPath, name string) error
}

// Options changes what Apply does.
type Options struct {
	// Prune deletes the queues and topics the file does not name, and the subscriptions it does
	// not name on the topics it does, with their messages. Without it they are left alone (and
	// reported).
	Prune bool
	// DryRun plans and checks but changes nothing.
	DryRun bool
	// Logger receives a line per change and per entity left alone; nil discards.
	Logger *slog.Logger
}

// Report says what Apply did (or, with DryRun, would do).
type Report struct {
	// Changes are the changes made, in order, as sentences ("created queue orders").
	Changes []string
	// LeftAlone are the entities and rules the file does not name that were kept.
	LeftAlone []string
	// Notes are adjustments made to values sbgate cannot take as given.
	Notes []string
	// Unchanged counts the entities the file names that already matched it.
	Unchanged int
}

// Apply makes ns match f: it creates what f declares and ns lacks, updates what differs, and
// (with Prune) deletes what f does not name. It checks everything against ns before changing
// anything, and refuses, changing nothing, with an Errors naming the JSON path of each problem:
// a forward target that will not exist or is a subscription, forwarding that goes round in a
// loop, an entity of another kind under the same name, a property that cannot change on an
// existing entity (RequiresSession, RequiresDuplicateDetection). Changes are made in an order
// that never leaves a forward without its target nor makes a passing loop. When another writer
// changes ns meanwhile (a create that finds the entity exists, say) Apply plans again from what
// ns then holds: as long as each plan is smaller than the last (others applying the same file
// make progress for it), and three more times besides. Other errors are ns's, wrapped with the
// change they stopped.
func Apply(ctx context.Context, ns Namespace, f *File, opts Options) (*Report, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var lastErr error
	last := -1 // changes in the previous plan
	for stalls := 0; stalls < 3; {
		st, err := readState(ctx, ns, f)
		if err != nil {
			return nil, err
		}
		p, err := plan(st, f, opts)
		if err != nil {
			return nil, err
		}
		if opts.DryRun {
			return p.report, nil
		}
		if n := len(p.report.Changes); last >= 0 && n >= last {
			stalls++ // no progress since the last plan: another writer keeps changing ns
		} else {
			last = n
		}
		err = p.run(ctx, ns, log)
		if err == nil {
			for _, n := range p.report.Notes {
				log.WarnContext(ctx, "configuration adjusted", slog.String("file", f.Name), slog.String("note", n))
			}
			for _, e := range p.report.LeftAlone {
				log.InfoContext(ctx, "not in the configuration file, left alone (prune to delete)", slog.String("file", f.Name), slog.String("entity", e))
			}
			return p.report, nil
		}
		if !errors.Is(err, broker.ErrConflict) && !errors.Is(err, broker.ErrNotFound) {
			return p.report, err
		}
		lastErr = err
		log.WarnContext(ctx, "the namespace changed while the configuration was applied; planning again", slog.Any("err", err))
	}
	return nil, fmt.Errorf("apply %s: the namespace kept changing meanwhile: %w", f.Name, lastErr)
}

// state is what a namespace holds.
type state struct {
	entities map[string]*broker.Entity // by broker.Key(path)
	queues   []*broker.Entity
	topics   []*broker.Entity
	subs     map[string][]*broker.Entity // by topic key
	rules    map[string][]*broker.Rule   // by subscription key; read for declared rule sets only
}

// readState reads ns: every entity, and the rules of the subscriptions whose rules f declares
// (f nil: of every subscription, for Export).
func readState(ctx context.Context, ns Namespace, f *File) (*state, error) {
	st := &state{entities: map[string]*broker.Entity{}, subs: map[string][]*broker.Entity{}, rules: map[string][]*broker.Rule{}}
	var err error
	if st.queues, err = ns.ListEntities(ctx, broker.KindQueue, ""); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	if st.topics, err = ns.ListEntities(ctx, broker.KindTopic, ""); err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	for _, e := range append(slices.Clone(st.queues), st.topics...) {
		st.entities[broker.Key(e.Path)] = e
	}
	declared := map[string]bool{}
	if f != nil {
		for _, t := range f.Topics {
			for _, s := range t.Subscriptions {
				if s.Rules != nil {
					declared[broker.Key(broker.SubscriptionPath(t.Name, s.Name))] = true
				}
			}
		}
	}
	for _, t := range st.topics {
		subs, err := ns.ListEntities(ctx, broker.KindSubscription, t.Path)
		if err != nil {
			return nil, fmt.Errorf("list subscriptions of %s: %w", t.Path, err)
		}
		st.subs[broker.Key(t.Path)] = subs
		for _, s := range subs {
			k := broker.Key(s.Path)
			st.entities[k] = s
			if f == nil || declared[k] {
				rules, err := ns.ListRules(ctx, s.Path)
				if err != nil {
					return nil, fmt.Errorf("list rules of %s: %w", s.Path, err)
				}
				st.rules[k] = rules
			}
		}
	}
	return st, nil
}

// step is one change.
type step struct {
	what string // for the report and errors: "create queue orders"
	do   func(ctx context.Context, ns Namespace) error
}

type planned struct {
	steps  []step
	report *Report
}

func (p *planned) add(what string, do func(ctx context.Context, ns Namespace) error) {
	p.steps = append(p.steps, step{what: what, do: do})
	p.report.Changes = append(p.report.Changes, what)
}

func (p *planned) run(ctx context.Context, ns Namespace, log *slog.Logger) error {
	for _, s := range p.steps {
		if err := s.do(ctx, ns); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		log.InfoContext(ctx, "configuration applied", slog.String("change", s.what))
	}
	return nil
}

// desired is one entity as the file wants it.
type desired struct {
	kind  broker.Kind
	path  string // as the file spells it
	at    string // JSON path
	props Properties
	sub   *Subscription  // for subscriptions
	cur   *broker.Entity // nil when it is to be created
	final broker.Properties
}

// plan works out the changes that make st match f, or refuses with every problem found.
func plan(st *state, f *File, opts Options) (*planned, error) {
	p := &planned{report: &Report{}}
	var errs Errors
	fail := func(path, format string, args ...any) {
		errs = append(errs, f.errorAt(path, fmt.Sprintf(format, args...)))
	}
	want := wanted(f)
	named := map[string]*desired{}
	for _, d := range want {
		named[broker.Key(d.path)] = d
	}
	p.compare(st, want, fail)
	pruned, isPruned := p.unnamed(st, named, opts.Prune)
	checkForwarding(st, want, named, isPruned, fail)
	if len(errs) > 0 {
		return nil, errs
	}

	// The order of the changes (see Apply): deletions first, then every existing entity drops
	// the forwarding it will not keep, so that the forwarding in force stays within the final
	// one, which has no loop; then creations (a target before anything forwarding to it) and
	// updates; rules; and last the forwarding of entities whose target was only just created.
	p.deletions(pruned, isPruned)
	p.dropForwarding(want)
	created, later := p.createAndUpdate(st, want)
	for _, d := range want {
		if d.sub == nil || d.sub.Rules == nil {
			continue
		}
		planRules(p, d, st.rules[broker.Key(d.path)], created[broker.Key(d.path)])
	}
	p.forwardLater(later)
	return p, nil
}

// wanted is what f names, in file order: queues, topics, then subscriptions.
func wanted(f *File) []*desired {
	var want []*desired
	for _, q := range f.Queues {
		want = append(want, &desired{kind: broker.KindQueue, path: q.Name, at: q.at, props: q.Props})
	}
	for _, t := range f.Topics {
		want = append(want, &desired{kind: broker.KindTopic, path: t.Name, at: t.at, props: t.Props})
	}
	for _, t := range f.Topics {
		for i := range t.Subscriptions {
			s := &t.Subscriptions[i]
			want = append(want, &desired{kind: broker.KindSubscription, path: broker.SubscriptionPath(t.Name, s.Name), at: s.at, props: s.Props, sub: s})
		}
	}
	return want
}

// compare sets each wanted entity's current and final properties, notes the values raised to
// what sbgate keeps, and fails an entity of another kind under the same name and a property
// that cannot change on an existing entity.
func (p *planned) compare(st *state, want []*desired, fail func(path, format string, args ...any)) {
	for _, d := range want {
		if d.props.DuplicateDetectionHistoryTimeWindow > 0 && d.props.DuplicateDetectionHistoryTimeWindow < broker.MinDuplicateWindow && d.kind != broker.KindSubscription {
			p.report.Notes = append(p.report.Notes, fmt.Sprintf("%s: DuplicateDetectionHistoryTimeWindow %s raised to %s, the shortest a Service Bus namespace (and sbgate) keeps",
				join(d.at, "Properties"), atom.FormatDuration(d.props.DuplicateDetectionHistoryTimeWindow), atom.FormatDuration(broker.MinDuplicateWindow)))
		}
		cur := st.entities[broker.Key(d.path)]
		if cur == nil {
			d.final = broker.DefaultProperties(d.kind)
			d.props.applyTo(d.kind, &d.final)
			continue
		}
		if cur.Kind != d.kind {
			fail(join(d.at, "Name"), "%q exists in the namespace as a %s, not a %s", d.path, strings.ToLower(cur.Kind.String()), strings.ToLower(d.kind.String()))
			continue
		}
		d.cur = cur
		d.final = cur.Props
		d.props.applyTo(d.kind, &d.final)
		for _, c := range []struct {
			name     string
			was, now bool
		}{
			{"RequiresSession", cur.Props.RequiresSession, d.final.RequiresSession},
			{"RequiresDuplicateDetection", cur.Props.RequiresDuplicateDetection, d.final.RequiresDuplicateDetection},
		} {
			if c.was != c.now {
				fail(join(d.at, "Properties."+c.name), "%s %q exists with %s %v, which cannot change on an existing %s: delete it (its messages go with it) and start again, or keep %v",
					strings.ToLower(d.kind.String()), cur.Path, c.name, c.was, strings.ToLower(d.kind.String()), c.was)
			}
		}
	}
}

// unnamed sorts the entities the file does not name: with prune they are returned to be
// deleted (isPruned holds them and, for a topic, its subscriptions), without it they are
// reported as left alone.
func (p *planned) unnamed(st *state, named map[string]*desired,
	prune bool) (pruned []*broker.Entity, isPruned map[string]bool) {
	for _, e := range append(slices.Clone(st.queues), st.topics...) {
		if named[broker.Key(e.Path)] != nil {
			continue
		}
		if prune {
			pruned = append(pruned, e)
		} else {
			p.report.LeftAlone = append(p.report.LeftAlone, strings.ToLower(e.Kind.String())+" "+e.Path)
		}
	}
	for _, t := range st.topics {
		if named[broker.Key(t.Path)] == nil {
			continue // the topic's own fate decides theirs
		}
		for _, s := range st.subs[broker.Key(t.Path)] {
			if named[broker.Key(s.Path)] != nil {
				continue
			}
			if prune {
				pruned = append(pruned, s)
			} else {
				p.report.LeftAlone = append(p.report.LeftAlone, "subscription "+s.Path)
			}
		}
	}
	isPruned = map[string]bool{}
	for _, e := range pruned {
		isPruned[broker.Key(e.Path)] = true
		if e.Kind == broker.KindTopic {
			for _, s := range st.subs[broker.Key(e.Path)] {
				isPruned[broker.Key(s.Path)] = true
			}
		}
	}
	return pruned, isPruned
}

// checkForwarding checks the final state's forwarding: every target exists and is a queue or
// topic, and no chain comes back to where it started. Unnamed entities that stay keep their
// forwarding.
func checkForwarding(st *state, want []*desired, named map[string]*desired,
	isPruned map[string]bool, fail func(path, format string, args ...any)) {
	finalKind := func(key string) (broker.Kind, bool) {
		if d := named[key]; d != nil {
			return d.kind, true
		}
		if e := st.entities[key]; e != nil && !isPruned[key] {
			return e.Kind, true
		}
		return 0, false
	}
	graph := newFlowGraph()
	for key, e := range st.entities {
		if named[key] != nil || isPruned[key] {
			continue
		}
		graph.addEntity(e.Kind, e.Path, e.Props.ForwardTo)
	}
	for _, d := range want {
		graph.addEntity(d.kind, d.path, d.final.ForwardTo)
		for _, fwd := range []struct{ name, target string }{
			{"ForwardTo", d.final.ForwardTo}, {"ForwardDeadLetteredMessagesTo", d.final.ForwardDeadLetteredMessagesTo},
		} {
			if fwd.target == "" {
				continue
			}
			at := join(d.at, "Properties."+fwd.name)
			kind, ok := finalKind(broker.Key(fwd.target))
			switch {
			case !ok && isPruned[broker.Key(fwd.target)]:
				fail(at, "forwards to %q, which the file does not name and prune would delete", fwd.target)
			case !ok:
				fail(at, "forwards to %q, which neither the file nor the namespace has: declare that queue or topic", fwd.target)
			case kind == broker.KindSubscription:
				fail(at, "forwards to %q, a subscription: forward to a queue or topic", fwd.target)
			}
		}
	}
	for _, d := range want {
		for _, fwd := range []struct{ name, target string }{
			{"ForwardTo", d.final.ForwardTo}, {"ForwardDeadLetteredMessagesTo", d.final.ForwardDeadLetteredMessagesTo},
		} {
			if fwd.target == "" {
				continue
			}
			if loop := graph.pathBack(broker.Key(fwd.target), broker.Key(d.path)); loop != nil {
				fail(join(d.at, "Properties."+fwd.name), "forwarding goes round in a loop: %s", strings.Join(append([]string{d.path}, loop...), " → "))
			}
		}
	}
}

// deletions plans the deletion of the pruned entities; a pruned topic's subscriptions go with
// it.
func (p *planned) deletions(pruned []*broker.Entity, isPruned map[string]bool) {
	for _, e := range pruned {
		if e.Kind == broker.KindSubscription && isPruned[broker.Key(topicOf(e.Path))] {
			continue
		}
		e := e
		p.add("delete "+strings.ToLower(e.Kind.String())+" "+e.Path, func(ctx context.Context, ns Namespace) error {
			return ns.DeleteEntity(ctx, e.Kind, e.Path)
		})
	}
}

// dropForwarding plans, for every existing entity, dropping the forwarding it will not keep.
func (p *planned) dropForwarding(want []*desired) {
	for _, d := range want {
		if d.cur == nil {
			continue
		}
		keep := d.cur.Props
		changed := false
		if !sameTarget(keep.ForwardTo, d.final.ForwardTo) && keep.ForwardTo != "" {
			keep.ForwardTo, keep.ForwardToURL, changed = "", "", true
		}
		if !sameTarget(keep.ForwardDeadLetteredMessagesTo, d.final.ForwardDeadLetteredMessagesTo) && keep.ForwardDeadLetteredMessagesTo != "" {
			keep.ForwardDeadLetteredMessagesTo, keep.ForwardDeadLetteredMessagesToURL, changed = "", "", true
		}
		if changed {
			d, keep := d, keep
			p.add(fmt.Sprintf("update %s %s: stop forwarding until its new target is set", strings.ToLower(d.kind.String()), d.cur.Path), func(ctx context.Context, ns Namespace) error {
				return ns.UpdateEntity(ctx, d.kind, d.cur.Path, keep)
			})
			d.cur.Props = keep
		}
	}
}

// createAndUpdate plans the creations and updates, holding back forwarding to targets that do
// not exist yet: created holds the keys of the entities created, later those whose
// forwarding is to be set once its target exists (an entity may be in it twice).
func (p *planned) createAndUpdate(st *state,
	want []*desired) (created map[string]bool, later []*desired) {
	created = map[string]bool{}
	for _, d := range want {
		d := d
		if d.cur == nil {
			props := d.final
			deferred := false
			for _, t := range []*string{&props.ForwardTo, &props.ForwardDeadLetteredMessagesTo} {
				if *t != "" && st.entities[broker.Key(*t)] == nil {
					*t, deferred = "", true // its target is new too: set once it exists
				}
			}
			if deferred {
				later = append(later, d)
			}
			var first *broker.Rule
			if d.sub != nil && len(d.sub.Rules) > 0 {
				first = &d.sub.Rules[0].Rule
			}
			p.add("create "+strings.ToLower(d.kind.String())+" "+d.path, func(ctx context.Context, ns Namespace) error {
				return ns.CreateEntity(ctx, d.kind, d.path, props, first)
			})
			created[broker.Key(d.path)] = true
			continue
		}
		if diff := describeDiff(d.kind, d.cur.Props, d.final); diff != "" {
			props := d.final
			for _, t := range []struct{ now, was *string }{
				{&props.ForwardTo, &d.cur.Props.ForwardTo}, {&props.ForwardDeadLetteredMessagesTo, &d.cur.Props.ForwardDeadLetteredMessagesTo},
			} {
				if *t.now != "" && st.entities[broker.Key(*t.now)] == nil {
					*t.now = *t.was // a new target: set once it exists
					later = append(later, d)
				}
			}
			p.add(fmt.Sprintf("update %s %s: %s", strings.ToLower(d.kind.String()), d.cur.Path, diff), func(ctx context.Context, ns Namespace) error {
				return ns.UpdateEntity(ctx, d.kind, d.cur.Path, props)
			})
		} else {
			p.report.Unchanged++
		}
	}
	return created, later
}

// forwardLater plans setting the forwarding held back until its targets exist, once per
// entity.
func (p *planned) forwardLater(later []*desired) {
	seen := map[*desired]bool{}
	for _, d := range later {
		if seen[d] {
			continue
		}
		seen[d] = true
		d := d
		p.add(fmt.Sprintf("update %s %s: forward to %s", strings.ToLower(d.kind.String()), d.path, forwardsText(d.final)), func(ctx context.Context, ns Namespace) error {
			return ns.UpdateEntity(ctx, d.kind, d.path, d.final)
		})
	}
}

// planRules makes a subscription's rules exactly the file's: new ones and changed ones first,
// then the deletions, so that the subscription is never without a rule in between.
func planRules(p *planned, d *desired, current []*broker.Rule, created bool) {
	have := map[string]*broker.Rule{}
	if !created {
		for _, r := range current {
			have[broker.Key(r.Name)] = r
		}
	}
	want := map[string]bool{}
	for i, r := range d.sub.Rules {
		r := r.Rule
		want[broker.Key(r.Name)] = true
		if created && i == 0 {
			continue // created with the subscription
		}
		cur, ok := have[broker.Key(r.Name)]
		switch {
		case !ok:
			p.add(fmt.Sprintf("create rule %s of %s", r.Name, d.path), func(ctx context.Context, ns Namespace) error {
				return ns.PutRule(ctx, d.path, r, false)
			})
		case !sameRule(cur, &r):
			p.add(fmt.Sprintf("update rule %s of %s", r.Name, d.path), func(ctx context.Context, ns Namespace) error {
				return ns.PutRule(ctx, d.path, r, true)
			})
		}
	}
	for _, r := range current {
		if created || want[broker.Key(r.Name)] {
			continue
		}
		name := r.Name
		p.add(fmt.Sprintf("delete rule %s of %s (the file lists the subscription's rules without it)", name, d.path), func(ctx context.Context, ns Namespace) error {
			return ns.DeleteRule(ctx, d.path, name)
		})
	}
}

// sameRule compares rules as filters: a TrueFilter is a SqlFilter "1=1" (the emulator's format
// writes it so), a FalseFilter "1=0"; parameters, which the format cannot hold, must be absent.
func sameRule(a, b *broker.Rule) bool {
	norm := func(r *broker.Rule) (kind broker.FilterKind, expr string) {
		switch r.Filter.Kind {
		case broker.FilterTrue, "":
			return broker.FilterSQL, "1=1"
		case broker.FilterFalse:
			return broker.FilterSQL, "1=0"
		}
		return r.Filter.Kind, r.Filter.SQLExpression
	}
	ak, ae := norm(a)
	bk, be := norm(b)
	if ak != bk || ae != be || len(a.Filter.Parameters) != len(b.Filter.Parameters) {
		return false
	}
	if ak == broker.FilterCorrelation && !sameCorrelation(a.Filter.Correlation, b.Filter.Correlation) {
		return false
	}
	if (a.Action == nil) != (b.Action == nil) {
		return false
	}
	return a.Action == nil || a.Action.SQLExpression == b.Action.SQLExpression && len(a.Action.Parameters) == len(b.Action.Parameters)
}

func sameCorrelation(a, b *broker.CorrelationFilter) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.ContentType != b.ContentType || a.CorrelationID != b.CorrelationID || a.Label != b.Label || a.MessageID != b.MessageID ||
		a.ReplyTo != b.ReplyTo || a.ReplyToSessionID != b.ReplyToSessionID || a.SessionID != b.SessionID || a.To != b.To ||
		len(a.Properties) != len(b.Properties) {
		return false
	}
	bp := map[string]any{}
	for _, p := range b.Properties {
		bp[p.Name] = p.Value
	}
	for _, p := range a.Properties {
		v, ok := bp[p.Name]
		if !ok || v != p.Value {
			return false
		}
	}
	return true
}

func sameTarget(a, b string) bool { return broker.Key(a) == broker.Key(b) }

// describeDiff lists the emulator-format properties of kind that differ between was and now
// ("" when none do), as "LockDuration PT30S → PT1M".
func describeDiff(kind broker.Kind, was, now broker.Properties) string {
	a, b := propertiesOf(kind, was), propertiesOf(kind, now)
	var out []string
	add := func(name string, x, y any) { out = append(out, fmt.Sprintf("%s %v → %v", name, x, y)) }
	if a.DeadLetteringOnMessageExpiration != b.DeadLetteringOnMessageExpiration {
		add("DeadLetteringOnMessageExpiration", a.DeadLetteringOnMessageExpiration, b.DeadLetteringOnMessageExpiration)
	}
	if a.DefaultMessageTimeToLive != b.DefaultMessageTimeToLive {
		add("DefaultMessageTimeToLive", atom.FormatDuration(a.DefaultMessageTimeToLive), atom.FormatDuration(b.DefaultMessageTimeToLive))
	}
	if a.DuplicateDetectionHistoryTimeWindow != b.DuplicateDetectionHistoryTimeWindow {
		add("DuplicateDetectionHistoryTimeWindow", atom.FormatDuration(a.DuplicateDetectionHistoryTimeWindow), atom.FormatDuration(b.DuplicateDetectionHistoryTimeWindow))
	}
	if !sameTarget(a.ForwardDeadLetteredMessagesTo, b.ForwardDeadLetteredMessagesTo) {
		add("ForwardDeadLetteredMessagesTo", quoteOrNone(a.ForwardDeadLetteredMessagesTo), quoteOrNone(b.ForwardDeadLetteredMessagesTo))
	}
	if !sameTarget(a.ForwardTo, b.ForwardTo) {
		add("ForwardTo", quoteOrNone(a.ForwardTo), quoteOrNone(b.ForwardTo))
	}
	if a.LockDuration != b.LockDuration {
		add("LockDuration", atom.FormatDuration(a.LockDuration), atom.FormatDuration(b.LockDuration))
	}
	if a.MaxDeliveryCount != b.MaxDeliveryCount {
		add("MaxDeliveryCount", a.MaxDeliveryCount, b.MaxDeliveryCount)
	}
	return strings.Join(out, ", ")
}

func quoteOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return fmt.Sprintf("%q", s)
}

func forwardsText(p broker.Properties) string {
	var out []string
	if p.ForwardTo != "" {
		out = append(out, "ForwardTo "+p.ForwardTo)
	}
	if p.ForwardDeadLetteredMessagesTo != "" {
		out = append(out, "ForwardDeadLetteredMessagesTo "+p.ForwardDeadLetteredMessagesTo)
	}
	return strings.Join(out, ", ")
}

func topicOf(subPath string) string {
	t, _, _ := broker.SplitSubscriptionPath(subPath)
	return t
}

// flowGraph is where messages go: from an entity to its ForwardTo target, and from a topic to its
// subscriptions. A forward from X to T loops when T's messages can reach X; the store refuses
// those, and so does Apply before it changes anything. (Dead-letter forwarding is an edge only
// for the entity that sets it, as the store checks it: its target's ForwardTo chain must not
// lead back.)
type flowGraph struct {
	next  map[string][]string // key → keys
	names map[string]string   // key → display path
}

func newFlowGraph() *flowGraph {
	return &flowGraph{next: map[string][]string{}, names: map[string]string{}}
}

func (g *flowGraph) addEntity(kind broker.Kind, path, forwardTo string) {
	k := broker.Key(path)
	g.names[k] = path
	if kind == broker.KindSubscription {
		t := broker.Key(topicOf(path))
		g.next[t] = append(g.next[t], k)
	}
	if forwardTo != "" {
		g.next[k] = append(g.next[k], broker.Key(forwardTo))
	}
}

// pathBack returns the entities from `from` to `to` along the graph (from first, to last), or
// nil when messages at from cannot reach to.
func (g *flowGraph) pathBack(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		if k == to {
			var path []string
			for c := k; c != ""; c = prev[c] {
				path = append([]string{g.name(c)}, path...)
			}
			return path
		}
		for _, n := range g.next[k] {
			if _, seen := prev[n]; !seen {
				prev[n] = k
				queue = append(queue, n)
			}
		}
	}
	return nil
}

func (g *flowGraph) name(k string) string {
	if n, ok := g.names[k]; ok {
		return n
	}
	return k
}
