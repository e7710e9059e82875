package nsconfig_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/nsconfig"
	"github.com/sbgate/sbgate/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// newStore is a store on a database of its own.
func newStore(t *testing.T) *store.Postgres {
	t.Helper()
	st := store.New(dbtest.NewPool(t), store.Options{})
	st.Start(context.Background())
	t.Cleanup(st.Stop)
	return st
}

func mustParse(t *testing.T, name string, doc []byte) *nsconfig.File {
	t.Helper()
	f, err := nsconfig.Parse(name, doc)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return f
}

func mustApply(t *testing.T, ns nsconfig.Namespace, f *nsconfig.File, opts nsconfig.Options) *nsconfig.Report {
	t.Helper()
	r, err := nsconfig.Apply(context.Background(), ns, f, opts)
	if err != nil {
		t.Fatalf("Apply(%s): %v", f.Name, err)
	}
	return r
}

func export(t *testing.T, ns nsconfig.Namespace) []byte {
	t.Helper()
	return exportAs(t, ns, "sbemulatorns")
}

// exportAs is the file Export writes of ns, with the namespace name given.
func exportAs(t *testing.T, ns nsconfig.Namespace, name string) []byte {
	t.Helper()
	f, _, err := nsconfig.Export(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := nsconfig.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameFile compares what two files declare (not where they declare it). Rules nil and empty both
// mean none declared.
func sameFile(t *testing.T, got, want *nsconfig.File) {
	t.Helper()
	opts := cmp.Options{
		cmpopts.IgnoreUnexported(nsconfig.File{}, nsconfig.Queue{}, nsconfig.Topic{}, nsconfig.Subscription{}, nsconfig.Rule{}),
		cmpopts.IgnoreFields(nsconfig.File{}, "Name", "Logging"),
		cmpopts.EquateEmpty(),
		cmpopts.SortSlices(func(a, b nsconfig.Queue) bool { return strings.ToLower(a.Name) < strings.ToLower(b.Name) }),
		cmpopts.SortSlices(func(a, b nsconfig.Topic) bool { return strings.ToLower(a.Name) < strings.ToLower(b.Name) }),
		cmpopts.SortSlices(func(a, b nsconfig.Subscription) bool { return strings.ToLower(a.Name) < strings.ToLower(b.Name) }),
		cmpopts.SortSlices(func(a, b nsconfig.Rule) bool { return strings.ToLower(a.Rule.Name) < strings.ToLower(b.Rule.Name) }),
		cmpopts.SortSlices(func(a, b broker.Property) bool { return a.Name < b.Name }),
	}
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Fatalf("files differ (-want +got):\n%s", d)
	}
}

// TestApplyEmulatorSample applies the emulator's published sample, applies it again (nothing
// changes), and exports the namespace: the export declares what the sample does, and applying
// the export to an empty namespace exports the same file again.
func TestApplyEmulatorSample(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	ns := nsconfig.StoreNamespace(st)
	f := mustParse(t, "Config.json", readSample(t))

	r := mustApply(t, ns, f, nsconfig.Options{})
	if len(r.Changes) != 6 { // queue, topic, four subscriptions (each created with its first rule)
		t.Errorf("first apply made %d changes; want 6:\n%s", len(r.Changes), strings.Join(r.Changes, "\n"))
	}
	q, err := st.GetEntity(ctx, "queue.1")
	if err != nil {
		t.Fatal(err)
	}
	if p := q.Props; p.MaxDeliveryCount != 3 || p.DefaultMessageTimeToLive != time.Hour || p.LockDuration != time.Minute || p.DuplicateDetectionHistoryTimeWindow != 20*time.Second {
		t.Errorf("queue.1 = %+v", p)
	}
	rules, err := st.ListRules(ctx, "topic.1/Subscriptions/subscription.4", 0, 10)
	if err != nil || len(rules) != 1 || rules[0].Name != "sql-filter-1" || rules[0].Action == nil {
		t.Fatalf("subscription.4 rules = %+v, %v; want sql-filter-1 alone, with its action", rules, err)
	}
	rules, err = st.ListRules(ctx, "topic.1/Subscriptions/subscription.3", 0, 10)
	if err != nil || len(rules) != 1 || rules[0].Name != "$Default" {
		t.Fatalf("subscription.3 rules = %+v, %v; want $Default", rules, err)
	}

	again := mustApply(t, ns, f, nsconfig.Options{})
	if len(again.Changes) != 0 || again.Unchanged != 6 {
		t.Errorf("second apply: changes %q, unchanged %d; want none and 6", again.Changes, again.Unchanged)
	}

	out := export(t, ns)
	sameFile(t, mustParse(t, "export", out), f)
	other := nsconfig.StoreNamespace(newStore(t))
	mustApply(t, other, mustParse(t, "export", out), nsconfig.Options{})
	if again := export(t, other); !bytes.Equal(again, out) {
		t.Fatalf("export → apply → export differs:\n%s\n---\n%s", out, again)
	}
}

// largeConfig declares 150 queues (every tenth forwarding to the next, every seventh forwarding
// dead letters to the first), 50 topics with 6 subscriptions each (each with a SQL rule with an
// action and a correlation rule; the first of each topic forwarding to a queue): 500 entities and
// 600 rules. edit changes some of everything.
func largeConfig(edit bool) []byte {
	var b strings.Builder
	b.WriteString(`{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Queues":[`)
	for i := 0; i < 150; i++ {
		if edit && i >= 140 {
			continue // ten queues dropped from the file
		}
		if i > 0 {
			b.WriteString(",")
		}
		lock := "PT1M"
		if edit && i%3 == 0 {
			lock = "PT2M"
		}
		fwd, dlq := "", ""
		if i%10 == 0 && i+1 < 140 {
			fwd = fmt.Sprintf("orders.%03d", i+1)
		}
		if edit && i%10 == 0 && i+2 < 140 {
			fwd = fmt.Sprintf("orders.%03d", i+2) // a forward moved
		}
		if i%7 == 0 && i > 0 {
			dlq = "orders.000"
		}
		fmt.Fprintf(&b, `{"Name":"orders.%03d","Properties":{"LockDuration":%q,"MaxDeliveryCount":%d,"ForwardTo":%q,"ForwardDeadLetteredMessagesTo":%q,"RequiresSession":%v}}`,
			i, lock, 1+i%10, fwd, dlq, i%5 == 4)
	}
	b.WriteString(`],"Topics":[`)
	for t := 0; t < 50; t++ {
		if t > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"Name":"events.%02d","Properties":{"DefaultMessageTimeToLive":"PT%dM","RequiresDuplicateDetection":%v},"Subscriptions":[`, t, 10+t, t%2 == 0)
		for s := 0; s < 6; s++ {
			if s > 0 {
				b.WriteString(",")
			}
			fwd := ""
			if s == 0 {
				fwd = fmt.Sprintf("orders.%03d", 100+t%40)
			}
			region := "eu"
			if edit && s == 1 {
				region = "us" // a rule changed
			}
			fmt.Fprintf(&b, `{"Name":"sub.%d","Properties":{"ForwardTo":%q,"MaxDeliveryCount":%d},"Rules":[`, s, fwd, 2+s)
			fmt.Fprintf(&b, `{"Name":"big","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"amount > %d"},"Action":{"SqlExpression":"SET sys.Label = 'big'"}}}`, 100*s)
			if !(edit && s == 2) { // a rule dropped
				fmt.Fprintf(&b, `,{"Name":"region","Properties":{"FilterType":"Correlation","CorrelationFilter":{"Label":"order","Properties":{"region":%q,"tier":%d}}}}`, region, s)
			}
			if edit && s == 3 { // a rule added
				b.WriteString(`,{"Name":"late","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"sys.Label LIKE 'late%'"}}}`)
			}
			b.WriteString(`]}`)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}],"Logging":{"Type":"Console"}}}`)
	return []byte(b.String())
}

// TestApplyLarge applies 500 entities with rules, applies them again (nothing changes), applies
// an edited file (every change in place, the dropped queues left alone, then pruned) and checks
// that the export round-trips.
func TestApplyLarge(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	ns := nsconfig.StoreNamespace(st)
	f := mustParse(t, "large.json", largeConfig(false))
	mustApply(t, ns, f, nsconfig.Options{})
	if again := mustApply(t, ns, f, nsconfig.Options{}); len(again.Changes) != 0 || again.Unchanged != 500 {
		t.Fatalf("second apply: %d changes (%q…), %d unchanged; want 0 and 500", len(again.Changes), first(again.Changes), again.Unchanged)
	}
	sameFile(t, mustParse(t, "export", export(t, ns)), f)

	edited := mustParse(t, "large.json", largeConfig(true))
	r := mustApply(t, ns, edited, nsconfig.Options{})
	if len(r.LeftAlone) != 10 {
		t.Errorf("left alone %d entities; want the 10 dropped queues: %q", len(r.LeftAlone), r.LeftAlone)
	}
	q, err := st.GetEntity(ctx, "orders.030")
	if err != nil || q.Props.LockDuration != 2*time.Minute || q.Props.ForwardTo != "orders.032" {
		t.Fatalf("orders.030 = %+v, %v; want LockDuration 2m, ForwardTo orders.032", q, err)
	}
	for s, want := range map[int][]string{1: {"big", "region"}, 2: {"big"}, 3: {"big", "late", "region"}} {
		rules, err := st.ListRules(ctx, fmt.Sprintf("events.07/Subscriptions/sub.%d", s), 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rules {
			names = append(names, r.Name)
		}
		if !cmp.Equal(names, want) {
			t.Errorf("sub.%d rules = %q; want %q", s, names, want)
		}
	}
	if again := mustApply(t, ns, edited, nsconfig.Options{}); len(again.Changes) != 0 {
		t.Fatalf("re-applying the edit changed %q", again.Changes)
	}
	pruned := mustApply(t, ns, edited, nsconfig.Options{Prune: true})
	if len(pruned.Changes) != 10 {
		t.Errorf("prune made %d changes; want the 10 queues deleted: %q", len(pruned.Changes), pruned.Changes)
	}
	if _, err := st.GetEntity(ctx, "orders.145"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("orders.145 after prune: %v; want not found", err)
	}
	out := export(t, ns)
	sameFile(t, mustParse(t, "export", out), edited)
	other := nsconfig.StoreNamespace(newStore(t))
	mustApply(t, other, mustParse(t, "export", out), nsconfig.Options{})
	if again := export(t, other); !bytes.Equal(again, out) {
		t.Fatal("export → apply → export differs")
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// snapshot is everything a namespace holds, to show a refused file changed nothing.
func snapshot(t *testing.T, ns nsconfig.Namespace) string {
	t.Helper()
	return string(exportAs(t, ns, ""))
}

// TestApplyRefusals checks the refusals that depend on what the namespace holds: each names the
// JSON path, and nothing is changed, not even what the file gets right.
func TestApplyRefusals(t *testing.T) {
	ctx := context.Background()
	const base = `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[%s],"Topics":[%s]}]}}`
	for _, tc := range []struct {
		name           string
		before         func(st *store.Postgres)
		queues, topics string
		prune          bool
		want           []string
	}{
		{name: "forward to a missing queue", queues: `{"Name":"new"},{"Name":"a","Properties":{"ForwardTo":"missing"}}`,
			want: []string{"Queues[1].Properties.ForwardTo", `"missing"`, "neither the file nor the namespace"}},
		{name: "forward to a subscription", topics: `{"Name":"t","Subscriptions":[{"Name":"s"}]}`, queues: `{"Name":"a","Properties":{"ForwardDeadLetteredMessagesTo":"t/Subscriptions/s"}}`,
			want: []string{"Queues[0].Properties.ForwardDeadLetteredMessagesTo", "not a queue or topic name"}},
		{name: "loop between queues", queues: `{"Name":"a","Properties":{"ForwardTo":"b"}},{"Name":"b","Properties":{"ForwardTo":"c"}},{"Name":"c","Properties":{"ForwardTo":"a"}}`,
			want: []string{"Queues[0].Properties.ForwardTo", "loop", "a → b → c → a"}},
		{name: "loop through a topic", queues: `{"Name":"q","Properties":{"ForwardTo":"t"}}`, topics: `{"Name":"t","Subscriptions":[{"Name":"s","Properties":{"ForwardTo":"q"}}]}`,
			want: []string{"loop"}},
		{name: "loop through an entity the file does not name",
			before: func(st *store.Postgres) {
				p := broker.DefaultProperties(broker.KindQueue)
				mustCreate(t, st, broker.KindQueue, "a", p)
				p.ForwardTo = "a"
				mustCreate(t, st, broker.KindQueue, "old", p)
			},
			queues: `{"Name":"a","Properties":{"ForwardTo":"old"}}`, want: []string{"Queues[0].Properties.ForwardTo", "a → old → a"}},
		{name: "RequiresSession cannot change",
			before: func(st *store.Postgres) {
				mustCreate(t, st, broker.KindQueue, "s", broker.DefaultProperties(broker.KindQueue))
			},
			queues: `{"Name":"fine"},{"Name":"s","Properties":{"RequiresSession":true}}`, want: []string{"Queues[1].Properties.RequiresSession", "cannot change"}},
		{name: "a topic under a queue's name",
			before: func(st *store.Postgres) {
				mustCreate(t, st, broker.KindQueue, "x", broker.DefaultProperties(broker.KindQueue))
			},
			topics: `{"Name":"x","Subscriptions":[]}`, want: []string{"Topics[0].Name", "exists in the namespace as a queue"}},
		{name: "prune would delete a forward target",
			before: func(st *store.Postgres) {
				mustCreate(t, st, broker.KindQueue, "target", broker.DefaultProperties(broker.KindQueue))
			},
			queues: `{"Name":"a","Properties":{"ForwardTo":"target"}}`, prune: true, want: []string{"Queues[0].Properties.ForwardTo", "prune would delete"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			ns := nsconfig.StoreNamespace(st)
			if tc.before != nil {
				tc.before(st)
			}
			before := snapshot(t, ns)
			f, err := nsconfig.Parse("f.json", []byte(fmt.Sprintf(base, tc.queues, tc.topics)))
			if err == nil {
				_, err = nsconfig.Apply(ctx, ns, f, nsconfig.Options{Prune: tc.prune})
			}
			wantErrors(t, "Apply", err, tc.want)
			if after := snapshot(t, ns); after != before {
				t.Errorf("a refused file changed the namespace:\n%s\n---\n%s", before, after)
			}
		})
	}
}

func mustCreate(t *testing.T, st *store.Postgres, kind broker.Kind, path string, p broker.Properties) {
	t.Helper()
	if _, err := st.CreateEntity(context.Background(), kind, path, p); err != nil {
		t.Fatal(err)
	}
}

// TestApplyReversesForwarding turns a → b round into b → a: the forward that goes away is dropped
// before the new one is set, so no passing loop is refused.
func TestApplyReversesForwarding(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	ns := nsconfig.StoreNamespace(st)
	mustApply(t, ns, mustParse(t, "1", []byte(`{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"a","Properties":{"ForwardTo":"b"}},{"Name":"b"}],"Topics":[]}]}}`)), nsconfig.Options{})
	mustApply(t, ns, mustParse(t, "2", []byte(`{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"a"},{"Name":"b","Properties":{"ForwardTo":"a"}}],"Topics":[]}]}}`)), nsconfig.Options{})
	a, _ := st.GetEntity(ctx, "a")
	b, _ := st.GetEntity(ctx, "b")
	if a.Props.ForwardTo != "" || b.Props.ForwardTo != "a" {
		t.Fatalf("a → %q, b → %q; want a → none, b → a", a.Props.ForwardTo, b.Props.ForwardTo)
	}
}

// TestApplyRules: a subscription the file lists rules for has exactly those ($Default goes); one
// it lists none for keeps the rules it has.
func TestApplyRules(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	ns := nsconfig.StoreNamespace(st)
	mustCreate(t, st, broker.KindTopic, "t", broker.DefaultProperties(broker.KindTopic))
	for _, s := range []string{"listed", "unlisted"} {
		if _, err := st.CreateSubscription(ctx, "t/Subscriptions/"+s, broker.DefaultProperties(broker.KindSubscription), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutRule(ctx, "t/Subscriptions/"+s, broker.Rule{Name: "byhand", Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQLExpression: "a = 1"}}, false); err != nil {
			t.Fatal(err)
		}
	}
	f := mustParse(t, "f", []byte(`{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[],"Topics":[{"Name":"t","Subscriptions":[
		{"Name":"listed","Rules":[{"Name":"only","Properties":{"FilterType":"Correlation","CorrelationFilter":{"Label":"x"}}}]},
		{"Name":"unlisted"}]}]}]}}`))
	mustApply(t, ns, f, nsconfig.Options{})
	names := func(sub string) []string {
		rules, err := st.ListRules(ctx, "t/Subscriptions/"+sub, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rules {
			out = append(out, r.Name)
		}
		return out
	}
	if got := names("listed"); !cmp.Equal(got, []string{"only"}) {
		t.Errorf("listed rules = %q; want [only]", got)
	}
	if got := names("unlisted"); !cmp.Equal(got, []string{"$Default", "byhand"}) {
		t.Errorf("unlisted rules = %q; want them kept", got)
	}
}

// TestApplyConcurrently applies one file from several gateways at once: each either creates an
// entity or finds it made by another and plans again; all end with the namespace as declared.
func TestApplyConcurrently(t *testing.T) {
	st := newStore(t)
	f := mustParse(t, "Config.json", readSample(t))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A store of its own per applier, as each gateway has, on the same database.
			_, errs[i] = nsconfig.Apply(context.Background(), nsconfig.StoreNamespace(st), f, nsconfig.Options{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("applier %d: %v", i, err)
		}
	}
	if r := mustApply(t, nsconfig.StoreNamespace(st), f, nsconfig.Options{}); len(r.Changes) != 0 {
		t.Errorf("after the concurrent applies, %q still differ", r.Changes)
	}
}
