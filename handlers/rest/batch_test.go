package rest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestSendBatch(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	batch := `[
  {"Body": "first",  "BrokerProperties": {"Label": "M1", "TimeToLiveTimeSpan": "0.00:00:40", "MessageId": "b1"}},
  {"Body": "second", "BrokerProperties": {"Label": "M2", "ContentType": "application/json", "CorrelationId": "c2"},
   "UserProperties": {"Priority": "Low", "n": 5, "f": 1.5, "ok": true, "big": 9007199254740993, "tab": "a\tb", "utf8": "h\u00e9"}},
  {"Body": "third",  "BrokerProperties": {"Label": "M3", "TimeToLive": "10", "SessionId": "s3", "ForcePersistence": "false",
   "ScheduledEnqueueTimeUtc": ""},
   "UserProperties": {"Priority": "Medium", "Customer": "ABC", "count": "3"}}
]`
	r := b.do(t, call{method: http.MethodPost, path: "/q/messages?api-version=2016-07", body: batch, key: "sender",
		header: map[string]string{"Content-Type": "application/vnd.microsoft.servicebus.json"}})
	r.want(t, "send batch", http.StatusCreated)
	if r.body != "" {
		t.Errorf("send batch: body %q; want empty", r.body)
	}
	if c := b.counts(t, "q"); c.Active != 3 {
		t.Fatalf("counts after the batch = %+v; want 3 active", c)
	}

	want := []struct {
		body, contentType string
		broker            map[string]string
		user              map[string]string
	}{
		{"first", "", map[string]string{"Label": "M1", "TimeToLive": "40", "MessageId": "b1"}, nil},
		{"second", "application/json", map[string]string{"Label": "M2", "CorrelationId": "c2", "TimeToLive": "922337203685.47754"},
			map[string]string{"Priority": `"Low"`, "n": "5", "f": "1.5", "ok": "true", "big": "9007199254740993", "tab": "\"a\tb\"", "utf8": `"hé"`}},
		// The legacy Python client sends every value as a string: "10" is ten seconds, and user
		// property strings stay strings.
		{"third", "", map[string]string{"Label": "M3", "TimeToLive": "10", "SessionId": "s3", "PartitionKey": "s3"},
			map[string]string{"Priority": `"Medium"`, "Customer": `"ABC"`, "count": `"3"`}},
	}
	for i, w := range want {
		what := fmt.Sprintf("receive batch message %d", i+1)
		r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, what, http.StatusOK)
		if r.body != w.body || r.header.Get("Content-Type") != w.contentType {
			t.Errorf("%s: body, Content-Type = %q, %q; want %q, %q", what, r.body, r.header.Get("Content-Type"), w.body, w.contentType)
		}
		bp := brokerProperties(t, r.header.Get("BrokerProperties"))
		for k, v := range w.broker {
			if got := fmt.Sprint(bp[k]); got != v {
				t.Errorf("%s: BrokerProperties.%s = %s; want %s", what, k, got, v)
			}
		}
		for k, v := range w.user {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s: user property %s = %s; want %s", what, k, got, v)
			}
		}
	}
	b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive after the batch", http.StatusNoContent)

	// The old documentation's ".yml" typo and parameters on the media type are accepted too.
	for _, ct := range []string{"application/vnd.microsoft.servicebus.yml", "application/vnd.microsoft.servicebus.json; charset=utf-8"} {
		b.do(t, call{method: http.MethodPost, path: "/q/messages", body: `[{"Body":"typo"}]`, key: "sender",
			header: map[string]string{"Content-Type": ct}}).want(t, "send batch as "+ct, http.StatusCreated)
		r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "receive batch sent as "+ct, http.StatusOK)
		if r.body != "typo" {
			t.Errorf("batch sent as %s: body %q; want %q", ct, r.body, "typo")
		}
	}
}

