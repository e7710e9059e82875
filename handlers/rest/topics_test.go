package rest_test

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/api/client"
	"github.com/sbgate/sbgate/sas"
)

// Topics, subscriptions, rules, routing, auto-forwarding and entity-level authorization rules,
// driven over HTTP with the bodies real clients send (protocol.md §4.1–4.9, §4.13, §5, §7.2–7.3,
// §8).

// mgmtEntry is an Atom entry of a topic, subscription or rule as the tests read it.
type mgmtEntry struct {
	XMLName xml.Name    `xml:"http://www.w3.org/2005/Atom entry"`
	ID      string      `xml:"id"`
	Title   string      `xml:"title"`
	Author  *mgmtAuthor `xml:"author"`
	Links   []link      `xml:"link"`
	Topic   *topicDesc  `xml:"content>TopicDescription"`
	Sub     *subDesc    `xml:"content>SubscriptionDescription"`
	Rule    *ruleDesc   `xml:"content>RuleDescription"`
	Queue   *queueDesc  `xml:"content>QueueDescription"`
}

type mgmtAuthor struct {
	Name string `xml:"name"`
}

type mgmtFeed struct {
	XMLName xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	Title   string      `xml:"title"`
	ID      string      `xml:"id"`
	Links   []link      `xml:"link"`
	Entries []mgmtEntry `xml:"entry"`
}

func (f mgmtFeed) titles() []string {
	var out []string
	for _, e := range f.Entries {
		out = append(out, e.Title)
	}
	return out
}

func (f mgmtFeed) next() string {
	for _, l := range f.Links {
		if l.Rel == "next" {
			return l.Href
		}
	}
	return ""
}

type topicDesc struct {
	DefaultMessageTimeToLive            string
	MaxSizeInMegabytes                  int64
	RequiresDuplicateDetection          bool
	DuplicateDetectionHistoryTimeWindow string
	SizeInBytes                         int64
	Status                              string
	UserMetadata                        string
	CreatedAt                           string
	UpdatedAt                           string
	AccessedAt                          *string
	CountDetails                        *countDetails
	SubscriptionCount                   *int
	AuthorizationRules                  authRules
}

type subDesc struct {
	LockDuration                    string
	RequiresSession                 bool
	DefaultMessageTimeToLive        string
	DeadLetteringOnFilterEvaluation bool `xml:"DeadLetteringOnFilterEvaluationExceptions"`
	MessageCount                    int64
	MaxDeliveryCount                int
	Status                          string
	ForwardTo                       string
	ForwardDeadLetteredMessagesTo   string
	UserMetadata                    string
	CreatedAt                       string
	UpdatedAt                       string
	AccessedAt                      *string
	CountDetails                    *countDetails
}

type authRules struct {
	Rules []struct {
		Type       string   `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
		KeyName    string   `xml:"KeyName"`
		PrimaryKey string   `xml:"PrimaryKey"`
		Rights     []string `xml:"Rights>AccessRights"`
	} `xml:"AuthorizationRule"`
}

type ruleDesc struct {
	Filter struct {
		Type               string      `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
		SqlExpression      string      `xml:"SqlExpression"`
		CompatibilityLevel string      `xml:"CompatibilityLevel"`
		CorrelationID      string      `xml:"CorrelationId"`
		Parameters         []keyValue  `xml:"Parameters>KeyValueOfstringanyType"`
		Properties         *[]keyValue `xml:"Properties>KeyValueOfstringanyType"`
	} `xml:"Filter"`
	Action *struct {
		Type          string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
		SqlExpression string `xml:"SqlExpression"`
	} `xml:"Action"`
	CreatedAt string
	Name      string
}

type keyValue struct {
	Key   string `xml:"Key"`
	Value struct {
		Type string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
		Text string `xml:",chardata"`
	} `xml:"Value"`
}

// mgmtEntry checks an Atom entry response and decodes it.
func (r result) mgmtEntry(t *testing.T, what string, status int) mgmtEntry {
	t.Helper()
	r.want(t, what, status)
	if ct := r.header.Get("Content-Type"); ct != entryContentType {
		t.Errorf("%s: Content-Type = %q; want %q", what, ct, entryContentType)
	}
	if strings.HasPrefix(r.body, "<?xml") {
		t.Errorf("%s: body starts with an XML declaration; the service sends none", what)
	}
	var e mgmtEntry
	if err := xml.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("%s: entry %q: %v", what, r.body, err)
	}
	return e
}

// mgmtFeed checks an Atom feed response and decodes it.
func (r result) mgmtFeed(t *testing.T, what, title string) mgmtFeed {
	t.Helper()
	r.want(t, what, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != feedContentType {
		t.Errorf("%s: Content-Type = %q; want %q", what, ct, feedContentType)
	}
	var f mgmtFeed
	if err := xml.Unmarshal([]byte(r.body), &f); err != nil {
		t.Fatalf("%s: feed %q: %v", what, r.body, err)
	}
	if f.Title != title {
		t.Errorf("%s: feed title = %q; want %q", what, f.Title, title)
	}
	return f
}

// childNames lists the local names of the children of the first element named parent, in
// document order: the element order clients depend on.
func childNames(t *testing.T, body, parent string) []string {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(body))
	depth, inside := 0, -1
	var names []string
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch el := tok.(type) {
		case xml.StartElement:
			depth++
			if inside < 0 && el.Name.Local == parent {
				inside = depth
			} else if inside > 0 && depth == inside+1 {
				names = append(names, el.Name.Local)
			}
		case xml.EndElement:
			if depth == inside {
				return names
			}
			depth--
		}
	}
	t.Fatalf("no element %s in %s", parent, body)
	return nil
}

func wantOrder(t *testing.T, what, body, parent string, want []string) {
	t.Helper()
	if got := childNames(t, body, parent); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s: %s children =\n  %v\nwant\n  %v", what, parent, got, want)
	}
}

func topicXML(description string) string {
	return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<TopicDescription xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `">` + description + `</TopicDescription></content></entry>`
}

func subscriptionXML(description string) string {
	return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<SubscriptionDescription xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `">` + description + `</SubscriptionDescription></content></entry>`
}

func ruleXML(description string) string {
	return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<RuleDescription xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `">` + description + `</RuleDescription></content></entry>`
}

