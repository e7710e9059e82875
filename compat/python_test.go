package compat_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The two Python stacks compat/python/scenarios.py runs on. `make python-clients` installs both:
// Debian's python3-azure (azure-servicebus 7.8.2 over uAMQP 1.5.3, for Debian's own
// /usr/bin/python3) and a virtualenv with the PyPI azure-servicebus pinned in
// compat/python/requirements.txt (over its pure-Python _pyamqp).
const (
	debianPython     = "/usr/bin/python3"
	debianSDKVersion = "7.8.2"
	pypiPython       = "python/.venv/bin/python"
	pypiSDKVersion   = "7.15.0"
	pythonScenarios  = "python/scenarios.py"
)

// TestPythonUAMQP runs the common scenarios with Debian's azure-servicebus 7.8.2 over uAMQP.
// That version ignores UseDevelopmentEmulator and always dials AMQP over TLS on port 5671, so
// its connection string names a loopback address of its own without a port, and the client
// trusts the test certificates through connection_verify.
//
// uAMQP checks that the certificate names the host it dialled, and the harness's certificate
// (httptest's) names 127.0.0.1, ::1 and example.com only. So that address's port 5671 is served
// by amqpsRelay under a certificate minted for it, which relays every connection over TLS to
// the broker's own AMQPS listener: what the broker serves is exactly startBroker's.
func TestPythonUAMQP(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	host, ca := amqpsRelay(t, b)
	runPythonScenarios(t, b, ca, debianPython, debianSDKVersion, func(key string) string {
		return connString(host, key, false)
	}, map[string]string{
		"abandon-with-properties": "azure-servicebus has no properties to modify on abandon_message",
		"list-sessions":           "azure-servicebus 7.8.2 has no API to list sessions (list_queue_sessions came later)",
	})
}

// amqpsRelay listens with TLS on port 5671 of a loopback address of its own, under a
// self-signed certificate for that address, and relays each connection over TLS to b's AMQPS
// listener. It returns the address (without the port) and a PEM file with both that
// certificate and b's (one bundle for clients that take one CA file).
//
// The address is drawn from 127.64.0.0/10, not a fixed one such as 127.0.0.2: other tests bind
// 5671 on addresses of their own, and engineers sharing a machine run this test at once.
func amqpsRelay(t *testing.T, b *testBroker) (string, string) {
	t.Helper()
	var tcp net.Listener
	var err error
	for range 20 {
		addr := fmt.Sprintf("127.%d.%d.%d:5671", 64+mrand.IntN(64), mrand.IntN(256), 1+mrand.IntN(254))
		if tcp, err = net.Listen("tcp", addr); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no loopback address with a free port 5671 for the AMQPS relay: %v", err)
	}
	t.Cleanup(func() { _ = tcp.Close() }) // also when a Fatal below ends the test early
	host, _, _ := strings.Cut(tcp.Addr().String(), ":")
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: host},
		IPAddresses:           []net.IP{net.ParseIP(host)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	brokerPEM, err := os.ReadFile(b.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "ca-bundle.pem")
	ownPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(bundle, append(ownPEM, brokerPEM...), 0o600); err != nil {
		t.Fatal(err)
	}

	ln := tls.NewListener(tcp, &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}},
		MinVersion:   tls.VersionTLS12,
	})
	upstream := &tls.Config{RootCAs: b.Roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]struct{}{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			open[c] = struct{}{}
		} else {
			delete(open, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer down.Close()
				up, err := tls.Dial("tcp", b.AMQPS, upstream)
				if err != nil {
					t.Logf("AMQPS relay: dial %s: %v", b.AMQPS, err)
					return
				}
				defer up.Close()
				track(down, true)
				track(up, true)
				defer track(down, false)
				defer track(up, false)
				done := make(chan struct{}, 2)
				relay := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					done <- struct{}{}
				}
				go relay(up, down)
				go relay(down, up)
				<-done // either side ended: end both
				down.Close()
				up.Close()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return host, bundle
}

// TestPythonPyAMQP runs the common scenarios with the PyPI azure-servicebus (7.15.0) over its
// pure-Python AMQP, which honours UseDevelopmentEmulator=true: plain AMQP on the Endpoint's port.
func TestPythonPyAMQP(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	runPythonScenarios(t, b, b.CAFile, pypiPython, pypiSDKVersion, func(key string) string {
		return connString(b.AMQP, key, true)
	}, map[string]string{
		"abandon-with-properties": "azure-servicebus has no properties to modify on abandon_message",
	})
}

// runPythonScenarios runs scenarios.py with python against b and checks its report: every
// common scenario reported, each PASS except those in skips, which must be SKIP. conn makes the
// data-plane connection string for a key name; ca is the PEM file of the certificates the
// client must trust.
func runPythonScenarios(t *testing.T, b *testBroker, ca, python, sdkVersion string, conn func(key string) string, skips map[string]string) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s: %v (run `make python-clients`, which `make test` runs, to install the Python clients)", python, err)
	}
	// Stat'ing the script also makes go test's cache notice when it changes.
	if _, err := os.Stat(pythonScenarios); err != nil {
		t.Fatal(err)
	}
	// The script's administration client creates the rules scenario's subscription and its rules.
	entities, err := json.Marshal(scenarioEntities(t, b, "py-", false))
	if err != nil {
		t.Fatal(err)
	}
	httpsHost := strings.TrimPrefix(b.HTTPS, "https://")
	cmd := scenarioCommand(t, python, pythonScenarios)
	cmd.Env = append(os.Environ(),
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONUNBUFFERED=1",
		"SB_SDK_VERSION="+sdkVersion,
		"SB_CONN="+conn("SendListen"),
		"SB_CONN_WRONG_KEY="+strings.Replace(conn("RootManageSharedAccessKey"), key, "d3Jvbmcta2V5LWZvci1zYmdhdGUtY29tcGF0LXRlc3Q=", 1),
		"SB_CONN_LISTEN_ONLY="+conn("ListenOnly"),
		// The administration client speaks https only (the REST door); the data plane's
		// WebSockets ride the same https listener at /$servicebus/websocket.
		"SB_ADMIN_CONN="+connString(httpsHost, "RootManageSharedAccessKey", false),
		"SB_WS_CONN="+connString(httpsHost, "SendListen", false),
		"SB_WS_ENDPOINT=sb://"+httpsHost,
		"SB_CA_FILE="+ca,
		// ServiceBusAdministrationClient 7.8.2 drops the transport options it is built with
		// (its _build_pipeline() gets no kwargs), so its https trusts the certificate through
		// requests' own variable.
		"REQUESTS_CA_BUNDLE="+ca,
		"SB_ENTITIES="+string(entities),
		"SB_SCENARIOS="+os.Getenv("SB_SCENARIOS"), // a comma-separated subset while debugging
		"SB_DEBUG="+os.Getenv("SB_DEBUG"),         // 1: the SDK's frame logging on stderr
	)
	start := time.Now()
	scenarioResults(t, cmd, wantedScenarios(), skips)
	t.Logf("%s scenarios with azure-servicebus %s ran in %v", filepath.Base(python), sdkVersion, time.Since(start).Round(time.Second))
}
