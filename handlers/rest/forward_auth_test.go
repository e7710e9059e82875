package rest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/sas"
)

// TestForwardingNeedsRightsOnTheTarget: a token's scope limits what it may name as a forwarding
// target, whatever key signed it; a supplementary token must be scoped to the target; and a
// refusal reads the same whether the target exists or not.
func TestForwardingNeedsRightsOnTheTarget(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "c", "")
	b.createQueue(t, "b", "")
	b.createQueue(t, "guarded", authorizationRule("fw", "fw-key", "fw-key-2", "Send"))
	now := b.clock.Now()
	sign := func(sr, key, secret string) string { return sas.Sign(sr, key, secret, now.Add(time.Hour)) }
	scopedTo := func(path string) string { return sign(b.url+"/"+path, "root", "key") } // the namespace key, scoped
	const supplementary = "ServiceBusSupplementaryAuthorization"
	put := func(what, path, description string, header map[string]string) result {
		t.Helper()
		return b.do(t, call{method: http.MethodPut, path: "/" + path, body: entryXML(description), header: header, key: "-"})
	}
	update := map[string]string{"If-Match": "*"}
	with := func(h map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range h {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	for _, tc := range []struct {
		name, path, description string
		header                  map[string]string
	}{
		{"update c to forward to b with a token scoped to c", "c", "<ForwardTo>b</ForwardTo>", with(update, "Authorization", scopedTo("c"))},
		{"forward dead letters of c to b", "c", "<ForwardDeadLetteredMessagesTo>b</ForwardDeadLetteredMessagesTo>", with(update, "Authorization", scopedTo("c"))},
		{"create d forwarding to b with a token scoped to d", "d", "<ForwardTo>b</ForwardTo>", map[string]string{"Authorization": scopedTo("d")}},
		{"a supplementary token scoped to c, for b", "c", "<ForwardTo>b</ForwardTo>",
			with(update, "Authorization", scopedTo("c"), supplementary, sign(b.url+"/c", "sender", "k2"))},
		{"a supplementary token naming c raw, for b", "d", "<ForwardTo>b</ForwardTo>",
			map[string]string{"Authorization": scopedTo("d"), supplementary: sign("c", "sender", "k2")}},
		{"a supplementary token scoped to a prefix-named entity", "d", "<ForwardTo>b</ForwardTo>",
			map[string]string{"Authorization": scopedTo("d"), supplementary: sign("sb://ns/bb", "sender", "k2")}},
	} {
		put(tc.name, tc.path, tc.description, tc.header).wantError(t, tc.name, http.StatusUnauthorized, "SupplementaryAuthorization")
	}
	b.send(t, "c", "stays", nil)
	if c := b.counts(t, "c"); c.Active != 1 {
		t.Errorf("counts of c = %+v; want the message kept in c, nothing forwarded", c)
	}
	if c := b.counts(t, "b"); c.Total() != 0 {
		t.Errorf("counts of b = %+v; want nothing", c)
	}

	// Refusals do not tell which entities exist.
	detail := func(what, target string, header map[string]string) string {
		t.Helper()
		e := put(what, "d", "<ForwardTo>"+target+"</ForwardTo>", header).wantError(t, what, http.StatusUnauthorized, "")
		return strings.ReplaceAll(trackingRE.ReplaceAllString(e.Detail, ""), target, "TARGET")
	}
	for _, tc := range []struct {
		name   string
		header func(target string) map[string]string
	}{
		{"no supplementary token", func(string) map[string]string { return map[string]string{"Authorization": scopedTo("d")} }},
		{"a supplementary token for another entity", func(string) map[string]string {
			return map[string]string{"Authorization": scopedTo("d"), supplementary: sign("c", "sender", "k2")}
		}},
		{"a supplementary token signed with a target key name", func(target string) map[string]string {
			return map[string]string{"Authorization": scopedTo("d"), supplementary: sign(target, "fw", "guess")}
		}},
	} {
		exists, missing := detail(tc.name+", target exists", "guarded", tc.header("guarded")), detail(tc.name+", target missing", "nowhere", tc.header("nowhere"))
		if exists != missing {
			t.Errorf("%s: 401 for an existing target %q, for a missing one %q; want the same", tc.name, exists, missing)
		}
	}

	// What proves the right: a supplementary token scoped to the target (any client's form), or a
	// namespace-wide token of the namespace's owner.
	put("supplementary scoped to b", "d1", "<ForwardTo>b</ForwardTo>",
		map[string]string{"Authorization": scopedTo("d1"), supplementary: sign("sb://ns.servicebus.windows.net/b", "sender", "k2")}).want(t, "Python form", http.StatusCreated)
	put("supplementary naming b raw", "d2", "<ForwardTo>b</ForwardTo>",
		map[string]string{"Authorization": scopedTo("d2"), supplementary: sign("b", "sender", "k2")}).want(t, "Go form", http.StatusCreated)
	put("supplementary for the host", "d3", "<ForwardTo>sb://"+b.host+"/b</ForwardTo>",
		map[string]string{"Authorization": scopedTo("d3"), supplementary: sign(b.host, "sender", "k2")}).want(t, "JS form", http.StatusCreated)
	put("the target's own key", "d4", "<ForwardTo>guarded</ForwardTo>",
		map[string]string{"Authorization": scopedTo("d4"), supplementary: sign("guarded", "fw", "fw-key")}).want(t, "target key", http.StatusCreated)
	put("namespace-wide owner", "d5", "<ForwardTo>b</ForwardTo>",
		map[string]string{"Authorization": sign(b.url+"/", "root", "key")}).want(t, "namespace-wide", http.StatusCreated)
	// The owner may learn that a target is missing.
	put("namespace-wide owner, missing target", "d6", "<ForwardTo>nowhere</ForwardTo>",
		map[string]string{"Authorization": sign(b.url+"/", "root", "key")}).wantError(t, "missing target", http.StatusBadRequest, "SubCode=40400")
}
