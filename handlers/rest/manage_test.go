package rest_test

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	entryContentType = "application/atom+xml;type=entry;charset=utf-8"
	feedContentType  = "application/atom+xml;type=feed;charset=utf-8"
	nsSB             = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
	nsXSI            = "http://www.w3.org/2001/XMLSchema-instance"
	nsCounts         = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
)

// atomEntry is the part of a management entry the tests read.
type atomEntry struct {
	XMLName xml.Name  `xml:"http://www.w3.org/2005/Atom entry"`
	ID      string    `xml:"id"`
	Title   string    `xml:"title"`
	Links   []link    `xml:"link"`
	Queue   queueDesc `xml:"content>QueueDescription"`
}

type link struct {
	Rel  string `xml:"rel,attr"`
	Href string `xml:"href,attr"`
}

type queueDesc struct {
	XMLName                   xml.Name
	LockDuration              string
	MaxSizeInMegabytes        int64
	RequiresSession           bool
	DefaultMessageTimeToLive  string
	DeadLetteringOnExpiration bool `xml:"DeadLetteringOnMessageExpiration"`
	MaxDeliveryCount          int
	SizeInBytes               int64
	MessageCount              int64
	Status                    string
	UserMetadata              string
	CreatedAt                 string
	UpdatedAt                 string
	AccessedAt                *string
	CountDetails              *countDetails
	MaxMessageSizeInKilobytes int64
}

type countDetails struct {
	Attrs      []xml.Attr `xml:",any,attr"`
	Active     int64      `xml:"http://schemas.microsoft.com/netservices/2011/06/servicebus ActiveMessageCount"`
	DeadLetter int64      `xml:"http://schemas.microsoft.com/netservices/2011/06/servicebus DeadLetterMessageCount"`
	Scheduled  int64      `xml:"http://schemas.microsoft.com/netservices/2011/06/servicebus ScheduledMessageCount"`
	Transfer   int64      `xml:"http://schemas.microsoft.com/netservices/2011/06/servicebus TransferMessageCount"`
	TransferDL int64      `xml:"http://schemas.microsoft.com/netservices/2011/06/servicebus TransferDeadLetterMessageCount"`
}

type atomFeed struct {
	XMLName xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	Title   string      `xml:"title"`
	ID      string      `xml:"id"`
	Links   []link      `xml:"link"`
	Entries []atomEntry `xml:"entry"`
}

func (f atomFeed) link(rel string) (string, bool) {
	for _, l := range f.Links {
		if l.Rel == rel {
			return l.Href, true
		}
	}
	return "", false
}

// entry checks that r is an Atom entry response with the given status and decodes it.
func (r result) entry(t *testing.T, what string, status int) atomEntry {
	t.Helper()
	r.want(t, what, status)
	if ct := r.header.Get("Content-Type"); ct != entryContentType {
		t.Errorf("%s: Content-Type = %q; want %q", what, ct, entryContentType)
	}
	if strings.HasPrefix(r.body, "<?xml") {
		t.Errorf("%s: body starts with an XML declaration; the service sends none", what)
	}
	var e atomEntry
	if err := xml.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("%s: entry %q: %v", what, r.body, err)
	}
	if e.Queue.XMLName.Space != nsSB {
		t.Errorf("%s: QueueDescription namespace = %q; want %q", what, e.Queue.XMLName.Space, nsSB)
	}
	return e
}

