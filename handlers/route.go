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
)

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
		opReceiveAndDeleteBatch, opPeekLockDeferred, opReceiveAndDeleteDeferred, opDeadLetter, opDefer:
		return sas.Listen
	case opListQueues, opPutEntity, opGetEntity, opDeleteEntity, opPurge, opResubmitAll, opResubmitOne:
		return sas.Manage
	}
	return 0
}

// Literal path segments of the protocol, matched case-insensitively.
const (
	segMessages      = "messages"
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
	// Entity names may not contain a "messages" segment, so the first one ends the entity path
	// of a data-plane request; what follows says the operation. Those following segments are
	// decoded but not split, so a MessageId with an encoded '/' stays one segment.
	for k := 1; k < len(raw); k++ {
		if seg, err := url.PathUnescape(raw[k]); err == nil && strings.EqualFold(seg, segMessages) {
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
			rt, ok := dataRoute(method, strings.Join(entity, "/"), rest)
			rt.scope = strings.ToLower(strings.Join(append(append(entity, segMessages), rest...), "/"))
			return rt, ok
		}
	}
	segs, ok := decodeSegments(raw)
	if !ok {
		return route{}, false
	}
	scope := strings.ToLower(strings.Join(segs, "/"))
	// "messages" may also hide inside an encoded segment ("/a%2Fb%2Fmessages").
	for k := 1; k < len(segs); k++ {
		if strings.EqualFold(segs[k], segMessages) {
			rt, ok := dataRoute(method, strings.Join(segs[:k], "/"), segs[k+1:])
			rt.scope = scope
			return rt, ok
		}
	}
	r, ok := classifySegments(method, segs)
	r.scope = scope
	return r, ok
}

func classifySegments(method string, segs []string) (route, bool) {
	n := len(segs)
	lower := func(i int) string { return strings.ToLower(segs[i]) }
	switch {
	case n == 0:
		return route{}, false
	case n == 1 && method == http.MethodGet && (segs[0] == "healthz" || segs[0] == "readyz"):
		return route{op: opHealth, canonical: "/" + segs[0]}, true
	case n == 1 && lower(0) == segNamespaceInfo:
		return route{op: opNamespaceInfo, canonical: "/$namespaceinfo"}, methodIs(method, http.MethodGet)
	case n == 2 && lower(0) == segResources && lower(1) == segQueues:
		return route{op: opListQueues, canonical: "/$Resources/Queues"}, methodIs(method, http.MethodGet)
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
	for _, d := range dataOps {
		if len(d.rest) != len(rest) {
			continue
		}
		canonical := "/" + url.PathEscape(entity) + "/messages"
		match := true
		for i, want := range d.rest {
			switch {
			case want == "{}":
				canonical += "/" + url.PathEscape(rest[i])
			case strings.EqualFold(rest[i], want):
				canonical += "/" + want
			default:
				match = false
			}
		}
		if !match {
			continue
		}
		o, ok := d.ops[method]
		return route{op: o, entity: entity, canonical: canonical}, ok
	}
	return route{}, false
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
