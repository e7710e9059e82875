package store_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/store"
)

// TestDatabaseRestart: when the database goes away, operations fail fast with ErrUnavailable
// (which the HTTP layer answers as 503 with Retry-After) rather than hang, and once it is back
// the store works again without being restarted: the pool reconnects by itself.
func TestDatabaseRestart(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "sbgate-restart-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := t.Context()
	cfg := db.EmbeddedConfig{DataDir: dir, Settings: map[string]string{"fsync": "off"}}
	pg, err := db.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pg.Stop(context.Background()) }()
	if _, err := db.Migrate(ctx, pg.URL()); err != nil {
		t.Fatal(err)
	}
	pool, err := db.Open(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := store.New(pool, store.Options{MaintenanceInterval: time.Hour})
	s.Start(ctx)
	defer s.Stop()
	q, err := s.CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, q, []broker.Message{body("before")}); err != nil {
		t.Fatal(err)
	}

	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Send(ctx, q, []broker.Message{body("while down")})
	if !errors.Is(err, broker.ErrUnavailable) {
		t.Errorf("send with the database down: err = %v; want ErrUnavailable", err)
	}
	if _, err := receive1(ctx, s, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, 0); !errors.Is(err, broker.ErrUnavailable) {
		t.Errorf("receive with the database down: err = %v; want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("failing took %v; it must not hang", took)
	}

	pg, err = db.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, "a send after the restart", func() error {
		return s.Send(ctx, q, []broker.Message{body("after")})
	})
	m, err := receive1(ctx, s, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.ReceiveAndDelete, 0)
	if err != nil || m == nil || string(m.Body) != "before" {
		t.Errorf("first message after the restart = %v, %v; want the one sent before", m, err)
	}
}
