package access_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLayer(t *testing.T) (*access.Layer, *store.Postgres, *clock) {
	t.Helper()
	t.Parallel()
	st := store.New(dbtest.NewPool(t), store.Options{})
	clk := &clock{t: time.Now()}
	l := access.New(access.Config{
		Keys:   []sas.Key{{Name: "root", Primary: "root-key", Rights: sas.Manage}},
		Source: st, StoredKeys: true, Refresh: time.Minute, Now: clk.Now,
	})
	return l, st, clk
}

// Keys kept in the database are read at most every Refresh, by the injected clock: a rotation
// is seen once it has passed, and a grant of the old key is then no longer valid.
func TestStoredKeysAndRotation(t *testing.T) {
	l, st, clk := newLayer(t)
	ctx := context.Background()
	k, err := st.CreateNamespaceKey(ctx, "app", []string{"Send"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := l.Verify(ctx, sas.Sign("sb://h/q", "app", k.PrimaryKey, clk.Now().Add(time.Hour)), "q")
	if err != nil || !g.Namespace() || g.Rights != sas.Send {
		t.Fatalf("Verify with a stored key = %+v, %v", g, err)
	}
	if _, err := st.RotateNamespaceKey(ctx, "app", false); err != nil {
		t.Fatal(err)
	}
	if !l.Valid(ctx, g) {
		t.Error("the grant went invalid before the key cache's refresh")
	}
	clk.Advance(time.Minute)
	if l.Valid(ctx, g) {
		t.Error("a grant of a rotated key is still valid after the refresh")
	}
	if _, err := l.Verify(ctx, sas.Sign("sb://h/q", "app", k.PrimaryKey, clk.Now().Add(time.Hour)), "q"); err == nil {
		t.Error("a token of the rotated key verified")
	}
}

// A key name that does not exist reads exactly as a wrong key, through a token and through
// PLAIN; an expired token says when it expired.
func TestRefusalsTellNothingOfKeyNames(t *testing.T) {
	l, _, clk := newLayer(t)
	ctx := context.Background()
	_, unknown := l.Verify(ctx, sas.Sign("sb://h/q", "nobody", "x", clk.Now().Add(time.Hour)), "q")
	_, wrong := l.Verify(ctx, sas.Sign("sb://h/q", "root", "x", clk.Now().Add(time.Hour)), "q")
	if unknown == nil || wrong == nil || unknown.Error() != wrong.Error() {
		t.Errorf("unknown key: %v; wrong key: %v", unknown, wrong)
	}
	_, pu := l.VerifyPlain(ctx, "nobody", "x")
	_, pw := l.VerifyPlain(ctx, "root", "x")
	if pu == nil || pw == nil || pu.Error() != pw.Error() {
		t.Errorf("PLAIN unknown key: %v; wrong key: %v", pu, pw)
	}
	if g, err := l.VerifyPlain(ctx, "root", "root-key"); err != nil || g.Rights != sas.Manage || !g.Covers("", "any/path") {
		t.Errorf("PLAIN with the root key = %+v, %v", g, err)
	}
	exp := clk.Now().Add(-time.Hour)
	if _, err := l.Verify(ctx, sas.Sign("sb://h/q", "root", "root-key", exp), "q"); err == nil || !strings.Contains(err.Error(), "Expiration time: '"+exp.UTC().Format("2006-01-02 15:04:05")) {
		t.Errorf("expired token: %v", err)
	}
}

// An entity's own key signs tokens for that entity (its subscriptions and subqueues) only,
// whatever the token's scope.
func TestEntityKeysStayOnTheirEntity(t *testing.T) {
	l, st, clk := newLayer(t)
	ctx := context.Background()
	p := broker.DefaultProperties(broker.KindTopic)
	p.AuthorizationRules = []broker.AuthorizationRule{{KeyName: "tk", PrimaryKey: "topic-key", Rights: []string{"Listen"}}}
	if _, err := st.CreateEntity(ctx, broker.KindTopic, "t", p); err != nil {
		t.Fatal(err)
	}
	wide := sas.Sign("sb://h/", "tk", "topic-key", clk.Now().Add(time.Hour))
	g, err := l.Verify(ctx, wide, "t/Subscriptions/s/$DeadLetterQueue")
	if err != nil || g.Entity != "t" {
		t.Fatalf("Verify with the topic's key = %+v, %v", g, err)
	}
	for path, want := range map[string]bool{"t/Subscriptions/s": true, "t": true, "T/subscriptions/x/$management": true, "other": false, "tt": false} {
		if got := g.Covers("h", path); got != want {
			t.Errorf("Covers(%q) = %v; want %v", path, got, want)
		}
	}
	if err := l.Allows(g, "h", "t/Subscriptions/s", sas.Send, "t"); err == nil || !strings.Contains(err.Error(), "'Send' claim(s)") {
		t.Errorf("Send with a Listen key: %v", err)
	}
	if _, err := l.Verify(ctx, wide, "other"); err == nil {
		t.Error("the topic's key verified a token for another entity")
	}
}

// A token Verify accepted once is accepted again without its signature checked afresh, but
// only while its key stands exactly as it did: the same token text is refused once its key is
// rotated (and the keys read again), carries the rights its key has now, is refused once it has
// expired, and an entity's key proves nothing for another entity for having been used on its
// own.
func TestProvenTokensFollowTheirKeys(t *testing.T) {
	l, st, clk := newLayer(t)
	ctx := context.Background()
	k, err := st.CreateNamespaceKey(ctx, "app", []string{"Send"})
	if err != nil {
		t.Fatal(err)
	}
	text := sas.Sign("sb://h/q", "app", k.PrimaryKey, clk.Now().Add(2*time.Minute))
	for range 2 {
		if g, err := l.Verify(ctx, text, "q"); err != nil || g.Rights != sas.Send {
			t.Fatalf("Verify = %+v, %v", g, err)
		}
	}
	if _, err := st.RotateNamespaceKey(ctx, "app", false); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute) // the keys are read again
	if _, err := l.Verify(ctx, text, "q"); err == nil {
		t.Error("a token of a rotated key verified again")
	}

	root := sas.Sign("sb://h/", "root", "root-key", clk.Now().Add(30*time.Second))
	if _, err := l.Verify(ctx, root, "q"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(31*time.Second + 5*time.Minute) // past the expiry and the clock skew
	if _, err := l.Verify(ctx, root, "q"); err == nil || !strings.Contains(err.Error(), "Expiration time") {
		t.Errorf("an expired token verified again: %v", err)
	}

	p := broker.DefaultProperties(broker.KindQueue)
	p.AuthorizationRules = []broker.AuthorizationRule{{KeyName: "qk", PrimaryKey: "queue-key", Rights: []string{"Listen"}}}
	if _, err := st.CreateEntity(ctx, broker.KindQueue, "q1", p); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateEntity(ctx, broker.KindQueue, "q2", broker.DefaultProperties(broker.KindQueue)); err != nil {
		t.Fatal(err)
	}
	wide := sas.Sign("sb://h/", "qk", "queue-key", clk.Now().Add(time.Hour))
	if g, err := l.Verify(ctx, wide, "q1"); err != nil || g.Rights != sas.Listen || g.Entity != "q1" {
		t.Fatalf("Verify with the queue's key = %+v, %v", g, err)
	}
	if _, err := l.Verify(ctx, wide, "q2"); err == nil {
		t.Error("the queue's key verified a token for another queue, having verified it for its own")
	}
	p.AuthorizationRules[0].Rights = []string{"Listen", "Send"}
	if _, err := st.UpdateEntity(ctx, broker.KindQueue, "q1", p); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the new rights of the queue's key", func() bool {
		g, err := l.Verify(ctx, wide, "q1/$DeadLetterQueue")
		return err == nil && g.Rights == sas.Listen|sas.Send
	})
}
