package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Limits on application properties (protocol.md §7.1).
const (
	MaxPropertySize        = 32 * 1024
	MaxAllPropertiesSize   = 64 * 1024
	maxUserPropertiesCount = 1000
)

// User properties are stored as a jsonb object whose values carry their type, so an int stays an
// int and a date a date on the way back: {"n":{"i":1},"s":{"s":"x"},"f":{"f":2.5},"b":{"b":true},
// "d":{"d":"2024-01-02T03:04:05Z"}}. A value's field says what kind of JSON value holds it, and
// k, when present, which of the types held so it is (typeTags): {"i":7,"k":"int"} is an int32,
// {"s":"…","k":"uuid"} a uuid.UUID. A value without k is of the field's own type (string, int64,
// float64, bool, time.Time, time.Duration, uint64, []byte), so rows written before k existed
// read back as they were written.
type typedValue struct {
	T *int64   `json:"t,omitempty"` // a time span in nanoseconds (rule parameters, action results)
	S *string  `json:"s,omitempty"`
	I *int64   `json:"i,omitempty"`
	U *uint64  `json:"u,omitempty"` // a ulong: jsonb keeps numbers exactly, beyond int64 too
	F *float64 `json:"f,omitempty"`
	B *bool    `json:"b,omitempty"`
	D *string  `json:"d,omitempty"`
	Y *[]byte  `json:"y,omitempty"` // bytes, as base64
	K string   `json:"k,omitempty"` // the type, when not the field's own
	X string   `json:"x,omitempty"` // a rule value's declared type (Property.Type)
}

// The type tags (typedValue.K): AMQP's names for its types, and the .NET described types'.
const (
	tagByte           = "byte"   // int8, in I
	tagShort          = "short"  // int16, in I
	tagInt            = "int"    // int32, in I
	tagUbyte          = "ubyte"  // uint8, in I
	tagUshort         = "ushort" // uint16, in I
	tagUint           = "uint"   // uint32, in I
	tagFloat          = "float"  // float32, in F (a float32 is exactly a float64)
	tagChar           = "char"   // Char, its code point in I
	tagUUID           = "uuid"   // uuid.UUID, its text in S
	tagSymbol         = "symbol" // Symbol, in S
	tagURI            = "uri"    // URI, in S
	tagDateTimeOffset = "datetime-offset"
	tagTimeSpan       = "timespan"   // TimeSpan, its ticks in I
	tagTimestamp      = "timestamp"  // a time.Time outside years 0–9999, as Unix milliseconds in I
	tagDecimal32      = "decimal32"  // Decimal32, its bytes in Y
	tagDecimal64      = "decimal64"  // Decimal64, its bytes in Y
	tagDecimal128     = "decimal128" // Decimal128, its bytes in Y
	tagNull           = "null"       // nil: a property present with no value (AMQP null), no field
)

// EncodeUserProperties checks the properties and returns their jsonb text, or nil when there are
// none. Errors: ErrBadRequest for a duplicate name, an unsupported type, a non-finite number or a
// size over the limits.
func EncodeUserProperties(props UserProperties) ([]byte, error) {
	if len(props) == 0 {
		return nil, nil
	}
	if len(props) > maxUserPropertiesCount {
		return nil, BadRequest("A message may carry at most %d application properties.", maxUserPropertiesCount)
	}
	m := make(map[string]typedValue, len(props))
	total := 0
	for _, p := range props {
		if _, dup := m[p.Name]; dup {
			return nil, BadRequest("The application property '%s' is given more than once.", Clip(p.Name))
		}
		if p.Name == "" || !ValidText(p.Name) {
			return nil, BadRequest("An application property name is empty, not valid UTF-8 or contains a NUL character.")
		}
		tv, size, err := encodeValue(p.Name, p.Value)
		if err != nil {
			return nil, err
		}
		size += len(p.Name)
		if p.Type != "" {
			if !ruleValueTypeFits(p.Type, p.Value) {
				return nil, BadRequest("The value of '%s' does not have its declared type '%s'.", Clip(p.Name), Clip(p.Type))
			}
			tv.X = p.Type
		}
		if size > MaxPropertySize {
			return nil, BadRequest("The application property '%s' is larger than %d bytes.", Clip(p.Name), MaxPropertySize)
		}
		total += size
		m[p.Name] = tv
	}
	if total > MaxAllPropertiesSize {
		return nil, BadRequest("The application properties of a message are larger than %d bytes.", MaxAllPropertiesSize)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode application properties: %w", err)
	}
	return b, nil
}

