package rest

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// operation is one operation of openapi.yaml, as the middleware needs it: its operationId
// (the metric and log label) and the right its x-sbgate-right declares.
type operation struct {
	id      string
	method  string
	pattern string
	// token: a valid token is needed; right: the claim it must carry (zero: any).
	token bool
	right sas.Rights
	// anyScope: the token's scope need not cover the path (namespace-level information).
	anyScope bool
}

// management reports whether the operation belongs to the management API (entities,
// subscriptions, rules: everything needing Manage outside an entity's messages), whose
// refusals have their own texts (rights.go).
func (o *operation) management() bool {
	return o.right == sas.Manage && !strings.Contains(o.pattern, "/messages")
}

// route is a canonicalised request and the operation it matched.
type route struct {
	op *operation
	// entity is the entity path the operation addresses, in the request's casing, with segments
	// joined by '/': "orders", "a/b", "t/Subscriptions/s", and for data-plane operations possibly
	// ending in "/$DeadLetterQueue". Empty for namespace-level operations.
	entity string
	// canonical is the path the generated router matches.
	canonical string
	// scope is the request's path, which a token's sr must cover: clients sign the very URL they
	// call ("orders/messages"), or a prefix of it.
	scope string
	// dollar: the path starts with a '$' segment and has no marker ("$Resources/Queues").
	dollar bool
}

// label names the route's operation for metrics and logs: its operationId.
func (r route) label() string {
	if r.op == nil {
		return "unknown"
	}
	return r.op.id
}

// routes finds the operation of a request: the path canonicalised (canonicalise), matched by
// the generated router, and the matched pattern looked up in the table read from the spec.
type routes struct {
	// known remembers the routes of paths that carry no message's name (sends, receives, the
	// entity itself: every request of a client to one entity has the same path), which
	// canonicalising and matching cost most of what routing a request cost. At most
	// maxKnownRoutes; when full, they are all forgotten at once.
	knownMu sync.RWMutex
	known   map[routeKey]route
	// messageRoutes remembers the route of an entity's settlement paths, by the path before
	// the two segments that name a message (messageRoute).
	messageRoutes map[routeKey]messageRoute

	mux *chi.Mux
	// ops by method + " " + pattern.
	ops map[string]*operation
	// literals are the spec's literal path segments by their lower case, in the spec's casing;
	// dollars those of them starting with '$', which never name a value.
	literals map[string]string
	dollars  map[string]bool
}

// newRoutes reads the operations of spec, which mux serves. Every operation must declare
// x-sbgate-right.
func newRoutes(spec *openapi3.T, mux *chi.Mux) (*routes, error) {
	rs := &routes{mux: mux, ops: map[string]*operation{}, literals: map[string]string{}, dollars: map[string]bool{}}
	for pattern, item := range spec.Paths.Map() {
		for _, seg := range strings.Split(strings.Trim(pattern, "/"), "/") {
			if strings.HasPrefix(seg, "{") {
				continue
			}
			low := strings.ToLower(seg)
			if prev, ok := rs.literals[low]; ok && prev != seg {
				return nil, fmt.Errorf("openapi.yaml spells the path segment %q both %q and %q", low, prev, seg)
			}
			rs.literals[low] = seg
			if strings.HasPrefix(seg, "$") {
				rs.dollars[low] = true
			}
		}
		for method, o := range item.Operations() {
			op := &operation{id: o.OperationID, method: method, pattern: pattern}
			right, _ := o.Extensions["x-sbgate-right"].(string)
			switch right {
			case "none":
			case "token":
				op.token, op.anyScope = true, true
			case "Send", "Listen", "Manage":
				r, err := sas.ParseRights([]string{right})
				if err != nil {
					return nil, err
				}
				op.token, op.right = true, r
			default:
				return nil, fmt.Errorf("openapi.yaml: operation %s (%s %s) declares no x-sbgate-right (Send, Listen, Manage, token or none), got %q",
					o.OperationID, method, pattern, right)
			}
			rs.ops[method+" "+pattern] = op
		}
	}
	return rs, nil
}

// routeKey is what a route is found from: the method and the escaped path.
type routeKey struct{ method, path string }

// maxKnownRoutes bounds the routes remembered.
const maxKnownRoutes = 4096

