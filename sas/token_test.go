package sas

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// Keys and signatures below were computed outside Go with
//
//	printf '%s\n%s' "$sr" "$se" | openssl dgst -sha256 -hmac "$key" -binary | base64
//
// so the tests pin the string-to-sign of docs/protocol.md §5.2 rather than echo the code.
const (
	testKey     = "kmBG0d5cGn2x6P2v9CbuxV6I8kFmsZ0mZV7MHzT4Vo8="
	testKeyName = "RootManageSharedAccessKey"
	testSe      = 1795321802

	// azure-sb: sig first, lower-case escapes in sr, full request URL with query.
	azureSBSr    = "http%3a%2f%2f127.0.0.1%3a8089%2fmyqueue%2fmessages%3fapi-version%3d2016-07"
	azureSBToken = "SharedAccessSignature sig=6YeT3ectUyMpwLyMw71iHHXioXk0KbYqVmdHwRRQcIg%3D&se=1795321802&skn=RootManageSharedAccessKey&sr=" + azureSBSr

	// Go admin: sr first, url.QueryEscape (upper-case escapes); the sig contains '+'.
	goSr    = "https%3A%2F%2F127.0.0.1%3A8091%2Fq1%3Fapi-version%3D2024-05"
	goToken = "SharedAccessSignature sr=" + goSr + "&sig=r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw%2Bst%2BgY%3D&se=1795321802&skn=RootManageSharedAccessKey"

	// .NET admin: URL without query; the sig contains '/', escaped in lower case.
	dotnetSr    = "https%3a%2f%2fns%2fq1"
	dotnetToken = "SharedAccessSignature sr=" + dotnetSr + "&sig=tiwiJbd%2fgYg2wt8vW1Cq2ESP%2fgylQUstvMIB20%2fo0xo%3d&se=1795321802&skn=RootManageSharedAccessKey"
)

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testSign is an independent HMAC over raw sr and se text, for building tokens in tests.
func testSign(key, sr, se string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(sr + "\n" + se))
	return url.QueryEscape(base64.StdEncoding.EncodeToString(m.Sum(nil)))
}

func TestParseToken(t *testing.T) {
	tests := []struct {
		header string
		want   Token
	}{
		{azureSBToken, Token{
			Resource:  azureSBSr,
			Signature: mustB64(t, "6YeT3ectUyMpwLyMw71iHHXioXk0KbYqVmdHwRRQcIg="),
			Expiry:    testSe, KeyName: testKeyName, rawExpiry: "1795321802",
		}},
		{goToken, Token{
			Resource:  goSr,
			Signature: mustB64(t, "r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw+st+gY="),
			Expiry:    testSe, KeyName: testKeyName, rawExpiry: "1795321802",
		}},
		{dotnetToken, Token{
			Resource:  dotnetSr,
			Signature: mustB64(t, "tiwiJbd/gYg2wt8vW1Cq2ESP/gylQUstvMIB20/o0xo="),
			Expiry:    testSe, KeyName: testKeyName, rawExpiry: "1795321802",
		}},
		// Lower-case %2b and %3d in sig.
		{"SharedAccessSignature sr=q&sig=r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw%2bst%2bgY%3d&se=1&skn=k", Token{
			Resource: "q", Signature: mustB64(t, "r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw+st+gY="),
			Expiry: 1, KeyName: "k", rawExpiry: "1",
		}},
		// A client that forgot to escape sig: '+' must stay '+'.
		{"SharedAccessSignature sr=q&sig=r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw+st+gY=&se=1&skn=k", Token{
			Resource: "q", Signature: mustB64(t, "r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw+st+gY="),
			Expiry: 1, KeyName: "k", rawExpiry: "1",
		}},
		// Scheme case, several spaces, surrounding whitespace, unknown pair, escaped skn,
		// leading zeros in se (kept as sent).
		{"  sharedaccesssignature   skn=my%2Dkey&x=1&se=007&sig=AQID&sr=sb%3a%2f%2fns%2f \t", Token{
			Resource: "sb%3a%2f%2fns%2f", Signature: []byte{1, 2, 3},
			Expiry: 7, KeyName: "my-key", rawExpiry: "007",
		}},
		{"SHAREDACCESSSIGNATURE sr=a&sig=AQID&se=0&skn=k", Token{
			Resource: "a", Signature: []byte{1, 2, 3}, Expiry: 0, KeyName: "k", rawExpiry: "0",
		}},
		{"SharedAccessSignature sr=a&sig=AQID&se=9223372036854775807&skn=k", Token{
			Resource: "a", Signature: []byte{1, 2, 3}, Expiry: math.MaxInt64, KeyName: "k", rawExpiry: "9223372036854775807",
		}},
		// A value may contain '=' (only the first one splits).
		{"SharedAccessSignature sr=a%3Db=c&sig=AQID&se=1&skn=k", Token{
			Resource: "a%3Db=c", Signature: []byte{1, 2, 3}, Expiry: 1, KeyName: "k", rawExpiry: "1",
		}},
	}
	for _, tt := range tests {
		got, err := ParseToken(tt.header)
		if err != nil {
			t.Errorf("ParseToken(%q) error = %v", tt.header, err)
			continue
		}
		if got.Resource != tt.want.Resource || !bytes.Equal(got.Signature, tt.want.Signature) ||
			got.Expiry != tt.want.Expiry || got.KeyName != tt.want.KeyName || got.rawExpiry != tt.want.rawExpiry {
			t.Errorf("ParseToken(%q) = %+v; want %+v", tt.header, got, tt.want)
		}
	}
}

