package rest

import (
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/sbgate/sbgate/api"
)

func TestClassify(t *testing.T) {
	const tok = "acccce0e-7596-4e0c-b216-2d18638ac0dd"
	tests := []struct {
		method, path string
		ok           bool
		op           string
		entity       string
		canonical    string
		scope        string
	}{
		{"GET", "/healthz", true, "Healthz", "", "/healthz", "healthz"},
		{"GET", "/readyz/", true, "Readyz", "", "/readyz", "readyz"},
		{"POST", "/healthz", false, "unknown", "healthz", "/healthz", "healthz"},
		{"PUT", "/healthz", true, "PutEntity", "healthz", "/healthz", "healthz"},
		{"GET", "/Healthz", true, "GetEntity", "Healthz", "/Healthz", "healthz"},

		{"GET", "/$namespaceinfo", true, "GetNamespaceInfo", "", "/$namespaceinfo", "$namespaceinfo"},
		{"GET", "/$NamespaceInfo", true, "GetNamespaceInfo", "", "/$namespaceinfo", "$namespaceinfo"},
		{"GET", "/%24namespaceinfo", true, "GetNamespaceInfo", "", "/$namespaceinfo", "$namespaceinfo"},
		{"PUT", "/$namespaceinfo", false, "GetNamespaceInfo", "", "/$namespaceinfo", "$namespaceinfo"},

		{"GET", "/$Resources/Queues", true, "ListQueues", "", "/$Resources/Queues", "$resources/queues"},
		{"GET", "/$resources/queues/", true, "ListQueues", "", "/$Resources/Queues", "$resources/queues"},
		{"GET", "/%24Resources/QUEUES", true, "ListQueues", "", "/$Resources/Queues", "$resources/queues"},
		{"DELETE", "/$Resources/Queues", false, "ListQueues", "", "/$Resources/Queues", "$resources/queues"},
		// Topics are not served: the path is looked up as an entity and not found.
		{"GET", "/$Resources/Topics", true, "ListTopics", "", "/$Resources/Topics", "$resources/topics"},

		{"PUT", "/q", true, "PutEntity", "q", "/q", "q"},
		{"PUT", "/q/", true, "PutEntity", "q", "/q", "q"},
		{"GET", "/Q", true, "GetEntity", "Q", "/Q", "q"},
		{"DELETE", "/a/b/c", true, "DeleteEntity", "a/b/c", "/a%2Fb%2Fc", "a/b/c"},
		{"GET", "/a%2Fb%2Fc", true, "GetEntity", "a/b/c", "/a%2Fb%2Fc", "a/b/c"},
		{"GET", "/a%2fb//c/", true, "GetEntity", "a/b/c", "/a%2Fb%2Fc", "a/b/c"},
		{"GET", "/t/Subscriptions/s", true, "GetSubscription", "t/Subscriptions/s", "/t/Subscriptions/s", "t/subscriptions/s"},
		{"GET", "/a/b/subscriptions/", true, "ListSubscriptions", "a/b", "/a%2Fb/Subscriptions", "a/b/subscriptions"},
		{"PUT", "/t/Subscriptions/s/rules/r1", true, "PutRule", "t/Subscriptions/s", "/t/Subscriptions/s/Rules/r1", "t/subscriptions/s/rules/r1"},
		{"GET", "/t/Subscriptions/s/Rules/", true, "ListRules", "t/Subscriptions/s", "/t/Subscriptions/s/Rules", "t/subscriptions/s/rules"},
		{"PUT", "/t/Subscriptions/s/Rules/", true, "PutRuleNamedInBody", "t/Subscriptions/s", "/t/Subscriptions/s/Rules", "t/subscriptions/s/rules"},
		{"POST", "/t/Subscriptions/s/messages/head", true, "PeekLockMessage", "t/Subscriptions/s", "/t%2FSubscriptions%2Fs/messages/head", "t/subscriptions/s/messages/head"},
		{"POST", "/q/sessions/$accept", true, "AcceptNextSession", "q", "/q/sessions/$accept", "q/sessions/$accept"},
		{"POST", "/q/Sessions/a%2Fb/$accept", true, "AcceptSession", "q", "/q/sessions/a%2Fb/$accept", "q/sessions/a/b/$accept"},
		{"DELETE", "/q/sessions/s1/" + tok, true, "ReleaseSession", "q", "/q/sessions/s1/" + tok, "q/sessions/s1/" + tok},
		{"PUT", "/q/sessions/s1/" + tok + "/State", true, "SetSessionState", "q", "/q/sessions/s1/" + tok + "/state", "q/sessions/s1/" + tok + "/state"},
		{"POST", "/t/Subscriptions/s/sessions/s1/" + tok + "/messages/head", true, "SessionPeekLock", "t/Subscriptions/s", "/t%2FSubscriptions%2Fs/sessions/s1/" + tok + "/messages/head", "t/subscriptions/s/sessions/s1/" + tok + "/messages/head"},
		{"DELETE", "/q/sessions/s1/" + tok + "/messages/7/" + tok, true, "SessionComplete", "q", "/q/sessions/s1/" + tok + "/messages/7/" + tok, "q/sessions/s1/" + tok + "/messages/7/" + tok},
		// The session "" has an empty segment, which routing keeps; the scope has it empty too.
		{"POST", "/q/Sessions//" + tok + "/messages/head", true, "SessionPeekLock", "q", "/q/sessions/%00/" + tok + "/messages/head", "q/sessions//" + tok + "/messages/head"},
		{"POST", "/q/sessions//$accept", true, "AcceptSession", "q", "/q/sessions/%00/$accept", "q/sessions//$accept"},
		{"GET", "/q/sessions", true, "ListSessions", "q", "/q/sessions", "q/sessions"},
		{"POST", "/q", false, "unknown", "q", "/q", "q"},
		{"PATCH", "/q", false, "unknown", "q", "/q", "q"},
		{"GET", "/a%20b", true, "GetEntity", "a b", "/a%20b", "a b"},
		{"GET", "/a%3Fb", true, "GetEntity", "a?b", "/a%3Fb", "a?b"},

		{"POST", "/q/messages", true, "SendMessage", "q", "/q/messages", "q/messages"},
		{"POST", "/Q/Messages/", true, "SendMessage", "Q", "/Q/messages", "q/messages"},
		{"POST", "/a/b/messages", true, "SendMessage", "a/b", "/a%2Fb/messages", "a/b/messages"},
		{"POST", "/a%2Fb%2Fmessages", true, "SendMessage", "a/b", "/a%2Fb/messages", "a/b/messages"},
		{"GET", "/q/messages", false, "SendMessage", "q", "/q/messages", "q/messages"},
		{"POST", "/q/$DeadLetterQueue/messages", true, "SendMessage", "q/$DeadLetterQueue", "/q%2F$DeadLetterQueue/messages", "q/$deadletterqueue/messages"},
		{"POST", "/messages", false, "unknown", "messages", "/messages", "messages"},

		{"POST", "/q/messages/head", true, "PeekLockMessage", "q", "/q/messages/head", "q/messages/head"},
		{"DELETE", "/q/Messages/Head", true, "ReceiveAndDeleteMessage", "q", "/q/messages/head", "q/messages/head"},
		{"POST", "/Q/MESSAGES/HEAD/", true, "PeekLockMessage", "Q", "/Q/messages/head", "q/messages/head"},
		{"PUT", "/q/messages/head", false, "unknown", "q", "/q/messages/head", "q/messages/head"},
		{"GET", "/q/messages/head", false, "unknown", "q", "/q/messages/head", "q/messages/head"},
		{"POST", "/a/b/c/messages/head", true, "PeekLockMessage", "a/b/c", "/a%2Fb%2Fc/messages/head", "a/b/c/messages/head"},
		{"POST", "/q/$DeadLetterQueue/messages/head", true, "PeekLockMessage", "q/$DeadLetterQueue", "/q%2F$DeadLetterQueue/messages/head", "q/$deadletterqueue/messages/head"},
		{"DELETE", "/t/subscriptions/s/$deadletterqueue/Messages/Head", true, "ReceiveAndDeleteMessage", "t/subscriptions/s/$deadletterqueue",
			"/t%2Fsubscriptions%2Fs%2F$deadletterqueue/messages/head", "t/subscriptions/s/$deadletterqueue/messages/head"},
		{"POST", "/messages/head", false, "unknown", "messages/head", "/messages%2Fhead", "messages/head"},

		{"DELETE", "/q/messages/1/" + tok, true, "CompleteMessage", "q", "/q/messages/1/" + tok, "q/messages/1/" + tok},
		{"PUT", "/q/Messages/1/" + tok, true, "UnlockMessage", "q", "/q/messages/1/" + tok, "q/messages/1/" + tok},
		{"POST", "/a/b/messages/1/" + tok + "/", true, "RenewLock", "a/b", "/a%2Fb/messages/1/" + tok, "a/b/messages/1/" + tok},
		{"DELETE", "/q/messages/my%20id/" + tok, true, "CompleteMessage", "q", "/q/messages/my%20id/" + tok, "q/messages/my id/" + tok},
		{"DELETE", "/q/$DeadLetterQueue/messages/7/" + tok, true, "CompleteMessage", "q/$DeadLetterQueue", "/q%2F$DeadLetterQueue/messages/7/" + tok,
			"q/$deadletterqueue/messages/7/" + tok},
		// "head" as a message id: the last two segments decide.
		{"DELETE", "/q/messages/head/" + tok, true, "CompleteMessage", "q", "/q/messages/head/" + tok, "q/messages/head/" + tok},
		{"GET", "/q/messages/1/" + tok, false, "unknown", "q", "/q/messages/1/" + tok, "q/messages/1/" + tok},
		{"PATCH", "/q/messages/1/" + tok, false, "unknown", "q", "/q/messages/1/" + tok, "q/messages/1/" + tok},
		// Three segments after a name that are not head: an entity path (which the store refuses).
		// An entity path ends at its first "messages" segment, so this is no entity at all.
		{"GET", "/q/messages/1", false, "unknown", "", "", ""},
		// Extensions.
		{"DELETE", "/q/messages", true, "PurgeMessages", "q", "/q/messages", "q/messages"},
		{"DELETE", "/q/$DeadLetterQueue/messages", true, "PurgeMessages", "q/$DeadLetterQueue", "/q%2F$DeadLetterQueue/messages", "q/$deadletterqueue/messages"},
		{"GET", "/q/Messages/$Browse", true, "BrowseMessages", "q", "/q/messages/$browse", "q/messages/$browse"},
		{"POST", "/q/messages/$batch", true, "PeekLockBatch", "q", "/q/messages/$batch", "q/messages/$batch"},
		{"DELETE", "/q/messages/%24batch", true, "ReceiveAndDeleteBatch", "q", "/q/messages/$batch", "q/messages/$batch"},
		{"POST", "/q/messages/$deferred/12", true, "PeekLockDeferred", "q", "/q/messages/$deferred/12", "q/messages/$deferred/12"},
		{"DELETE", "/q/messages/$deferred/12", true, "ReceiveAndDeleteDeferred", "q", "/q/messages/$deferred/12", "q/messages/$deferred/12"},
		{"DELETE", "/q/messages/$scheduled/12", true, "CancelScheduled", "q", "/q/messages/$scheduled/12", "q/messages/$scheduled/12"},
		{"POST", "/q/messages/12/" + tok + "/$deadletter", true, "DeadLetterMessage", "q", "/q/messages/12/" + tok + "/$deadletter", "q/messages/12/" + tok + "/$deadletter"},
		{"POST", "/q/messages/12/" + tok + "/$Defer", true, "DeferMessage", "q", "/q/messages/12/" + tok + "/$defer", "q/messages/12/" + tok + "/$defer"},
		{"POST", "/q/$DeadLetterQueue/messages/$resubmit", true, "ResubmitAll", "q/$DeadLetterQueue", "/q%2F$DeadLetterQueue/messages/$resubmit", "q/$deadletterqueue/messages/$resubmit"},
		{"POST", "/q/$DeadLetterQueue/messages/$resubmit/9", true, "ResubmitOne", "q/$DeadLetterQueue", "/q%2F$DeadLetterQueue/messages/$resubmit/9", "q/$deadletterqueue/messages/$resubmit/9"},
		{"GET", "/q/messages/$batch", false, "unknown", "", "", ""},
		{"POST", "/q/messages/$settle", true, "SettleMessages", "q", "/q/messages/$settle", "q/messages/$settle"},
		{"POST", "/q/$deadletterqueue/Messages/$SETTLE", true, "SettleMessages", "q/$deadletterqueue", "/q%2F$deadletterqueue/messages/$settle", "q/$deadletterqueue/messages/$settle"},
		{"DELETE", "/q/messages/$settle", false, "SettleMessages", "q", "/q/messages/$settle", "q/messages/$settle"},
		{"PUT", "/q/messages/$scheduled/12", false, "unknown", "", "", ""},
		// A MessageId with an encoded slash stays one segment.
		{"DELETE", "/q/messages/a%2Fb/" + tok, true, "CompleteMessage", "q", "/q/messages/a%2Fb/" + tok, "q/messages/a/b/" + tok},

		// Invalid paths.
		{"GET", "", false, "unknown", "", "", ""},
		{"GET", "/", false, "unknown", "", "", ""},
		{"GET", "//", false, "unknown", "", "", ""},
		{"GET", "/..", false, "unknown", "", "", ""},
		{"GET", "/q/../x", false, "unknown", "", "", ""},
		{"GET", "/q/./x", false, "unknown", "", "", ""},
		{"GET", "/q/%2e%2E/x", false, "unknown", "", "", ""},
		{"GET", "/q%2F..%2Fx", false, "unknown", "", "", ""},
		{"POST", "/../q/messages", false, "unknown", "", "", ""},
		{"GET", "/q/%zz", false, "unknown", "", "", ""},
		{"GET", "/%", false, "unknown", "", "", ""},
		{"GET", "/q%2", false, "unknown", "", "", ""},
	}
	for _, tc := range tests {
		got, ok := classify(tc.method, tc.path)
		if ok != tc.ok {
			t.Errorf("classify(%q, %q) ok = %t; want %t", tc.method, tc.path, ok, tc.ok)
		}
		if !tc.ok && tc.op == "unknown" && tc.entity == "" {
			continue
		}
		if got.label() != tc.op && tc.ok {
			t.Errorf("classify(%q, %q) op = %v; want %v", tc.method, tc.path, got.label(), tc.op)
		}
		if got.entity != tc.entity || got.canonical != tc.canonical || got.scope != tc.scope {
			t.Errorf("classify(%q, %q) = entity %q, canonical %q, scope %q; want %q, %q, %q", tc.method, tc.path,
				got.entity, got.canonical, got.scope, tc.entity, tc.canonical, tc.scope)
		}
	}
}

