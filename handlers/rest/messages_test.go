package rest_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/internal/eventually"
)

// wire is a response as it was on the wire: header names in their sent casing.
type wire struct {
	statusLine string
	header     map[string]string // name as sent → value; a repeated name fails the test
	body       string
}

// raw sends one HTTP/1.1 request over its own connection and reads the response without
// net/http's canonicalisation, to see exactly which headers the server wrote.
func (b *bundle) raw(t *testing.T, method, path, host string, headers ...string) wire {
	t.Helper()
	conn, err := net.Dial("tcp", b.host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if host == "" {
		host = b.host
	}
	req := method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" +
		"Authorization: " + b.token("http://"+b.host+path, "root") + "\r\n"
	for _, h := range headers {
		req += h + "\r\n"
	}
	req += "Content-Length: 0\r\n\r\n"
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	line := func() string {
		s, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s %s: read response: %v", method, path, err)
		}
		return strings.TrimRight(s, "\r\n")
	}
	w := wire{statusLine: line(), header: map[string]string{}}
	for {
		l := line()
		if l == "" {
			break
		}
		name, value, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("%s %s: bad header line %q", method, path, l)
		}
		if _, dup := w.header[name]; dup {
			t.Errorf("%s %s: header %s sent twice", method, path, name)
		}
		w.header[name] = value
	}
	if w.header["Transfer-Encoding"] == "chunked" {
		body, err := io.ReadAll(httputil.NewChunkedReader(br))
		if err != nil {
			t.Fatalf("%s %s: chunked body: %v", method, path, err)
		}
		w.body = string(body)
	} else if n := w.header["Content-Length"]; n != "" && n != "0" {
		var size int
		fmt.Sscan(n, &size)
		buf := make([]byte, size)
		if _, err := io.ReadFull(br, buf); err != nil {
			t.Fatal(err)
		}
		w.body = string(buf)
	}
	return w
}

var lockTokenRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestSendAndPeekLockOnTheWire sends a message with every settable broker property and a user
// property of each type, then checks the peek-locked response byte for byte: status, every header
// by its exact name, no Content-Length, a chunked body.
func TestSendAndPeekLockOnTheWire(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "orders", "")
	bp := `{"MessageId":"msg-1","CorrelationId":"{701332F3-B37B-4D29-AA0A-E367906C206E}","SessionId":"session",` +
		`"ReplyToSessionId":"repsession","Label":"lbl","To":"to","ReplyTo":"repTo","PartitionKey":"session",` +
		`"TimeToLive":3600,"ScheduledEnqueueTimeUtc":"Sun, 01 Mar 2026 12:00:30 GMT","ForcePersistence":true,` +
		`"ViaPartitionKey":"via","DeliveryCount":7,"SequenceNumber":99,"LockToken":"not read","Unknown":{"x":1}}`
	r := b.do(t, call{method: http.MethodPost, path: "/orders/messages?api-version=2016-07", body: "hello, world", key: "sender",
		header: map[string]string{
			"Content-Type":           "text/plain; charset=utf-8",
			"BrokerProperties":       bp,
			"pstr":                   `"a b"`,
			"pquote":                 `"say \"hi\""`,
			"order-time":             `"Fri, 04 Mar 2011 08:49:37 GMT"`,
			"pazure":                 `"Tue, 02 Jan 2024 03:04:05 GMT+0000"`,
			"pbool":                  "true",
			"pint":                   "1",
			"pfloat":                 "2.5",
			"Priority":               "High",
			"Customer":               "12345,ABC",
			"User-Agent":             "Azure-SDK-For-Node.js/0.9.27",
			"Accept-Charset":         "UTF-8",
			"x-ms-client-request-id": "abc",
			"X-Forwarded-For":        "10.0.0.1",
			"traceparent":            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		}})
	r.want(t, "send", http.StatusCreated)
	if r.body != "" || r.header.Get("Content-Type") != "application/xml; charset=utf-8" {
		t.Errorf("send: Content-Type, body = %q, %q; want %q, empty", r.header.Get("Content-Type"), r.body, "application/xml; charset=utf-8")
	}

	// Scheduled for 12:00:30: invisible until then.
	b.do(t, call{method: http.MethodPost, path: "/orders/messages/head?timeout=0"}).want(t, "peek-lock before the scheduled time", http.StatusNoContent)
	if c := b.counts(t, "orders"); c.Scheduled != 1 || c.Active != 0 {
		t.Errorf("counts before the scheduled time = %+v; want 1 scheduled", c)
	}
	b.clock.Advance(30 * time.Second)

	// azure-sb sends an empty Content-Type on bodyless requests.
	w := b.raw(t, http.MethodPost, "/orders/messages/head?timeout=0", "", "Content-Type: ", "Accept-Charset: UTF-8")
	if w.statusLine != "HTTP/1.1 201 Created" {
		t.Fatalf("peek-lock: status line %q; want %q (headers %v, body %q)", w.statusLine, "HTTP/1.1 201 Created", w.header, w.body)
	}
	props := brokerProperties(t, w.header["BrokerProperties"])
	token, _ := props["LockToken"].(string)
	if !lockTokenRE.MatchString(token) {
		t.Fatalf("peek-lock: LockToken = %v; want a lower-case GUID", props["LockToken"])
	}
	// ExpiresAtUtc is EnqueuedTimeUtc (the scheduled time) + TimeToLive; ViaPartitionKey comes
	// back as sent.
	wantBP := `{"CorrelationId":"{701332F3-B37B-4D29-AA0A-E367906C206E}","DeliveryCount":1,"EnqueuedSequenceNumber":0,` +
		`"EnqueuedTimeUtc":"Sun, 01 Mar 2026 12:00:30 GMT","ExpiresAtUtc":"Sun, 01 Mar 2026 13:00:30 GMT","Label":"lbl","LockToken":"` + token + `",` +
		`"LockedUntilUtc":"Sun, 01 Mar 2026 12:01:30 GMT","MessageId":"msg-1","PartitionKey":"session","ReplyTo":"repTo",` +
		`"ReplyToSessionId":"repsession","ScheduledEnqueueTimeUtc":"Sun, 01 Mar 2026 12:00:30 GMT","SequenceNumber":1,` +
		`"SessionId":"session","State":"Active","TimeToLive":3600,"To":"to","ViaPartitionKey":"via"}`
	wantHeaders := map[string]string{
		"Content-Type":      "text/plain; charset=utf-8",
		"Location":          "http://" + b.host + "/orders/messages/1/" + token,
		"BrokerProperties":  wantBP,
		"Transfer-Encoding": "chunked",
		// User properties come back typed, names in lower case (Go's server canonicalises the
		// sender's casing away, protocol.md §2.11).
		"pstr":       `"a b"`,
		"pquote":     `"say \"hi\""`,
		"order-time": `"Fri, 04 Mar 2011 08:49:37 GMT"`,
		"pazure":     `"Tue, 02 Jan 2024 03:04:05 GMT"`,
		"pbool":      "true",
		"pint":       "1",
		"pfloat":     "2.5",
		"priority":   `"High"`,
		"customer":   `"12345,ABC"`,
		// Not from a trusted proxy: a header like any other, so a user property.
		"x-forwarded-for": `"10.0.0.1"`,
	}
	date := w.header["Date"]
	if _, err := time.Parse(http.TimeFormat, date); err != nil {
		t.Errorf("peek-lock: Date header %q: %v", date, err)
	}
	delete(w.header, "Date")
	var names []string
	for name := range w.header {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if want, ok := wantHeaders[name]; !ok {
			t.Errorf("peek-lock: stray header %s: %s", name, w.header[name])
		} else if w.header[name] != want {
			t.Errorf("peek-lock: header %s = %s; want %s", name, w.header[name], want)
		}
	}
	for name, want := range wantHeaders {
		if _, ok := w.header[name]; !ok {
			t.Errorf("peek-lock: no %s header; want %s", name, want)
		}
	}
	if w.body != "hello, world" {
		t.Errorf("peek-lock: body = %q; want %q", w.body, "hello, world")
	}
}

