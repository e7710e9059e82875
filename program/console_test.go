package program

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sbgate/sbgate/internal/eventually"
)

// The console's tests drive a real headless Chromium (Debian's chromium package, which `make
// test` installs) against a real sbgate on real PostgreSQL. They are never skipped: without a
// browser they fail and say how to get one.

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: the console tests need a headless browser; `make test` installs Debian's chromium (apt-get install chromium)")
	return ""
}

// screenshotDir is the test output folder: $SBGATE_TEST_OUTPUT/console, else testoutput/console
// at the top of the repository.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SBGATE_TEST_OUTPUT")
	if dir == "" {
		dir = filepath.Join("..", "..", "testoutput")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser is one headless tab.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // the tests may run as root, where Chromium's sandbox refuses to start
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// Chromium sends DOM events chromedp does not know (top-layer updates of the dialog); they
	// are logged only when they are something else.
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") {
			t.Logf("chromedp: %s", msg)
		}
	}))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx, dir: screenshotDir(t)}
}

func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\npage: %s", what, err, b.pageText())
	}
}

// pageText is the visible text of the page, for failure messages.
func (b *browser) pageText() string {
	var s string
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	_ = chromedp.Run(ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ''`, &s))
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

// waitFor evaluates a JavaScript condition until it is true. (It does not use chromedp.Poll,
// whose promise sometimes never settled with this Chromium although the condition had become
// true.) If it gives up, the page's state and text follow the failure.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	held := false
	defer func() { // runs after the wait's t.Fatalf too
		if !held {
			var st string
			_ = chromedp.Run(b.ctx, chromedp.Evaluate(`location.hash + ' ready=' +
				document.getElementById('app').dataset.ready`, &st))
			b.t.Logf("state: %s\npage: %s", st, b.pageText())
		}
	}()
	var last error
	eventually.NoError(b.t, what+" ("+expr+")", func() error {
		if b.ctx.Err() != nil {
			b.t.Fatalf("waiting for %s (%s): the browser is gone (%v); last error %v",
				what, expr, b.ctx.Err(), last)
		}
		var ok bool
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		err := chromedp.Run(ctx, chromedp.Evaluate(`!!(`+expr+`)`, &ok))
		cancel()
		if err != nil {
			last = err
		}
		if err == nil && ok {
			return nil
		}
		return fmt.Errorf("not true; last error %v", last)
	})
	held = true
}

func (b *browser) eval(expr string, res any) {
	b.t.Helper()
	b.run("evaluating "+expr, chromedp.Evaluate(expr, res))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.eval(fmt.Sprintf(`(document.querySelector(%q) || {textContent: ''}).textContent`, sel), &s)
	return s
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	var png []byte
	b.run("screenshot "+name, chromedp.CaptureScreenshot(&png))
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// confirm answers the console's one confirmation dialog.
func (b *browser) confirm(ok bool) {
	b.t.Helper()
	b.waitFor("the confirmation dialog", `document.getElementById('confirm').open`)
	btn := `#confirm button[value=cancel]`
	if ok {
		btn = `#confirm-ok`
	}
	b.run("answering the dialog", chromedp.Click(btn, chromedp.ByQuery))
	b.waitFor("the dialog to close", `!document.getElementById('confirm').open`)
}

// goTo navigates within the console and waits until the page is drawn.
func (b *browser) goTo(hash string) {
	b.t.Helper()
	b.eval(fmt.Sprintf(`location.hash = %q`, hash), nil)
	b.waitFor("the page "+hash, fmt.Sprintf(`document.getElementById('app').dataset.ready === %q`, hash))
}

func js(s string) string { raw, _ := json.Marshal(s); return string(raw) }

const xssBody = `<img src=x onerror="window.__xss='body-img'"><script>window.__xss='body-script'</script>`

func TestConsoleServesAssets(t *testing.T) {
	t.Parallel()
	b := startCLIBroker(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(b.endpoint + "$console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/$console/" {
		t.Errorf("GET /$console = %d Location %q; want 301 to /$console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, f := range []struct{ path, ctype, contains string }{
		{"$console/", "text/html", `<script src="app.js" defer></script>`},
		{"$console/app.js", "javascript", "SharedAccessSignature sr="},
		{"$console/style.css", "text/css", ":root"},
	} {
		resp, err := http.Get(b.endpoint + f.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), f.ctype) || !strings.Contains(string(body), f.contains) ||
			!strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET /%s = %d %q CSP %q; want 200 %s with %q", f.path, resp.StatusCode, resp.Header.Get("Content-Type"), csp, f.ctype, f.contains)
		}
	}
	// The assets are embedded: nothing in them points to another host.
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		resp, err := http.Get(b.endpoint + "$console/" + name)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := regexp.MustCompile(`(?:src|href)\s*=\s*["']?(?:https?:)?//`).Find(body); m != nil {
			t.Errorf("%s loads something from elsewhere: %q", name, m)
		}
	}
	resp, err = http.Post(b.endpoint+"$console/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /$console/ = %d; want 405", resp.StatusCode)
	}
}

