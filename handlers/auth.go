package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// authorize checks the request's SAS token (protocol.md §5): signed by a namespace key, or by a
// key of the entity the request addresses (its AuthorizationRules), not expired, scoped to a
// prefix of the request path, with the right the operation needs. Every failure is a 401 with
// the service's wording. It returns who the caller is.
func (s *Server) authorize(r *http.Request, rt route) (caller, error) {
	text, err := sas.FromHeaders(r.Header)
	if err != nil {
		return caller{}, unauthorized(err.Error())
	}
	tok, err := sas.ParseToken(text)
	if err != nil {
		return caller{}, unauthorized(tokenErrorText(err))
	}
	key, err := tok.Verify(s.namespaceKeys(r.Context()), s.now(), s.cfg.ClockSkew)
	namespaceKey := err == nil
	if errors.Is(err, sas.ErrUnknownKey) {
		key, err = s.verifyEntityKey(r, rt, tok)
	}
	if err != nil {
		return caller{}, unauthorized(tokenErrorText(err))
	}
	if !rt.op.anyScope && !tok.Covers(rt.scope) {
		return caller{}, unauthorized("InvalidAudience: The token's resource does not cover '" + store.Clip(rt.scope) + "'.")
	}
	if need := rt.op.right; !key.Rights.Has(need) {
		if rt.op.management() {
			return caller{namespaceKey: namespaceKey, token: tok, rights: key.Rights}, s.manageDenied(r, rt)
		}
		return caller{}, unauthorized("Unauthorized access. '" + need.ClaimText() + "' claim(s) are required to perform this operation. Resource: 'sb://" +
			r.Host + "/" + store.Clip(rt.scope) + "'.")
	}
	return caller{namespaceKey: namespaceKey, token: tok, rights: key.Rights}, nil
}

// caller is what a request's token proved: whether a namespace key signed it (an entity's key
// opens that entity only), its scope, and the rights of its key.
type caller struct {
	namespaceKey bool
	token        sas.Token
	rights       sas.Rights
}

type callerCtx struct{}

// verifyEntityKey checks tok against the keys of the queue or topic the request addresses (a
// subscription's are its topic's). Such a key opens that entity only: any other request has no
// entity to take keys from, or another entity's keys.
func (s *Server) verifyEntityKey(r *http.Request, rt route, tok sas.Token) (sas.Key, error) {
	keys, err := s.entityKeys(r, authEntity(rt.entity))
	if err != nil || len(keys) == 0 {
		return sas.Key{}, sas.ErrUnknownKey
	}
	return tok.Verify(keys, s.now(), s.cfg.ClockSkew)
}

// entityKeys returns the shared access keys of the entity at path.
func (s *Server) entityKeys(r *http.Request, path string) ([]sas.Key, error) {
	if path == "" {
		return nil, nil
	}
	e, err := s.store.Resolve(r.Context(), path)
	if err != nil {
		return nil, err
	}
	keys := make([]sas.Key, 0, len(e.Props.AuthorizationRules))
	for _, rule := range e.Props.AuthorizationRules {
		rights, err := sas.ParseRights(rule.Rights)
		if err != nil {
			continue
		}
		keys = append(keys, sas.Key{Name: rule.KeyName, Primary: rule.PrimaryKey, Secondary: rule.SecondaryKey, Rights: rights})
	}
	return keys, nil
}

// authEntity is the queue or topic whose keys guard a request's entity path: the path without
// a dead-letter suffix, a session part, or a subscription part.
func authEntity(entity string) string {
	entity, _, _ = splitSubQueue(entity)
	if topic, _, ok := store.SplitSubscriptionPath(entity); ok {
		return topic
	}
	return entity
}

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
func (s *Server) checkSupplementary(r *http.Request, p store.Properties) error {
	c, _ := r.Context().Value(callerCtx{}).(caller)
	for _, f := range []struct{ target, header string }{
		{p.ForwardTo, headerSupplementary}, {p.ForwardDeadLetteredMessagesTo, headerDlqSupplementary},
	} {
		if f.target == "" {
			continue
		}
		target := forwardTargetPath(f.target)
		text := r.Header.Get(f.header)
		if text == "" {
			if c.namespaceKey && c.rights.Has(sas.Send) && c.token.Covers(target) {
				continue
			}
			return unauthorized(f.header + " is required to forward to '" + store.Clip(f.target) +
				"': a token signed by a namespace key whose scope covers it, or by a key of the target, with 'Send' claim(s).")
		}
		tok, err := sas.ParseToken(text)
		if err != nil {
			return unauthorized(f.header + ": " + tokenErrorText(err))
		}
		key, err := tok.Verify(s.namespaceKeys(r.Context()), s.now(), s.cfg.ClockSkew)
		if errors.Is(err, sas.ErrUnknownKey) {
			keys, kerr := s.entityKeys(r, authEntity(target))
			if kerr == nil && len(keys) > 0 {
				key, err = tok.Verify(keys, s.now(), s.cfg.ClockSkew)
			}
		}
		if err != nil {
			return unauthorized(f.header + ": " + tokenErrorText(err))
		}
		if !tok.CoversAt(r.Host, target) {
			return unauthorized(f.header + ": InvalidAudience: The token's resource does not cover '" + store.Clip(target) + "'.")
		}
		if !key.Rights.Has(sas.Send) {
			return unauthorized(f.header + ": 'Send' claim(s) are required on '" + store.Clip(f.target) + "'.")
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

// tokenErrorText is the 401 detail of a token error: the sas sentinels carry the service's texts.
// An unknown key name reads exactly like a wrong signature, so a 401 never tells a caller which
// key names exist on the namespace or on an entity (or whether the entity exists).
func tokenErrorText(err error) string {
	if errors.Is(err, sas.ErrUnknownKey) {
		return sas.ErrInvalidSignature.Error()
	}
	for _, sentinel := range []error{sas.ErrMissingToken, sas.ErrUnsupportedScheme,
		sas.ErrInvalidSignature, sas.ErrExpiredToken} {
		if errors.Is(err, sentinel) {
			return sentinel.Error()
		}
	}
	return err.Error() // malformed tokens: a fixed text that never echoes the request
}

func unauthorized(detail string) error {
	return &store.Error{Code: codeUnauthorized, Message: detail}
}

func pathUnescape(p string) (string, error) { return url.PathUnescape(p) }
