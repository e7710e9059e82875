package atom

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
)

const maxFinite = time.Duration(1<<63 - 1) // equal to broker.Infinite; named for readability

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"PT30S", 30 * time.Second},
		{"PT1M", time.Minute},
		{"PT10M", 10 * time.Minute},
		{"PT1M30S", 90 * time.Second},
		{"P14D", 14 * day},
		{"PT1H", time.Hour},
		{"P1DT2H", 26 * time.Hour},
		{"PT0S", 0},
		{"P0D", 0},
		{"PT0.0S", 0},
		{"PT1.5S", 1500 * time.Millisecond},
		{"PT0.0000001S", 100 * time.Nanosecond},
		{"PT0.1234567S", 123456700 * time.Nanosecond},
		{"PT5.4775807S", 5477580700 * time.Nanosecond},
		// Digits beyond the seventh are below a TimeSpan tick and dropped, not rounded.
		{"PT0.123456789S", 123456700 * time.Nanosecond},
		{"PT0.00000009S", 0},
		{"PT0.99999999999999999999999S", 999999900 * time.Nanosecond},
		{"P1Y", 365 * day},
		{"P1M", 30 * day},
		{"P1Y2M3DT4H5M6.7S", (365+60+3)*day + 4*time.Hour + 5*time.Minute + 6700*time.Millisecond},
		{"PT90M", 90 * time.Minute},
		{"PT3600S", time.Hour},
		{"P7D", 7 * day},
		{"PT20S", 20 * time.Second},
		{"PT5M", 5 * time.Minute},
		{"P1DT1S", day + time.Second},
		{"PT00001M", time.Minute},
		// XmlConvert trims surrounding white space.
		{" PT1M ", time.Minute},
		{"\n\tP14D\r\n", 14 * day},
		// TimeSpan.MaxValue, canonical and as Python's float round trip writes it.
		{"P10675199DT2H48M5.4775807S", broker.Infinite},
		{"P10675199DT2H48M5.477539S", broker.Infinite},
		{"P10675199D", broker.Infinite},
		{"P29227Y", broker.Infinite},
		// The largest durations time.Duration holds stay finite; one more second is infinite.
		{"P106751DT23H47M16.8547758S", maxFinite - 7},
		{"PT9223372036.8547758S", maxFinite - 7},
		{"PT9223372037S", broker.Infinite},
		{"P106752D", broker.Infinite},
		{"PT99999999999999999999999999999S", broker.Infinite},
		{"P99999999999999999999Y99999999999999999999M", broker.Infinite},
		{"PT2562047H47M16.8547758S", maxFinite - 7},
		{"PT2562048H", broker.Infinite},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDurationRejects(t *testing.T) {
	for _, in := range []string{
		"", " ", "T1M", "1M", "P", "PT", "P1DT", "-PT1M", "-P1D", "+PT1M",
		"pt1m", "Pt1M", "PT1m", "PT1.S", "PT.5S", "PT1.5M", "P1.5D", "PT1.5H",
		"P1H", "P1S", "PT1D", "PT1Y", "PT1M1H", "P1D1D", "P1D1Y", "PT1S1S", "PT1H1H",
		"P1DTT1H", "PTT1H", "P1DT2HT3M", "PT1M garbage", "P 1D", "PT 1M", "PT1 M", "PTS",
		"PT1", "P1", "P1DT2", "PT1H2", "PT-1M", "P-1D", "PT1,5S", "PT1.5.5S", "P1W",
		"PT1M\x00", "PT1MZ", "P\u0661D", "PT１M", "PT1ms", "1h", "1m30s", "infinite",
		"00:01:00", "TimeSpan.MaxValue",
	} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, nil; want an error", in, d)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{broker.Infinite, "P10675199DT2H48M5.4775807S"},
		{0, "PT0S"},
		{time.Second, "PT1S"},
		{30 * time.Second, "PT30S"},
		{time.Minute, "PT1M"},
		{90 * time.Second, "PT1M30S"},
		{5 * time.Minute, "PT5M"},
		{10 * time.Minute, "PT10M"},
		{time.Hour, "PT1H"},
		{26 * time.Hour, "P1DT2H"},
		{14 * day, "P14D"},
		{7 * day, "P7D"},
		{day + time.Second, "P1DT1S"},
		{day + time.Hour + time.Minute + time.Second + 500*time.Millisecond, "P1DT1H1M1.5S"},
		{1500 * time.Millisecond, "PT1.5S"},
		{100 * time.Millisecond, "PT0.1S"},
		{100 * time.Nanosecond, "PT0.0000001S"},
		{123456700 * time.Nanosecond, "PT0.1234567S"},
		{10 * time.Microsecond, "PT0.00001S"},
		// Below a tick is dropped, as TimeSpan cannot hold it.
		{150 * time.Nanosecond, "PT0.0000001S"},
		{99 * time.Nanosecond, "PT0S"},
		{maxFinite - 7, "P106751DT23H47M16.8547758S"},
		{365 * day, "P365D"},
		{-time.Minute, "-PT1M"},
		{-90 * time.Second, "-PT1M30S"},
		{time.Duration(-1 << 63), "-P106751DT23H47M16.8547758S"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.in); got != tt.want {
			t.Errorf("FormatDuration(%d) = %q; want %q", int64(tt.in), got, tt.want)
		}
	}
}

