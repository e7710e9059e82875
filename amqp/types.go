package amqp

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"time"
)

// Go representations of AMQP values (part 1 of the specification).
//
// Where the Go type is unambiguous the plain Go type is used: nil (null), bool, uint8
// (ubyte), uint16 (ushort), uint32 (uint), uint64 (ulong), int8 (byte), int16 (short),
// int32 (int), int64 (long), float32 (float), float64 (double), time.Time (timestamp, to the
// millisecond), []byte (binary) and string. The named types below carry the distinctions
// AMQP makes and Go does not. Decoding always yields these types; encoding also accepts Go
// int and uint (as long and ulong), []any (as a list), map[string]any and map[Symbol]any (as
// maps, keys in sorted order) and slices of a single primitive type (as arrays).

// Symbol is an AMQP symbol: a name from a constrained domain (ASCII by the specification; the
// codec does not enforce it).
type Symbol string

// UUID is an AMQP uuid, in the byte order of RFC 4122.
type UUID [16]byte

// String returns u in the canonical 8-4-4-4-12 hexadecimal form.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Char is an AMQP char: a single Unicode code point, encoded as UTF-32BE.
type Char rune

// Decimal32, Decimal64 and Decimal128 hold IEEE 754 decimal floating point values in their
// encoded form (big-endian, as on the wire). The codec decodes and re-encodes them without
// interpreting them.
type (
	Decimal32  [4]byte
	Decimal64  [8]byte
	Decimal128 [16]byte
)

// Described is a described value: a descriptor (usually a uint64 code or a Symbol name) and
// the value it describes. Performatives, message sections, delivery states and filters are
// described types; decoding a value of a described type the codec does not model yields a
// Described.
type Described struct {
	Descriptor any
	Value      any
}

// List is an AMQP list: a sequence of values of any types.
type List []any

// MapEntry is one key/value pair of a Map.
type MapEntry struct {
	Key   any
	Value any
}

// Map is an AMQP map. AMQP maps are ordered and their keys may be of any type, so a Map is a
// slice of entries in wire order. Keys compare by type and value: Symbol("a") and "a" are
// different keys. A nil Map is absent; an empty non-nil Map is an empty map.
type Map []MapEntry

// Get returns the value stored under key and whether the key is present.
func (m Map) Get(key any) (any, bool) {
	for _, e := range m {
		if keyEqual(e.Key, key) {
			return e.Value, true
		}
	}
	return nil, false
}

// Set stores value under key, replacing the value of an existing entry in place or appending
// a new entry.
func (m *Map) Set(key, value any) {
	for i := range *m {
		if keyEqual((*m)[i].Key, key) {
			(*m)[i].Value = value
			return
		}
	}
	*m = append(*m, MapEntry{Key: key, Value: value})
}

// Delete removes the entry with key, keeping the order of the others.
func (m *Map) Delete(key any) {
	for i := range *m {
		if keyEqual((*m)[i].Key, key) {
			*m = append((*m)[:i], (*m)[i+1:]...)
			return
		}
	}
}

// keyEqual compares two map keys by AMQP type and value without panicking on keys that are
// not comparable in Go (binary, lists, maps, arrays).
func keyEqual(a, b any) bool {
	switch av := a.(type) {
	case []byte:
		bv, ok := b.([]byte)
		return ok && bytes.Equal(av, bv)
	case time.Time:
		bv, ok := b.(time.Time)
		return ok && av.Equal(bv)
	case nil, bool, uint8, uint16, uint32, uint64, int8, int16, int32, int64, float32, float64,
		string, Symbol, UUID, Char, Decimal32, Decimal64, Decimal128:
		return a == b
	}
	return false
}

// Type identifies an AMQP primitive type by its canonical (widest) constructor code. It names
// the element type of an Array.
type Type uint8

// The AMQP primitive types.
const (
	TypeNull       Type = 0x40
	TypeBoolean    Type = 0x56
	TypeUbyte      Type = 0x50
	TypeUshort     Type = 0x60
	TypeUint       Type = 0x70
	TypeUlong      Type = 0x80
	TypeByte       Type = 0x51
	TypeShort      Type = 0x61
	TypeInt        Type = 0x71
	TypeLong       Type = 0x81
	TypeFloat      Type = 0x72
	TypeDouble     Type = 0x82
	TypeDecimal32  Type = 0x74
	TypeDecimal64  Type = 0x84
	TypeDecimal128 Type = 0x94
	TypeChar       Type = 0x73
	TypeTimestamp  Type = 0x83
	TypeUUID       Type = 0x98
	TypeBinary     Type = 0xb0
	TypeString     Type = 0xb1
	TypeSymbol     Type = 0xb3
	TypeList       Type = 0xd0
	TypeMap        Type = 0xd1
	TypeArray      Type = 0xf0
)

var typeNames = map[Type]string{
	TypeNull: "null", TypeBoolean: "boolean", TypeUbyte: "ubyte", TypeUshort: "ushort",
	TypeUint: "uint", TypeUlong: "ulong", TypeByte: "byte", TypeShort: "short", TypeInt: "int",
	TypeLong: "long", TypeFloat: "float", TypeDouble: "double", TypeDecimal32: "decimal32",
	TypeDecimal64: "decimal64", TypeDecimal128: "decimal128", TypeChar: "char",
	TypeTimestamp: "timestamp", TypeUUID: "uuid", TypeBinary: "binary", TypeString: "string",
	TypeSymbol: "symbol", TypeList: "list", TypeMap: "map", TypeArray: "array",
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("Type(%#02x)", uint8(t))
}

// Array is an AMQP array: values that all have the same type, Type. When Descriptor is not
// nil the elements are described values sharing that descriptor, and Elems hold the
// underlying values. Elems hold the Go representation of Type (uint32 for TypeUint, UUID for
// TypeUUID, List for TypeList, ...).
type Array struct {
	Descriptor any
	Type       Type
	Elems      []any
}