func (r result) feed(t *testing.T, what string) atomFeed {
	t.Helper()
	r.want(t, what, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != feedContentType {
		t.Errorf("%s: Content-Type = %q; want %q", what, ct, feedContentType)
	}
	var f atomFeed
	if err := xml.Unmarshal([]byte(r.body), &f); err != nil {
		t.Fatalf("%s: feed %q: %v", what, r.body, err)
	}
	return f
}

// Bodies real clients send to create a queue (protocol.md §4.3, §8).
var createBodies = []struct {
	client string
	body   string
	// expected values of a few properties
	lockDuration     string
	maxDeliveryCount int
	userMetadata     string
}{
	{
		client: "azure-sb",
		body: `<?xml version="1.0" encoding="utf-8" standalone="yes"?>
<entry xmlns="http://www.w3.org/2005/Atom">
  <updated>2026-11-22T04:25:02.171Z</updated>
  <content type="application/xml">
    <QueueDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">
      <LockDuration>PT45S</LockDuration>
      <MaxSizeInMegabytes>2048</MaxSizeInMegabytes>
      <RequiresDuplicateDetection>false</RequiresDuplicateDetection>
      <RequiresSession>false</RequiresSession>
      <DefaultMessageTimeToLive>P14D</DefaultMessageTimeToLive>
      <DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration>
      <DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow>
      <MaxDeliveryCount>5</MaxDeliveryCount>
      <EnableBatchedOperations>true</EnableBatchedOperations>
      <SizeInBytes>0</SizeInBytes>
      <MessageCount>0</MessageCount>
      <EnablePartitioning>false</EnablePartitioning>
    </QueueDescription>
  </content>
</entry>`,
		lockDuration: "PT45S", maxDeliveryCount: 5,
	},
	{
		client: "js-empty",
		body: `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom">` +
			`<updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml">` +
			`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" ` +
			`xmlns:i="http://www.w3.org/2001/XMLSchema-instance"/></content></entry>`,
		lockDuration: "PT1M", maxDeliveryCount: 10,
	},
	{
		client: "go",
		body: `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
			`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" ` +
			`xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance">` +
			`<LockDuration>PT30S</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes>` +
			`<MaxDeliveryCount>3</MaxDeliveryCount><AuthorizationRules></AuthorizationRules>` +
			`<Status>Active</Status><UserMetadata>from go</UserMetadata>` +
			`<ForwardTo _XMLSchema-instance:nil="true"></ForwardTo>` +
			`</QueueDescription></content></entry>`,
		lockDuration: "PT30S", maxDeliveryCount: 3, userMetadata: "from go",
	},
	{
		client: "python",
		body: `<?xml version='1.0' encoding='utf-8'?>
<ns0:entry xmlns:ns0="http://www.w3.org/2005/Atom" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ns0:content type="application/xml"><QueueDescription><LockDuration>PT2M</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes><MaxDeliveryCount>7</MaxDeliveryCount><SizeInBytes>555</SizeInBytes><MessageCount>9</MessageCount><AuthorizationRules /><Status>Active</Status><CreatedAt>2021-04-21T19:36:18.5Z</CreatedAt><UpdatedAt>2021-04-21T19:36:20Z</UpdatedAt><AccessedAt>0001-01-01T00:00:00Z</AccessedAt><SupportOrdering>true</SupportOrdering><CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>9</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>0</d2p1:DeadLetterMessageCount></CountDetails><EntityAvailabilityStatus>Available</EntityAvailabilityStatus><EnableExpress>false</EnableExpress></QueueDescription></ns0:content></ns0:entry>`,
		lockDuration: "PT2M", maxDeliveryCount: 7,
	},
	{client: "empty-body", body: "", lockDuration: "PT1M", maxDeliveryCount: 10},
}

func TestCreateQueueClientBodies(t *testing.T) {
	b := setup(t)
	for _, tc := range createBodies {
		name := "Queue-" + tc.client
		path := "/" + name + "?api-version=2021-05"
		r := b.do(t, call{method: http.MethodPut, path: path, body: tc.body,
			header: map[string]string{"Content-Type": "application/atom+xml;type=entry;charset=utf-8"}})
		e := r.entry(t, "PUT "+path+" ("+tc.client+")", http.StatusCreated)
		if want := b.url + path; e.ID != want {
			t.Errorf("%s: <id> = %q; want %q", tc.client, e.ID, want)
		}
		if e.Title != name {
			t.Errorf("%s: <title> = %q; want %q", tc.client, e.Title, name)
		}
		q := e.Queue
		if q.LockDuration != tc.lockDuration || q.MaxDeliveryCount != tc.maxDeliveryCount || q.UserMetadata != tc.userMetadata {
			t.Errorf("%s: LockDuration, MaxDeliveryCount, UserMetadata = %q, %d, %q; want %q, %d, %q", tc.client,
				q.LockDuration, q.MaxDeliveryCount, q.UserMetadata, tc.lockDuration, tc.maxDeliveryCount, tc.userMetadata)
		}
		// Read-only elements a client echoes are ignored: a new queue is empty.
		if q.MessageCount != 0 || q.SizeInBytes != 0 {
			t.Errorf("%s: MessageCount, SizeInBytes = %d, %d; want 0, 0", tc.client, q.MessageCount, q.SizeInBytes)
		}
		// The create response carries neither AccessedAt nor CountDetails (protocol.md §4.5).
		if q.AccessedAt != nil || q.CountDetails != nil {
			t.Errorf("%s: create response has AccessedAt or CountDetails: %s", tc.client, r.body)
		}
	}
	// The azure-sb body sets more than the table checks.
	got := b.do(t, call{method: http.MethodGet, path: "/Queue-azure-sb"}).entry(t, "GET Queue-azure-sb", http.StatusOK).Queue
	if got.MaxSizeInMegabytes != 2048 || got.DefaultMessageTimeToLive != "P14D" || !got.DeadLetteringOnExpiration {
		t.Errorf("GET Queue-azure-sb: MaxSizeInMegabytes, DefaultMessageTimeToLive, DeadLetteringOnMessageExpiration = %d, %q, %t; want 2048, %q, true",
			got.MaxSizeInMegabytes, got.DefaultMessageTimeToLive, got.DeadLetteringOnExpiration, "P14D")
	}
}

// TestCreateQueueResponseExact pins the whole create response: every element in the service's
// order, no declaration, second-precision Atom times.
func TestCreateQueueResponseExact(t *testing.T) {
	b := setup(t)
	path := "/JsQueue?api-version=2021-05"
	r := b.do(t, call{method: http.MethodPut, path: path, body: createBodies[1].body}).want(t, "PUT "+path, http.StatusCreated)
	id := b.url + path
	want := `<entry xmlns="http://www.w3.org/2005/Atom"><id>` + id + `</id><title type="text">JsQueue</title>` +
		`<published>2026-03-01T12:00:00Z</published><updated>2026-03-01T12:00:00Z</updated>` +
		`<author><name>sbgate</name></author><link rel="self" href="` + id + `"/>` +
		`<content type="application/xml"><QueueDescription xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `">` +
		`<LockDuration>PT1M</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes>` +
		`<RequiresDuplicateDetection>false</RequiresDuplicateDetection><RequiresSession>false</RequiresSession>` +
		`<DefaultMessageTimeToLive>P10675199DT2H48M5.4775807S</DefaultMessageTimeToLive>` +
		`<DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration>` +
		`<DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow>` +
		`<MaxDeliveryCount>10</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations>` +
		`<SizeInBytes>0</SizeInBytes><MessageCount>0</MessageCount><IsAnonymousAccessible>false</IsAnonymousAccessible>` +
		`<AuthorizationRules></AuthorizationRules><Status>Active</Status>` +
		`<CreatedAt>2026-03-01T12:00:00Z</CreatedAt><UpdatedAt>2026-03-01T12:00:00Z</UpdatedAt>` +
		`<SupportOrdering>true</SupportOrdering><AutoDeleteOnIdle>P10675199DT2H48M5.4775807S</AutoDeleteOnIdle>` +
		`<EnablePartitioning>false</EnablePartitioning><EntityAvailabilityStatus>Available</EntityAvailabilityStatus>` +
		`<EnableExpress>false</EnableExpress><MaxMessageSizeInKilobytes>256</MaxMessageSizeInKilobytes>` +
		`</QueueDescription></content></entry>`
	if r.body != want {
		t.Errorf("PUT %s body =\n%s\nwant\n%s", path, r.body, want)
	}
	if ct := r.header.Get("Content-Type"); ct != entryContentType {
		t.Errorf("PUT %s: Content-Type = %q; want %q", path, ct, entryContentType)
	}
}

func TestCreateExistingQueueConflicts(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "dup", "")
	for _, path := range []string{"/dup", "/DUP", "/Dup/"} {
		r := b.do(t, call{method: http.MethodPut, path: path, body: entryXML("")})
		e := r.wantError(t, "PUT "+path+" again", http.StatusConflict, "already exists.")
		if !strings.Contains(e.Detail, "SystemTracker:sbgate:") {
			t.Errorf("PUT %s: Detail = %q; want a SystemTracker naming the namespace", path, e.Detail)
		}
	}
}

