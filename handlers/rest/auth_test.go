package rest_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/sas"
)

// azureSBToken signs like azure-sb: sig first, the sr the lower-cased encodeURIComponent of the
// full request URL (query included), lower-case escapes in sig.
func azureSBToken(fullURL, keyName, key string, expiry time.Time) string {
	sr := strings.ToLower(url.QueryEscape(fullURL))
	se := strconv.FormatInt(expiry.Unix(), 10)
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(sr + "\n" + se))
	sig := lowerEscapes(url.QueryEscape(base64.StdEncoding.EncodeToString(m.Sum(nil))))
	return "SharedAccessSignature sig=" + sig + "&se=" + se + "&skn=" + keyName + "&sr=" + sr
}

// lowerEscapes writes percent escapes in lower case ("%2b"), as azure-sb does.
func lowerEscapes(s string) string {
	return regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(s, strings.ToLower)
}

func TestAuthFailures(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.createQueue(t, "q2", "")
	b.send(t, "q", "x", nil)
	base := "http://" + b.host
	now := b.clock.Now()
	tests := []struct {
		name   string
		method string
		path   string
		auth   map[string]string
		detail string
	}{
		{"no token", http.MethodPost, "/q/messages", nil, "MissingToken: The authorization header was not found."},
		{"empty header", http.MethodPost, "/q/messages", map[string]string{"Authorization": ""}, "MissingToken"},
		{"bearer", http.MethodPost, "/q/messages", map[string]string{"Authorization": "Bearer eyJhbGciOi.x.y"}, "UnsupportedToken"},
		{"other scheme", http.MethodPost, "/q/messages", map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, "MalformedToken"},
		{"malformed", http.MethodPost, "/q/messages", map[string]string{"Authorization": "SharedAccessSignature sr=x&sig=y"}, "MalformedToken"},
		{"no parameters", http.MethodPost, "/q/messages", map[string]string{"Authorization": "SharedAccessSignature"}, "MalformedToken"},
		{"wrong signature", http.MethodPost, "/q/messages",
			map[string]string{"Authorization": sas.Sign(base+"/q", "root", "not-the-key", now.Add(time.Hour))}, "InvalidSignature: The token has an invalid signature."},
		{"unknown key name", http.MethodPost, "/q/messages",
			map[string]string{"Authorization": sas.Sign(base+"/q", "nobody", "key", now.Add(time.Hour))}, "InvalidSignature"},
		{"key name in another casing", http.MethodPost, "/q/messages",
			map[string]string{"Authorization": sas.Sign(base+"/q", "ROOT", "key", now.Add(time.Hour))}, "InvalidSignature"},
		{"expired beyond the skew", http.MethodPost, "/q/messages",
			map[string]string{"Authorization": sas.Sign(base+"/q", "root", "key", now.Add(-5*time.Minute-time.Second))}, "ExpiredToken: The token is expired."},
		{"scoped to another queue", http.MethodPost, "/q/messages",
			map[string]string{"Authorization": sas.Sign(base+"/q2", "root", "key", now.Add(time.Hour))}, "InvalidAudience"},
		{"scoped to a longer name", http.MethodPost, "/q/messages/head",
			map[string]string{"Authorization": sas.Sign(base+"/q2/messages/head", "root", "key", now.Add(time.Hour))}, "InvalidAudience"},
		{"scope not a segment prefix", http.MethodDelete, "/q2",
			map[string]string{"Authorization": sas.Sign(base+"/q", "root", "key", now.Add(time.Hour))}, "InvalidAudience"},
		{"scoped to the queue, asking for the list", http.MethodGet, "/$Resources/Queues",
			map[string]string{"Authorization": sas.Sign(base+"/q", "root", "key", now.Add(time.Hour))}, "InvalidAudience"},
		{"send key receiving", http.MethodPost, "/q/messages/head?timeout=0",
			map[string]string{"Authorization": sas.Sign(base+"/q", "sender", "k2", now.Add(time.Hour))},
			"Unauthorized access. 'Listen' claim(s) are required to perform this operation. Resource: 'sb://" + b.host + "/q/messages/head'."},
		{"send key receive-and-delete", http.MethodDelete, "/q/messages/head?timeout=0",
			map[string]string{"Authorization": sas.Sign(base+"/q", "sender", "k2", now.Add(time.Hour))}, "'Listen' claim(s) are required"},
		{"send key settling", http.MethodDelete, "/q/messages/1/00000000-0000-0000-0000-000000000000",
			map[string]string{"Authorization": sas.Sign(base+"/q", "sender", "k2", now.Add(time.Hour))}, "'Listen' claim(s) are required"},
		{"send key getting", http.MethodGet, "/q",
			map[string]string{"Authorization": sas.Sign(base+"/q", "sender", "k2", now.Add(time.Hour))}, "Manage,EntityRead claims required for this operation."},
		{"send key creating", http.MethodPut, "/q3",
			map[string]string{"Authorization": sas.Sign(base+"/", "sender", "k2", now.Add(time.Hour))}, "Authorization failed for specified action: Manage,EntityWrite."},
		{"listen key listing", http.MethodGet, "/$Resources/Queues",
			map[string]string{"Authorization": sas.Sign(base+"/", "listener", "k3", now.Add(time.Hour))}, "Manage,EntityRead claims required for this operation."},
		{"listen key deleting", http.MethodDelete, "/q",
			map[string]string{"Authorization": sas.Sign(base+"/", "listener", "k3", now.Add(time.Hour))}, "Authorization failed for specified action: Manage,EntityDelete."},
		{"listen key sending", http.MethodPost, "/q/messages",
			map[string]string{"Authorization": sas.Sign(base+"/q", "listener", "k3", now.Add(time.Hour))}, "'Send' claim(s) are required"},
		{"valid token in the wrong header", http.MethodPost, "/q/messages",
			map[string]string{"X-Authorization": sas.Sign(base+"/q", "root", "key", now.Add(time.Hour))}, "MissingToken"},
	}
	for _, tc := range tests {
		r := b.do(t, call{method: tc.method, path: tc.path, body: "never stored", header: tc.auth, key: "-"})
		r.wantError(t, tc.name+": "+tc.method+" "+tc.path, http.StatusUnauthorized, tc.detail)
	}
	// No failed request sent, received or deleted anything.
	if c := b.counts(t, "q"); c.Active != 1 {
		t.Errorf("counts of q after the refused requests = %+v; want the one message sent before", c)
	}
	if c := b.counts(t, "q2"); c.Total() != 0 {
		t.Errorf("counts of q2 after the refused requests = %+v; want none", c)
	}
}

