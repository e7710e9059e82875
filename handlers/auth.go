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
// the service's wording. It returns whether a namespace key signed the token.
func (s *Server) authorize(r *http.Request, rt route) (namespaceKey bool, err error) {
	text, err := sas.FromHeaders(r.Header)
	if err != nil {
		return false, unauthorized(err.Error())
	}
	tok, err := sas.ParseToken(text)
	if err != nil {
		return false, unauthorized(tokenErrorText(err))
	}
	key, err := tok.Verify(s.namespaceKeys(r.Context()), s.now(), s.cfg.ClockSkew)
	namespaceKey = err == nil
	if errors.Is(err, sas.ErrUnknownKey) {
		key, err = s.verifyEntityKey(r, rt, tok)
	}
	if err != nil {
		return false, unauthorized(tokenErrorText(err))
	}
	if rt.op != opNamespaceInfo && !tok.Covers(rt.scope) {
		return false, unauthorized("InvalidAudience: The token's resource does not cover '" + truncate(rt.scope) + "'.")
	}
	if need := rt.right(); !key.Rights.Has(need) {
		if need == sas.Manage && isManagement(rt.op) {
			return namespaceKey, s.manageDenied(r, rt)
		}
		return false, unauthorized("Unauthorized access. '" + need.ClaimText() + "' claim(s) are required to perform this operation. Resource: 'sb://" +
			r.Host + "/" + truncate(rt.scope) + "'.")
	}
	return namespaceKey, nil
}

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

// checkSupplementary checks the tokens that come with ForwardTo and ForwardDeadLetteredMessagesTo
// (protocol.md §4.13): when present, each must be validly signed, by a namespace key or a key of
// the target, unexpired, with Send rights; its scope is not checked (clients sign the host, the
// raw target or a full URI). Without one, only a caller holding a namespace key may forward,
// because a caller with an entity key proves nothing about the target.
func (s *Server) checkSupplementary(r *http.Request, p store.Properties) error {
	namespaceKey, _ := r.Context().Value(namespaceKeyCtx{}).(bool)
	for _, f := range []struct{ target, header string }{
		{p.ForwardTo, headerSupplementary}, {p.ForwardDeadLetteredMessagesTo, headerDlqSupplementary},
	} {
		if f.target == "" {
			continue
		}
		text := r.Header.Get(f.header)
		if text == "" {
			if namespaceKey {
				continue
			}
			return unauthorized(f.header + " is required to forward to '" + truncate(f.target) + "'.")
		}
		tok, err := sas.ParseToken(text)
		if err != nil {
			return unauthorized(f.header + ": " + tokenErrorText(err))
		}
		key, err := tok.Verify(s.namespaceKeys(r.Context()), s.now(), s.cfg.ClockSkew)
		if errors.Is(err, sas.ErrUnknownKey) {
			keys, kerr := s.entityKeys(r, forwardTargetPath(f.target))
			if kerr == nil && len(keys) > 0 {
				key, err = tok.Verify(keys, s.now(), s.cfg.ClockSkew)
			}
		}
		if err != nil {
			return unauthorized(f.header + ": " + tokenErrorText(err))
		}
		if !key.Rights.Has(sas.Send) {
			return unauthorized(f.header + ": 'Send' claim(s) are required on '" + truncate(f.target) + "'.")
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

type namespaceKeyCtx struct{}

// tokenErrorText is the 401 detail of a token error: the sas sentinels carry the service's texts.
func tokenErrorText(err error) string {
	for _, sentinel := range []error{sas.ErrMissingToken, sas.ErrUnsupportedScheme, sas.ErrUnknownKey,
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