// sqlRule is a RuleDescription body with a SqlFilter and, unless action is empty, a SqlRuleAction.
func sqlRule(filter, action string) string {
	a := `<Action i:type="EmptyRuleAction"/>`
	if action != "" {
		a = `<Action i:type="SqlRuleAction"><SqlExpression>` + xmlText(action) + `</SqlExpression></Action>`
	}
	return ruleXML(`<Filter i:type="SqlFilter"><SqlExpression>` + xmlText(filter) + `</SqlExpression>` +
		`<CompatibilityLevel>20</CompatibilityLevel></Filter>` + a)
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

var atomHeader = map[string]string{"Content-Type": entryContentType}

// createTopic creates a topic with the given TopicDescription children.
func (b *bundle) createTopic(t *testing.T, path, description string) {
	t.Helper()
	b.do(t, call{method: http.MethodPut, path: "/" + path, body: topicXML(description), header: atomHeader}).
		want(t, "create topic "+path, http.StatusCreated)
}

// createSubscription creates topic/Subscriptions/name with the given SubscriptionDescription
// children.
func (b *bundle) createSubscription(t *testing.T, topic, name, description string) {
	t.Helper()
	b.do(t, call{method: http.MethodPut, path: "/" + topic + "/Subscriptions/" + name, body: subscriptionXML(description), header: atomHeader}).
		want(t, "create subscription "+topic+"/"+name, http.StatusCreated)
}

// putRule creates a rule from a whole entry body.
func (b *bundle) putRule(t *testing.T, topic, sub, name, body string) {
	t.Helper()
	b.do(t, call{method: http.MethodPut, path: "/" + topic + "/Subscriptions/" + sub + "/Rules/" + name, body: body, header: atomHeader}).
		want(t, "create rule "+name+" on "+topic+"/"+sub, http.StatusCreated)
}

// received is a message taken with receive-and-delete.
type received struct {
	body   string
	bp     map[string]any
	header http.Header
}

// drain receives and deletes every message of path ("t/Subscriptions/s", or a DLQ).
func (b *bundle) drain(t *testing.T, path string) []received {
	t.Helper()
	var out []received
	for i := 0; ; i++ {
		r := b.do(t, call{method: http.MethodDelete, path: "/" + path + "/messages/head?timeout=0"})
		if r.status == http.StatusNoContent {
			return out
		}
		r.want(t, "receive from "+path, http.StatusOK)
		out = append(out, received{body: r.body, bp: brokerProperties(t, r.header.Get("BrokerProperties")), header: r.header})
		if i > 100 {
			t.Fatalf("drain %s: more than 100 messages", path)
		}
	}
}

// bodies lists the bodies of msgs, each followed by the user property prop in brackets when
// prop is set and the message has it.
func bodies(msgs []received, prop string) string {
	var parts []string
	for _, m := range msgs {
		s := m.body
		if v := m.header.Get(prop); prop != "" && v != "" {
			s += "[" + v + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// TestTopicLifecycle creates a topic as the JS client does, reads it with its counts, updates
// it, lists it and deletes it with everything it holds.
func TestTopicLifecycle(t *testing.T) {
	b := setup(t)
	createBody := `<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom">` +
		`<updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml">` +
		`<TopicDescription xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `">` +
		`<DefaultMessageTimeToLive>P7D</DefaultMessageTimeToLive><MaxSizeInMegabytes>2048</MaxSizeInMegabytes>` +
		`<RequiresDuplicateDetection>true</RequiresDuplicateDetection><DuplicateDetectionHistoryTimeWindow>PT5M</DuplicateDetectionHistoryTimeWindow>` +
		`<EnableBatchedOperations>true</EnableBatchedOperations><AuthorizationRules/><Status>Active</Status>` +
		`<UserMetadata>orders &amp; more</UserMetadata><SupportOrdering>true</SupportOrdering><AutoDeleteOnIdle>P1D</AutoDeleteOnIdle>` +
		`<EnablePartitioning>false</EnablePartitioning><EntityAvailabilityStatus>Available</EntityAvailabilityStatus>` +
		`<EnableExpress>false</EnableExpress></TopicDescription></content></entry>`
	path := "/Orders?api-version=2021-05"
	r := b.do(t, call{method: http.MethodPut, path: path, body: createBody, header: atomHeader}).want(t, "PUT "+path, http.StatusCreated)
	id := b.url + path
	want := `<entry xmlns="http://www.w3.org/2005/Atom"><id>` + id + `</id><title type="text">Orders</title>` +
		`<published>2026-03-01T12:00:00Z</published><updated>2026-03-01T12:00:00Z</updated>` +
		`<author><name>sbgate</name></author><link rel="self" href="` + id + `"/>` +
		`<content type="application/xml"><TopicDescription xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `">` +
		`<DefaultMessageTimeToLive>P7D</DefaultMessageTimeToLive><MaxSizeInMegabytes>2048</MaxSizeInMegabytes>` +
		`<RequiresDuplicateDetection>true</RequiresDuplicateDetection><DuplicateDetectionHistoryTimeWindow>PT5M</DuplicateDetectionHistoryTimeWindow>` +
		`<EnableBatchedOperations>true</EnableBatchedOperations><SizeInBytes>0</SizeInBytes>` +
		`<FilteringMessagesBeforePublishing>false</FilteringMessagesBeforePublishing><IsAnonymousAccessible>false</IsAnonymousAccessible>` +
		`<AuthorizationRules></AuthorizationRules><Status>Active</Status><UserMetadata>orders &amp; more</UserMetadata>` +
		`<CreatedAt>2026-03-01T12:00:00Z</CreatedAt><UpdatedAt>2026-03-01T12:00:00Z</UpdatedAt>` +
		`<SupportOrdering>true</SupportOrdering><AutoDeleteOnIdle>P1D</AutoDeleteOnIdle><EnablePartitioning>false</EnablePartitioning>` +
		`<EntityAvailabilityStatus>Available</EntityAvailabilityStatus><EnableSubscriptionPartitioning>false</EnableSubscriptionPartitioning>` +
		`<EnableExpress>false</EnableExpress><MaxMessageSizeInKilobytes>256</MaxMessageSizeInKilobytes>` +
		`</TopicDescription></content></entry>`
	if r.body != want {
		t.Errorf("PUT %s body =\n%s\nwant\n%s", path, r.body, want)
	}
	if ct := r.header.Get("Content-Type"); ct != entryContentType {
		t.Errorf("PUT %s: Content-Type = %q; want %q", path, ct, entryContentType)
	}
	// The name is taken, in any casing.
	b.do(t, call{method: http.MethodPut, path: "/orders", body: topicXML("")}).wantError(t, "PUT /orders again", http.StatusConflict, "already exists")
	b.do(t, call{method: http.MethodPut, path: "/ORDERS", body: entryXML("")}).wantError(t, "PUT a queue over the topic", http.StatusConflict, "already exists")

	// Two subscriptions, a message in each.
	b.createSubscription(t, "orders", "a", "")
	b.createSubscription(t, "orders", "b", "")
	b.putRule(t, "orders", "b", "extra", sqlRule("1=1", ""))
	b.send(t, "orders", "hello", nil)
	b.clock.Advance(time.Minute)

	r = b.do(t, call{method: http.MethodGet, path: "/orders?api-version=2024-05"})
	e := r.mgmtEntry(t, "GET /orders", http.StatusOK)
	wantOrder(t, "GET /orders", r.body, "TopicDescription", []string{"DefaultMessageTimeToLive", "MaxSizeInMegabytes",
		"RequiresDuplicateDetection", "DuplicateDetectionHistoryTimeWindow", "EnableBatchedOperations", "SizeInBytes",
		"FilteringMessagesBeforePublishing", "IsAnonymousAccessible", "AuthorizationRules", "Status", "UserMetadata",
		"CreatedAt", "UpdatedAt", "AccessedAt", "SupportOrdering", "CountDetails", "SubscriptionCount", "AutoDeleteOnIdle",
		"EnablePartitioning", "EntityAvailabilityStatus", "EnableSubscriptionPartitioning", "EnableExpress", "MaxMessageSizeInKilobytes",
		"SqlFilterCount", "CorrelationFilterCount"})
	if e.Title != "Orders" || e.ID != b.url+"/orders?api-version=2024-05" || e.Author == nil || e.Author.Name != "sbgate" || e.Topic == nil {
		t.Fatalf("GET /orders: title %q, id %q, author %v; want Orders, the request URL, sbgate", e.Title, e.ID, e.Author)
	}
	if e.Topic.SubscriptionCount == nil || *e.Topic.SubscriptionCount != 2 {
		t.Errorf("GET /orders: SubscriptionCount = %v; want 2", showPtr(e.Topic.SubscriptionCount))
	}
	if cd := e.Topic.CountDetails; cd == nil || len(cd.Attrs) != 1 || cd.Attrs[0].Value != nsCounts {
		t.Errorf("GET /orders: CountDetails = %+v; want one with a single xmlns prefix", cd)
	}
	if e.Topic.AccessedAt == nil {
		t.Errorf("GET /orders: no AccessedAt")
	}

	// Update: what the body omits goes back to its default; RequiresDuplicateDetection stays.
	r = b.do(t, call{method: http.MethodPut, path: "/orders", header: map[string]string{"If-Match": "*"},
		body: topicXML(`<RequiresDuplicateDetection>true</RequiresDuplicateDetection><UserMetadata>v2</UserMetadata>`)})
	e = r.mgmtEntry(t, "PUT /orders If-Match", http.StatusOK)
	if e.Topic == nil || e.Topic.UserMetadata != "v2" || e.Topic.MaxSizeInMegabytes != 1024 ||
		e.Topic.DefaultMessageTimeToLive != "P10675199DT2H48M5.4775807S" || e.Topic.UpdatedAt != "2026-03-01T12:01:00Z" ||
		e.Topic.CreatedAt != "2026-03-01T12:00:00Z" {
		t.Errorf("PUT /orders If-Match: %+v; want UserMetadata v2, defaults elsewhere, updated at 12:01", e.Topic)
	}
	b.do(t, call{method: http.MethodPut, path: "/orders", header: map[string]string{"If-Match": "*"}, body: topicXML("")}).
		wantError(t, "PUT /orders If-Match without duplicate detection", http.StatusBadRequest, "The value for the requires duplicate detection property of an existing Topic cannot be changed.")
	b.do(t, call{method: http.MethodPut, path: "/nowhere", header: map[string]string{"If-Match": "*"}, body: topicXML("")}).
		wantError(t, "update a missing topic", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodPut, path: "/orders", header: map[string]string{"If-Match": "*"}, body: entryXML("")}).
		wantError(t, "update the topic with a QueueDescription", http.StatusBadRequest, "is a topic, not a queue")
	b.do(t, call{method: http.MethodPut, path: "/orders2", body: subscriptionXML("")}).
		wantError(t, "a SubscriptionDescription at a topic path", http.StatusBadRequest, "is put at {topic}/Subscriptions/{name}")

	// Delete takes the subscriptions, their rules and their messages along.
	r = b.do(t, call{method: http.MethodDelete, path: "/Orders"}).want(t, "DELETE /Orders", http.StatusOK)
	if r.body != "" {
		t.Errorf("DELETE /Orders body = %q; want empty", r.body)
	}
	if r := b.do(t, call{method: http.MethodGet, path: "/orders"}).want(t, "GET /orders after delete", http.StatusOK); !strings.Contains(r.body, "Publicly Listed Services") {
		t.Errorf("GET /orders after delete = %s; want the Publicly Listed Services feed", r.body)
	}
	b.do(t, call{method: http.MethodGet, path: "/orders/Subscriptions/a"}).wantError(t, "GET a subscription of the deleted topic", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodGet, path: "/orders/Subscriptions/b/Rules/extra"}).wantError(t, "GET a rule of the deleted topic", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodDelete, path: "/orders"}).wantError(t, "DELETE /orders again", http.StatusNotFound, "could not be found")
	// The names are free again, and nothing of the old topic comes back with them.
	b.createTopic(t, "orders", "")
	b.createSubscription(t, "orders", "b", "")
	f := b.do(t, call{method: http.MethodGet, path: "/orders/Subscriptions/b/Rules"}).mgmtFeed(t, "rules of the new b", "Rules")
	if got := f.titles(); fmt.Sprint(got) != "[$Default]" {
		t.Errorf("rules of the recreated subscription = %v; want only $Default", got)
	}
	if c := b.counts(t, "orders/Subscriptions/b"); c.Total() != 0 {
		t.Errorf("counts of the recreated subscription = %+v; want none", c)
	}
}

// TestListTopics pages through $Resources/Topics, which lists topics only.
func TestListTopics(t *testing.T) {
	b := setup(t)
	for _, n := range []string{"topic-c", "topic-a", "topic-b"} {
		b.createTopic(t, n, "")
	}
	b.createQueue(t, "a-queue", "")
	b.createSubscription(t, "topic-b", "s1", "")
	b.createSubscription(t, "topic-b", "s2", "")

	f := b.do(t, call{method: http.MethodGet, path: "/$Resources/Topics?%24top=2&api-version=2021-05"}).mgmtFeed(t, "first page of topics", "Topics")
	if got := f.titles(); fmt.Sprint(got) != "[topic-a topic-b]" {
		t.Errorf("first page of topics = %v; want [topic-a topic-b]", got)
	}
	if f.ID != b.url+"/$Resources/Topics?%24top=2&api-version=2021-05" {
		t.Errorf("feed id = %q; want the request URL", f.ID)
	}
	next := f.next()
	if want := b.url + "/$Resources/Topics?%24skip=2&%24top=2&api-version=2021-05"; next != want {
		t.Fatalf("next link = %q; want %q", next, want)
	}
	for _, e := range f.Entries {
		if e.Topic == nil || e.Topic.CountDetails == nil || e.Topic.SubscriptionCount == nil || e.Author == nil {
			t.Errorf("topic feed entry %s: %+v; want a TopicDescription with CountDetails, SubscriptionCount and an author", e.Title, e.Topic)
			continue
		}
		if want := map[string]int{"topic-a": 0, "topic-b": 2}[e.Title]; *e.Topic.SubscriptionCount != want {
			t.Errorf("topic feed entry %s: SubscriptionCount = %d; want %d", e.Title, *e.Topic.SubscriptionCount, want)
		}
	}
	f = b.do(t, call{method: http.MethodGet, path: strings.TrimPrefix(next, b.url)}).mgmtFeed(t, "second page of topics", "Topics")
	if got := f.titles(); fmt.Sprint(got) != "[topic-c]" || f.next() != "" {
		t.Errorf("second page of topics = %v, next %q; want [topic-c] and no next link", got, f.next())
	}
	// Other casings and the trailing slash; queues never show.
	f = b.do(t, call{method: http.MethodGet, path: "/$resources/topics/"}).mgmtFeed(t, "topics, lower case", "Topics")
	if got := f.titles(); fmt.Sprint(got) != "[topic-a topic-b topic-c]" {
		t.Errorf("all topics = %v", got)
	}

	// A topic without subscriptions lists none.
	f = b.do(t, call{method: http.MethodGet, path: "/topic-a/Subscriptions/"}).mgmtFeed(t, "subscriptions of topic-a", "Subscriptions")
	if len(f.Entries) != 0 || f.next() != "" {
		t.Errorf("subscriptions of topic-a = %v, next %q; want an empty feed", f.titles(), f.next())
	}

	// The generated client reads the same list.
	list, err := b.api.ListTopicsWithResponse(t.Context(), &client.ListTopicsParams{Skip: ptr(1), Top: ptr(1)})
	if err != nil {
		t.Fatal(err)
	}
	if list.StatusCode() != http.StatusOK || !strings.Contains(string(list.Body), `<title type="text">topic-b</title>`) ||
		strings.Contains(string(list.Body), "topic-a") {
		t.Errorf("ListTopics($skip=1, $top=1) = %d %s; want only topic-b", list.StatusCode(), list.Body)
	}
	// A topic is created through PutEntity like a queue.
	put, err := b.api.PutEntityWithBodyWithResponse(t.Context(), "x/events", nil, "application/atom+xml", strings.NewReader(topicXML("<MaxSizeInMegabytes>3072</MaxSizeInMegabytes>")))
	if err != nil {
		t.Fatal(err)
	}
	if put.StatusCode() != http.StatusCreated || !strings.Contains(string(put.Body), "<TopicDescription") ||
		!strings.Contains(string(put.Body), "<MaxSizeInMegabytes>3072</MaxSizeInMegabytes>") {
		t.Errorf("PutEntity(x/events, TopicDescription) = %d %s; want 201 with the topic", put.StatusCode(), put.Body)
	}
}

// Bodies real clients send to create a subscription (protocol.md §4.3, §4.7, §8).
var subscriptionBodies = []struct {
	client string
	body   string
	// what the subscription should end up with
	lockDuration string
	maxDelivery  int
	rule         string // the name of its one rule
	ruleType     string // that rule's filter type
}{
	{
		client: "azure-sb",
		body: `<?xml version="1.0" encoding="utf-8" standalone="yes"?>
<entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml">` +
			`<SubscriptionDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">` +
			`<LockDuration>PT45S</LockDuration><RequiresSession>false</RequiresSession><DefaultMessageTimeToLive>P14D</DefaultMessageTimeToLive>` +
			`<DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration><DeadLetteringOnFilterEvaluationExceptions>true</DeadLetteringOnFilterEvaluationExceptions>` +
			`<MaxDeliveryCount>5</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations></SubscriptionDescription></content></entry>`,
		lockDuration: "PT45S", maxDelivery: 5, rule: "$Default", ruleType: "TrueFilter",
	},
	{
		client: "js-empty",
		body: `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom">` +
			`<updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml">` +
			`<SubscriptionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"/></content></entry>`,
		lockDuration: "PT1M", maxDelivery: 10, rule: "$Default", ruleType: "TrueFilter",
	},
	{
		// Go sends no declaration, the _XMLSchema-instance prefix, and no Action in the default rule.
		client: "go-sql-default-rule",
		body: `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
			`<SubscriptionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance">` +
			`<LockDuration>PT30S</LockDuration><RequiresSession>false</RequiresSession>` +
			`<DefaultRuleDescription><Filter _XMLSchema-instance:type="SqlFilter"><SqlExpression>color = 'red'</SqlExpression></Filter><Name>red-only</Name></DefaultRuleDescription>` +
			`<MaxDeliveryCount>3</MaxDeliveryCount><Status>Active</Status><ForwardTo _XMLSchema-instance:nil="true"></ForwardTo>` +
			`</SubscriptionDescription></content></entry>`,
		lockDuration: "PT30S", maxDelivery: 3, rule: "red-only", ruleType: "SqlFilter",
	},
	{
		client: "correlation-default-rule",
		body: subscriptionXML(`<DefaultRuleDescription><Filter i:type="CorrelationFilter"><CorrelationId>c1</CorrelationId><Label>L</Label></Filter>` +
			`<Action i:type="EmptyRuleAction"/><Name>by-correlation</Name></DefaultRuleDescription>`),
		lockDuration: "PT1M", maxDelivery: 10, rule: "by-correlation", ruleType: "CorrelationFilter",
	},
}

// TestCreateSubscriptionClientBodies creates subscriptions with the bodies of azure-sb, JS, Go and
// Python and checks the entry and the first rule each gets.
func TestCreateSubscriptionClientBodies(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "events", "")
	for _, tc := range subscriptionBodies {
		path := "/events/Subscriptions/Sub-" + tc.client + "?api-version=2021-05"
		r := b.do(t, call{method: http.MethodPut, path: path, body: tc.body, header: atomHeader})
		e := r.mgmtEntry(t, tc.client+": PUT "+path, http.StatusCreated)
		if e.Title != "Sub-"+tc.client || e.ID != b.url+path || e.Author != nil || e.Sub == nil {
			t.Fatalf("%s: title %q, id %q, author %v; want the subscription name, the request URL and no author\n%s",
				tc.client, e.Title, e.ID, e.Author, r.body)
		}
		if e.Sub.LockDuration != tc.lockDuration || e.Sub.MaxDeliveryCount != tc.maxDelivery || !e.Sub.DeadLetteringOnFilterEvaluation {
			t.Errorf("%s: LockDuration, MaxDeliveryCount, DeadLetteringOnFilterEvaluationExceptions = %q, %d, %t; want %q, %d, true",
				tc.client, e.Sub.LockDuration, e.Sub.MaxDeliveryCount, e.Sub.DeadLetteringOnFilterEvaluation, tc.lockDuration, tc.maxDelivery)
		}
		// The create response carries AccessedAt, set at creation as the service does, but no
		// CountDetails.
		if e.Sub.AccessedAt == nil || *e.Sub.AccessedAt != e.Sub.CreatedAt {
			t.Errorf("%s: AccessedAt = %v; want the creation time %s", tc.client, e.Sub.AccessedAt, e.Sub.CreatedAt)
		}
		wantOrder(t, tc.client, r.body, "SubscriptionDescription", []string{"LockDuration", "RequiresSession",
			"DefaultMessageTimeToLive", "DeadLetteringOnMessageExpiration", "DeadLetteringOnFilterEvaluationExceptions",
			"MessageCount", "MaxDeliveryCount", "EnableBatchedOperations", "Status", "CreatedAt", "UpdatedAt", "AccessedAt",
			"AutoDeleteOnIdle", "EntityAvailabilityStatus"})

		f := b.do(t, call{method: http.MethodGet, path: "/events/Subscriptions/Sub-" + tc.client + "/Rules/"}).mgmtFeed(t, tc.client+": rules", "Rules")
		if len(f.Entries) != 1 || f.Entries[0].Title != tc.rule || f.Entries[0].Rule == nil || f.Entries[0].Rule.Filter.Type != tc.ruleType {
			t.Errorf("%s: rules = %s; want one rule %s with a %s", tc.client, f.titles(), tc.rule, tc.ruleType)
			continue
		}
		if a := f.Entries[0].Rule.Action; a == nil || a.Type != "EmptyRuleAction" {
			t.Errorf("%s: rule %s action = %+v; want EmptyRuleAction", tc.client, tc.rule, a)
		}
	}
	// The default rule as the service writes it.
	r := b.do(t, call{method: http.MethodGet, path: "/events/Subscriptions/Sub-js-empty/Rules/$Default"}).want(t, "GET $Default", http.StatusOK)
	if !strings.Contains(r.body, `<RuleDescription xmlns="`+nsSB+`" xmlns:i="`+nsXSI+`"><Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression>`+
		`<CompatibilityLevel>20</CompatibilityLevel></Filter><Action i:type="EmptyRuleAction"/><CreatedAt>2026-03-01T12:00:00Z</CreatedAt><Name>$Default</Name></RuleDescription>`) {
		t.Errorf("GET $Default = %s; want the TrueFilter rule as the service writes it", r.body)
	}
	// Python addresses subscriptions in lower case; the id echoes that.
	python := `<?xml version='1.0' encoding='utf-8'?>
<ns0:entry xmlns:ns0="http://www.w3.org/2005/Atom" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ns0:content type="application/xml"><SubscriptionDescription><LockDuration>PT2M</LockDuration><MaxDeliveryCount>7</MaxDeliveryCount><MessageCount>9</MessageCount><CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>9</d2p1:ActiveMessageCount></CountDetails><EntityAvailabilityStatus>Available</EntityAvailabilityStatus></SubscriptionDescription></ns0:content></ns0:entry>`
	path := "/events/subscriptions/py?api-version=2017-04"
	e := b.do(t, call{method: http.MethodPut, path: path, body: python, header: map[string]string{"Content-Type": "application/atom+xml"}}).
		mgmtEntry(t, "python: PUT "+path, http.StatusCreated)
	if e.Title != "py" || e.ID != b.url+path || e.Sub == nil || e.Sub.LockDuration != "PT2M" || e.Sub.MaxDeliveryCount != 7 || e.Sub.MessageCount != 0 {
		t.Errorf("python: PUT %s = %q %q %+v; want py, the request URL, PT2M, 7, no messages", path, e.Title, e.ID, e.Sub)
	}
	e = b.do(t, call{method: http.MethodGet, path: "/events/subscriptions/py"}).mgmtEntry(t, "python: GET", http.StatusOK)
	if e.Title != "py" || e.Sub == nil || e.Sub.CountDetails == nil {
		t.Errorf("python: GET = %q %+v; want py with CountDetails", e.Title, e.Sub)
	}
}

