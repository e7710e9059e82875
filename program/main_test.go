package program

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// TestMain either runs the tests, with a PostgreSQL server for them, or, when a test re-executes
// this binary with SBGATE_TEST_AS_MAIN set, is the sbgate program itself: the crash test kills
// that process with SIGKILL, which it cannot do to one running inside the test.
func TestMain(m *testing.M) {
	if os.Getenv("SBGATE_TEST_AS_MAIN") != "" {
		Main()
		os.Exit(0)
	}
	dbtest.Main(m)
}

const testKey = "dGVzdC1rZXktZm9yLXNiZ2F0ZS10ZXN0cy0xMjM0NTY="

// syncBuffer collects output written from another goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var endpointRE = regexp.MustCompile(`endpoint=(https?://[^ ]+/)`)

// probeClient only asks whether the server is up; TestServeTLS checks the certificate properly.
var probeClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // readiness probe only

// waitEndpoint polls the log until the server announces its endpoint, then until /healthz
// answers.
func waitEndpoint(t *testing.T, out fmt.Stringer, done <-chan error) string {
	t.Helper()
	var endpoint string
	eventually.Within(60*time.Second).NoError(t, "sbgate to come up", func() error {
		select {
		case err := <-done:
			t.Fatalf("sbgate stopped before serving: %v\n%s", err, out)
		default:
		}
		if m := endpointRE.FindStringSubmatch(out.String()); m != nil {
			resp, err := probeClient.Get(m[1] + "healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					endpoint = m[1]
					return nil
				}
			}
		}
		return outputSoFar{out}
	})
	return endpoint
}

// outputSoFar is the error of a process not ready yet. It shows the process's output, read when
// a wait gives up and the error is printed, not at every check.
type outputSoFar struct{ out fmt.Stringer }

func (e outputSoFar) Error() string { return "not ready; its output so far:\n" + e.out.String() }

// env builds a getenv over the given variables only, so the tests do not depend on the
// developer's environment.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// startRun runs sbgate in-process and returns its endpoint and a stop function that cancels it
// and returns run's error.
func startRun(t *testing.T, getenv func(string) string, args ...string) (string, func() error, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "-listen", "127.0.0.1:0", "-amqp-listen", "127.0.0.1:0", "-amqps-listen", "127.0.0.1:0"}, args...), getenv, out, out)
	}()
	endpoint := waitEndpoint(t, out, done)
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				err = errors.New("sbgate did not stop within 60s")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return endpoint, stop, out
}

