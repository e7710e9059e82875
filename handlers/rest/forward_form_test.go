package rest_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestForwardTargetsEchoTheFormSet: a queue's and a subscription's ForwardTo and
// ForwardDeadLetteredMessagesTo come back in the form the client set them, on create, GET, list
// and update. Service Bus echoes https://ns/q as https://ns/q, not as sb://ns/q, and the Go SDK's
// TestAdminClient_Queue_Forwarding compares the two; protocol.md §4.13 lists what clients send.
// Forwarding still follows the entity the URL names.
func TestForwardTargetsEchoTheFormSet(t *testing.T) {
	b := setup(t)
	b.namespaceWide = true // the namespace's owner may forward anywhere without supplementary tokens
	b.createQueue(t, "target", "")
	b.createQueue(t, "dl-target", "")
	b.createTopic(t, "news", "")
	fwdURL := "https://" + b.host + "/Target" // the Go SDK's form; the name in another case
	dlqURL := "sb://ns.servicebus.windows.net/dl-target"
	set := "<ForwardTo>" + fwdURL + "</ForwardTo><ForwardDeadLetteredMessagesTo>" + dlqURL + "</ForwardDeadLetteredMessagesTo>"
	echoes := func(what string, r result, fwd, dlq string) {
		t.Helper()
		for _, want := range []string{"<ForwardTo>" + fwd + "</ForwardTo>", "<ForwardDeadLetteredMessagesTo>" + dlq + "</ForwardDeadLetteredMessagesTo>"} {
			if !strings.Contains(r.body, want) {
				t.Errorf("%s: want %s in\n%s", what, want, r.body)
			}
		}
	}
	atom := map[string]string{"Content-Type": "application/atom+xml;type=entry;charset=utf-8"}

	r := b.do(t, call{method: http.MethodPut, path: "/fwd", body: entryXML(set), header: atom}).want(t, "create queue", http.StatusCreated)
	echoes("create queue", r, fwdURL, dlqURL)
	echoes("GET queue", b.do(t, call{method: http.MethodGet, path: "/fwd"}).want(t, "GET queue", http.StatusOK), fwdURL, dlqURL)
	echoes("list queues", b.do(t, call{method: http.MethodGet, path: "/$Resources/Queues"}).want(t, "list queues", http.StatusOK), fwdURL, dlqURL)
	r = b.do(t, call{method: http.MethodPut, path: "/news/Subscriptions/fwd", body: subscriptionXML(set), header: atom}).
		want(t, "create subscription", http.StatusCreated)
	echoes("create subscription", r, fwdURL, dlqURL)
	echoes("GET subscription", b.do(t, call{method: http.MethodGet, path: "/news/Subscriptions/fwd"}).want(t, "GET subscription", http.StatusOK), fwdURL, dlqURL)
	echoes("list subscriptions", b.do(t, call{method: http.MethodGet, path: "/news/Subscriptions"}).want(t, "list subscriptions", http.StatusOK), fwdURL, dlqURL)

	// Forwarding follows the entity the URL names.
	b.send(t, "fwd", "via-queue", nil)
	b.send(t, "news", "via-subscription", nil)
	if s := bodies(b.drain(t, "target"), ""); s != "via-queue via-subscription" {
		t.Errorf("target received %q; want via-queue via-subscription", s)
	}

	// Set again by name, they come back as the service writes a name: sb://{host}/{the target's
	// own name}. Updated to another URL, they come back as that URL.
	update := map[string]string{"Content-Type": atom["Content-Type"], "If-Match": "*"}
	r = b.do(t, call{method: http.MethodPut, path: "/fwd", body: entryXML("<ForwardTo>TARGET</ForwardTo><ForwardDeadLetteredMessagesTo>dl-target</ForwardDeadLetteredMessagesTo>"), header: update}).
		want(t, "update queue by name", http.StatusOK)
	echoes("update queue by name", r, "sb://"+b.host+"/target", "sb://"+b.host+"/dl-target")
	echoes("GET queue set by name", b.do(t, call{method: http.MethodGet, path: "/fwd"}).want(t, "GET queue", http.StatusOK), "sb://"+b.host+"/target", "sb://"+b.host+"/dl-target")
	other := "sb://" + b.host + "/dl-target"
	r = b.do(t, call{method: http.MethodPut, path: "/news/Subscriptions/fwd", body: subscriptionXML("<ForwardTo>" + other + "</ForwardTo>"), header: update}).
		want(t, "update subscription", http.StatusOK)
	if !strings.Contains(r.body, "<ForwardTo>"+other+"</ForwardTo>") || strings.Contains(r.body, "ForwardDeadLetteredMessagesTo") {
		t.Errorf("update subscription: want ForwardTo %s and no ForwardDeadLetteredMessagesTo in\n%s", other, r.body)
	}
}
