package store

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
)

// The claims return their rows as records (claimedRecord) matched to columns by name, as
// pgx.RowToStructByName does, but that matches every row again by reflection: with 64 receivers
// it was 6% of the gateway's CPU in an AMQP peek-lock profile. collectRecords matches the
// columns of a result once, and scans each row into the record's fields through pointers made
// from their offsets (found once per record type).

// recordPlan is how to scan into a record type: its db columns, each field's offset, and how to
// make a typed pointer to a field from its address.
type recordPlan struct {
	names []string
	index map[string]int // of names
	offs  []uintptr
	ptrs  []func(unsafe.Pointer) any
}

var recordPlans sync.Map // reflect.Type → *recordPlan

// recordPlanOf is T's plan: every field with a db tag, embedded structs' fields in their
// place. A field of a type scanPointers lacks is a programming error.
func recordPlanOf[T any]() *recordPlan {
	t := reflect.TypeFor[T]()
	if p, ok := recordPlans.Load(t); ok {
		return p.(*recordPlan)
	}
	p := &recordPlan{index: map[string]int{}}
	p.add(t, 0)
	v, _ := recordPlans.LoadOrStore(t, p)
	return v.(*recordPlan)
}

func (p *recordPlan) add(t reflect.Type, base uintptr) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, tagged := f.Tag.Lookup("db")
		if f.Anonymous && !tagged {
			p.add(f.Type, base+f.Offset)
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ptr, ok := scanPointers[f.Type]
		if name == "" || !ok {
			panic(fmt.Sprintf("store: %s.%s (%s) cannot be scanned into by collectRecords", t.Name(), f.Name, f.Type))
		}
		p.index[name] = len(p.names)
		p.names = append(p.names, name)
		p.offs = append(p.offs, base+f.Offset)
		p.ptrs = append(p.ptrs, ptr)
	}
}

// scanPointers makes, for each field type a record may have, a pointer of that type.
var scanPointers = map[reflect.Type]func(unsafe.Pointer) any{
	reflect.TypeFor[int64]():              pointerTo[int64],
	reflect.TypeFor[int32]():              pointerTo[int32],
	reflect.TypeFor[string]():             pointerTo[string],
	reflect.TypeFor[[]byte]():             pointerTo[[]byte],
	reflect.TypeFor[bool]():               pointerTo[bool],
	reflect.TypeFor[time.Time]():          pointerTo[time.Time],
	reflect.TypeFor[pgtype.Timestamptz](): pointerTo[pgtype.Timestamptz],
	reflect.TypeFor[pgtype.Interval]():    pointerTo[pgtype.Interval],
	reflect.TypeFor[pgtype.UUID]():        pointerTo[pgtype.UUID],
	reflect.TypeFor[pgtype.Text]():        pointerTo[pgtype.Text],
	reflect.TypeFor[pgtype.Int8]():        pointerTo[pgtype.Int8],
	reflect.TypeFor[presentText]():        pointerTo[presentText],
	reflect.TypeFor[broker.State]():       pointerTo[broker.State],
	reflect.TypeFor[broker.BodyType]():    pointerTo[broker.BodyType],
}

func pointerTo[T any](p unsafe.Pointer) any { return (*T)(p) }

// collectRecords reads every row of rows into a T, each column into the field of its name. As
// with pgx.RowToStructByName, a result whose columns are not exactly T's fields (one missing, one
// more, one twice) is an error. expect is how many rows there may be (a claim's size): the
// records are large, and growing their slice by doubling allocated twice what they hold.
func collectRecords[T any](rows pgx.Rows, expect int) ([]T, error) {
	defer rows.Close()
	p := recordPlanOf[T]()
	fds := rows.FieldDescriptions()
	offs := make([]uintptr, len(fds))
	ptrs := make([]func(unsafe.Pointer) any, len(fds))
	seen := make([]bool, len(p.names))
	for i, fd := range fds {
		k, ok := p.index[fd.Name]
		if !ok || seen[k] {
			return nil, fmt.Errorf("store: column %q of a result is not a field of %T, or comes twice", fd.Name, *new(T))
		}
		seen[k] = true
		offs[i], ptrs[i] = p.offs[k], p.ptrs[k]
	}
	if len(fds) != len(p.names) {
		return nil, fmt.Errorf("store: a result has %d columns for the %d fields of %T", len(fds), len(p.names), *new(T))
	}
	// A claim asks for up to its credit but often gets a few rows: room for a few, then append.
	out := make([]T, 0, min(max(expect, 0), 8))
	targets := make([]any, len(fds))
	for rows.Next() {
		// Scanned in place, in the slice returned.
		out = append(out, *new(T))
		base := unsafe.Pointer(&out[len(out)-1])
		for i := range targets {
			targets[i] = ptrs[i](unsafe.Add(base, offs[i]))
		}
		if err := rows.Scan(targets...); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}
