package handlers

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// op is what a request asks for, decided from its method and path before anything else runs.
type op int

const (
	opUnknown op = iota
	opHealth
	opNamespaceInfo
	opListQueues
	opPutEntity
	opGetEntity
	opDeleteEntity
	opSend
	opPeekLock
	opReceiveAndDelete
	opComplete
	opUnlock
	opRenewLock
	// Extensions.
	opPurge
	opBrowse
	opPeekLockBatch
	opReceiveAndDeleteBatch
	opPeekLockDeferred
	opReceiveAndDeleteDeferred
	opCancelScheduled
	opDeadLetter
	opDefer
	opResubmitAll
	opResubmitOne
	opSettleMessages
	// Topics, subscriptions, rules.
	opListTopics
	opListSubscriptions
	opPutSubscription
	opGetSubscription
	opDeleteSubscription
	opListRules
	opPutRule
	opGetRule
	opDeleteRule
	// Sessions (operations on messages inside a session reuse the message operations).
	opListSessions
	opAcceptNextSession
	opAcceptSession
	opRenewSession
	opReleaseSession
	opGetSessionState
	opSetSessionState
	opMetrics
)

// String names the operation, for metrics and logs.
func (o op) String() string {
	return [...]string{"unknown", "health", "namespaceInfo", "listQueues", "putEntity", "getEntity", "deleteEntity",
		"send", "peekLock", "receiveAndDelete", "complete", "unlock", "renewLock",
		"purge", "browse", "peekLockBatch", "receiveAndDeleteBatch", "peekLockDeferred", "receiveAndDeleteDeferred",
		"cancelScheduled", "deadLetter", "defer", "resubmitAll", "resubmitOne", "settleMessages",
		"listTopics", "listSubscriptions", "putSubscription", "getSubscription", "deleteSubscription",
		"listRules", "putRule", "getRule", "deleteRule",
		"listSessions", "acceptNextSession", "acceptSession", "renewSession", "releaseSession", "getSessionState", "setSessionState",
		"metrics"}[o]
}

// route is a classified request.
type route struct {
	op op
	// entity is the entity path the operation addresses, in the request's casing, with segments
	// joined by '/': "orders", "a/b", "t/Subscriptions/s", and for data-plane operations possibly
	// ending in "/$DeadLetterQueue". Empty for namespace-level operations.
	entity string
	// canonical is the path the generated router matches.
	canonical string
	// scope is the request's path, which a token's sr must cover: clients sign the very URL they
	// call ("orders/messages"), or a prefix of it.
	scope string
}

// right is the claim an operation needs (zero: any valid token).
func (r route) right() sas.Rights {
	switch r.op {
	case opSend, opCancelScheduled:
		return sas.Send
	case opPeekLock, opReceiveAndDelete, opComplete, opUnlock, opRenewLock, opBrowse, opPeekLockBatch,
		opReceiveAndDeleteBatch, opPeekLockDeferred, opReceiveAndDeleteDeferred, opDeadLetter, opDefer, opSettleMessages,
		opListSessions, opAcceptNextSession, opAcceptSession, opRenewSession, opReleaseSession, opGetSessionState, opSetSessionState:
		return sas.Listen
	case opListQueues, opPutEntity, opGetEntity, opDeleteEntity, opPurge, opResubmitAll, opResubmitOne,
		opListTopics, opListSubscriptions, opPutSubscription, opGetSubscription, opDeleteSubscription,
		opListRules, opPutRule, opGetRule, opDeleteRule:
		return sas.Manage
	}
	return 0
}

// Literal path segments of the protocol, matched case-insensitively.
const (
	segMessages      = "messages"
	segSessions      = "sessions"
	segSubscriptions = "subscriptions"
	segTopics        = "topics"
	segResources     = "$resources"
	segQueues        = "queues"
	segNamespaceInfo = "$namespaceinfo"
	segDeadLetter    = "$deadletterqueue"
	deadLetterSuffix = "/$DeadLetterQueue"
)

