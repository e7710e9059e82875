package program

import (
	"io"
	"os"
	"testing"
	"time"
)

// With no flag and no variable set, serve runs with the documented defaults (README's table),
// which are the handlers and store packages' own: each is written once.
func TestServeDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseServeConfig(nil, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]time.Duration{
		"max-receive-wait": {cfg.MaxReceiveWait, 120 * time.Second},
		"recheck-interval": {cfg.Recheck, 30 * time.Second},
		"body-timeout":     {cfg.BodyTimeout, 60 * time.Second},
		"write-timeout":    {cfg.WriteTimeout, 60 * time.Second},
	} {
		if got[0] != got[1] {
			t.Errorf("-%s defaults to %v, want %v", name, got[0], got[1])
		}
	}
	if cfg.SendWriters != 1 {
		t.Errorf("-send-writers defaults to %d, want 1", cfg.SendWriters)
	}
	if cfg.AMQPMaxConnections != 10000 || cfg.AMQPMaxHandshakes != 4096 {
		t.Errorf("AMQP limits default to %d connections, %d handshakes; want 10000, 4096", cfg.AMQPMaxConnections, cfg.AMQPMaxHandshakes)
	}
	if _, err := parseServeConfig([]string{"-amqp-max-handshakes", "0"}, env(), io.Discard); err == nil {
		t.Error("-amqp-max-handshakes 0 was accepted")
	}
}

// With neither -data-dir nor a database URL the data directory is the per-user default, worked
// out from the environment serve was given (not the process's own): as root /var/lib/sbgate,
// otherwise under $XDG_DATA_HOME or $HOME.
func TestServeDefaultDataDir(t *testing.T) {
	t.Parallel()
	want := "/xdg/sbgate"
	if os.Geteuid() == 0 {
		want = "/var/lib/sbgate"
	}
	cfg, err := parseServeConfig(nil, env("XDG_DATA_HOME", "/xdg", "HOME", "/home/u"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != want {
		t.Errorf("DataDir = %q, want %q", cfg.DataDir, want)
	}
	cfg, err = parseServeConfig(nil, env("DATABASE_URL", "postgres://h/db"), io.Discard)
	if err != nil || cfg.DataDir != "" {
		t.Errorf("with a database URL: DataDir = %q, %v; want none", cfg.DataDir, err)
	}
}