// TestSubscriptionManagement covers get, update, list, delete and the refusals of subscriptions.
func TestSubscriptionManagement(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "t", "")
	b.createQueue(t, "q", "")

	// A subscription needs a topic.
	for _, tc := range []struct{ name, path string }{
		{"missing topic", "/nowhere/Subscriptions/s"},
		{"a queue is no topic", "/q/Subscriptions/s"},
	} {
		b.do(t, call{method: http.MethodPut, path: tc.path, body: subscriptionXML("")}).wantError(t, tc.name, http.StatusNotFound, "")
	}
	b.do(t, call{method: http.MethodGet, path: "/nowhere/Subscriptions"}).wantError(t, "list subscriptions of a missing topic", http.StatusNotFound, "could not be found")

	b.createSubscription(t, "t", "s", "<LockDuration>PT30S</LockDuration><UserMetadata>v1</UserMetadata>")
	b.do(t, call{method: http.MethodPut, path: "/t/Subscriptions/S", body: subscriptionXML("")}).
		wantError(t, "create s again", http.StatusConflict, "already exists")
	b.do(t, call{method: http.MethodPut, path: "/t/Subscriptions/bad$name", body: subscriptionXML("")}).
		wantError(t, "bad subscription name", http.StatusBadRequest, "")
	b.do(t, call{method: http.MethodPut, path: "/t/Subscriptions/x", body: entryXML("")}).
		wantError(t, "a QueueDescription at a subscription path", http.StatusBadRequest, "SubscriptionDescription")

	// GET of a missing subscription is a 404 with the error body, not the discovery feed.
	b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/missing"}).wantError(t, "GET a missing subscription", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodDelete, path: "/t/Subscriptions/missing"}).wantError(t, "DELETE a missing subscription", http.StatusNotFound, "could not be found")

	b.send(t, "t", "one", nil)
	b.send(t, "t", "two", nil)
	b.clock.Advance(time.Minute)
	r := b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/s?api-version=2021-05"})
	e := r.mgmtEntry(t, "GET s", http.StatusOK)
	wantOrder(t, "GET s", r.body, "SubscriptionDescription", []string{"LockDuration", "RequiresSession",
		"DefaultMessageTimeToLive", "DeadLetteringOnMessageExpiration", "DeadLetteringOnFilterEvaluationExceptions",
		"MessageCount", "MaxDeliveryCount", "EnableBatchedOperations", "Status", "UserMetadata", "CreatedAt", "UpdatedAt", "AccessedAt",
		"CountDetails", "AutoDeleteOnIdle", "EntityAvailabilityStatus"})
	if e.Sub == nil || e.Sub.MessageCount != 2 || e.Sub.CountDetails == nil || e.Sub.CountDetails.Active != 2 || e.Sub.UserMetadata != "v1" {
		t.Errorf("GET s: %+v; want 2 active messages and UserMetadata v1", e.Sub)
	}
	if e.ID != b.url+"/t/Subscriptions/s?api-version=2021-05" || e.Author != nil {
		t.Errorf("GET s: id %q, author %v; want the request URL and no author", e.ID, e.Author)
	}

	// Update with If-Match: omitted elements revert, RequiresSession cannot change.
	r = b.do(t, call{method: http.MethodPut, path: "/t/Subscriptions/s", header: map[string]string{"If-Match": "*"},
		body: subscriptionXML("<MaxDeliveryCount>4</MaxDeliveryCount>")})
	e = r.mgmtEntry(t, "update s", http.StatusOK)
	if e.Sub == nil || e.Sub.MaxDeliveryCount != 4 || e.Sub.LockDuration != "PT1M" || e.Sub.UserMetadata != "" || e.Sub.UpdatedAt != "2026-03-01T12:01:00Z" {
		t.Errorf("update s: %+v; want MaxDeliveryCount 4, LockDuration back to PT1M, no UserMetadata", e.Sub)
	}
	b.do(t, call{method: http.MethodPut, path: "/t/Subscriptions/s", header: map[string]string{"If-Match": "*"},
		body: subscriptionXML("<RequiresSession>true</RequiresSession>")}).
		wantError(t, "make s session-ful", http.StatusBadRequest, "The value for the RequiresSession property of an existing Subscription cannot be changed.")
	b.do(t, call{method: http.MethodPut, path: "/t/Subscriptions/none", header: map[string]string{"If-Match": "*"}, body: subscriptionXML("")}).
		wantError(t, "update a missing subscription", http.StatusNotFound, "could not be found")
	// Rules survive an update.
	f := b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/s/Rules"}).mgmtFeed(t, "rules after update", "Rules")
	if fmt.Sprint(f.titles()) != "[$Default]" {
		t.Errorf("rules after update = %v; want [$Default]", f.titles())
	}

	// Listing, with and without a trailing slash, paged.
	for _, n := range []string{"s3", "s2", "s1"} {
		b.createSubscription(t, "t", n, "")
	}
	for _, tc := range []struct {
		path string
		want string
		next string
	}{
		{"/t/Subscriptions", "[s s1 s2 s3]", ""},
		{"/t/Subscriptions/", "[s s1 s2 s3]", ""},
		{"/T/subscriptions/?api-version=2016-07", "[s s1 s2 s3]", ""},
		{"/t/Subscriptions?%24top=3&%3F=&api-version=2024-05", "[s s1 s2]", "/t/Subscriptions?%24skip=3&%24top=3&%3F=&api-version=2024-05"},
		{"/t/Subscriptions?$skip=3&$top=3", "[s3]", ""},
	} {
		f := b.do(t, call{method: http.MethodGet, path: tc.path}).mgmtFeed(t, "GET "+tc.path, "Subscriptions")
		if got := fmt.Sprint(f.titles()); got != tc.want {
			t.Errorf("GET %s = %s; want %s", tc.path, got, tc.want)
		}
		if f.ID != b.url+tc.path {
			t.Errorf("GET %s: feed id %q; want the request URL", tc.path, f.ID)
		}
		if got, want := f.next(), tc.next; want != "" && got != b.url+want || want == "" && got != "" {
			t.Errorf("GET %s: next link %q; want %q", tc.path, got, tc.next)
		}
		for _, e := range f.Entries {
			if e.Sub == nil || e.Sub.CountDetails == nil || e.Author != nil || !strings.HasPrefix(e.ID, b.url+"/t/Subscriptions/"+e.Title) {
				t.Errorf("GET %s: entry %s id %q author %v: want a SubscriptionDescription with counts, no author, an id under /t/Subscriptions/", tc.path, e.Title, e.ID, e.Author)
			}
		}
	}

	// The generated client proves the documented paths and answers.
	ctx := t.Context()
	got, err := b.api.GetSubscriptionWithResponse(ctx, "t", "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusCode() != http.StatusOK || !strings.Contains(string(got.Body), `<title type="text">s1</title>`) {
		t.Errorf("GetSubscription(t, s1) = %d %s", got.StatusCode(), got.Body)
	}
	missing, err := b.api.GetSubscriptionWithResponse(ctx, "t", "zz", nil)
	if err != nil {
		t.Fatal(err)
	}
	if missing.StatusCode() != http.StatusNotFound || missing.XML404 == nil || missing.XML404.Code != 404 {
		t.Errorf("GetSubscription(t, zz) = %d %s; want a 404 error body", missing.StatusCode(), missing.Body)
	}
	put, err := b.api.PutSubscriptionWithBodyWithResponse(ctx, "t", "gen", nil, "application/atom+xml", strings.NewReader(subscriptionXML("")))
	if err != nil {
		t.Fatal(err)
	}
	if put.StatusCode() != http.StatusCreated {
		t.Errorf("PutSubscription(t, gen) = %d %s", put.StatusCode(), put.Body)
	}
	list, err := b.api.ListSubscriptionsWithResponse(ctx, "t", &client.ListSubscriptionsParams{Top: ptr(2), Skip: ptr(1)})
	if err != nil {
		t.Fatal(err)
	}
	if list.StatusCode() != http.StatusOK || !strings.Contains(string(list.Body), `<title type="text">s</title>`) ||
		!strings.Contains(string(list.Body), `<title type="text">s1</title>`) || !strings.Contains(string(list.Body), `rel="next"`) {
		t.Errorf("ListSubscriptions(t, $skip=1, $top=2) = %d %s; want s and s1 and a next link", list.StatusCode(), list.Body)
	}
	del, err := b.api.DeleteSubscriptionWithResponse(ctx, "t", "gen", nil)
	if err != nil {
		t.Fatal(err)
	}
	if del.StatusCode() != http.StatusOK {
		t.Errorf("DeleteSubscription(t, gen) = %d %s", del.StatusCode(), del.Body)
	}

	// Delete takes the subscription's messages; the others keep theirs.
	b.do(t, call{method: http.MethodDelete, path: "/t/Subscriptions/s"}).want(t, "DELETE s", http.StatusOK)
	b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/s"}).wantError(t, "GET s after delete", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodDelete, path: "/t/subscriptions/s/messages/head?timeout=0"}).wantError(t, "receive from the deleted s", http.StatusNotFound, "could not be found")
	if e := b.do(t, call{method: http.MethodGet, path: "/t"}).mgmtEntry(t, "GET t", http.StatusOK); e.Topic == nil || showPtr(e.Topic.SubscriptionCount) != "3" {
		t.Errorf("GET t after deleting s: %+v; want SubscriptionCount 3", e.Topic)
	}
}