// classify decides the operation of a request from its method and escaped path. Service Bus
// paths cannot be described in OpenAPI as they are (entity names span segments, literals come in
// any casing), so classify also returns the canonical path that the generated router matches:
// the entity path as one percent-encoded segment and the literals in their documented casing.
// ok is false when nothing matches.
func classify(method, escapedPath string) (route, bool) {
	raw := splitRaw(escapedPath)
	// Entity names may not contain a "messages", "sessions" or "subscriptions" segment, so the
	// first "messages" or "sessions" ends the entity path of a data-plane request (a
	// subscription's entity path includes its "Subscriptions" segment), and failing those the
	// first "subscriptions" ends a topic's path. The segments after the marker are decoded but
	// not split, so a MessageId or SessionId with an encoded '/' stays one segment.
	for _, markers := range [][]string{{segMessages, segSessions}, {segSubscriptions}} {
		for k := 1; k < len(raw); k++ {
			seg, err := url.PathUnescape(raw[k])
			if err != nil {
				return route{}, false
			}
			marker := strings.ToLower(seg)
			if marker != markers[0] && (len(markers) < 2 || marker != markers[1]) {
				continue
			}
			entity, ok := decodeSegments(raw[:k])
			if !ok || len(entity) == 0 {
				return route{}, false
			}
			rest := make([]string, 0, len(raw)-k-1)
			for _, r := range raw[k+1:] {
				seg, err := url.PathUnescape(r)
				if err != nil || seg == "." || seg == ".." {
					return route{}, false
				}
				rest = append(rest, seg)
			}
			rt, ok := markerRoute(method, marker, strings.Join(entity, "/"), rest)
			rt.scope = strings.ToLower(strings.Join(append(append(entity, marker), rest...), "/"))
			return rt, ok
		}
	}
	segs, ok := decodeSegments(raw)
	if !ok {
		return route{}, false
	}
	scope := strings.ToLower(strings.Join(segs, "/"))
	// A marker may also hide inside an encoded segment ("/a%2Fb%2Fmessages").
	for _, markers := range [][]string{{segMessages, segSessions}, {segSubscriptions}} {
		for k := 1; k < len(segs); k++ {
			marker := strings.ToLower(segs[k])
			if marker == markers[0] || len(markers) > 1 && marker == markers[1] {
				rt, ok := markerRoute(method, marker, strings.Join(segs[:k], "/"), segs[k+1:])
				rt.scope = scope
				return rt, ok
			}
		}
	}
	r, ok := classifySegments(method, segs)
	r.scope = scope
	return r, ok
}

// markerRoute classifies what follows a marker segment of an entity path.
func markerRoute(method, marker, entity string, rest []string) (route, bool) {
	switch marker {
	case segMessages:
		return dataRoute(method, entity, rest)
	case segSessions:
		return sessionRoute(method, entity, rest)
	}
	return subscriptionRoute(method, entity, rest)
}

// sessionOps are the operations under {entity}/sessions, by what follows and by method.
var sessionOps = []struct {
	rest []string
	ops  map[string]op
}{
	{nil, map[string]op{http.MethodGet: opListSessions}},
	{[]string{"$accept"}, map[string]op{http.MethodPost: opAcceptNextSession}},
	{[]string{"{}", "$accept"}, map[string]op{http.MethodPost: opAcceptSession}},
	{[]string{"{}", "{}"}, map[string]op{http.MethodPost: opRenewSession, http.MethodDelete: opReleaseSession}},
	{[]string{"{}", "{}", "state"}, map[string]op{http.MethodGet: opGetSessionState, http.MethodPut: opSetSessionState}},
	{[]string{"{}", "{}", "messages", "head"}, map[string]op{http.MethodPost: opPeekLock, http.MethodDelete: opReceiveAndDelete}},
	{[]string{"{}", "{}", "messages", "$batch"}, map[string]op{http.MethodPost: opPeekLockBatch, http.MethodDelete: opReceiveAndDeleteBatch}},
	{[]string{"{}", "{}", "messages", "$settle"}, map[string]op{http.MethodPost: opSettleMessages}},
	{[]string{"{}", "{}", "messages", "$deferred", "{}"}, map[string]op{http.MethodPost: opPeekLockDeferred, http.MethodDelete: opReceiveAndDeleteDeferred}},
	{[]string{"{}", "{}", "messages", "{}", "{}", "$deadletter"}, map[string]op{http.MethodPost: opDeadLetter}},
	{[]string{"{}", "{}", "messages", "{}", "{}", "$defer"}, map[string]op{http.MethodPost: opDefer}},
	{[]string{"{}", "{}", "messages", "{}", "{}"}, map[string]op{http.MethodDelete: opComplete, http.MethodPut: opUnlock, http.MethodPost: opRenewLock}},
}