func TestParseTokenErrors(t *testing.T) {
	const (
		sr  = "sr=a"
		sig = "sig=AQID"
		se  = "se=1"
		skn = "skn=k"
		pre = "SharedAccessSignature "
	)
	tests := []struct {
		header string
		want   error
	}{
		{"", ErrMissingToken},
		{"   ", ErrMissingToken},
		{"Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig", ErrUnsupportedScheme},
		{"bearer x", ErrUnsupportedScheme},
		{"Bearer", ErrUnsupportedScheme},
		{"Basic dXNlcjpwYXNz", ErrMalformedToken},
		{sr + "&" + sig + "&" + se + "&" + skn, ErrMalformedToken}, // no scheme
		{"SharedAccessSignature", ErrMalformedToken},
		{"SharedAccessSignature   ", ErrMalformedToken},
		{"SharedAccessSignaturesr=a&sig=AQID&se=1&skn=k", ErrMalformedToken},
		{"SharedAccessSignature\tsr=a&sig=AQID&se=1&skn=k", ErrMalformedToken},
		{"SharedAccessKey " + sr + "&" + sig + "&" + se + "&" + skn, ErrMalformedToken},

		// Missing or empty parameters.
		{pre + sig + "&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&" + se, ErrMalformedToken},
		{pre + "sr=&" + sig + "&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&sig=&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&se=&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&" + se + "&skn=", ErrMalformedToken},
		{pre + "SR=a&SIG=AQID&SE=1&SKN=k", ErrMalformedToken}, // names are case-sensitive

		// Structure.
		{pre + sr + "&" + sig + "&" + se + "&" + skn + "&" + sr, ErrMalformedToken},
		{pre + sr + "&" + sig + "&" + se + "&" + skn + "&se=2", ErrMalformedToken},
		{pre + sr + "&" + sig + "&" + se + "&" + skn + "&x=1&x=1", ErrMalformedToken},
		{pre + sr + "&" + sig + "&" + se + "&" + skn + "&junk", ErrMalformedToken},
		{pre + sr + "&" + sig + "&" + se + "&" + skn + "&", ErrMalformedToken},
		{pre + "&" + sr + "&" + sig + "&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&&" + sig + "&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + ";" + sig + ";" + se + ";" + skn, ErrMalformedToken},

		// se.
		{pre + sr + "&" + sig + "&se=abc&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&se=-1&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&se=+1&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&se=1.5&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&se=1e9&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&se= 1&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&se=0x10&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&se=9223372036854775808&" + skn, ErrMalformedToken},

		// sig.
		{pre + sr + "&sig=!!!!&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&sig=AQI&" + se + "&" + skn, ErrMalformedToken}, // bad padding
		{pre + sr + "&sig=AQ%zz&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&sig=AQID%&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&sig=%3D%3D%3D%3D&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&sig=A_-D&" + se + "&" + skn, ErrMalformedToken}, // URL alphabet

		// sr and skn escapes.
		{pre + "sr=a%zz&" + sig + "&" + se + "&" + skn, ErrMalformedToken},
		{pre + "sr=a%&" + sig + "&" + se + "&" + skn, ErrMalformedToken},
		{pre + sr + "&" + sig + "&" + se + "&skn=k%zz", ErrMalformedToken},
	}
	for _, tt := range tests {
		got, err := ParseToken(tt.header)
		if !errors.Is(err, tt.want) {
			t.Errorf("ParseToken(%q) = %+v, %v; want %v", tt.header, got, err, tt.want)
		}
	}
}

func TestVerify(t *testing.T) {
	const (
		secondary = "c2Vjb25kYXJ5LWtleS1zZWNvbmRhcnkta2V5LXNlY29uZA=="
		other     = "b3RoZXIta2V5LW90aGVyLWtleS1vdGhlci1rZXktb3RoZXI="
	)
	root := Key{Name: testKeyName, Primary: testKey, Secondary: secondary, Rights: Manage}
	sender := Key{Name: "sender", Primary: other, Rights: Send}
	noSecondary := Key{Name: "nosecondary", Primary: testKey, Rights: Listen}
	noPrimary := Key{Name: "noprimary", Secondary: testKey, Rights: Listen}
	keys := []Key{sender, root, noSecondary, noPrimary}

	se := strconv.Itoa(testSe)
	expiry := time.Unix(testSe, 0)
	before := expiry.Add(-time.Minute)
	token := func(sr, sig, se, skn string) string {
		return "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=" + se + "&skn=" + skn
	}

	tests := []struct {
		name    string
		header  string
		now     time.Time
		skew    time.Duration
		want    Key
		wantErr error
	}{
		{name: "azure-sb", header: azureSBToken, now: before, want: root},
		{name: "go admin", header: goToken, now: before, want: root},
		{name: ".NET admin", header: dotnetToken, now: before, want: root},
		{name: "secondary key", header: token(goSr, testSign(secondary, goSr, se), se, testKeyName), now: before, want: root},
		{name: "entity key", header: token("sb%3a%2f%2fns%2fq", testSign(other, "sb%3a%2f%2fns%2fq", se), se, "sender"), now: before, want: sender},
		{name: "only secondary set", header: token(goSr, testSign(testKey, goSr, se), se, "noprimary"), now: before, want: noPrimary},
		{name: "no secondary", header: token(goSr, testSign(testKey, goSr, se), se, "nosecondary"), now: before, want: noSecondary},

		{name: "wrong key", header: token(goSr, testSign(other, goSr, se), se, testKeyName), now: before, wantErr: ErrInvalidSignature},
		{name: "other policy's key", header: token(goSr, testSign(testKey, goSr, se), se, "sender"), now: before, wantErr: ErrInvalidSignature},
		// An unset key is the empty HMAC key; a token signed with it must not pass.
		{name: "empty secondary", header: token(goSr, testSign("", goSr, se), se, "nosecondary"), now: before, wantErr: ErrInvalidSignature},
		{name: "empty primary", header: token(goSr, testSign("", goSr, se), se, "noprimary"), now: before, wantErr: ErrInvalidSignature},
		{name: "key base64-decoded", header: token(goSr, testSign(string(mustB64(t, testKey)), goSr, se), se, testKeyName), now: before, wantErr: ErrInvalidSignature},
		{name: "unknown key", header: token(goSr, testSign(testKey, goSr, se), se, "nobody"), now: before, wantErr: ErrUnknownKey},
		{name: "key name case", header: token(goSr, testSign(testKey, goSr, se), se, "rootmanagesharedaccesskey"), now: before, wantErr: ErrUnknownKey},

		// The HMAC is over sr as sent: the same URL with other escapes is another signature.
		{name: "sr re-encoded", header: "SharedAccessSignature sig=6YeT3ectUyMpwLyMw71iHHXioXk0KbYqVmdHwRRQcIg%3D&se=1795321802&skn=RootManageSharedAccessKey&sr=http%3A%2F%2F127.0.0.1%3A8089%2Fmyqueue%2Fmessages%3Fapi-version%3D2016-07", now: before, wantErr: ErrInvalidSignature},
		{name: "sr decoded", header: token("http://127.0.0.1:8089/myqueue/messages?api-version=2016-07", "6YeT3ectUyMpwLyMw71iHHXioXk0KbYqVmdHwRRQcIg%3D", se, testKeyName), now: before, wantErr: ErrInvalidSignature},
		{name: "sr changed", header: token("https%3A%2F%2F127.0.0.1%3A8091%2Fq2%3Fapi-version%3D2024-05", "r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw%2Bst%2BgY%3D", se, testKeyName), now: before, wantErr: ErrInvalidSignature},
		{name: "se changed", header: token(goSr, "r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw%2Bst%2BgY%3D", "1795321803", testKeyName), now: before, wantErr: ErrInvalidSignature},
		// ... and over se as sent, leading zeros included.
		{name: "se with leading zero", header: token(goSr, testSign(testKey, goSr, "0"+se), "0"+se, testKeyName), now: before, want: root},
		{name: "se re-formatted", header: token(goSr, testSign(testKey, goSr, se), "0"+se, testKeyName), now: before, wantErr: ErrInvalidSignature},
		{name: "truncated signature", header: token(goSr, "r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsA", se, testKeyName), now: before, wantErr: ErrInvalidSignature},

		{name: "at expiry", header: goToken, now: expiry, want: root},
		{name: "expired", header: goToken, now: expiry.Add(time.Second), wantErr: ErrExpiredToken},
		{name: "expired by 1ns", header: goToken, now: expiry.Add(time.Nanosecond), wantErr: ErrExpiredToken},
		{name: "within skew", header: goToken, now: expiry.Add(4 * time.Minute), skew: 5 * time.Minute, want: root},
		{name: "at skew", header: goToken, now: expiry.Add(5 * time.Minute), skew: 5 * time.Minute, want: root},
		{name: "past skew", header: goToken, now: expiry.Add(5*time.Minute + time.Nanosecond), skew: 5 * time.Minute, wantErr: ErrExpiredToken},
		{name: "long expired", header: goToken, now: expiry.Add(24 * time.Hour), skew: 5 * time.Minute, wantErr: ErrExpiredToken},
		// The signature is judged first: a forged expired token is just invalid.
		{name: "expired and forged", header: token(goSr, testSign(other, goSr, se), se, testKeyName), now: expiry.Add(time.Hour), wantErr: ErrInvalidSignature},
		{name: "se zero", header: token(goSr, testSign(testKey, goSr, "0"), "0", testKeyName), now: before, wantErr: ErrExpiredToken},
		{name: "se max", header: token(goSr, testSign(testKey, goSr, "9223372036854775807"), "9223372036854775807", testKeyName), now: before, want: root},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := ParseToken(tt.header)
			if err != nil {
				t.Fatalf("ParseToken(%q) error = %v", tt.header, err)
			}
			got, err := tok.Verify(keys, tt.now, tt.skew)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("Verify(%q) = %q, %v; want %q, %v", tt.header, got.Name, err, tt.want.Name, tt.wantErr)
			}
		})
	}

	if _, err := (Token{}).Verify(nil, before, 0); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Token{}.Verify(nil) error = %v; want %v", err, ErrUnknownKey)
	}
}

