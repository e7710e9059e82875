package compat_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/amqpws"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	amqpdoor "github.com/sbgate/sbgate/handlers/amqp"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/portmux"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// testBroker is sbgate served in-process for a client stack: the REST API over http and https, the
// AMQP listener plain and over TLS, and the same AMQP server over WebSockets at
// /$servicebus/websocket of the http and https servers, on one store with the four test keys
// (root with Manage, SendListen, SendOnly, ListenOnly). Every address is on loopback; the TLS
// certificate is the httptest one (127.0.0.1, example.com), written to CAFile for clients that
// take a file.
type testBroker struct {
	Store  broker.Store
	HTTP   string         // http://127.0.0.1:port
	HTTPS  string         // https://127.0.0.1:port
	AMQP   string         // 127.0.0.1:port, plain AMQP
	AMQPS  string         // 127.0.0.1:port, AMQP over TLS
	CAFile string         // PEM of the certificate the https and AMQPS listeners present
	Roots  *x509.CertPool // that certificate, for Go clients
	TLS    *tls.Config
	// OnePort is 127.0.0.1:port serving AMQP, AMQPS, http and https on one listener (package
	// portmux), when brokerOptions.OnePort asked for it; "" otherwise. Its TLS certificate,
	// in OnePortCAFile, is its own: see serveOnePort.
	OnePort       string
	OnePortCAFile string
}

// brokerOptions changes what startBroker serves.
type brokerOptions struct {
	// AMQPSAddr is where the AMQPS listener binds (default 127.0.0.1:0). Clients that always
	// dial 5671 get an address of their own, such as 127.0.0.7:5671.
	AMQPSAddr string
	// OnePort also serves every protocol on one more port (broker.OnePort), for clients that
	// derive both their AMQP and their https endpoint from one host:port, as the Go SDK does.
	OnePort bool
	// TransactionTimeout replaces the service's 2 minutes (amqpdoor.Config.TransactionTimeout),
	// for a scenario that waits for a transaction to time out.
	TransactionTimeout time.Duration
}

// The keys every broker knows, with their rights.
var testKeys = []sas.Key{
	{Name: "RootManageSharedAccessKey", Primary: key, Rights: sas.Manage},
	{Name: "SendListen", Primary: sendListenKey, Rights: sas.Send | sas.Listen},
	{Name: "SendOnly", Primary: sendOnlyKey, Rights: sas.Send},
	{Name: "ListenOnly", Primary: listenOnlyKey, Rights: sas.Listen},
}

// startBroker serves sbgate for one test on its own database; everything stops when the test
// ends.
func startBroker(t *testing.T, opts *brokerOptions) *testBroker {
	t.Helper()
	if opts == nil {
		opts = &brokerOptions{}
	}
	st := store.New(dbtest.NewPool(t), store.Options{})
	st.Start(context.Background())
	t.Cleanup(st.Stop)
	acc := access.New(access.Config{Keys: testKeys, Source: st})

	// One AMQP server behind the AMQP listeners and the WebSocket endpoint of the http and https
	// servers, as sbgate serve runs it.
	ah := amqpdoor.New(amqpdoor.Config{Store: st, Access: acc, TransactionTimeout: opts.TransactionTimeout})
	srv := amqp.NewServer(ah, amqp.Options{Authenticate: ah.Authenticate})
	tunnels := amqpws.New(srv, amqpws.Options{})
	h := rest.NewServer(st, rest.Config{Access: acc, AMQPWebSocket: tunnels})
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(h)
	t.Cleanup(secure.Close)

	b := &testBroker{Store: st, HTTP: plain.URL, HTTPS: secure.URL, TLS: secure.TLS, Roots: x509.NewCertPool()}
	b.Roots.AddCert(secure.Certificate())
	b.CAFile = writeCertPEM(t, secure.Certificate().Raw)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := opts.AMQPSAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	tln, err := net.Listen("tcp", addr)
	if err != nil {
		ln.Close()
		t.Fatalf("AMQPS listener on %s: %v", addr, err)
	}
	b.AMQP, b.AMQPS = ln.Addr().String(), tln.Addr().String()
	done := make(chan struct{}, 2)
	for _, l := range []net.Listener{ln, tls.NewListener(tln, secure.TLS)} {
		go func() {
			_ = srv.Serve(context.Background(), l)
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
		<-done
		_ = tunnels.Close() // their AMQP connections are closed: this waits for them to end
	})
	if opts.OnePort {
		b.OnePort, b.OnePortCAFile = serveOnePort(t, h, srv)
	}
	return b
}

