package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sbgate/sbgate/broker"
)

func TestCreateGetDeleteQueue(t *testing.T) {
	b := setup(t)
	p := broker.DefaultProperties(broker.KindQueue)
	p.LockDuration = 30 * time.Second
	p.MaxDeliveryCount = 3
	p.UserMetadata = "owner=team-a"
	p.DefaultMessageTimeToLive = time.Hour
	p.AuthorizationRules = []broker.AuthorizationRule{{KeyName: "k", PrimaryKey: "p", SecondaryKey: "s", Rights: []string{"Send"},
		CreatedTime: b.clock.Now(), ModifiedTime: b.clock.Now()}}
	created, err := b.store.CreateEntity(b.ctx, broker.KindQueue, "Orders/EU", p)
	if err != nil {
		t.Fatal(err)
	}
	if created.Path != "Orders/EU" || created.Name != "Orders/EU" || created.Kind != broker.KindQueue {
		t.Errorf("created = %+v", created)
	}
	if !created.CreatedAt.Equal(b.clock.Now()) {
		t.Errorf("CreatedAt = %v; want %v", created.CreatedAt, b.clock.Now())
	}

	// Paths are case-insensitive; the display path keeps the creator's casing.
	got, err := b.store.GetEntity(b.ctx, "orders/eu")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got.Props); diff != "" {
		t.Errorf("GetEntity props differ (-want +got):\n%s", diff)
	}
	if got.Path != "Orders/EU" {
		t.Errorf("Path = %q; want the created casing", got.Path)
	}

	_, err = b.store.CreateEntity(b.ctx, broker.KindQueue, "ORDERS/eu", broker.DefaultProperties(broker.KindQueue))
	if !errors.Is(err, broker.ErrConflict) {
		t.Errorf("second create: err = %v; want ErrConflict", err)
	}

	if err := b.store.DeleteEntity(b.ctx, "orders/EU"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.GetEntity(b.ctx, "orders/eu"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("get after delete: err = %v; want ErrNotFound", err)
	}
	if err := b.store.DeleteEntity(b.ctx, "orders/eu"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("second delete: err = %v; want ErrNotFound", err)
	}
}

func TestDeleteQueueDeletesMessages(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	b.send(t, q, body("a"), body("b"))
	if err := b.store.DeleteEntity(b.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	// A new queue at the same path starts empty.
	q = b.queue(t, "q", nil)
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("counts of the recreated queue = %+v; want none", c)
	}
	if m := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete); m != nil {
		t.Errorf("received %q from the recreated queue", m.Body)
	}
}

func TestUpdateQueue(t *testing.T) {
	b := setup(t)
	b.queue(t, "q", nil)
	b.clock.Advance(time.Minute)

	p := broker.DefaultProperties(broker.KindQueue)
	p.LockDuration = 2 * time.Minute
	p.Status = broker.StatusSendDisabled
	e, err := b.store.UpdateEntity(b.ctx, broker.KindQueue, "Q", p)
	if err != nil {
		t.Fatal(err)
	}
	if e.Props.LockDuration != 2*time.Minute || e.Props.Status != broker.StatusSendDisabled {
		t.Errorf("updated props = %+v", e.Props)
	}
	if !e.UpdatedAt.After(e.CreatedAt) {
		t.Errorf("UpdatedAt %v not after CreatedAt %v", e.UpdatedAt, e.CreatedAt)
	}

	for _, tc := range []struct {
		name string
		edit func(p *broker.Properties)
	}{
		{"RequiresSession", func(p *broker.Properties) { p.RequiresSession = true }},
		{"RequiresDuplicateDetection", func(p *broker.Properties) { p.RequiresDuplicateDetection = true }},
		{"EnablePartitioning", func(p *broker.Properties) { p.EnablePartitioning = true }},
	} {
		p := broker.DefaultProperties(broker.KindQueue)
		tc.edit(&p)
		if _, err := b.store.UpdateEntity(b.ctx, broker.KindQueue, "q", p); !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("changing %s: err = %v; want ErrBadRequest", tc.name, err)
		}
	}
	if _, err := b.store.UpdateEntity(b.ctx, broker.KindQueue, "missing", p); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("update of a missing queue: err = %v; want ErrNotFound", err)
	}
	if _, err := b.store.UpdateEntity(b.ctx, broker.KindTopic, "q", broker.DefaultProperties(broker.KindTopic)); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("update of a queue as a topic: err = %v; want ErrBadRequest", err)
	}
}

