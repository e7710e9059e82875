package store

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sbgate/sbgate/broker"
)

// TestInterpretLostConnection: a connection the server closed in the middle of an answer (the
// primary killed under a send, seen in TestFailover as a 500 "store messages: unexpected EOF")
// is the database being unavailable, which clients are told to retry (503), not an internal error.
func TestInterpretLostConnection(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("store messages: %w", io.ErrUnexpectedEOF),
		fmt.Errorf("claim: %w", io.EOF),
		// A write on a standby: a URL without target_session_attrs=read-write whose host is, or
		// has become, a standby.
		fmt.Errorf("store messages: %w", &pgconn.PgError{Code: "25006", Message: "cannot execute INSERT in a read-only transaction"}),
	} {
		if got := interpretError(err); !errors.Is(got, broker.ErrUnavailable) {
			t.Errorf("interpretError(%v) = %v; want ErrUnavailable", err, got)
		}
	}
}