// route finds the operation of a request from its method and escaped path. ok is false when
// none matches.
func (rs *routes) route(method, escapedPath string) (route, bool) {
	k := routeKey{method, escapedPath}
	rs.knownMu.RLock()
	rt, ok := rs.known[k]
	rs.knownMu.RUnlock()
	if ok {
		return rt, true
	}
	prefix, a, b, split := splitMessagePath(escapedPath)
	if split {
		rs.knownMu.RLock()
		m, ok := rs.messageRoutes[routeKey{method, prefix}]
		rs.knownMu.RUnlock()
		if ok {
			if rt, ok := m.route(rs, a, b); ok {
				return rt, true
			}
		}
	}
	rt, ok = rs.find(method, escapedPath)
	switch {
	case !ok || len(escapedPath) > 512:
	case strings.Count(rt.op.pattern, "{") <= 1:
		// No parameter but the entity path: the path of every such request to the entity.
		rs.knownMu.Lock()
		if rs.known == nil || len(rs.known) >= maxKnownRoutes {
			rs.known = make(map[routeKey]route)
		}
		rs.known[k] = rt
		rs.knownMu.Unlock()
	case split && rt.op.pattern == settlementPattern:
		if m, ok := learnMessageRoute(rs, rt, a, b); ok {
			rs.knownMu.Lock()
			if rs.messageRoutes == nil || len(rs.messageRoutes) >= maxKnownRoutes {
				rs.messageRoutes = make(map[routeKey]messageRoute)
			}
			rs.messageRoutes[routeKey{method, prefix}] = m
			rs.knownMu.Unlock()
		}
	}
	return rt, ok
}

// settlementPattern is the path of the settlements of a message (complete, abandon, renew):
// one per message, every one of an entity's routed alike but for its last two segments.
const settlementPattern = "/{entityPath}/messages/{messageId}/{lockToken}"

// messageRoute is the route of an entity's settlement paths without its last two segments: its
// operation, entity, and its canonical path and scope up to them.
type messageRoute struct {
	op               *operation
	entity           string
	canonical, scope string
}

// route is the route of the settlement path ending in the escaped segments a and b, when they
// are ordinary values: ones that decode, are no dot segment, and are no literal of the spec
// (which could make the path another operation's). ok is false otherwise.
func (m messageRoute) route(rs *routes, a, b string) (route, bool) {
	va, ok := rs.messageValue(a)
	if !ok {
		return route{}, false
	}
	vb, ok := rs.messageValue(b)
	if !ok {
		return route{}, false
	}
	return route{op: m.op, entity: m.entity,
		canonical: m.canonical + "/" + url.PathEscape(va) + "/" + url.PathEscape(vb),
		scope:     m.scope + "/" + strings.ToLower(va) + "/" + strings.ToLower(vb)}, true
}

// messageValue decodes a segment naming a message, when it is an ordinary value.
func (rs *routes) messageValue(raw string) (string, bool) {
	v, err := url.PathUnescape(raw)
	if err != nil || v == "" || v == "." || v == ".." {
		return "", false
	}
	if _, literal := rs.literals[strings.ToLower(v)]; literal {
		return "", false
	}
	return v, true
}

// learnMessageRoute takes the route find made of a settlement path ending in a and b apart, and
// returns it when building it again from its parts gives that route exactly.
func learnMessageRoute(rs *routes, rt route, a, b string) (messageRoute, bool) {
	va, okA := rs.messageValue(a)
	vb, okB := rs.messageValue(b)
	canonicalEnd := "/" + url.PathEscape(va) + "/" + url.PathEscape(vb)
	scopeEnd := "/" + strings.ToLower(va) + "/" + strings.ToLower(vb)
	if !okA || !okB || rt.dollar || !strings.HasSuffix(rt.canonical, canonicalEnd) || !strings.HasSuffix(rt.scope, scopeEnd) {
		return messageRoute{}, false
	}
	m := messageRoute{op: rt.op, entity: rt.entity,
		canonical: strings.TrimSuffix(rt.canonical, canonicalEnd), scope: strings.TrimSuffix(rt.scope, scopeEnd)}
	if again, ok := m.route(rs, a, b); !ok || again != rt {
		return messageRoute{}, false
	}
	return m, true
}

// splitMessagePath splits an escaped path into what comes before its last two segments and
// those two, when both are there and not empty.
func splitMessagePath(p string) (prefix, a, b string, ok bool) {
	j := strings.LastIndexByte(p, '/')
	if j <= 0 || j == len(p)-1 {
		return "", "", "", false
	}
	i := strings.LastIndexByte(p[:j], '/')
	if i <= 0 || i == j-1 {
		return "", "", "", false
	}
	return p[:i], p[i+1 : j], p[j+1:], true
}