func TestRouteRights(t *testing.T) {
	tests := []struct {
		op   string
		want string
	}{
		{"Healthz", "None"}, {"GetNamespaceInfo", "None"},
		{"ListQueues", "Manage"}, {"PutEntity", "Manage"}, {"GetEntity", "Manage"}, {"DeleteEntity", "Manage"},
		{"SendMessage", "Send"},
		{"PeekLockMessage", "Listen"}, {"ReceiveAndDeleteMessage", "Listen"}, {"CompleteMessage", "Listen"}, {"UnlockMessage", "Listen"}, {"RenewLock", "Listen"},
	}
	for _, tc := range tests {
		var found *operation
		for _, o := range testRoutes.ops {
			if o.id == tc.op {
				found = o
			}
		}
		if found == nil {
			t.Errorf("no operation %s", tc.op)
		} else if got := found.right.String(); got != tc.want {
			t.Errorf("%s needs %q; want %q", tc.op, got, tc.want)
		}
	}
	// Health checks need no token, namespace information a valid one of any scope.
	if h := testRoutes.ops["GET /healthz"]; h.token {
		t.Error("/healthz needs a token")
	}
	if n := testRoutes.ops["GET /$namespaceinfo"]; !n.token || !n.anyScope {
		t.Errorf("/$namespaceinfo: token %t, any scope %t; want both", n.token, n.anyScope)
	}
}