// TestPeekLockSettlement walks a lock through unlock, renew and complete, settling at the path
// taken from Location as azure-sb does.
func TestPeekLockSettlement(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.send(t, "q", "body-1", map[string]string{"BrokerProperties": `{"MessageId":"id-1"}`})

	peek := func(what string, wantDelivery int) (string, map[string]any) {
		t.Helper()
		r := b.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=0"}).want(t, what, http.StatusCreated)
		if r.body != "body-1" {
			t.Errorf("%s: body = %q; want %q", what, r.body, "body-1")
		}
		if _, ok := r.header["Content-Length"]; ok || !r.chunked {
			t.Errorf("%s: Content-Length %q, chunked %t; want a chunked body", what, r.header.Get("Content-Length"), r.chunked)
		}
		bp := brokerProperties(t, r.header.Get("BrokerProperties"))
		if fmt.Sprint(bp["DeliveryCount"]) != fmt.Sprint(wantDelivery) {
			t.Errorf("%s: DeliveryCount = %v; want %d", what, bp["DeliveryCount"], wantDelivery)
		}
		loc := r.header.Get("Location")
		if want := fmt.Sprintf("http://%s/q/messages/%v/%v", b.host, bp["SequenceNumber"], bp["LockToken"]); loc != want {
			t.Errorf("%s: Location = %q; want %q", what, loc, want)
		}
		return settlePath(t, loc), bp
	}
	settle := func(what, method, path string, status int) result {
		t.Helper()
		r := b.do(t, call{method: method, path: path, key: "listener"})
		if status != http.StatusOK {
			r.wantError(t, what, status, "The lock supplied is invalid.")
			return r
		}
		r.want(t, what, status)
		if r.body != "" || r.header.Get("Content-Type") != "application/xml; charset=utf-8" {
			t.Errorf("%s: Content-Type, body = %q, %q; want %q, empty", what, r.header.Get("Content-Type"), r.body, "application/xml; charset=utf-8")
		}
		return r
	}

	first, bp := peek("first peek-lock", 1)
	if bp["LockedUntilUtc"] != "Sun, 01 Mar 2026 12:01:00 GMT" || bp["MessageId"] != "id-1" || bp["TimeToLive"] == nil {
		t.Errorf("first peek-lock: BrokerProperties = %v", bp)
	}
	// While locked the message is not delivered again.
	b.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=0"}).want(t, "peek-lock while locked", http.StatusNoContent)

	settle("unlock", http.MethodPut, first, http.StatusOK)
	settle("unlock again", http.MethodPut, first, http.StatusNotFound)
	second, bp2 := peek("peek-lock after unlock", 2)
	if bp2["LockToken"] == bp["LockToken"] {
		t.Errorf("peek-lock after unlock: LockToken %v reused", bp2["LockToken"])
	}
	settle("complete with the released lock", http.MethodDelete, first, http.StatusNotFound)

	b.clock.Advance(45 * time.Second)
	r := settle("renew", http.MethodPost, second, http.StatusOK)
	renewed := brokerProperties(t, r.header.Get("BrokerProperties"))
	if renewed["LockedUntilUtc"] != "Sun, 01 Mar 2026 12:01:45 GMT" || renewed["LockToken"] != bp2["LockToken"] {
		t.Errorf("renew: BrokerProperties = %v; want LockedUntilUtc %q and the same LockToken", renewed, "Sun, 01 Mar 2026 12:01:45 GMT")
	}
	// The renewed lock outlives the first minute.
	b.clock.Advance(30 * time.Second)
	settle("complete", http.MethodDelete, second, http.StatusOK)
	settle("complete again", http.MethodDelete, second, http.StatusNotFound)
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("counts after complete = %+v; want none", c)
	}
}