// A Token built by hand has no raw se text; Verify signs the formatted Expiry.
func TestVerifyHandBuiltToken(t *testing.T) {
	tok := Token{
		Resource:  goSr,
		Signature: mustB64(t, "r3CFxbOlv166qzn5XfyCOoFfXYpNnIolhJsAw+st+gY="),
		Expiry:    testSe,
		KeyName:   testKeyName,
	}
	keys := []Key{{Name: testKeyName, Primary: testKey, Rights: Manage}}
	if _, err := tok.Verify(keys, time.Unix(testSe, 0), 0); err != nil {
		t.Errorf("Verify(%+v) error = %v", tok, err)
	}
}

func TestSign(t *testing.T) {
	got := Sign("https://127.0.0.1:8091/q1?api-version=2024-05", testKeyName, testKey, time.Unix(testSe, 0))
	if got != goToken {
		t.Errorf("Sign(...) = %q; want %q", got, goToken)
	}
}

func TestSignParseVerifyRoundTrip(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		resource, keyName, key string
		covers                 string
	}{
		{"sb://ns.servicebus.windows.net/orders", "RootManageSharedAccessKey", testKey, "orders/messages"},
		{"https://127.0.0.1:8091/q1?api-version=2024-05&$top=2", "send-only", "k", "q1"},
		{"http://localhost:8080/t/subscriptions/s/messages/head?timeout=60", "listen_only.1", "a+b/c=", "t/subscriptions/s/messages/head"},
		{"sb://ns/with space/and+plus/ünïcode", "k", "🔑", "with space/and+plus/ünïcode"},
		{"sb://ns/", "weird&name=x", "key", "anything"},
	}
	for _, tt := range tests {
		header := Sign(tt.resource, tt.keyName, tt.key, now.Add(time.Hour))
		tok, err := ParseToken(header)
		if err != nil {
			t.Errorf("ParseToken(%q) error = %v", header, err)
			continue
		}
		if tok.KeyName != tt.keyName || tok.Expiry != now.Add(time.Hour).Unix() {
			t.Errorf("ParseToken(%q) = %+v; want key %q, expiry %d", header, tok, tt.keyName, now.Add(time.Hour).Unix())
		}
		if sr, _ := url.QueryUnescape(tok.Resource); sr != tt.resource {
			t.Errorf("ParseToken(%q).Resource decodes to %q; want %q", header, sr, tt.resource)
		}
		key := Key{Name: tt.keyName, Primary: "unrelated", Secondary: tt.key, Rights: Send}
		if got, err := tok.Verify([]Key{key}, now, 0); err != nil || got != key {
			t.Errorf("Verify(%q) = %+v, %v; want %+v, nil", header, got, err, key)
		}
		if !tok.Covers(tt.covers) {
			t.Errorf("Covers(%q) for %q = false; want true", tt.covers, tt.resource)
		}
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		sr     string
		entity string
		want   bool
	}{
		// azure-sb signs the full request URL, so its scope is the entity plus "/messages".
		{azureSBSr, "myqueue/messages", true},
		{azureSBSr, "myqueue/messages/head", true},
		{azureSBSr, "MyQueue/Messages/Head", true},
		{azureSBSr, "myqueue", false},
		{azureSBSr, "myqueue2/messages", false},
		{azureSBSr, "other/messages", false},

		// Go admin: host and port are ignored, the query is dropped.
		{goSr, "q1", true},
		{goSr, "q1/messages", true},
		{goSr, "Q1", true},
		{goSr, "q2", false},
		{goSr, "q10", false},
		{goSr, "", false},

		// .NET admin: no query.
		{dotnetSr, "q1", true},
		{dotnetSr, "q1/$DeadLetterQueue", true},
		{dotnetSr, "q1/$deadletterqueue/messages/head", true},
		{dotnetSr, "q", false},
		{dotnetSr, "q1x", false},

		// Namespace root covers everything.
		{"sb%3a%2f%2fns.servicebus.windows.net%2f", "anything", true},
		{"sb%3a%2f%2fns.servicebus.windows.net%2f", "a/b/c", true},
		{"sb%3a%2f%2fns.servicebus.windows.net%2f", "t/subscriptions/s", true},
		{"sb%3a%2f%2fns.servicebus.windows.net%2f", "$resources/queues", true},
		{"sb%3a%2f%2fns.servicebus.windows.net%2f", "", true},
		{"sb%3A%2F%2Fns.servicebus.windows.net", "q", true},
		{"sb%3a%2f%2fns%3a5671%2f%2f%2f", "q", true},
		{"sb:///", "q", true},
		{"http%3A%2F%2F127.0.0.1%3A8090%3Fapi-version%3D2021-05", "q", true},

		// JS admin: $resources path, query with a double-encoded %24top.
		{"http%3A%2F%2F127.0.0.1%3A8090%2F%24resources%2Fqueues%3Fapi-version%3D2021-05%26%2524top%3D2", "$resources/queues", true},
		{"http%3A%2F%2F127.0.0.1%3A8090%2F%24resources%2Fqueues%3Fapi-version%3D2021-05%26%2524top%3D2", "$resources/topics", false},
		// A path escaped twice still names the same entity.
		{"http%3A%2F%2Fh%2F%2524resources%2Fqueues", "$resources/queues", true},

		// Segment-wise prefixes.
		{"sb%3A%2F%2Fns%2Fq", "q", true},
		{"sb%3A%2F%2Fns%2Fq", "q/messages", true},
		{"sb%3A%2F%2Fns%2Fq", "q/$DeadLetterQueue", true},
		{"sb%3A%2F%2Fns%2Fq", "q2", false},
		{"sb%3A%2F%2Fns%2Fq", "q.2", false},
		{"sb%3A%2F%2Fns%2Fq", "", false},
		{"sb%3A%2F%2Fns%2Fa%2Fb", "a/b/c", true},
		{"sb%3A%2F%2Fns%2Fa%2Fb", "a/b", true},
		{"sb%3A%2F%2Fns%2Fa%2Fb", "a/bc", false},
		{"sb%3A%2F%2Fns%2Fa%2Fb", "a", false},
		{"sb%3A%2F%2Fns%2Fa%2Fb%2Fc", "a/b", false},
		{"sb%3A%2F%2Fns%2Ft", "t/subscriptions/s", true},
		{"sb%3A%2F%2Fns%2Ft%2Fsubscriptions%2Fs", "t/subscriptions/s/messages/head", true},
		{"sb%3A%2F%2Fns%2Ft%2Fsubscriptions%2Fs", "t/subscriptions/s2", false},
		{"sb%3A%2F%2Fns%2Ft%2Fsubscriptions%2Fs", "t", false},

		// Case, slashes, query, fragment, '+', unencoded.
		{"SB%3A%2F%2FNS%2FORDERS", "orders", true},
		{"sb%3A%2F%2Fns%2FOrders", "ORDERS/messages", true},
		{"sb%3a%2f%2fns%2fq1%2f", "q1", true},
		{"sb%3a%2f%2fns%2fq1%2f", "q10", false},
		{"sb%3a%2f%2fns%2fq1", "/q1/", true},
		{"sb%3a%2f%2fns%2fq1%23frag", "q1", true},
		{"sb%3a%2f%2fns%2fq1%3fx%3d%2fq2", "q1", true},
		{"sb%3a%2f%2fns%2fq1%3fx%3d%2fq2", "q2", false},
		{"sb%3a%2f%2fns%2fq1%3fx%3d%2fq2", "q1/q2", true},
		{"sb%3a%2f%2fns%2fq1%23%2fq2", "q2", false},
		{"sb%3A%2F%2Fns%2Fmy+q", "my q", true},
		{"sb%3A%2F%2Fns%2Fmy%2Bq", "my+q", true},
		{"sb%3A%2F%2Fns%2Fmy+q", "my+q", false},
		{"sb://ns/q1", "q1", true},
		{"sb://ns/q1", "q2", false},
		{"amqps%3A%2F%2Fns%2Fq1", "q1", true},
		// Only a real scheme (with its host) is dropped; anything else is a path, which fails
		// closed: "1sb://ns/q1" names no entity a client could mean.
		{"1sb%3A%2F%2Fns%2Fq1", "q1", false},
		{"1sb%3A%2F%2Fns%2Fq1", "ns/q1", false},
		{"s_b%3A%2F%2Fns%2Fq1", "ns/q1", false},
		{"%3A%2F%2Fns%2Fq1", "ns/q1", false},

		// Without a scheme the text is a path: a bare host (JS forwarding tokens, §4.13, whose
		// scope the server ignores) does not grant the namespace, and "q1" covers only q1.
		{"127.0.0.1%3A8090", "q", false},
		{"q1", "q1", true},
		{"q1", "q1/messages", true},
		{"q1", "q2", false},
		{"ns%2Fq1", "q1", false},

		// Undecodable sr covers nothing.
		{"sb%3A%2F%2Fns%2F%zz", "q", false},
		{"%", "q", false},
	}
	for _, tt := range tests {
		tok := Token{Resource: tt.sr}
		if got := tok.Covers(tt.entity); got != tt.want {
			t.Errorf("Token{Resource: %q}.Covers(%q) = %v; want %v", tt.sr, tt.entity, got, tt.want)
		}
	}
}