func TestCreateValidation(t *testing.T) {
	b := setup(t)
	for _, tc := range []struct {
		path string
		edit func(p *broker.Properties)
	}{
		{"", nil},
		{"/q", nil},
		{"q/", nil},
		{"a//b", nil},
		{"q q", nil},
		{"q?x", nil},
		{"q@x", nil},
		{"$q", nil},
		{"orders/messages", nil},
		{"Subscriptions", nil},
		{"-q", nil},
		{string(make([]byte, 261)), nil},
		{"q", func(p *broker.Properties) { p.LockDuration = 6 * time.Minute }},
		{"q", func(p *broker.Properties) { p.LockDuration = time.Second }},
		{"q", func(p *broker.Properties) { p.MaxDeliveryCount = 0 }},
		{"q", func(p *broker.Properties) { p.DuplicateDetectionHistoryTimeWindow = 10 * time.Second }},
		{"q", func(p *broker.Properties) { p.DuplicateDetectionHistoryTimeWindow = 8 * 24 * time.Hour }},
		{"q", func(p *broker.Properties) { p.AutoDeleteOnIdle = time.Minute }},
		{"q", func(p *broker.Properties) { p.MaxSizeInMegabytes = 1000 }},
		{"q", func(p *broker.Properties) { p.Status = "Paused" }},
		{"q", func(p *broker.Properties) { p.MaxMessageSizeInKilobytes = 0 }},
		{"q", func(p *broker.Properties) { p.DefaultMessageTimeToLive = 0 }},
	} {
		p := broker.DefaultProperties(broker.KindQueue)
		if tc.edit != nil {
			tc.edit(&p)
		}
		_, err := b.store.CreateEntity(b.ctx, broker.KindQueue, tc.path, p)
		if !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("CreateEntity(%.30q, %+v) err = %v; want ErrBadRequest", tc.path, p, err)
		}
	}
	for _, ok := range []string{"q", "a/b/c", "A.b-c_d", "x1/y2/z3"} {
		if _, err := b.store.CreateEntity(b.ctx, broker.KindQueue, ok, broker.DefaultProperties(broker.KindQueue)); err != nil {
			t.Errorf("CreateEntity(%q) = %v; want success", ok, err)
		}
	}
}

func TestListQueuesPages(t *testing.T) {
	b := setup(t)
	for i := range 7 {
		b.queue(t, fmt.Sprintf("q%02d", 6-i), nil)
	}
	var names []string
	for skip := 0; ; skip += 3 {
		page, err := b.store.ListEntities(b.ctx, broker.KindQueue, "", skip, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			names = append(names, e.Path)
		}
		if len(page) < 3 {
			break
		}
	}
	want := []string{"q00", "q01", "q02", "q03", "q04", "q05", "q06"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("paged list (-want +got):\n%s", diff)
	}
}

func TestCounts(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 1 })
	b.send(t, q, body("active-1"), body("active-2"), body("to-dead-letter"))
	b.send(t, q, broker.Message{Body: []byte("later"), ScheduledEnqueueTime: b.clock.Now().Add(time.Hour)})

	// Lock one message (still active), and dead-letter another by exceeding MaxDeliveryCount.
	first := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Abandon, first.MessageID, first.LockToken); err != nil {
		t.Fatal(err)
	}
	b.receive(t, q, broker.SubQueueMain, broker.PeekLock) // active-1 again: dead-lettered, active-2 returned instead

	c := b.counts(t, "q")
	want := broker.Counts{Active: 2, DeadLetter: 1, Scheduled: 1}
	c.SizeInBytes = 0
	if c != want {
		t.Errorf("counts = %+v; want %+v", c, want)
	}
	if c.Total() != 4 {
		t.Errorf("MessageCount = %d; want 4", c.Total())
	}
	b.clock.Advance(2 * time.Hour)
	if c := b.counts(t, "q"); c.Scheduled != 0 || c.Active != 3 {
		t.Errorf("counts after the schedule passed = %+v; want 3 active, none scheduled", c)
	}
}