// find is route without the routes remembered.
func (rs *routes) find(method, escapedPath string) (route, bool) {
	rt, folded, orig, ok := rs.canonicalise(markEmptySession(escapedPath))
	if !ok {
		return rt, false
	}
	op, canonical, ok := rs.match(method, folded, orig)
	if !ok && rt.dollar && len(folded) > 1 && !rs.served(folded) {
		// A namespace-level path that is no operation is an entity path ("$x/y"), as one
		// segment (which the store refuses).
		one := []string{url.PathEscape(rt.entity)}
		op, canonical, ok = rs.match(method, one, one)
	}
	if !ok {
		// What the path would be, had it an operation (for tests and logs).
		rt.canonical = "/" + strings.Join(folded, "/")
		if rt.dollar {
			rt.entity = ""
		}
		return rt, false
	}
	rt.op, rt.canonical = op, canonical
	if !strings.Contains(op.pattern, "{entityPath}") {
		rt.entity = ""
	}
	return rt, true
}

// served reports whether some method has an operation at the path segments folded.
func (rs *routes) served(folded []string) bool {
	path := "/" + strings.Join(folded, "/")
	for _, op := range rs.ops {
		if rs.mux.Find(chi.NewRouteContext(), op.method, path) == op.pattern {
			return true
		}
	}
	return false
}

// match finds the operation of the canonical path segments folded (literals in the spec's
// casing) and builds the path the router gets: the pattern's literals, and orig (the request's
// casing) where the pattern has a parameter. A parameter whose value is a '$' literal of the
// spec means the path named that literal with a method it does not serve: no match.
func (rs *routes) match(method string, folded, orig []string) (*operation, string, bool) {
	rctx := chi.NewRouteContext()
	pattern := rs.mux.Find(rctx, method, "/"+strings.Join(folded, "/"))
	op, ok := rs.ops[method+" "+pattern]
	if !ok {
		return nil, "", false
	}
	pat := strings.Split(strings.Trim(pattern, "/"), "/")
	if len(pat) != len(folded) {
		return nil, "", false
	}
	var b strings.Builder
	for i, seg := range pat {
		b.WriteByte('/')
		if strings.HasPrefix(seg, "{") {
			if v, err := url.PathUnescape(orig[i]); err != nil || rs.dollars[strings.ToLower(v)] {
				return nil, "", false
			}
			b.WriteString(orig[i])
			continue
		}
		b.WriteString(seg)
	}
	return op, b.String(), true
}

// emptySessionSegment stands, while a path is routed, for the empty segment of the session ""
// ("q/sessions//{lock token}/…"): routing drops empty segments (a trailing slash), and a
// router parameter cannot be empty. It decodes to NUL, which no session id holds (the store
// refuses it), so the handlers read it back as "" (sessionIDParam) and the token scope as "".
const emptySessionSegment = "%00"

// markEmptySession puts emptySessionSegment in the empty segment after the "sessions" marker
// of an escaped path, if it has one. The marker is the first "sessions" segment: no entity
// name has one.
func markEmptySession(escapedPath string) string {
	const marker = "/" + segSessions + "//"
	i := strings.Index(strings.ToLower(escapedPath), marker)
	if i < 0 {
		return escapedPath
	}
	j := i + len(marker) - 1
	return escapedPath[:j] + emptySessionSegment + escapedPath[j:]
}

// sessionIDParam is the session id a routed path names: emptySessionSegment's NUL is "".
func sessionIDParam(id string) string {
	if id == "\x00" {
		return ""
	}
	return id
}

// Marker segments: the first "messages" or "sessions" ends the entity path of a data-plane
// request, failing those the first "subscriptions" ends a topic's path.
const (
	segMessages      = "messages"
	segSessions      = "sessions"
	segSubscriptions = "subscriptions"
	deadLetterSuffix = "/$DeadLetterQueue"
)

