package sas

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	schemeSAS    = "SharedAccessSignature"
	schemeBearer = "Bearer"
)

// maxExpiry caps se before it is turned into a time.Time: time.Unix overflows for values near
// the int64 limit, and a token valid until 9999-12-31 is as good as one valid forever.
const maxExpiry = 253402300799 // 9999-12-31T23:59:59Z

// Token is a parsed "SharedAccessSignature sr=...&sig=...&se=...&skn=..." header value.
type Token struct {
	Resource  string // sr exactly as it appears in the header (still URL-encoded): it is what was signed
	Signature []byte // sig, URL-decoded then base64-decoded
	Expiry    int64  // se, Unix seconds
	KeyName   string // skn, URL-decoded

	// rawExpiry is se exactly as sent. The signature covers this text, not Expiry
	// re-formatted; the two differ only for leading zeros, but signing what was sent is the
	// rule every client relies on. Empty for a Token built by hand, in which case Verify
	// formats Expiry.
	rawExpiry string
}

// ParseToken parses an Authorization header value of the form
// "SharedAccessSignature sr=...&sig=...&se=...&skn=...". The scheme is matched
// case-insensitively and followed by one or more spaces; the pairs may come in any order and
// are split on '&', then on the first '='. Pairs with other names are ignored, as they are not
// signed and carry nothing the gateway uses.
//
// It returns [ErrMissingToken] for an empty value, [ErrUnsupportedScheme] for a Bearer token,
// and an error wrapping [ErrMalformedToken] for any other scheme, a pair without '=', a
// repeated name, a missing or empty sr, sig, se or skn, an se that is not a non-negative
// decimal number, or an sr, sig or skn that does not decode.
func ParseToken(header string) (Token, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return Token{}, ErrMissingToken
	}
	scheme, params, _ := strings.Cut(header, " ")
	switch {
	case strings.EqualFold(scheme, schemeBearer):
		return Token{}, ErrUnsupportedScheme
	case !strings.EqualFold(scheme, schemeSAS):
		return Token{}, malformed("the scheme is not SharedAccessSignature")
	}
	params = strings.TrimLeft(params, " ")
	if params == "" {
		return Token{}, malformed("no parameters")
	}

	var sr, sig, se, skn string
	seen := map[string]bool{}
	for pair := range strings.SplitSeq(params, "&") {
		name, value, ok := strings.Cut(pair, "=")
		if !ok {
			return Token{}, malformed("a parameter has no '='")
		}
		if seen[name] {
			return Token{}, malformed("a parameter is repeated")
		}
		seen[name] = true
		switch name {
		case "sr":
			sr = value
		case "sig":
			sig = value
		case "se":
			se = value
		case "skn":
			skn = value
		}
	}
	for _, p := range [...]struct{ name, value string }{
		{"sr", sr}, {"sig", sig}, {"se", se}, {"skn", skn},
	} {
		if p.value == "" {
			return Token{}, malformed("missing " + p.name)
		}
	}

	// Covers decodes sr later; rejecting bad escapes here keeps that failure out of the
	// authorization decision.
	if _, err := url.QueryUnescape(sr); err != nil {
		return Token{}, malformed("sr is not URL-encoded correctly")
	}
	expiry, ok := parseExpiry(se)
	if !ok {
		return Token{}, malformed("se is not a Unix time in seconds")
	}
	// PathUnescape, not QueryUnescape: base64 never contains a space, so a literal '+' from a
	// client that forgot to encode sig can only mean '+'.
	sigText, err := url.PathUnescape(sig)
	if err != nil {
		return Token{}, malformed("sig is not URL-encoded correctly")
	}
	signature, err := base64.StdEncoding.DecodeString(sigText)
	if err != nil || len(signature) == 0 {
		return Token{}, malformed("sig is not base64")
	}
	keyName, err := url.QueryUnescape(skn)
	if err != nil || keyName == "" {
		return Token{}, malformed("skn is not URL-encoded correctly")
	}
	return Token{
		Resource:  sr,
		Signature: signature,
		Expiry:    expiry,
		KeyName:   keyName,
		rawExpiry: se,
	}, nil
}