// TestEveryOperationDeclaresItsRight: an operation of openapi.yaml without x-sbgate-right
// stops the server from being built (NewServer panics), so none can be served unguarded.
func TestEveryOperationDeclaresItsRight(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	delete(spec.Paths.Find("/{entityPath}/messages").Post.Extensions, "x-sbgate-right")
	if _, err := newRoutes(spec, testMux()); err == nil || !strings.Contains(err.Error(), "SendMessage") {
		t.Fatalf("newRoutes without SendMessage's x-sbgate-right: %v; want an error naming it", err)
	}
	spec.Paths.Find("/{entityPath}/messages").Post.Extensions["x-sbgate-right"] = "send"
	if _, err := newRoutes(spec, testMux()); err == nil {
		t.Fatal("newRoutes accepted x-sbgate-right: send")
	}
}

func testMux() *chi.Mux {
	mux := chi.NewRouter()
	api.HandlerWithOptions(api.Unimplemented{}, api.ChiServerOptions{BaseRouter: mux})
	return mux
}

// testRoutes are the routes NewServer builds.
var testRoutes = func() *routes {
	spec, err := api.GetSpec()
	if err != nil {
		panic(err)
	}
	rs, err := newRoutes(spec, testMux())
	if err != nil {
		panic(err)
	}
	return rs
}()