// TestRules creates rules with the bodies real clients send and reads them back exactly.
func TestRules(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "t", "")
	b.createSubscription(t, "t", "s", "")
	base := "/t/Subscriptions/s/Rules/"

	tests := []struct {
		client string
		name   string
		body   string
		// the content of the RuleDescription a GET answers, between the Action and CreatedAt
		filter, action string
	}{
		{
			client: "azure-sb", name: "red",
			body: `<?xml version="1.0" encoding="utf-8" standalone="yes"?>
<entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml">` +
				`<RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">` +
				`<Filter i:type="SqlFilter"><SqlExpression>color = 'red'</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>` +
				`<Action i:type="EmptyRuleAction"/></RuleDescription></content></entry>`,
			filter: `<Filter i:type="SqlFilter"><SqlExpression>color = 'red'</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>`,
			action: `<Action i:type="EmptyRuleAction"/>`,
		},
		{
			client: "js-correlation", name: "js-corr",
			body: `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated>` +
				`<content type="application/xml"><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
				`<Filter p4:type="CorrelationFilter" xmlns:p4="http://www.w3.org/2001/XMLSchema-instance"><CorrelationId>c1</CorrelationId>` +
				`<Properties><KeyValueOfstringanyType><Key>quantity</Key><Value p4:type="d6p1:double" xmlns:d6p1="http://www.w3.org/2001/XMLSchema" ` +
				`xmlns:p4="http://www.w3.org/2001/XMLSchema-instance">5</Value></KeyValueOfstringanyType></Properties></Filter>` +
				`<Action p4:type="EmptyRuleAction" xmlns:p4="http://www.w3.org/2001/XMLSchema-instance"/><Name>js-corr</Name></RuleDescription></content></entry>`,
			filter: `<Filter i:type="CorrelationFilter"><CorrelationId>c1</CorrelationId><Properties><KeyValueOfstringanyType><Key>quantity</Key>` +
				`<Value i:type="d6p1:double" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">5</Value></KeyValueOfstringanyType></Properties></Filter>`,
			action: `<Action i:type="EmptyRuleAction"/>`,
		},
		{
			// Parameters come back in key order (the store keeps them as a map), so the request
			// lists them that way too.
			client: "go-parameters", name: "go-params",
			body: `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
				`<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance">` +
				`<Filter _XMLSchema-instance:type="SqlFilter"><SqlExpression>quantity &gt; @min AND sys.Label = @label</SqlExpression>` +
				`<Parameters><KeyValueOfstringanyType><Key>@label</Key><Value _XMLSchema-instance:type="l28:string" xmlns:l28="http://www.w3.org/2001/XMLSchema">big</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@min</Key><Value _XMLSchema-instance:type="l28:int" xmlns:l28="http://www.w3.org/2001/XMLSchema">3</Value></KeyValueOfstringanyType></Parameters>` +
				`</Filter><Name>go-params</Name></RuleDescription></content></entry>`,
			filter: `<Filter i:type="SqlFilter"><SqlExpression>quantity &gt; @min AND sys.Label = @label</SqlExpression><CompatibilityLevel>20</CompatibilityLevel>` +
				`<Parameters><KeyValueOfstringanyType><Key>@label</Key><Value i:type="d6p1:string" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">big</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@min</Key><Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">3</Value></KeyValueOfstringanyType></Parameters></Filter>`,
			action: `<Action i:type="EmptyRuleAction"/>`,
		},
		{
			// .NET (Azure.Messaging.ServiceBus): l28: types on each Value, long for an Int64,
			// TimeSpan as duration. Each comes back in the type it was sent with.
			client: "dotnet-typed", name: "net-typed",
			body: `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">` +
				`<Filter i:type="SqlFilter"><SqlExpression>a = @a AND b = @b AND c = @c AND d = @d AND e = @e AND f = @f</SqlExpression><Parameters>` +
				`<KeyValueOfstringanyType><Key>@a</Key><Value i:type="l28:long" xmlns:l28="http://www.w3.org/2001/XMLSchema">5000000000</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@b</Key><Value i:type="l28:long" xmlns:l28="http://www.w3.org/2001/XMLSchema">7</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@c</Key><Value i:type="l28:int" xmlns:l28="http://www.w3.org/2001/XMLSchema">-7</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@d</Key><Value i:type="l28:double" xmlns:l28="http://www.w3.org/2001/XMLSchema">2</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@e</Key><Value i:type="l28:duration" xmlns:l28="http://www.w3.org/2001/XMLSchema">PT1M</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@f</Key><Value i:type="d3p1:guid" xmlns:d3p1="http://schemas.microsoft.com/2003/10/Serialization/">6f9619ff-8b86-d011-b42d-00cf4fc964ff</Value></KeyValueOfstringanyType>` +
				`</Parameters></Filter><Name>net-typed</Name></RuleDescription></content></entry>`,
			filter: `<Filter i:type="SqlFilter"><SqlExpression>a = @a AND b = @b AND c = @c AND d = @d AND e = @e AND f = @f</SqlExpression><CompatibilityLevel>20</CompatibilityLevel><Parameters>` +
				`<KeyValueOfstringanyType><Key>@a</Key><Value i:type="d6p1:long" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">5000000000</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@b</Key><Value i:type="d6p1:long" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">7</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@c</Key><Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">-7</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@d</Key><Value i:type="d6p1:double" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">2</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@e</Key><Value i:type="d6p1:duration" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">PT1M</Value></KeyValueOfstringanyType>` +
				`<KeyValueOfstringanyType><Key>@f</Key><Value i:type="d6p1:guid" xmlns:d6p1="http://schemas.microsoft.com/2003/10/Serialization/">6f9619ff-8b86-d011-b42d-00cf4fc964ff</Value></KeyValueOfstringanyType>` +
				`</Parameters></Filter>`,
			action: `<Action i:type="EmptyRuleAction"/>`,
		},
		{
			// The Go SDK declares every integer int, however large: it reads back an int.
			client: "go-big-int", name: "go-big",
			body: `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
				`<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance">` +
				`<Filter _XMLSchema-instance:type="CorrelationFilter"><Properties><KeyValueOfstringanyType><Key>n</Key><Value _XMLSchema-instance:type="l28:int" xmlns:l28="http://www.w3.org/2001/XMLSchema">5000000000</Value></KeyValueOfstringanyType></Properties>` +
				`</Filter><Name>go-big</Name></RuleDescription></content></entry>`,
			filter: `<Filter i:type="CorrelationFilter"><Properties><KeyValueOfstringanyType><Key>n</Key>` +
				`<Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">5000000000</Value></KeyValueOfstringanyType></Properties></Filter>`,
			action: `<Action i:type="EmptyRuleAction"/>`,
		},
		{
			// Python: xsi:type with d6p1 on each Value; long above 32 bits, a SqlRuleAction.
			client: "python-long", name: "py-long",
			body: `<ns0:entry xmlns:ns0="http://www.w3.org/2005/Atom" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ns0:content type="application/xml"><RuleDescription>` +
				`<Filter xsi:type="TrueFilter"><SqlExpression>1=1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>` +
				`<Action xsi:type="SqlRuleAction"><SqlExpression>SET q = @q</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@q</Key><Value xsi:type="d6p1:long" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">3000000000</Value></KeyValueOfstringanyType></Parameters><CompatibilityLevel>20</CompatibilityLevel></Action>` +
				`<Name>py-long</Name></RuleDescription></ns0:content></ns0:entry>`,
			filter: `<Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>`,
			action: `<Action i:type="SqlRuleAction"><SqlExpression>SET q = @q</SqlExpression><CompatibilityLevel>20</CompatibilityLevel><Parameters>` +
				`<KeyValueOfstringanyType><Key>@q</Key><Value i:type="d6p1:long" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">3000000000</Value></KeyValueOfstringanyType></Parameters></Action>`,
		},
		{
			client: "sql-action", name: "tagger",
			body:   sqlRule("EXISTS(color)", "SET user.tagged = 'yes'; REMOVE color"),
			filter: `<Filter i:type="SqlFilter"><SqlExpression>EXISTS(color)</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>`,
			action: `<Action i:type="SqlRuleAction"><SqlExpression>SET user.tagged = 'yes'; REMOVE color</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Action>`,
		},
		{
			// azure-sb names a SQL action with the legacy type SqlFilterExpression.
			client: "azure-sb-action", name: "legacy-action",
			body: ruleXML(`<Filter i:type="SqlFilter"><SqlExpression>1=1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>` +
				`<Action i:type="SqlFilterExpression"><SqlExpression>SET n = 1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Action>`),
			filter: `<Filter i:type="SqlFilter"><SqlExpression>1=1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>`,
			action: `<Action i:type="SqlRuleAction"><SqlExpression>SET n = 1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Action>`,
		},
		{
			client: "false-filter", name: "never",
			body:   ruleXML(`<Filter i:type="FalseFilter"><SqlExpression>1=0</SqlExpression></Filter>`),
			filter: `<Filter i:type="FalseFilter"><SqlExpression>1=0</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>`,
			action: `<Action i:type="EmptyRuleAction"/>`,
		},
	}
	for _, tc := range tests {
		path := base + tc.name + "?api-version=2021-05"
		r := b.do(t, call{method: http.MethodPut, path: path, body: tc.body, header: atomHeader})
		e := r.mgmtEntry(t, tc.client+": PUT "+path, http.StatusCreated)
		want := `<entry xmlns="http://www.w3.org/2005/Atom"><id>` + b.url + path + `</id><title type="text">` + tc.name + `</title>` +
			`<published>2026-03-01T12:00:00Z</published><updated>2026-03-01T12:00:00Z</updated><link rel="self" href="` + b.url + path + `"/>` +
			`<content type="application/xml"><RuleDescription xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `">` + tc.filter + tc.action +
			`<CreatedAt>2026-03-01T12:00:00Z</CreatedAt><Name>` + tc.name + `</Name></RuleDescription></content></entry>`
		if r.body != want {
			t.Errorf("%s: PUT %s =\n%s\nwant\n%s", tc.client, path, r.body, want)
		}
		if e.Author != nil {
			t.Errorf("%s: rule entry has an author", tc.client)
		}
		got := b.do(t, call{method: http.MethodGet, path: path}).want(t, tc.client+": GET", http.StatusOK)
		if got.body != want {
			t.Errorf("%s: GET %s =\n%s\nwant\n%s", tc.client, path, got.body, want)
		}
		b.do(t, call{method: http.MethodPut, path: base + strings.ToUpper(tc.name), body: tc.body, header: atomHeader}).
			wantError(t, tc.client+": PUT again", http.StatusConflict, "already exists")
	}

	// The feed lists them in name order, each with its own id.
	f := b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/s/Rules/?api-version=2016-07"}).mgmtFeed(t, "list rules", "Rules")
	if got := fmt.Sprint(f.titles()); got != "[$Default go-big go-params js-corr legacy-action net-typed never py-long red tagger]" {
		t.Errorf("rules = %s", got)
	}
	if f.ID != b.url+"/t/Subscriptions/s/Rules/?api-version=2016-07" {
		t.Errorf("rules feed id = %q; want the request URL verbatim", f.ID)
	}
	for _, e := range f.Entries {
		if e.Rule == nil || e.Rule.Action == nil || e.Rule.Filter.Type == "" || e.Rule.Name != e.Title || e.Author != nil ||
			e.ID != b.url+"/t/Subscriptions/s/Rules/"+e.Title+"?api-version=2016-07" {
			t.Errorf("rules feed entry %s: id %q, %+v; want a full rule", e.Title, e.ID, e.Rule)
		}
	}
	f = b.do(t, call{method: http.MethodGet, path: "/t/subscriptions/s/rules?$top=2&$skip=2"}).mgmtFeed(t, "rules page", "Rules")
	if got := fmt.Sprint(f.titles()); got != "[go-params js-corr]" || !strings.Contains(f.next(), "%24skip=4") {
		t.Errorf("rules $skip=2 $top=2 = %s, next %q; want [go-params js-corr] and a next link to $skip=4", got, f.next())
	}

	// Replace with If-Match: 200, the new filter, the creation time kept.
	b.clock.Advance(time.Minute)
	r := b.do(t, call{method: http.MethodPut, path: base + "red", header: map[string]string{"If-Match": "*"}, body: sqlRule("color = 'crimson'", "SET sys.Label = 'dark'")})
	e := r.mgmtEntry(t, "update red", http.StatusOK)
	if e.Rule == nil || e.Rule.Filter.SqlExpression != "color = 'crimson'" || e.Rule.Action == nil || e.Rule.Action.Type != "SqlRuleAction" ||
		e.Rule.CreatedAt != "2026-03-01T12:00:00Z" {
		t.Errorf("update red = %s; want the new filter and action, CreatedAt unchanged", r.body)
	}
	wantOrder(t, "update red", r.body, "RuleDescription", []string{"Filter", "Action", "CreatedAt", "Name"})
	b.do(t, call{method: http.MethodPut, path: base + "nope", header: map[string]string{"If-Match": "*"}, body: sqlRule("1=1", "")}).
		wantError(t, "update a missing rule", http.StatusNotFound, "does not exist")

	// Refused rules say what is wrong; an invalid expression says where.
	for _, tc := range []struct {
		name, path, body, detail string
	}{
		{"bad SQL", base + "bad", sqlRule("color = = 'red'", ""), "position"},
		{"bad SQL action", base + "bad", sqlRule("1=1", "SET = 2"), "position"},
		{"unterminated string", base + "bad", sqlRule("color = 'red", ""), "position"},
		{"empty correlation filter", base + "bad", ruleXML(`<Filter i:type="CorrelationFilter"></Filter>`), "sets no property"},
		{"unknown filter type", base + "bad", ruleXML(`<Filter i:type="MagicFilter"/>`), "MagicFilter"},
		{"name mismatch", base + "bad", ruleXML(`<Name>other</Name>`), "does not match"},
		{"bad rule name", base + "bad%21name", sqlRule("1=1", ""), "not allowed"},
	} {
		b.do(t, call{method: http.MethodPut, path: tc.path, body: tc.body, header: atomHeader}).wantError(t, tc.name, http.StatusBadRequest, tc.detail)
	}
	b.do(t, call{method: http.MethodPut, path: "/t/Subscriptions/none/Rules/r", body: sqlRule("1=1", "")}).
		wantError(t, "rule on a missing subscription", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/none/Rules"}).
		wantError(t, "rules of a missing subscription", http.StatusNotFound, "could not be found")
	b.do(t, call{method: http.MethodGet, path: base + "bad"}).wantError(t, "GET a refused rule", http.StatusNotFound, "does not exist")

	// Delete: 200, then 404.
	r = b.do(t, call{method: http.MethodDelete, path: base + "Never"}).want(t, "DELETE never", http.StatusOK)
	if r.body != "" {
		t.Errorf("DELETE never body = %q; want empty", r.body)
	}
	b.do(t, call{method: http.MethodDelete, path: base + "never"}).wantError(t, "DELETE never again", http.StatusNotFound, "does not exist")
	b.do(t, call{method: http.MethodGet, path: base + "never"}).wantError(t, "GET never", http.StatusNotFound, "does not exist")

	// The generated client: the paths, the answers and the error bodies.
	ctx := t.Context()
	put, err := b.api.PutRuleWithBodyWithResponse(ctx, "t", "s", "gen", nil, "application/atom+xml", strings.NewReader(sqlRule("n > 1", "")))
	if err != nil {
		t.Fatal(err)
	}
	if put.StatusCode() != http.StatusCreated || !strings.Contains(string(put.Body), "<Name>gen</Name>") {
		t.Errorf("PutRule(gen) = %d %s", put.StatusCode(), put.Body)
	}
	upd, err := b.api.PutRuleWithBodyWithResponse(ctx, "t", "s", "gen", &client.PutRuleParams{IfMatch: ptr("*")}, "application/atom+xml", strings.NewReader(sqlRule("n > 2", "")))
	if err != nil {
		t.Fatal(err)
	}
	if upd.StatusCode() != http.StatusOK || !strings.Contains(string(upd.Body), "n &gt; 2") {
		t.Errorf("PutRule(gen, If-Match) = %d %s", upd.StatusCode(), upd.Body)
	}
	bad, err := b.api.PutRuleWithBodyWithResponse(ctx, "t", "s", "gen2", nil, "application/atom+xml", strings.NewReader(sqlRule("n >", "")))
	if err != nil {
		t.Fatal(err)
	}
	if bad.StatusCode() != http.StatusBadRequest || bad.XML400 == nil || !strings.Contains(bad.XML400.Detail, "position") {
		t.Errorf("PutRule(invalid) = %d %s; want a 400 naming the position", bad.StatusCode(), bad.Body)
	}
	got, err := b.api.GetRuleWithResponse(ctx, "t", "s", "gen", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusCode() != http.StatusOK || !strings.Contains(string(got.Body), `<Action i:type="EmptyRuleAction"/>`) {
		t.Errorf("GetRule(gen) = %d %s", got.StatusCode(), got.Body)
	}
	list, err := b.api.ListRulesWithResponse(ctx, "t", "s", &client.ListRulesParams{Top: ptr(1)})
	if err != nil {
		t.Fatal(err)
	}
	if list.StatusCode() != http.StatusOK || !strings.Contains(string(list.Body), `<title type="text">$Default</title>`) || !strings.Contains(string(list.Body), `rel="next"`) {
		t.Errorf("ListRules($top=1) = %d %s", list.StatusCode(), list.Body)
	}
	del, err := b.api.DeleteRuleWithResponse(ctx, "t", "s", "gen", nil)
	if err != nil {
		t.Fatal(err)
	}
	if del.StatusCode() != http.StatusOK {
		t.Errorf("DeleteRule(gen) = %d %s", del.StatusCode(), del.Body)
	}
	gone, err := b.api.GetRuleWithResponse(ctx, "t", "s", "gen", nil)
	if err != nil {
		t.Fatal(err)
	}
	if gone.StatusCode() != http.StatusNotFound || gone.XML404 == nil || gone.XML404.Code != 404 {
		t.Errorf("GetRule(gen) after delete = %d %s; want a 404 error body", gone.StatusCode(), gone.Body)
	}
}

// defaultRule is a SubscriptionDescription's DefaultRuleDescription with a SqlFilter, and a
// SqlRuleAction unless action is empty.
func defaultRule(name, filter, action string) string {
	a := ""
	if action != "" {
		a = `<Action i:type="SqlRuleAction"><SqlExpression>` + xmlText(action) + `</SqlExpression></Action>`
	}
	return `<DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>` + xmlText(filter) + `</SqlExpression></Filter>` +
		a + `<Name>` + name + `</Name></DefaultRuleDescription>`
}

// TestTopicRouting sends single and batched messages to a topic and checks that every
// subscription got what its rules select: one copy per matching rule, each with that rule's
// action applied.
func TestTopicRouting(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "shop", "")
	b.createSubscription(t, "shop", "all", "")
	b.createSubscription(t, "shop", "red", defaultRule("red-only", "color = 'red'", ""))
	b.createSubscription(t, "shop", "big", defaultRule("big", "quantity > 10 OR sys.Label = 'big'", "SET sys.Label = 'routed'; SET user.tagged = 'yes'; REMOVE color"))
	b.createSubscription(t, "shop", "sys", defaultRule("sys", "sys.MessageId = 'm2' OR sys.CorrelationId = 'c1' AND sys.Label = 'small'", ""))
	b.createSubscription(t, "shop", "none", `<DefaultRuleDescription><Filter i:type="FalseFilter"/><Name>nothing</Name></DefaultRuleDescription>`)
	// A correlation filter as JS writes it: numbers typed double, which match integers.
	b.createSubscription(t, "shop", "corr", `<DefaultRuleDescription><Filter i:type="CorrelationFilter"><CorrelationId>c1</CorrelationId>`+
		`<Properties><KeyValueOfstringanyType><Key>quantity</Key><Value i:type="d6p1:double" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">5</Value>`+
		`</KeyValueOfstringanyType></Properties></Filter><Name>c1</Name></DefaultRuleDescription>`)
	// Two rules: a message both match is copied twice, each copy with its own action.
	b.createSubscription(t, "shop", "multi", defaultRule("a", "1=1", "SET user.copy = 'a'"))
	b.putRule(t, "shop", "multi", "b", sqlRule("color = 'red'", "SET user.copy = 'b'; SET sys.Label = 'b-label'; SET quantity = quantity * 2"))
	// A filter that cannot be evaluated dead-letters a copy.
	b.createSubscription(t, "shop", "broken", defaultRule("broken", "sys.Nonsense = 1", ""))

	b.do(t, call{method: http.MethodPost, path: "/shop/messages", body: "m1", key: "sender", header: map[string]string{
		"BrokerProperties": `{"MessageId":"m1","Label":"small","CorrelationId":"c1"}`, "color": `"red"`, "quantity": "5",
	}}).want(t, "send m1", http.StatusCreated)
	batch := `[{"Body":"m2","BrokerProperties":{"MessageId":"m2","Label":"bulk"},"UserProperties":{"color":"blue","quantity":20}},` +
		`{"Body":"m3","BrokerProperties":{"MessageId":"m3","Label":"big","CorrelationId":"c1"},"UserProperties":{"color":"green"}}]`
	b.do(t, call{method: http.MethodPost, path: "/shop/messages", body: batch, key: "sender", header: map[string]string{"Content-Type": batchContentType}}).
		want(t, "send the batch", http.StatusCreated)

	// The topic holds nothing itself; its subscriptions hold the copies.
	if e := b.do(t, call{method: http.MethodGet, path: "/shop"}).mgmtEntry(t, "GET shop", http.StatusOK); e.Topic == nil || showPtr(e.Topic.SubscriptionCount) != "8" {
		t.Errorf("GET shop: %+v; want 8 subscriptions", e.Topic)
	}
	e := b.do(t, call{method: http.MethodGet, path: "/shop/Subscriptions/multi"}).mgmtEntry(t, "GET multi", http.StatusOK)
	if e.Sub == nil || e.Sub.MessageCount != 4 || e.Sub.CountDetails == nil || e.Sub.CountDetails.Active != 4 {
		t.Errorf("GET multi: %+v; want 4 active messages", e.Sub)
	}
	e = b.do(t, call{method: http.MethodGet, path: "/shop/Subscriptions/broken"}).mgmtEntry(t, "GET broken", http.StatusOK)
	if e.Sub == nil || e.Sub.CountDetails == nil || e.Sub.CountDetails.DeadLetter != 3 || e.Sub.CountDetails.Active != 0 {
		t.Errorf("GET broken: %+v; want 3 dead letters", e.Sub)
	}

	for _, tc := range []struct {
		sub  string
		prop string // a user property to show
		want string
	}{
		{"all", "color", `m1["red"] m2["blue"] m3["green"]`},
		{"red", "", "m1"},
		{"big", "tagged", `m2["yes"] m3["yes"]`},
		{"sys", "", "m1 m2"},
		{"none", "", ""},
		{"corr", "", "m1"},
		{"multi", "copy", `m1["a"] m1["b"] m2["a"] m3["a"]`},
		{"broken", "", ""},
	} {
		msgs := b.drain(t, "shop/Subscriptions/"+tc.sub)
		if got := bodies(msgs, tc.prop); got != tc.want {
			t.Errorf("subscription %s received %q; want %q", tc.sub, got, tc.want)
		}
		for _, m := range msgs {
			wantLabel := map[string]string{"m1": "small", "m2": "bulk", "m3": "big"}[m.body]
			switch {
			case tc.sub == "big":
				wantLabel = "routed"
			case tc.sub == "multi" && m.header.Get("copy") == `"b"`:
				wantLabel = "b-label"
			}
			if m.bp["Label"] != wantLabel || m.bp["MessageId"] != m.body {
				t.Errorf("subscription %s, %s: Label %v, MessageId %v; want %q, %q", tc.sub, m.body, m.bp["Label"], m.bp["MessageId"], wantLabel, m.body)
			}
			// Properties the action did not touch are kept, with their types; what it changed
			// changed in that copy only.
			wantQuantity, wantColor := "5", `"red"`
			switch {
			case tc.sub == "multi" && m.header.Get("copy") == `"b"`:
				wantQuantity = "10"
			case tc.sub == "big":
				wantColor = ""
			}
			if m.body == "m1" && (m.header.Get("quantity") != wantQuantity || m.header.Get("color") != wantColor) {
				t.Errorf("subscription %s, m1 %s: quantity %q, color %q; want %q, %q", tc.sub, m.header.Get("copy"),
					m.header.Get("quantity"), m.header.Get("color"), wantQuantity, wantColor)
			}
			if tc.sub == "big" && m.header.Get("color") != "" {
				t.Errorf("subscription big, %s: color %q; the action removed it", m.body, m.header.Get("color"))
			}
		}
	}

	// The copies the filter could not evaluate wait in the subscription's dead-letter queue.
	dead := b.drain(t, "shop/Subscriptions/broken/$DeadLetterQueue")
	if got := bodies(dead, "DeadLetterReason"); got != `m1["FilterEvaluationException"] m2["FilterEvaluationException"] m3["FilterEvaluationException"]` {
		t.Errorf("dead letters of broken = %s; want m1, m2, m3 with FilterEvaluationException", got)
	}
	for _, m := range dead {
		if d := m.header.Get("DeadLetterErrorDescription"); !strings.Contains(d, "broken") {
			t.Errorf("dead letter %s: DeadLetterErrorDescription = %q; want it to name the rule", m.body, d)
		}
	}

	// A rule added later applies to the next send; a deleted one no longer does.
	b.putRule(t, "shop", "red", "blue", sqlRule("color = 'blue'", ""))
	b.do(t, call{method: http.MethodDelete, path: "/shop/Subscriptions/red/Rules/red-only"}).want(t, "delete red-only", http.StatusOK)
	b.send(t, "shop", "m4", map[string]string{"color": `"red"`})
	b.send(t, "shop", "m5", map[string]string{"color": `"blue"`})
	if got := bodies(b.drain(t, "shop/Subscriptions/red"), ""); got != "m5" {
		t.Errorf("red after changing its rules received %q; want m5", got)
	}
	// A subscription without rules receives nothing.
	b.do(t, call{method: http.MethodDelete, path: "/shop/Subscriptions/red/Rules/blue"}).want(t, "delete blue", http.StatusOK)
	b.send(t, "shop", "m6", map[string]string{"color": `"blue"`})
	if got := bodies(b.drain(t, "shop/Subscriptions/red"), ""); got != "" {
		t.Errorf("red without rules received %q; want nothing", got)
	}
	if got := bodies(b.drain(t, "shop/Subscriptions/all"), ""); got != "m4 m5 m6" {
		t.Errorf("all received %q; want m4 m5 m6", got)
	}
}