func TestGetQueueCounts(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "counted", "")
	b.send(t, "counted", "hello", map[string]string{"BrokerProperties": `{"MessageId":"m1"}`})
	b.send(t, "counted", "worlds!", map[string]string{"BrokerProperties": `{"MessageId":"m2"}`})

	r := b.do(t, call{method: http.MethodGet, path: "/counted?api-version=2017-04"})
	e := r.entry(t, "GET /counted", http.StatusOK)
	// Size is the body plus the broker properties set: "hello"+"m1", "worlds!"+"m2".
	const wantSize = 5 + 2 + 7 + 2
	if e.Queue.MessageCount != 2 || e.Queue.SizeInBytes != wantSize {
		t.Errorf("GET /counted: MessageCount, SizeInBytes = %d, %d; want 2, %d", e.Queue.MessageCount, e.Queue.SizeInBytes, wantSize)
	}
	cd := e.Queue.CountDetails
	if cd == nil {
		t.Fatalf("GET /counted: no CountDetails in %s", r.body)
	}
	if cd.Active != 2 || cd.DeadLetter != 0 || cd.Scheduled != 0 || cd.Transfer != 0 || cd.TransferDL != 0 {
		t.Errorf("GET /counted: CountDetails = %+v; want 2 active and nothing else", *cd)
	}
	// The JS client reads the counts' prefix from the one attribute CountDetails has.
	if len(cd.Attrs) != 1 || cd.Attrs[0].Name.Space != "xmlns" || cd.Attrs[0].Value != nsCounts {
		t.Errorf("GET /counted: CountDetails attributes = %v; want exactly one xmlns:prefix=%q", cd.Attrs, nsCounts)
	}
	if !strings.Contains(r.body, `<CountDetails xmlns:d2p1="`+nsCounts+`"><d2p1:ActiveMessageCount>2</d2p1:ActiveMessageCount>`) {
		t.Errorf("GET /counted: body %s; want CountDetails with the d2p1 prefix", r.body)
	}
	if e.Queue.AccessedAt == nil {
		t.Errorf("GET /counted: no AccessedAt; GET responses carry it")
	}
	if want := b.url + "/counted?api-version=2017-04"; e.ID != want {
		t.Errorf("GET /counted: <id> = %q; want %q", e.ID, want)
	}
}

