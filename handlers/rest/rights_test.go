package rest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestManagementRefusals: a key without Manage is refused each management operation with the
// service's text for reading, writing or deleting, and subscription operations with SubCode=40100
// in the body and in the HTTP reason phrase, as the service sends them and SDK users match on.
func TestManagementRefusals(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.createTopic(t, "t", "")
	b.createSubscription(t, "t", "s", "")
	tests := []struct {
		method, path, detail, phrase string
	}{
		{http.MethodGet, "/q", "Manage,EntityRead claims required for this operation.", ""},
		{http.MethodGet, "/$Resources/Queues", "Manage,EntityRead claims required for this operation.", ""},
		{http.MethodGet, "/$Resources/Topics", "Manage,EntityRead claims required for this operation.", ""},
		{http.MethodPut, "/q2", "Authorization failed for specified action: Manage,EntityWrite.", ""},
		{http.MethodDelete, "/q", "Authorization failed for specified action: Manage,EntityDelete.", ""},
		{http.MethodGet, "/t/Subscriptions/s/Rules", "Manage,EntityRead claims required for this operation.", ""},
		{http.MethodPut, "/t/Subscriptions/s/Rules/r", "Authorization failed for specified action: Manage,EntityWrite.", ""},
		{http.MethodDelete, "/t/Subscriptions/s/Rules/$Default", "Authorization failed for specified action: Manage,EntityDelete.", ""},
		{http.MethodGet, "/t/Subscriptions/s", "", "GetSubscription"},
		{http.MethodGet, "/t/Subscriptions/nope", "", "GetSubscription"},
		{http.MethodGet, "/t/Subscriptions", "", "EnumerateSubscriptions"},
		{http.MethodPut, "/t/Subscriptions/s2", "", "CreateOrUpdateSubscription"},
		{http.MethodDelete, "/t/Subscriptions/s", "", "DeleteSubscription"},
	}
	for _, tc := range tests {
		for _, key := range []string{"sender", "listener"} {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, b.url+tc.path, strings.NewReader("<entry/>"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", b.token(b.url+tc.path, key))
			resp, err := b.http.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			what := key + ": " + tc.method + " " + tc.path
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: status %d; want 401\n%s", what, resp.StatusCode, body)
				continue
			}
			want := tc.detail
			if tc.phrase != "" {
				want = "SubCode=40100: Unauthorized : Unauthorized access for '" + tc.phrase + "' operation on endpoint 'sb://" +
					b.host + strings.ToLower(tc.path) + "'."
				if resp.Status != "401 "+want {
					t.Errorf("%s: status line %q; want %q", what, resp.Status, "401 "+want)
				}
			}
			if !strings.Contains(string(body), "<Detail>"+want+" TrackingId:") {
				t.Errorf("%s: body %s; want the detail %q", what, body, want)
			}
		}
	}
	// A queue or topic that does not exist is answered with the "Publicly Listed Services" feed,
	// as for any key.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.url+"/missing", nil)
	req.Header.Set("Authorization", b.token(b.url+"/missing", "listener"))
	resp, err := b.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Publicly Listed Services") {
		t.Errorf("GET /missing with a Listen key: %d %s; want 200 and the feed", resp.StatusCode, body)
	}
	// Nothing was created or deleted.
	b.do(t, call{method: http.MethodGet, path: "/t/Subscriptions/s"}).want(t, "subscription still there", http.StatusOK)
	b.do(t, call{method: http.MethodGet, path: "/q"}).want(t, "queue still there", http.StatusOK)
}
