package sas

import (
	"errors"
	"testing"
	"time"
)

func TestParseConnectionString(t *testing.T) {
	for _, tc := range []struct {
		in, scheme, endpoint, keyName, key, sig string
	}{
		{"Endpoint=sb://127.0.0.1:8080/;SharedAccessKeyName=Root;SharedAccessKey=abc=", "http", "http://127.0.0.1:8080/", "Root", "abc=", ""},
		{"endpoint=sb://ns.example/;sharedaccesskeyname=R;sharedaccesskey=k;EntityPath=q", "https", "https://ns.example/", "R", "k", ""},
		{" Endpoint = https://h:1/path?x=1 ; SharedAccessKeyName=R;SharedAccessKey=k;", "http", "https://h:1/", "R", "k", ""},
		{"Endpoint=sb://h/;SharedAccessSignature=SharedAccessSignature sr=a&sig=b&se=1&skn=c", "http", "http://h/", "", "", "SharedAccessSignature sr=a&sig=b&se=1&skn=c"},
	} {
		cs, err := ParseConnectionString(tc.in, tc.scheme)
		if err != nil {
			t.Errorf("ParseConnectionString(%q) error %v", tc.in, err)
			continue
		}
		if cs.Endpoint.String() != tc.endpoint || cs.KeyName != tc.keyName || cs.Key != tc.key || cs.Signature != tc.sig {
			t.Errorf("ParseConnectionString(%q) = %s %q %q %q; want %s %q %q %q", tc.in,
				cs.Endpoint, cs.KeyName, cs.Key, cs.Signature, tc.endpoint, tc.keyName, tc.key, tc.sig)
		}
	}
	for _, bad := range []string{
		"", "SharedAccessKeyName=R;SharedAccessKey=k", "Endpoint=sb://h/;SharedAccessKeyName=R",
		"Endpoint=ftp://h/;SharedAccessKeyName=R;SharedAccessKey=k", "Endpoint=nohost;SharedAccessKeyName=R;SharedAccessKey=k",
		"Endpoint=sb://h/;garbage",
	} {
		if _, err := ParseConnectionString(bad, "http"); !errors.Is(err, ErrConnectionString) {
			t.Errorf("ParseConnectionString(%q) err = %v; want ErrConnectionString", bad, err)
		}
	}
}

func TestConnectionStringToken(t *testing.T) {
	cs, err := ParseConnectionString("Endpoint=sb://h:1/;SharedAccessKeyName=R;SharedAccessKey=k", "http")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ParseToken(cs.Token(time.Now().Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.Verify([]Key{{Name: "R", Primary: "k", Rights: Manage}}, time.Now(), 0); err != nil {
		t.Errorf("token from the connection string does not verify: %v", err)
	}
	if !tok.Covers("any/entity") {
		t.Errorf("namespace token %q does not cover every entity", tok.Resource)
	}
}