func TestGetMissingQueueIsPubliclyListedServicesFeed(t *testing.T) {
	b := setup(t)
	for _, path := range []string{"/nope", "/a/b/nope?api-version=2024-05"} {
		r := b.do(t, call{method: http.MethodGet, path: path})
		r.want(t, "GET "+path, http.StatusOK)
		want := `<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Publicly Listed Services</title>` +
			`<subtitle type="text">This is the list of publicly-listed services currently available.</subtitle>` +
			`<id>uuid:db420b9f-e276-4d24-b8c4-9bfa94a8567a;id=196781</id><updated>2026-03-01T12:00:00Z</updated>` +
			`<generator>Service Bus 1.1</generator></feed>`
		if r.body != want {
			t.Errorf("GET %s body = %s; want %s", path, r.body, want)
		}
		if ct := r.header.Get("Content-Type"); ct != feedContentType {
			t.Errorf("GET %s: Content-Type = %q; want %q", path, ct, feedContentType)
		}
	}
}

func TestUpdateQueue(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "upd", "<LockDuration>PT30S</LockDuration><MaxDeliveryCount>3</MaxDeliveryCount><UserMetadata>v1</UserMetadata>")
	b.clock.Advance(time.Minute)

	// An update replaces the whole description: what it omits reverts to the default.
	r := b.do(t, call{method: http.MethodPut, path: "/upd", body: entryXML("<UserMetadata>v2</UserMetadata>"),
		header: map[string]string{"If-Match": "*"}})
	e := r.entry(t, "PUT /upd If-Match", http.StatusOK)
	q := e.Queue
	if q.LockDuration != "PT1M" || q.MaxDeliveryCount != 10 || q.UserMetadata != "v2" {
		t.Errorf("PUT /upd If-Match: LockDuration, MaxDeliveryCount, UserMetadata = %q, %d, %q; want %q, 10, %q",
			q.LockDuration, q.MaxDeliveryCount, q.UserMetadata, "PT1M", "v2")
	}
	if q.CreatedAt != "2026-03-01T12:00:00Z" || q.UpdatedAt != "2026-03-01T12:01:00Z" {
		t.Errorf("PUT /upd If-Match: CreatedAt, UpdatedAt = %q, %q; want %q, %q", q.CreatedAt, q.UpdatedAt,
			"2026-03-01T12:00:00Z", "2026-03-01T12:01:00Z")
	}
	got := b.do(t, call{method: http.MethodGet, path: "/upd"}).entry(t, "GET /upd", http.StatusOK).Queue
	if got.LockDuration != "PT1M" || got.UserMetadata != "v2" {
		t.Errorf("GET /upd after update: LockDuration, UserMetadata = %q, %q; want %q, %q", got.LockDuration, got.UserMetadata, "PT1M", "v2")
	}

	// The new lock duration applies to the next receive.
	b.send(t, "upd", "x", nil)
	m := b.do(t, call{method: http.MethodPost, path: "/upd/messages/head?timeout=0"}).want(t, "peek-lock /upd", http.StatusCreated)
	bp := brokerProperties(t, m.header.Get("BrokerProperties"))
	if want := "Sun, 01 Mar 2026 12:02:00 GMT"; bp["LockedUntilUtc"] != want {
		t.Errorf("peek-lock after update: LockedUntilUtc = %v; want %q", bp["LockedUntilUtc"], want)
	}
}