// canonicalise turns an escaped request path into the segments the generated router matches:
// the entity path as one percent-encoded segment, the segments after it with literals in the
// spec's casing (folded) and as sent (orig). Service Bus paths cannot be described in OpenAPI as
// they are (entity names span segments, literals come in any casing). It also finds the entity
// and the scope a token must cover. ok is false for a path no operation can have.
func (rs *routes) canonicalise(escapedPath string) (rt route, folded, orig []string, ok bool) {
	raw := splitRaw(escapedPath)
	// Entity names may not contain a "messages", "sessions" or "subscriptions" segment, so the
	// first marker ends the entity path (a subscription's entity path includes its
	// "Subscriptions" segment). The segments after the marker are decoded but not split, so a
	// MessageId or SessionId with an encoded '/' stays one segment.
	for _, markers := range [][]string{{segMessages, segSessions}, {segSubscriptions}} {
		for k := 1; k < len(raw); k++ {
			seg, err := url.PathUnescape(raw[k])
			if err != nil {
				return route{}, nil, nil, false
			}
			marker := strings.ToLower(seg)
			if !isMarker(marker, markers) {
				continue
			}
			entity, ok := decodeSegments(raw[:k])
			if !ok || len(entity) == 0 {
				return route{}, nil, nil, false
			}
			rest := make([]string, 0, len(raw)-k-1)
			for _, r := range raw[k+1:] {
				seg, err := url.PathUnescape(r)
				if err != nil || seg == "." || seg == ".." {
					return route{}, nil, nil, false
				}
				rest = append(rest, seg)
			}
			rt, folded, orig := rs.markerPath(marker, strings.Join(entity, "/"), rest)
			scoped := slices.Clone(rest)
			if marker == segSessions && len(scoped) > 0 {
				scoped[0] = sessionIDParam(scoped[0]) // the path the client signed has it empty
			}
			rt.scope = strings.ToLower(strings.Join(append(append(entity, marker), scoped...), "/"))
			return rt, folded, orig, true
		}
	}
	segs, ok := decodeSegments(raw)
	if !ok || len(segs) == 0 {
		return route{}, nil, nil, false
	}
	scope := strings.ToLower(strings.Join(segs, "/"))
	// A marker may also hide inside an encoded segment ("/a%2Fb%2Fmessages").
	for _, markers := range [][]string{{segMessages, segSessions}, {segSubscriptions}} {
		for k := 1; k < len(segs); k++ {
			if marker := strings.ToLower(segs[k]); isMarker(marker, markers) {
				rt, folded, orig := rs.markerPath(marker, strings.Join(segs[:k], "/"), segs[k+1:])
				rt.scope = scope
				return rt, folded, orig, true
			}
		}
	}
	// A path starting with '$' is the namespace's ("$Resources/Queues", "$namespaceinfo"; no
	// entity name starts with '$'), its literals in any casing. Any other is an entity path,
	// or one of sbgate's own ("healthz", "metrics"), matched as written.
	if strings.HasPrefix(segs[0], "$") {
		orig := make([]string, len(segs))
		folded := make([]string, len(segs))
		for i, s := range segs {
			orig[i] = url.PathEscape(s)
			folded[i] = rs.fold(s)
		}
		return route{entity: strings.Join(segs, "/"), scope: scope, dollar: true}, folded, orig, true
	}
	entity := strings.Join(segs, "/")
	one := []string{url.PathEscape(entity)}
	return route{entity: entity, scope: scope}, one, one, true
}

func isMarker(seg string, markers []string) bool {
	for _, m := range markers {
		if seg == m {
			return true
		}
	}
	return false
}

// fold is a segment in the spec's casing when it is one of its literals, else escaped as is.
func (rs *routes) fold(seg string) string {
	if lit, ok := rs.literals[strings.ToLower(seg)]; ok {
		return lit
	}
	return url.PathEscape(seg)
}

// markerPath is the canonical path of entity, a marker and what follows it (decoded).
func (rs *routes) markerPath(marker, entity string, rest []string) (route, []string, []string) {
	rt := route{entity: entity}
	if marker == segSubscriptions && len(rest) > 0 {
		// The route's entity is the subscription (for errors and for the topic's keys).
		rt.entity = broker.SubscriptionPath(entity, rest[0])
	}
	head := []string{url.PathEscape(entity), rs.fold(marker)}
	folded := append([]string(nil), head...)
	orig := append([]string(nil), head...)
	for _, s := range rest {
		folded = append(folded, rs.fold(s))
		orig = append(orig, url.PathEscape(s))
	}
	return rt, folded, orig
}

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

// splitSubQueue splits "x/$DeadLetterQueue" (any casing) into "x" and the dead-letter subqueue,
// as every door does (access.SplitSubQueue), and says whether it had the suffix.
func splitSubQueue(entity string) (string, broker.SubQueue, bool) {
	path, sq := access.SplitSubQueue(entity)
	return path, sq, sq == broker.SubQueueDeadLetter
}
