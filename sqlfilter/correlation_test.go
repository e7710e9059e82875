package sqlfilter

import (
	"testing"
	"time"
)

func TestCorrelationFilter(t *testing.T) {
	m := &MapMessage{
		Sys: map[string]any{
			"CorrelationId": "c-1", "MessageId": "m-1", "To": "to", "ReplyTo": "rt", "Label": "lbl",
			"SessionId": "s", "ReplyToSessionId": "rts", "ContentType": "application/json",
			"SequenceNumber": int64(7),
		},
		Usr: map[string]any{
			"region": "eu", "n": int64(3), "x": 2.5, "flag": true, "when": enqueued, "null": nil,
		},
	}
	tests := []struct {
		name string
		f    CorrelationFilter
		want bool
	}{
		{"empty matches all", CorrelationFilter{}, true},
		{"correlation id", CorrelationFilter{CorrelationID: "c-1"}, true},
		{"correlation id differs", CorrelationFilter{CorrelationID: "c-2"}, false},
		{"case-sensitive", CorrelationFilter{CorrelationID: "C-1"}, false},
		{"every field", CorrelationFilter{CorrelationID: "c-1", MessageID: "m-1", To: "to", ReplyTo: "rt",
			Label: "lbl", SessionID: "s", ReplyToSessionID: "rts", ContentType: "application/json"}, true},
		{"one field of many differs", CorrelationFilter{CorrelationID: "c-1", Label: "other"}, false},
		{"message id", CorrelationFilter{MessageID: "m-1"}, true},
		{"to", CorrelationFilter{To: "x"}, false},
		{"reply to", CorrelationFilter{ReplyTo: "rt"}, true},
		{"session", CorrelationFilter{SessionID: "s"}, true},
		{"reply to session", CorrelationFilter{ReplyToSessionID: "nope"}, false},
		{"content type", CorrelationFilter{ContentType: "application/json"}, true},
		{"string property", CorrelationFilter{Properties: map[string]any{"region": "eu"}}, true},
		{"property name case-insensitive", CorrelationFilter{Properties: map[string]any{"REGION": "eu"}}, true},
		{"property value case-sensitive", CorrelationFilter{Properties: map[string]any{"region": "EU"}}, false},
		{"int property", CorrelationFilter{Properties: map[string]any{"n": int64(3)}}, true},
		{"int vs Go int", CorrelationFilter{Properties: map[string]any{"n": 3}}, true},
		{"int vs double", CorrelationFilter{Properties: map[string]any{"n": 3.0}}, true},
		{"double", CorrelationFilter{Properties: map[string]any{"x": 2.5}}, true},
		{"double differs", CorrelationFilter{Properties: map[string]any{"x": 2}}, false},
		{"number vs string", CorrelationFilter{Properties: map[string]any{"n": "3"}}, false},
		{"bool", CorrelationFilter{Properties: map[string]any{"flag": true}}, true},
		{"time", CorrelationFilter{Properties: map[string]any{"when": enqueued.In(time.FixedZone("x", 3600))}}, true},
		{"nil matches null", CorrelationFilter{Properties: map[string]any{"null": nil}}, true},
		{"nil needs presence", CorrelationFilter{Properties: map[string]any{"absent": nil}}, false},
		{"missing property", CorrelationFilter{Properties: map[string]any{"absent": "x"}}, false},
		{"unsupported type", CorrelationFilter{Properties: map[string]any{"region": []byte("eu")}}, false},
		{"fields and properties", CorrelationFilter{Label: "lbl", Properties: map[string]any{"region": "eu", "n": 3}}, true},
		{"fields and one wrong property", CorrelationFilter{Label: "lbl", Properties: map[string]any{"region": "eu", "n": 4}}, false},
	}
	for _, tt := range tests {
		if got := tt.f.Match(m); got != tt.want {
			t.Errorf("%s: Match(%+v) = %v; want %v", tt.name, tt.f, got, tt.want)
		}
	}

	// An unset or non-string system property never equals a set field.
	bare := &MapMessage{Sys: map[string]any{"Label": int64(1)}}
	for _, f := range []CorrelationFilter{{CorrelationID: "c"}, {Label: "1"}} {
		if f.Match(bare) {
			t.Errorf("Match(%+v) on %v = true; want false", f, bare.Sys)
		}
	}
}