func TestManagementErrors(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "plain", "")
	tests := []struct {
		name   string
		call   call
		status int
		detail string
	}{
		{"update missing", call{method: http.MethodPut, path: "/missing", body: entryXML(""), header: map[string]string{"If-Match": "*"}},
			http.StatusNotFound, "could not be found"},
		{"change RequiresSession", call{method: http.MethodPut, path: "/plain", body: entryXML("<RequiresSession>true</RequiresSession>"),
			header: map[string]string{"If-Match": "*"}}, http.StatusBadRequest, "SubCode=40000. The value for the RequiresSession property of an existing Queue cannot be changed."},
		{"lock duration PT6M", call{method: http.MethodPut, path: "/long-lock", body: entryXML("<LockDuration>PT6M</LockDuration>")},
			http.StatusBadRequest, "exceeds the allowed maximum of '5' minutes"},
		{"update lock duration PT6M", call{method: http.MethodPut, path: "/plain", body: entryXML("<LockDuration>PT6M</LockDuration>"),
			header: map[string]string{"If-Match": "*"}}, http.StatusBadRequest, "exceeds the allowed maximum of '5' minutes"},
		{"bad XML", call{method: http.MethodPut, path: "/bad-xml", body: `<entry xmlns="http://www.w3.org/2005/Atom"><content>`},
			http.StatusBadRequest, "not well-formed XML"},
		{"not XML", call{method: http.MethodPut, path: "/bad-xml", body: `{"LockDuration":"PT1M"}`},
			http.StatusBadRequest, "text outside its root element"},
		{"bad duration", call{method: http.MethodPut, path: "/bad-duration", body: entryXML("<LockDuration>T1M</LockDuration>")},
			http.StatusBadRequest, "LockDuration"},
		{"subscription description at an entity path", call{method: http.MethodPut, path: "/a-sub", body: `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><SubscriptionDescription xmlns="` + nsSB + `"/></content></entry>`},
			http.StatusBadRequest, "is put at {topic}/Subscriptions/{name}"},
		{"invalid name", call{method: http.MethodPut, path: "/bad%40name", body: entryXML("")},
			http.StatusBadRequest, "contains character(s) that is not allowed"},
		{"reserved segment", call{method: http.MethodPut, path: "/a/rules/b", body: entryXML("")},
			http.StatusBadRequest, "reserved segment"},
		{"delete missing", call{method: http.MethodDelete, path: "/missing"}, http.StatusNotFound, "could not be found"},
		{"bad $top", call{method: http.MethodGet, path: "/$Resources/Queues?$top=abc"}, http.StatusBadRequest, "$top"},
		{"zero $top", call{method: http.MethodGet, path: "/$Resources/Queues?$top=0"}, http.StatusBadRequest, "$top"},
		{"negative $skip", call{method: http.MethodGet, path: "/$Resources/Queues?%24skip=-1"}, http.StatusBadRequest, "$skip"},
		{"POST to an entity", call{method: http.MethodPost, path: "/plain"}, http.StatusNotFound, "No service is hosted at the specified address."},
		{"PUT on the queue list", call{method: http.MethodPut, path: "/$Resources/Queues"}, http.StatusNotFound, "No service is hosted"},
		{"dot segment", call{method: http.MethodGet, path: "/plain/%2E%2E/x"}, http.StatusNotFound, "No service is hosted"},
	}
	for _, tc := range tests {
		b.do(t, tc.call).wantError(t, tc.name+": "+tc.call.method+" "+tc.call.path, tc.status, tc.detail)
	}
	// Nothing the failed requests touched changed.
	q := b.do(t, call{method: http.MethodGet, path: "/plain"}).entry(t, "GET /plain", http.StatusOK).Queue
	if q.LockDuration != "PT1M" || q.RequiresSession {
		t.Errorf("GET /plain after failed updates: LockDuration, RequiresSession = %q, %t; want %q, false", q.LockDuration, q.RequiresSession, "PT1M")
	}
	for _, path := range []string{"/long-lock", "/bad-xml", "/a-topic"} {
		r := b.do(t, call{method: http.MethodGet, path: path}).want(t, "GET "+path, http.StatusOK)
		if !strings.Contains(r.body, "Publicly Listed Services") {
			t.Errorf("GET %s after a failed create: %s; want the Publicly Listed Services feed", path, r.body)
		}
	}
}