func TestAuthAccepted(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.createQueue(t, "a/b", "")
	base := "http://" + b.host
	now := b.clock.Now()
	tests := []struct {
		name   string
		method string
		path   string
		auth   map[string]string
		status int
	}{
		{"namespace-wide", http.MethodPost, "/q/messages", map[string]string{"Authorization": sas.Sign(base+"/", "sender", "k2", now.Add(time.Hour))}, http.StatusCreated},
		{"host only, sb scheme", http.MethodPost, "/q/messages", map[string]string{"Authorization": sas.Sign("sb://ns.servicebus.windows.net/", "sender", "k2", now.Add(time.Hour))}, http.StatusCreated},
		{"entity scope covers messages", http.MethodPost, "/q/messages", map[string]string{"Authorization": sas.Sign(base+"/q", "sender", "k2", now.Add(time.Hour))}, http.StatusCreated},
		{"entity scope covers head", http.MethodPost, "/q/messages/head?timeout=0", map[string]string{"Authorization": sas.Sign(base+"/q", "listener", "k3", now.Add(time.Hour))}, http.StatusCreated},
		{"scope in another casing, other host and scheme", http.MethodPost, "/Q/Messages", map[string]string{"Authorization": sas.Sign("https://other:443/q", "sender", "k2", now.Add(time.Hour))}, http.StatusCreated},
		{"multi-segment scope", http.MethodPost, "/a/b/messages", map[string]string{"Authorization": sas.Sign(base+"/a/b", "sender", "k2", now.Add(time.Hour))}, http.StatusCreated},
		{"multi-segment prefix scope", http.MethodPost, "/a%2Fb/messages", map[string]string{"Authorization": sas.Sign(base+"/a", "sender", "k2", now.Add(time.Hour))}, http.StatusCreated},
		{"manage can send", http.MethodPost, "/q/messages", map[string]string{"Authorization": sas.Sign(base+"/q", "root", "key", now.Add(time.Hour))}, http.StatusCreated},
		{"manage can receive", http.MethodDelete, "/q/messages/head?timeout=0", map[string]string{"Authorization": sas.Sign(base+"/q", "root", "key", now.Add(time.Hour))}, http.StatusOK},
		{"manage can list", http.MethodGet, "/$Resources/Queues", map[string]string{"Authorization": sas.Sign(base+"/", "root", "key", now.Add(time.Hour))}, http.StatusOK},
		{"JS signs the escaped list URL", http.MethodGet, "/$Resources/Queues?%24top=2",
			map[string]string{"Authorization": sas.Sign(base+"/%24resources/queues?api-version=2021-05&%2524top=2", "root", "key", now.Add(time.Hour))}, http.StatusOK},
		{"secondary key", http.MethodGet, "/q", map[string]string{"Authorization": sas.Sign(base+"/q", "rotated", "k4", now.Add(time.Hour))}, http.StatusOK},
		{"primary key of a rotated policy", http.MethodGet, "/q", map[string]string{"Authorization": sas.Sign(base+"/q", "rotated", "old-primary", now.Add(time.Hour))}, http.StatusOK},
		{"expired within the skew", http.MethodGet, "/q", map[string]string{"Authorization": sas.Sign(base+"/q", "root", "key", now.Add(-4*time.Minute))}, http.StatusOK},
		{"ServiceBusAuthorization", http.MethodGet, "/q", map[string]string{"ServiceBusAuthorization": sas.Sign(base+"/q", "root", "key", now.Add(time.Hour))}, http.StatusOK},
		{"ServiceBusAuthorization beside a proxy's Authorization", http.MethodGet, "/q",
			map[string]string{"Authorization": "Basic dXNlcjpwYXNz", "ServiceBusAuthorization": sas.Sign(base+"/q", "root", "key", now.Add(time.Hour))}, http.StatusOK},
		{"azure-sb token over the full URL", http.MethodPost, "/q/Messages?api-version=2016-07",
			map[string]string{"Authorization": azureSBToken(base+"/q/Messages?api-version=2016-07", "sender", "k2", now.Add(5*time.Minute))}, http.StatusCreated},
		{"azure-sb token, lower-case header name", http.MethodPost, "/q/messages?api-version=2016-07",
			map[string]string{"authorization": azureSBToken(base+"/q/messages?api-version=2016-07", "sender", "k2", now.Add(5*time.Minute))}, http.StatusCreated},
		{"lower-case scheme", http.MethodGet, "/q", map[string]string{"Authorization": "sharedaccesssignature " + strings.TrimPrefix(sas.Sign(base+"/q", "root", "key", now.Add(time.Hour)), "SharedAccessSignature ")}, http.StatusOK},
		{"healthz needs none", http.MethodGet, "/healthz", nil, http.StatusOK},
		{"readyz needs none", http.MethodGet, "/readyz", nil, http.StatusOK},
		{"healthz ignores a bad one", http.MethodGet, "/healthz", map[string]string{"Authorization": "Bearer x"}, http.StatusOK},
	}
	for _, tc := range tests {
		body := ""
		if tc.method == http.MethodPost && strings.HasSuffix(strings.ToLower(strings.SplitN(tc.path, "?", 2)[0]), "/messages") {
			body = "m"
		}
		b.do(t, call{method: tc.method, path: tc.path, body: body, header: tc.auth, key: "-"}).
			want(t, tc.name+": "+tc.method+" "+tc.path, tc.status)
	}

	r := b.do(t, call{method: http.MethodGet, path: "/healthz", key: "-"}).want(t, "GET /healthz", http.StatusOK)
	if r.body != "ok\n" || r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("GET /healthz = %q, %q; want %q, %q", r.header.Get("Content-Type"), r.body, "text/plain; charset=utf-8", "ok\n")
	}
	r = b.do(t, call{method: http.MethodGet, path: "/readyz", key: "-"}).want(t, "GET /readyz", http.StatusOK)
	if r.body != "ready\n" {
		t.Errorf("GET /readyz = %q; want %q", r.body, "ready\n")
	}
}

