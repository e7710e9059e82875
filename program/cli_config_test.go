package program

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigApplyExport runs sbgate config over the HTTP API: apply the emulator's sample (then
// again: nothing changes), export it, and round-trip a namespace built by hand with the entity
// commands through export and apply into another broker.
func TestConfigApplyExport(t *testing.T) {
	t.Parallel()
	b := startCLIBroker(t)
	dir := t.TempDir()

	if out := b.ok(t, "config", "apply", sampleConfig, "-dry-run"); !strings.Contains(out, "would create queue queue.1") {
		t.Errorf("dry run:\n%s", out)
	}
	if _, err := b.sb(t, "queue", "show", "queue.1"); err == nil {
		t.Fatal("-dry-run created queue.1")
	}
	out := b.ok(t, "config", "apply", sampleConfig)
	for _, want := range []string{"create queue queue.1", "create subscription topic.1/Subscriptions/subscription.4", "6 change(s), 0 unchanged"} {
		if !strings.Contains(out, want) {
			t.Errorf("config apply lacks %q:\n%s", want, out)
		}
	}
	if out := b.ok(t, "config", "apply", sampleConfig); !strings.HasSuffix(out, "0 change(s), 6 unchanged, 0 left alone\n") {
		t.Errorf("second apply:\n%s", out)
	}

	// By hand: properties, forwarding, rules of every kind.
	b.ok(t, "queue", "create", "audit")
	b.ok(t, "queue", "create", "orders", "-p", "LockDuration=PT30S", "-p", "MaxDeliveryCount=4", "-p", "ForwardDeadLetteredMessagesTo=audit", "-p", "RequiresSession=true")
	b.ok(t, "topic", "create", "events", "-p", "DefaultMessageTimeToLive=P2D", "-p", "RequiresDuplicateDetection=true", "-p", "DuplicateDetectionHistoryTimeWindow=PT5M")
	b.ok(t, "subscription", "create", "events", "big", "-p", "ForwardTo=orders", "-p", "DeadLetteringOnMessageExpiration=true")
	b.ok(t, "rule", "create", "events", "big", "big", "-sql", "amount > 100", "-action", "SET sys.Label = 'big'")
	b.ok(t, "rule", "create", "events", "big", "eu", "-correlation", "Label=order", "-correlation", "region=eu", "-correlation", "tier=3")
	b.ok(t, "rule", "delete", "events", "big", "$Default")

	first := filepath.Join(dir, "first.json")
	if out := b.ok(t, "config", "export", "-file", first); strings.TrimSpace(out) != "" {
		t.Errorf("export printed %q; want nothing (no notes: everything fits the format)", out)
	}
	exported, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name": "orders"`, `"LockDuration": "PT30S"`, `"ForwardDeadLetteredMessagesTo": "audit"`, `"DefaultMessageTimeToLive": "P2D"`,
		`"ForwardTo": "orders"`, `"SqlExpression": "amount > 100"`, `"SqlExpression": "SET sys.Label = 'big'"`, `"tier": 3`, `"MaxDeliveryCount": 3`} {
		if !strings.Contains(string(exported), want) {
			t.Errorf("export lacks %s:\n%s", want, exported)
		}
	}

	other := startCLIBroker(t)
	out = other.ok(t, "config", "apply", first)
	if !strings.Contains(out, "create rule eu of events/Subscriptions/big") {
		t.Errorf("applying the export:\n%s", out)
	}
	second := filepath.Join(dir, "second.json")
	other.ok(t, "config", "export", "-file", second)
	again, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(exported) {
		t.Fatalf("export → apply → export differs:\n%s\n---\n%s", exported, again)
	}
	if out := other.ok(t, "config", "apply", second); !strings.Contains(out, "0 change(s)") {
		t.Errorf("re-applying the round trip changed something:\n%s", out)
	}

	// A refused file changes nothing, and says where it is wrong.
	bad := filepath.Join(dir, "bad.json")
	doc := strings.Replace(string(exported), `"Name": "audit",`, `"Name": "audit", "Extra": 1,`, 1)
	if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	other.refused(t, []string{bad + ":", "UserConfig.Namespaces[0].Queues[0].Extra", `unknown property "Extra"`}, "config", "apply", bad)
	doc = strings.Replace(string(exported), `"ForwardTo": "orders"`, `"ForwardTo": "nowhere"`, 1)
	doc = strings.Replace(doc, `"Name": "audit",`, `"Name": "audit2",`, 1)
	if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	other.refused(t, []string{"Subscriptions[0].Properties.ForwardTo", `"nowhere"`}, "config", "apply", bad)
	if _, err := other.sb(t, "queue", "show", "audit2"); err == nil {
		t.Error("a refused file created queue audit2")
	}
}
