package rest

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// authorize checks the request's SAS token (protocol.md §5) through the access layer the AMQP
// door shares: signed by a namespace key, or by a key of the entity the request addresses (its
// AuthorizationRules), not expired, scoped to a prefix of the request path, with the right the
// operation needs. Every failure is a 401 with the service's wording. It returns who the caller
// is.
func (s *Server) authorize(r *http.Request, rt route) (caller, error) {
	text, err := sas.FromHeaders(r.Header)
	if err != nil {
		return caller{}, unauthorized(err.Error())
	}
	g, err := s.access.Verify(r.Context(), text, rt.entity)
	if err != nil {
		return caller{}, unauthorized(err.Error())
	}
	if !rt.op.anyScope && !g.Covers(r.Host, rt.scope) {
		return caller{}, unauthorized(access.AudienceText)
	}
	c := caller{grant: g}
	if need := rt.op.right; !g.Rights.Has(need) {
		if rt.op.management() {
			return c, s.manageDenied(r, rt)
		}
		return caller{}, unauthorized(access.MissingRightText(need, "sb://"+r.Host+"/"+rt.scope))
	}
	return c, nil
}

// caller is what a request's token proved (see access.Grant): whether a namespace key signed it
// (an entity's key opens that entity only), its scope, and the rights of its key.
type caller struct{ grant access.Grant }

// Supplementary authorization headers: a token proving Send rights on a forwarding target.
const (
	headerSupplementary    = "ServiceBusSupplementaryAuthorization"
	headerDlqSupplementary = "ServiceBusDlqSupplementaryAuthorization"
)

// checkSupplementary authorizes ForwardTo and ForwardDeadLetteredMessagesTo (protocol.md §4.13).
// Naming a target lets every message of the entity be written into it, so the caller must prove
// Send on the target itself, by either
//   - the request's own token, when a namespace key signed it and its scope (sr) covers the
//     target as well as the entity: a token scoped to queue C proves nothing about queue B,
//     whatever key signed it; or
//   - a supplementary token in the header that goes with the property, signed by a namespace
//     key or a key of the target, unexpired, with Send, and scoped to cover the target. Clients
//     sign it differently (protocol.md §4.13): JS just the host (read as namespace-wide when it
//     is the request's Host: sas.Token.CoversAt), Go the raw target, Python the sb:// URI of the
//     target.
//
// Every refusal reads the same whether the target exists or not, so the check cannot be used
// to discover entities; only a caller that passed it sees the store's "doesn't exist" answer,
// and such a caller can send to the target and learn that anyway.
func (s *Server) checkSupplementary(r *http.Request, p broker.Properties) error {
	c := callerFrom(r.Context())
	for _, f := range []struct{ target, header string }{
		{p.ForwardTo, headerSupplementary}, {p.ForwardDeadLetteredMessagesTo, headerDlqSupplementary},
	} {
		if f.target == "" {
			continue
		}
		target := forwardTargetPath(f.target)
		text := r.Header.Get(f.header)
		if text == "" {
			if c.grant.Namespace() && c.grant.Rights.Has(sas.Send) && c.grant.Covers(r.Host, target) {
				continue
			}
			return unauthorized(f.header + " is required to forward to '" + broker.Clip(f.target) +
				"': a token signed by a namespace key whose scope covers it, or by a key of the target, with 'Send' claim(s).")
		}
		g, err := s.access.Verify(r.Context(), text, target)
		if err != nil {
			return unauthorized(f.header + ": " + err.Error())
		}
		if !g.Covers(r.Host, target) {
			return unauthorized(f.header + ": " + access.AudienceText)
		}
		if !g.Rights.Has(sas.Send) {
			return unauthorized(f.header + ": 'Send' claim(s) are required on '" + broker.Clip(f.target) + "'.")
		}
	}
	return nil
}

// forwardTargetPath is the entity path of a forwarding target given as a path or sb://host/path.
func forwardTargetPath(t string) string {
	if u, err := url.Parse(t); err == nil && u.Scheme != "" {
		return strings.Trim(u.Path, "/")
	}
	return strings.Trim(t, "/")
}

func unauthorized(detail string) error {
	return &broker.Error{Code: codeUnauthorized, Message: detail}
}

func pathUnescape(p string) (string, error) { return url.PathUnescape(p) }
