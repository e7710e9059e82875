package store

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// interpretError turns database errors into domain errors: a lost or refused connection becomes
// ErrUnavailable (the client may retry), anything else is wrapped as internal. Errors that already
// are domain errors pass through. It is the one place that looks inside pgx errors.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var de *Error
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
			return &Error{Code: CodeUnavailable, Message: "The database is unavailable; retry shortly."}
		}
		if pgErr.Code == "25006" { // read_only_sql_transaction: connected to a standby
			return &Error{Code: CodeUnavailable, Message: "The database is read-only (a standby); retry shortly."}
		}
		if pgErr.Code == "40001" || pgErr.Code == "40P01" { // serialization failure, deadlock
			return &Error{Code: CodeUnavailable, Message: "A conflicting operation is in progress; retry shortly."}
		}
		return err
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	// A server that dies under a statement (SIGKILL, a failover) ends the connection mid-answer:
	// pgx reports that as an unexpected EOF, which is the database being unavailable too.
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &Error{Code: CodeUnavailable, Message: "The database is unavailable; retry shortly."}
	}
	return err
}

// interval encodes a duration for an interval column; Infinite is NULL.
func interval(d time.Duration) pgtype.Interval {
	if d == Infinite {
		return pgtype.Interval{}
	}
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}

// duration decodes an interval column; NULL is Infinite.
func duration(iv pgtype.Interval) time.Duration {
	if !iv.Valid {
		return Infinite
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
	if d == Infinite {
		return time.Time{}
	}
	limit := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if d > limit.Sub(t) {
		return time.Time{}
	}
	return t.Add(d)
}