func classify(method, path string) (route, bool) { return testRoutes.route(method, path) }

func TestSplitSubQueue(t *testing.T) {
	tests := []struct {
		entity, path string
		dlq          bool
	}{
		{"q", "q", false},
		{"q/$DeadLetterQueue", "q", true},
		{"a/b/$deadletterqueue", "a/b", true},
		{"$DeadLetterQueue", "$DeadLetterQueue", false},
		{"/$DeadLetterQueue", "/$DeadLetterQueue", false},
		{"q$DeadLetterQueue", "q$DeadLetterQueue", false},
		{"q/$DeadLetterQueue/x", "q/$DeadLetterQueue/x", false},
	}
	for _, tc := range tests {
		path, _, dlq := splitSubQueue(tc.entity)
		if path != tc.path || dlq != tc.dlq {
			t.Errorf("splitSubQueue(%q) = %q, %t; want %q, %t", tc.entity, path, dlq, tc.path, tc.dlq)
		}
	}
}

// recorder is an api.ServerInterface that records which operation the generated router called
// and with which entity path.
type recorder struct {
	api.Unimplemented
	op     string
	entity string
}

func (r *recorder) Healthz(http.ResponseWriter, *http.Request) { r.op = "Healthz" }
func (r *recorder) Readyz(http.ResponseWriter, *http.Request)  { r.op = "Readyz" }
func (r *recorder) GetNamespaceInfo(http.ResponseWriter, *http.Request, api.GetNamespaceInfoParams) {
	r.op = "GetNamespaceInfo"
}
func (r *recorder) ListQueues(http.ResponseWriter, *http.Request, api.ListQueuesParams) {
	r.op = "ListQueues"
}
func (r *recorder) PutEntity(_ http.ResponseWriter, _ *http.Request, e string, _ api.PutEntityParams) {
	r.op, r.entity = "PutEntity", e
}
func (r *recorder) GetEntity(_ http.ResponseWriter, _ *http.Request, e string, _ api.GetEntityParams) {
	r.op, r.entity = "GetEntity", e
}
func (r *recorder) DeleteEntity(_ http.ResponseWriter, _ *http.Request, e string, _ api.DeleteEntityParams) {
	r.op, r.entity = "DeleteEntity", e
}
func (r *recorder) SendMessage(_ http.ResponseWriter, _ *http.Request, e string, _ api.SendMessageParams) {
	r.op, r.entity = "SendMessage", e
}
func (r *recorder) PeekLockMessage(_ http.ResponseWriter, _ *http.Request, e string, _ api.PeekLockMessageParams) {
	r.op, r.entity = "PeekLockMessage", e
}
func (r *recorder) ReceiveAndDeleteMessage(_ http.ResponseWriter, _ *http.Request, e string, _ api.ReceiveAndDeleteMessageParams) {
	r.op, r.entity = "ReceiveAndDeleteMessage", e
}
func (r *recorder) CompleteMessage(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.CompleteMessageParams) {
	r.op, r.entity = "CompleteMessage", e
}
func (r *recorder) UnlockMessage(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.UnlockMessageParams) {
	r.op, r.entity = "UnlockMessage", e
}
func (r *recorder) RenewLock(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.RenewLockParams) {
	r.op, r.entity = "RenewLock", e
}
func (r *recorder) PurgeMessages(_ http.ResponseWriter, _ *http.Request, e string, _ api.PurgeMessagesParams) {
	r.op, r.entity = "PurgeMessages", e
}
func (r *recorder) BrowseMessages(_ http.ResponseWriter, _ *http.Request, e string, _ api.BrowseMessagesParams) {
	r.op, r.entity = "BrowseMessages", e
}
func (r *recorder) PeekLockBatch(_ http.ResponseWriter, _ *http.Request, e string, _ api.PeekLockBatchParams) {
	r.op, r.entity = "PeekLockBatch", e
}
func (r *recorder) ReceiveAndDeleteBatch(_ http.ResponseWriter, _ *http.Request, e string, _ api.ReceiveAndDeleteBatchParams) {
	r.op, r.entity = "ReceiveAndDeleteBatch", e
}
func (r *recorder) PeekLockDeferred(_ http.ResponseWriter, _ *http.Request, e string, _ api.SequenceNumber, _ api.PeekLockDeferredParams) {
	r.op, r.entity = "PeekLockDeferred", e
}
func (r *recorder) ReceiveAndDeleteDeferred(_ http.ResponseWriter, _ *http.Request, e string, _ api.SequenceNumber, _ api.ReceiveAndDeleteDeferredParams) {
	r.op, r.entity = "ReceiveAndDeleteDeferred", e
}
func (r *recorder) CancelScheduled(_ http.ResponseWriter, _ *http.Request, e string, _ api.SequenceNumber, _ api.CancelScheduledParams) {
	r.op, r.entity = "CancelScheduled", e
}
func (r *recorder) DeadLetterMessage(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.DeadLetterMessageParams) {
	r.op, r.entity = "DeadLetterMessage", e
}
func (r *recorder) DeferMessage(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.DeferMessageParams) {
	r.op, r.entity = "DeferMessage", e
}
func (r *recorder) ResubmitAll(_ http.ResponseWriter, _ *http.Request, e string, _ api.ResubmitAllParams) {
	r.op, r.entity = "ResubmitAll", e
}
func (r *recorder) ResubmitOne(_ http.ResponseWriter, _ *http.Request, e string, _ api.SequenceNumber, _ api.ResubmitOneParams) {
	r.op, r.entity = "ResubmitOne", e
}

