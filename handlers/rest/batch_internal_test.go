package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/broker"
)

// decodeBatchAsEncodingJSON is decodeBatch as it was written with encoding/json's Decoder, each
// element decoded into an api.BatchMessage: the reference decodeBatch must agree with.
func decodeBatchAsEncodingJSON(rd io.Reader, limit int64, fromProxy bool) ([]broker.Message, error) {
	dec := json.NewDecoder(rd)
	dec.UseNumber()
	notArray := broker.BadRequest("The batch is not a JSON array of messages.")
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, notArray
	}
	var msgs []broker.Message
	var total int64
	for i := 0; dec.More(); i++ {
		if i == maxBatchMessages {
			return nil, broker.BadRequest("A batch may contain at most %d messages.", maxBatchMessages)
		}
		var it api.BatchMessage
		if err := dec.Decode(&it); err != nil {
			return nil, notArray
		}
		m, err := batchItem(i, it, nil, fromProxy)
		if err != nil {
			return nil, err
		}
		if total += int64(len(m.Body)); total > limit {
			return nil, errBatchTooLarge
		}
		msgs = append(msgs, m)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') || !atEOF(dec) {
		return nil, notArray
	}
	if len(msgs) == 0 {
		return nil, broker.BadRequest("The batch contains no messages.")
	}
	return msgs, nil
}

// FuzzDecodeBatchAsEncodingJSON: decodeBatch reads every batch as encoding/json did: the same
// messages, or the same refusal.
func FuzzDecodeBatchAsEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`[{"Body":"a"},{"Body":"b","BrokerProperties":{"Label":"l","TimeToLive":10},"UserProperties":{"p":1,"q":"x","r":true,"s":2.5}}]`,
		`[{"BodyBase64":"AAEC","BrokerProperties":{"ContentType":"application/octet-stream","SessionId":"s"}}]`,
		`[{"body":"x","BODY":"y","bodybase64":null,"brokerproperties":null,"userproperties":null,"other":[1,{"a":2}]}]`,
		`[{"Body":"\ud800 \u00e9 \xff\xfe","UserProperties":{"A":1,"a":2}}]`,
		`[{"BodyBase64":"AA\r\nEC"},{"BodyBase64":[1,2,3]},{"BodyBase64":"!"}]`,
		`[{"Body":1}]`, `[{"Body":"a","Body":null}]`, `[null]`, `[1]`, `["x"]`, `[[]]`,
		`[]`, `{}`, ` [ {"Body" : "a" } ] `, `[{"Body":"a"}] x`, `[{"Body":"a"}][]`, `[{"Body":"a"},]`, `[{"Body":"a"}`,
		`[{"Body":"a","BrokerProperties":"nope"}]`, `[{"Body":"a","UserProperties":{"p":"\n"}}]`,
		`[{"Body":"a","UserProperties":{"p":1e400}}]`, `[{"Body":"a","UserProperties":[1]}]`,
	} {
		f.Add([]byte(s), int64(math.MaxInt64))
	}
	f.Add([]byte(`[{"Body":"aaaa"},{"Body":"bbbb"}]`), int64(5))
	f.Fuzz(func(t *testing.T, body []byte, limit int64) {
		got, gotErr := decodeBatch(bytes.NewReader(body), limit, false)
		want, wantErr := decodeBatchAsEncodingJSON(bytes.NewReader(body), limit, false)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && errorText(gotErr) != errorText(wantErr) {
			t.Fatalf("decodeBatch(%q) error %v; encoding/json: %v", body, gotErr, wantErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("decodeBatch(%q) differs from encoding/json (-encoding/json +decodeBatch):\n%s", body, diff)
		}
	})
}

// errorText is what a client would see of a decodeBatch error.
func errorText(err error) string {
	if errors.Is(err, errBatchTooLarge) {
		return err.Error()
	}
	return broker.ErrorMessage(err)
}

// BenchmarkDecodeBatch decodes what sbgate bench's send-batch sends: ten 1 KB bodies.
func BenchmarkDecodeBatch(b *testing.B) {
	text := strings.Repeat("x", 1024)
	items := make([]api.BatchMessage, 10)
	for i := range items {
		items[i] = api.BatchMessage{Body: &text}
	}
	body, _ := json.Marshal(items)
	for _, impl := range []struct {
		name   string
		decode func(io.Reader, int64, bool) ([]broker.Message, error)
	}{{"jsontext", decodeBatch}, {"encoding-json", decodeBatchAsEncodingJSON}} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := impl.decode(bytes.NewReader(body), math.MaxInt64, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
