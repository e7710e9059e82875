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
	case opSend:
		return sas.Send
	case opPeekLock, opReceiveAndDelete, opComplete, opUnlock, opRenewLock:
		return sas.Listen
	case opListQueues, opPutEntity, opGetEntity, opDeleteEntity:
		return sas.Manage
	}
	return 0
}

// Literal path segments of the protocol, matched case-insensitively.
const (
	segMessages      = "messages"
	segHead          = "head"
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
	segs, ok := splitPath(escapedPath)
	if !ok {
		return route{}, false
	}
	r, ok := classifySegments(method, segs)
	r.scope = strings.ToLower(strings.Join(segs, "/"))
	return r, ok
}

func classifySegments(method string, segs []string) (route, bool) {
	n := len(segs)
	lower := func(i int) string { return strings.ToLower(segs[i]) }
	entityOf := func(k int) string { return strings.Join(segs[:k], "/") }

	switch {
	case n == 0:
		return route{}, false
	case n == 1 && method == http.MethodGet && (segs[0] == "healthz" || segs[0] == "readyz"):
		return route{op: opHealth, canonical: "/" + segs[0]}, true
	case n == 1 && lower(0) == segNamespaceInfo:
		return route{op: opNamespaceInfo, canonical: "/$namespaceinfo"}, methodIs(method, http.MethodGet)
	case n == 2 && lower(0) == segResources && lower(1) == segQueues:
		return route{op: opListQueues, canonical: "/$Resources/Queues"}, methodIs(method, http.MethodGet)
	case n >= 3 && lower(n-2) == segMessages && lower(n-1) == segHead:
		r := dataRoute(entityOf(n-2), "/messages/head")
		switch method {
		case http.MethodPost:
			r.op = opPeekLock
		case http.MethodDelete:
			r.op = opReceiveAndDelete
		default:
			return r, false
		}
		return r, true
	case n >= 4 && lower(n-3) == segMessages:
		r := dataRoute(entityOf(n-3), "/messages/"+url.PathEscape(segs[n-2])+"/"+url.PathEscape(segs[n-1]))
		switch method {
		case http.MethodDelete:
			r.op = opComplete
		case http.MethodPut:
			r.op = opUnlock
		case http.MethodPost:
			r.op = opRenewLock
		default:
			return r, false
		}
		return r, true
	case n >= 2 && lower(n-1) == segMessages:
		r := dataRoute(entityOf(n-1), "/messages")
		r.op = opSend
		return r, methodIs(method, http.MethodPost)
	}
	r := route{entity: entityOf(n), canonical: "/" + url.PathEscape(entityOf(n))}
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

// dataRoute builds the route of a data-plane operation on entity (which may end in a
// $DeadLetterQueue segment) whose path continues with rest.
func dataRoute(entity, rest string) route {
	return route{entity: entity, canonical: "/" + url.PathEscape(entity) + rest}
}

func methodIs(got, want string) bool { return got == want }

// splitPath splits an escaped URL path into its unescaped segments. A segment may itself hold
// escaped slashes (a generated client sends the entity path as one parameter, "a%2Fb"); those
// split too, so both spellings of a path give the same segments. Empty segments (a trailing
// slash, as clients send on collections) are dropped; "." and ".." and undecodable escapes make
// the path invalid.
func splitPath(escaped string) ([]string, bool) {
	var segs []string
	for _, raw := range strings.Split(escaped, "/") {
		if raw == "" {
			continue
		}
		seg, err := url.PathUnescape(raw)
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