func TestDeleteQueue(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "gone", "")
	b.send(t, "gone", "x", nil)
	r := b.do(t, call{method: http.MethodDelete, path: "/Gone"}).want(t, "DELETE /Gone", http.StatusOK)
	if r.body != "" {
		t.Errorf("DELETE /Gone body = %q; want empty", r.body)
	}
	b.do(t, call{method: http.MethodDelete, path: "/gone"}).wantError(t, "DELETE /gone again", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodPost, path: "/gone/messages", body: "x", key: "sender"}).
		wantError(t, "send to deleted queue", http.StatusNotFound, "could not be found")
	// The name is free again.
	b.createQueue(t, "gone", "")
	if c := b.counts(t, "gone"); c.Total() != 0 {
		t.Errorf("recreated queue counts = %+v; want empty", c)
	}
}

func TestListQueues(t *testing.T) {
	b := setup(t)
	names := []string{"list-e", "list-a", "list-c", "list-b", "list-d"}
	for _, n := range names {
		b.createQueue(t, n, "")
	}
	sorted := []string{"list-a", "list-b", "list-c", "list-d", "list-e"}
	tests := []struct {
		path     string
		want     []string
		wantNext string // query of the next link, "" for none
	}{
		// Python sends $skip and $top raw.
		{"/$Resources/Queues?$skip=0&$top=2", sorted[:2], "%24skip=2&%24top=2"},
		// azure-sb, JS and Go percent-encode them.
		{"/$Resources/Queues?%24top=2&%24skip=2&api-version=2021-05", sorted[2:4], "%24skip=4&%24top=2&api-version=2021-05"},
		{"/$Resources/Queues?%24top=2&%24skip=4", sorted[4:], ""},
		// A full last page still links a next page, as the service does.
		{"/$Resources/Queues?$top=5", sorted, "%24skip=5&%24top=5"},
		{"/$Resources/Queues?%24skip=5&%24top=5", nil, ""},
		{"/$Resources/Queues?%24top=6", sorted, ""},
		{"/$Resources/Queues", sorted, ""},
		// Trailing slash, other casing, and the junk parameter Go's pager sends.
		{"/$resources/queues/?%24top=10&%3F=&api-version=2024-05", sorted, ""},
		{"/%24Resources/Queues?$skip=3", sorted[3:], ""},
		// .NET's enrich is ignored.
		{"/$Resources/queues?enrich=false&$skip=0&$top=100", sorted, ""},
	}
	for _, tc := range tests {
		r := b.do(t, call{method: http.MethodGet, path: tc.path})
		f := r.feed(t, "GET "+tc.path)
		if f.Title != "Queues" {
			t.Errorf("GET %s: feed title = %q; want %q", tc.path, f.Title, "Queues")
		}
		if want := b.url + tc.path; f.ID != want {
			t.Errorf("GET %s: feed id = %q; want the request URL %q", tc.path, f.ID, want)
		}
		var got []string
		for _, e := range f.Entries {
			got = append(got, e.Title)
			if want := b.url + "/" + e.Title; !strings.HasPrefix(e.ID, want) {
				t.Errorf("GET %s: entry id = %q; want it to start with %q", tc.path, e.ID, want)
			}
			if e.Queue.CountDetails == nil {
				t.Errorf("GET %s: entry %s has no CountDetails", tc.path, e.Title)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("GET %s: entries = %v; want %v", tc.path, got, tc.want)
		}
		next, ok := f.link("next")
		switch {
		case tc.wantNext == "" && ok:
			t.Errorf("GET %s: next link %q; want none", tc.path, next)
		case tc.wantNext != "" && !ok:
			t.Errorf("GET %s: no next link; want one with %q", tc.path, tc.wantNext)
		case tc.wantNext != "":
			_, query, _ := strings.Cut(next, "?")
			if query != tc.wantNext || !strings.HasPrefix(next, b.url+"/") {
				t.Errorf("GET %s: next link = %q; want %s/...?%s", tc.path, next, b.url, tc.wantNext)
			}
		}
	}
}

func TestEntityNames(t *testing.T) {
	b := setup(t)
	// Multi-segment names, created with raw slashes and read with escaped ones.
	r := b.do(t, call{method: http.MethodPut, path: "/a/b/c", body: entryXML("")})
	e := r.entry(t, "PUT /a/b/c", http.StatusCreated)
	if e.Title != "a/b/c" || e.ID != b.url+"/a/b/c" {
		t.Errorf("PUT /a/b/c: title, id = %q, %q; want %q, %q", e.Title, e.ID, "a/b/c", b.url+"/a/b/c")
	}
	e = b.do(t, call{method: http.MethodGet, path: "/a%2Fb%2Fc"}).entry(t, "GET /a%2Fb%2Fc", http.StatusOK)
	if e.Title != "a/b/c" || e.ID != b.url+"/a%2Fb%2Fc" {
		t.Errorf("GET /a%%2Fb%%2Fc: title, id = %q, %q; want %q, %q", e.Title, e.ID, "a/b/c", b.url+"/a%2Fb%2Fc")
	}
	// A prefix of a multi-segment name is no entity.
	if r := b.do(t, call{method: http.MethodGet, path: "/a/b"}).want(t, "GET /a/b", http.StatusOK); !strings.Contains(r.body, "Publicly Listed Services") {
		t.Errorf("GET /a/b = %s; want the Publicly Listed Services feed", r.body)
	}

	// Names are case-insensitive; the title keeps the creator's casing, the id the request's.
	b.createQueue(t, "MixedCase", "")
	e = b.do(t, call{method: http.MethodGet, path: "/mixedcase"}).entry(t, "GET /mixedcase", http.StatusOK)
	if e.Title != "MixedCase" || e.ID != b.url+"/mixedcase" {
		t.Errorf("GET /mixedcase: title, id = %q, %q; want %q, %q", e.Title, e.ID, "MixedCase", b.url+"/mixedcase")
	}
	b.send(t, "MIXEDCASE", "x", nil)
	if c := b.counts(t, "mixedCase"); c.Active != 1 {
		t.Errorf("counts after sending to MIXEDCASE = %+v; want 1 active", c)
	}

	// Paths that collide with the gateway's own routes go to the entity handlers for the
	// methods those routes do not take.
	b.do(t, call{method: http.MethodDelete, path: "/healthz"}).wantError(t, "DELETE /healthz", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodGet, path: "/healthz", key: "-"}).want(t, "GET /healthz", http.StatusOK)
}

