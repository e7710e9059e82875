package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrEncode is wrapped by every error of the encoder: a Go value with no AMQP representation,
// an invalid char, an array whose elements do not match its type, a value too large for a
// 32-bit length.
var ErrEncode = errors.New("amqp: cannot encode")

// Constructor codes (part 1, section 1.6).
const (
	codeDescribed  = 0x00
	codeNull       = 0x40
	codeTrue       = 0x41
	codeFalse      = 0x42
	codeBool       = 0x56
	codeUbyte      = 0x50
	codeUshort     = 0x60
	codeUint       = 0x70
	codeSmallUint  = 0x52
	codeUint0      = 0x43
	codeUlong      = 0x80
	codeSmallUlong = 0x53
	codeUlong0     = 0x44
	codeByte       = 0x51
	codeShort      = 0x61
	codeInt        = 0x71
	codeSmallInt   = 0x54
	codeLong       = 0x81
	codeSmallLong  = 0x55
	codeFloat      = 0x72
	codeDouble     = 0x82
	codeDecimal32  = 0x74
	codeDecimal64  = 0x84
	codeDecimal128 = 0x94
	codeChar       = 0x73
	codeTimestamp  = 0x83
	codeUUID       = 0x98
	codeVbin8      = 0xa0
	codeVbin32     = 0xb0
	codeStr8       = 0xa1
	codeStr32      = 0xb1
	codeSym8       = 0xa3
	codeSym32      = 0xb3
	codeList0      = 0x45
	codeList8      = 0xc0
	codeList32     = 0xd0
	codeMap8       = 0xc1
	codeMap32      = 0xd1
	codeArray8     = 0xe0
	codeArray32    = 0xf0
)

// encoder is implemented by the types of this package that encode themselves as AMQP
// described values (performatives, terminus, delivery states, errors, message sections), so
// they may also appear inside generic values.
type encoder interface {
	appendAMQP(b []byte) ([]byte, error)
}

// AppendValue appends the AMQP encoding of v to dst, choosing the smallest constructor.
// See the Go representations listed on Symbol's declaration. It returns an error wrapping
// ErrEncode for a value that has no AMQP representation.
func AppendValue(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v, 0)
}

const maxEncodeDepth = 100

func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxEncodeDepth {
		return b, fmt.Errorf("%w: nesting deeper than %d", ErrEncode, maxEncodeDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(b, codeNull), nil
	case bool:
		return appendBool(b, v), nil
	case uint8:
		return append(b, codeUbyte, v), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(b, codeUshort), v), nil
	case uint32:
		return appendUint(b, v), nil
	case uint64:
		return appendUlong(b, v), nil
	case uint:
		return appendUlong(b, uint64(v)), nil
	case int8:
		return append(b, codeByte, uint8(v)), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(b, codeShort), uint16(v)), nil
	case int32:
		return appendInt(b, v), nil
	case int64:
		return appendLong(b, v), nil
	case int:
		return appendLong(b, int64(v)), nil
	case float32:
		return binary.BigEndian.AppendUint32(append(b, codeFloat), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(b, codeDouble), math.Float64bits(v)), nil
	case Decimal32:
		return append(append(b, codeDecimal32), v[:]...), nil
	case Decimal64:
		return append(append(b, codeDecimal64), v[:]...), nil
	case Decimal128:
		return append(append(b, codeDecimal128), v[:]...), nil
	case Char:
		if !validChar(v) {
			return b, fmt.Errorf("%w: char %#x is not a Unicode scalar value", ErrEncode, int32(v))
		}
		return binary.BigEndian.AppendUint32(append(b, codeChar), uint32(v)), nil
	case time.Time:
		return appendTimestamp(b, v), nil
	case UUID:
		return append(append(b, codeUUID), v[:]...), nil
	case []byte:
		return appendBinary(b, v)
	case string:
		return appendString(b, v)
	case Symbol:
		return appendSymbol(b, v)
	case List:
		return appendList(b, v, depth)
	case []any:
		return appendList(b, v, depth)
	case Map:
		return appendMap(b, v, depth)
	case map[string]any:
		return appendGoMap(b, v, depth, func(k string) any { return k })
	case map[Symbol]any:
		return appendGoMap(b, v, depth, func(k Symbol) any { return k })
	case Array:
		return appendArray(b, v, depth)
	case *Array:
		if v == nil {
			return append(b, codeNull), nil
		}
		return appendArray(b, *v, depth)
	case Described:
		return appendDescribed(b, v, depth)
	case *Described:
		if v == nil {
			return append(b, codeNull), nil
		}
		return appendDescribed(b, *v, depth)
	case encoder:
		return v.appendAMQP(b)
	case []Symbol:
		return appendTypedArray(b, TypeSymbol, v, depth)
	case []string:
		return appendTypedArray(b, TypeString, v, depth)
	case []UUID:
		return appendTypedArray(b, TypeUUID, v, depth)
	case []time.Time:
		return appendTypedArray(b, TypeTimestamp, v, depth)
	case []int64:
		return appendTypedArray(b, TypeLong, v, depth)
	case []int32:
		return appendTypedArray(b, TypeInt, v, depth)
	case []int16:
		return appendTypedArray(b, TypeShort, v, depth)
	case []uint64:
		return appendTypedArray(b, TypeUlong, v, depth)
	case []uint32:
		return appendTypedArray(b, TypeUint, v, depth)
	case []uint16:
		return appendTypedArray(b, TypeUshort, v, depth)
	case []float64:
		return appendTypedArray(b, TypeDouble, v, depth)
	case []float32:
		return appendTypedArray(b, TypeFloat, v, depth)
	case []bool:
		return appendTypedArray(b, TypeBoolean, v, depth)
	case [][]byte:
		return appendTypedArray(b, TypeBinary, v, depth)
	}
	return b, fmt.Errorf("%w: Go type %T has no AMQP representation", ErrEncode, v)
}

