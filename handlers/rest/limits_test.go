package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// responseHeadBytes is the size of a response's head as it came over the wire: the status line,
// every header line (Transfer-Encoding, which the Go client moves out of Header, included) and
// the blank line.
func responseHeadBytes(r result) (bytes, lines int) {
	bytes = len("HTTP/1.1 201 Created\r\n") + 2
	for k, vs := range r.header {
		for _, v := range vs {
			bytes += len(k) + len(v) + 4
			lines++
		}
	}
	if r.chunked {
		bytes += len("Transfer-Encoding: chunked\r\n")
		lines++
	}
	return bytes, lines
}

// Node.js refuses a response head over 16 KiB; Python's http.client more than 100 header lines.
const (
	nodeMaxHeadBytes    = 16 * 1024
	pythonMaxHeadLines  = 100
	atomContentTypeJSON = "application/vnd.microsoft.servicebus.json"
)

// TestPropertiesThatCannotBeReceivedAreRefused: a message whose properties would not fit in the
// response head of common clients is refused at send, single or in a batch, and nothing of it is
// stored; a message at the limit is received (and dead-lettered and received again) within
// Node's 16 KiB and Python's 100 lines.
func TestPropertiesThatCannotBeReceivedAreRefused(t *testing.T) {
	b := setup(t)
	long := strings.Repeat("q", 250) // a long entity name makes the Location header long too
	b.createQueue(t, long, "<MaxMessageSizeInKilobytes>1024</MaxMessageSizeInKilobytes>")
	path := "/" + long + "/messages"

	for _, tc := range []struct {
		name   string
		header map[string]string
	}{
		{"200 KB Label", map[string]string{"BrokerProperties": `{"Label":"` + strings.Repeat("l", 200*1024) + `"}`}},
		{"20 KB user property", map[string]string{"big": `"` + strings.Repeat("u", 20*1024) + `"`}},
		{"many properties that add up", func() map[string]string {
			h := map[string]string{}
			for i := range 20 {
				h[fmt.Sprintf("p%d", i)] = `"` + strings.Repeat("v", 600) + `"`
			}
			return h
		}()},
		{"too many properties", func() map[string]string {
			h := map[string]string{}
			for i := range 65 {
				h[fmt.Sprintf("p%d", i)] = "1"
			}
			return h
		}()},
		{"12 KB content type", map[string]string{"Content-Type": "text/plain; x=" + strings.Repeat("c", 12*1024)}},
	} {
		b.do(t, call{method: http.MethodPost, path: path, body: "x", header: tc.header}).
			wantError(t, tc.name, http.StatusBadRequest, "so that every")
	}
	batch, _ := json.Marshal([]map[string]any{
		{"Body": "fine"},
		{"Body": "too big", "BrokerProperties": map[string]string{"Label": strings.Repeat("l", 200*1024)}},
	})
	b.do(t, call{method: http.MethodPost, path: path, body: string(batch), header: map[string]string{"Content-Type": atomContentTypeJSON}}).
		wantError(t, "batch with a 200 KB Label", http.StatusBadRequest, "Message 2 of the batch")
	batch, _ = json.Marshal([]map[string]any{{"Body": "x", "UserProperties": map[string]string{"big": strings.Repeat("u", 20*1024)}}})
	b.do(t, call{method: http.MethodPost, path: path, body: string(batch), header: map[string]string{"Content-Type": atomContentTypeJSON}}).
		wantError(t, "batch with a 20 KB user property", http.StatusBadRequest, "Message 1 of the batch")
	if c := b.counts(t, long); c.Total() != 0 {
		t.Fatalf("counts after refused sends = %+v; want nothing stored", c)
	}

	// Grow the properties until the send is refused: the largest accepted message must be
	// receivable by every client, also as a dead letter with the longest reason allowed.
	accepted := 0
	for n := 1024; n < 16*1024; n += 256 {
		h := map[string]string{
			"BrokerProperties": `{"Label":"` + strings.Repeat("l", n/2) + `","MessageId":"m","CorrelationId":"` + strings.Repeat("c", 100) + `"}`,
			"big":              `"` + strings.Repeat("u", n/2) + `"`,
			"Content-Type":     "text/plain",
		}
		for i := range 60 {
			h[fmt.Sprintf("p%d", i)] = "1"
		}
		r := b.do(t, call{method: http.MethodPost, path: path, body: "x", header: h})
		if r.status == http.StatusBadRequest {
			break
		}
		r.want(t, fmt.Sprintf("send with %d bytes of properties", n), http.StatusCreated)
		accepted++
	}
	if accepted == 0 || accepted > 40 {
		t.Fatalf("accepted %d growing messages; want some, then a refusal", accepted)
	}
	for range accepted - 1 { // only the largest is of interest
		b.do(t, call{method: http.MethodDelete, path: path + "/head?timeout=0"}).want(t, "drop a smaller one", http.StatusOK)
	}
	r := b.do(t, call{method: http.MethodPost, path: path + "/head?timeout=0"}).want(t, "peek-lock the largest", http.StatusCreated)
	if n, lines := responseHeadBytes(r); n > nodeMaxHeadBytes || lines > pythonMaxHeadLines {
		t.Errorf("the largest accepted message has a %d-byte head of %d lines; want at most %d bytes, %d lines", n, lines, nodeMaxHeadBytes, pythonMaxHeadLines)
	}
	reason, _ := json.Marshal(map[string]string{"DeadLetterReason": strings.Repeat("r", 900), "DeadLetterErrorDescription": strings.Repeat("d", 900)})
	loc := settlePath(t, r.header.Get("Location"))
	tooLong, _ := json.Marshal(map[string]string{"DeadLetterReason": "r", "DeadLetterErrorDescription": strings.Repeat("d", 3000)})
	b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter", body: string(tooLong)}).
		wantError(t, "dead-letter with a 3000-byte description", http.StatusBadRequest, "at most")
	b.do(t, call{method: http.MethodPost, path: loc + "/$deadletter", body: string(reason)}).want(t, "dead-letter the largest", http.StatusOK)
	r = b.do(t, call{method: http.MethodDelete, path: "/" + long + "/$DeadLetterQueue/messages/head?timeout=0"}).want(t, "receive the dead letter", http.StatusOK)
	if n, lines := responseHeadBytes(r); n > nodeMaxHeadBytes || lines > pythonMaxHeadLines {
		t.Errorf("the largest dead letter has a %d-byte head of %d lines; want at most %d bytes, %d lines", n, lines, nodeMaxHeadBytes, pythonMaxHeadLines)
	}
	if r.header.Get("DeadLetterErrorDescription") == "" {
		t.Errorf("dead letter headers %v; want its description", r.header)
	}
}