// TestSubscriptionMessaging receives from a subscription with every REST operation, settles at
// the Location it answers, and dead-letters there.
func TestSubscriptionMessaging(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "t", "")
	b.createSubscription(t, "t", "s", "<LockDuration>PT30S</LockDuration>")
	b.createSubscription(t, "t", "once", "<LockDuration>PT5S</LockDuration><MaxDeliveryCount>1</MaxDeliveryCount>")
	for i := 1; i <= 3; i++ {
		b.send(t, "t", fmt.Sprintf("body-%d", i), map[string]string{"BrokerProperties": fmt.Sprintf(`{"MessageId":"id-%d"}`, i)})
	}

	peek := func(what, path string) (string, map[string]any, string) {
		t.Helper()
		r := b.do(t, call{method: http.MethodPost, path: path, key: "listener"}).want(t, what, http.StatusCreated)
		bp := brokerProperties(t, r.header.Get("BrokerProperties"))
		return r.header.Get("Location"), bp, r.body
	}
	loc, bp, body := peek("peek-lock s", "/t/Subscriptions/s/messages/head?timeout=0")
	if want := fmt.Sprintf("http://%s/t/Subscriptions/s/messages/%v/%v", b.host, bp["SequenceNumber"], bp["LockToken"]); loc != want || body != "body-1" {
		t.Errorf("peek-lock s: Location %q, body %q; want %q, body-1", loc, body, want)
	}
	if bp["LockedUntilUtc"] != "Sun, 01 Mar 2026 12:00:30 GMT" || fmt.Sprint(bp["DeliveryCount"]) != "1" {
		t.Errorf("peek-lock s: %v; want the subscription's 30 s lock and delivery 1", bp)
	}
	first := settlePath(t, loc)
	b.clock.Advance(20 * time.Second)
	r := b.do(t, call{method: http.MethodPost, path: first, key: "listener"}).want(t, "renew at Location", http.StatusOK)
	if got := brokerProperties(t, r.header.Get("BrokerProperties"))["LockedUntilUtc"]; got != "Sun, 01 Mar 2026 12:00:50 GMT" {
		t.Errorf("renew: LockedUntilUtc = %v; want 12:00:50", got)
	}
	b.do(t, call{method: http.MethodPut, path: first, key: "listener"}).want(t, "unlock at Location", http.StatusOK)
	// Python's lower-case path and the literal casing azure-sb sends.
	loc, bp, body = peek("peek-lock again", "/t/subscriptions/s/Messages/Head?timeout=0")
	if want := fmt.Sprintf("http://%s/t/subscriptions/s/messages/%v/%v", b.host, bp["SequenceNumber"], bp["LockToken"]); loc != want ||
		body != "body-1" || fmt.Sprint(bp["DeliveryCount"]) != "2" {
		t.Errorf("peek-lock again: Location %q, body %q, DeliveryCount %v; want %q, body-1, 2", loc, body, bp["DeliveryCount"], want)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, loc), key: "listener"}).want(t, "complete at Location", http.StatusOK)
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, loc), key: "listener"}).wantError(t, "complete twice", http.StatusNotFound, "The lock supplied is invalid.")
	b.do(t, call{method: http.MethodDelete, path: "/t/Subscriptions/s/messages/id-2/" + fmt.Sprint(bp["LockToken"])}).
		wantError(t, "complete another message with the lock", http.StatusNotFound, "The lock supplied is invalid.")
	r = b.do(t, call{method: http.MethodDelete, path: "/t/Subscriptions/s/messages/head?timeout=0", key: "listener"}).want(t, "receive-and-delete s", http.StatusOK)
	if r.body != "body-2" || r.header.Get("Location") != "" {
		t.Errorf("receive-and-delete s: body %q, Location %q; want body-2 without Location", r.body, r.header.Get("Location"))
	}
	// The generated client settles a subscription's message with the subscription as entityPath.
	peekRes, err := b.api.PeekLockMessageWithResponse(t.Context(), "t/Subscriptions/s", &client.PeekLockMessageParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if peekRes.StatusCode() != http.StatusCreated || string(peekRes.Body) != "body-3" {
		t.Fatalf("PeekLockMessage(t/Subscriptions/s) = %d %q", peekRes.StatusCode(), peekRes.Body)
	}
	seq, tok := lockOf(t, peekRes.Headers201.BrokerProperties)
	done, err := b.api.CompleteMessageWithResponse(t.Context(), "t/Subscriptions/s", seq, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done.StatusCode() != http.StatusOK {
		t.Errorf("CompleteMessage(t/Subscriptions/s) = %d %s", done.StatusCode(), done.Body)
	}
	if c := b.counts(t, "t/Subscriptions/s"); c.Total() != 0 {
		t.Errorf("counts of s = %+v; want none", c)
	}

	// MaxDeliveryCount 1: the first expired lock sends the message to the dead-letter subqueue.
	loc, _, _ = peek("peek-lock once", "/t/Subscriptions/once/messages/head?timeout=0")
	b.clock.Advance(5 * time.Second)
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, loc)}).wantError(t, "complete an expired lock", http.StatusNotFound, "The lock supplied is invalid.")
	loc, _, body = peek("peek-lock once again", "/t/Subscriptions/once/messages/head?timeout=0") // body-2: body-1 is dead
	if body != "body-2" {
		t.Errorf("peek-lock once again = %q; want body-2", body)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, loc)}).want(t, "complete body-2", http.StatusOK)
	dlq := "/t/Subscriptions/once/$DeadLetterQueue/messages/head?timeout=0"
	w := b.raw(t, http.MethodPost, dlq, "")
	if w.statusLine != "HTTP/1.1 201 Created" || w.body != "body-1" || w.header["DeadLetterReason"] != `"MaxDeliveryCountExceeded"` {
		t.Fatalf("peek-lock %s = %s %v %q; want body-1 with DeadLetterReason MaxDeliveryCountExceeded", dlq, w.statusLine, w.header, w.body)
	}
	dbp := brokerProperties(t, w.header["BrokerProperties"])
	if want := fmt.Sprintf("http://%s/t/Subscriptions/once/$DeadLetterQueue/messages/%v/%v", b.host, dbp["SequenceNumber"], dbp["LockToken"]); w.header["Location"] != want {
		t.Errorf("peek-lock %s: Location %q; want %q", dlq, w.header["Location"], want)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, w.header["Location"])}).want(t, "complete the dead letter", http.StatusOK)
	e := b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/once"}).mgmtEntry(t, "GET once", http.StatusOK)
	if e.Sub == nil || e.Sub.CountDetails == nil || e.Sub.CountDetails.DeadLetter != 0 || e.Sub.CountDetails.Active != 1 {
		t.Errorf("GET once: %+v; want body-3 active and no dead letters", e.Sub)
	}

	// Subscriptions are not sent to; topics are not received from.
	b.do(t, call{method: http.MethodPost, path: "/t/Subscriptions/s/messages", body: "x", key: "sender"}).
		wantError(t, "send to a subscription", http.StatusBadRequest, "send them to its topic")
	b.do(t, call{method: http.MethodPost, path: "/t/Subscriptions/s/$DeadLetterQueue/messages", body: "x"}).
		wantError(t, "send to a subscription's DLQ", http.StatusBadRequest, "")
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		b.do(t, call{method: method, path: "/t/messages/head?timeout=0"}).
			wantError(t, method+" head of a topic", http.StatusBadRequest, "receive them from one of its subscriptions")
	}
	b.do(t, call{method: http.MethodPost, path: "/t/Subscriptions/missing/messages/head?timeout=0"}).
		wantError(t, "receive from a missing subscription", http.StatusNotFound, "could not be found")
}

