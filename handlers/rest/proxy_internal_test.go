package rest

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestForwardedFor(t *testing.T) {
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}}}
	for _, tc := range []struct {
		name        string
		header      http.Header
		proto, host string
	}{
		{"none", http.Header{}, "", ""},
		{"one element", http.Header{"Forwarded": {`for=192.0.2.1;proto=https;host=sb.example`}}, "https", "sb.example"},
		{"quoted values, case", http.Header{"Forwarded": {`For="[2001:db8::9]:4711";Proto=HTTPS;Host="a.example:8443"`}}, "HTTPS", "a.example:8443"},
		{"chain of trusted proxies", http.Header{"Forwarded": {`for=192.0.2.1;proto=https;host=outer`, `for="[2001:db8::9]";proto=http;host=inner`}}, "https", "outer"},
		{"untrusted hop stops the walk", http.Header{"Forwarded": {`proto=https;host=forged, for=192.0.2.1;proto=http;host=real`}}, "http", "real"},
		{"comma inside quotes", http.Header{"Forwarded": {`for=192.0.2.1;host="a,b";proto=https`}}, "https", "a,b"},
		{"obfuscated node", http.Header{"Forwarded": {`for=_hidden;proto=https, for=_x;proto=http`}}, "http", ""},
		{"X-Forwarded last value", http.Header{"X-Forwarded-Proto": {"http", "https"}, "X-Forwarded-Host": {"a, b"}}, "https", "b"},
		{"Forwarded wins", http.Header{"Forwarded": {"proto=http"}, "X-Forwarded-Proto": {"https"}}, "http", ""},
	} {
		proto, host := s.forwardedFor(tc.header)
		if proto != tc.proto || host != tc.host {
			t.Errorf("%s: forwardedFor(%v) = %q, %q; want %q, %q", tc.name, tc.header, proto, host, tc.proto, tc.host)
		}
	}
}

func TestTrustedPeer(t *testing.T) {
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	for addr, want := range map[string]bool{
		"10.1.2.3:5000": true, "[::ffff:10.1.2.3]:5000": true, "11.0.0.1:80": false, "garbage": false, "": false,
	} {
		if got := s.trusted(addr); got != want {
			t.Errorf("trusted(%q) = %t; want %t", addr, got, want)
		}
	}
	if (&Server{}).trusted("10.1.2.3:5000") {
		t.Error("trusted with no proxies configured = true; want false")
	}
}
