package rest

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/api"
)

// The operations every message goes through (send, peek-lock, complete) skip the generated
// router: front has found the operation and authorized the request already, and the generated
// router would route it a second time and its wrapper bind the parameters by reflection, 6% of
// the gateway's CPU in a peek-lock + complete profile. A fast binder reads the parameters of a
// request whose parameters are plain (path segments that decode, a lock token in its canonical
// form, a timeout of digits, no query parameter given twice, one BrokerProperties header) as
// the wrapper reads them; any other request goes through the generated router, which answers
// it, and refuses what it refuses, as it always did. TestFastBindersBindAsTheWrapper holds the
// two to the same arguments.

// fastBinder calls the operation's handler in h when it can bind the request's parameters itself
// (segs: the canonical path's segments, still escaped), and reports whether it did.
type fastBinder func(h api.ServerInterface, w http.ResponseWriter, r *http.Request, segs []string) bool

// fastBinders are by operationId.
var fastBinders = map[string]fastBinder{
	"SendMessage":     fastSend,
	"PeekLockMessage": fastPeekLock,
	"CompleteMessage": fastComplete,
}

// serveFast serves the request with its operation's fast binder, when it has one that can bind
// the request; it reports whether it did.
func (s *Server) serveFast(w http.ResponseWriter, r *http.Request, rt route) bool {
	bind := fastBinders[rt.op.id]
	if bind == nil {
		return false
	}
	return bind(s, w, r, strings.Split(strings.TrimPrefix(r.URL.RawPath, "/"), "/"))
}

func fastSend(h api.ServerInterface, w http.ResponseWriter, r *http.Request, segs []string) bool {
	entity, ok := pathParam(segs, 0, 2)
	if !ok {
		return false
	}
	var params api.SendMessageParams
	if params.ApiVersion, ok = queryParams(r, nil); !ok {
		return false
	}
	if bp, has := r.Header["Brokerproperties"]; has {
		if len(bp) != 1 {
			return false
		}
		params.BrokerProperties = &bp[0]
	}
	h.SendMessage(w, r, entity, params)
	return true
}

func fastPeekLock(h api.ServerInterface, w http.ResponseWriter, r *http.Request, segs []string) bool {
	entity, ok := pathParam(segs, 0, 3)
	if !ok {
		return false
	}
	var params api.PeekLockMessageParams
	if params.ApiVersion, ok = queryParams(r, &params.Timeout); !ok {
		return false
	}
	h.PeekLockMessage(w, r, entity, params)
	return true
}

func fastComplete(h api.ServerInterface, w http.ResponseWriter, r *http.Request, segs []string) bool {
	entity, ok := pathParam(segs, 0, 4)
	if !ok {
		return false
	}
	messageID, ok := pathParam(segs, 2, 4)
	if !ok {
		return false
	}
	text, ok := pathParam(segs, 3, 4)
	if !ok || len(text) != 36 {
		return false
	}
	token, err := uuid.Parse(text)
	if err != nil {
		return false
	}
	var params api.CompleteMessageParams
	if params.ApiVersion, ok = queryParams(r, nil); !ok {
		return false
	}
	h.CompleteMessage(w, r, entity, messageID, token, params)
	return true
}

// pathParam is segment i of a canonical path of n segments, decoded, as the wrapper binds a
// required path parameter; ok is false for anything else.
func pathParam(segs []string, i, n int) (string, bool) {
	if len(segs) != n {
		return "", false
	}
	v, err := url.PathUnescape(segs[i])
	return v, err == nil && v != ""
}

// queryParams reads the query the operations share: api-version and, when timeout is not nil,
// a timeout of digits. ok is false for a query the wrapper should read (one that does not
// parse, a known parameter given twice, a timeout that is not a plain number).
func queryParams(r *http.Request, timeout **int) (apiVersion *string, ok bool) {
	if r.URL.RawQuery == "" {
		return nil, true
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, false
	}
	if v, has := q["api-version"]; has {
		if len(v) != 1 {
			return nil, false
		}
		apiVersion = &v[0]
	}
	if v, has := q["timeout"]; has && timeout != nil {
		if len(v) != 1 || len(v[0]) == 0 || len(v[0]) > 9 || strings.Trim(v[0], "0123456789") != "" {
			return nil, false
		}
		n, _ := strconv.Atoi(v[0])
		*timeout = &n
	}
	return apiVersion, true
}
