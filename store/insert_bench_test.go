package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
)

// BenchmarkInsertArgs measures building the arguments of insertMessages.sql for 100 rows, the
// part of a send's hot path that turns rows into the statement's per-column arrays.
func BenchmarkInsertArgs(b *testing.B) {
	now := time.Now()
	rows := benchRows(b, now)
	b.ReportAllocs()
	for b.Loop() {
		insertArgsSink = insertArgs(rows, now)
	}
}

var insertArgsSink any

// BenchmarkInsertArgsEncode is BenchmarkInsertArgs with the encoding pgx then does of each
// argument (binary format, as it sends them), which depends on the Go types of the arrays.
func BenchmarkInsertArgsEncode(b *testing.B) {
	now := time.Now()
	rows := benchRows(b, now)
	m := pgtype.NewMap()
	var buf []byte
	b.ReportAllocs()
	oids := insertArgOIDs()
	for b.Loop() {
		for i, a := range insertArgs(rows, now) {
			var err error
			if buf, err = m.Encode(oids[i], pgtype.BinaryFormatCode, a, buf[:0]); err != nil {
				b.Fatal(i, err)
			}
		}
	}
}

// insertArgOIDs are the types PostgreSQL gives the arguments of insertMessages.sql.
func insertArgOIDs() []uint32 {
	arrays := map[string]uint32{"bigint": pgtype.Int8ArrayOID, "integer": pgtype.Int4ArrayOID, "smallint": pgtype.Int2ArrayOID,
		"text": pgtype.TextArrayOID, "bytea": pgtype.ByteaArrayOID, "timestamptz": pgtype.TimestamptzArrayOID,
		"interval": pgtype.IntervalArrayOID, "jsonb": pgtype.JSONBArrayOID, "boolean": pgtype.BoolArrayOID}
	oids := make([]uint32, insertArg.n)
	for i, t := range insertColumnTypes {
		oids[insertArg.columns[i]] = arrays[t]
	}
	oids[insertArg.dedupEntity], oids[insertArg.dedupUntil] = pgtype.Int8ArrayOID, pgtype.TimestamptzArrayOID
	oids[insertArg.sessioned], oids[insertArg.originOf] = pgtype.BoolArrayOID, pgtype.Int8ArrayOID
	oids[insertArg.now] = pgtype.TimestamptzOID
	return oids
}

// benchRows are 100 rows of a queue with most properties set.
func benchRows(b testing.TB, now time.Time) []messageRow {
	e := &broker.Entity{ID: 1, Kind: broker.KindQueue, Path: "q", Props: broker.DefaultProperties(broker.KindQueue)}
	rows := make([]messageRow, 100)
	for i := range rows {
		m := broker.Message{
			Body: make([]byte, 256), MessageID: "id-" + strconv.Itoa(i), CorrelationID: "c", Label: "l",
			To: "t", ReplyTo: "r", ContentType: "application/json", SessionID: "s", ReplyToSessionID: "rs",
			TimeToLive: time.Hour, UserProperties: broker.UserProperties{{Name: "a", Value: "b"}, {Name: "n", Value: int64(i)}},
		}
		if err := prepareMessage(e, &m, now); err != nil {
			b.Fatal(err)
		}
		if err := rows[i].set(e.ID, &m, nil, true); err != nil {
			b.Fatal(err)
		}
	}
	return rows
}

// BenchmarkMessageRows measures turning 100 prepared messages into rows, as a send does.
func BenchmarkMessageRows(b *testing.B) {
	rows := benchRows(b, time.Now())
	msgs := make([]broker.Message, len(rows))
	for i := range rows {
		m, err := rows[i].message()
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = *m
	}
	b.ReportAllocs()
	for b.Loop() {
		rows = rows[:0]
		for i := range msgs {
			rows = append(rows, messageRow{})
			if err := rows[i].set(1, &msgs[i], nil, false); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkInsertArgsWire is BenchmarkInsertArgsEncode with the encoding queryWire does instead
// of pgx's (wire.go), into a buffer of its own each time, as a send does.
func BenchmarkInsertArgsWire(b *testing.B) {
	now := time.Now()
	rows := benchRows(b, now)
	oids := insertArgOIDs()
	b.ReportAllocs()
	for b.Loop() {
		var w wireArgs
		if err := w.encode(oids, insertArgs(rows, now)); err != nil {
			b.Fatal(err)
		}
	}
}
