package sas

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{
		azureSBToken, goToken, dotnetToken,
		"",
		"Bearer x",
		"SharedAccessSignature",
		"SharedAccessSignature sr=a&sig=AQID&se=1&skn=k",
		"sharedaccesssignature   skn=my%2Dkey&x=1&se=007&sig=AQID&sr=sb%3a%2f%2fns%2f",
		"SharedAccessSignature sr=a&sr=b&sig=AQID&se=1&skn=k",
		"SharedAccessSignature sr=a%zz&sig=AQ%3D%3D&se=99999999999999999999&skn=k&",
		"SharedAccessSignature sr=&sig=&se=&skn=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, err := ParseToken(header)
		if err != nil {
			if !errors.Is(err, ErrMissingToken) && !errors.Is(err, ErrUnsupportedScheme) && !errors.Is(err, ErrMalformedToken) {
				t.Fatalf("ParseToken(%q) error = %v; want a sentinel", header, err)
			}
			return
		}
		if tok.Resource == "" || len(tok.Signature) == 0 || tok.KeyName == "" || tok.Expiry < 0 {
			t.Fatalf("ParseToken(%q) = %+v; want every field set", header, tok)
		}
		if n, err := strconv.ParseInt(tok.rawExpiry, 10, 64); err != nil || n != tok.Expiry {
			t.Fatalf("ParseToken(%q): raw se %q does not match Expiry %d", header, tok.rawExpiry, tok.Expiry)
		}
		if !strings.Contains(header, "sr="+tok.Resource) || !strings.Contains(header, "se="+tok.rawExpiry) {
			t.Fatalf("ParseToken(%q) = %+v; sr or se is not the text as sent", header, tok)
		}
		tok.Covers("q/messages")

		// The signature covers exactly Resource and the raw se: re-signing those with a known
		// key must verify, and never be judged expired at the Unix epoch.
		keys := []Key{{Name: tok.KeyName, Primary: "fuzz-key", Rights: Send}}
		if _, err := tok.Verify(keys, time.Unix(0, 0), 0); !errors.Is(err, ErrInvalidSignature) && err != nil {
			t.Fatalf("Verify(%q) error = %v", header, err)
		}
		tok.Signature = signature("fuzz-key", tok.Resource, tok.rawExpiry)
		if _, err := tok.Verify(keys, time.Unix(0, 0), 0); err != nil {
			t.Fatalf("Verify(%q) with a re-signed token: %v", header, err)
		}
	})
}

// isEntityPath reports whether p uses only characters entity names allow ('$' for system
// paths such as $DeadLetterQueue), so that Covers has a definite answer for it.
func isEntityPath(p string) bool {
	for _, c := range p {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '-' || c == '_' || c == '$' || c == '/') {
			return false
		}
	}
	return true
}

func FuzzCovers(f *testing.F) {
	f.Add(azureSBSr, "myqueue/messages")
	f.Add(goSr, "q1")
	f.Add(dotnetSr, "q1/$DeadLetterQueue")
	f.Add("sb%3a%2f%2fns.servicebus.windows.net%2f", "a/b/c")
	f.Add("sb%3A%2F%2Fns%2Fq", "q2")
	f.Add("%", "")
	f.Fuzz(func(t *testing.T, sr, entity string) {
		(Token{Resource: sr}).Covers(entity) // must not panic

		// A token Sign made for an entity covers that entity and what lies below it, and
		// nothing that only shares a prefix of its last segment.
		if !isEntityPath(entity) {
			return
		}
		tok, err := ParseToken(Sign("sb://ns.servicebus.windows.net/"+entity, "k", "key", time.Unix(1, 0)))
		if err != nil {
			t.Fatalf("ParseToken(Sign(%q)) error = %v", entity, err)
		}
		for _, p := range []string{entity, entity + "/messages", strings.ToUpper(entity)} {
			if !tok.Covers(p) {
				t.Fatalf("token for %q: Covers(%q) = false; want true", entity, p)
			}
		}
		if strings.Trim(entity, "/") != "" && tok.Covers(strings.Trim(entity, "/")+"x") {
			t.Fatalf("token for %q: Covers(%q) = true; want false", entity, entity+"x")
		}
	})
}

func FuzzParseRights(f *testing.F) {
	for _, s := range []string{"Send", "listen,MANAGE", "", "Send,,Listen", " Manage "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRights(strings.Split(s, ","))
		if err != nil {
			if !errors.Is(err, ErrInvalidRights) {
				t.Fatalf("ParseRights(%q) error = %v; want %v", s, err, ErrInvalidRights)
			}
			return
		}
		if r == 0 || r&^(Send|Listen|Manage) != 0 {
			t.Fatalf("ParseRights(%q) = %d; want a non-empty set of known rights", s, uint8(r))
		}
		if again, err := ParseRights(strings.Split(r.String(), ",")); err != nil || again != r {
			t.Fatalf("ParseRights(%q) = %q, %v; want %q", r.String(), again, err, r)
		}
	})
}
