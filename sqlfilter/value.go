package sqlfilter

import (
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
)

// kind is the dynamic type of a value during evaluation.
type kind uint8

const (
	kNull kind = iota // SQL NULL and "unknown" alike: the logic treats them the same
	kBool
	kInt
	kFloat
	kString
	kTime
	kDuration
	kBinary // bytes, held in s: equal or not, never ordered or computed with
)

func (k kind) String() string {
	switch k {
	case kNull:
		return "null"
	case kBool:
		return "boolean"
	case kInt:
		return "integer"
	case kFloat:
		return "double"
	case kString:
		return "string"
	case kTime:
		return "datetime"
	case kDuration:
		return "timespan"
	case kBinary:
		return "binary"
	}
	return "?"
}

// value is an evaluation result. It is a plain struct rather than an any so that
// evaluating a filter does not box numbers and strings on the heap.
type value struct {
	k  kind
	ns int32   // kTime: nanoseconds within the second
	i  int64   // kBool: 0 or 1; kInt; kDuration: nanoseconds; kTime: Unix seconds
	f  float64 // kFloat
	s  string  // kString; kBinary: the bytes
}

var (
	nullValue  = value{k: kNull}
	trueValue  = value{k: kBool, i: 1}
	falseValue = value{k: kBool}
)

func boolValue(b bool) value {
	if b {
		return trueValue
	}
	return falseValue
}

func intValue(i int64) value     { return value{k: kInt, i: i} }
func floatValue(f float64) value { return value{k: kFloat, f: f} }
func stringValue(s string) value { return value{k: kString, s: s} }

func timeValue(t time.Time) value {
	return value{k: kTime, i: t.Unix(), ns: int32(t.Nanosecond())}
}

func (v value) time() time.Time { return time.Unix(v.i, int64(v.ns)).UTC() }

func (v value) isNumber() bool { return v.k == kInt || v.k == kFloat }
func (v value) float() float64 {
	if v.k == kInt {
		return float64(v.i)
	}
	return v.f
}

// Valuer is implemented by property values of types of the caller's own, which filters read as
// the value FilterValue returns (a string, number, bool, time.Time or time.Duration, or any
// other type valueOf takes): a character or URI type as a string, a decimal as a float64, a
// date-time with an offset as a time.Time.
type Valuer interface {
	FilterValue() any
}

// valueOf converts a property or parameter value. ok is false for Go types the filter
// language has no counterpart for. Besides the basic types, the narrower integers and
// float32 are numbers, a uuid.UUID is its text (how Service Bus compares a Guid property
// with a string), []byte is binary (equal to the same bytes, and to nothing else), and a
// Valuer is what it says it is.
func valueOf(x any) (value, bool) {
	switch x := x.(type) {
	case nil:
		return nullValue, true
	case string:
		return stringValue(x), true
	case int64:
		return intValue(x), true
	case float64:
		return floatValue(x), true
	case bool:
		return boolValue(x), true
	case time.Time:
		return timeValue(x), true
	case time.Duration:
		return value{k: kDuration, i: int64(x)}, true
	case int:
		return intValue(int64(x)), true
	case int32:
		return intValue(int64(x)), true
	case int16:
		return intValue(int64(x)), true
	case int8:
		return intValue(int64(x)), true
	case uint8:
		return intValue(int64(x)), true
	case uint16:
		return intValue(int64(x)), true
	case uint32:
		return intValue(int64(x)), true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return floatValue(float64(x)), true
		}
		return intValue(int64(x)), true
	case uint64:
		if x > math.MaxInt64 {
			return floatValue(float64(x)), true
		}
		return intValue(int64(x)), true
	case float32:
		return floatValue(float64(x)), true
	case uuid.UUID:
		return stringValue(x.String()), true
	case []byte:
		return value{k: kBinary, s: string(x)}, true
	case Valuer:
		v := x.FilterValue()
		if _, again := v.(Valuer); again {
			return nullValue, false // one step only: a Valuer of Valuers could go round forever
		}
		return valueOf(v)
	}
	return nullValue, false
}

// toAny converts back for SET: nil, bool, int64, float64, string, time.Time (UTC),
// time.Duration or []byte.
func (v value) toAny() any {
	switch v.k {
	case kBinary:
		return []byte(v.s)
	case kBool:
		return v.i != 0
	case kInt:
		return v.i
	case kFloat:
		return v.f
	case kString:
		return v.s
	case kTime:
		return v.time()
	case kDuration:
		return time.Duration(v.i)
	}
	return nil
}

// op identifies comparison and arithmetic operators; the values double as token kinds.
type op uint8

const (
	opEq op = iota + 1
	opNe
	opLt
	opLe
	opGt
	opGe
	opAdd
	opSub
	opMul
	opDiv
	opMod
)

func (o op) String() string {
	return [...]string{"", "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"}[o]
}