// TestSendBatchRefusedWhole checks that a batch with one bad message stores none.
func TestSendBatchRefusedWhole(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.createQueue(t, "small", "<MaxMessageSizeInKilobytes>1</MaxMessageSizeInKilobytes>")
	long := strings.Repeat("x", 129)
	tests := []struct {
		name, queue, body string
		status            int
		detail            string
	}{
		{"MessageId of 129 characters", "q", `[{"Body":"a","BrokerProperties":{"MessageId":"ok"}},{"Body":"b","BrokerProperties":{"MessageId":"` + long + `"}},{"Body":"c"}]`,
			http.StatusBadRequest, "The MessageId is longer than 128 characters."},
		{"SessionId and PartitionKey differ", "q", `[{"Body":"a"},{"Body":"b","BrokerProperties":{"SessionId":"s","PartitionKey":"p"}}]`,
			http.StatusBadRequest, "must be equal to the SessionId"},
		{"malformed JSON", "q", `[{"Body":"a"},{"Body":`, http.StatusBadRequest, "The batch is not a JSON array of messages."},
		{"an object, not an array", "q", `{"Body":"a"}`, http.StatusBadRequest, "not a JSON array"},
		{"two arrays", "q", `[{"Body":"a"}] [{"Body":"b"}]`, http.StatusBadRequest, "not a JSON array"},
		{"stray bracket", "q", `[{"Body":"a"}]]`, http.StatusBadRequest, "not a JSON array"},
		{"empty", "q", `[]`, http.StatusBadRequest, "no messages"},
		{"no body", "q", `[{"Body":"a"},{"BrokerProperties":{}}]`, http.StatusBadRequest, "Message 2 of the batch has no Body."},
		{"TimeToLive not a number", "q", `[{"Body":"a"},{"Body":"b","BrokerProperties":{"TimeToLive":"soon"}}]`, http.StatusBadRequest,
			"Message 2 of the batch: BrokerProperties.TimeToLive must be a positive number of seconds."},
		{"BrokerProperties a string", "q", `[{"Body":"a","BrokerProperties":"{}"}]`, http.StatusBadRequest, "Message 1 of the batch: The BrokerProperties"},
		{"nested user property", "q", `[{"Body":"a","UserProperties":{"p":{"x":1}}}]`, http.StatusBadRequest, "user property 'p' must be a string, number or boolean"},
		{"reserved user property name", "q", `[{"Body":"a","UserProperties":{"Content-Type":"x"}}]`, http.StatusBadRequest, "cannot be a user property name"},
		{"user property name with a space", "q", `[{"Body":"a","UserProperties":{"a b":"x"}}]`, http.StatusBadRequest, "cannot be a user property name"},
		// A value no HTTP response can carry would make the message impossible to receive.
		{"control character in a user property", "q", `[{"Body":"a","UserProperties":{"p":"x\u0001y"}}]`, http.StatusBadRequest,
			"Message 1 of the batch: user property 'p' contains control characters"},
		{"newline in a user property", "q", `[{"Body":"a"},{"Body":"b","UserProperties":{"p":"line1\nline2"}}]`, http.StatusBadRequest,
			"Message 2 of the batch: user property 'p' contains control characters"},
		{"control character in ContentType", "q", `[{"Body":"a","BrokerProperties":{"ContentType":"text/plain\r\nX-Evil: 1"}}]`, http.StatusBadRequest,
			"Message 1 of the batch: BrokerProperties.ContentType contains control characters"},
		{"over the size limit together", "small", `[{"Body":"` + strings.Repeat("a", 600) + `"},{"Body":"` + strings.Repeat("b", 600) + `"}]`,
			http.StatusForbidden, "exceeds the limit of 1024 bytes"},
		{"far over the size limit", "small", `[{"Body":"` + strings.Repeat("a", 200<<10) + `"}]`, http.StatusForbidden, "exceeds the limit of 1024 bytes"},
	}
	for _, tc := range tests {
		r := b.do(t, call{method: http.MethodPost, path: "/" + tc.queue + "/messages", body: tc.body, key: "sender",
			header: map[string]string{"Content-Type": "application/vnd.microsoft.servicebus.json"}})
		r.wantError(t, tc.name, tc.status, tc.detail)
	}
	for _, q := range []string{"q", "small"} {
		if c := b.counts(t, q); c.Total() != 0 {
			t.Errorf("counts of %s after the refused batches = %+v; want none", q, c)
		}
	}
}
