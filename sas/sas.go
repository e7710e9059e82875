// Package sas parses, signs and verifies Service Bus shared access signature tokens.
//
// The rules follow docs/protocol.md §5: the signature is an HMAC-SHA256 over the sr and se
// values exactly as they appear in the header, keyed with the configured key string's bytes;
// the sr value also limits which entities the token may be used for (see [Token.Covers]).
package sas

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Sentinel errors, compared with errors.Is. Each message is written to be usable as the Detail
// of a Service Bus 401 response, so handlers need no second table of texts. Errors returned by
// this package may wrap a sentinel with a short extra detail; their Error text keeps the
// sentinel's wording as a prefix.
var (
	ErrMissingToken      = errors.New("MissingToken: The authorization header was not found.")
	ErrMalformedToken    = errors.New("MalformedToken: The credentials contained in the authorization header are not in the WRAP format.")
	ErrUnsupportedScheme = errors.New("UnsupportedToken: Bearer (Entra ID) tokens are not supported; use a SharedAccessSignature token.")
	ErrUnknownKey        = errors.New("InvalidSignature: The token has an invalid signature; no shared access key with that name.")
	ErrInvalidSignature  = errors.New("InvalidSignature: The token has an invalid signature.")
	ErrExpiredToken      = errors.New("ExpiredToken: The token is expired.")
	ErrInvalidRights     = errors.New("sas: invalid rights")
)

// detailError adds a fixed detail to a sentinel. The detail never contains text taken from the
// request: the error ends up in a response body and in logs.
type detailError struct {
	sentinel error
	detail   string
}

func (e *detailError) Error() string {
	return strings.TrimSuffix(e.sentinel.Error(), ".") + "; " + e.detail + "."
}

func (e *detailError) Unwrap() error { return e.sentinel }

func malformed(detail string) error {
	return &detailError{sentinel: ErrMalformedToken, detail: detail}
}

// Header names a token may arrive in.
const (
	HeaderAuthorization           = "Authorization"
	HeaderServiceBusAuthorization = "ServiceBusAuthorization"
)

// FromHeaders returns the token text of a request. Authorization is preferred; the
// ServiceBusAuthorization header is used when Authorization is empty or holds something other
// than a SharedAccessSignature, because a proxy in front of the gateway may claim Authorization
// for itself. When only a non-SAS Authorization value is present it is returned as is, so that
// [ParseToken] can say what is wrong with it (a Bearer token gets [ErrUnsupportedScheme], which
// tells the user more than "not found").
//
// It returns [ErrMissingToken] when both headers are empty.
func FromHeaders(h http.Header) (string, error) {
	auth := strings.TrimSpace(h.Get(HeaderAuthorization))
	if isSAS(auth) {
		return auth, nil
	}
	if sb := strings.TrimSpace(h.Get(HeaderServiceBusAuthorization)); sb != "" {
		return sb, nil
	}
	if auth != "" {
		return auth, nil
	}
	return "", ErrMissingToken
}

// isSAS reports whether v starts with the SharedAccessSignature scheme.
func isSAS(v string) bool {
	scheme, _, _ := strings.Cut(v, " ")
	return strings.EqualFold(scheme, schemeSAS)
}

// GenerateKey returns a new random key: 32 bytes from crypto/rand, base64-encoded to 44
// characters, the same shape as the keys Azure generates. Clients use the text itself as the
// HMAC key, so it is stored and compared as text.
//
// It returns an error only if the system's random source fails.
func GenerateKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}
