package program

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/coder/websocket"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/emulator"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// localhostCert writes a certificate for localhost, 127.0.0.1 and ::1 and its key, and returns a
// pool trusting it.
func localhostCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	return writeSelfSignedCert(t, 2, "localhost", []string{"localhost"}, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
}

const sampleConfig = "../nsconfig/testdata/emulator/Config.json"

// logValue finds the quoted value of key on the log line whose message contains msg.
func logValue(t *testing.T, log, msg, key string) string {
	t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(msg) + `[^\n]* ` + key + `=(?:"([^"]*)"|(\S+))`)
	m := re.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no %s on a %q line in the log:\n%s", key, msg, log)
	}
	return m[1] + m[2]
}

// roundTrip sends body to entity and receives it back through the data client c.
func roundTrip(t *testing.T, c *azservicebus.Client, entity, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := c.NewSender(entity, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
		t.Fatalf("send to %s: %v", entity, err)
	}
	r, err := c.NewReceiverForQueue(entity, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != body {
		t.Fatalf("receive from %s = %d messages, %v; want %q", entity, len(msgs), err, body)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
}

// goClient is the Go SDK's data client for the connection string cs; the caller closes it.
func goClient(t *testing.T, cs string, opts *azservicebus.ClientOptions) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// goSender is goClient's client and a sender for entity; the caller closes the client.
func goSender(t *testing.T, cs string, opts *azservicebus.ClientOptions, entity string) (*azservicebus.Client, *azservicebus.Sender) {
	t.Helper()
	c := goClient(t, cs, opts)
	s, err := c.NewSender(entity, nil)
	if err != nil {
		_ = c.Close(context.Background())
		t.Fatal(err)
	}
	return c, s
}

// signedStatus sends an empty request to url through hc, signed with the key named keyName
// (text key) for an hour, and returns the response's status.
func signedStatus(t *testing.T, hc *http.Client, method, url, keyName, key string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", sas.Sign(url, keyName, key, time.Now().Add(time.Hour)))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// adminClient is the Go SDK's administration client for a connection string, trusting pool
// (the client speaks https only, whatever the connection string says).
func adminClient(t *testing.T, cs string, pool *x509.CertPool) *admin.Client {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c, err := admin.NewClientFromConnectionString(cs, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: hc}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEmulatorMode starts sbgate as the emulator's container would be (its variables, the
// sample Config.json) and uses it with the emulator's connection string: the data client on the
// AMQP port, the administration client and the data client on the management port, the health
// check, and REST signed with the well-known key.
func TestEmulatorMode(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := localhostCert(t)
	endpoint, stop, out := startRun(t, env("DATABASE_URL", dbtest.NewDatabase(t), "SBGATE_EMULATOR", "true", "EMULATOR_HTTP_PORT", "0",
		"ACCEPT_EULA", "Y", "SQL_SERVER", "sqledge", "MSSQL_SA_PASSWORD", "Secret-Passw0rd", "SQL_WAIT_INTERVAL", "0", "SBGATE_CONFIG", sampleConfig),
		"-tls-cert", certFile, "-tls-key", keyFile)
	eventually.Within(time.Minute).True(t, "the readiness line", func() bool {
		return strings.Contains(out.String(), emulator.ReadyLine)
	})
	log := out.String()
	for _, want := range []string{"emulator mode: for development and tests only", "SAS_KEY_VALUE is public", "variable=ACCEPT_EULA",
		"variable=MSSQL_SA_PASSWORD", "variable=SQL_SERVER", "variable=SQL_WAIT_INTERVAL", `msg="configuration file applied"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "Secret-Passw0rd") {
		t.Error("the log holds MSSQL_SA_PASSWORD's value")
	}
	if strings.Count(log, emulator.ReadyLine) != 1 || strings.Index(log, emulator.ReadyLine) < strings.Index(log, "configuration file applied") {
		t.Errorf("the readiness line must come once, after the configuration is applied:\n%s", log)
	}

	dataCS := logValue(t, log, "emulator connection string (data clients)", "connection_string")
	mgmtCS := logValue(t, log, "emulator connection string (administration clients", "connection_string")
	if !strings.HasPrefix(dataCS, "Endpoint=sb://localhost:") || !strings.HasSuffix(dataCS, ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;") {
		t.Fatalf("data connection string = %q", dataCS)
	}
	data := goClient(t, dataCS, nil)
	defer data.Close(context.Background())
	roundTrip(t, data, "queue.1", "declared by Config.json")

	// The management port: the administration client (https, the certificate) and, on the same
	// connection string, the data client (plain AMQP, as UseDevelopmentEmulator says).
	ctx := context.Background()
	ac := adminClient(t, mgmtCS, pool)
	q, err := ac.GetQueue(ctx, "queue.1", nil)
	if err != nil || q == nil || *q.MaxDeliveryCount != 3 || *q.DefaultMessageTimeToLive != "PT1H" {
		t.Fatalf("GetQueue(queue.1) = %+v, %v; want the sample's MaxDeliveryCount 3, TTL PT1H", q, err)
	}
	if _, err := ac.CreateQueue(ctx, "made-by-admin", nil); err != nil {
		t.Fatalf("CreateQueue through the management port: %v", err)
	}
	mgmtData := goClient(t, mgmtCS, nil)
	defer mgmtData.Close(context.Background())
	roundTrip(t, mgmtData, "made-by-admin", "one port for both clients")

	// The health check, plain http on the management port as the Testcontainers modules ask.
	mgmtHost := strings.TrimSuffix(strings.TrimPrefix(strings.Split(mgmtCS, ";")[0], "Endpoint=sb://"), "/")
	resp, err := http.Get("http://" + mgmtHost + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"status":"healthy","message":"Service is healthy."}` {
		t.Errorf("GET /health = %d %s", resp.StatusCode, body)
	}

	// REST with the well-known key on the main listener.
	if st := signedStatus(t, probeClient, http.MethodGet, endpoint+"queue.1", emulator.KeyName, emulator.Key); st != http.StatusOK {
		t.Errorf("GET queue.1 signed with %s = %d; want 200", emulator.Key, st)
	}
	if err := stop(); err != nil {
		t.Errorf("run returned %v on shutdown", err)
	}
}

// TestEmulatorKeyOnlyInEmulatorMode: a broker not started in emulator mode never accepts the
// well-known key, over HTTP or AMQP, not even on a database an emulator-mode broker used, and
// refuses to be configured with it.
func TestEmulatorKeyOnlyInEmulatorMode(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	_, stopEmu, emuOut := startRun(t, env("DATABASE_URL", url, "SBGATE_EMULATOR", "true", "EMULATOR_HTTP_PORT", "0"))
	eventually.Within(time.Minute).True(t, "the readiness line", func() bool {
		return strings.Contains(emuOut.String(), emulator.ReadyLine)
	})
	if err := stopEmu(); err != nil {
		t.Fatal(err)
	}

	endpoint, stop, out := startRun(t, env("DATABASE_URL", url))
	if strings.Contains(out.String(), emulator.Key) || strings.Contains(out.String(), "emulator mode") {
		t.Errorf("a broker outside emulator mode mentions the emulator key or mode:\n%s", out)
	}
	if st := signedStatus(t, http.DefaultClient, http.MethodPut, endpoint+"orders", emulator.KeyName, emulator.Key); st != http.StatusUnauthorized {
		t.Errorf("PUT signed with the emulator key outside emulator mode = %d; want 401", st)
	}
	amqpEndpoint := logValue(t, out.String(), `msg="sbgate serving AMQP"`, "endpoint")
	cs := emulator.ConnectionString("127.0.0.1", portOf(t, amqpEndpoint))
	c, s := goSender(t, cs, &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}}, "orders")
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		t.Errorf("AMQP send with the emulator key outside emulator mode = %v; want CodeUnauthorizedAccess", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	err = run(context.Background(), []string{"serve", "-sas-key", emulator.Key}, env("DATABASE_URL", url), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "emulator's public key") {
		t.Errorf("serve -sas-key %s without -emulator = %v; want a refusal", emulator.Key, err)
	}
	err = run(context.Background(), []string{"serve", "-emulator", "-sas-key", "mine"}, env("DATABASE_URL", url), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "another -sas-key-name") {
		t.Errorf("serve -emulator -sas-key mine = %v; want a refusal naming -sas-key-name", err)
	}
}

func portOf(t *testing.T, endpoint string) int {
	t.Helper()
	_, port := hostAndPort(strings.TrimPrefix(strings.TrimPrefix(endpoint, "amqp://"), "amqps://"))
	if port == 0 {
		t.Fatalf("no port in %q", endpoint)
	}
	return port
}

// TestMuxListen serves every protocol on one port: the Go SDK's administration client (https)
// and data client (amqps) on one Endpoint=sb://localhost:port, the data client with
// UseDevelopmentEmulator (plain AMQP) and over WebSockets (wss) on it too, and plain http.
func TestMuxListen(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := localhostCert(t)
	_, stop, out := startRun(t, env("DATABASE_URL", dbtest.NewDatabase(t), "SBGATE_SAS_KEY", testKey, "SBGATE_MUX_LISTEN", "127.0.0.1:0"),
		"-tls-cert", certFile, "-tls-key", keyFile)
	addr := logValue(t, out.String(), "sbgate serving every protocol on one port", "address")
	_, port, _ := net.SplitHostPort(addr)
	cs := "Endpoint=sb://localhost:" + port + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey
	ctx := context.Background()
	if _, err := adminClient(t, cs, pool).CreateQueue(ctx, "one-port", nil); err != nil {
		t.Fatalf("CreateQueue over https on the one port: %v", err)
	}
	secure := goClient(t, cs, &azservicebus.ClientOptions{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}})
	defer secure.Close(ctx)
	roundTrip(t, secure, "one-port", "amqps")
	plain := goClient(t, cs+";UseDevelopmentEmulator=true", nil)
	defer plain.Close(ctx)
	roundTrip(t, plain, "one-port", "amqp")
	// AMQP over WebSockets, through the https the one port serves.
	wss := "wss://localhost:" + port + "/$servicebus/websocket"
	tlsHTTP := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	overWS := goClient(t, cs, &azservicebus.ClientOptions{
		NewWebSocketConn: func(ctx context.Context, _ azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
			ws, _, err := websocket.Dial(ctx, wss, &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}, HTTPClient: tlsHTTP})
			if err != nil {
				return nil, err
			}
			return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
		},
	})
	defer overWS.Close(ctx)
	roundTrip(t, overWS, "one-port", "amqp over wss")
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("plain http on the one port: %d", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("run returned %v on shutdown", err)
	}
}

// TestConfigFileAtStart applies -config at every start: an edit is applied at the next start,
// an entity the file drops is left alone unless -config-prune, and a wrong file stops the start
// with the file, the JSON path and the problem, having changed nothing.
func TestConfigFileAtStart(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "Config.json")
	write := func(doc string) {
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sample, err := os.ReadFile(sampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	write(string(sample))
	getenv := env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey, "SBGATE_CONFIG", file)
	startStop := func(args ...string) (string, *syncBuffer) {
		endpoint, stop, out := startRun(t, getenv, args...)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		return endpoint, out
	}
	startStop()
	edited := strings.Replace(string(sample), `"MaxDeliveryCount": 3,`, `"MaxDeliveryCount": 7,`, 1)
	edited = strings.Replace(edited, `"Name": "subscription.3"`, `"Name": "subscription.5"`, 1)
	write(edited)
	_, out := startStop()
	for _, want := range []string{"MaxDeliveryCount 3 → 7", "create subscription topic.1/Subscriptions/subscription.5", `entity="subscription topic.1/Subscriptions/subscription.3"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("second start's log lacks %q:\n%s", want, out)
		}
	}
	_, out = startStop("-config-prune")
	if !strings.Contains(out.String(), "delete subscription topic.1/Subscriptions/subscription.3") {
		t.Errorf("-config-prune did not delete subscription.3:\n%s", out)
	}

	write(strings.Replace(edited, `"LockDuration": "PT1M",`, `"LockDuration": "PT1M", "Colour": "blue",`, 1))
	err = run(context.Background(), []string{"serve", "-listen", "127.0.0.1:0", "-amqp-listen", "off"}, getenv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), file+":15:") || !strings.Contains(err.Error(), "UserConfig.Namespaces[0].Queues[0].Properties.Colour") ||
		!strings.Contains(err.Error(), `unknown property "Colour"`) {
		t.Fatalf("a wrong file: run = %v; want the file, line 15, the JSON path and the problem", err)
	}
	write(strings.Replace(edited, `"Name": "queue.1",`, `"Name": "queue.new", "Properties": {"ForwardTo": "missing"}}, {"Name": "queue.1",`, 1))
	err = run(context.Background(), []string{"serve", "-listen", "127.0.0.1:0", "-amqp-listen", "off"}, getenv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "Queues[0].Properties.ForwardTo") || !strings.Contains(err.Error(), `"missing"`) {
		t.Fatalf("a forward to nowhere: run = %v", err)
	}
	endpoint, stop, _ := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey))
	if st, _, _ := call(t, http.MethodGet, endpoint+"queue.new", nil, ""); st != http.StatusOK {
		t.Fatalf("GET queue.new = %d", st)
	} else if _, _, body := call(t, http.MethodGet, endpoint+"queue.new", nil, ""); !strings.Contains(body, "Publicly Listed Services") {
		t.Errorf("the refused file created queue.new:\n%s", body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestEmulatorSettings: emulator mode is off unless asked; EMULATOR_HTTP_PORT sets the
// management port's port as it does the emulator's, unless -emulator-http-listen is given; the
// emulator container's variables are noted by name.
func TestEmulatorSettings(t *testing.T) {
	t.Parallel()
	cfg, err := parseServeConfig(nil, env("EMULATOR_HTTP_PORT", "5400"), io.Discard)
	if err != nil || cfg.Emulator || cfg.EmulatorHTTPListen != "" || cfg.MuxListen != "" || cfg.ConfigFile != "" {
		t.Fatalf("defaults: %+v, %v; want emulator mode off and no extra listener", cfg, err)
	}
	for _, tc := range []struct {
		args   []string
		env    []string
		listen string
	}{
		{[]string{"-emulator"}, nil, "127.0.0.1:5300"},
		{nil, []string{"SBGATE_EMULATOR", "true", "EMULATOR_HTTP_PORT", "5400"}, "127.0.0.1:5400"},
		{nil, []string{"SBGATE_EMULATOR", "1", "SBGATE_EMULATOR_HTTP_LISTEN", "0.0.0.0:5300", "EMULATOR_HTTP_PORT", "6000"}, "0.0.0.0:6000"},
		{[]string{"-emulator-http-listen", "127.0.0.1:7000"}, []string{"SBGATE_EMULATOR", "true", "EMULATOR_HTTP_PORT", "6000"}, "127.0.0.1:7000"},
	} {
		cfg, err := parseServeConfig(tc.args, env(append(tc.env, "ACCEPT_EULA", "Y", "SQL_SERVER", "s")...), io.Discard)
		if err != nil || !cfg.Emulator || cfg.EmulatorHTTPListen != tc.listen {
			t.Errorf("parseServeConfig(%q, %q) = emulator %v listen %q, %v; want emulator mode on %q", tc.args, tc.env, cfg.Emulator, cfg.EmulatorHTTPListen, err, tc.listen)
		}
		if strings.Join(cfg.EmulatorIgnored, ",") != "ACCEPT_EULA,SQL_SERVER" {
			t.Errorf("ignored variables = %q", cfg.EmulatorIgnored)
		}
	}
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{nil, []string{"SBGATE_EMULATOR", "yes please"}, "SBGATE_EMULATOR"},
		{[]string{"-emulator"}, []string{"EMULATOR_HTTP_PORT", "http"}, "EMULATOR_HTTP_PORT"},
		{[]string{"-config-prune"}, nil, "-config-prune needs -config"},
	} {
		if _, err := parseServeConfig(tc.args, env(tc.env...), io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseServeConfig(%q, %q) = %v; want an error naming %s", tc.args, tc.env, err, tc.want)
		}
	}
}
