package store

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestWireMatchesPgx checks the binary encoding queryWire sends against pgx's encoding of the
// same values as the same types: the message insert's arguments for rows with and without
// optional properties, and every type appendWire takes, with NULLs, infinities and empty arrays.
func TestWireMatchesPgx(t *testing.T) {
	m := pgtype.NewMap()
	check := func(name string, oid uint32, a any) {
		t.Helper()
		want, err := m.Encode(oid, pgtype.BinaryFormatCode, a, nil)
		if err != nil {
			t.Fatalf("%s: pgx: %v", name, err)
		}
		got, err := appendWire(nil, oid, a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s (%T as %d):\n got %x\nwant %x", name, a, oid, got, want)
		}
		if size := wireSize(a); size < len(got) && oid != pgtype.JSONBArrayOID {
			t.Errorf("%s: sized %d bytes, wrote %d", name, size, len(got))
		}
	}

	now := time.Date(2026, 11, 28, 9, 30, 1, 123456789, time.UTC)
	rows := benchRows(t, now)
	bare := benchRows(t, now)[:1]
	bare[0].messageColumns = messageColumns{EntityID: 1, messageRecord: messageRecord{MessageID: "m", Body: []byte{}}}
	oids := insertArgOIDs()
	for _, set := range [][]messageRow{rows, bare, nil} {
		for i, a := range insertArgs(set, now) {
			check("insert argument", oids[i], a)
		}
	}

	ts := pgtype.FlatArray[pgtype.Timestamptz]{{Time: now, Valid: true}, {}, {InfinityModifier: pgtype.Infinity, Valid: true},
		{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, {Time: time.Date(1969, 7, 20, 20, 17, 0, 1000, time.UTC), Valid: true}}
	for name, c := range map[string]struct {
		oid uint32
		a   any
	}{
		"int8":            {pgtype.Int8ArrayOID, []int64{0, -1, math.MaxInt64, math.MinInt64}},
		"int8 flat":       {pgtype.Int8ArrayOID, pgtype.FlatArray[int64]{7}},
		"int4":            {pgtype.Int4ArrayOID, []int32{1, -2, math.MaxInt32}},
		"int4 flat":       {pgtype.Int4ArrayOID, pgtype.FlatArray[int32]{}},
		"int2":            {pgtype.Int2ArrayOID, []int16{1, -2, math.MinInt16}},
		"int2 flat":       {pgtype.Int2ArrayOID, pgtype.FlatArray[int16]{3}},
		"bool":            {pgtype.BoolArrayOID, []bool{true, false}},
		"bool flat":       {pgtype.BoolArrayOID, pgtype.FlatArray[bool]{}},
		"uuid":            {pgtype.UUIDArrayOID, [][16]byte{{1, 2, 3}, {15: 0xff}}},
		"text":            {pgtype.TextArrayOID, []string{"", "a", "é ☃"}},
		"text flat":       {pgtype.TextArrayOID, pgtype.FlatArray[string]{}},
		"text null":       {pgtype.TextArrayOID, pgtype.FlatArray[pgtype.Text]{{String: "x", Valid: true}, {}, {Valid: true}}},
		"timestamptz":     {pgtype.TimestamptzArrayOID, ts},
		"timestamptz one": {pgtype.TimestamptzOID, now},
		"interval":        {pgtype.IntervalArrayOID, pgtype.FlatArray[pgtype.Interval]{{Microseconds: -5, Days: 1, Months: 2, Valid: true}, {}}},
		"bytea":           {pgtype.ByteaArrayOID, [][]byte{{}, nil, {0, 1}}},
		"bytea flat":      {pgtype.ByteaArrayOID, pgtype.FlatArray[[]byte]{[]byte("abc")}},
		"jsonb":           {pgtype.JSONBArrayOID, [][]byte{[]byte(`{"a":1}`), nil}},
	} {
		check(name, c.oid, c.a)
	}
}

// TestWireRefusesOtherTypes: a value whose type the statement does not take is an error, not a
// guess.
func TestWireRefusesOtherTypes(t *testing.T) {
	for _, c := range []struct {
		oid uint32
		a   any
	}{
		{pgtype.TextArrayOID, []int64{1}},
		{pgtype.Int8OID, int64(1)},
		{pgtype.TextArrayOID, [][]byte{nil}},
		{pgtype.Int8OID, time.Now()},
	} {
		if _, err := appendWire(nil, c.oid, c.a); err == nil {
			t.Errorf("%T as type %d: encoded", c.a, c.oid)
		}
	}
}
