package sqlfilter

import (
	"testing"
	"time"
)

func benchMessage() *MapMessage {
	return &MapMessage{
		Sys: map[string]any{
			"MessageId": "2f1c7a", "Label": "order-created", "To": "orders", "ContentType": "application/json",
			"SequenceNumber": int64(1234567), "EnqueuedTimeUtc": time.Now(), "DeliveryCount": int64(1),
			"CorrelationId": "c-42", "SessionId": "s-1",
		},
		Usr: map[string]any{
			"region": "eu", "amount": int64(250), "currency": "EUR", "priority": int64(2),
			"customer": "c-991", "express": true, "weight": 1.75, "source": "web",
		},
	}
}

func BenchmarkMatch(b *testing.B) {
	f, err := ParseFilter("user.region = 'eu' AND sys.Label LIKE 'order%' AND amount > 100", nil)
	if err != nil {
		b.Fatal(err)
	}
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := f.Match(m); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkMatchComplex(b *testing.B) {
	f, err := ParseFilter("(region IN ('us', 'ap', 'eu') OR sys.To = 'x') AND amount * 1.2 > 100 AND "+
		"sys.Label NOT LIKE '%cancel%' AND EXISTS(customer) AND missing IS NULL AND priority <> 3", nil)
	if err != nil {
		b.Fatal(err)
	}
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := f.Match(m); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkMatchCorrelation(b *testing.B) {
	f := &CorrelationFilter{CorrelationID: "c-42", Label: "order-created",
		Properties: map[string]any{"region": "eu", "priority": 2}}
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if !f.Match(m) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkParseFilter(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseFilter("user.region = 'eu' AND sys.Label LIKE 'order%' AND amount > 100", nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApply(b *testing.B) {
	a, err := ParseAction("SET total = amount * weight; SET sys.Label = 'routed'; REMOVE source", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		m := benchMessage()
		b.StartTimer()
		if err := a.Apply(m); err != nil {
			b.Fatal(err)
		}
	}
}
