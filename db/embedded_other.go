//go:build !linux

package db

import (
	"errors"
	"syscall"
	"time"
)

// setPdeathsig does nothing: only Linux has a parent-death signal, so elsewhere a server whose
// sbgate was killed keeps running until the next StartEmbedded on its data directory finds it.
func setPdeathsig(*syscall.SysProcAttr, syscall.Signal) {}

// postmasterState cannot tell a leftover server from an unrelated process that reused its pid
// without /proc, so it never claims a process is ours: signalling a stranger is worse than
// letting postgres refuse to start with its own message.
func postmasterState(pid int, _ string) processState {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return processGone
	}
	return processUnknown
}

// killOrphans does nothing: without /proc the crashed server's processes cannot be told from
// others. They exit by themselves when they notice the postmaster's death; until then postgres
// refuses to start, and the supervisor tries again after its backoff.
func killOrphans(string, time.Duration) error { return nil }
