package rest

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Behind a TLS-terminating reverse proxy the gateway sees plain HTTP and, often, the proxy's
// own Host; the URLs it hands out (a peek-lock's Location, Atom ids) must name what the client
// used instead. A proxy says so in Forwarded (RFC 7239) or X-Forwarded-Proto/-Host, which anyone
// could also send, so they are believed only from the peers Config.TrustedProxies lists.

// forwardedKey holds the forwarded view of a request (set only for trusted proxies).
type forwardedKey struct{}

type forwardedInfo struct {
	scheme string // "http" or "https"; "" when the proxy did not say
}

// fromTrustedProxy reports whether r came through a trusted proxy.
func fromTrustedProxy(r *http.Request) bool {
	_, ok := r.Context().Value(forwardedKey{}).(forwardedInfo)
	return ok
}

// requestScheme is the scheme the client used: the trusted proxy's word for it, else whether
// this connection is TLS.
func requestScheme(r *http.Request) string {
	if f, ok := r.Context().Value(forwardedKey{}).(forwardedInfo); ok && f.scheme != "" {
		return f.scheme
	}
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// trusted reports whether the peer at remoteAddr ("ip:port") is a trusted proxy.
func (s *Server) trusted(remoteAddr string) bool {
	if len(s.cfg.TrustedProxies) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return s.trustedAddr(ip)
}

func (s *Server) trustedAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forwarded applies what a trusted proxy says of the original request: its scheme (kept in the
// context for requestScheme) and its host (as r.Host). Requests from anyone else pass untouched.
func (s *Server) forwarded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.trusted(r.RemoteAddr) {
			next.ServeHTTP(w, r)
			return
		}
		info := forwardedInfo{}
		proto, host := s.forwardedFor(r.Header)
		switch p := strings.ToLower(proto); p {
		case "http", "https":
			info.scheme = p
		}
		if host != "" && validHost(host) {
			r.Host = host
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardedKey{}, info)))
	})
}

// forwardedFor reads the original scheme and host from Forwarded, or failing that from
// X-Forwarded-Proto and X-Forwarded-Host. In a Forwarded list each proxy appends its own element;
// the element used is the one added by the outermost proxy of the trusted chain: walking from the
// last (our peer's), a step to the left is taken while the current element's for= is itself a
// trusted proxy. In X-Forwarded-* lists the last value (our peer's) is used.
func (s *Server) forwardedFor(h http.Header) (proto, host string) {
	if values := h.Values("Forwarded"); len(values) > 0 {
		elems := parseForwarded(strings.Join(values, ","))
		if len(elems) > 0 {
			i := len(elems) - 1
			for i > 0 {
				addr, ok := forwardedNode(elems[i]["for"])
				if !ok || !s.trustedAddr(addr) {
					break
				}
				i--
			}
			return elems[i]["proto"], elems[i]["host"]
		}
	}
	return lastListValue(h.Values("X-Forwarded-Proto")), lastListValue(h.Values("X-Forwarded-Host"))
}

// parseForwarded splits a Forwarded header (RFC 7239 §4) into its elements, each a map of
// lower-case parameter names to values, quotes removed. Malformed pairs are skipped.
func parseForwarded(v string) []map[string]string {
	var elems []map[string]string
	for _, elem := range splitQuoted(v, ',') {
		m := map[string]string{}
		for _, pair := range splitQuoted(elem, ';') {
			k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok {
				continue
			}
			val = strings.TrimSpace(val)
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = strings.ReplaceAll(val[1:len(val)-1], `\"`, `"`)
			}
			m[strings.ToLower(strings.TrimSpace(k))] = val
		}
		elems = append(elems, m)
	}
	return elems
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// forwardedNode reads the address of a for= node: "192.0.2.1", "192.0.2.1:80", "[2001:db8::1]"
// or "[2001:db8::1]:80"; obfuscated and "unknown" nodes are not addresses.
func forwardedNode(v string) (netip.Addr, bool) {
	if strings.HasPrefix(v, "[") {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		v = v[1:end]
	} else if host, _, err := net.SplitHostPort(v); err == nil {
		v = host
	}
	a, err := netip.ParseAddr(v)
	return a, err == nil
}

func lastListValue(values []string) string {
	if len(values) == 0 {
		return ""
	}
	items := strings.Split(values[len(values)-1], ",")
	return strings.TrimSpace(items[len(items)-1])
}

// validHost accepts a host[:port] that can go into a URL as it is.
func validHost(h string) bool {
	if len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-:[]_", c) >= 0) {
			return false
		}
	}
	return h != ""
}
