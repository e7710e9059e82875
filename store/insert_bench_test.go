package store

import (
	"github.com/jackc/pgx/v5/pgtype"
	"strconv"
	"testing"
	"time"
)

// BenchmarkInsertArgs measures building the arguments of insertMessagesSQL for 100 rows, the
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
	for b.Loop() {
		args := insertArgs(rows, now)
		for i, a := range args {
			var err error
			if buf, err = m.Encode(beforeOIDs[i], pgtype.BinaryFormatCode, a, buf[:0]); err != nil {
				b.Fatal(i, err)
			}
		}
	}
}

var beforeOIDs = []uint32{pgtype.Int8ArrayOID, pgtype.TimestamptzArrayOID, pgtype.TimestamptzArrayOID, pgtype.TimestamptzArrayOID,
	pgtype.IntervalArrayOID, pgtype.TimestamptzArrayOID,
	pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
	pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
	pgtype.ByteaArrayOID, pgtype.Int4ArrayOID, pgtype.TimestamptzArrayOID, pgtype.Int8ArrayOID, pgtype.Int2ArrayOID,
	pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TimestamptzOID, pgtype.BoolArrayOID,
	pgtype.TextArrayOID, pgtype.Int8ArrayOID, pgtype.Int8ArrayOID}

// benchRows are 100 rows of a queue with most properties set.
func benchRows(b *testing.B, now time.Time) []messageRow {
	e := &Entity{ID: 1, Kind: KindQueue, Path: "q", Props: DefaultProperties(KindQueue)}
	rows := make([]messageRow, 100)
	for i := range rows {
		m := Message{
			Body: make([]byte, 256), MessageID: "id-" + strconv.Itoa(i), CorrelationID: "c", Label: "l",
			To: "t", ReplyTo: "r", ContentType: "application/json", SessionID: "s", ReplyToSessionID: "rs",
			TimeToLive: time.Hour, UserProperties: UserProperties{{Name: "a", Value: "b"}, {Name: "n", Value: int64(i)}},
		}
		if err := prepareMessage(e, &m, now); err != nil {
			b.Fatal(err)
		}
		r, err := newMessageRow(e.ID, &m, "", true)
		if err != nil {
			b.Fatal(err)
		}
		rows[i] = r
	}
	return rows
}
