package broker

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// The types of Service Bus user properties that Go has no type of its own for. Service Bus
// properties are .NET-typed; each type below is one the .NET SDK maps to an AMQP type or a
// described type (AmqpMessageConverter), so that a property comes back in the type it was sent
// in. With them, a UserProperties value is one of:
//
//	string, bool, int8 (sbyte), int16 (short), int32 (int), int64 (long), uint8 (byte),
//	uint16 (ushort), uint32 (uint), uint64 (ulong), float32 (float), float64 (double),
//	time.Time (DateTime, an AMQP timestamp), []byte (byte[] and Stream, AMQP binary),
//	uuid.UUID (Guid), Char, Decimal32, Decimal64, Decimal128, URI, DateTimeOffset, TimeSpan,
//	Symbol
//
// and, for rule parameters and the results of rule actions only, time.Duration.

// Char is a .NET char: one Unicode code point (AMQP char).
type Char rune

// Decimal32, Decimal64 and Decimal128 are AMQP decimals, kept as their encoded bytes (IEEE 754
// decimal in the binary integer decimal encoding, big-endian): .NET sends its decimal as a
// Decimal128. They are kept as sent, whatever they hold; Text and Float64 read them.
type (
	Decimal32  [4]byte
	Decimal64  [8]byte
	Decimal128 [16]byte
)

// URI is a .NET Uri: its absolute URI text (the described type com.microsoft:uri, a string).
type URI string

// DateTimeOffset is a .NET DateTimeOffset as the SDKs send it: its UTC ticks, 100 ns since
// 0001-01-01T00:00:00Z (the described type com.microsoft:datetime-offset, a long). The offset
// from UTC is not sent.
type DateTimeOffset int64

// TimeSpan is a .NET TimeSpan: its ticks of 100 ns (the described type com.microsoft:timespan,
// a long).
type TimeSpan int64

// Symbol is an AMQP symbol.
type Symbol string

// ticksAtUnixEpoch is 1970-01-01T00:00:00Z in .NET ticks.
const ticksAtUnixEpoch = 621355968000000000

// DateTimeOffsetOf is t as a DateTimeOffset, to 100 ns.
func DateTimeOffsetOf(t time.Time) DateTimeOffset {
	sec := t.Unix() // ticks = (sec + epochSeconds) * 1e7 + ns/100, computed without overflow for years 1–9999
	return DateTimeOffset((sec+ticksAtUnixEpoch/10_000_000)*10_000_000 + int64(t.Nanosecond()/100))
}

// Time is d as a UTC time.
func (d DateTimeOffset) Time() time.Time {
	t := int64(d) - ticksAtUnixEpoch
	sec, rem := t/10_000_000, t%10_000_000
	if rem < 0 {
		sec, rem = sec-1, rem+10_000_000
	}
	return time.Unix(sec, rem*100).UTC()
}

// TimeSpanOf is d as a TimeSpan, to 100 ns.
func TimeSpanOf(d time.Duration) TimeSpan { return TimeSpan(d / 100) }

// Duration is d as a time.Duration, which holds ±292 years: a longer span (TimeSpan reaches
// ±29,000 years) is the longest Duration of its sign.
func (d TimeSpan) Duration() time.Duration {
	const limit = math.MaxInt64 / 100
	switch {
	case d > limit:
		return math.MaxInt64
	case d < -limit:
		return math.MinInt64
	}
	return time.Duration(d) * 100
}

// String writes d as .NET writes a TimeSpan ("c" format): [-][d.]hh:mm:ss[.fffffff].
func (d TimeSpan) String() string {
	var b strings.Builder
	t := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		t = -t // TimeSpan.MinValue's magnitude fits a uint64
	}
	frac := t % 10_000_000
	secs := t / 10_000_000
	days, secs := secs/86400, secs%86400
	if days > 0 {
		b.WriteString(strconv.FormatUint(days, 10))
		b.WriteByte('.')
	}
	two := func(n uint64) {
		b.WriteByte(byte('0' + n/10))
		b.WriteByte(byte('0' + n%10))
	}
	two(secs / 3600)
	b.WriteByte(':')
	two(secs / 60 % 60)
	b.WriteByte(':')
	two(secs % 60)
	if frac > 0 {
		f := strconv.FormatUint(frac, 10)
		b.WriteByte('.')
		b.WriteString(strings.Repeat("0", 7-len(f)))
		b.WriteString(f)
	}
	return b.String()
}

// FilterValue is how SQL filters read a DateTimeOffset: as a time.
func (d DateTimeOffset) FilterValue() any { return d.Time() }

// FilterValue is how SQL filters read a TimeSpan: as a time span.
func (d TimeSpan) FilterValue() any { return d.Duration() }

// FilterValue is how SQL filters read a Char: as a one-character string.
func (c Char) FilterValue() any { return string(rune(c)) }

// FilterValue is how SQL filters read a URI: as a string.
func (u URI) FilterValue() any { return string(u) }

// FilterValue is how SQL filters read a Symbol: as a string.
func (s Symbol) FilterValue() any { return string(s) }

// FilterValue is how SQL filters read a decimal: as the double nearest to it.
func (d Decimal32) FilterValue() any { return decimalFloat(d[:]) }