func (r *recorder) SettleMessages(_ http.ResponseWriter, _ *http.Request, e string, _ api.SettleMessagesParams) {
	r.op, r.entity = "SettleMessages", e
}

func (r *recorder) SessionSettleMessages(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.SessionSettleMessagesParams) {
	r.op, r.entity = "SessionSettleMessages", e
}

func (r *recorder) ListTopics(http.ResponseWriter, *http.Request, api.ListTopicsParams) {
	r.op = "ListTopics"
}
func (r *recorder) ListSubscriptions(_ http.ResponseWriter, _ *http.Request, e string, _ api.ListSubscriptionsParams) {
	r.op, r.entity = "ListSubscriptions", e
}
func (r *recorder) PutSubscription(_ http.ResponseWriter, _ *http.Request, e, s string, _ api.PutSubscriptionParams) {
	r.op, r.entity = "PutSubscription", e+"/Subscriptions/"+s
}
func (r *recorder) GetSubscription(_ http.ResponseWriter, _ *http.Request, e, s string, _ api.GetSubscriptionParams) {
	r.op, r.entity = "GetSubscription", e+"/Subscriptions/"+s
}
func (r *recorder) DeleteSubscription(_ http.ResponseWriter, _ *http.Request, e, s string, _ api.DeleteSubscriptionParams) {
	r.op, r.entity = "DeleteSubscription", e+"/Subscriptions/"+s
}
func (r *recorder) PutRuleNamedInBody(_ http.ResponseWriter, _ *http.Request, e, s string, _ api.PutRuleNamedInBodyParams) {
	r.op, r.entity = "PutRuleNamedInBody", e+"/Subscriptions/"+s
}
func (r *recorder) ListRules(_ http.ResponseWriter, _ *http.Request, e, s string, _ api.ListRulesParams) {
	r.op, r.entity = "ListRules", e+"/Subscriptions/"+s
}
func (r *recorder) PutRule(_ http.ResponseWriter, _ *http.Request, e, s, _ string, _ api.PutRuleParams) {
	r.op, r.entity = "PutRule", e+"/Subscriptions/"+s
}
func (r *recorder) GetRule(_ http.ResponseWriter, _ *http.Request, e, s, _ string, _ api.GetRuleParams) {
	r.op, r.entity = "GetRule", e+"/Subscriptions/"+s
}
func (r *recorder) DeleteRule(_ http.ResponseWriter, _ *http.Request, e, s, _ string, _ api.DeleteRuleParams) {
	r.op, r.entity = "DeleteRule", e+"/Subscriptions/"+s
}
func (r *recorder) ListSessions(_ http.ResponseWriter, _ *http.Request, e string, _ api.ListSessionsParams) {
	r.op, r.entity = "ListSessions", e
}
func (r *recorder) AcceptNextSession(_ http.ResponseWriter, _ *http.Request, e string, _ api.AcceptNextSessionParams) {
	r.op, r.entity = "AcceptNextSession", e
}
func (r *recorder) AcceptSession(_ http.ResponseWriter, _ *http.Request, e, _ string, _ api.AcceptSessionParams) {
	r.op, r.entity = "AcceptSession", e
}
func (r *recorder) RenewSessionLock(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.RenewSessionLockParams) {
	r.op, r.entity = "RenewSessionLock", e
}
func (r *recorder) ReleaseSession(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.ReleaseSessionParams) {
	r.op, r.entity = "ReleaseSession", e
}
func (r *recorder) GetSessionState(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.GetSessionStateParams) {
	r.op, r.entity = "GetSessionState", e
}
func (r *recorder) SetSessionState(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.SetSessionStateParams) {
	r.op, r.entity = "SetSessionState", e
}
func (r *recorder) SessionPeekLock(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.SessionPeekLockParams) {
	r.op, r.entity = "SessionPeekLock", e
}
func (r *recorder) SessionReceiveAndDelete(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.SessionReceiveAndDeleteParams) {
	r.op, r.entity = "SessionReceiveAndDelete", e
}
func (r *recorder) SessionPeekLockBatch(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.SessionPeekLockBatchParams) {
	r.op, r.entity = "SessionPeekLockBatch", e
}
func (r *recorder) SessionReceiveAndDeleteBatch(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ api.SessionReceiveAndDeleteBatchParams) {
	r.op, r.entity = "SessionReceiveAndDeleteBatch", e
}
func (r *recorder) SessionComplete(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ string, _ openapi_types.UUID, _ api.SessionCompleteParams) {
	r.op, r.entity = "SessionComplete", e
}
func (r *recorder) SessionUnlock(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ string, _ openapi_types.UUID, _ api.SessionUnlockParams) {
	r.op, r.entity = "SessionUnlock", e
}
func (r *recorder) SessionRenewMessageLock(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ string, _ openapi_types.UUID, _ api.SessionRenewMessageLockParams) {
	r.op, r.entity = "SessionRenewMessageLock", e
}
func (r *recorder) SessionDeadLetter(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ string, _ openapi_types.UUID, _ api.SessionDeadLetterParams) {
	r.op, r.entity = "SessionDeadLetter", e
}
func (r *recorder) SessionDefer(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ string, _ openapi_types.UUID, _ api.SessionDeferParams) {
	r.op, r.entity = "SessionDefer", e
}
func (r *recorder) SessionPeekLockDeferred(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ int64, _ api.SessionPeekLockDeferredParams) {
	r.op, r.entity = "SessionPeekLockDeferred", e
}
func (r *recorder) SessionReceiveAndDeleteDeferred(_ http.ResponseWriter, _ *http.Request, e, _ string, _ openapi_types.UUID, _ int64, _ api.SessionReceiveAndDeleteDeferredParams) {
	r.op, r.entity = "SessionReceiveAndDeleteDeferred", e
}