// serveOnePort serves the REST handler h and the AMQP server srv, plain and over TLS, on one
// loopback port through a portmux.Mux, stopped when the test ends. It returns the port's
// host:port and the file of its certificate.
//
// The certificate names 127.0.0.1 (IP), example.com and, as a DNS name, "127.0.0.1:port": the
// Go SDK's AMQP client (go-amqp) takes the namespace's host:port as the TLS server name, so it
// verifies the certificate against "127.0.0.1:port", which Go matches exactly against a DNS
// name when it is not a valid host name. Against Azure the namespace has no port.
func serveOnePort(t *testing.T, h http.Handler, srv *amqp.Server) (string, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("one-port listener: %v", err)
	}
	addr := ln.Addr().String()
	cert, der := selfSignedCert(t, addr)
	caFile := filepath.Join(t.TempDir(), "one-port-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	mux := portmux.New(ln, portmux.Options{TLS: tlsConfig, AMQP: srv})
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	portmux.ConfigureServer(hs)
	done := make(chan struct{}, 2)
	go func() {
		_ = hs.Serve(mux.HTTPListener())
		done <- struct{}{}
	}()
	go func() {
		_ = mux.Serve(context.Background())
		done <- struct{}{}
	}()
	t.Cleanup(func() {
		_ = mux.Close()
		_ = hs.Close()
		<-done
		<-done
	})
	return addr, caFile
}

// writeCertPEM writes the certificate der as PEM into a file of the test's temporary directory,
// for clients that trust a file, and returns the file's path.
func writeCertPEM(t *testing.T, der []byte) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// selfSignedCert is a self-signed certificate for 127.0.0.1, example.com and the DNS name
// hostPort, with its DER.
func selfSignedCert(t *testing.T, hostPort string) (tls.Certificate, []byte) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{Organization: []string{"sbgate compat tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"example.com", hostPort},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, der
}

// keyOf returns the key text of a test key name.
func keyOf(name string) string {
	for _, k := range testKeys {
		if k.Name == name {
			return k.Primary
		}
	}
	return "wrong-" + name
}

// connString is a connection string for the named key (see testKeys) whose Endpoint is
// sb://hostPort; emulator adds UseDevelopmentEmulator=true, with which the SDKs dial plain AMQP.
func connString(hostPort, keyName string, emulator bool) string {
	cs := "Endpoint=sb://" + hostPort + "/;SharedAccessKeyName=" + keyName + ";SharedAccessKey=" + keyOf(keyName)
	if emulator {
		cs += ";UseDevelopmentEmulator=true"
	}
	return cs
}

// createQueue creates a queue with default properties changed by mut (nil: none).
func (b *testBroker) createQueue(t *testing.T, name string, mut func(*broker.Properties)) {
	t.Helper()
	p := broker.DefaultProperties(broker.KindQueue)
	if mut != nil {
		mut(&p)
	}
	if _, err := b.Store.CreateEntity(t.Context(), broker.KindQueue, name, p); err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
}

// createTopic creates a topic with subscriptions of default properties (each with the $Default
// rule).
func (b *testBroker) createTopic(t *testing.T, name string, subs ...string) {
	t.Helper()
	if _, err := b.Store.CreateEntity(t.Context(), broker.KindTopic, name, broker.DefaultProperties(broker.KindTopic)); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	for _, s := range subs {
		if _, err := b.Store.CreateSubscription(t.Context(), name+"/Subscriptions/"+s, broker.DefaultProperties(broker.KindSubscription), nil); err != nil {
			t.Fatalf("create subscription %s/%s: %v", name, s, err)
		}
	}
}

// commonScenarios are the scenarios every client stack runs, by the names its script reports
// (the same list for each stack, so their results compare):
//
//   - send-property-types: a message with an application property of every type the SDK can
//     send (byte…ulong, float, double, decimal, char, uuid, binary, timestamp, string, bool, and
//     the described uri, datetime-offset and timespan where the SDK has them) comes back with
//     each value and type unchanged
//   - send-body-kinds: bodies of one data section, several, amqp-value and amqp-sequence (those
//     the SDK can send) come back unchanged
//   - receive-and-delete, peek-lock-complete, renew-lock, peek
//   - abandon-with-properties: abandon with properties to modify; the redelivery carries them
//   - defer-receive-deferred, dead-letter-reason (reason and description read back from the
//     dead-letter subqueue)
//   - schedule-cancel-queue, schedule-cancel-topic: schedule two, cancel one, receive the other
//   - session-state (accept a session, set and get its state), session-empty-id (the session ""
//     is a session like any other), list-sessions
//   - rules: add, list and remove rules through the SDK's rule manager
//   - batch: a batch of messages sent in one call, all received
//   - large-message: a 200 KB message sent and received
//   - websockets: send and receive over AMQP over WebSockets
//   - wrong-key, missing-right (a Listen-only key cannot send), missing-entity: each refused
//     with the SDK's own error for it
var commonScenarios = []string{
	"send-property-types", "send-body-kinds", "receive-and-delete", "peek-lock-complete",
	"abandon-with-properties", "defer-receive-deferred", "dead-letter-reason", "renew-lock", "peek",
	"schedule-cancel-queue", "schedule-cancel-topic", "session-state", "session-empty-id",
	"list-sessions", "rules", "batch", "large-message", "websockets", "wrong-key",
	"missing-right", "missing-entity",
}

// scenarioEntities creates the entities each common scenario uses, named prefix+scenario, so
// that one scenario's failure cannot spill into another's, and returns them by scenario and role
// ("queue", "topic", "subscription"). Roles it does not create are names the client creates or
// expects to be missing: the rules scenario's subscription "filtered" is created (with its
// $Default rule) only with createRulesSubscription, for stacks that manage rules through the
// SDK's rule manager on the data plane; the others create it with their administration client.
func scenarioEntities(t *testing.T, b *testBroker, prefix string, createRulesSubscription bool) map[string]map[string]string {
	t.Helper()
	entities := map[string]map[string]string{}
	for _, s := range commonScenarios {
		entities[s] = map[string]string{}
	}
	queue := func(scenario string, mut func(*broker.Properties)) {
		name := prefix + scenario
		b.createQueue(t, name, mut)
		entities[scenario]["queue"] = name
	}
	for _, s := range []string{"send-property-types", "send-body-kinds", "receive-and-delete",
		"peek-lock-complete", "abandon-with-properties", "defer-receive-deferred",
		"dead-letter-reason", "peek", "schedule-cancel-queue", "batch", "large-message",
		"websockets", "wrong-key", "missing-right"} {
		queue(s, nil)
	}
	// renew-lock holds its message past a short lock by renewing it.
	queue("renew-lock", func(p *broker.Properties) { p.LockDuration = 10 * time.Second })
	for _, s := range []string{"session-state", "session-empty-id", "list-sessions"} {
		queue(s, func(p *broker.Properties) { p.RequiresSession = true })
	}
	b.createTopic(t, prefix+"schedule-cancel-topic", "sub")
	entities["schedule-cancel-topic"]["topic"] = prefix + "schedule-cancel-topic"
	entities["schedule-cancel-topic"]["subscription"] = "sub"
	var rulesSubs []string
	if createRulesSubscription {
		rulesSubs = []string{"filtered"}
	}
	b.createTopic(t, prefix+"rules", rulesSubs...)
	entities["rules"]["topic"] = prefix + "rules"
	entities["rules"]["subscription"] = "filtered"
	entities["missing-entity"]["queue"] = prefix + "no-such-queue"
	return entities
}

// scenarioResults runs a client stack's scenario script and reads its report: one line per
// scenario, "SCENARIO <name> PASS", "SCENARIO <name> FAIL <why>" or "SCENARIO <name> SKIP
// <why>"; anything else the script prints is kept for the failure message. skips names the
// scenarios the stack cannot run (its SDK lacks the feature) with the reason: such a scenario
// must be reported SKIP, and no other may be. It fails the test for every failed scenario,
// every scenario of want not reported, and when the script itself failed, and returns the
// verdicts by scenario name.
func scenarioResults(t *testing.T, cmd *exec.Cmd, want []string, skips map[string]string) map[string]string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	results := map[string]string{}
	var order []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "SCENARIO ")
		if !ok {
			continue
		}
		name, verdict, _ := strings.Cut(rest, " ")
		if _, seen := results[name]; !seen {
			order = append(order, name)
		}
		results[name] = verdict
	}
	checkVerdicts(t, order, results, want, skips)
	if err != nil || t.Failed() {
		t.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return results
}