// encodeValue is the jsonb form of one property value and the bytes it counts for: its
// encoded size in AMQP, without the type code (a string or binary its length).
func encodeValue(name string, v any) (typedValue, int, error) {
	var tv typedValue
	integer := func(n int64, tag string, size int) (typedValue, int, error) {
		tv.I, tv.K = &n, tag
		return tv, size, nil
	}
	text := func(s, tag string) (typedValue, int, error) {
		if !ValidText(s) {
			return tv, 0, BadRequest("The application property '%s' is not valid UTF-8 text (or contains a NUL character).", Clip(name))
		}
		tv.S, tv.K = &s, tag
		return tv, len(s), nil
	}
	bytes := func(b []byte, tag string) (typedValue, int, error) {
		b = slices.Clone(b)
		if b == nil {
			b = []byte{}
		}
		tv.Y, tv.K = &b, tag
		return tv, len(b), nil
	}
	float := func(f float64, tag string, size int) (typedValue, int, error) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return tv, 0, BadRequest("The application property '%s' is not a finite number.", Clip(name))
		}
		tv.F, tv.K = &f, tag
		return tv, size, nil
	}
	switch v := v.(type) {
	case nil:
		tv.K = tagNull
		return tv, 0, nil
	case string:
		return text(v, "")
	case int64:
		return integer(v, "", 8)
	case int32:
		return integer(int64(v), tagInt, 4)
	case int16:
		return integer(int64(v), tagShort, 2)
	case int8:
		return integer(int64(v), tagByte, 1)
	case uint8:
		return integer(int64(v), tagUbyte, 1)
	case uint16:
		return integer(int64(v), tagUshort, 2)
	case uint32:
		return integer(int64(v), tagUint, 4)
	case uint64:
		tv.U = &v
		return tv, 8, nil
	case float64:
		return float(v, "", 8)
	case float32:
		return float(float64(v), tagFloat, 4)
	case bool:
		tv.B = &v
		return tv, 1, nil
	case time.Time:
		if y := v.UTC().Year(); y < 0 || y > 9999 {
			// RFC 3339 has four-digit years; AMQP timestamps reach far beyond them.
			return integer(v.UnixMilli(), tagTimestamp, 8)
		}
		d := v.UTC().Format(time.RFC3339Nano)
		tv.D = &d
		return tv, 8, nil
	case time.Duration:
		n := int64(v)
		tv.T = &n
		return tv, 8, nil
	case []byte:
		return bytes(v, "")
	case uuid.UUID:
		s := v.String()
		tv.S, tv.K = &s, tagUUID
		return tv, 16, nil
	case Char:
		if !utf8.ValidRune(rune(v)) {
			return tv, 0, BadRequest("The application property '%s' is not a Unicode character.", Clip(name))
		}
		return integer(int64(v), tagChar, 4)
	case Symbol:
		return text(string(v), tagSymbol)
	case URI:
		return text(string(v), tagURI)
	case DateTimeOffset:
		return integer(int64(v), tagDateTimeOffset, 8)
	case TimeSpan:
		return integer(int64(v), tagTimeSpan, 8)
	case Decimal32:
		return bytes(v[:], tagDecimal32)
	case Decimal64:
		return bytes(v[:], tagDecimal64)
	case Decimal128:
		return bytes(v[:], tagDecimal128)
	}
	return tv, 0, BadRequest("The application property '%s' has an unsupported type %T.", Clip(name), v)
}