// routeCanonical sends a request for rt's canonical path through the generated router, as front
// does, and returns what the router called.
func routeCanonical(method string, rt route) (string, string) {
	rec := &recorder{}
	router := api.HandlerWithOptions(rec, api.ChiServerOptions{BaseRouter: chi.NewRouter()})
	req := httptest.NewRequest(method, "http://sbgate/", nil)
	req.URL.RawPath = rt.canonical
	req.URL.Path, _ = url.PathUnescape(rt.canonical)
	router.ServeHTTP(httptest.NewRecorder(), req)
	return rec.op, rec.entity
}

// validToken makes settlement paths reach the handler, whose lock token parameter is a UUID.
const validToken = "acccce0e-7596-4e0c-b216-2d18638ac0dd"

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"/healthz", "/$namespaceinfo", "/$Resources/Queues/", "/a/b/c", "/a%2Fb/messages",
		"/q/$DeadLetterQueue/messages/head", "/q/messages/1/" + validToken, "/q/../x", "/%zz", "", "/q/messages/head/" + validToken,
		"/Q/Messages", "/%2525/messages", "/a%3F%23b/messages/x%2Fy/" + validToken} {
		for _, m := range []string{"GET", "PUT", "POST", "DELETE"} {
			f.Add(m, s)
		}
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		rt, ok := classify(method, path)
		if !ok {
			return
		}
		if !strings.HasPrefix(rt.canonical, "/") {
			t.Fatalf("classify(%q, %q): canonical %q does not start with /", method, path, rt.canonical)
		}
		if rt.op == nil {
			t.Fatalf("classify(%q, %q) ok with no operation", method, path)
		}
		for _, seg := range strings.Split(rt.entity, "/") {
			if rt.entity != "" && (seg == "" || seg == "." || seg == "..") {
				t.Fatalf("classify(%q, %q): entity %q has segment %q", method, path, rt.entity, seg)
			}
		}
		if rt.scope != strings.ToLower(rt.scope) {
			t.Fatalf("classify(%q, %q): scope %q is not lower case", method, path, rt.scope)
		}
		// The canonical path classifies the same way: front and the router agree.
		again, ok := classify(method, rt.canonical)
		if !ok || again != rt {
			t.Fatalf("classify(%q, %q) = %+v, but its canonical path classifies as %+v, %t", method, path, rt, again, ok)
		}
		// The generated router sends the canonical path to the operation classify chose, with
		// the same entity path. Settlement needs a UUID lock token to get that far.
		switch rt.label() {
		case "CompleteMessage", "UnlockMessage", "RenewLock", "SessionComplete", "SessionUnlock", "SessionRenewMessageLock":
			if !strings.HasSuffix(rt.canonical, "/"+validToken) {
				return
			}
		}
		gotOp, gotEntity := routeCanonical(method, rt)
		if gotOp != rt.label() || gotEntity != rt.entity {
			t.Fatalf("classify(%q, %q) = %v %q (canonical %q), but the router called %v %q", method, path,
				rt.label(), rt.entity, rt.canonical, gotOp, gotEntity)
		}
	})
}