func validChar(c Char) bool {
	return c >= 0 && c <= utf8.MaxRune && (c < 0xd800 || c > 0xdfff)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, codeTrue)
	}
	return append(b, codeFalse)
}

func appendUint(b []byte, v uint32) []byte {
	switch {
	case v == 0:
		return append(b, codeUint0)
	case v <= math.MaxUint8:
		return append(b, codeSmallUint, uint8(v))
	}
	return binary.BigEndian.AppendUint32(append(b, codeUint), v)
}

func appendUlong(b []byte, v uint64) []byte {
	switch {
	case v == 0:
		return append(b, codeUlong0)
	case v <= math.MaxUint8:
		return append(b, codeSmallUlong, uint8(v))
	}
	return binary.BigEndian.AppendUint64(append(b, codeUlong), v)
}

func appendInt(b []byte, v int32) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(b, codeSmallInt, uint8(int8(v)))
	}
	return binary.BigEndian.AppendUint32(append(b, codeInt), uint32(v))
}

func appendLong(b []byte, v int64) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(b, codeSmallLong, uint8(int8(v)))
	}
	return binary.BigEndian.AppendUint64(append(b, codeLong), uint64(v))
}

func appendUshort(b []byte, v uint16) []byte {
	return binary.BigEndian.AppendUint16(append(b, codeUshort), v)
}

func appendTimestamp(b []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(append(b, codeTimestamp), uint64(t.UnixMilli()))
}

func appendVariable(b []byte, code8, code32 byte, s string) ([]byte, error) {
	if len(s) <= math.MaxUint8 {
		b = append(b, code8, uint8(len(s)))
		return append(b, s...), nil
	}
	if uint64(len(s)) > math.MaxUint32 {
		return b, fmt.Errorf("%w: %d bytes exceed a 32-bit length", ErrEncode, len(s))
	}
	b = binary.BigEndian.AppendUint32(append(b, code32), uint32(len(s)))
	return append(b, s...), nil
}

func appendBinary(b []byte, v []byte) ([]byte, error) {
	if len(v) <= math.MaxUint8 {
		b = append(b, codeVbin8, uint8(len(v)))
		return append(b, v...), nil
	}
	if uint64(len(v)) > math.MaxUint32 {
		return b, fmt.Errorf("%w: %d bytes exceed a 32-bit length", ErrEncode, len(v))
	}
	b = binary.BigEndian.AppendUint32(append(b, codeVbin32), uint32(len(v)))
	return append(b, v...), nil
}