// checkVerdicts checks the verdicts of a client stack's scenarios, by scenario name, however
// they were run (a script's report, or the Go scenarios in this process): it fails the test for
// each verdict, taken in order (names with no verdict are passed over), that is not PASS, or not
// SKIP for a scenario in skips, and once for all the scenarios of want with no verdict.
func checkVerdicts(t *testing.T, order []string, verdicts map[string]string, want []string, skips map[string]string) {
	t.Helper()
	for _, name := range order {
		v, ok := verdicts[name]
		if !ok {
			continue
		}
		_, mayskip := skips[name]
		switch {
		case strings.HasPrefix(v, "PASS") && !mayskip:
		case strings.HasPrefix(v, "SKIP") && mayskip:
		case mayskip:
			t.Errorf("scenario %s: %s (expected SKIP: %s)", name, v, skips[name])
		default:
			t.Errorf("scenario %s: %s", name, v)
		}
	}
	var missing []string
	for _, name := range want {
		if _, ok := verdicts[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("scenarios not reported: %s", strings.Join(missing, ", "))
	}
}

// scenarioTimeout bounds one client stack's whole scenario run.
const scenarioTimeout = 5 * time.Minute

// wantedScenarios are the common scenarios a client stack must report: all of them, or the
// subset SB_SCENARIOS names (comma-separated), which the stack is asked to run while debugging.
func wantedScenarios() []string {
	if only := os.Getenv("SB_SCENARIOS"); only != "" {
		return strings.Split(only, ",")
	}
	return commonScenarios
}

// scenarioCommand is the command that runs a client stack's scenario program (name arg...),
// killed once scenarioTimeout has passed or the test ends, and waited for 10 s more at most for
// the output of what it started.
func scenarioCommand(t *testing.T, name string, arg ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(t.Context(), scenarioTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, name, arg...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}