// DecodeUserProperties reverses encodeUserProperties; properties come back sorted by name.
func DecodeUserProperties(raw []byte) (UserProperties, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]typedValue
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode application properties: %w", err)
	}
	props := make(UserProperties, 0, len(m))
	for name, tv := range m {
		v, err := tv.value()
		if err != nil {
			return nil, fmt.Errorf("decode application property %q: %w", name, err)
		}
		props = append(props, Property{Name: name, Value: v, Type: tv.X})
	}
	sort.Slice(props, func(i, j int) bool { return props[i].Name < props[j].Name })
	return props, nil
}

// value is the Go value tv holds.
func (tv typedValue) value() (any, error) {
	if tv.K != "" {
		return tv.tagged()
	}
	switch {
	case tv.T != nil:
		return time.Duration(*tv.T), nil
	case tv.S != nil:
		return *tv.S, nil
	case tv.I != nil:
		return *tv.I, nil
	case tv.U != nil:
		return *tv.U, nil
	case tv.F != nil:
		return *tv.F, nil
	case tv.B != nil:
		return *tv.B, nil
	case tv.D != nil:
		return time.Parse(time.RFC3339Nano, *tv.D)
	case tv.Y != nil:
		return *tv.Y, nil
	}
	return nil, errors.New("no value")
}

// tagged is the value of a typedValue with a type tag.
func (tv typedValue) tagged() (any, error) {
	switch tv.K {
	case tagNull:
		return nil, nil
	case tagByte, tagShort, tagInt, tagUbyte, tagUshort, tagUint, tagChar, tagDateTimeOffset, tagTimeSpan, tagTimestamp:
		if tv.I == nil {
			break
		}
		n := *tv.I
		inRange := func(lo, hi int64) bool { return n >= lo && n <= hi }
		switch tv.K {
		case tagByte:
			if inRange(math.MinInt8, math.MaxInt8) {
				return int8(n), nil
			}
		case tagShort:
			if inRange(math.MinInt16, math.MaxInt16) {
				return int16(n), nil
			}
		case tagInt:
			if inRange(math.MinInt32, math.MaxInt32) {
				return int32(n), nil
			}
		case tagUbyte:
			if inRange(0, math.MaxUint8) {
				return uint8(n), nil
			}
		case tagUshort:
			if inRange(0, math.MaxUint16) {
				return uint16(n), nil
			}
		case tagUint:
			if inRange(0, math.MaxUint32) {
				return uint32(n), nil
			}
		case tagChar:
			if inRange(0, utf8.MaxRune) && utf8.ValidRune(rune(n)) {
				return Char(n), nil
			}
		case tagDateTimeOffset:
			return DateTimeOffset(n), nil
		case tagTimeSpan:
			return TimeSpan(n), nil
		case tagTimestamp:
			return time.UnixMilli(n).UTC(), nil
		}
		return nil, fmt.Errorf("%d is out of the range of a %s", n, tv.K)
	case tagFloat:
		if tv.F != nil {
			return float32(*tv.F), nil
		}
	case tagUUID:
		if tv.S != nil {
			return uuid.Parse(*tv.S)
		}
	case tagSymbol:
		if tv.S != nil {
			return Symbol(*tv.S), nil
		}
	case tagURI:
		if tv.S != nil {
			return URI(*tv.S), nil
		}
	case tagDecimal32, tagDecimal64, tagDecimal128:
		if tv.Y == nil {
			break
		}
		b := *tv.Y
		switch {
		case tv.K == tagDecimal32 && len(b) == 4:
			return Decimal32(b), nil
		case tv.K == tagDecimal64 && len(b) == 8:
			return Decimal64(b), nil
		case tv.K == tagDecimal128 && len(b) == 16:
			return Decimal128(b), nil
		}
		return nil, fmt.Errorf("%d bytes cannot be a %s", len(b), tv.K)
	default:
		return nil, fmt.Errorf("unknown type %q", tv.K)
	}
	return nil, fmt.Errorf("no value for a %s", tv.K)
}