// call sends one request signed with the test key and returns status, headers and body.
func call(t *testing.T, method, url string, hdr map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", sas.Sign(url, "RootManageSharedAccessKey", testKey, time.Now().Add(time.Hour)))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestServeWithDatabaseURL(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	endpoint, stop, out := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey))

	if st, _, body := call(t, http.MethodPut, endpoint+"orders", nil, ""); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	if st, _, body := call(t, http.MethodPost, endpoint+"orders/messages", map[string]string{"BrokerProperties": `{"Label":"l"}`}, "hello"); st != http.StatusCreated {
		t.Fatalf("send: %d %s", st, body)
	}
	st, h, body := call(t, http.MethodDelete, endpoint+"orders/messages/head?timeout=5", nil, "")
	if st != http.StatusOK || body != "hello" || !strings.Contains(h.Get("BrokerProperties"), `"Label":"l"`) {
		t.Errorf("receive = %d %q %v", st, body, h)
	}
	resp, err := http.Get(endpoint + "readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("readyz = %v, %v", resp, err)
	}
	resp.Body.Close()

	// Metrics need no token and count the requests above by operation; the dead rows of the
	// message table, the main long-run risk of the design, are among them.
	resp, err = http.Get(endpoint + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`sbgate_http_requests_total{code="201",operation="SendMessage"} 1`,
		`sbgate_http_requests_total{code="200",operation="ReceiveAndDeleteMessage"} 1`,
		`sbgate_db_dead_rows{table="messages"}`,
		`sbgate_db_pool_connections`,
		`sbgate_http_request_duration_seconds_bucket{operation="PutEntity"`,
	} {
		if !strings.Contains(string(metricsText), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if st, _, body := call(t, http.MethodPut, endpoint+"metrics", nil, ""); st != http.StatusBadRequest {
		t.Errorf("creating a queue named metrics: %d %s; want 400", st, body)
	}

	// The start-up log says where to connect and how to get a token, but never writes a key the
	// operator supplied, nor a token made with it.
	log := out.String()
	for _, want := range []string{"connection_string=\"Endpoint=sb://127.0.0.1:", "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=<key>", "sbgate token -connection-string"} {
		if !strings.Contains(log, want) {
			t.Errorf("start-up log lacks %q:\n%s", want, log)
		}
	}
	for _, secret := range []string{testKey, "SharedAccessSignature"} {
		if strings.Contains(log, secret) {
			t.Errorf("start-up log holds %q (an operator-supplied key or a token):\n%s", secret, log)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("run returned %v on shutdown", err)
	}
}

// TestGeneratedKeyIsKept: the first start generates the key and logs it, with a token to try;
// later starts use the same key and log neither.
func TestGeneratedKeyIsKept(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	keyRE := regexp.MustCompile(`SharedAccessKey=([A-Za-z0-9+/=]+)`)
	_, stop, out := startRun(t, env("DATABASE_URL", url))
	first := keyRE.FindStringSubmatch(out.String())
	if first == nil || len(first[1]) != 44 || !strings.Contains(out.String(), "TOKEN='SharedAccessSignature ") {
		t.Fatalf("first start logs key %v; want a 44-character key and a token:\n%s", first, out)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	endpoint, stop, out := startRun(t, env("DATABASE_URL", url))
	if strings.Contains(out.String(), first[1]) || strings.Contains(out.String(), "SharedAccessSignature") {
		t.Errorf("second start logs the key or a token:\n%s", out)
	}
	req, _ := http.NewRequest(http.MethodPut, endpoint+"kept-key", nil)
	req.Header.Set("Authorization", sas.Sign(endpoint+"kept-key", "RootManageSharedAccessKey", first[1], time.Now().Add(time.Hour)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("request signed with the first start's key after a restart: %d; want 201", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedPostgresKeepsDataAndRefusesASecondGateway(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	getenv := env("SBGATE_DATA_DIR", dir, "SBGATE_SAS_KEY", testKey)
	endpoint, stop, _ := startRun(t, getenv)
	if st, _, body := call(t, http.MethodPut, endpoint+"kept", nil, ""); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	if st, _, body := call(t, http.MethodPost, endpoint+"kept/messages", nil, "survives"); st != http.StatusCreated {
		t.Fatalf("send: %d %s", st, body)
	}

	// sbgate key reaches the running broker's embedded PostgreSQL on its socket.
	var keyOut syncBuffer
	if err := run(t.Context(), []string{"key", "create", "-rights", "Listen", "reader"}, getenv, &keyOut, &keyOut); err != nil {
		t.Errorf("key create against the running embedded PostgreSQL: %v\n%s", err, keyOut.String())
	}

	// A second sbgate on the same data directory fails at once with a clear error.
	err := run(t.Context(), []string{"serve", "-listen", "127.0.0.1:0", "-amqp-listen", "127.0.0.1:0", "-amqps-listen", "127.0.0.1:0"}, getenv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second sbgate on the same data dir: err = %v; want an in-use error", err)
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	endpoint, stop, _ = startRun(t, getenv)
	st, _, body := call(t, http.MethodDelete, endpoint+"kept/messages/head?timeout=5", nil, "")
	if st != http.StatusOK || body != "survives" {
		t.Errorf("after restart received %d %q; want the message sent before", st, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	var out syncBuffer
	if err := run(t.Context(), []string{"migrate"}, env("DATABASE_URL", url), &out, &out); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "database migrated") {
		t.Errorf("migrate output: %s", out.String())
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"serve", "-log-level", "loud"}, nil, "-log-level"},
		{[]string{"serve", "-max-receive-wait", "soon"}, nil, "-max-receive-wait"},
		{[]string{"serve", "-tls-cert", "c.pem"}, nil, "together"},
		{[]string{"serve"}, []string{"SBGATE_SEND_WRITERS", "0"}, "-send-writers"},
		{[]string{"serve", "extra"}, nil, "unexpected arguments"},
		{[]string{"frobnicate"}, nil, "unknown command"},
		{[]string{"token"}, nil, "connection-string"},
		{[]string{"bench", "-clients", "x"}, nil, "not a number"},
	} {
		err := run(t.Context(), tc.args, env(tc.env...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q, env %q) = %v; want an error mentioning %q", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestTokenCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	conn := "Endpoint=sb://127.0.0.1:8080/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey
	if err := run(t.Context(), []string{"token", "-connection-string", conn, "-resource", "orders"}, env(), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok, err := sas.ParseToken(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("token output %q: %v", out.String(), err)
	}
	if _, err := tok.Verify([]sas.Key{{Name: "RootManageSharedAccessKey", Primary: testKey, Rights: sas.Manage}}, time.Now(), 0); err != nil {
		t.Errorf("token does not verify: %v", err)
	}
	if !tok.Covers("orders/messages") || tok.Covers("other") {
		t.Errorf("token scope %q: want orders only", tok.Resource)
	}
}

// tempDataDir is a data directory the embedded PostgreSQL can use, also when the tests run as
// root and the server runs as the postgres user (t.TempDir lies under a directory only root may
// enter).
func tempDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbgate-cmd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// sbgateProcess runs this test binary as the sbgate program. exited yields its Wait result; the
// process is killed at the end of the test if still running.
func sbgateProcess(t *testing.T, out io.Writer, envv ...string) (cmd *exec.Cmd, exited <-chan error) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "serve", "-listen", "127.0.0.1:0", "-amqp-listen", "127.0.0.1:0", "-amqps-listen", "127.0.0.1:0")
	cmd.Env = append([]string{"SBGATE_TEST_AS_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, envv...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var result error
	var once sync.Once
	wait := make(chan error, 1)
	// The test reads exited at most once; the cleanup must not wait a second time on a channel
	// the test already drained, so both go through once.
	collect := func() error {
		once.Do(func() { result = <-done })
		return result
	}
	go func() { wait <- collect() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = collect()
	})
	return cmd, wait
}

// TestPprofListensApart checks that -pprof-listen serves the profiles on its own address and
// that the broker's address does not serve them.
func TestPprofListensApart(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	endpoint, stop, out := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey), "-pprof-listen", "127.0.0.1:0")
	m := regexp.MustCompile(`profiling endpoints serving" addr=(\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no profiling address in the log:\n%s", out)
	}
	resp, err := http.Get("http://" + m[1] + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Errorf("pprof goroutine profile = %d %.200s", resp.StatusCode, body)
	}
	if st, _, body := call(t, http.MethodGet, endpoint+"debug/pprof/goroutine?debug=1", nil, ""); strings.Contains(body, "goroutine profile:") {
		t.Errorf("the broker's address serves profiles: %d %.200s", st, body)
	}
	if err := stop(); err != nil {
		t.Errorf("run returned %v on shutdown", err)
	}
}

// The gateway collects garbage less often than Go's default unless the operator chose GOGC.
func TestGCPercentDefersToGOGC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  []string
		want int
	}{
		{nil, 400},
		{[]string{"GOGC", "100"}, 0},
		{[]string{"GOGC", "off"}, 0},
	} {
		cfg, err := parseServeConfig(nil, env(tc.env...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.GCPercent != tc.want {
			t.Errorf("env %q: GCPercent = %d, want %d", tc.env, cfg.GCPercent, tc.want)
		}
	}
}

// -trusted-proxies takes addresses and CIDRs, from the flag or SBGATE_TRUSTED_PROXIES.
func TestTrustedProxiesSetting(t *testing.T) {
	t.Parallel()
	cfg, err := parseServeConfig(nil, env("SBGATE_TRUSTED_PROXIES", " 10.1.2.3/8, 192.0.2.7 ,::1"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("::1/128")}
	if !slices.Equal(cfg.TrustedProxies, want) {
		t.Errorf("TrustedProxies = %v; want %v", cfg.TrustedProxies, want)
	}
	if cfg, err := parseServeConfig([]string{"-trusted-proxies", "10.0.0.1"}, env(), io.Discard); err != nil || len(cfg.TrustedProxies) != 1 {
		t.Errorf("-trusted-proxies 10.0.0.1 = %v, %v; want one proxy", cfg.TrustedProxies, err)
	}
	if _, err := parseServeConfig([]string{"-trusted-proxies", "proxy.local"}, env(), io.Discard); err == nil || !strings.Contains(err.Error(), "-trusted-proxies") {
		t.Errorf("-trusted-proxies proxy.local = %v; want an error", err)
	}
}

// TestKeyCommand: sbgate key creates, lists, rotates and revokes namespace keys in the database of
// a running broker, which honours a new key with exactly its rights.
func TestKeyCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	getenv := env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey)
	endpoint, stop, _ := startRun(t, getenv)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	keyCmd := func(args ...string) (string, error) {
		var out syncBuffer
		err := run(t.Context(), append([]string{"key"}, args...), getenv, &out, &out)
		return out.String(), err
	}
	out, err := keyCmd("create", "-rights", "send", "app-send")
	if err != nil {
		t.Fatalf("key create: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^primary: +(\S+)$`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "rights:    Send\n") || !strings.Contains(out, "SharedAccessKeyName=app-send;SharedAccessKey="+m[1]) {
		t.Fatalf("key create printed:\n%s", out)
	}
	primary := m[1]
	// The first request reads the keys: the new key opens sends and nothing else.
	if st, _, body := call(t, http.MethodPut, endpoint+"orders", nil, ""); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	withKey := func(method, u string) int {
		req, _ := http.NewRequest(method, u, strings.NewReader("m"))
		req.Header.Set("Authorization", sas.Sign(u, "app-send", primary, time.Now().Add(time.Hour)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := withKey(http.MethodPost, endpoint+"orders/messages"); st != http.StatusCreated {
		t.Errorf("send with the Send key: %d; want 201", st)
	}
	if st := withKey(http.MethodDelete, endpoint+"orders/messages/head?timeout=0"); st != http.StatusUnauthorized {
		t.Errorf("receive with the Send key: %d; want 401", st)
	}
	if st := withKey(http.MethodGet, endpoint+"orders"); st != http.StatusUnauthorized {
		t.Errorf("read the queue with the Send key: %d; want 401", st)
	}

	if out, err := keyCmd("create", "-rights", "Send", "app-send"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second create: %v\n%s; want an already-exists error", err, out)
	}
	if out, err := keyCmd("create", "-rights", "Everything", "x"); err == nil || !strings.Contains(err.Error(), "unknown right") {
		t.Errorf("create with a bad right: %v\n%s", err, out)
	}
	if out, err = keyCmd("rotate", "app-send"); err != nil || strings.Contains(out, primary) {
		t.Errorf("rotate: %v\n%s; want a new primary", err, out)
	}
	if out, err = keyCmd("list"); err != nil || !strings.Contains(out, "app-send") || strings.Contains(out, primary) {
		t.Errorf("list: %v\n%s; want names and rights, no keys", err, out)
	}
	if out, err = keyCmd("revoke", "app-send"); err != nil {
		t.Errorf("revoke: %v\n%s", err, out)
	}
	if out, err = keyCmd("revoke", "app-send"); err == nil || !strings.Contains(err.Error(), "No shared access key named 'app-send'") {
		t.Errorf("second revoke: %v\n%s", err, out)
	}
	if out, err = keyCmd("list"); err != nil || strings.Contains(out, "app-send") {
		t.Errorf("list after revoke: %v\n%s", err, out)
	}
}
