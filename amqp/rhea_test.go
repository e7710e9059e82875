package amqp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rheaPath finds the rhea module (the AMQP client of the Node Service Bus SDK): in
// AMQP_RHEA_PATH, else where `make compat-clients` installs it in this checkout, else in
// the main checkout when this is a git worktree (node_modules are not shared). It returns
// "" when there is none.
func rheaPath() string {
	if p := os.Getenv("AMQP_RHEA_PATH"); p != "" {
		return p
	}
	rel := filepath.Join("compat", "js-admin", "node_modules", "rhea")
	candidates := []string{filepath.Join("..", rel)}
	if out, err := exec.Command("git", "rev-parse", "--path-format=absolute", "--git-common-dir").Output(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), rel))
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "package.json")); err == nil {
			p, _ := filepath.Abs(c)
			return p
		}
	}
	return ""
}

// TestRheaInterop runs testdata/rhea_client.js with node against the engine: send with
// outcomes, receive with manual credit, a drain answered within rhea's budget and credit
// after it, receiver settle mode second, $cbs-style replies routed by link name, and a
// refused attach.
func TestRheaInterop(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the rhea interop test needs it")
	}
	rhea := rheaPath()
	if rhea == "" {
		t.Skip("rhea not found: run make compat-clients, or set AMQP_RHEA_PATH")
	}
	b, addr := newTestBroker(t, Options{}, func(b *testBroker) {
		b.outcome = func(d *Delivery, m *Message) DeliveryState {
			if v, _ := m.ApplicationProperties.Get("outcome"); v == "reject" {
				return Rejected{Error: &Error{Condition: "com.microsoft:dead-letter", Description: "rejected"}}
			}
			return Accepted{}
		}
		b.onAttach = func(req *AttachRequest) bool {
			if req.SourceAddress() == "missing" {
				_ = req.Refuse(&Error{Condition: ErrCondNotFound, Description: "no such entity"})
				return true
			}
			return false
		}
	})
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.CommandContext(testCtx(t), node, filepath.Join("testdata", "rhea_client.js"), host, port, rhea)
	out, err := cmd.CombinedOutput()
	t.Logf("rhea client output:\n%s", out)
	if err != nil {
		t.Fatalf("rhea client failed: %v", err)
	}
	if !strings.Contains(string(out), "ok closed") {
		t.Fatal("rhea client did not finish")
	}
	if ev := b.waitEvent("closed"); ev.err != nil {
		t.Errorf("Closed(%v); want a clean close", ev.err)
	}
}
