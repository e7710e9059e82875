// Package eventually lets a test wait for a condition that another goroutine or process brings
// about, instead of sleeping for a time after which it has "probably" happened: a sleep is too
// short on a loaded machine under the race detector and wastes time everywhere else.
//
// The functions report a timeout with t.Fatalf, so, like t.Fatalf, they must be called from the
// goroutine running the test (or benchmark), never from a goroutine it started.
package eventually

import (
	"errors"
	"testing"
	"time"
)

// DefaultTimeout is how long True and NoError wait. It is generous because the tests run under
// the race detector on loaded two-core machines, and a test that passes never waits for it.
const DefaultTimeout = 30 * time.Second

// The first check is immediate; the pause between checks starts short, so that a condition met
// at once costs little, and grows to maxInterval, so that an expensive check (a query, a
// request) does not load the machine that is meant to be making it true.
const (
	firstInterval = time.Millisecond
	maxInterval   = 50 * time.Millisecond
)

// Waiter waits for a condition up to its bound. The zero Waiter checks once.
type Waiter struct {
	timeout time.Duration
}

// Within returns a Waiter bounded by d, for a test that needs a bound other than DefaultTimeout:
// longer for a slow process (a server's restart), or a bound that is itself what the test checks.
func Within(d time.Duration) Waiter {
	return Waiter{timeout: d}
}

// True polls cond until it returns true, and fails the test with t.Fatalf naming what if it has
// not within DefaultTimeout. Call it from the test's goroutine only.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(DefaultTimeout).True(t, what, cond)
}

// NoError calls fn until it returns nil, and fails the test with t.Fatalf naming what and fn's
// last error if it has not within DefaultTimeout. Call it from the test's goroutine only.
func NoError(t testing.TB, what string, fn func() error) {
	t.Helper()
	Within(DefaultTimeout).NoError(t, what, fn)
}

// errFalse stands for a condition that is still false.
var errFalse = errors.New("condition false")

// True is the package's True with w's bound.
func (w Waiter) True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := w.poll(func() error {
		if cond() {
			return nil
		}
		return errFalse
	})
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", w.timeout, what)
	}
}

// NoError is the package's NoError with w's bound.
func (w Waiter) NoError(t testing.TB, what string, fn func() error) {
	t.Helper()
	if err := w.poll(fn); err != nil {
		t.Fatalf("timed out after %v waiting for %s; last error: %v", w.timeout, what, err)
	}
}

// poll calls fn until it returns nil or the bound has passed, and returns fn's last error. fn is
// called once more at (or after) the bound, so a condition met during the last pause counts.
func (w Waiter) poll(fn func() error) error {
	deadline := time.Now().Add(w.timeout)
	interval := firstInterval
	for {
		err := fn()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(interval, left)) // the pause between checks, not a wait for the condition
		interval = min(2*interval, maxInterval)
	}
}