// TestCanonicalPathsRoute runs the router check of FuzzClassify over the table's valid rows.
func TestCanonicalPathsRoute(t *testing.T) {
	for _, c := range []struct{ method, path string }{
		{"GET", "/healthz"}, {"GET", "/$NamespaceInfo"}, {"GET", "/$resources/queues"}, {"GET", "/$Resources/Topics"},
		{"PUT", "/healthz"}, {"DELETE", "/healthz"}, {"PUT", "/readyz"}, {"GET", "/a/b/c"}, {"PUT", "/a%2Fb"}, {"DELETE", "/x%3Fy"},
		{"POST", "/a/b/Messages"}, {"POST", "/q/$DeadLetterQueue/messages/head"}, {"DELETE", "/q/messages/head"},
		{"DELETE", "/q/messages/7/" + validToken}, {"PUT", "/a/b/messages/x%2Fy/" + validToken}, {"POST", "/q/messages/head/" + validToken},
		{"GET", "/%2525"}, {"PUT", "/$namespaceinfo2"},
		{"DELETE", "/q/messages"}, {"GET", "/q/messages/$browse"}, {"POST", "/q/messages/$batch"}, {"DELETE", "/q/messages/$batch"},
		{"POST", "/q/messages/$deferred/3"}, {"DELETE", "/q/messages/$deferred/3"}, {"DELETE", "/q/messages/$scheduled/3"},
		{"POST", "/q/messages/3/" + validToken + "/$deadletter"}, {"POST", "/q/messages/3/" + validToken + "/$defer"},
		{"POST", "/q/$DeadLetterQueue/messages/$resubmit"}, {"POST", "/q/$DeadLetterQueue/messages/$resubmit/3"},
		{"POST", "/q/messages/$settle"}, {"POST", "/q/sessions/s/" + validToken + "/messages/$settle"},
	} {
		rt, ok := classify(c.method, c.path)
		if !ok {
			t.Errorf("classify(%q, %q) not ok", c.method, c.path)
			continue
		}
		if gotOp, gotEntity := routeCanonical(c.method, rt); gotOp != rt.label() || gotEntity != rt.entity {
			t.Errorf("route(%q, %q) = %v %q; want %v %q (canonical %q)", c.method, c.path, gotOp, gotEntity, rt.label(), rt.entity, rt.canonical)
		}
	}
}

