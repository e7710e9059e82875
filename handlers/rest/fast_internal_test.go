package rest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/sbgate/sbgate/api"
)

// boundCall records the arguments an operation's handler was called with.
type boundCall struct {
	Op, Entity, MessageID string
	Token                 openapi_types.UUID
	Params                any
}

// bindRecorder is a server that records its calls; the generated wrapper's refusals are recorded
// too.
type bindRecorder struct {
	api.Unimplemented
	calls []boundCall
}

func (rc *bindRecorder) SendMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.SendMessageParams) {
	rc.calls = append(rc.calls, boundCall{Op: "SendMessage", Entity: entityPath, Params: params})
}

func (rc *bindRecorder) PeekLockMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.PeekLockMessageParams) {
	rc.calls = append(rc.calls, boundCall{Op: "PeekLockMessage", Entity: entityPath, Params: params})
}

func (rc *bindRecorder) CompleteMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.CompleteMessageParams) {
	rc.calls = append(rc.calls, boundCall{Op: "CompleteMessage", Entity: entityPath, MessageID: messageID, Token: lockToken, Params: params})
}

// TestFastBindersBindAsTheWrapper: for every request a fast binder takes, it calls the handler
// with the arguments the generated wrapper would; the requests it leaves to the wrapper are
// those whose parameters are not plain.
func TestFastBindersBindAsTheWrapper(t *testing.T) {
	const tok = "acccce0e-7596-4e0c-b216-2d18638ac0dd"
	tests := []struct {
		method, target string
		header         http.Header
		fast           bool // the fast binder takes it
	}{
		{"POST", "/q/messages", nil, true},
		{"POST", "/q/messages?api-version=2015-01", nil, true},
		{"POST", "/q/messages?api-version=2015-01&other=x", nil, true},
		{"POST", "/q/messages?api-version=a&api-version=b", nil, false},
		{"POST", "/a/b/c/Messages", http.Header{"Brokerproperties": {`{"Label":"x"}`}}, true},
		{"POST", "/a%2Fb/messages", http.Header{"Brokerproperties": {`{}`, `{}`}}, false},
		{"POST", "/t/Subscriptions/s/messages", nil, true},
		{"POST", "/caf%C3%A9/messages?api-version=x%20y", nil, true},
		{"POST", "/q/messages?%zz", nil, false},
		{"POST", "/q/messages/head", nil, true},
		{"POST", "/q/messages/head?timeout=0", nil, true},
		{"POST", "/q/messages/head?timeout=60&api-version=2015-01", nil, true},
		{"POST", "/q/$DeadLetterQueue/messages/head?timeout=5", nil, true},
		{"POST", "/q/messages/head?timeout=-1", nil, false},
		{"POST", "/q/messages/head?timeout=+5", nil, false},
		{"POST", "/q/messages/head?timeout=", nil, false},
		{"POST", "/q/messages/head?timeout=1&timeout=2", nil, false},
		{"POST", "/q/messages/head?timeout=99999999999", nil, false},
		{"POST", "/q/messages/head?timeout=x", nil, false},
		{"DELETE", "/q/messages/12/" + tok, nil, true},
		{"DELETE", "/q/messages/12/" + strings.ToUpper(tok) + "?api-version=1", nil, true},
		{"DELETE", "/q/messages/my%2Fid%20x/" + tok, nil, true},
		{"DELETE", "/Q/MESSAGES/12/" + tok, nil, true},
		{"DELETE", "/q/messages/12/" + strings.ReplaceAll(tok, "-", ""), nil, false},
		{"DELETE", "/q/messages/12/{" + tok + "}", nil, false},
		{"DELETE", "/q/messages/12/not-a-token", nil, false},
		{"DELETE", "/q/$DeadLetterQueue/messages/12/" + tok, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			req := func() (*http.Request, route) {
				r := httptest.NewRequest(tc.method, tc.target, nil)
				for k, v := range tc.header {
					r.Header[k] = v
				}
				rt, ok := testRoutes.route(r.Method, r.URL.EscapedPath())
				if !ok {
					t.Fatalf("not routed")
				}
				u := *r.URL
				u.RawPath = rt.canonical
				if p, err := pathUnescape(rt.canonical); err == nil {
					u.Path = p
				}
				r.URL = &u
				return r, rt
			}
			var wrapped bindRecorder
			mux := chi.NewRouter()
			api.HandlerWithOptions(&wrapped, api.ChiServerOptions{BaseRouter: mux, ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
				wrapped.calls = append(wrapped.calls, boundCall{Op: "refused", Params: err.Error()})
			}})
			r, _ := req()
			mux.ServeHTTP(httptest.NewRecorder(), r)

			var fast bindRecorder
			r, rt := req()
			bind := fastBinders[rt.op.id]
			if bind == nil {
				t.Fatalf("operation %s has no fast binder", rt.op.id)
			}
			took := bind(&fast, httptest.NewRecorder(), r, strings.Split(strings.TrimPrefix(r.URL.RawPath, "/"), "/"))
			if took != tc.fast {
				t.Fatalf("fast binder took it: %v; want %v (the wrapper: %+v)", took, tc.fast, wrapped.calls)
			}
			if !took {
				return
			}
			if diff := cmp.Diff(wrapped.calls, fast.calls); diff != "" {
				t.Errorf("handler calls differ (-wrapper +fast):\n%s", diff)
			}
			if len(fast.calls) != 1 || fast.calls[0].Op == "refused" {
				t.Errorf("calls %+v; want one call of the handler", fast.calls)
			}
		})
	}
	for op := range fastBinders {
		if _, ok := testRoutes.ops[fmt.Sprintf("%s %s", map[string]string{"SendMessage": "POST", "PeekLockMessage": "POST", "CompleteMessage": "DELETE"}[op],
			map[string]string{"SendMessage": "/{entityPath}/messages", "PeekLockMessage": "/{entityPath}/messages/head",
				"CompleteMessage": "/{entityPath}/messages/{messageId}/{lockToken}"}[op])]; !ok {
			t.Errorf("fast binder %s names no operation of openapi.yaml at the path it binds", op)
		}
	}
}