func cmp3[T int64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// tri is a three-valued truth value. Predicates return it instead of a value so that
// evaluating the boolean part of a filter moves one byte, not a value struct.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

func (t tri) value() value {
	switch t {
	case triTrue:
		return trueValue
	case triFalse:
		return falseValue
	}
	return nullValue
}

func (t tri) not() tri {
	switch t {
	case triTrue:
		return triFalse
	case triFalse:
		return triTrue
	}
	return triUnknown
}

// compare applies a comparison operator. NULL on either side gives unknown.
// Values of incomparable types give FALSE, not an error: this follows the JMS 2.0
// selector rule ("comparing incomparable types yields false") that Service Bus Premium
// implements, and keeps one oddly typed property from dead-lettering a message.
func compare(o op, a, b *value) tri {
	if a.k == kNull || b.k == kNull {
		return triUnknown
	}
	var c int
	switch {
	case a.k == kInt && b.k == kInt:
		c = cmp3(a.i, b.i)
	case a.isNumber() && b.isNumber():
		x, y := a.float(), b.float()
		if math.IsNaN(x) || math.IsNaN(y) {
			// IEEE and C#: NaN is unequal to everything, itself included.
			return triOf(o == opNe)
		}
		c = cmp3(x, y)
	case a.k != b.k:
		return triFalse
	case a.k == kString:
		c = strings.Compare(a.s, b.s)
	case a.k == kBool:
		if o != opEq && o != opNe {
			return triFalse // booleans are unordered, as in C#
		}
		c = cmp3(a.i, b.i)
	case a.k == kBinary:
		if o != opEq && o != opNe {
			return triFalse // byte arrays are unordered
		}
		c = strings.Compare(a.s, b.s)
	case a.k == kTime:
		c = cmp3(a.i, b.i)
		if c == 0 {
			c = cmp3(int64(a.ns), int64(b.ns))
		}
	case a.k == kDuration:
		c = cmp3(a.i, b.i)
	default:
		return triFalse
	}
	switch o {
	case opEq:
		return triOf(c == 0)
	case opNe:
		return triOf(c != 0)
	case opLt:
		return triOf(c < 0)
	case opLe:
		return triOf(c <= 0)
	case opGt:
		return triOf(c > 0)
	case opGe:
		return triOf(c >= 0)
	}
	return triFalse
}

// equal is typed equality as the correlation filter and IN need it: numbers compare
// numerically across int64 and float64, NULL equals NULL.
func equal(a, b value) bool {
	if a.k == kNull || b.k == kNull {
		return a.k == b.k
	}
	return compare(opEq, &a, &b) == triTrue
}

// arith applies an arithmetic operator with C# promotion (integer op double is double).
// The returned string is an error message for an *EvalError, "" on success.
func arith(o op, a, b value) (value, string) {
	if a.k == kNull || b.k == kNull {
		return nullValue, ""
	}
	switch {
	case a.k == kInt && b.k == kInt:
		x, y := a.i, b.i
		switch o {
		case opAdd:
			return intValue(x + y), "" // wraps, like unchecked C#
		case opSub:
			return intValue(x - y), ""
		case opMul:
			return intValue(x * y), ""
		case opDiv, opMod:
			if y == 0 {
				return nullValue, "integer division by zero"
			}
			if x == math.MinInt64 && y == -1 {
				return nullValue, "integer overflow" // C# throws OverflowException here
			}
			if o == opDiv {
				return intValue(x / y), ""
			}
			return intValue(x % y), ""
		}
	case a.isNumber() && b.isNumber():
		x, y := a.float(), b.float()
		switch o {
		case opAdd:
			return floatValue(x + y), ""
		case opSub:
			return floatValue(x - y), ""
		case opMul:
			return floatValue(x * y), ""
		case opDiv:
			return floatValue(x / y), "" // IEEE: ±Inf or NaN, as in C#
		case opMod:
			return floatValue(math.Mod(x, y)), ""
		}
	case a.k == kString && b.k == kString && o == opAdd:
		if len(a.s)+len(b.s) > maxStringLength {
			return nullValue, "string result longer than 65536 bytes"
		}
		return stringValue(a.s + b.s), ""
	case a.k == kTime && b.k == kDuration && (o == opAdd || o == opSub):
		d := time.Duration(b.i)
		if o == opSub {
			d = -d
		}
		return timeValue(a.time().Add(d)), ""
	case a.k == kDuration && b.k == kTime && o == opAdd:
		return timeValue(b.time().Add(time.Duration(a.i))), ""
	case a.k == kTime && b.k == kTime && o == opSub:
		return value{k: kDuration, i: int64(a.time().Sub(b.time()))}, ""
	case a.k == kDuration && b.k == kDuration && (o == opAdd || o == opSub):
		if o == opAdd {
			return value{k: kDuration, i: a.i + b.i}, ""
		}
		return value{k: kDuration, i: a.i - b.i}, ""
	}
	return nullValue, "operator " + o.String() + " cannot be applied to " + a.k.String() + " and " + b.k.String()
}

// negate applies unary minus; unary plus only checks the type.
func negate(o op, v value) (value, string) {
	switch v.k {
	case kNull:
		return v, ""
	case kInt:
		if o == opSub {
			v.i = -v.i
		}
		return v, ""
	case kFloat:
		if o == opSub {
			v.f = -v.f
		}
		return v, ""
	case kDuration:
		if o == opSub {
			v.i = -v.i
		}
		return v, ""
	}
	return nullValue, "unary " + o.String() + " cannot be applied to " + v.k.String()
}
