package db

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// orphanTimeout bounds the wait for a crashed postmaster's backends to go after SIGKILL.
const orphanTimeout = 10 * time.Second

// supervise watches the current server process and, when it exits without Stop having asked it
// to, restarts it as e.policy says. It returns when Stop is called or when it gives up. It is the
// only one that starts a server after StartEmbedded returned, and Stop waits for it to return
// before stopping whatever runs, so the two never race.
func (e *Embedded) supervise() {
	defer close(e.supervised)
	// Cancelled by Stop, so that a restart in progress (crash recovery may take a while) ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.quit:
			cancel()
		case <-ctx.Done():
		}
	}()

	failures := 0 // restart attempts in a row that did not give a server that stayed up
	readyAt := time.Now()
	for {
		p := e.current()
		select {
		case <-e.quit:
			return
		case <-p.exited:
		}
		if e.detached.Load() {
			e.finish(StatusFailed)
			return
		}
		// Not running from the moment the postmaster is gone, before its log is read to the end:
		// orphaned backends keep the log open (up to awaitLog's bound) and may still answer a
		// ping meanwhile, which a readiness probe must not take for a running server.
		if e.policy.Disabled {
			e.status.Store(int32(StatusFailed))
		} else {
			e.status.Store(int32(StatusRestarting))
		}
		crashed := time.Now()
		up := crashed.Sub(readyAt)
		if up >= e.policy.StableAfter {
			failures = 0
		}
		p.awaitLog()
		e.log.Error("embedded postgres exited unexpectedly", slog.Int("pid", p.pid), slog.Any("err", p.waitErr),
			slog.Duration("up_for", up.Round(time.Millisecond)),
			slog.String("log_tail", strings.Join(e.logTail.lines(), "\n")))
		if e.policy.Disabled {
			e.finish(StatusFailed)
			return
		}
		if !e.restartUntilUp(ctx, &failures) {
			return
		}
		readyAt = time.Now()
		// The callback (which drops the pools' dead connections) runs before the server is
		// reported running, so that whoever sees it running gets live connections.
		if e.onRestart != nil {
			e.onRestart()
		}
		e.status.Store(int32(StatusRunning))
		e.log.Info("embedded postgres restarted", slog.Int("pid", e.current().pid), slog.Int("attempt", failures),
			slog.Duration("down_for", readyAt.Sub(crashed).Round(time.Millisecond)))
	}
}

// restartUntilUp restarts the server, after the policy's delay each time, until it comes up
// (true), or until Stop or the policy's last attempt (false: the supervisor ends). failures
// counts the attempts that did not give a server that stayed up.
func (e *Embedded) restartUntilUp(ctx context.Context, failures *int) bool {
	for {
		*failures++
		if *failures > e.policy.MaxAttempts {
			e.log.Error("embedded postgres supervisor gave up: the server does not stay up; "+
				"requests answer 503 and /healthz reports it until sbgate is restarted",
				slog.Int("attempts", *failures-1), slog.String("data_dir", e.dataDir))
			e.finish(StatusFailed)
			return false
		}
		delay := e.policy.delay(*failures)
		e.log.Warn("restarting embedded postgres", slog.Int("attempt", *failures),
			slog.Int("max_attempts", e.policy.MaxAttempts), slog.Duration("in", delay))
		t := time.NewTimer(delay)
		select {
		case <-e.quit:
			t.Stop()
			return false
		case <-t.C:
		}
		err := e.restart(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false // Stop stops whatever the attempt left running
		}
		e.log.Warn("embedded postgres restart failed", slog.Int("attempt", *failures),
			slog.Any("err", err))
	}
}

// restart starts the server again after the previous one exited: the crashed postmaster's
// backends are ended first (they hold its shared memory, and postgres refuses to start while
// they do), then the start goes as in StartEmbedded; the server runs crash recovery from the WAL,
// so every committed transaction is there again. A server that does not come up is stopped.
func (e *Embedded) restart(ctx context.Context) error {
	if err := killOrphans(e.pgData, orphanTimeout); err != nil {
		return fmt.Errorf("restart embedded postgres: %w", err)
	}
	if err := e.stopLeftover(ctx); err != nil {
		return err
	}
	if err := prepareSocketDir(e.socketDir, e.user); err != nil {
		return err
	}
	p, err := e.start()
	if err != nil {
		return err
	}
	if err := e.waitReady(ctx, p); err != nil {
		if ctx.Err() == nil {
			_ = e.terminate(p)
			p.awaitLog()
		}
		return err
	}
	return nil
}
