package eventually_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbgate/sbgate/internal/eventually"
)

// fakeTB records Fatalf instead of ending the test, so that a timeout can be observed. The
// embedded testing.TB supplies the methods the helper does not call (and the private one that
// keeps testing.TB from being implemented outside the testing package).
type fakeTB struct {
	testing.TB
	fatals []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
}

// A condition made true by another goroutine is waited for, and checked no more after it holds.
func TestTrueWaitsForTheCondition(t *testing.T) {
	var ready atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond) // what is waited for must happen after the first checks
		ready.Store(true)
	}()
	calls, callsTrue := 0, 0
	f := &fakeTB{TB: t}
	eventually.True(f, "ready", func() bool {
		calls++
		if ready.Load() {
			callsTrue++
			return true
		}
		return false
	})
	if len(f.fatals) != 0 {
		t.Fatalf("True failed: %q", f.fatals)
	}
	if calls < 2 || callsTrue != 1 {
		t.Errorf("cond called %d times, %d of them true; want at least 2, exactly 1 true",
			calls, callsTrue)
	}
}

// A condition that never holds fails the test, naming what was waited for, after the bound and
// not long after it.
func TestTrueFailsWhenTheConditionNeverHolds(t *testing.T) {
	f := &fakeTB{TB: t}
	start := time.Now()
	calls := 0
	never := func() bool { calls++; return false }
	eventually.Within(50*time.Millisecond).True(f, "the moon", never)
	took := time.Since(start)
	if len(f.fatals) != 1 || !strings.Contains(f.fatals[0], "the moon") {
		t.Fatalf("Fatalf calls = %q; want one naming the moon", f.fatals)
	}
	if took < 50*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %v; want 50ms and a little", took)
	}
	if calls < 3 {
		t.Errorf("cond called %d times in 50ms; want it polled", calls)
	}
}

// NoError returns once fn succeeds; when it never does, the failure names the last error, not
// the first.
func TestNoError(t *testing.T) {
	f := &fakeTB{TB: t}
	n := 0
	eventually.NoError(f, "the third try", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if len(f.fatals) != 0 || n != 3 {
		t.Fatalf("NoError: Fatalf calls %q after %d tries; want none after 3", f.fatals, n)
	}

	n = 0
	eventually.Within(30*time.Millisecond).NoError(f, "a refusal to end", func() error {
		n++
		return fmt.Errorf("refusal %d", n)
	})
	if len(f.fatals) != 1 {
		t.Fatalf("Fatalf calls = %q; want one", f.fatals)
	}
	msg, last := f.fatals[0], fmt.Sprintf("refusal %d", n)
	if !strings.Contains(msg, "a refusal to end") || !strings.HasSuffix(msg, last) {
		t.Errorf("Fatalf(%q); want it to name a refusal to end and end with %q", msg, last)
	}
}

// A condition that already holds costs no pause.
func TestTrueAtOnce(t *testing.T) {
	f := &fakeTB{TB: t}
	start := time.Now()
	eventually.True(f, "now", func() bool { return true })
	if len(f.fatals) != 0 {
		t.Fatalf("True failed: %q", f.fatals)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a condition that held took %v", took)
	}
}