func TestSettleByMessageIDAndWrongIDs(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.send(t, "q", "x", map[string]string{"BrokerProperties": `{"MessageId":"my id"}`})
	r := b.do(t, call{method: http.MethodPost, path: "/q/messages/head?timeout=0"}).want(t, "peek-lock", http.StatusCreated)
	bp := brokerProperties(t, r.header.Get("BrokerProperties"))
	tok := bp["LockToken"].(string)
	for _, path := range []string{
		"/q/messages/2/" + tok,                                    // another sequence number
		"/q/messages/other/" + tok,                                // another message id
		"/q/messages/1/" + "00000000-0000-0000-0000-000000000000", // another token
		"/q2/messages/1/" + tok,                                   // another queue
	} {
		status := http.StatusNotFound
		detail := "The lock supplied is invalid."
		if strings.HasPrefix(path, "/q2") {
			detail = "could not be found"
		}
		b.do(t, call{method: http.MethodDelete, path: path}).wantError(t, "complete "+path, status, detail)
	}
	// Legacy clients settle by MessageId; an upper-case token is the same GUID.
	b.do(t, call{method: http.MethodPost, path: "/q/messages/my%20id/" + strings.ToUpper(tok)}).want(t, "renew by message id", http.StatusOK)
	b.do(t, call{method: http.MethodDelete, path: "/Q/Messages/my%20id/" + tok}).want(t, "complete by message id", http.StatusOK)
}

func TestReceiveAndDelete(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.send(t, "q", "first", map[string]string{"Content-Type": "application/json", "BrokerProperties": `{"Label":"L1","TimeToLive":30}`, "n": "5"})
	b.send(t, "q", "second", nil)

	r := b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0", key: "listener"}).want(t, "receive-and-delete", http.StatusOK)
	if r.body != "first" || r.header.Get("Content-Type") != "application/json" || r.header.Get("n") != "5" {
		t.Errorf("receive-and-delete: body, Content-Type, n = %q, %q, %q; want %q, %q, %q", r.body,
			r.header.Get("Content-Type"), r.header.Get("n"), "first", "application/json", "5")
	}
	if _, ok := r.header["Location"]; ok {
		t.Errorf("receive-and-delete: Location %q; want none", r.header.Get("Location"))
	}
	if _, ok := r.header["Content-Length"]; ok || !r.chunked {
		t.Errorf("receive-and-delete: Content-Length %q, chunked %t; want chunked", r.header.Get("Content-Length"), r.chunked)
	}
	bp := brokerProperties(t, r.header.Get("BrokerProperties"))
	for _, k := range []string{"LockToken", "LockedUntilUtc"} {
		if _, ok := bp[k]; ok {
			t.Errorf("receive-and-delete: BrokerProperties has %s: %v", k, bp)
		}
	}
	msgID, _ := bp["MessageId"].(string)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(msgID) {
		t.Errorf("receive-and-delete: generated MessageId = %q; want 32 lower-case hex digits", msgID)
	}
	if fmt.Sprintf("%v %v %v %v %v", bp["DeliveryCount"], bp["TimeToLive"], bp["Label"], bp["State"], bp["EnqueuedSequenceNumber"]) != "1 30 L1 Active 0" {
		t.Errorf("receive-and-delete: BrokerProperties = %v; want DeliveryCount 1, TimeToLive 30, Label L1, State Active", bp)
	}

	// A message sent without a content type comes back without one, and with the infinite TTL.
	r = b.do(t, call{method: http.MethodDelete, path: "/q/messages/head?timeout=0"}).want(t, "second receive-and-delete", http.StatusOK)
	if _, ok := r.header["Content-Type"]; ok || r.body != "second" {
		t.Errorf("second receive-and-delete: Content-Type %q, body %q; want no Content-Type and %q", r.header.Get("Content-Type"), r.body, "second")
	}
	if bp := brokerProperties(t, r.header.Get("BrokerProperties")); fmt.Sprint(bp["TimeToLive"]) != "922337203685.47754" {
		t.Errorf("second receive-and-delete: TimeToLive = %v; want 922337203685.47754", bp["TimeToLive"])
	}

	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		r = b.do(t, call{method: method, path: "/q/messages/head?timeout=0"}).want(t, method+" head of an empty queue", http.StatusNoContent)
		if r.body != "" || r.header.Get("Content-Type") != "application/xml; charset=utf-8" || r.header.Get("Content-Length") != "" {
			t.Errorf("%s head of an empty queue: Content-Type %q, body %q", method, r.header.Get("Content-Type"), r.body)
		}
	}
	// The raw 204 says Content-Length: 0 and nothing about chunks.
	w := b.raw(t, http.MethodDelete, "/q/messages/head?timeout=0", "")
	if w.statusLine != "HTTP/1.1 204 No Content" || w.header["Content-Type"] != "application/xml; charset=utf-8" {
		t.Errorf("raw 204: %q %v", w.statusLine, w.header)
	}
}

