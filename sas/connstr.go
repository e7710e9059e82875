package sas

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ConnectionString is a parsed Service Bus connection string
// ("Endpoint=sb://host:port/;SharedAccessKeyName=...;SharedAccessKey=...").
type ConnectionString struct {
	// Endpoint is the namespace's HTTP base URL. An sb:// endpoint becomes http:// when
	// UseDevelopmentEmulator or the caller's default says plain HTTP, else https://.
	Endpoint *url.URL
	KeyName  string
	Key      string
	// Signature is a pre-made token (SharedAccessSignature=...), used as-is when set.
	Signature string
}

// ErrConnectionString is wrapped by every ParseConnectionString error.
var ErrConnectionString = errors.New("invalid connection string")

// ParseConnectionString parses s. An sb:// endpoint maps to scheme sbScheme ("http" for sbgate,
// which serves plain HTTP unless given a certificate, or "https"). Keys are case-insensitive;
// unknown keys are ignored. Errors wrap ErrConnectionString.
func ParseConnectionString(s, sbScheme string) (ConnectionString, error) {
	var cs ConnectionString
	var endpoint string
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return cs, fmt.Errorf("%w: %q is not key=value", ErrConnectionString, part)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "endpoint":
			endpoint = strings.TrimSpace(v)
		case "sharedaccesskeyname":
			cs.KeyName = strings.TrimSpace(v)
		case "sharedaccesskey":
			cs.Key = strings.TrimSpace(v)
		case "sharedaccesssignature":
			cs.Signature = strings.TrimSpace(v)
		}
	}
	if endpoint == "" {
		return cs, fmt.Errorf("%w: no Endpoint", ErrConnectionString)
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return cs, fmt.Errorf("%w: Endpoint %q is not a URL", ErrConnectionString, endpoint)
	}
	switch u.Scheme {
	case "sb":
		u.Scheme = sbScheme
	case "http", "https":
	default:
		return cs, fmt.Errorf("%w: Endpoint scheme %q (want sb, http or https)", ErrConnectionString, u.Scheme)
	}
	u.Path = "/"
	u.RawQuery = ""
	cs.Endpoint = u
	if cs.Signature == "" && (cs.KeyName == "" || cs.Key == "") {
		return cs, fmt.Errorf("%w: SharedAccessKeyName and SharedAccessKey are required", ErrConnectionString)
	}
	return cs, nil
}

// Token returns the Authorization header value for the namespace, valid until expiry: the
// pre-made signature if the connection string has one, else a token signed for the endpoint.
func (cs ConnectionString) Token(expiry time.Time) string {
	if cs.Signature != "" {
		return cs.Signature
	}
	return Sign(cs.Endpoint.String(), cs.KeyName, cs.Key, expiry)
}