// TestAutoForwarding forwards messages and dead letters from queues and subscriptions.
func TestAutoForwarding(t *testing.T) {
	b := setup(t)
	b.namespaceWide = true // the namespace's owner may forward anywhere without supplementary tokens
	b.createQueue(t, "target", "")
	b.createQueue(t, "dl-target", "")

	// Absolute (as JS rewrites it, and as the service answers it) and relative (as Go sends it).
	r := b.do(t, call{method: http.MethodPut, path: "/abs", body: entryXML("<ForwardTo>sb://" + b.host + "/target</ForwardTo>")})
	if e := r.mgmtEntry(t, "create abs", http.StatusCreated); e.Queue == nil || !strings.Contains(r.body, "<ForwardTo>sb://"+b.host+"/target</ForwardTo>") {
		t.Errorf("create abs = %s; want ForwardTo sb://%s/target", r.body, b.host)
	}
	b.createQueue(t, "rel", "<ForwardTo>Target</ForwardTo>")
	r = b.do(t, call{method: http.MethodGet, path: "/rel"})
	r.mgmtEntry(t, "GET rel", http.StatusOK)
	if !strings.Contains(r.body, "<ForwardTo>sb://"+b.host+"/target</ForwardTo>") {
		t.Errorf("GET rel = %s; want ForwardTo sb://%s/target (the target's own name)", r.body, b.host)
	}
	// The service writes ForwardTo after EnableExpress.
	wantOrder(t, "GET rel", r.body, "QueueDescription", []string{"LockDuration", "MaxSizeInMegabytes", "RequiresDuplicateDetection",
		"RequiresSession", "DefaultMessageTimeToLive", "DeadLetteringOnMessageExpiration", "DuplicateDetectionHistoryTimeWindow",
		"MaxDeliveryCount", "EnableBatchedOperations", "SizeInBytes", "MessageCount", "IsAnonymousAccessible", "AuthorizationRules",
		"Status", "CreatedAt", "UpdatedAt", "AccessedAt", "SupportOrdering", "CountDetails", "AutoDeleteOnIdle", "EnablePartitioning",
		"EntityAvailabilityStatus", "EnableExpress", "ForwardTo", "MaxMessageSizeInKilobytes"})
	b.send(t, "abs", "via-abs", map[string]string{"kind": `"a"`})
	b.send(t, "rel", "via-rel", nil)
	b.do(t, call{method: http.MethodPost, path: "/rel/messages", body: `[{"Body":"via-rel-batch"}]`, key: "sender",
		header: map[string]string{"Content-Type": batchContentType}}).want(t, "batch to rel", http.StatusCreated)
	if c := b.counts(t, "abs"); c.Total() != 0 {
		t.Errorf("counts of abs = %+v; forwarded messages do not stay", c)
	}
	got := b.drain(t, "target")
	if s := bodies(got, "kind"); s != `via-abs["a"] via-rel via-rel-batch` {
		t.Errorf("target received %q; want via-abs[\"a\"] via-rel via-rel-batch", s)
	}

	// Refused: a missing target, a loop, a subscription as target.
	for _, tc := range []struct {
		name, path, body, detail string
		header                   map[string]string
	}{
		{"missing target", "/q1", entryXML("<ForwardTo>nowhere</ForwardTo>"), "SubCode=40400", nil},
		{"missing absolute target", "/q1", entryXML("<ForwardTo>sb://" + b.host + "/nowhere</ForwardTo>"), "SubCode=40400", nil},
		{"missing dead-letter target", "/q1", entryXML("<ForwardDeadLetteredMessagesTo>nowhere</ForwardDeadLetteredMessagesTo>"), "SubCode=40400", nil},
		{"to itself", "/target", entryXML("<ForwardTo>target</ForwardTo>"), "loop", map[string]string{"If-Match": "*"}},
		{"round trip", "/target", entryXML("<ForwardTo>rel</ForwardTo>"), "loop", map[string]string{"If-Match": "*"}},
	} {
		b.do(t, call{method: http.MethodPut, path: tc.path, body: tc.body, header: tc.header}).wantError(t, tc.name, http.StatusBadRequest, tc.detail)
	}
	if r := b.do(t, call{method: http.MethodGet, path: "/q1"}).want(t, "GET q1", http.StatusOK); !strings.Contains(r.body, "Publicly Listed Services") {
		t.Errorf("a refused create made q1: %s", r.body)
	}

	// A subscription forwards to a queue; its topic's messages arrive there.
	b.createTopic(t, "news", "")
	r = b.do(t, call{method: http.MethodPut, path: "/news/Subscriptions/fwd", body: subscriptionXML("<ForwardTo>target</ForwardTo>")})
	if e := r.mgmtEntry(t, "create fwd", http.StatusCreated); e.Sub == nil || e.Sub.ForwardTo != "sb://"+b.host+"/target" {
		t.Errorf("create fwd: %s; want ForwardTo sb://%s/target", r.body, b.host)
	}
	wantOrder(t, "create fwd", r.body, "SubscriptionDescription", []string{"LockDuration", "RequiresSession",
		"DefaultMessageTimeToLive", "DeadLetteringOnMessageExpiration", "DeadLetteringOnFilterEvaluationExceptions",
		"MessageCount", "MaxDeliveryCount", "EnableBatchedOperations", "Status", "ForwardTo", "CreatedAt", "UpdatedAt", "AccessedAt",
		"AutoDeleteOnIdle", "EntityAvailabilityStatus"})
	b.do(t, call{method: http.MethodPut, path: "/target", header: map[string]string{"If-Match": "*"}, body: entryXML("<ForwardTo>news</ForwardTo>")}).
		wantError(t, "queue forwarding to the topic whose subscription forwards to it", http.StatusBadRequest, "loop")
	b.do(t, call{method: http.MethodPut, path: "/q2", body: entryXML("<ForwardTo>news/Subscriptions/fwd</ForwardTo>")}).
		wantError(t, "forward to a subscription", http.StatusBadRequest, "subscription")
	b.do(t, call{method: http.MethodPut, path: "/news/Subscriptions/self", body: subscriptionXML("<ForwardTo>news</ForwardTo>")}).
		wantError(t, "subscription forwarding to its own topic", http.StatusBadRequest, "loop")
	b.send(t, "news", "headline", nil)
	if s := bodies(b.drain(t, "target"), ""); s != "headline" {
		t.Errorf("target received %q from the subscription; want headline", s)
	}

	// Dead letters move on to ForwardDeadLetteredMessagesTo, naming where they died.
	b.createQueue(t, "fragile", "<LockDuration>PT5S</LockDuration><MaxDeliveryCount>1</MaxDeliveryCount><ForwardDeadLetteredMessagesTo>dl-target</ForwardDeadLetteredMessagesTo>")
	r = b.do(t, call{method: http.MethodGet, path: "/fragile"})
	if e := r.mgmtEntry(t, "GET fragile", http.StatusOK); e.Queue == nil || !strings.Contains(r.body, "<ForwardDeadLetteredMessagesTo>sb://"+b.host+"/dl-target</ForwardDeadLetteredMessagesTo>") {
		t.Errorf("GET fragile = %s; want ForwardDeadLetteredMessagesTo sb://%s/dl-target", r.body, b.host)
	}
	b.send(t, "fragile", "poison", map[string]string{"BrokerProperties": `{"MessageId":"p"}`})
	b.send(t, "fragile", "rejected", map[string]string{"BrokerProperties": `{"MessageId":"r"}`})
	loc, _ := b.peekLockHead(t, "fragile")
	b.clock.Advance(5 * time.Second)
	loc2, _ := b.peekLockHead(t, "fragile") // poison's lock expired: it is dead-lettered, rejected comes next
	b.do(t, call{method: http.MethodPost, path: loc2 + "/$deadletter", body: `{"DeadLetterReason":"Rejected"}`,
		header: map[string]string{"Content-Type": "application/json"}}).want(t, "dead-letter rejected", http.StatusOK)
	b.do(t, call{method: http.MethodDelete, path: loc}).wantError(t, "complete poison", http.StatusNotFound, "The lock supplied is invalid.")
	if c := b.counts(t, "fragile"); c.Total() != 0 {
		t.Errorf("counts of fragile = %+v; its dead letters should have moved on", c)
	}
	moved := b.drain(t, "dl-target")
	if s := bodies(moved, "DeadLetterReason"); s != `poison["MaxDeliveryCountExceeded"] rejected["Rejected"]` {
		t.Errorf("dl-target received %q; want poison and rejected with their reasons", s)
	}
	for _, m := range moved {
		if m.bp["DeadLetterSource"] != "fragile" || fmt.Sprint(m.bp["DeliveryCount"]) != "1" {
			t.Errorf("dl-target, %s: BrokerProperties %v; want DeadLetterSource fragile, a fresh delivery count", m.body, m.bp)
		}
	}
	// A subscription's dead letters too.
	b.createSubscription(t, "news", "dl", "<ForwardDeadLetteredMessagesTo>sb://ns.servicebus.windows.net/dl-target</ForwardDeadLetteredMessagesTo>"+
		defaultRule("broken", "sys.Nonsense = 1", ""))
	b.send(t, "news", "unfilterable", nil)
	moved = b.drain(t, "dl-target")
	if s := bodies(moved, "DeadLetterReason"); s != `unfilterable["FilterEvaluationException"]` || moved[0].bp["DeadLetterSource"] != "news/Subscriptions/dl" {
		t.Errorf("dl-target received %q (%v); want unfilterable from news/Subscriptions/dl", s, moved)
	}
	b.drain(t, "target") // the copy fwd forwarded
}