func appendString(b []byte, s string) ([]byte, error) {
	return appendVariable(b, codeStr8, codeStr32, s)
}

func appendSymbol(b []byte, s Symbol) ([]byte, error) {
	return appendVariable(b, codeSym8, codeSym32, string(s))
}

// compound tracks a list, map or array being appended: its header is reserved at its widest
// (code, 4-byte size, 4-byte count) and narrowed by end once the content is known.
type compound struct {
	start int
}

func beginCompound(b []byte) ([]byte, compound) {
	c := compound{start: len(b)}
	return append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0), c
}

// end writes the header of a compound of count elements whose content follows the reserved
// header, picking the 8-bit form when size and count allow (and list0 for an empty list when
// empty0 is set). fixed is the number of content bytes that are not elements (an array's
// constructor), which count toward the size.
func (c compound) end(b []byte, count int, code8, code32 byte, empty0 byte) ([]byte, error) {
	content := len(b) - c.start - 9
	if count == 0 && empty0 != 0 {
		b[c.start] = empty0
		return b[:c.start+1], nil
	}
	if content+1 <= math.MaxUint8 && count <= math.MaxUint8 {
		b[c.start] = code8
		b[c.start+1] = uint8(content + 1)
		b[c.start+2] = uint8(count)
		copy(b[c.start+3:], b[c.start+9:])
		return b[:len(b)-6], nil
	}
	if uint64(content)+4 > math.MaxUint32 || uint64(count) > math.MaxUint32 {
		return b, fmt.Errorf("%w: compound of %d bytes exceeds a 32-bit size", ErrEncode, content)
	}
	b[c.start] = code32
	binary.BigEndian.PutUint32(b[c.start+1:], uint32(content+4))
	binary.BigEndian.PutUint32(b[c.start+5:], uint32(count))
	return b, nil
}

func appendList[T any](b []byte, l []T, depth int) ([]byte, error) {
	b, c := beginCompound(b)
	var err error
	for _, e := range l {
		if b, err = appendValue(b, e, depth+1); err != nil {
			return b, err
		}
	}
	return c.end(b, len(l), codeList8, codeList32, codeList0)
}

func appendMap(b []byte, m Map, depth int) ([]byte, error) {
	b, c := beginCompound(b)
	var err error
	for _, e := range m {
		if b, err = appendValue(b, e.Key, depth+1); err != nil {
			return b, err
		}
		if b, err = appendValue(b, e.Value, depth+1); err != nil {
			return b, err
		}
	}
	return c.end(b, 2*len(m), codeMap8, codeMap32, 0)
}

func appendGoMap[K ~string](b []byte, m map[K]any, depth int, key func(K) any) ([]byte, error) {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y K) int { return strings.Compare(string(x), string(y)) })
	b, c := beginCompound(b)
	var err error
	for _, k := range keys {
		if b, err = appendValue(b, key(k), depth+1); err != nil {
			return b, err
		}
		if b, err = appendValue(b, m[k], depth+1); err != nil {
			return b, err
		}
	}
	return c.end(b, 2*len(m), codeMap8, codeMap32, 0)
}

func appendDescribed(b []byte, d Described, depth int) ([]byte, error) {
	b = append(b, codeDescribed)
	var err error
	if b, err = appendValue(b, d.Descriptor, depth+1); err != nil {
		return b, err
	}
	return appendValue(b, d.Value, depth+1)
}

func appendTypedArray[T any](b []byte, t Type, elems []T, depth int) ([]byte, error) {
	a := Array{Type: t, Elems: make([]any, len(elems))}
	for i, e := range elems {
		a.Elems[i] = e
	}
	return appendArray(b, a, depth)
}