// TestTokenExpiresWithTheClock moves the server's clock past a token's expiry plus the skew.
func TestTokenExpiresWithTheClock(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	tok := sas.Sign("http://"+b.host+"/q", "root", "key", b.clock.Now().Add(time.Minute))
	get := call{method: http.MethodGet, path: "/q", key: "-", header: map[string]string{"Authorization": tok}}
	b.do(t, get).want(t, "GET /q with a fresh token", http.StatusOK)
	b.clock.Advance(6 * time.Minute) // expiry + 5 minutes of skew is 12:06:00
	b.do(t, get).want(t, "GET /q at the end of the skew", http.StatusOK)
	b.clock.Advance(time.Second)
	b.do(t, get).wantError(t, "GET /q past the skew", http.StatusUnauthorized, "ExpiredToken")
}

// TestUnauthorizedTextHidesKeyNames: a 401 must not tell a caller whether a key of a given name
// exists, on the namespace or on an entity, nor whether the entity exists: a token with an
// unknown key name reads exactly like one with a known name and a wrong signature.
func TestUnauthorizedTextHidesKeyNames(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "secured", authorizationRule("app", "app-primary", "app-secondary", "Send"))
	now := b.clock.Now()
	detail := func(what, path, keyName string) string {
		t.Helper()
		tok := sas.Sign(b.url+path, keyName, "wrong", now.Add(time.Hour))
		e := b.do(t, call{method: http.MethodPost, path: path, body: "x", key: "-", header: map[string]string{"Authorization": tok}}).
			wantError(t, what, http.StatusUnauthorized, "InvalidSignature")
		return trackingRE.ReplaceAllString(e.Detail, "")
	}
	want := detail("namespace key name, wrong key", "/secured/messages", "root")
	for _, tc := range []struct{ what, path, keyName string }{
		{"unknown key name", "/secured/messages", "nobody"},
		{"entity key name, wrong key", "/secured/messages", "app"},
		{"entity key name on a missing entity", "/missing/messages", "app"},
		{"unknown key name on a missing entity", "/missing/messages", "nobody"},
	} {
		if got := detail(tc.what, tc.path, tc.keyName); got != want {
			t.Errorf("%s: 401 detail %q; want the same text as for a wrong signature, %q", tc.what, got, want)
		}
	}
}