// TestForwardingSupplementaryTokens checks the tokens that prove Send rights on a forwarding
// target (protocol.md §4.13).
func TestForwardingSupplementaryTokens(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "target", "")
	b.createQueue(t, "guarded", authorizationRule("fw", "fw-key", "fw-key-2", "Send"))
	b.createQueue(t, "read-only", authorizationRule("ro", "ro-key", "ro-key-2", "Listen"))
	b.createTopic(t, "t", "")
	now := b.clock.Now()
	const (
		supplementary    = "ServiceBusSupplementaryAuthorization"
		dlqSupplementary = "ServiceBusDlqSupplementaryAuthorization"
	)
	forwardTo := func(target string) string { return entryXML("<ForwardTo>" + target + "</ForwardTo>") }
	dlqTo := func(target string) string {
		return entryXML("<ForwardDeadLetteredMessagesTo>" + target + "</ForwardDeadLetteredMessagesTo>")
	}
	token := func(sr, key, secret string) string { return sas.Sign(sr, key, secret, now.Add(time.Hour)) }
	tests := []struct {
		name   string
		path   string
		body   string
		header map[string]string
		status int
		detail string
	}{
		{"namespace key, namespace-wide, no supplementary token", "/fwd-1", forwardTo("sb://" + b.host + "/target"),
			map[string]string{"Authorization": token("sb://"+b.host+"/", "root", "key")}, http.StatusCreated, ""},
		{"signed like Go: sr is the raw target", "/fwd-2", forwardTo("target"),
			map[string]string{supplementary: token("target", "sender", "k2")}, http.StatusCreated, ""},
		{"signed like JS: sr is the host", "/fwd-3", forwardTo("sb://" + b.host + "/target"),
			map[string]string{supplementary: token(b.host, "root", "key")}, http.StatusCreated, ""},
		{"signed like Python: sr is the sb:// URI", "/fwd-4", forwardTo("target"),
			map[string]string{supplementary: token("sb://ns.servicebus.windows.net/target", "sender", "k2")}, http.StatusCreated, ""},
		{"signed with a wrong key", "/fwd-5", forwardTo("target"),
			map[string]string{supplementary: token("target", "sender", "not-k2")}, http.StatusUnauthorized, supplementary + ": InvalidSignature"},
		{"signed by an unknown key", "/fwd-5", forwardTo("target"),
			map[string]string{supplementary: token("target", "stranger", "x")}, http.StatusUnauthorized, supplementary + ": InvalidSignature"},
		{"expired", "/fwd-5", forwardTo("target"),
			map[string]string{supplementary: sas.Sign("target", "sender", "k2", now.Add(-time.Hour))}, http.StatusUnauthorized, "ExpiredToken"},
		{"without Send", "/fwd-5", forwardTo("target"),
			map[string]string{supplementary: token("target", "listener", "k3")}, http.StatusUnauthorized, "'Send' claim(s) are required"},
		{"malformed", "/fwd-5", forwardTo("target"),
			map[string]string{supplementary: "SharedAccessSignature sr=x"}, http.StatusUnauthorized, "MalformedToken"},
		// A key of the target itself proves the right too, when it has Send.
		{"the target's own key", "/fwd-6", forwardTo("guarded"),
			map[string]string{supplementary: token("guarded", "fw", "fw-key")}, http.StatusCreated, ""},
		{"a target key without Send", "/fwd-7", forwardTo("read-only"),
			map[string]string{supplementary: token("read-only", "ro", "ro-key")}, http.StatusUnauthorized, "'Send' claim(s) are required"},
		{"another entity's key", "/fwd-7", forwardTo("read-only"),
			map[string]string{supplementary: token("read-only", "fw", "fw-key")}, http.StatusUnauthorized, "InvalidSignature"},
		// The dead-letter target has its own header.
		{"bad DLQ token", "/fwd-dl", dlqTo("target"),
			map[string]string{supplementary: token("target", "sender", "k2"), dlqSupplementary: token("target", "sender", "wrong")},
			http.StatusUnauthorized, dlqSupplementary + ": InvalidSignature"},
		{"good DLQ token", "/fwd-dl", dlqTo("target"),
			map[string]string{dlqSupplementary: token("sb://ns.servicebus.windows.net/target", "sender", "k2")}, http.StatusCreated, ""},
		// Subscriptions check them as queues do.
		{"subscription, bad token", "/t/Subscriptions/s", subscriptionXML("<ForwardTo>target</ForwardTo>"),
			map[string]string{supplementary: token("target", "root", "nope")}, http.StatusUnauthorized, supplementary},
		{"subscription, good token", "/t/Subscriptions/s", subscriptionXML("<ForwardTo>target</ForwardTo>"),
			map[string]string{supplementary: token("target", "root", "key")}, http.StatusCreated, ""},
		// Without forwarding the header is not read.
		{"a stray header", "/plain", entryXML(""), map[string]string{supplementary: "garbage"}, http.StatusCreated, ""},
	}
	for _, tc := range tests {
		key := ""
		if _, ok := tc.header["Authorization"]; ok {
			key = "-"
		}
		r := b.do(t, call{method: http.MethodPut, path: tc.path, header: tc.header, body: tc.body, key: key})
		if tc.status == http.StatusCreated {
			r.want(t, tc.name, http.StatusCreated)
			continue
		}
		r.wantError(t, tc.name, tc.status, tc.detail)
	}
}

// authorizationRule is an AuthorizationRules element with one shared access rule.
func authorizationRule(keyName, primary, secondary string, rights ...string) string {
	s := `<AuthorizationRules><AuthorizationRule i:type="SharedAccessAuthorizationRule"><ClaimType>SharedAccessKey</ClaimType>` +
		`<ClaimValue>None</ClaimValue><Rights>`
	for _, r := range rights {
		s += "<AccessRights>" + r + "</AccessRights>"
	}
	return s + `</Rights><KeyName>` + keyName + `</KeyName><PrimaryKey>` + primary + `</PrimaryKey><SecondaryKey>` + secondary +
		`</SecondaryKey></AuthorizationRule></AuthorizationRules>`
}