// parseExpiry accepts only ASCII digits: strconv.ParseInt would also take a sign, which no
// client sends.
func parseExpiry(se string) (int64, bool) {
	for i := 0; i < len(se); i++ {
		if se[i] < '0' || se[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(se, 10, 64)
	return n, err == nil
}

// Sign returns an Authorization header value granting access to resourceURI until expiry,
// signed with the policy keyName and its key. The key string's bytes are the HMAC key (Service
// Bus keys are base64 text, but clients do not decode them). sr and sig are encoded with
// url.QueryEscape, as the Go SDK does, and the string-to-sign uses the encoded sr.
func Sign(resourceURI, keyName, key string, expiry time.Time) string {
	sr := url.QueryEscape(resourceURI)
	se := strconv.FormatInt(expiry.Unix(), 10)
	sig := base64.StdEncoding.EncodeToString(signature(key, sr, se))
	return schemeSAS + " sr=" + sr + "&sig=" + url.QueryEscape(sig) + "&se=" + se + "&skn=" + url.QueryEscape(keyName)
}

// signature is HMAC-SHA256 over the string-to-sign of docs/protocol.md §5.2.
func signature(key, sr, se string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(sr + "\n" + se))
	return m.Sum(nil)
}

// Key is one shared access policy: a name, a primary and a secondary key (either may be used
// to sign, so keys can be rotated without downtime), and the rights it grants.
type Key struct {
	Name      string
	Primary   string
	Secondary string
	Rights    Rights
}

// Verify checks t against keys and returns the key that signed it. The key is found by exact,
// case-sensitive name; the signature is recomputed over t.Resource and the se text as sent,
// with the primary and the secondary key, and compared in constant time; then the token is
// expired when now is later than Expiry plus skew (the clock difference tolerated between
// client and gateway).
//
// It returns [ErrUnknownKey] when no key has t's name, [ErrInvalidSignature] when neither of
// its keys produced the signature, and [ErrExpiredToken] when the token has expired. Verify
// does not check scope or rights; see [Token.Covers] and [Rights.Has].
func (t Token) Verify(keys []Key, now time.Time, skew time.Duration) (Key, error) {
	var key Key
	found := false
	for _, k := range keys {
		if k.Name == t.KeyName {
			key, found = k, true
			break
		}
	}
	if !found {
		return Key{}, ErrUnknownKey
	}

	se := t.rawExpiry
	if se == "" {
		se = strconv.FormatInt(t.Expiry, 10)
	}
	// An empty key string is a valid HMAC key that anyone can use, so an unset key must never
	// match. Both keys are tried every time so the timing does not tell which one matched.
	valid := false
	for _, k := range [...]string{key.Primary, key.Secondary} {
		if k != "" && hmac.Equal(signature(k, t.Resource, se), t.Signature) {
			valid = true
		}
	}
	if !valid {
		return Key{}, ErrInvalidSignature
	}

	// Expiry is checked only after the signature so that a forged token learns nothing but
	// "invalid", whatever se it carries.
	expiry := min(max(t.Expiry, 0), maxExpiry)
	if now.After(time.Unix(expiry, 0).Add(skew)) {
		return Key{}, ErrExpiredToken
	}
	return key, nil
}

// Covers reports whether the token's scope (its sr) covers entityPath, following
// docs/protocol.md §5.3. entityPath is the request path without its leading slash, e.g.
// "orders", "orders/messages/head", "t/subscriptions/s", "$resources/queues"; pass the whole
// request path, not just the entity name, because some clients (azure-sb) sign the full
// request URL, "…/orders/messages".
//
// The sr is URL-decoded, lower-cased, stripped of scheme, query, fragment and host (clients
// sign with whatever host and port they dialled, which a proxy may rewrite). An empty path
// is namespace-wide and covers everything; otherwise its segments must equal the first
// segments of entityPath, case-insensitively, so "q" covers "q" and "q/messages" but not
// "q2". An sr without a scheme is read as a path, failing closed ("127.0.0.1:8090" covers
// nothing); CoversAt, which knows the host the client addressed, reads one that begins with that
// host as host[/path]. One that does not decode covers nothing.
func (t Token) Covers(entityPath string) bool { return t.CoversAt("", entityPath) }

// CoversAt is Covers for a client that addressed host (the HTTP Host, the AMQP open's hostname;
// a port is ignored): an sr without a scheme whose first segment is that host is read as
// host[/path] too, so a token signed for the bare namespace ("myns.servicebus.windows.net", as
// the SDKs sign a connection string's SharedAccessSignature) is namespace-wide.
func (t Token) CoversAt(host, entityPath string) bool {
	scope, ok := scopePath(t.Resource, host)
	if !ok {
		return false
	}
	if scope == "" {
		return true
	}
	want := strings.Split(scope, "/")
	have := strings.Split(strings.Trim(entityPath, "/"), "/")
	if len(want) > len(have) {
		return false
	}
	for i, w := range want {
		if !strings.EqualFold(w, have[i]) {
			return false
		}
	}
	return true
}

// scopePath returns the path part of a raw sr, without surrounding slashes; host is the host
// the client addressed ("" when unknown).
func scopePath(sr, host string) (string, bool) {
	s, err := url.QueryUnescape(sr)
	if err != nil {
		return "", false
	}
	s = strings.ToLower(s)
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	// With a scheme, the host (and port) that follows is dropped: clients sign with whatever
	// address they used. Without one the text is taken as a path, failing closed: "q2" covers
	// only q2, never the whole namespace — unless its first segment is the host the client
	// addressed.
	if scheme, rest, ok := strings.Cut(s, "://"); ok && isScheme(scheme) {
		if _, path, ok := strings.Cut(rest, "/"); ok {
			s = path
		} else {
			s = "" // host only: namespace-wide
		}
	} else if first, path, _ := strings.Cut(strings.TrimLeft(s, "/"), "/"); isHost(first, host) {
		s = path
	}
	s = strings.Trim(s, "/")
	// A client that signs an already-escaped request URL (e.g. "%24resources") leaves escapes
	// after one decode. Entity names cannot contain '%', so a second decode cannot change the
	// meaning of a valid path.
	if strings.Contains(s, "%") {
		if p, err := url.PathUnescape(s); err == nil {
			s = strings.Trim(p, "/")
		}
	}
	return s, true
}

// isHost reports whether the first segment of a scheme-less sr names the host the client
// addressed (ports aside) rather than an entity.
func isHost(seg, addressed string) bool {
	if seg == "" || addressed == "" {
		return false
	}
	return strings.EqualFold(hostOnly(seg), hostOnly(addressed))
}

// hostOnly is hostport without its port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// isScheme reports whether s is a URI scheme (RFC 3986 §3.1), so that "sb", "https" and
// "amqps" are all dropped but a path that happens to contain "://" is not.
func isScheme(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
