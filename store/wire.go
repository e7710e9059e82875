package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The send and settle statements take a column of values per argument: 20 to 30 arrays, one
// element per message, with each message's body among them. pgx encodes an array element by
// element through its type map, into a buffer it starts at 256 bytes for every statement and
// grows by doubling, and allocates for each element of a nullable type (the profile of a REST
// send at 64 clients: 8% of the gateway's CPU and 60% of the bytes it allocated, for 1 KiB
// bodies). The arrays' types are few and fixed, so they are written here in PostgreSQL's binary
// format, into one buffer sized for them first; pgconn sends them as they are.
// TestWireMatchesPgx checks the bytes against pgx's encoding of the same values.

// wireArgs are a statement's arguments in binary format, and the buffer that holds them.
type wireArgs struct {
	values  [][]byte
	formats []int16
	buf     []byte
}

// encode writes args, whose types PostgreSQL gave as oids (the prepared statement's).
func (w *wireArgs) encode(oids []uint32, args []any) error {
	if len(oids) != len(args) {
		return fmt.Errorf("store: statement takes %d arguments, %d given", len(oids), len(args))
	}
	size := 0
	for _, a := range args {
		size += wireSize(a)
	}
	w.buf = make([]byte, 0, size)
	w.values = make([][]byte, len(args))
	w.formats = make([]int16, len(args))
	for i, a := range args {
		start := len(w.buf)
		var err error
		if w.buf, err = appendWire(w.buf, oids[i], a); err != nil {
			return fmt.Errorf("store: argument $%d: %w", i+1, err)
		}
		w.values[i] = w.buf[start:len(w.buf):len(w.buf)]
		w.formats[i] = pgtype.BinaryFormatCode
	}
	return nil
}

// Binary sizes: an array's header (dimensions, null flag, element type, length, lower bound),
// and each element's length word.
const (
	arrayHeaderSize = 20
	elemLenSize     = 4
)

// wireSize is about the bytes a's encoding takes (exact for the fixed-size types), so that the
// buffer is allocated once.
func wireSize(a any) int {
	fixed := func(n, width int) int { return arrayHeaderSize + n*(elemLenSize+width) }
	switch v := a.(type) {
	case []int64:
		return fixed(len(v), 8)
	case pgtype.FlatArray[int64]:
		return fixed(len(v), 8)
	case []int32:
		return fixed(len(v), 4)
	case pgtype.FlatArray[int32]:
		return fixed(len(v), 4)
	case []int16:
		return fixed(len(v), 2)
	case pgtype.FlatArray[int16]:
		return fixed(len(v), 2)
	case []bool:
		return fixed(len(v), 1)
	case pgtype.FlatArray[bool]:
		return fixed(len(v), 1)
	case [][16]byte:
		return fixed(len(v), 16)
	case pgtype.FlatArray[pgtype.Timestamptz]:
		return fixed(len(v), 8)
	case pgtype.FlatArray[pgtype.Interval]:
		return fixed(len(v), 16)
	case time.Time:
		return 8
	case []string:
		return stringsSize(v)
	case pgtype.FlatArray[string]:
		return stringsSize(v)
	case pgtype.FlatArray[pgtype.Text]:
		n := fixed(len(v), 0)
		for _, t := range v {
			n += len(t.String)
		}
		return n
	case [][]byte:
		return bytesSize(v)
	case pgtype.FlatArray[[]byte]:
		return bytesSize(v)
	}
	return 0
}

func stringsSize[S ~[]string](v S) int {
	n := arrayHeaderSize + len(v)*elemLenSize
	for _, s := range v {
		n += len(s)
	}
	return n
}

func bytesSize[S ~[][]byte](v S) int {
	n := arrayHeaderSize + len(v)*(elemLenSize+1) // +1: jsonb's version byte
	for _, b := range v {
		n += len(b)
	}
	return n
}

