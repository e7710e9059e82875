package handlers

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// authorize checks the request's SAS token (protocol.md §5): signed by a namespace key, not
// expired, scoped to a prefix of the request path, with the right the operation needs. Every
// failure is a 401 with the service's wording.
func (s *Server) authorize(r *http.Request, rt route) error {
	text, err := sas.FromHeaders(r.Header)
	if err != nil {
		return unauthorized(err.Error())
	}
	tok, err := sas.ParseToken(text)
	if err != nil {
		return unauthorized(tokenErrorText(err))
	}
	key, err := tok.Verify(s.cfg.Keys, s.now(), s.cfg.ClockSkew)
	if err != nil {
		return unauthorized(tokenErrorText(err))
	}
	if rt.op != opNamespaceInfo && !tok.Covers(rt.scope) {
		return unauthorized("InvalidAudience: The token's resource does not cover '" + truncate(rt.scope) + "'.")
	}
	if need := rt.right(); !key.Rights.Has(need) {
		return unauthorized("Unauthorized access. '" + need.ClaimText() + "' claim(s) are required to perform this operation. Resource: 'sb://" +
			r.Host + "/" + truncate(rt.scope) + "'.")
	}
	return nil
}

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
