package broker_test

import (
	"math"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// dotnetDecimal is 12.50 as Microsoft.Azure.Amqp encodes a .NET decimal (coefficient 1250,
// scale 2): its exponent field is 1568 − scale, not the standard 6176 − scale.
var dotnetDecimal = broker.Decimal128{0x0c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x04, 0xe2}

func TestDecimalText(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    interface {
			Text() string
			FilterValue() any
		}
		text  string
		float float64
	}{
		// .NET's 12.50 (coefficient 1250, scale 2) as Microsoft.Azure.Amqp writes it.
		{".NET 12.50", dotnetDecimal, "12.50", 12.5},
		// .NET's -0.0000000000000000000000000001 (scale 28) and 79228162514264337593543950335.
		{".NET smallest", broker.Decimal128{0x8c, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, "-0.0000000000000000000000000001", -1e-28},
		{".NET largest", broker.Decimal128{0x0c, 0x40, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			"79228162514264337593543950335", 79228162514264337593543950335},
		// Standard BID: 1250E-2, with the biased exponent 6174 where the format puts it.
		{"BID 128", broker.Decimal128{0x30, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x04, 0xe2}, "12.50", 12.5},
		{"BID 128 1E+6111", broker.Decimal128{0x5f, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, "1E+6111", math.Inf(1)},
		// decimal32 123 (exponent field 101 = 0) and decimal32 in the "11" form: 8388608E-101.
		{"BID 32", broker.Decimal32{0x32, 0x80, 0x00, 0x7b}, "123", 123},
		{"BID 32 large coefficient", broker.Decimal32{0x60, 0x00, 0x00, 0x00}, "8388608E-101", 8388608e-101},
		{"BID 64 -1", broker.Decimal64{0xb1, 0xc0, 0, 0, 0, 0, 0, 0x01}, "-1", -1},
		{"BID 64 0.001", broker.Decimal64{0x31, 0x60, 0, 0, 0, 0, 0, 0x01}, "0.001", 0.001},
		{"infinity", broker.Decimal64{0x78}, "Infinity", math.Inf(1)},
		{"negative infinity", broker.Decimal32{0xf8}, "-Infinity", math.Inf(-1)},
		{"NaN", broker.Decimal128{0x7c}, "NaN", math.NaN()},
	} {
		if got := tc.d.Text(); got != tc.text {
			t.Errorf("%s: Text = %q; want %q", tc.name, got, tc.text)
		}
		f := tc.d.FilterValue().(float64)
		if f != tc.float && !(math.IsNaN(f) && math.IsNaN(tc.float)) {
			t.Errorf("%s: FilterValue = %v; want %v", tc.name, f, tc.float)
		}
	}
}

func TestTimeSpanAndDateTimeOffset(t *testing.T) {
	for _, tc := range []struct {
		ticks broker.TimeSpan
		want  string
	}{
		{0, "00:00:00"},
		{10_000_000, "00:00:01"},
		{-(((1*24+2)*3600+3*60+4)*10_000_000 + 5), "-1.02:03:04.0000005"},
		{math.MaxInt64, "10675199.02:48:05.4775807"},
		{math.MinInt64, "-10675199.02:48:05.4775808"},
		{1_500_000, "00:00:00.1500000"},
	} {
		if got := tc.ticks.String(); got != tc.want {
			t.Errorf("TimeSpan(%d) = %q; want %q", int64(tc.ticks), got, tc.want)
		}
	}
	if d := broker.TimeSpan(math.MaxInt64).Duration(); d != math.MaxInt64 {
		t.Errorf("the longest TimeSpan as a Duration = %v; want the longest Duration", d)
	}
	if d := broker.TimeSpanOf(90 * time.Minute).Duration(); d != 90*time.Minute {
		t.Errorf("90 minutes back = %v", d)
	}

	at := time.Date(2011, 3, 4, 8, 49, 37, 123_456_700, time.UTC)
	dto := broker.DateTimeOffsetOf(at)
	if int64(dto) != 634348253771234567 {
		t.Errorf("DateTimeOffsetOf(%v) = %d ticks; want 634348253771234567", at, int64(dto))
	}
	if got := dto.Time(); !got.Equal(at) {
		t.Errorf("Time() = %v; want %v", got, at)
	}
	if got := broker.DateTimeOffset(0).Time(); !got.Equal(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("tick 0 = %v; want 0001-01-01", got)
	}
}