func TestNamespaceInfo(t *testing.T) {
	b := setup(t)
	for _, key := range []string{"root", "sender", "listener"} {
		path := "/$namespaceinfo?api-version=2021-05"
		r := b.do(t, call{method: http.MethodGet, path: path, key: key}).want(t, "GET "+path+" as "+key, http.StatusOK)
		if ct := r.header.Get("Content-Type"); ct != entryContentType {
			t.Errorf("GET %s: Content-Type = %q; want %q", path, ct, entryContentType)
		}
		want := `<entry xmlns="http://www.w3.org/2005/Atom"><id>` + b.url + path + `</id><title type="text">sbgate</title>` +
			`<updated>2026-03-01T12:00:00Z</updated><author><name>sbgate</name></author><content type="application/xml">` +
			`<NamespaceInfo xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `"><CreatedTime>2026-03-01T12:00:00Z</CreatedTime>` +
			`<MessagingSKU>Standard</MessagingSKU><ModifiedTime>2026-03-01T12:00:00Z</ModifiedTime><Name>sbgate</Name>` +
			`<NamespaceType>Messaging</NamespaceType></NamespaceInfo></content></entry>`
		if r.body != want {
			t.Errorf("GET %s as %s = %s; want %s", path, key, r.body, want)
		}
	}
	// Any valid token will do, whatever it is scoped to.
	tok := b.token("http://"+b.host+"/some-queue", "listener")
	b.do(t, call{method: http.MethodGet, path: "/$NamespaceInfo", key: "-", header: map[string]string{"Authorization": tok}}).
		want(t, "GET /$NamespaceInfo with a token scoped to a queue", http.StatusOK)
	b.do(t, call{method: http.MethodGet, path: "/$namespaceinfo", key: "-"}).
		wantError(t, "GET /$namespaceinfo without a token", http.StatusUnauthorized, "MissingToken")
}