// TestEntityAuthorizationRules gives a queue and a topic their own keys and uses them.
func TestEntityAuthorizationRules(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "secured", authorizationRule("app", "app-primary", "app-secondary", "Send", "Listen"))
	b.createQueue(t, "other", "")
	b.createTopic(t, "events", authorizationRule("tapp", "topic-key", "topic-key-2", "Listen", "Send"))
	b.createSubscription(t, "events", "s", "")

	// The rule is echoed as the service writes it, and its key opens only its entity.
	r := b.do(t, call{method: http.MethodGet, path: "/secured"})
	e := r.mgmtEntry(t, "GET secured", http.StatusOK)
	if e.Queue == nil {
		t.Fatalf("GET secured = %s", r.body)
	}
	want := `<AuthorizationRules><AuthorizationRule i:type="SharedAccessAuthorizationRule"><ClaimType>SharedAccessKey</ClaimType>` +
		`<ClaimValue>None</ClaimValue><Rights><AccessRights>Send</AccessRights><AccessRights>Listen</AccessRights></Rights>` +
		`<KeyName>` // no CreatedTime or ModifiedTime: none were sent
	if !strings.Contains(r.body, want) || !strings.Contains(r.body, `<KeyName>app</KeyName><PrimaryKey>app-primary</PrimaryKey><SecondaryKey>app-secondary</SecondaryKey></AuthorizationRule></AuthorizationRules>`) {
		t.Errorf("GET secured = %s; want the app rule echoed", r.body)
	}

	e = b.do(t, call{method: http.MethodGet, path: "/events"}).mgmtEntry(t, "GET events", http.StatusOK)
	if e.Topic == nil || len(e.Topic.AuthorizationRules.Rules) != 1 {
		t.Fatalf("GET events: %+v; want one authorization rule", e.Topic)
	}
	if rule := e.Topic.AuthorizationRules.Rules[0]; rule.Type != "SharedAccessAuthorizationRule" || rule.KeyName != "tapp" ||
		rule.PrimaryKey != "topic-key" || fmt.Sprint(rule.Rights) != "[Listen Send]" {
		t.Errorf("GET events: authorization rule %+v; want tapp with Listen and Send", rule)
	}

	now := b.clock.Now()
	withKey := func(name, key, path string) map[string]string {
		return map[string]string{"Authorization": sas.Sign(b.url+path, name, key, now.Add(time.Hour))}
	}
	for _, tc := range []struct {
		name, method, path, body string
		auth                     map[string]string
		status                   int
		detail                   string
	}{
		{"app sends to secured", http.MethodPost, "/secured/messages", "one", withKey("app", "app-primary", "/secured/messages"), http.StatusCreated, ""},
		{"app's secondary key", http.MethodPost, "/secured/messages", "two", withKey("app", "app-secondary", "/secured"), http.StatusCreated, ""},
		{"app peek-locks secured", http.MethodPost, "/secured/messages/head?timeout=0", "", withKey("app", "app-primary", "/secured"), http.StatusCreated, ""},
		{"app receives from secured", http.MethodDelete, "/Secured/messages/head?timeout=0", "", withKey("app", "app-primary", "/secured"), http.StatusOK, ""},
		{"app reads secured's dead letters", http.MethodDelete, "/secured/$DeadLetterQueue/messages/head?timeout=0", "", withKey("app", "app-primary", "/secured"), http.StatusNoContent, ""},
		{"app on another queue", http.MethodPost, "/other/messages", "x", withKey("app", "app-primary", "/other/messages"), http.StatusUnauthorized, "InvalidSignature"},
		{"app receiving from another queue", http.MethodDelete, "/other/messages/head?timeout=0", "", withKey("app", "app-primary", "/other"), http.StatusUnauthorized, "InvalidSignature"},
		{"app with a wrong key", http.MethodPost, "/secured/messages", "x", withKey("app", "guess", "/secured"), http.StatusUnauthorized, "InvalidSignature"},
		{"app reads secured's description", http.MethodGet, "/secured", "", withKey("app", "app-primary", "/secured"), http.StatusUnauthorized, "Manage,EntityRead claims required for this operation."},
		{"app deletes secured", http.MethodDelete, "/secured", "", withKey("app", "app-primary", "/secured"), http.StatusUnauthorized, "Authorization failed for specified action: Manage,EntityDelete."},
		{"app lists queues", http.MethodGet, "/$Resources/Queues", "", withKey("app", "app-primary", "/"), http.StatusUnauthorized, "InvalidSignature"},
		{"app creates a queue", http.MethodPut, "/secured2", entryXML(""), withKey("app", "app-primary", "/"), http.StatusUnauthorized, "InvalidSignature"},
		// The topic's key covers its subscriptions.
		{"tapp sends to the topic", http.MethodPost, "/events/messages", "ev", withKey("tapp", "topic-key", "/events"), http.StatusCreated, ""},
		{"tapp peek-locks the subscription", http.MethodPost, "/events/Subscriptions/s/messages/head?timeout=0", "", withKey("tapp", "topic-key", "/events/Subscriptions/s"), http.StatusCreated, ""},
		{"tapp receives from the subscription, scoped to the topic", http.MethodDelete, "/events/subscriptions/s/messages/head?timeout=0", "", withKey("tapp", "topic-key-2", "/events"), http.StatusNoContent, ""},
		{"tapp reads the subscription's dead letters", http.MethodPost, "/events/Subscriptions/s/$DeadLetterQueue/messages/head?timeout=0", "", withKey("tapp", "topic-key", "/events"), http.StatusNoContent, ""},
		{"tapp reads the subscription", http.MethodGet, "/events/Subscriptions/s", "", withKey("tapp", "topic-key", "/events"), http.StatusUnauthorized, "Unauthorized access for 'GetSubscription' operation"},
		{"tapp on the queue", http.MethodPost, "/secured/messages", "x", withKey("tapp", "topic-key", "/secured"), http.StatusUnauthorized, "InvalidSignature"},
		{"app on the topic", http.MethodPost, "/events/messages", "x", withKey("app", "app-primary", "/events"), http.StatusUnauthorized, "InvalidSignature"},
	} {
		r := b.do(t, call{method: tc.method, path: tc.path, body: tc.body, header: tc.auth, key: "-"})
		if tc.status == http.StatusUnauthorized {
			r.wantError(t, tc.name, tc.status, tc.detail)
		} else {
			r.want(t, tc.name, tc.status)
		}
	}

	// Rights are per key: a Listen-only entity key cannot send.
	b.do(t, call{method: http.MethodPut, path: "/listen-only", body: entryXML(authorizationRule("reader", "rk", "rk2", "Listen"))}).
		want(t, "create listen-only", http.StatusCreated)
	b.do(t, call{method: http.MethodPost, path: "/listen-only/messages", body: "x", key: "-", header: withKey("reader", "rk", "/listen-only")}).
		wantError(t, "reader sends", http.StatusUnauthorized, "'Send' claim(s) are required")
	b.do(t, call{method: http.MethodPost, path: "/listen-only/messages/head?timeout=0", key: "-", header: withKey("reader", "rk", "/listen-only")}).
		want(t, "reader peek-locks", http.StatusNoContent)
	// A Manage entity key manages its entity.
	b.do(t, call{method: http.MethodPut, path: "/managed", body: entryXML(authorizationRule("owner", "ok", "ok2", "Manage", "Listen", "Send"))}).
		want(t, "create managed", http.StatusCreated)
	b.do(t, call{method: http.MethodGet, path: "/managed", key: "-", header: withKey("owner", "ok", "/managed")}).
		want(t, "owner reads managed", http.StatusOK)

	// An update that drops the rule (Go always sends an empty AuthorizationRules) revokes the key.
	b.do(t, call{method: http.MethodPut, path: "/secured", header: map[string]string{"If-Match": "*"}, body: entryXML("<AuthorizationRules></AuthorizationRules>")}).
		want(t, "drop the app rule", http.StatusOK)
	b.do(t, call{method: http.MethodPost, path: "/secured/messages", body: "x", key: "-", header: withKey("app", "app-primary", "/secured")}).
		wantError(t, "app after its rule was dropped", http.StatusUnauthorized, "InvalidSignature")
	// Bad rules are refused.
	b.do(t, call{method: http.MethodPut, path: "/bad-rights", body: entryXML(authorizationRule("x", "k", "k2", "Everything"))}).
		wantError(t, "unknown right", http.StatusBadRequest, "AccessRights")
}

// TestMultiSegmentTopic uses a topic whose path has several segments, spelled raw and
// percent-encoded, through management, routing, receive and sessions.
func TestMultiSegmentTopic(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "a/b", "")
	b.createSubscription(t, "a/b", "s", "")
	e := b.do(t, call{method: http.MethodPut, path: "/a%2Fb/Subscriptions/s2", body: subscriptionXML(defaultRule("only-x", "kind = 'x'", ""))}).
		mgmtEntry(t, "create a%2Fb/Subscriptions/s2", http.StatusCreated)
	if e.Title != "s2" || e.ID != b.url+"/a%2Fb/Subscriptions/s2" {
		t.Errorf("create a%%2Fb/Subscriptions/s2: title %q, id %q", e.Title, e.ID)
	}
	b.createSubscription(t, "a/b", "sess", "<RequiresSession>true</RequiresSession>")
	f := b.do(t, call{method: http.MethodGet, path: "/a/b/Subscriptions/"}).mgmtFeed(t, "list a/b", "Subscriptions")
	if got := fmt.Sprint(f.titles()); got != "[s s2 sess]" {
		t.Errorf("subscriptions of a/b = %s", got)
	}
	for _, en := range f.Entries {
		if want := b.url + "/a/b/Subscriptions/" + en.Title; en.ID != want {
			t.Errorf("feed entry %s: id %q; want %q", en.Title, en.ID, want)
		}
	}
	b.send(t, "a/b", "one", map[string]string{"kind": `"x"`, "BrokerProperties": `{"SessionId":"s/1"}`})
	b.send(t, "a%2Fb", "two", map[string]string{"kind": `"y"`, "BrokerProperties": `{"SessionId":"s/1"}`})

	r := b.do(t, call{method: http.MethodPost, path: "/a/b/Subscriptions/s/messages/head?timeout=0"}).want(t, "peek-lock a/b/Subscriptions/s", http.StatusCreated)
	bp := brokerProperties(t, r.header.Get("BrokerProperties"))
	if want := fmt.Sprintf("http://%s/a/b/Subscriptions/s/messages/%v/%v", b.host, bp["SequenceNumber"], bp["LockToken"]); r.header.Get("Location") != want || r.body != "one" {
		t.Errorf("peek-lock a/b/Subscriptions/s: Location %q, body %q; want %q, one", r.header.Get("Location"), r.body, want)
	}
	b.do(t, call{method: http.MethodDelete, path: settlePath(t, r.header.Get("Location"))}).want(t, "complete in a/b/Subscriptions/s", http.StatusOK)
	if got := bodies(b.drain(t, "a/b/Subscriptions/s2"), ""); got != "one" {
		t.Errorf("a/b/Subscriptions/s2 received %q; want one", got)
	}
	// A session id with a slash travels encoded in the Location.
	r = b.do(t, call{method: http.MethodPost, path: "/a/b/Subscriptions/sess/sessions/$accept?timeout=0", key: "listener"})
	loc, lock := b.sessionAnswer(t, "accept on a/b/Subscriptions/sess", r, http.StatusCreated, "a/b/Subscriptions/sess")
	if lock.SessionID != "s/1" || !strings.Contains(loc, "/sessions/s%2F1/") {
		t.Errorf("accept on a/b/Subscriptions/sess = %+v at %s; want s/1, escaped", lock, loc)
	}
	msgs := b.do(t, call{method: http.MethodDelete, path: loc + "/messages/$batch?timeout=0", key: "listener"}).messages(t, "batch in s/1", http.StatusOK)
	if len(msgs) != 2 || showPtr(msgs[0].Body) != "one" || showPtr(msgs[1].Body) != "two" {
		t.Errorf("batch in s/1 = %+v; want one, two", msgs)
	}
	b.do(t, call{method: http.MethodDelete, path: "/a/b"}).want(t, "delete a/b", http.StatusOK)
	b.do(t, call{method: http.MethodGet, path: "/a/b/Subscriptions"}).wantError(t, "list after delete", http.StatusNotFound, "could not be found")
}

// TestRuleNamedInBody: the Go SDK creates a rule it was given no name for by PUTting to the
// Rules collection with the name in the body's <Name>.
func TestRuleNamedInBody(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "g", "")
	b.createSubscription(t, "g", "s", "")
	body := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" ` +
		`xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance">` +
		`<Filter _XMLSchema-instance:type="SqlFilter"><SqlExpression>a = 1</SqlExpression></Filter>` +
		`<Name>from-body</Name></RuleDescription></content></entry>`
	r := b.do(t, call{method: http.MethodPut, path: "/g/Subscriptions/s/Rules/", body: body, header: atomHeader}).
		want(t, "PUT to the Rules collection", http.StatusCreated)
	if !strings.Contains(r.body, "<Name>from-body</Name>") || !strings.Contains(r.body, "<SqlExpression>a = 1</SqlExpression>") {
		t.Errorf("created rule = %s", r.body)
	}
	b.do(t, call{method: http.MethodGet, path: "/g/Subscriptions/s/Rules/from-body"}).want(t, "GET the rule", http.StatusOK)
	b.do(t, call{method: http.MethodPut, path: "/g/Subscriptions/s/Rules/", body: strings.Replace(body, "<Name>from-body</Name>", "", 1), header: atomHeader}).
		wantError(t, "PUT to the collection without a name", http.StatusBadRequest, "")
}

// TestTopicFilterCounts: from api-version 2024-05 a topic's description counts its subscriptions'
// rules, SQL (true and false filters included, the $Default rule too) and correlation, last in
// the description as the service writes them; older api-versions do not get them.
func TestTopicFilterCounts(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "counted", "")
	b.createSubscription(t, "counted", "a", "")
	b.createSubscription(t, "counted", "b", "")
	b.putRule(t, "counted", "a", "sql", sqlRule("1=1", ""))
	b.putRule(t, "counted", "b", "corr", ruleXML(`<Filter i:type="CorrelationFilter"><CorrelationId>c</CorrelationId></Filter><Action i:type="EmptyRuleAction"/>`))
	b.putRule(t, "counted", "b", "never", ruleXML(`<Filter i:type="FalseFilter"><SqlExpression>1=0</SqlExpression></Filter><Action i:type="EmptyRuleAction"/>`))
	want := "<MaxMessageSizeInKilobytes>256</MaxMessageSizeInKilobytes><SqlFilterCount>4</SqlFilterCount><CorrelationFilterCount>1</CorrelationFilterCount></TopicDescription>"
	for _, path := range []string{"/counted?api-version=2024-05", "/$Resources/Topics?api-version=2024-05"} {
		if r := b.do(t, call{method: http.MethodGet, path: path}).want(t, path, http.StatusOK); !strings.Contains(r.body, want) {
			t.Errorf("GET %s = %s; want it to end the description with %s", path, r.body, want)
		}
	}
	for _, path := range []string{"/counted?api-version=2021-05", "/counted"} {
		if r := b.do(t, call{method: http.MethodGet, path: path}).want(t, path, http.StatusOK); strings.Contains(r.body, "FilterCount") {
			t.Errorf("GET %s = %s; want no filter counts before api-version 2024-05", path, r.body)
		}
	}
}

// A rule action that grows a subscription's copy past what a send may carry (here: past the
// 10 KiB every HTTP client can read back as headers) dead-letters that copy, as it was before the
// action, with a reason; the send succeeds and the other subscriptions get their copies.
func TestRuleActionThatGrowsACopyTooMuch(t *testing.T) {
	b := setup(t)
	b.createTopic(t, "t", "")
	b.createSubscription(t, "t", "grows", "")
	b.createSubscription(t, "t", "plain", "")
	b.do(t, call{method: http.MethodDelete, path: "/t/Subscriptions/grows/Rules/$Default"}).want(t, "delete $Default", http.StatusOK)
	b.putRule(t, "t", "grows", "copy", sqlRule("1=1", "SET q = p; SET r = p"))
	big := strings.Repeat("x", 4000)
	b.do(t, call{method: http.MethodPost, path: "/t/messages", body: "m", header: map[string]string{"p": `"` + big + `"`}}).
		want(t, "send to the topic", http.StatusCreated)
	if got := b.drain(t, "t/Subscriptions/plain"); len(got) != 1 || got[0].header.Get("p") != `"`+big+`"` {
		t.Errorf("plain subscription received %d messages", len(got))
	}
	if got := b.drain(t, "t/Subscriptions/grows"); len(got) != 0 {
		t.Errorf("the grown copy was delivered: %d messages", len(got))
	}
	dl := b.drain(t, "t/Subscriptions/grows/$DeadLetterQueue")
	if len(dl) != 1 {
		t.Fatalf("%d dead letters of the grown copy; want 1", len(dl))
	}
	if h := dl[0].header; h.Get("DeadLetterReason") != `"RuleActionResultTooLarge"` || h.Get("q") != "" || h.Get("p") == "" ||
		!strings.Contains(h.Get("DeadLetterErrorDescription"), "rule copy") {
		t.Errorf("dead letter: reason %q, description %q, q present %v", h.Get("DeadLetterReason"), h.Get("DeadLetterErrorDescription"), h.Get("q") != "")
	}
}
