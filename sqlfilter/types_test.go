package sqlfilter

import (
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
)

// stamp, span, text and decimal stand for a caller's own property types (the store's
// DateTimeOffset, TimeSpan, URI, Decimal128), which filters read through Valuer.
type (
	stamp   time.Time
	span    int64 // ticks
	text    string
	decimal string
)

func (s stamp) FilterValue() any   { return time.Time(s) }
func (s span) FilterValue() any    { return time.Duration(s) * 100 }
func (s text) FilterValue() any    { return string(s) }
func (d decimal) FilterValue() any { return map[string]float64{"12.50": 12.5}[string(d)] }

// loop is a Valuer that returns a Valuer: not a value filters can read.
type loop struct{}

func (loop) FilterValue() any { return loop{} }

// Filters read every type of Service Bus property: the narrower integers and float as numbers,
// a Guid as its text, binary as equal only to the same bytes, and the caller's types as what
// they say they are.
func TestPropertyTypes(t *testing.T) {
	id := uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e")
	m := &MapMessage{Usr: map[string]any{
		"sb": int8(-5), "sh": int16(-300), "i32": int32(70000), "ub": uint8(200), "us": uint16(60000),
		"ui": uint32(4_000_000_000), "ul": uint64(math.MaxUint64), "fl": float32(0.5),
		"id": id, "bin": []byte{1, 2}, "bin2": []byte{1, 2}, "bin3": []byte{3},
		"ch": text("é"), "uri": text("https://x/y"), "dto": stamp(enqueued), "ts": span(15 * 60 * 10_000_000),
		"dec": decimal("12.50"), "bad": loop{},
	}}
	for _, tt := range []struct {
		expr string
		want string // T, F, U or E, as triState says
	}{
		{"sb = -5 AND sh < -299 AND i32 = 70000 AND ub > 199 AND us = 60000", "T"},
		{"ui = 4000000000 AND ub + us = 60200", "T"},
		{"ul > 1.8e19", "T"}, // beyond a long: a double
		{"fl = 0.5 AND fl * 2 = 1", "T"},
		{"id = '0f8fad5b-d9cb-469f-a165-70867728950e'", "T"},
		{"id LIKE '0f8fad5b%'", "T"},
		{"bin = bin2", "T"},
		{"bin <> bin3", "T"},
		{"bin = 'x'", "F"},  // incomparable types compare false
		{"bin > bin3", "F"}, // unordered
		{"bin IS NULL", "F"},
		{"EXISTS(bin)", "T"},
		{"bin + bin = bin", "E"},
		{"ch = 'é' AND uri LIKE 'https://%'", "T"},
		{"dto = sys.EnqueuedTimeUtc", "T"},
		{"dto + ts > dto", "T"},
		{"ts = dto - (dto - ts)", "T"},
		{"dec > 12.4 AND dec < 12.6", "T"},
		{"bad = 1", "E"},
	} {
		mm := clone(m)
		mm.Sys = map[string]any{"EnqueuedTimeUtc": enqueued}
		if got := triState(t, tt.expr, mm); got != tt.want {
			t.Errorf("%s = %s; want %s", tt.expr, got, tt.want)
		}
	}

	// Correlation filters compare the same way: a narrower integer equals a long, a Guid its
	// text, binary the same bytes.
	cf := &CorrelationFilter{Properties: map[string]any{"i32": int64(70000), "id": id.String(), "bin": []byte{1, 2}}}
	if !cf.Match(m) {
		t.Error("a correlation filter on an int, a Guid and binary does not match the same values")
	}
	cf.Properties["bin"] = []byte{1}
	if cf.Match(m) {
		t.Error("a correlation filter on other bytes matches")
	}

	// A SET copies a value of a new type as the filter reads it; binary stays binary.
	a, err := ParseAction("SET copy = bin; SET n = sb", nil)
	if err != nil {
		t.Fatal(err)
	}
	mm := clone(m)
	if err := a.Apply(mm); err != nil {
		t.Fatal(err)
	}
	if b, ok := mm.Usr["copy"].([]byte); !ok || string(b) != "\x01\x02" {
		t.Errorf("SET copy = bin gave %#v", mm.Usr["copy"])
	}
	if mm.Usr["n"] != int64(-5) {
		t.Errorf("SET n = sb gave %#v; want int64(-5)", mm.Usr["n"])
	}
	// What the action did not touch keeps its type.
	if mm.Usr["sb"] != int8(-5) || mm.Usr["fl"] != float32(0.5) || mm.Usr["id"] != id {
		t.Errorf("untouched properties changed: %#v %#v %#v", mm.Usr["sb"], mm.Usr["fl"], mm.Usr["id"])
	}
}
