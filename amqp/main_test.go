package amqp

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the test binary if any goroutine outlives the tests: every server,
// connection and client a test starts must be shut down by it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