// TestPartitionedQueueSize: a partitioned queue reports its 16 partitions' total size, as the
// service does, and a description read back and sent again keeps the size per partition.
func TestPartitionedQueueSize(t *testing.T) {
	b := setup(t)
	desc := "<MaxSizeInMegabytes>4096</MaxSizeInMegabytes><EnablePartitioning>true</EnablePartitioning>"
	created := b.do(t, call{method: http.MethodPut, path: "/parts", body: entryXML(desc)})
	if !strings.Contains(created.want(t, "create", http.StatusCreated).body, "<MaxSizeInMegabytes>65536</MaxSizeInMegabytes>") {
		t.Errorf("created partitioned queue: %s; want MaxSizeInMegabytes 65536", created.body)
	}
	echo := "<MaxSizeInMegabytes>65536</MaxSizeInMegabytes><EnablePartitioning>true</EnablePartitioning><MaxDeliveryCount>3</MaxDeliveryCount>"
	for i := range 2 {
		r := b.do(t, call{method: http.MethodPut, path: "/parts", body: entryXML(echo), header: map[string]string{"If-Match": "*"}})
		if !strings.Contains(r.want(t, "update", http.StatusOK).body, "<MaxSizeInMegabytes>65536</MaxSizeInMegabytes>") {
			t.Errorf("update %d with the size read back: %s; want MaxSizeInMegabytes 65536", i, r.body)
		}
	}
	b.do(t, call{method: http.MethodPut, path: "/parts", body: entryXML("<MaxSizeInMegabytes>4096</MaxSizeInMegabytes>"),
		header: map[string]string{"If-Match": "*"}}).
		wantError(t, "unpartition", http.StatusBadRequest, "SubCode=40000. Partitioning cannot be changed for Queue. ")
}
