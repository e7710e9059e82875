package atom

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// infiniteText is TimeSpan.MaxValue as .NET's XmlConvert writes it. Every client recognises this
// exact string as "never", so broker.Infinite always goes out in this form.
const infiniteText = "P10675199DT2H48M5.4775807S"

const day = 24 * time.Hour

// Designator positions in the order XML Schema requires them: a duration lists each at most once,
// in this order, and the time designators only after 'T'.
const (
	posYear = iota
	posMonth
	posDay
	posHour
	posMinute
	posSecond
)

// designatorUnit is each designator's length. .NET counts a year as 365 days and a month as 30
// (TimeSpan has no calendar), and clients that send Y or M expect that reading.
var designatorUnit = [...]time.Duration{
	posYear:   365 * day,
	posMonth:  30 * day,
	posDay:    day,
	posHour:   time.Hour,
	posMinute: time.Minute,
	posSecond: time.Second,
}

// ParseDuration parses an XML Schema / ISO 8601 duration as .NET XmlConvert writes it: PT30S,
// PT1M, PT10M, P14D, PT1H, P1DT2H, fractional seconds, Y and M(onth) designators as 365 and 30
// days. Surrounding white space is ignored, as XmlConvert does. Fractional seconds are truncated
// to 7 digits (100 ns, the TimeSpan tick), so every result survives FormatDuration unchanged.
//
// A value that does not fit a time.Duration (about 292 years, far below TimeSpan.MaxValue's
// 10675199 days) is broker.Infinite: clients mean "never" by such values, and Python round-trips
// TimeSpan.MaxValue as P10675199DT2H48M5.477539S, which must still read as infinite.
//
// It returns an error for a negative duration ("-PT1M"), a missing 'P' ("T1M"), no components
// ("P", "PT"), designators out of order or repeated, a fraction on anything but seconds, and any
// other text. The error is a plain error; DecodeProperties wraps it into a *broker.Error.
func ParseDuration(s string) (time.Duration, error) {
	rest, err := durationBody(s)
	if err != nil {
		return 0, err
	}
	var (
		total    uint64 // nanoseconds; saturates once overflow is set
		overflow bool
		inTime   bool
		next     = posYear // the earliest designator still allowed
		seen     bool
	)
	add := func(v uint64) {
		if overflow || v > math.MaxInt64-total {
			overflow = true
			return
		}
		total += v
	}
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, errors.New("'T' appears twice")
			}
			inTime = true
			next = posHour
			rest = rest[1:]
			if rest == "" {
				return 0, errors.New("'T' must be followed by hours, minutes or seconds")
			}
			continue
		}
		n, big, digits := leadingNumber(rest)
		if digits == 0 {
			return 0, fmt.Errorf("expected a number at %q", rest)
		}
		rest = rest[digits:]
		var frac uint64 // nanoseconds
		hasFrac := false
		if rest != "" && rest[0] == '.' {
			hasFrac = true
			rest = rest[1:]
			var fd int
			if frac, fd = fraction(rest); fd == 0 {
				return 0, errors.New("expected digits after '.'")
			}
			rest = rest[fd:]
		}
		if rest == "" {
			return 0, errors.New("number without a designator")
		}
		pos, ok := designator(rest[0], inTime)
		if !ok {
			return 0, fmt.Errorf("unexpected %q", rest[0])
		}
		if pos < next {
			return 0, fmt.Errorf("designator %q out of order or repeated", rest[0])
		}
		if hasFrac && pos != posSecond {
			return 0, errors.New("only seconds may have a fraction")
		}
		rest = rest[1:]
		next = pos + 1
		seen = true
		unit := uint64(designatorUnit[pos])
		if big || n > math.MaxInt64/unit {
			overflow = true
		} else {
			add(n * unit)
		}
		add(frac)
	}
	if !seen {
		return 0, errors.New("a duration needs at least one component")
	}
	if overflow {
		return broker.Infinite, nil
	}
	return time.Duration(total), nil
}

// durationBody is s, trimmed, after its leading 'P'.
func durationBody(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty duration")
	}
	if s[0] == '-' {
		return "", errors.New("negative durations are not allowed")
	}
	if s[0] != 'P' {
		return "", errors.New("a duration must start with 'P'")
	}
	return s[1:], nil
}

// fraction reads the digits at the start of s, those after a decimal point, as nanoseconds; n
// is how many digits there were.
func fraction(s string) (nanos uint64, n int) {
	for n < len(s) && isDigit(s[n]) {
		// Only the first 7 digits count: TimeSpan stores 100 ns ticks and .NET drops the rest.
		if n < 7 {
			nanos = nanos*10 + uint64(s[n]-'0')
		}
		n++
	}
	for i := min(n, 7); i < 9; i++ {
		nanos *= 10
	}
	return nanos, n
}