func TestConsole(t *testing.T) {
	t.Parallel()
	b := startCLIBroker(t)
	// The data the pages show, made with the command line.
	b.ok(t, "queue", "create", "orders")
	b.ok(t, "send", "orders", "plain text order", "-label", "first")
	b.ok(t, "send", "orders", `{"order":17,"items":["a","b"]}`, "-content-type", "application/json")
	b.ok(t, "send", "orders", xssBody, "-label", `<b onmouseover="window.__xss='label'">label</b>`, "-p", `note=<img src=x onerror="window.__xss='value'"><script>document.body.remove()</script>`)
	binFile := filepath.Join(t.TempDir(), "body.bin")
	if err := os.WriteFile(binFile, []byte("\x00\x01\x02binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.ok(t, "send", "orders", "-file", binFile, "-content-type", "application/octet-stream")
	b.ok(t, "send", "orders", "later", "-schedule", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	b.ok(t, "queue", "create", "jobs", "-p", "MaxDeliveryCount=1")
	b.ok(t, "send", "jobs", "job one", "-p", "kind=a")
	b.ok(t, "send", "jobs", "job two", "-p", "kind=b")
	b.ok(t, "receive", "jobs", "-n", "2", "-settle", "abandon")
	b.ok(t, "topic", "create", "events")
	b.ok(t, "subscription", "create", "events", "audit")
	b.ok(t, "queue", "create", "held")

	br := newBrowser(t)

	// A wrong key: a clear error, and no way in.
	br.run("open the console", chromedp.Navigate(b.endpoint+"$console/"), chromedp.WaitVisible("#conn", chromedp.ByQuery))
	wrong := strings.Replace(b.conn, testKey, "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktMTI=", 1)
	br.run("sign in with a wrong key", chromedp.SetValue("#conn", wrong, chromedp.ByQuery), chromedp.Click("#signin", chromedp.ByQuery))
	br.waitFor("the sign-in error", `document.getElementById('signin-error').textContent.length > 0`)
	if msg := br.text("#signin-error"); !strings.Contains(msg, "Sign-in failed: 401") || !strings.Contains(msg, "InvalidSignature") {
		t.Errorf("sign-in with a wrong key says %q; want the broker's 401 and its detail", msg)
	}
	br.screenshot("signin-wrong-key")

	// Sign in with the connection string; the namespace page shows the counts.
	br.run("sign in", chromedp.SetValue("#conn", b.conn, chromedp.ByQuery), chromedp.Click("#signin", chromedp.ByQuery))
	row := func(path, col string) string {
		return fmt.Sprintf(`(document.querySelector('#entities tr[data-path=%s] .%s') || {}).textContent`, js(path), col)
	}
	br.waitFor("the counts of orders", row("orders", "c-active")+` === '4'`)
	br.waitFor("the dead letters of jobs", row("jobs", "c-dead")+` === '2'`)
	if got := br.text(`#entities tr[data-path="orders"] .c-scheduled`); got != "1" {
		t.Errorf("orders scheduled count = %q; want 1", got)
	}
	br.waitFor("the subscription row", `!!document.querySelector('#entities tr[data-path="events/Subscriptions/audit"]')`)
	br.waitFor("the chart", `!!document.querySelector('#chart polyline.active')`)
	br.run("chart jobs", chromedp.Click(`#entities tr[data-path="jobs"] .chart-btn`, chromedp.ByQuery))
	br.waitFor("the chart of jobs", `document.getElementById('chart-title').textContent === 'jobs' && !!document.querySelector('#chart polyline.dead')`)

	// Live: a message sent elsewhere shows up without a click.
	b.ok(t, "send", "jobs", "job three")
	br.waitFor("the live refresh of jobs", row("jobs", "c-active")+` === '1'`)
	br.screenshot("namespace")
	// On a phone's screen the table scrolls inside the page, which does not grow sideways.
	br.run("phone screen", chromedp.EmulateViewport(390, 844))
	var overflow bool
	br.eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
	if overflow {
		t.Error("on a 390 px wide screen the page is wider than the screen")
	}
	br.screenshot("namespace-phone")
	br.run("laptop screen", chromedp.EmulateViewport(1280, 860))

	// Filter by name, from the keyboard.
	// (CDP sends a key's character as an event of its own, which a page cannot cancel, so the
	// '/' is dispatched as the keydown a browser delivers.)
	br.eval(`document.body.dispatchEvent(new KeyboardEvent('keydown', {key: '/', bubbles: true, cancelable: true}))`, nil)
	br.waitFor("the filter to have the focus", `document.activeElement && document.activeElement.id === 'filter'`)
	br.run("type a filter", chromedp.KeyEvent("ord"))
	br.waitFor("the filter", `document.querySelectorAll('#entities tr[data-path]').length === 1 && !!document.querySelector('#entities tr[data-path="orders"]')`)

	// Entity page: edit a property.
	br.goTo("#/entity/orders")
	br.waitFor("the properties", `!!document.getElementById('p-MaxDeliveryCount')`)
	if got := br.text("#auth-rules"); !strings.Contains(got, "No keys of this entity") {
		t.Errorf("authorization rules of orders: %q", got)
	}
	br.run("edit MaxDeliveryCount", chromedp.SetValue("#p-MaxDeliveryCount", "7", chromedp.ByQuery), chromedp.Click("#save", chromedp.ByQuery))
	br.waitFor("saved", `document.getElementById('save-msg').textContent === 'Saved.'`)
	var q map[string]any
	if err := json.Unmarshal([]byte(b.ok(t, "queue", "show", "orders", "-o", "json")), &q); err != nil || q["MaxDeliveryCount"] != "7" {
		t.Errorf("after saving in the console, orders = %v (%v); want MaxDeliveryCount 7", q["MaxDeliveryCount"], err)
	}
	br.run("a bad value", chromedp.SetValue("#p-LockDuration", "forever", chromedp.ByQuery), chromedp.Click("#save", chromedp.ByQuery))
	br.waitFor("the refusal", `document.getElementById('save-msg').textContent.startsWith('400')`)
	if msg := br.text("#save-msg"); !strings.Contains(msg, "LockDuration") {
		t.Errorf("a bad LockDuration says %q; want the broker's detail naming it", msg)
	}

	br.goTo("#/entity/held")
	br.waitFor("the keys", `!!document.getElementById('auth-rules')`)
	// Entity keys: add one, and it works; remove it (asks once).
	br.run("add a key", chromedp.SetValue("#new-key-name", "held-sender", chromedp.ByQuery), chromedp.Click("#right-Send", chromedp.ByQuery), chromedp.Click("#add-key", chromedp.ByQuery))
	br.waitFor("the new key", `!!document.querySelector('#auth-rules tr[data-key="held-sender"]')`)
	var entityKey string
	br.eval(`document.querySelector('#auth-rules tr[data-key="held-sender"] button').click(); document.querySelector('#auth-rules tr[data-key="held-sender"] code').textContent`, &entityKey)
	if got := br.text(`#auth-rules tr[data-key="held-sender"]`); !strings.Contains(got, "Send") || len(entityKey) != 44 {
		t.Errorf("the new key's row: %q, key %q", got, entityKey)
	}
	senderConn := "Endpoint=" + b.endpoint + ";SharedAccessKeyName=held-sender;SharedAccessKey=" + entityKey
	if out, err := b.sbAs(t, senderConn, "send", "held", "with the entity key"); err != nil {
		t.Errorf("sending with the key added in the console: %v\n%s", err, out)
	}
	b.ok(t, "receive", "held", "-delete", "-n", "1")
	br.run("remove the key", chromedp.Click(`#auth-rules tr[data-key="held-sender"] .auth-remove`, chromedp.ByQuery))
	br.confirm(true)
	br.waitFor("no key", `document.getElementById('auth-rules').textContent.includes('No keys of this entity')`)
	if out, err := b.sbAs(t, senderConn, "send", "held", "x"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("sending with the removed key: %v\n%s", err, out)
	}

	// Browse: text, JSON pretty-printed, hex; properties; markup in a message stays text.
	br.goTo("#/messages/orders?tab=active")
	br.waitFor("the active messages", `document.querySelectorAll('#messages tr[data-seq]').length === 4`)
	open := func(n int) {
		t.Helper()
		br.run("open a message", chromedp.Click(fmt.Sprintf(`#messages tr[data-seq]:nth-child(%d)`, n), chromedp.ByQuery))
		br.waitFor("the message", fmt.Sprintf(`document.querySelector('#messages tr[data-seq]:nth-child(%d)').classList.contains('selected') && !!document.getElementById('body-preview')`, n))
	}
	open(2)
	var mode string
	br.eval(`document.getElementById('body-preview').dataset.mode`, &mode)
	if got := br.text(`#body-preview`); mode != "json" || !strings.Contains(got, "\n  \"order\": 17,") {
		t.Errorf("JSON body shown as %s: %q", mode, got)
	}
	open(4)
	if got := br.text("#body-preview"); !strings.Contains(got, "000000  00 01 02 62 69 6e 61 72 79") {
		t.Errorf("binary body shown as %q; want a hex dump", got)
	}
	open(3)
	if got := br.text("#body-preview"); got != xssBody {
		t.Errorf("markup body shown as %q; want the text itself", got)
	}
	if got := br.text("#user-props"); !strings.Contains(got, `note<img src=x onerror="window.__xss='value'"><script>document.body.remove()</script>`) {
		t.Errorf("user properties shown as %q; want the markup as text", got)
	}
	br.screenshot("message-markup")
	var xss any
	var injected int
	br.eval(`window.__xss === undefined ? null : window.__xss`, &xss)
	br.eval(`document.querySelectorAll('main img, main script, main b').length`, &injected)
	if xss != nil || injected != 0 {
		t.Errorf("a message's markup ran or became elements: window.__xss = %v, %d injected elements", xss, injected)
	}

	// Deferred messages have a tab of their own.
	b.ok(t, "send", "held", "wait for me")
	b.ok(t, "receive", "held", "-settle", "defer")
	br.goTo("#/messages/held?tab=deferred")
	br.waitFor("the deferred message", `document.querySelectorAll('#messages tr[data-seq]').length === 1 && document.querySelector('#messages tr[data-seq]').textContent.includes('wait for me')`)
	br.goTo("#/messages/held?tab=active")
	br.waitFor("no active message", `document.getElementById('messages').textContent.includes('No messages')`)
	br.run("purge held", chromedp.Click("#purge", chromedp.ByQuery))
	br.confirm(true)
	br.waitFor("the purge", `document.getElementById('bulk-msg').textContent === 'Purged 1.'`)
	br.goTo("#/messages/held?tab=deferred")
	br.waitFor("the purged deferred message", `document.getElementById('messages').textContent.includes('No messages')`)
	if ms := b.messages(t, "peek", "held"); len(ms) != 0 {
		t.Errorf("after a purge in the console, held holds %+v", ms)
	}

	// Scheduled: cancel asks once.
	br.goTo("#/messages/orders?tab=scheduled")
	br.waitFor("the scheduled message", `document.querySelectorAll('#messages tr[data-seq]').length === 1`)
	open(1)
	br.run("cancel it", chromedp.Click("#cancel-scheduled", chromedp.ByQuery))
	br.confirm(true)
	br.waitFor("no scheduled message", `document.querySelectorAll('#messages tr[data-seq]').length === 0 && document.getElementById('messages').textContent.includes('No messages')`)

	// Send, with properties.
	br.goTo("#/messages/orders?tab=send")
	br.waitFor("the send form", `!!document.getElementById('s-body')`)
	br.run("send", chromedp.SetValue("#s-body", "from the console", chromedp.ByQuery), chromedp.SetValue("#s-label", "console", chromedp.ByQuery),
		chromedp.SetValue("#s-props", "amount=12.5\nregion=eu\ncode=\"7\"", chromedp.ByQuery), chromedp.Click("#send", chromedp.ByQuery))
	br.waitFor("sent", `document.getElementById('send-msg').textContent === 'Sent.'`)
	br.screenshot("send")
	ms := b.messages(t, "peek", "orders", "-from", "0", "-n", "20")
	last := ms[len(ms)-1]
	if last.Body == nil || *last.Body != "from the console" || last.BrokerProperties["Label"] != "console" ||
		last.UserProperties["amount"] != 12.5 || last.UserProperties["region"] != "eu" || last.UserProperties["code"] != "7" {
		t.Errorf("the message sent from the console arrived as %+v", last)
	}
	br.goTo("#/messages/nothere?tab=send")
	br.waitFor("the error", `!document.getElementById('error').hidden`)
	if msg := br.text("#error"); !strings.Contains(msg, "nothere") {
		t.Errorf("opening a missing entity says %q", msg)
	}

	// Dead letters: reason shown; resubmit one (asks once), cancel a purge, resubmit the rest.
	br.goTo("#/messages/jobs?tab=dead")
	br.waitFor("the dead letters", `document.querySelectorAll('#messages tr[data-seq]').length === 2`)
	open(1)
	if got := br.text("#dl-reason"); !strings.Contains(got, "MaxDeliveryCountExceeded") {
		t.Errorf("dead-letter reason shown as %q", got)
	}
	br.screenshot("dead-letters")
	br.run("resubmit one", chromedp.Click("#resubmit-one", chromedp.ByQuery))
	br.confirm(true)
	br.waitFor("one dead letter left", `document.querySelectorAll('#messages tr[data-seq]').length === 1`)
	br.run("purge, then think again", chromedp.Click("#purge", chromedp.ByQuery))
	br.confirm(false)
	br.run("resubmit matching", chromedp.SetValue("#resubmit-filter", "kind = 'b'", chromedp.ByQuery), chromedp.Click("#resubmit-all", chromedp.ByQuery))
	br.confirm(true)
	br.waitFor("no dead letters", `document.getElementById('bulk-msg').textContent === 'Resubmitted 1.' && document.querySelectorAll('#messages tr[data-seq]').length === 0`)
	if ms := b.messages(t, "peek", "jobs"); len(ms) != 3 {
		t.Errorf("after resubmitting both, jobs holds %d messages; want 3", len(ms))
	}

	// Rules: a wrong rule shows the parse error; a right one is saved.
	br.goTo("#/entity/" + "events%2FSubscriptions%2Faudit")
	br.waitFor("the rules", `!!document.querySelector('.rule[data-rule="$Default"] .rule-filter')`)
	br.run("a wrong rule", chromedp.SetValue(`.rule[data-rule="$Default"] .rule-type`, "SqlFilter", chromedp.ByQuery),
		chromedp.SetValue(`.rule[data-rule="$Default"] .rule-filter`, "amount >", chromedp.ByQuery),
		chromedp.Click(`.rule[data-rule="$Default"] .rule-save`, chromedp.ByQuery))
	br.waitFor("the parse error", `document.querySelector('.rule-msg[data-rule="$Default"]').textContent.startsWith('400')`)
	if msg := br.text(`.rule-msg[data-rule="$Default"]`); !strings.Contains(msg, "syntax error at position 9") {
		t.Errorf("a wrong rule says %q; want the broker's parse error with its position", msg)
	}
	br.screenshot("rules")
	br.run("a right rule", chromedp.SetValue(`.rule[data-rule="$Default"] .rule-filter`, "amount > 10", chromedp.ByQuery),
		chromedp.SetValue(`.rule[data-rule="$Default"] .rule-action`, "SET sys.Label = 'big'", chromedp.ByQuery),
		chromedp.Click(`.rule[data-rule="$Default"] .rule-save`, chromedp.ByQuery))
	br.waitFor("saved", `document.querySelector('.rule-msg[data-rule="$Default"]').textContent === 'Saved.'`)
	br.run("a new correlation rule", chromedp.SetValue(`.rule[data-rule="new"] .rule-name`, "eu", chromedp.ByQuery),
		chromedp.SetValue(`.rule[data-rule="new"] .rule-type`, "CorrelationFilter", chromedp.ByQuery),
		chromedp.SetValue(`.rule[data-rule="new"] .rule-filter`, "Label=order\nregion=eu", chromedp.ByQuery),
		chromedp.Click(`.rule[data-rule="new"] .rule-save`, chromedp.ByQuery))
	br.waitFor("the new rule", `!!document.querySelector('.rule[data-rule="eu"]')`)
	out := b.ok(t, "rule", "list", "events", "audit")
	if !regexp.MustCompile(`\$Default +amount > 10 +SET sys.Label = 'big'`).MatchString(out) || !strings.Contains(out, "correlation: Label=order, region=eu") {
		t.Errorf("rules after editing in the console:\n%s", out)
	}
}

// TestConsoleMissingRight: a key that may listen but not manage signs in, and the namespace page
// says which right it lacks.
func TestConsoleMissingRight(t *testing.T) {
	t.Parallel()
	b := startCLIBroker(t)
	b.ok(t, "queue", "create", "orders")
	b.ok(t, "send", "orders", "hello")
	var keyOut syncBuffer
	if err := run(t.Context(), []string{"key", "create", "-database-url", b.dbURL, "-rights", "Listen", "reader"}, env(), &keyOut, &keyOut); err != nil {
		t.Fatalf("key create: %v\n%s", err, keyOut.String())
	}
	m := regexp.MustCompile(`SharedAccessKey=([A-Za-z0-9+/=]+)`).FindStringSubmatch(keyOut.String())
	if m == nil {
		t.Fatalf("key create printed no key:\n%s", keyOut.String())
	}
	reader := "Endpoint=" + b.endpoint + ";SharedAccessKeyName=reader;SharedAccessKey=" + m[1]
	// The gateway learns of the new key within seconds.
	eventually.NoError(t, "the new Listen key to be accepted", func() error {
		_, err := b.sbAs(t, reader, "peek", "orders")
		return err
	})

	br := newBrowser(t)
	br.run("open the console", chromedp.Navigate(b.endpoint+"$console/"), chromedp.WaitVisible("#keyname", chromedp.ByQuery))
	br.run("sign in with name and key", chromedp.SetValue("#keyname", "reader", chromedp.ByQuery), chromedp.SetValue("#key", m[1], chromedp.ByQuery),
		chromedp.Click("#signin", chromedp.ByQuery))
	br.waitFor("the error", `!document.getElementById('error').hidden`)
	msg := br.text("#error")
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "Manage") || !strings.Contains(msg, `The key "reader" lacks the right named above.`) {
		t.Errorf("listing the namespace with a Listen key says %q; want the 401, the missing Manage right", msg)
	}
	if who := br.text("#who"); who != "key: reader" {
		t.Errorf("signed in as %q", who)
	}
	// The key can still browse an entity's messages; reading its description needs Manage.
	br.goTo("#/messages/orders?tab=active")
	br.waitFor("the message", `document.querySelectorAll('#messages tr[data-seq]').length === 1`)
	if msg := br.text("#error"); !strings.Contains(msg, "Manage") {
		t.Errorf("reading the queue's description with a Listen key says %q; want the missing Manage right", msg)
	}
	br.screenshot("missing-right")
}
