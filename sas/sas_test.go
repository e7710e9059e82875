package sas

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFromHeaders(t *testing.T) {
	const (
		sasA   = "SharedAccessSignature sr=a&sig=AA%3D%3D&se=1&skn=k"
		sasB   = "SharedAccessSignature sr=b&sig=AA%3D%3D&se=1&skn=k"
		bearer = "Bearer eyJhbGciOi"
		basic  = "Basic dXNlcjpwYXNz"
	)
	tests := []struct {
		name         string
		auth, sbAuth string
		want         string
		wantErr      error
		wantParseErr error // what ParseToken then says about want
	}{
		{name: "authorization", auth: sasA, want: sasA},
		{name: "servicebus only", sbAuth: sasB, want: sasB},
		{name: "both, authorization wins", auth: sasA, sbAuth: sasB, want: sasA},
		{name: "proxy basic auth", auth: basic, sbAuth: sasB, want: sasB},
		{name: "proxy bearer", auth: bearer, sbAuth: sasB, want: sasB},
		{name: "lower-case scheme", auth: "sharedaccesssignature sr=a&sig=AA%3D%3D&se=1&skn=k", sbAuth: sasB, want: "sharedaccesssignature sr=a&sig=AA%3D%3D&se=1&skn=k"},
		{name: "bearer alone", auth: bearer, want: bearer, wantParseErr: ErrUnsupportedScheme},
		{name: "basic alone", auth: basic, want: basic, wantParseErr: ErrMalformedToken},
		{name: "neither", wantErr: ErrMissingToken},
		{name: "blank", auth: "  ", sbAuth: " ", wantErr: ErrMissingToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.auth != "" {
				h.Set("authorization", tt.auth)
			}
			if tt.sbAuth != "" {
				h.Set("servicebusauthorization", tt.sbAuth)
			}
			got, err := FromHeaders(h)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("FromHeaders(%q) = %q, %v; want %q, %v", h, got, err, tt.want, tt.wantErr)
			}
			if tt.wantParseErr != nil {
				if _, err := ParseToken(got); !errors.Is(err, tt.wantParseErr) {
					t.Errorf("ParseToken(%q) error = %v; want %v", got, err, tt.wantParseErr)
				}
			}
		})
	}
}

func TestGenerateKey(t *testing.T) {
	a, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 44 {
		t.Errorf("len(GenerateKey()) = %d; want 44", len(a))
	}
	raw, err := base64.StdEncoding.DecodeString(a)
	if err != nil || len(raw) != 32 {
		t.Errorf("GenerateKey() = %q decodes to %d bytes, %v; want 32 bytes", a, len(raw), err)
	}
	if a == b {
		t.Errorf("GenerateKey() returned %q twice", a)
	}

	// A generated key is usable as is.
	tok, err := ParseToken(Sign("sb://ns/q", "gen", a, time.Unix(2e9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.Verify([]Key{{Name: "gen", Primary: a, Rights: Send}}, time.Unix(1e9, 0), 0); err != nil {
		t.Errorf("Verify with a generated key: %v", err)
	}
}

// The texts go into 401 bodies verbatim; clients and users search them for the code word.
func TestErrorTexts(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{ErrMissingToken, "MissingToken: The authorization header was not found."},
		{ErrExpiredToken, "ExpiredToken: The token is expired."},
		{ErrInvalidSignature, "InvalidSignature: The token has an invalid signature."},
		{ErrUnknownKey, "InvalidSignature: The token has an invalid signature; no shared access key with that name."},
		{ErrMalformedToken, "MalformedToken: The credentials contained in the authorization header are not in the WRAP format."},
		{ErrUnsupportedScheme, "UnsupportedToken: Bearer (Entra ID) tokens are not supported; use a SharedAccessSignature token."},
		{malformed("missing sr"), "MalformedToken: The credentials contained in the authorization header are not in the WRAP format; missing sr."},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q; want %q", got, tt.want)
		}
	}
	if err := malformed("x"); !errors.Is(err, ErrMalformedToken) || !strings.HasPrefix(err.Error(), "MalformedToken: ") {
		t.Errorf("malformed(%q) = %v; want it to wrap ErrMalformedToken", "x", err)
	}
}