// FilterValue is how SQL filters read a decimal: as the double nearest to it.
func (d Decimal64) FilterValue() any { return decimalFloat(d[:]) }

// FilterValue is how SQL filters read a decimal: as the double nearest to it.
func (d Decimal128) FilterValue() any { return decimalFloat(d[:]) }

// Text is d's exact value as a decimal number ("12.50", "-3", "1E+6144", "NaN", "Infinity").
func (d Decimal32) Text() string { return decodeDecimal(d[:]).text() }

// Text is d's exact value as a decimal number; see Decimal32.Text.
func (d Decimal64) Text() string { return decodeDecimal(d[:]).text() }

// Text is d's exact value as a decimal number; see Decimal32.Text.
func (d Decimal128) Text() string { return decodeDecimal(d[:]).text() }

// Float64 is the double nearest to d (±Inf beyond the double's range, NaN for a NaN).
func (d Decimal128) Float64() float64 { return decimalFloat(d[:]) }

// decimal is a decoded IEEE 754 decimal: (-1)^neg × coef × 10^exp, or an infinity or NaN.
type decimal struct {
	neg      bool
	coef     *big.Int
	exp      int
	inf, nan bool
}

// decodeDecimal reads a decimal32, decimal64 or decimal128 in the binary integer decimal
// encoding (IEEE 754-2008 §3.5.2): after the sign, either an exponent and the coefficient's
// trailing bits, or "11", the exponent, and trailing bits under an implicit "100"; "11110" is an
// infinity, "11111" a NaN. A coefficient beyond the format's precision is 0, as the standard
// says.
//
// A decimal128 whose exponent field is 1540–1568 is read as Microsoft.Azure.Amqp writes a .NET
// decimal: its encoder shifts the biased exponent (6176 − scale) by nine bits where the format
// has seven, so the field holds 1568 − scale, and its decoder reads the scale back through a
// byte cast that hides the shift. Read as the standard says, every .NET decimal would be about
// 10^-4600; no other writer puts an exponent of −4636 to −4608 on a value meant to be read.
func decodeDecimal(b []byte) decimal {
	var expBits, bias, digits int
	switch len(b) {
	case 4:
		expBits, bias, digits = 8, 101, 7
	case 8:
		expBits, bias, digits = 10, 398, 16
	default:
		expBits, bias, digits = 14, 6176, 34
	}
	width := len(b) * 8
	v := new(big.Int).SetBytes(b)
	bit := func(i int) uint { return v.Bit(width - 1 - i) } // i from the most significant bit
	field := func(from, n int) int {
		x := 0
		for i := range n {
			x = x<<1 | int(bit(from+i))
		}
		return x
	}
	d := decimal{neg: bit(0) == 1}
	var coef *big.Int
	var exp int
	if bit(1) == 1 && bit(2) == 1 {
		if bit(3) == 1 && bit(4) == 1 {
			if bit(5) == 1 {
				d.nan = true
			} else {
				d.inf = true
			}
			return d
		}
		exp = field(3, expBits)
		n := width - 3 - expBits
		coef = new(big.Int).And(v, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(n)), big.NewInt(1)))
		coef.Or(coef, new(big.Int).Lsh(big.NewInt(4), uint(n)))
	} else {
		exp = field(1, expBits)
		n := width - 1 - expBits
		coef = new(big.Int).And(v, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(n)), big.NewInt(1)))
		if len(b) == 16 && exp >= 1540 && exp <= 1568 {
			exp = bias - (1568 - exp) // .NET's encoding: see above
		}
	}
	if coef.Cmp(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)) >= 0 {
		coef.SetInt64(0)
	}
	d.coef, d.exp = coef, exp-bias
	return d
}

// text writes d exactly: plain digits for exponents of everyday sizes, else with an exponent.
func (d decimal) text() string {
	switch {
	case d.nan:
		return "NaN"
	case d.inf && d.neg:
		return "-Infinity"
	case d.inf:
		return "Infinity"
	}
	digits := d.coef.String()
	var s string
	switch {
	case d.exp >= 0 && d.exp <= 28:
		s = digits
		if digits != "0" {
			s += strings.Repeat("0", d.exp)
		}
	case d.exp < 0 && d.exp >= -40:
		n := -d.exp
		if len(digits) <= n {
			digits = strings.Repeat("0", n-len(digits)+1) + digits
		}
		s = digits[:len(digits)-n] + "." + digits[len(digits)-n:]
	default:
		s = digits + "E" + strconv.Itoa(d.exp)
		if d.exp > 0 {
			s = digits + "E+" + strconv.Itoa(d.exp)
		}
	}
	if d.neg {
		s = "-" + s
	}
	return s
}

// decimalFloat is the double nearest to the decimal encoded in b.
func decimalFloat(b []byte) float64 {
	d := decodeDecimal(b)
	switch {
	case d.nan:
		return math.NaN()
	case d.inf && d.neg:
		return math.Inf(-1)
	case d.inf:
		return math.Inf(1)
	}
	s := d.coef.String() + "e" + strconv.Itoa(d.exp)
	if d.neg {
		s = "-" + s
	}
	f, _ := strconv.ParseFloat(s, 64) // well-formed; out of range gives ±Inf or 0, which is nearest
	return f
}