func TestResolveSeesChanges(t *testing.T) {
	b := setup(t)
	b.queue(t, "q", nil)
	e, err := b.store.Resolve(b.ctx, "Q")
	if err != nil {
		t.Fatal(err)
	}
	if e.Props.LockDuration != time.Minute {
		t.Fatalf("LockDuration = %v", e.Props.LockDuration)
	}
	p := e.Props
	p.LockDuration = 10 * time.Second
	if _, err := b.store.UpdateEntity(b.ctx, broker.KindQueue, "q", p); err != nil {
		t.Fatal(err)
	}
	e, err = b.store.Resolve(b.ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if e.Props.LockDuration != 10*time.Second {
		t.Errorf("Resolve after update: LockDuration = %v; want 10s", e.Props.LockDuration)
	}
	if err := b.store.DeleteEntity(b.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Resolve(b.ctx, "q"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("Resolve after delete: err = %v; want ErrNotFound", err)
	}
}

func TestNamespaceKey(t *testing.T) {
	b := setup(t)
	if _, err := b.store.NamespaceKey(b.ctx, "Root", false); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("missing key: err = %v; want ErrNotFound", err)
	}
	k1, err := b.store.NamespaceKey(b.ctx, "Root", true)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Created || len(k1.PrimaryKey) != 44 || k1.PrimaryKey == k1.SecondaryKey {
		t.Errorf("generated key = %+v", k1)
	}
	k2, err := b.store.NamespaceKey(b.ctx, "Root", true)
	if err != nil {
		t.Fatal(err)
	}
	if k2.Created || k2.PrimaryKey != k1.PrimaryKey {
		t.Errorf("second call = %+v; want the stored key, not a new one", k2)
	}
}

func TestTotalMaxSizeInMegabytes(t *testing.T) {
	p := broker.DefaultProperties(broker.KindQueue)
	p.MaxSizeInMegabytes = 4096
	if got := p.TotalMaxSizeInMegabytes(); got != 4096 {
		t.Errorf("unpartitioned: %d; want 4096", got)
	}
	p.EnablePartitioning = true
	if got := p.TotalMaxSizeInMegabytes(); got != 65536 {
		t.Errorf("partitioned: %d; want 65536 (16 partitions)", got)
	}
}

func TestNamespaceKeyManagement(t *testing.T) {
	b := setup(t)
	sender, err := b.store.CreateNamespaceKey(b.ctx, "app-send", []string{"Send"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sender.PrimaryKey) != 44 || sender.PrimaryKey == sender.SecondaryKey {
		t.Errorf("created key = %+v", sender)
	}
	if _, err := b.store.CreateNamespaceKey(b.ctx, "app-send", []string{"Listen"}); !errors.Is(err, broker.ErrConflict) {
		t.Errorf("second create: err = %v; want ErrConflict", err)
	}
	for _, bad := range []string{"", "a b", "ä"} {
		if _, err := b.store.CreateNamespaceKey(b.ctx, bad, []string{"Send"}); !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("create %q: err = %v; want ErrBadRequest", bad, err)
		}
	}
	if _, err := b.store.CreateNamespaceKey(b.ctx, "listen", []string{"Listen"}); err != nil {
		t.Fatal(err)
	}
	rotated, err := b.store.RotateNamespaceKey(b.ctx, "app-send", false)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.PrimaryKey == sender.PrimaryKey || rotated.SecondaryKey != sender.SecondaryKey {
		t.Errorf("rotate primary: %+v from %+v; want a new primary, the secondary kept", rotated, sender)
	}
	again, err := b.store.RotateNamespaceKey(b.ctx, "app-send", true)
	if err != nil {
		t.Fatal(err)
	}
	if again.SecondaryKey == rotated.SecondaryKey || again.PrimaryKey != rotated.PrimaryKey {
		t.Errorf("rotate secondary: %+v from %+v; want a new secondary, the primary kept", again, rotated)
	}
	keys, err := b.store.NamespaceKeys(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].Name != "app-send" || keys[0].PrimaryKey != again.PrimaryKey || keys[1].Name != "listen" ||
		keys[1].Rights[0] != "Listen" {
		t.Errorf("keys = %+v", keys)
	}
	if err := b.store.DeleteNamespaceKey(b.ctx, "app-send"); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DeleteNamespaceKey(b.ctx, "app-send"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("second delete: err = %v; want ErrNotFound", err)
	}
	if _, err := b.store.RotateNamespaceKey(b.ctx, "app-send", false); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("rotate deleted: err = %v; want ErrNotFound", err)
	}
	if keys, _ := b.store.NamespaceKeys(b.ctx); len(keys) != 1 {
		t.Errorf("keys after delete = %+v", keys)
	}
}