// Every tick-aligned duration must survive a trip through the wire form: entities are stored
// from ParseDuration and written with FormatDuration on every GET.
func TestDurationRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(d time.Duration) {
		t.Helper()
		s := FormatDuration(d)
		got, err := ParseDuration(s)
		if err != nil || got != d {
			t.Errorf("ParseDuration(FormatDuration(%d) = %q) = %v, %v; want %v", int64(d), s, got, err, d)
		}
	}
	for _, d := range []time.Duration{0, 100, time.Second, broker.Infinite, maxFinite - 7, 14 * day, 59*time.Minute + 59*time.Second + 999999900} {
		check(d)
	}
	for range 20000 {
		var d time.Duration
		switch rng.IntN(4) {
		case 0:
			d = time.Duration(rng.Int64N(int64(time.Hour)))
		case 1:
			d = time.Duration(rng.Int64N(int64(30 * day)))
		case 2:
			d = time.Duration(rng.Int64())
		default:
			d = time.Duration(rng.Int64N(1000)) * time.Second
		}
		check(d / 100 * 100)
	}
}

func TestFormatTime(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Time{}, "0001-01-01T00:00:00Z"},
		{time.Date(2014, 10, 25, 0, 56, 23, 317978800, time.UTC), "2014-10-25T00:56:23.3179788Z"},
		{time.Date(2021, 4, 21, 19, 36, 18, 500000000, time.UTC), "2021-04-21T19:36:18.5Z"},
		{time.Date(2021, 4, 21, 19, 36, 18, 0, time.UTC), "2021-04-21T19:36:18Z"},
		{time.Date(2021, 4, 21, 19, 36, 18, 123456789, time.UTC), "2021-04-21T19:36:18.1234567Z"},
		{time.Date(2021, 4, 21, 21, 36, 18, 0, time.FixedZone("CEST", 2*3600)), "2021-04-21T19:36:18Z"},
	}
	for _, tt := range tests {
		if got := FormatTime(tt.in); got != tt.want {
			t.Errorf("FormatTime(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
	}{
		{"", time.Time{}},
		{"0001-01-01T00:00:00Z", time.Time{}},
		{"0001-01-01T00:00:00", time.Time{}},
		{"2014-10-25T00:56:23.3179788Z", time.Date(2014, 10, 25, 0, 56, 23, 317978800, time.UTC)},
		{"2014-10-25T00:56:23.317978899Z", time.Date(2014, 10, 25, 0, 56, 23, 317978800, time.UTC)},
		{"2021-04-21T19:36:18Z", time.Date(2021, 4, 21, 19, 36, 18, 0, time.UTC)},
		{" 2021-04-21T21:36:18.5+02:00 ", time.Date(2021, 4, 21, 19, 36, 18, 500000000, time.UTC)},
		{"2021-04-21T19:36:18.25", time.Date(2021, 4, 21, 19, 36, 18, 250000000, time.UTC)},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		if err != nil || !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("ParseTime(%q) = %v, %v; want %v in UTC", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"yesterday", "2021-04-21", "2021-04-21 19:36:18Z", "0000-01-01T00:00:00+01:00", "9999-12-31T23:00:00-02:00", "10/25/2014 12:55:58 AM"} {
		if got, err := ParseTime(in); err == nil {
			t.Errorf("ParseTime(%q) = %v, nil; want an error", in, got)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"PT30S", "PT1M", "P14D", "P1DT2H", "PT1.5S", "P10675199DT2H48M5.4775807S",
		"P10675199DT2H48M5.477539S", "P1Y2M3DT4H5M6.7S", "T1M", "P", "PT", "-PT1M",
		"PT0.123456789S", "PT9223372036.8547758S", "P99999999999999999999D",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return // durations are short; long inputs only slow the fuzzer down
		}
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v; want non-negative", s, d)
		}
		if !strings.HasPrefix(strings.TrimSpace(s), "P") {
			t.Fatalf("ParseDuration(%q) accepted a value without 'P'", s)
		}
		out := FormatDuration(d)
		back, err := ParseDuration(out)
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v; FormatDuration = %q; parses back as %v, %v", s, d, out, back, err)
		}
	})
}
