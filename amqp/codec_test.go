package amqp

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hx decodes hexadecimal written with spaces for readability.
func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func rep(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var uuid1 = UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}

// TestAppendValue checks that every Go representation encodes with the smallest
// constructor, at the boundaries where the constructor changes.
func TestAppendValue(t *testing.T) {
	long256 := strings.Repeat("x", 256)
	for _, tc := range []struct {
		name string
		in   any
		want []byte
	}{
		{"null", nil, hx("40")},
		{"true", true, hx("41")},
		{"false", false, hx("42")},
		{"ubyte", uint8(7), hx("50 07")},
		{"ushort", uint16(0x1234), hx("60 1234")},
		{"uint0", uint32(0), hx("43")},
		{"smalluint", uint32(255), hx("52 ff")},
		{"uint", uint32(256), hx("70 00000100")},
		{"ulong0", uint64(0), hx("44")},
		{"smallulong", uint64(255), hx("53 ff")},
		{"ulong", uint64(256), hx("80 0000000000000100")},
		{"Go uint", uint(1), hx("53 01")},
		{"byte", int8(-1), hx("51 ff")},
		{"short", int16(-2), hx("61 fffe")},
		{"smallint max", int32(127), hx("54 7f")},
		{"smallint min", int32(-128), hx("54 80")},
		{"int above", int32(128), hx("71 00000080")},
		{"int below", int32(-129), hx("71 ffffff7f")},
		{"smalllong", int64(-128), hx("55 80")},
		{"long", int64(math.MaxInt64), hx("81 7fffffffffffffff")},
		{"Go int", 1000, hx("81 00000000000003e8")},
		{"float", float32(1.5), hx("72 3fc00000")},
		{"double", 1.5, hx("82 3ff8000000000000")},
		{"decimal32", Decimal32{1, 2, 3, 4}, hx("74 01020304")},
		{"decimal64", Decimal64{1, 2, 3, 4, 5, 6, 7, 8}, hx("84 0102030405060708")},
		{"decimal128", Decimal128{15: 9}, hx("94 00000000000000000000000000000009")},
		{"char", Char('é'), hx("73 000000e9")},
		{"timestamp", time.UnixMilli(1700000000123), hx("83 0000018bcfe5687b")},
		{"timestamp before epoch", time.UnixMilli(-1), hx("83 ffffffffffffffff")},
		{"uuid", uuid1, hx("98 123456789abcdef01122334455667788")},
		{"vbin8 empty", []byte{}, hx("a0 00")},
		{"vbin8", []byte{1, 2}, hx("a0 02 0102")},
		{"vbin32", rep(0xaa, 256), cat(hx("b0 00000100"), rep(0xaa, 256))},
		{"str8 empty", "", hx("a1 00")},
		{"str8", "hé", hx("a1 03 68c3a9")},
		{"str32", long256, cat(hx("b1 00000100"), []byte(long256))},
		{"sym8", Symbol("a"), hx("a3 01 61")},
		{"sym32", Symbol(long256), cat(hx("b3 00000100"), []byte(long256))},
		{"list0", List{}, hx("45")},
		{"list8", List{true, uint32(1)}, hx("c0 04 02 41 52 01")},
		{"Go []any", []any{nil}, hx("c0 02 01 40")},
		{"list32 by size", List{long256}, cat(hx("d0 00000109 00000001 b1 00000100"), []byte(long256))},
		{"list32 by count", List(make([]any, 256)), cat(hx("d0 00000104 00000100"), rep(0x40, 256))},
		{"map8 empty", Map{}, hx("c1 01 00")},
		{"map8", Map{{Key: "a", Value: nil}}, hx("c1 05 02 a1 01 61 40")},
		{"map keeps order", Map{{Key: Symbol("z"), Value: true}, {Key: Symbol("a"), Value: false}}, hx("c1 09 04 a3 01 7a 41 a3 01 61 42")},
		{"Go map sorted", map[string]any{"b": true, "a": false}, hx("c1 09 04 a1 01 61 42 a1 01 62 41")},
		{"Go symbol map", map[Symbol]any{"a": nil}, hx("c1 05 02 a3 01 61 40")},
		{"map32", Map{{Key: long256, Value: nil}}, cat(hx("d1 0000010a 00000002 b1 00000100"), []byte(long256), hx("40"))},
		{"described", Described{Descriptor: uint64(0x137), Value: "a"}, hx("00 80 0000000000000137 a1 01 61")},
		{"described symbol", &Described{Descriptor: Symbol("x:y"), Value: nil}, hx("00 a3 03 783a79 40")},
		{"array smallint", Array{Type: TypeInt, Elems: []any{int32(1), int32(-1)}}, hx("e0 04 02 54 01 ff")},
		{"array int", []int32{1, 1000}, hx("e0 0a 02 71 00000001 000003e8")},
		{"array smallulong", []uint64{0, 255}, hx("e0 04 02 53 00 ff")},
		{"array uint", []uint32{256}, hx("e0 06 01 70 00000100")},
		{"array long", []int64{1 << 40}, hx("e0 0a 01 81 0000010000000000")},
		{"array bool", []bool{true, false}, hx("e0 04 02 56 01 00")},
		{"array symbol", []Symbol{"a", "bc"}, hx("e0 07 02 a3 01 61 02 6263")},
		{"array string32", []string{long256}, cat(hx("f0 00000109 00000001 b1 00000100"), []byte(long256))},
		{"array uuid", []UUID{uuid1}, cat(hx("e0 12 01 98"), uuid1[:])},
		{"array timestamp", []time.Time{time.UnixMilli(1)}, hx("e0 0a 01 83 0000000000000001")},
		{"array binary", [][]byte{{1}}, hx("e0 04 01 a0 01 01")},
		{"array double", []float64{1.5}, hx("e0 0a 01 82 3ff8000000000000")},
		{"array empty", Array{Type: TypeUUID}, hx("e0 02 00 98")},
		{"array described", Array{Descriptor: Symbol("d"), Type: TypeString, Elems: []any{"a"}}, hx("e0 08 01 00 a3 01 64 a1 01 61")},
		{"array of lists", Array{Type: TypeList, Elems: []any{List{}, List{true}}}, hx("e0 13 02 d0 00000004 00000000 00000005 00000001 41")},
		{"array of maps", Array{Type: TypeMap, Elems: []any{Map{}}}, hx("e0 0a 01 d1 00000004 00000000")},
		{"array of arrays", Array{Type: TypeArray, Elems: []any{Array{Type: TypeUbyte, Elems: []any{uint8(1)}}}}, hx("e0 0c 01 f0 00000006 00000001 50 01")},
		{"error", &Error{Condition: ErrCondNotFound, Description: "x"}, hx("00 53 1d c0 15 03 a3 0e 616d71703a6e6f742d666f756e64 a1 01 78 40")},
		{"accepted", Accepted{}, hx("00 53 24 45")},
	} {
		got, err := AppendValue(nil, tc.in)
		if err != nil {
			t.Errorf("%s: AppendValue(%v) error %v", tc.name, tc.in, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: AppendValue(%v) = % x; want % x", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestAppendValueErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
	}{
		{"Go struct", struct{}{}},
		{"channel", make(chan int)},
		{"surrogate char", Char(0xd800)},
		{"char beyond Unicode", Char(0x110000)},
		{"mixed array", Array{Type: TypeInt, Elems: []any{int32(1), int64(2)}}},
		{"untyped empty array", Array{}},
		{"list holding a struct", List{struct{}{}}},
		{"map holding a func", Map{{Key: "f", Value: func() {}}}},
	} {
		if _, err := AppendValue(nil, tc.in); !errors.Is(err, ErrEncode) {
			t.Errorf("%s: AppendValue error %v; want ErrEncode", tc.name, err)
		}
	}
}

// TestDecodeValue checks decoding of every constructor, including the wide and zero-width
// forms the encoder does not produce.
func TestDecodeValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want any
	}{
		{"null", hx("40"), nil},
		{"true", hx("41"), true},
		{"false", hx("42"), false},
		{"boolean true", hx("56 01"), true},
		{"boolean false", hx("56 00"), false},
		{"ubyte", hx("50 ff"), uint8(255)},
		{"ushort", hx("60 ffff"), uint16(65535)},
		{"uint0", hx("43"), uint32(0)},
		{"smalluint", hx("52 05"), uint32(5)},
		{"uint wide small", hx("70 00000005"), uint32(5)},
		{"ulong0", hx("44"), uint64(0)},
		{"smallulong", hx("53 05"), uint64(5)},
		{"ulong", hx("80 ffffffffffffffff"), uint64(math.MaxUint64)},
		{"byte", hx("51 80"), int8(-128)},
		{"short", hx("61 8000"), int16(-32768)},
		{"smallint", hx("54 ff"), int32(-1)},
		{"int", hx("71 80000000"), int32(math.MinInt32)},
		{"smalllong", hx("55 ff"), int64(-1)},
		{"long", hx("81 8000000000000000"), int64(math.MinInt64)},
		{"float", hx("72 3fc00000"), float32(1.5)},
		{"double", hx("82 bff8000000000000"), -1.5},
		{"decimal32", hx("74 01020304"), Decimal32{1, 2, 3, 4}},
		{"decimal64", hx("84 0102030405060708"), Decimal64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"decimal128", hx("94 0102030405060708090a0b0c0d0e0f10"), Decimal128{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{"char", hx("73 0001f600"), Char(0x1f600)},
		{"timestamp", hx("83 0000018bcfe5687b"), time.UnixMilli(1700000000123).UTC()},
		{"uuid", cat(hx("98"), uuid1[:]), uuid1},
		{"vbin8", hx("a0 02 0102"), []byte{1, 2}},
		{"vbin8 empty", hx("a0 00"), []byte{}},
		{"vbin32", hx("b0 00000001 ff"), []byte{0xff}},
		{"str8", hx("a1 02 6869"), "hi"},
		{"str32", hx("b1 00000002 6869"), "hi"},
		{"sym8", hx("a3 01 61"), Symbol("a")},
		{"sym32", hx("b3 00000001 61"), Symbol("a")},
		{"list0", hx("45"), List{}},
		{"list8", hx("c0 03 02 41 40"), List{true, nil}},
		{"list32", hx("d0 00000006 00000002 41 40"), List{true, nil}},
		{"list8 empty", hx("c0 01 00"), List{}},
		{"map8", hx("c1 05 02 a3 01 61 41"), Map{{Key: Symbol("a"), Value: true}}},
		{"map32", hx("d1 00000008 00000002 a3 01 61 41"), Map{{Key: Symbol("a"), Value: true}}},
		{"map duplicate keys kept", hx("c1 05 04 41 41 41 42"), Map{{Key: true, Value: true}, {Key: true, Value: false}}},
		{"described", hx("00 53 75 a0 01 ff"), Described{Descriptor: uint64(0x75), Value: []byte{0xff}}},
		{"described described", hx("00 00 53 01 53 02 40"), Described{Descriptor: Described{Descriptor: uint64(1), Value: uint64(2)}, Value: nil}},
		{"array8 smallint", hx("e0 04 02 54 01 02"), Array{Type: TypeInt, Elems: []any{int32(1), int32(2)}}},
		{"array32 int", hx("f0 0000000d 00000002 71 00000001 00000002"), Array{Type: TypeInt, Elems: []any{int32(1), int32(2)}}},
		{"array of uint0", hx("e0 02 03 43"), Array{Type: TypeUint, Elems: []any{uint32(0), uint32(0), uint32(0)}}},
		{"array of ulong0", hx("e0 02 01 44"), Array{Type: TypeUlong, Elems: []any{uint64(0)}}},
		{"array of true", hx("e0 02 02 41"), Array{Type: TypeBoolean, Elems: []any{true, true}}},
		{"array of null", hx("e0 02 02 40"), Array{Type: TypeNull, Elems: []any{nil, nil}}},
		{"array of list0", hx("e0 02 01 45"), Array{Type: TypeList, Elems: []any{List{}}}},
		{"array of list8", hx("e0 06 02 c0 01 00 01 00"), Array{Type: TypeList, Elems: []any{List{}, List{}}}},
		{"array of str8", hx("e0 05 02 a1 01 61 00"), Array{Type: TypeString, Elems: []any{"a", ""}}},
		{"array of sym32", hx("e0 08 01 b3 00000002 6162"), Array{Type: TypeSymbol, Elems: []any{Symbol("ab")}}},
		{"array described", hx("e0 07 02 00 53 07 50 01 02"), Array{Descriptor: uint64(7), Type: TypeUbyte, Elems: []any{uint8(1), uint8(2)}}},
		{"array of arrays", hx("e0 06 01 e0 03 01 50 09"), Array{Type: TypeArray, Elems: []any{Array{Type: TypeUbyte, Elems: []any{uint8(9)}}}}},
		{"array empty", hx("e0 02 00 98"), Array{Type: TypeUUID, Elems: []any{}}},
	} {
		got, n, err := DecodeValue(tc.in)
		if err != nil {
			t.Errorf("%s: DecodeValue(% x) error %v", tc.name, tc.in, err)
			continue
		}
		if n != len(tc.in) {
			t.Errorf("%s: DecodeValue(% x) took %d bytes; want %d", tc.name, tc.in, n, len(tc.in))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: DecodeValue(% x) = %#v; want %#v", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestRoundTrip encodes and decodes values whose decoded form is their Go form.
func TestRoundTrip(t *testing.T) {
	long := strings.Repeat("y", 70000)
	for _, v := range []any{
		nil, true, false, uint8(0), uint16(9), uint32(math.MaxUint32), uint64(math.MaxUint64),
		int8(math.MinInt8), int16(math.MaxInt16), int32(math.MinInt32), int64(math.MinInt64),
		float32(-0.25), math.Inf(1), Decimal64{9}, Char(0x10ffff), time.UnixMilli(-62135596800001).UTC(),
		time.UnixMilli(253402300799999).UTC(), uuid1, []byte(long), long, Symbol(long),
		List{List{List{}}, Map{}, Array{Type: TypeNull, Elems: []any{}}},
		Map{{Key: []byte{1}, Value: List{uint64(1)}}, {Key: nil, Value: Map{{Key: int64(1), Value: "x"}}}},
		Array{Type: TypeString, Elems: []any{long, "a"}},
		Array{Type: TypeBinary, Elems: []any{[]byte(long)}},
		Array{Type: TypeSymbol, Elems: []any{Symbol(long)}},
		Array{Type: TypeChar, Elems: []any{Char('a')}},
		Array{Type: TypeDecimal128, Elems: []any{Decimal128{1}}},
		Array{Type: TypeFloat, Elems: []any{float32(1)}},
		Array{Type: TypeShort, Elems: []any{int16(-1)}},
		Array{Type: TypeByte, Elems: []any{int8(-1)}},
		Array{Type: TypeUshort, Elems: []any{uint16(1)}},
		Array{Descriptor: uint64(0x137000000c), Type: TypeMap, Elems: []any{Map{{Key: "k", Value: "v"}}}},
		Described{Descriptor: Symbol("com.microsoft:session-filter"), Value: "s1"},
		List(make([]any, 300)),
	} {
		b, err := AppendValue(nil, v)
		if err != nil {
			t.Errorf("AppendValue(%T) error %v", v, err)
			continue
		}
		got, n, err := DecodeValue(b)
		if err != nil || n != len(b) {
			t.Errorf("DecodeValue(AppendValue(%T)) = %d bytes of %d, error %v", v, n, len(b), err)
			continue
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip of %T = %#v", v, got)
		}
	}
}

// TestDecodeMalformed feeds inputs that must fail cleanly with ErrMalformed.
func TestDecodeMalformed(t *testing.T) {
	var deep []byte
	for range 70 {
		deep = append(deep, 0x00, 0x53, 0x01) // described, nested 70 deep
	}
	deep = append(deep, 0x40)
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"unknown constructor", hx("01")},
		{"reserved constructor", hx("ff")},
		{"truncated ushort", hx("60 01")},
		{"truncated uint", hx("70 000000")},
		{"truncated ulong", hx("80 00")},
		{"truncated uuid", hx("98 0102")},
		{"boolean byte 2", hx("56 02")},
		{"surrogate char", hx("73 0000d800")},
		{"char beyond Unicode", hx("73 00110000")},
		{"str8 length beyond input", hx("a1 05 6162")},
		{"str32 length beyond input", hx("b1 ffffffff 61")},
		{"vbin32 length beyond input", hx("b0 7fffffff")},
		{"list8 size beyond input", hx("c0 05 01 40")},
		{"list8 size zero", hx("c0 00")},
		{"list8 count beyond size", hx("c0 02 05 40")},
		{"list8 size beyond content", hx("c0 03 01 40 40")},
		{"list32 size below 4", hx("d0 00000002 0000")},
		{"list32 huge count", hx("d0 00000005 ffffffff 40")},
		{"list element beyond list", hx("c0 02 01 a1 05 6162636465")},
		{"map odd count", hx("c1 02 01 40")},
		{"map32 huge count", hx("d1 00000006 fffffffe 40 40")},
		{"array huge count", hx("f0 00000006 ffffffff 71 00")},
		{"array huge zero-width count", hx("f0 00000005 ffffffff 43")},
		{"array of uint truncated", hx("e0 04 02 71 0000")},
		{"array unknown element", hx("e0 02 01 01")},
		{"array element beyond array", hx("e0 03 01 a1 05")},
		{"array leftover bytes", hx("e0 04 01 50 01 02")},
		{"described without value", hx("00 53 01")},
		{"nested too deep", deep},
		{"nested lists too deep", nestedLists(70)},
		{"string not UTF-8", hx("a1 02 c328")},
		{"symbol not ASCII", hx("a3 02 c3a9")},
		{"map entry of string not UTF-8", hx("c1 05 02 a1 01 ff 40")},
	} {
		_, _, err := DecodeValue(tc.in)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeValue(% x) error %v; want ErrMalformed", tc.name, tc.in, err)
		}
	}
}

// TestDecodeBounded checks that counts announcing billions of elements allocate nothing
// close to that: the decoder bounds them by the input it has.
func TestDecodeBounded(t *testing.T) {
	inputs := [][]byte{
		hx("f0 00000005 ffffffff 43"),
		hx("f0 00000005 ffffffff 40"),
		hx("d0 00000008 ffffffff 40404040"),
		hx("d1 00000008 fffffffe 40404040"),
		hx("f0 0000000a 7fffffff 00 53 01 45"),
		cat(hx("e0 ff ff 43"), rep(0xe0, 252)), // nested zero-width arrays share one budget
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, in := range inputs {
		if _, _, err := DecodeValue(in); err == nil {
			t.Errorf("DecodeValue(% x) succeeded", in)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Errorf("decoding hostile counts allocated %d bytes", d)
	}
	if _, _, err := DecodeValue(nestedLists(60)); err != nil {
		t.Errorf("60 nested lists: %v", err)
	}
	// Zero-width elements are allowed, within a budget proportional to the input.
	ok := hx("e0 02 ff 43")
	if v, _, err := DecodeValue(ok); err != nil || len(v.(Array).Elems) != 255 {
		t.Errorf("DecodeValue(% x) = %v, %v; want 255 zero uints", ok, v, err)
	}
}

// A frame of nulls costs its decoded values no more than a few times its size: a 240 KB map of
// null→null entries (32 bytes each in Go, 2 on the wire) is refused, not turned into 3.8 MB; the
// same map at 4 KB, and a map of realistic entries at 240 KB, decode.
func TestDecodeMemoryBudget(t *testing.T) {
	nullMap := func(entries int) []byte {
		b := hx("d1 00000000 00000000")
		binary.BigEndian.PutUint32(b[1:], uint32(4+2*entries))
		binary.BigEndian.PutUint32(b[5:], uint32(2*entries))
		return append(b, rep(0x40, 2*entries)...)
	}
	if _, _, err := DecodeValue(nullMap(120_000)); !errors.Is(err, ErrMalformed) {
		t.Errorf("a 240 KB map of nulls decoded: %v", err)
	}
	if _, _, err := DecodeValue(nullMap(2_000)); err != nil {
		t.Errorf("a 4 KB map of nulls: %v", err)
	}
	props := Map{}
	for i := range 10_000 {
		props = append(props, MapEntry{Key: fmt.Sprintf("property-%05d", i), Value: int64(i)})
	}
	b, err := AppendValue(nil, props)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := DecodeValue(b); err != nil {
		t.Errorf("a %d-byte map of 10,000 properties: %v", len(b), err)
	}
}

// nestedLists returns n lists, each holding the next, the innermost empty: well-formed but
// deeper than the decoder allows when n > 64.
func nestedLists(n int) []byte {
	b := hx("45")
	for range n {
		b = cat(hx("c0"), []byte{byte(len(b) + 1), 1}, b)
	}
	return b
}

func TestMapHelpers(t *testing.T) {
	var m Map
	m.Set(Symbol("a"), 1)
	m.Set("a", 2)
	m.Set([]byte("b"), 3)
	m.Set(Symbol("a"), 4)
	if len(m) != 3 {
		t.Fatalf("Set kept %d entries; want 3: %v", len(m), m)
	}
	for _, tc := range []struct {
		key  any
		want any
		ok   bool
	}{
		{Symbol("a"), 4, true},
		{"a", 2, true},
		{[]byte("b"), 3, true},
		{"b", nil, false},
		{List{}, nil, false},
		{time.UnixMilli(5), nil, false},
	} {
		if v, ok := m.Get(tc.key); v != tc.want || ok != tc.ok {
			t.Errorf("Get(%#v) = %v, %v; want %v, %v", tc.key, v, ok, tc.want, tc.ok)
		}
	}
	m.Delete("a")
	if _, ok := m.Get("a"); ok || len(m) != 2 || m[0].Key != Symbol("a") {
		t.Errorf("after Delete: %v", m)
	}
	ts := Map{{Key: time.UnixMilli(5).UTC(), Value: true}}
	if _, ok := ts.Get(time.UnixMilli(5)); !ok {
		t.Error("timestamp keys compare by instant")
	}
}

func TestUUIDString(t *testing.T) {
	if got, want := uuid1.String(), "12345678-9abc-def0-1122-334455667788"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}
