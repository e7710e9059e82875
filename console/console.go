// Package console is sbgate's web console: plain HTML, JavaScript and CSS embedded in the binary
// and served under /$console/ (entity names cannot contain '$', so no queue name is taken).
//
// The page is only a client of the HTTP API: it signs every request itself with a SAS token it
// computes with WebCrypto from the key typed at sign-in, which it keeps in the tab's memory and
// never sends. The console therefore has exactly the rights of that key. Nothing here reads the
// database or needs a token: the assets are public, like the page of any API explorer.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is where the console is served.
const Prefix = "/$console/"

//go:embed assets
var assets embed.FS

// Handler serves the console's files under Prefix; /$console without the slash redirects there.
// Every answer carries a Content-Security-Policy that allows scripts, styles and connections to
// this origin only and no inline script: a message that got into the page as markup could still
// not run.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(Prefix, http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "+
			"base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !strings.HasPrefix(r.URL.Path, Prefix) {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// Serves reports whether the request path (decoded) belongs to the console.
func Serves(path string) bool {
	return path == "/$console" || strings.HasPrefix(path, Prefix)
}