func TestPathSpellings(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "Orders", "")
	b.createQueue(t, "a/b", "")

	// Literal segments in any casing, and the entity name in any casing.
	b.do(t, call{method: http.MethodPost, path: "/ORDERS/MESSAGES", body: "1", key: "sender"}).want(t, "send /ORDERS/MESSAGES", http.StatusCreated)
	r := b.do(t, call{method: http.MethodPost, path: "/orders/Messages/Head?timeout=0"}).want(t, "peek-lock /orders/Messages/Head", http.StatusCreated)
	loc := r.header.Get("Location")
	if !strings.HasPrefix(loc, "http://"+b.host+"/orders/messages/") {
		t.Errorf("Location = %q; want the request's entity casing and lower-case messages", loc)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, loc)}).want(t, "complete at Location", http.StatusOK)

	// Percent-encoded entity paths, as generated clients send them, and raw slashes.
	b.do(t, call{method: http.MethodPost, path: "/a%2Fb/messages", body: "2", key: "sender"}).want(t, "send /a%2Fb/messages", http.StatusCreated)
	b.do(t, call{method: http.MethodPost, path: "/a/B/messages/", body: "3", key: "sender"}).want(t, "send /a/B/messages/", http.StatusCreated)
	r = b.do(t, call{method: http.MethodPost, path: "/a/b/messages/head?timeout=0"}).want(t, "peek-lock /a/b", http.StatusCreated)
	if r.body != "2" {
		t.Errorf("peek-lock /a/b: body = %q; want %q", r.body, "2")
	}
	loc = r.header.Get("Location")
	if want := "http://" + b.host + "/a/b/messages/"; !strings.HasPrefix(loc, want) {
		t.Errorf("peek-lock /a/b: Location = %q; want it to start with %q", loc, want)
	}
	b.do(t, call{method: http.MethodPut, path: strings.Replace(settlePath(t, loc), "/a/b/", "/a%2Fb/", 1)}).want(t, "unlock at an encoded path", http.StatusOK)
	r = b.do(t, call{method: http.MethodDelete, path: "/a%2fb/messages/head?timeout=0"}).want(t, "receive-and-delete /a%2fb", http.StatusOK)
	if r.body != "2" {
		t.Errorf("receive-and-delete /a%%2fb: body = %q; want %q", r.body, "2")
	}

	// azure-sb sends Host without the port, and settles at what follows the host in Location.
	r = b.do(t, call{method: http.MethodPost, path: "/a/b/messages/head?timeout=0", host: "127.0.0.1"}).want(t, "peek-lock with a portless Host", http.StatusCreated)
	bp := brokerProperties(t, r.header.Get("BrokerProperties"))
	if want := fmt.Sprintf("http://127.0.0.1/a/b/messages/%v/%v", bp["SequenceNumber"], bp["LockToken"]); r.header.Get("Location") != want {
		t.Errorf("portless Host: Location = %q; want %q", r.header.Get("Location"), want)
	}
	path := strings.TrimPrefix(r.header.Get("Location"), "http://127.0.0.1")
	b.do(t, call{method: http.MethodDelete, path: path}).want(t, "complete at the portless Location's path", http.StatusOK)
}