// leadingNumber reads the decimal digits at the start of s. big reports a value too large for
// any duration, so callers need not handle arbitrary-length numbers.
func leadingNumber(s string) (n uint64, big bool, digits int) {
	for digits < len(s) && isDigit(s[digits]) {
		if n > (math.MaxUint64-9)/10 {
			big = true
		} else {
			n = n*10 + uint64(s[digits]-'0')
		}
		digits++
	}
	return n, big, digits
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func designator(c byte, inTime bool) (int, bool) {
	if inTime {
		switch c {
		case 'H':
			return posHour, true
		case 'M':
			return posMinute, true
		case 'S':
			return posSecond, true
		}
		return 0, false
	}
	switch c {
	case 'Y':
		return posYear, true
	case 'M':
		return posMonth, true
	case 'D':
		return posDay, true
	}
	return 0, false
}

// FormatDuration writes d the way .NET does: broker.Infinite → "P10675199DT2H48M5.4775807S";
// otherwise P[nD][T[nH][nM][n[.fffffff]S]], e.g. 60s → "PT1M", 90s → "PT1M30S", 0 → "PT0S",
// 14 days → "P14D", 1.5s → "PT1.5S" (trailing zeros trimmed, at most 7 fractional digits: the
// part below 100 ns is dropped, as TimeSpan cannot hold it). Negative durations get a leading '-'.
func FormatDuration(d time.Duration) string {
	return string(appendDuration(make([]byte, 0, 32), d))
}

func appendDuration(dst []byte, d time.Duration) []byte {
	if d == broker.Infinite {
		return append(dst, infiniteText...)
	}
	if d < 0 {
		dst = append(dst, '-')
		if d == math.MinInt64 {
			d = math.MaxInt64
		} else {
			d = -d
		}
	}
	u := uint64(d)
	days := u / uint64(day)
	u %= uint64(day)
	hours := u / uint64(time.Hour)
	u %= uint64(time.Hour)
	minutes := u / uint64(time.Minute)
	u %= uint64(time.Minute)
	secs := u / uint64(time.Second)
	ticks := u % uint64(time.Second) / 100

	dst = append(dst, 'P')
	if days > 0 {
		dst = strconv.AppendUint(dst, days, 10)
		dst = append(dst, 'D')
	}
	if hours == 0 && minutes == 0 && secs == 0 && ticks == 0 {
		if days == 0 {
			dst = append(dst, "T0S"...)
		}
		return dst
	}
	dst = append(dst, 'T')
	if hours > 0 {
		dst = strconv.AppendUint(dst, hours, 10)
		dst = append(dst, 'H')
	}
	if minutes > 0 {
		dst = strconv.AppendUint(dst, minutes, 10)
		dst = append(dst, 'M')
	}
	if secs > 0 || ticks > 0 {
		dst = strconv.AppendUint(dst, secs, 10)
		if ticks > 0 {
			dst = append(dst, '.')
			digits := 7
			for ticks%10 == 0 {
				ticks /= 10
				digits--
			}
			var buf [7]byte
			for i := digits - 1; i >= 0; i-- {
				buf[i] = byte('0' + ticks%10)
				ticks /= 10
			}
			dst = append(dst, buf[:digits]...)
		}
		dst = append(dst, 'S')
	}
	return dst
}

// timeLayout is how the service writes entity timestamps: UTC, up to 7 fractional digits with
// trailing zeros trimmed, and a literal 'Z' (Go's RFC 3339 parser, used by the Go SDK, needs it).
const timeLayout = "2006-01-02T15:04:05.9999999Z"

// atomTimeLayout is the second-precision form of Atom <published> and <updated>.
const atomTimeLayout = "2006-01-02T15:04:05Z"

// FormatTime writes an ISO 8601 UTC timestamp with 'Z' and up to 7 fractional digits
// (trailing zeros trimmed); the zero time → "0001-01-01T00:00:00Z", the service's "never".
func FormatTime(t time.Time) string {
	return string(appendTime(make([]byte, 0, 32), t))
}

func appendTime(dst []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(dst, timeLayout)
}

// ParseTime parses a timestamp as clients send it: RFC 3339 with fractional digits and 'Z' or an
// offset, or with no zone at all (read as UTC; the service itself writes "never" as
// "0001-01-01T00:00:00" at times). An empty string is the zero time. The result is in UTC and
// truncated to 100 ns, the precision of .NET's DateTime, so that FormatTime writes it back
// unchanged. It returns a plain error for any other text and for instants outside the years
// 1–9999, which DateTime cannot hold.
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if t, err = time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC); err != nil {
			return time.Time{}, errors.New("not an ISO 8601 timestamp")
		}
	}
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}, errors.New("the year is outside 1-9999")
	}
	return t.Truncate(100 * time.Nanosecond), nil
}