// appendArray encodes a with one element constructor: the narrowest that holds every
// element (never a zero-width one, which some decoders reject).
func appendArray(b []byte, a Array, depth int) ([]byte, error) {
	code, err := arrayElementCode(a)
	if err != nil {
		return b, err
	}
	b, c := beginCompound(b)
	if a.Descriptor != nil {
		b = append(b, codeDescribed)
		if b, err = appendValue(b, a.Descriptor, depth+1); err != nil {
			return b, err
		}
	}
	b = append(b, code)
	for _, e := range a.Elems {
		if b, err = appendArrayElement(b, code, e, depth+1); err != nil {
			return b, err
		}
	}
	return c.end(b, len(a.Elems), codeArray8, codeArray32, 0)
}

func arrayElementCode(a Array) (byte, error) {
	t := a.Type
	if t == 0 {
		if len(a.Elems) == 0 {
			return 0, fmt.Errorf("%w: empty array without a Type", ErrEncode)
		}
		var err error
		if t, err = typeOf(a.Elems[0]); err != nil {
			return 0, err
		}
	}
	for _, e := range a.Elems {
		et, err := typeOf(e)
		if err != nil {
			return 0, err
		}
		if et != t {
			return 0, fmt.Errorf("%w: %s element in an array of %s", ErrEncode, et, t)
		}
	}
	small := true
	switch t {
	case TypeUint:
		for _, e := range a.Elems {
			small = small && e.(uint32) <= math.MaxUint8
		}
		if small {
			return codeSmallUint, nil
		}
	case TypeUlong:
		for _, e := range a.Elems {
			small = small && e.(uint64) <= math.MaxUint8
		}
		if small {
			return codeSmallUlong, nil
		}
	case TypeInt:
		for _, e := range a.Elems {
			v := e.(int32)
			small = small && v >= math.MinInt8 && v <= math.MaxInt8
		}
		if small {
			return codeSmallInt, nil
		}
	case TypeLong:
		for _, e := range a.Elems {
			v := e.(int64)
			small = small && v >= math.MinInt8 && v <= math.MaxInt8
		}
		if small {
			return codeSmallLong, nil
		}
	case TypeBinary:
		for _, e := range a.Elems {
			small = small && len(e.([]byte)) <= math.MaxUint8
		}
		if small {
			return codeVbin8, nil
		}
	case TypeString:
		for _, e := range a.Elems {
			small = small && len(e.(string)) <= math.MaxUint8
		}
		if small {
			return codeStr8, nil
		}
	case TypeSymbol:
		for _, e := range a.Elems {
			small = small && len(e.(Symbol)) <= math.MaxUint8
		}
		if small {
			return codeSym8, nil
		}
	}
	return byte(t), nil
}

// typeOf names the AMQP type of a Go value as it can appear in an array.
func typeOf(v any) (Type, error) {
	switch v := v.(type) {
	case nil:
		return TypeNull, nil
	case bool:
		return TypeBoolean, nil
	case uint8:
		return TypeUbyte, nil
	case uint16:
		return TypeUshort, nil
	case uint32:
		return TypeUint, nil
	case uint64:
		return TypeUlong, nil
	case int8:
		return TypeByte, nil
	case int16:
		return TypeShort, nil
	case int32:
		return TypeInt, nil
	case int64:
		return TypeLong, nil
	case float32:
		return TypeFloat, nil
	case float64:
		return TypeDouble, nil
	case Decimal32:
		return TypeDecimal32, nil
	case Decimal64:
		return TypeDecimal64, nil
	case Decimal128:
		return TypeDecimal128, nil
	case Char:
		return TypeChar, nil
	case time.Time:
		return TypeTimestamp, nil
	case UUID:
		return TypeUUID, nil
	case []byte:
		return TypeBinary, nil
	case string:
		return TypeString, nil
	case Symbol:
		return TypeSymbol, nil
	case List:
		return TypeList, nil
	case Map:
		return TypeMap, nil
	case Array:
		return TypeArray, nil
	default:
		return 0, fmt.Errorf("%w: Go type %T cannot be an array element", ErrEncode, v)
	}
}