// CoversAt reads a scheme-less sr that begins with the host the client addressed (with or
// without a port) as that host and a path: the SDKs sign a connection string's
// SharedAccessSignature over the bare namespace. Any other scheme-less sr stays a path.
func TestCoversAt(t *testing.T) {
	for _, tc := range []struct {
		sr, host, path string
		want           bool
	}{
		{"127.0.0.1%3a5671", "127.0.0.1:5671", "q", true},
		{"127.0.0.1%3a5671", "127.0.0.1", "q", true},
		{"myns.servicebus.windows.net", "myns.servicebus.windows.net:5671", "q/messages", true},
		{"myns.servicebus.windows.net%2Fq", "myns.servicebus.windows.net", "q", true},
		{"myns.servicebus.windows.net%2Fq", "myns.servicebus.windows.net", "q2", false},
		{"127.0.0.1%3a5671", "localhost", "q", false},
		{"127.0.0.1%3a5671", "", "q", false},
		{"localhost", "localhost", "q", true}, // the emulator's Endpoint=sb://localhost
		{"q", "localhost", "q", true},
		{"q", "localhost", "other", false},
	} {
		tok := Token{Resource: tc.sr}
		if got := tok.CoversAt(tc.host, tc.path); got != tc.want {
			t.Errorf("Token{Resource: %q}.CoversAt(%q, %q) = %v; want %v", tc.sr, tc.host, tc.path, got, tc.want)
		}
	}
}
