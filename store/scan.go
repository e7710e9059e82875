package store

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The claims, settlements and browses return their rows as records (messageRecord,
// claimedRecord, …) matched to columns by name, as pgx.RowToStructByName does, but that matches
// every row again by reflection: with 64 receivers it was 6% of the gateway's CPU in an AMQP
// peek-lock profile. collectRecords matches the columns of a result once, and scans each row
// into the record's fields through the record's generated field switch (records.gen.go).

// record is a pointer to a record type with generated column accessors.
type record[T any] interface {
	*T
	// columns lists the record's columns in field order; fieldOf(c) is c's place in it and
	// field(i) points to the field of the i-th.
	columns() []string
	fieldOf(column string) int
	field(i int) any
}

// collectRecords reads every row of rows into a T, each column into the field of its name. As
// with pgx.RowToStructByName, a result whose columns are not exactly T's fields (one missing, one
// more, one twice) is an error. expect is how many rows there may be (a claim's size): the
// records are large, and growing their slice by doubling allocated twice what they hold.
func collectRecords[T any, P record[T]](rows pgx.Rows, expect int) ([]T, error) {
	defer rows.Close()
	rec := P(new(T))
	names := rec.columns()
	fds := rows.FieldDescriptions()
	if len(fds) == 0 {
		// A statement that failed (a deadlock, a serialization failure) returns no columns: its
		// error is the one to report, and the one retryConflicts looks for.
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	fields := make([]int, len(fds))
	seen := make([]bool, len(names))
	for i, fd := range fds {
		k := rec.fieldOf(fd.Name)
		if k < 0 || seen[k] {
			return nil, fmt.Errorf("store: column %q of a result is not a field of %T, or comes twice", fd.Name, *new(T))
		}
		seen[k] = true
		fields[i] = k
	}
	if len(fds) != len(names) {
		return nil, fmt.Errorf("store: a result has %d columns for the %d fields of %T", len(fds), len(names), *new(T))
	}
	// A claim asks for up to its credit but often gets a few rows: room for a few, then append.
	out := make([]T, 0, min(max(expect, 0), 8))
	targets := make([]any, len(fds))
	for rows.Next() {
		// Scanned in place, in the slice returned.
		out = append(out, *new(T))
		r := P(&out[len(out)-1])
		for i, k := range fields {
			targets[i] = r.field(k)
		}
		if err := rows.Scan(targets...); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}