// appendArrayElement appends e without its constructor, in the form code selects.
func appendArrayElement(b []byte, code byte, e any, depth int) ([]byte, error) {
	var err error
	switch code {
	case codeNull:
		return b, nil
	case codeBool:
		if e.(bool) {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case codeUbyte:
		return append(b, e.(uint8)), nil
	case codeByte:
		return append(b, uint8(e.(int8))), nil
	case codeUshort:
		return binary.BigEndian.AppendUint16(b, e.(uint16)), nil
	case codeShort:
		return binary.BigEndian.AppendUint16(b, uint16(e.(int16))), nil
	case codeSmallUint:
		return append(b, uint8(e.(uint32))), nil
	case codeUint:
		return binary.BigEndian.AppendUint32(b, e.(uint32)), nil
	case codeSmallUlong:
		return append(b, uint8(e.(uint64))), nil
	case codeUlong:
		return binary.BigEndian.AppendUint64(b, e.(uint64)), nil
	case codeSmallInt:
		return append(b, uint8(int8(e.(int32)))), nil
	case codeInt:
		return binary.BigEndian.AppendUint32(b, uint32(e.(int32))), nil
	case codeSmallLong:
		return append(b, uint8(int8(e.(int64)))), nil
	case codeLong:
		return binary.BigEndian.AppendUint64(b, uint64(e.(int64))), nil
	case codeFloat:
		return binary.BigEndian.AppendUint32(b, math.Float32bits(e.(float32))), nil
	case codeDouble:
		return binary.BigEndian.AppendUint64(b, math.Float64bits(e.(float64))), nil
	case codeDecimal32:
		v := e.(Decimal32)
		return append(b, v[:]...), nil
	case codeDecimal64:
		v := e.(Decimal64)
		return append(b, v[:]...), nil
	case codeDecimal128:
		v := e.(Decimal128)
		return append(b, v[:]...), nil
	case codeChar:
		c := e.(Char)
		if !validChar(c) {
			return b, fmt.Errorf("%w: char %#x is not a Unicode scalar value", ErrEncode, int32(c))
		}
		return binary.BigEndian.AppendUint32(b, uint32(c)), nil
	case codeTimestamp:
		return binary.BigEndian.AppendUint64(b, uint64(e.(time.Time).UnixMilli())), nil
	case codeUUID:
		v := e.(UUID)
		return append(b, v[:]...), nil
	case codeVbin8:
		v := e.([]byte)
		return append(append(b, uint8(len(v))), v...), nil
	case codeStr8:
		v := e.(string)
		return append(append(b, uint8(len(v))), v...), nil
	case codeSym8:
		v := e.(Symbol)
		return append(append(b, uint8(len(v))), v...), nil
	case codeVbin32, codeStr32, codeSym32:
		var s string
		switch v := e.(type) {
		case []byte:
			s = string(v)
		case string:
			s = v
		case Symbol:
			s = string(v)
		}
		if uint64(len(s)) > math.MaxUint32 {
			return b, fmt.Errorf("%w: %d bytes exceed a 32-bit length", ErrEncode, len(s))
		}
		return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...), nil
	case codeList32, codeMap32, codeArray32:
		// Encode as a value, then drop the constructor and widen to the 32-bit form the
		// array's element constructor announces.
		start := len(b)
		if b, err = appendValue(b, e, depth); err != nil {
			return b, err
		}
		return widenCompound(b, start)
	}
	return b, fmt.Errorf("%w: array element constructor %#02x", ErrEncode, code)
}

// widenCompound rewrites the compound value encoded at b[start:] (list0/8/32, map8/32,
// array8/32, with its constructor) as its 32-bit body without the constructor.
func widenCompound(b []byte, start int) ([]byte, error) {
	code := b[start]
	switch code {
	case codeList0:
		b = b[:start]
		return append(b, 0, 0, 0, 4, 0, 0, 0, 0), nil
	case codeList8, codeMap8, codeArray8:
		size := int(b[start+1])
		count := int(b[start+2])
		content := append([]byte(nil), b[start+3:start+2+size]...)
		b = b[:start]
		b = binary.BigEndian.AppendUint32(b, uint32(size-1+4))
		b = binary.BigEndian.AppendUint32(b, uint32(count))
		return append(b, content...), nil
	case codeList32, codeMap32, codeArray32:
		copy(b[start:], b[start+1:])
		return b[:len(b)-1], nil
	}
	return b, fmt.Errorf("%w: constructor %#02x in an array of compounds", ErrEncode, code)
}