// appendWire appends a in binary format as the type oid.
func appendWire(buf []byte, oid uint32, a any) ([]byte, error) {
	switch v := a.(type) {
	case []int64:
		return appendFixed(buf, oid, pgtype.Int8ArrayOID, pgtype.Int8OID, v, appendInt64)
	case pgtype.FlatArray[int64]:
		return appendFixed(buf, oid, pgtype.Int8ArrayOID, pgtype.Int8OID, v, appendInt64)
	case []int32:
		return appendFixed(buf, oid, pgtype.Int4ArrayOID, pgtype.Int4OID, v, appendInt32)
	case pgtype.FlatArray[int32]:
		return appendFixed(buf, oid, pgtype.Int4ArrayOID, pgtype.Int4OID, v, appendInt32)
	case []int16:
		return appendFixed(buf, oid, pgtype.Int2ArrayOID, pgtype.Int2OID, v, appendInt16)
	case pgtype.FlatArray[int16]:
		return appendFixed(buf, oid, pgtype.Int2ArrayOID, pgtype.Int2OID, v, appendInt16)
	case []bool:
		return appendFixed(buf, oid, pgtype.BoolArrayOID, pgtype.BoolOID, v, appendBool)
	case pgtype.FlatArray[bool]:
		return appendFixed(buf, oid, pgtype.BoolArrayOID, pgtype.BoolOID, v, appendBool)
	case [][16]byte:
		return appendFixed(buf, oid, pgtype.UUIDArrayOID, pgtype.UUIDOID, v, func(b []byte, u [16]byte) []byte { return append(b, u[:]...) })
	case []string:
		return appendFixed(buf, oid, pgtype.TextArrayOID, pgtype.TextOID, v, appendString)
	case pgtype.FlatArray[string]:
		return appendFixed(buf, oid, pgtype.TextArrayOID, pgtype.TextOID, v, appendString)
	case pgtype.FlatArray[pgtype.Text]:
		return appendNullable(buf, oid, pgtype.TextArrayOID, pgtype.TextOID, v,
			func(t pgtype.Text) bool { return t.Valid }, func(b []byte, t pgtype.Text) []byte { return append(b, t.String...) })
	case pgtype.FlatArray[pgtype.Timestamptz]:
		return appendNullable(buf, oid, pgtype.TimestamptzArrayOID, pgtype.TimestamptzOID, v,
			func(t pgtype.Timestamptz) bool { return t.Valid }, appendTimestamptz)
	case pgtype.FlatArray[pgtype.Interval]:
		return appendNullable(buf, oid, pgtype.IntervalArrayOID, pgtype.IntervalOID, v,
			func(iv pgtype.Interval) bool { return iv.Valid }, appendInterval)
	case time.Time:
		if oid != pgtype.TimestamptzOID {
			return nil, fmt.Errorf("no binary encoding of %T as type %d", a, oid)
		}
		return appendTimestamptz(buf, pgtype.Timestamptz{Time: v, Valid: true}), nil
	case [][]byte:
		return appendBytesArray(buf, oid, v)
	case pgtype.FlatArray[[]byte]:
		return appendBytesArray(buf, oid, v)
	}
	return nil, fmt.Errorf("no binary encoding of %T as type %d", a, oid)
}

// appendBytesArray writes a bytea[] or, each element prefixed with jsonb's format version, a
// jsonb[]; a nil element is NULL.
func appendBytesArray[S ~[][]byte](buf []byte, oid uint32, v S) ([]byte, error) {
	switch oid {
	case pgtype.ByteaArrayOID:
		return appendNullable(buf, oid, oid, pgtype.ByteaOID, v,
			func(b []byte) bool { return b != nil }, func(b, e []byte) []byte { return append(b, e...) })
	case pgtype.JSONBArrayOID:
		return appendNullable(buf, oid, oid, pgtype.JSONBOID, v,
			func(b []byte) bool { return b != nil }, func(b, e []byte) []byte { return append(append(b, 1), e...) })
	}
	return nil, fmt.Errorf("no binary encoding of %T as type %d", v, oid)
}

// appendFixed writes an array with no NULL elements: appendNullable without a validity call per
// element, which most of a send's and a settlement's columns would pay for nothing.
func appendFixed[S ~[]E, E any](buf []byte, oid, arrayOID, elemOID uint32, v S, elem func([]byte, E) []byte) ([]byte, error) {
	if oid != arrayOID {
		return nil, fmt.Errorf("no binary encoding of %T as type %d", v, oid)
	}
	buf = appendArrayHeader(buf, false, elemOID, len(v))
	for _, e := range v {
		at := len(buf)
		buf = elem(append(buf, 0, 0, 0, 0), e)
		binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-elemLenSize))
	}
	return buf, nil
}

// appendArrayHeader writes a one-dimensional array's header (an empty one as one dimension of
// length 0, as pgx writes it; array_recv takes that and no dimensions alike).
func appendArrayHeader(buf []byte, hasNull bool, elemOID uint32, n int) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 1)
	if hasNull {
		buf = binary.BigEndian.AppendUint32(buf, 1)
	} else {
		buf = binary.BigEndian.AppendUint32(buf, 0)
	}
	buf = binary.BigEndian.AppendUint32(buf, elemOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	return binary.BigEndian.AppendUint32(buf, 1) // lower bound
}