// TestLockExpiryAndDeadLetter expires locks with the fake clock until MaxDeliveryCount moves the
// message to the dead-letter subqueue, then receives it from there.
func TestLockExpiryAndDeadLetter(t *testing.T) {
	b := setup(t)

	// With MaxDeliveryCount 1 the first expired lock is the end.
	b.createQueue(t, "once", "<LockDuration>PT5S</LockDuration><MaxDeliveryCount>1</MaxDeliveryCount>")
	b.send(t, "once", "only once", nil)
	r := b.do(t, call{method: http.MethodPost, path: "/once/messages/head?timeout=0"}).want(t, "delivery of once", http.StatusCreated)
	b.clock.Advance(5 * time.Second)
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, r.header.Get("Location"))}).
		wantError(t, "complete after the lock expired", http.StatusNotFound, "The lock supplied is invalid.")
	b.do(t, call{method: http.MethodPost, path: "/once/messages/head?timeout=0"}).want(t, "redelivery of once", http.StatusNoContent)
	r = b.do(t, call{method: http.MethodDelete, path: "/once/$DeadLetterQueue/messages/head?timeout=0"}).want(t, "receive once from its DLQ", http.StatusOK)
	if r.body != "only once" || r.header.Get("DeadLetterReason") != `"MaxDeliveryCountExceeded"` {
		t.Errorf("receive once from its DLQ: body %q, DeadLetterReason %q; want %q, %q", r.body, r.header.Get("DeadLetterReason"),
			"only once", `"MaxDeliveryCountExceeded"`)
	}

	b.createQueue(t, "dlq", "<LockDuration>PT10S</LockDuration><MaxDeliveryCount>2</MaxDeliveryCount>")
	b.send(t, "dlq", "poison", map[string]string{"BrokerProperties": `{"MessageId":"p1"}`, "kind": `"bad"`})

	r = b.do(t, call{method: http.MethodPost, path: "/dlq/messages/head?timeout=0"}).want(t, "first delivery", http.StatusCreated)
	first := settlePath(t, r.header.Get("Location"))
	b.clock.Advance(10 * time.Second) // the lock ends exactly now: no longer valid
	b.do(t, call{method: http.MethodPost, path: first}).wantError(t, "renew an expired lock", http.StatusNotFound, "The lock supplied is invalid.")
	b.do(t, call{method: http.MethodDelete, path: first}).wantError(t, "complete an expired lock", http.StatusNotFound, "The lock supplied is invalid.")

	r = b.do(t, call{method: http.MethodPost, path: "/dlq/messages/head?timeout=0"}).want(t, "second delivery", http.StatusCreated)
	if bp := brokerProperties(t, r.header.Get("BrokerProperties")); fmt.Sprint(bp["DeliveryCount"]) != "2" {
		t.Errorf("second delivery: DeliveryCount = %v; want 2", bp["DeliveryCount"])
	}
	b.clock.Advance(11 * time.Second)

	// The third delivery would exceed MaxDeliveryCount: the message goes to the dead-letter queue.
	b.do(t, call{method: http.MethodPost, path: "/dlq/messages/head?timeout=0"}).want(t, "third delivery", http.StatusNoContent)
	c := b.counts(t, "dlq")
	if c.Active != 0 || c.DeadLetter != 1 {
		t.Errorf("counts after dead-lettering = %+v; want 1 dead-lettered", c)
	}
	e := b.do(t, call{method: http.MethodGet, path: "/dlq"}).entry(t, "GET /dlq", http.StatusOK)
	if cd := e.Queue.CountDetails; cd == nil || cd.DeadLetter != 1 || cd.Active != 0 || e.Queue.MessageCount != 1 {
		t.Errorf("GET /dlq: MessageCount %d, CountDetails %+v; want 1 dead-lettered", e.Queue.MessageCount, cd)
	}

	dlqPath := "/dlq/$DeadLetterQueue/messages/head?timeout=0"
	w := b.raw(t, http.MethodPost, dlqPath, "")
	if w.statusLine != "HTTP/1.1 201 Created" {
		t.Fatalf("peek-lock %s: %q %v %q", dlqPath, w.statusLine, w.header, w.body)
	}
	if w.header["DeadLetterReason"] != `"MaxDeliveryCountExceeded"` {
		t.Errorf("peek-lock %s: DeadLetterReason = %q; want %q", dlqPath, w.header["DeadLetterReason"], `"MaxDeliveryCountExceeded"`)
	}
	if want := `"Message could not be consumed after 2 delivery attempts."`; w.header["DeadLetterErrorDescription"] != want {
		t.Errorf("peek-lock %s: DeadLetterErrorDescription = %q; want %q", dlqPath, w.header["DeadLetterErrorDescription"], want)
	}
	if w.header["kind"] != `"bad"` || w.body != "poison" {
		t.Errorf("peek-lock %s: kind %q, body %q; want the original properties and body", dlqPath, w.header["kind"], w.body)
	}
	bp := brokerProperties(t, w.header["BrokerProperties"])
	loc := w.header["Location"]
	if want := fmt.Sprintf("http://%s/dlq/$DeadLetterQueue/messages/%v/%v", b.host, bp["SequenceNumber"], bp["LockToken"]); loc != want {
		t.Errorf("peek-lock %s: Location = %q; want %q", dlqPath, loc, want)
	}
	// The subqueue literal in any casing, and settlement there.
	b.do(t, call{method: http.MethodPost, path: "/dlq/$deadletterqueue/messages/head?timeout=0"}).want(t, "peek-lock the locked DLQ", http.StatusNoContent)
	b.do(t, call{method: http.MethodDelete, path: strings.Replace(settlePath(t, loc), "$DeadLetterQueue", "%24deadLetterQueue", 1)}).
		want(t, "complete in the DLQ", http.StatusOK)
	if c := b.counts(t, "dlq"); c.Total() != 0 {
		t.Errorf("counts after completing the dead letter = %+v; want none", c)
	}
	// Sending to a dead-letter queue is not a REST operation.
	b.do(t, call{method: http.MethodPost, path: "/dlq/$DeadLetterQueue/messages", body: "x"}).
		wantError(t, "send to the DLQ", http.StatusBadRequest, "cannot be sent to a dead-letter queue")
}