// subscriptionOps are the operations under {topic}/Subscriptions.
var subscriptionOps = []struct {
	rest []string
	ops  map[string]op
}{
	{nil, map[string]op{http.MethodGet: opListSubscriptions}},
	{[]string{"{}"}, map[string]op{http.MethodPut: opPutSubscription, http.MethodGet: opGetSubscription, http.MethodDelete: opDeleteSubscription}},
	{[]string{"{}", "rules"}, map[string]op{http.MethodGet: opListRules, http.MethodPut: opPutRule}},
	{[]string{"{}", "rules", "{}"}, map[string]op{http.MethodPut: opPutRule, http.MethodGet: opGetRule, http.MethodDelete: opDeleteRule}},
}

// literalCase is the casing a literal segment takes in the canonical path.
var literalCase = map[string]string{"rules": "Rules"}

// matchOps finds the operation whose pattern rest matches, building the canonical path after
// prefix.
func matchOps(method, prefix string, rest []string, table []struct {
	rest []string
	ops  map[string]op
}) (op, string, bool) {
	for _, d := range table {
		if len(d.rest) != len(rest) {
			continue
		}
		canonical := prefix
		match := true
		for i, want := range d.rest {
			switch {
			case want == "{}":
				canonical += "/" + url.PathEscape(rest[i])
			case strings.EqualFold(rest[i], want):
				lit := want
				if c, ok := literalCase[want]; ok {
					lit = c
				}
				canonical += "/" + lit
			default:
				match = false
			}
		}
		if !match {
			continue
		}
		o, ok := d.ops[method]
		return o, canonical, ok
	}
	return opUnknown, "", false
}

// sessionRoute classifies a request under {entity}/sessions.
func sessionRoute(method, entity string, rest []string) (route, bool) {
	o, canonical, ok := matchOps(method, "/"+url.PathEscape(entity)+"/sessions", rest, sessionOps)
	return route{op: o, entity: entity, canonical: canonical}, ok
}

// subscriptionRoute classifies a request under {topic}/Subscriptions. The route's entity is the
// subscription (for errors and for the topic's keys).
func subscriptionRoute(method, topic string, rest []string) (route, bool) {
	o, canonical, ok := matchOps(method, "/"+url.PathEscape(topic)+"/Subscriptions", rest, subscriptionOps)
	entity := topic
	if len(rest) > 0 {
		entity = store.SubscriptionPath(topic, rest[0])
	}
	return route{op: o, entity: entity, canonical: canonical}, ok
}

func classifySegments(method string, segs []string) (route, bool) {
	n := len(segs)
	lower := func(i int) string { return strings.ToLower(segs[i]) }
	switch {
	case n == 0:
		return route{}, false
	case n == 1 && method == http.MethodGet && (segs[0] == "healthz" || segs[0] == "readyz"):
		return route{op: opHealth, canonical: "/" + segs[0]}, true
	case n == 1 && method == http.MethodGet && segs[0] == "metrics":
		return route{op: opMetrics, canonical: "/metrics"}, true
	case n == 1 && lower(0) == segNamespaceInfo:
		return route{op: opNamespaceInfo, canonical: "/$namespaceinfo"}, methodIs(method, http.MethodGet)
	case n == 2 && lower(0) == segResources && lower(1) == segQueues:
		return route{op: opListQueues, canonical: "/$Resources/Queues"}, methodIs(method, http.MethodGet)
	case n == 2 && lower(0) == segResources && lower(1) == segTopics:
		return route{op: opListTopics, canonical: "/$Resources/Topics"}, methodIs(method, http.MethodGet)
	}
	entity := strings.Join(segs, "/")
	r := route{entity: entity, canonical: "/" + url.PathEscape(entity)}
	switch method {
	case http.MethodPut:
		r.op = opPutEntity
	case http.MethodGet:
		r.op = opGetEntity
	case http.MethodDelete:
		r.op = opDeleteEntity
	default:
		return r, false
	}
	return r, true
}