// appendNullable writes an array of v's elements, NULL where valid says so.
func appendNullable[S ~[]E, E any](buf []byte, oid, arrayOID, elemOID uint32, v S, valid func(E) bool, elem func([]byte, E) []byte) ([]byte, error) {
	if oid != arrayOID {
		return nil, fmt.Errorf("no binary encoding of %T as type %d", v, oid)
	}
	hasNull := false
	for _, e := range v {
		if !valid(e) {
			hasNull = true
			break
		}
	}
	buf = appendArrayHeader(buf, hasNull, elemOID, len(v))
	for _, e := range v {
		if !valid(e) {
			buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1: NULL
			continue
		}
		at := len(buf)
		buf = elem(append(buf, 0, 0, 0, 0), e)
		binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-elemLenSize))
	}
	return buf, nil
}

func appendInt64(b []byte, v int64) []byte   { return binary.BigEndian.AppendUint64(b, uint64(v)) }
func appendInt32(b []byte, v int32) []byte   { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func appendInt16(b []byte, v int16) []byte   { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func appendString(b []byte, s string) []byte { return append(b, s...) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// y2kMicros is PostgreSQL's epoch (2000-01-01 UTC), in microseconds after Unix's.
const y2kMicros = 946684800 * 1000000

func appendTimestamptz(b []byte, t pgtype.Timestamptz) []byte {
	switch t.InfinityModifier {
	case pgtype.Infinity:
		return appendInt64(b, math.MaxInt64)
	case pgtype.NegativeInfinity:
		return appendInt64(b, math.MinInt64)
	}
	return appendInt64(b, t.Time.Unix()*1000000+int64(t.Time.Nanosecond())/1000-y2kMicros)
}

func appendInterval(b []byte, iv pgtype.Interval) []byte {
	b = appendInt64(b, iv.Microseconds)
	b = appendInt32(b, iv.Days)
	return appendInt32(b, iv.Months)
}

// onConn runs fn on a connection of q: one the pool lends for fn's time, or the transaction's.
func onConn(ctx context.Context, q querier, fn func(*pgx.Conn) error) error {
	switch q := q.(type) {
	case *pgxpool.Pool:
		return q.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return fn(c.Conn()) })
	case pgx.Tx:
		return fn(q.Conn())
	}
	return fmt.Errorf("store: cannot run a statement on a %T", q)
}

// queryWire runs st on c, prepared under its own name (once per connection), with args in
// binary format, and hands each row to row, its values in binary format.
func queryWire(ctx context.Context, c *pgx.Conn, st statement, args []any, row func(*wireRow) error) error {
	sd, err := c.Prepare(ctx, st.preparedName(), st.sql)
	if err != nil {
		return err
	}
	var w wireArgs
	if err := w.encode(sd.ParamOIDs, args); err != nil {
		return err
	}
	rr := c.PgConn().ExecPrepared(ctx, sd.Name, w.values, w.formats, []int16{pgtype.BinaryFormatCode})
	r := wireRow{m: c.TypeMap()}
	var rowErr error
	for rr.NextRow() {
		if rowErr == nil {
			r.fields, r.values = rr.FieldDescriptions(), rr.Values()
			rowErr = row(&r)
		}
	}
	if _, err := rr.Close(); err != nil {
		return err
	}
	return rowErr
}

// wireRow is the current row of a statement queryWire runs, and the scan plans of its columns,
// made for the first row and kept for the others (as pgx.Rows keeps them).
type wireRow struct {
	m      *pgtype.Map
	fields []pgconn.FieldDescription
	values [][]byte
	plans  []pgtype.ScanPlan
	types  []reflect.Type
}

// scan reads the row's columns into dest, one pointer per column, as pgx.Rows.Scan does.
func (r *wireRow) scan(dest ...any) error {
	if len(dest) != len(r.values) || len(r.fields) != len(r.values) {
		return fmt.Errorf("store: %d columns read into %d values", len(r.values), len(dest))
	}
	if r.plans == nil {
		r.plans, r.types = make([]pgtype.ScanPlan, len(dest)), make([]reflect.Type, len(dest))
	}
	for i, d := range dest {
		f := r.fields[i]
		if t := reflect.TypeOf(d); r.plans[i] == nil || r.types[i] != t {
			r.plans[i], r.types[i] = r.m.PlanScan(f.DataTypeOID, f.Format, d), t
		}
		if err := r.plans[i].Scan(r.values[i], d); err != nil {
			return fmt.Errorf("store: column %s: %w", f.Name, err)
		}
	}
	return nil
}
