package db

import "time"

// Test hooks for package db_test.

// ReleaseLockForTest drops the data-directory lock but leaves the server running, unsupervised:
// what a killed sbgate whose parent-death signal did not arrive leaves behind.
func (e *Embedded) ReleaseLockForTest() {
	e.detached.Store(true)
	e.releaseLock()
}

// PIDForTest returns the current postmaster's pid.
func (e *Embedded) PIDForTest() int { return e.current().pid }

// SetStopTimeoutForTest shortens the wait before Stop escalates from SIGINT to SIGQUIT to SIGKILL.
// Call it before Stop.
func (e *Embedded) SetStopTimeoutForTest(d time.Duration) { e.stopTimeout = d }