// dataOps are the data-plane operations by what follows "messages" (a literal in lower case, or
// "{}" for a value) and by method.
var dataOps = []struct {
	rest []string
	ops  map[string]op
}{
	{nil, map[string]op{http.MethodPost: opSend, http.MethodDelete: opPurge}},
	{[]string{"head"}, map[string]op{http.MethodPost: opPeekLock, http.MethodDelete: opReceiveAndDelete}},
	{[]string{"$browse"}, map[string]op{http.MethodGet: opBrowse}},
	{[]string{"$batch"}, map[string]op{http.MethodPost: opPeekLockBatch, http.MethodDelete: opReceiveAndDeleteBatch}},
	{[]string{"$resubmit"}, map[string]op{http.MethodPost: opResubmitAll}},
	{[]string{"$settle"}, map[string]op{http.MethodPost: opSettleMessages}},
	{[]string{"$deferred", "{}"}, map[string]op{http.MethodPost: opPeekLockDeferred, http.MethodDelete: opReceiveAndDeleteDeferred}},
	{[]string{"$scheduled", "{}"}, map[string]op{http.MethodDelete: opCancelScheduled}},
	{[]string{"$resubmit", "{}"}, map[string]op{http.MethodPost: opResubmitOne}},
	{[]string{"{}", "{}", "$deadletter"}, map[string]op{http.MethodPost: opDeadLetter}},
	{[]string{"{}", "{}", "$defer"}, map[string]op{http.MethodPost: opDefer}},
	{[]string{"{}", "{}"}, map[string]op{http.MethodDelete: opComplete, http.MethodPut: opUnlock, http.MethodPost: opRenewLock}},
}

// dataRoute classifies a data-plane request on entity (which may end in a $DeadLetterQueue
// segment) whose path continues after "messages" with rest.
func dataRoute(method, entity string, rest []string) (route, bool) {
	o, canonical, ok := matchOps(method, "/"+url.PathEscape(entity)+"/messages", rest, dataOps)
	return route{op: o, entity: entity, canonical: canonical}, ok
}

func methodIs(got, want string) bool { return got == want }

// splitRaw splits an escaped URL path into its non-empty segments, still escaped. Empty
// segments (a trailing slash, as clients send on collections) are dropped.
func splitRaw(escaped string) []string {
	var raw []string
	for _, r := range strings.Split(escaped, "/") {
		if r != "" {
			raw = append(raw, r)
		}
	}
	return raw
}

// decodeSegments unescapes the segments of an entity path. A segment may itself hold escaped
// slashes (a generated client sends the entity path as one parameter, "a%2Fb"); those split too,
// so both spellings of a path give the same segments. "." and ".." and undecodable escapes make
// the path invalid.
func decodeSegments(raw []string) ([]string, bool) {
	var segs []string
	for _, r := range raw {
		seg, err := url.PathUnescape(r)
		if err != nil {
			return nil, false
		}
		for _, s := range strings.Split(seg, "/") {
			switch s {
			case "":
				continue
			case ".", "..":
				return nil, false
			}
			segs = append(segs, s)
		}
	}
	return segs, true
}

// splitSubQueue splits "x/$DeadLetterQueue" (any casing) into "x" and the dead-letter subqueue.
func splitSubQueue(entity string) (string, store.SubQueue, bool) {
	if len(entity) > len(deadLetterSuffix) && strings.EqualFold(entity[len(entity)-len(deadLetterSuffix):], deadLetterSuffix) {
		return entity[:len(entity)-len(deadLetterSuffix)], store.SubQueueDeadLetter, true
	}
	return entity, store.SubQueueMain, false
}
