package store

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
)

// interpretError turns database errors into domain errors: a lost or refused connection becomes
// ErrUnavailable (the client may retry), anything else is wrapped as internal. Errors that already
// are domain errors pass through. It is the one place that looks inside pgx errors.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var de *broker.Error
	if errors.As(err, &de) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"53", // insufficient resources (too many connections, disk full)
			"57": // operator intervention: admin shutdown, crash shutdown, cannot connect now
			return &broker.Error{Code: broker.CodeUnavailable, Message: "The database is unavailable; retry shortly."}
		}
		if pgErr.Code == "25006" { // read_only_sql_transaction: connected to a standby
			return &broker.Error{Code: broker.CodeUnavailable, Message: "The database is read-only (a standby); retry shortly."}
		}
		if conflicted(err) {
			return &broker.Error{Code: broker.CodeUnavailable, Message: "A conflicting operation is in progress; retry shortly."}
		}
		return err
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	// A server that dies under a statement (SIGKILL, a failover) ends the connection mid-answer:
	// pgx reports that as an unexpected EOF, which is the database being unavailable too.
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &broker.Error{Code: broker.CodeUnavailable, Message: "The database is unavailable; retry shortly."}
	}
	return err
}

// conflictAttempts bounds how often retryConflicts runs a statement.
const conflictAttempts = 4

// conflicted reports whether PostgreSQL ended err's transaction to resolve a conflict with
// another one (a deadlock, a serialization failure): the transaction was rolled back whole,
// and run again it will most likely succeed.
func conflicted(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// retryConflicts runs a transaction, all of whose effects PostgreSQL rolls back when it ends
// it in a conflict, again when that happens (at most conflictAttempts times in all). A
// statement that locks many rows whose order it cannot choose against every other writer
// (a coalesced settlement, a purge chunk) can deadlock with one that locks some of the same
// rows in another order; PostgreSQL then fails one of them after deadlock_timeout. Without
// this, a settlement round would fail every client whose lock it held, for a conflict none of
// them caused. reset undoes whatever the failed attempt had recorded outside the database.
func (s *Postgres) retryConflicts(ctx context.Context, reset func(), run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		if err == nil || !conflicted(err) || attempt == conflictAttempts || ctx.Err() != nil {
			return err
		}
		s.conflictRetries.Add(1)
		if reset != nil {
			reset()
		}
	}
}

// interval encodes a duration for an interval column; Infinite is NULL.
func interval(d time.Duration) pgtype.Interval {
	if d == broker.Infinite {
		return pgtype.Interval{}
	}
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}

// duration decodes an interval column; NULL is Infinite.
func duration(iv pgtype.Interval) time.Duration {
	if !iv.Valid {
		return broker.Infinite
	}
	const day = 24 * time.Hour
	return time.Duration(iv.Microseconds)*time.Microsecond + time.Duration(iv.Days)*day + time.Duration(iv.Months)*30*day
}

// timestamptz encodes a time; the zero time is NULL.
func timestamptz(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// addClamped returns t+d, or the zero time ("never") when d is Infinite or the sum would pass
// PostgreSQL's (and any useful) range.
func addClamped(t time.Time, d time.Duration) time.Time {
	if d == broker.Infinite {
		return time.Time{}
	}
	limit := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if d > limit.Sub(t) {
		return time.Time{}
	}
	return t.Add(d)
}