// TestMessageExpiry moves the clock past messages' time to live.
func TestMessageExpiry(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "ttl", "<DefaultMessageTimeToLive>PT30S</DefaultMessageTimeToLive>")
	b.send(t, "ttl", "short", map[string]string{"BrokerProperties": `{"TimeToLive":10}`})
	b.send(t, "ttl", "capped", map[string]string{"BrokerProperties": `{"TimeToLive":60}`})
	b.send(t, "ttl", "default", nil)
	b.clock.Advance(11 * time.Second)
	for _, want := range []string{"capped", "default"} {
		r := b.do(t, call{method: http.MethodDelete, path: "/ttl/messages/head?timeout=0"}).want(t, "receive "+want, http.StatusOK)
		bp := brokerProperties(t, r.header.Get("BrokerProperties"))
		// The queue's default caps the message's own time to live.
		if r.body != want || fmt.Sprint(bp["TimeToLive"]) != "30" {
			t.Errorf("receive %s: body %q, TimeToLive %v; want %q, 30", want, r.body, bp["TimeToLive"], want)
		}
	}
	b.do(t, call{method: http.MethodDelete, path: "/ttl/messages/head?timeout=0"}).want(t, "receive after expiry", http.StatusNoContent)
}

func TestEmptyQueueWaitsForTimeout(t *testing.T) {
	b := setup(t, setupOptions{realClock: true})
	b.createQueue(t, "q", "")
	// A receive that waits is woken by a send: it answers long before its 30 s timeout.
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url+"/q/messages/head?timeout=30", nil)
		req.Header.Set("Authorization", b.token(b.url+"/q", "root"))
		resp, err := b.http.Do(req)
		if err != nil {
			done <- result{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		done <- result{status: resp.StatusCode, body: string(body)}
	}()
	// Send until the waiting receiver has taken one; each send wakes it. The bound is below the
	// receive's timeout, so that only a send can have answered it.
	sent := 0
	var r result
	eventually.Within(20*time.Second).True(t, "the waiting peek-lock to return after a send",
		func() bool {
			b.send(t, "q", fmt.Sprintf("m%d", sent), nil)
			sent++
			select {
			case r = <-done:
				return true
			case <-time.After(200 * time.Millisecond):
				return false
			}
		})
	if r.status != http.StatusCreated || r.body != "m0" {
		t.Fatalf("waiting peek-lock = %d %q; want 201 %q", r.status, r.body, "m0")
	}
}