func TestReceiveWait(t *testing.T) {
	s := &Server{cfg: Config{DefaultReceiveWait: 60 * time.Second, MaxReceiveWait: 120 * time.Second}}
	for _, tc := range []struct {
		timeout *int
		want    time.Duration
	}{
		{nil, 60 * time.Second},
		{ptr(0), 0},
		{ptr(5), 5 * time.Second},
		{ptr(120), 120 * time.Second},
		{ptr(121), 120 * time.Second},
		{ptr(9223372036), 120 * time.Second},
		// time.Duration(n)*time.Second overflows to a negative wait past here.
		{ptr(9223372037), 120 * time.Second},
		{ptr(math.MaxInt), 120 * time.Second},
	} {
		if got, _ := s.receiveWait(tc.timeout); got != tc.want {
			t.Errorf("receiveWait(%v) = %v; want %v", deref(tc.timeout), got, tc.want)
		}
	}
	short := &Server{cfg: Config{DefaultReceiveWait: time.Minute, MaxReceiveWait: 1500 * time.Millisecond}}
	if got, _ := short.receiveWait(ptr(2)); got != 1500*time.Millisecond {
		t.Errorf("receiveWait(2) with a 1.5 s maximum = %v; want 1.5s", got)
	}
	if got, _ := short.receiveWait(nil); got != 1500*time.Millisecond {
		t.Errorf("receiveWait(nil) with a 1.5 s maximum = %v; want 1.5s", got)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestRoutesRemembered: the route of a path naming no message is remembered and found again
// the same; a settlement's path, unique to its message, is not remembered.
func TestRoutesRemembered(t *testing.T) {
	rs := &routes{mux: testRoutes.mux, ops: testRoutes.ops, literals: testRoutes.literals, dollars: testRoutes.dollars}
	first, ok := rs.route("POST", "/Orders/Messages/head")
	if !ok {
		t.Fatal("peek-lock path not routed")
	}
	again, ok := rs.route("POST", "/Orders/Messages/head")
	if !ok || again != first || len(rs.known) != 1 {
		t.Errorf("routed again: %+v, %v (%d remembered); want %+v, one remembered", again, ok, len(rs.known), first)
	}
	if want, _ := rs.find("POST", "/Orders/Messages/head"); first != want {
		t.Errorf("remembered route %+v; want %+v", first, want)
	}
	if _, ok := rs.route("DELETE", "/Orders/messages/12/acccce0e-7596-4e0c-b216-2d18638ac0dd"); !ok || len(rs.known) != 1 || len(rs.messageRoutes) != 1 {
		t.Errorf("complete routed %v with %d routes and %d settlement routes remembered; want routed, still one, and one",
			ok, len(rs.known), len(rs.messageRoutes))
	}
	if _, ok := rs.route("POST", "/Orders/nonsense/x"); ok || len(rs.known) != 1 {
		t.Errorf("an unknown path routed %v, %d remembered; want not routed, not remembered", ok, len(rs.known))
	}
}

// TestSettlementRoutesBuiltAsFound: the route of a settlement path built from the one remembered
// for its entity is the route find makes of it, for every message id and token spelling;
// segments that are not ordinary values are routed by find.
func TestSettlementRoutesBuiltAsFound(t *testing.T) {
	rs := &routes{mux: testRoutes.mux, ops: testRoutes.ops, literals: testRoutes.literals, dollars: testRoutes.dollars}
	const tok = "acccce0e-7596-4e0c-b216-2d18638ac0dd"
	for _, prefix := range []string{"/Orders/messages", "/a/b/Messages", "/a%2Fb/messages", "/t/Subscriptions/s/messages",
		"/q/$DeadLetterQueue/messages", "/caf%C3%A9/MESSAGES", "/q//messages"} {
		for _, method := range []string{"DELETE", "PUT", "POST"} {
			rs.route(method, prefix+"/1/"+tok) // learns the entity's settlement route
			for _, end := range []string{"/12/" + tok, "/12/" + strings.ToUpper(tok), "/my%2Fid%20x/" + tok, "/%C3%A9t%C3%A9/x",
				"/head/" + tok, "/$batch/" + tok, "/12/$deadletter", "/./" + tok, "/../" + tok, "/%zz/" + tok, "/12/%2e%2e",
				"/Messages/" + tok, "/sessions/" + tok, "/12/" + tok + "/"} {
				path := prefix + end
				got, gotOK := rs.route(method, path)
				want, wantOK := rs.find(method, path)
				if got != want || gotOK != wantOK {
					t.Errorf("route(%s %s) = %+v, %v; find: %+v, %v", method, path, got, gotOK, want, wantOK)
				}
			}
		}
	}
	if len(rs.messageRoutes) == 0 {
		t.Error("no settlement route remembered")
	}
}
