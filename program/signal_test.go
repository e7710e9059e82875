package program

import (
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
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbgate/sbgate/db/dbtest"
)

// TestSIGTERMStopsCleanly: the real program, with its embedded PostgreSQL, stops on SIGTERM with
// exit status 0, takes its PostgreSQL down with it, and starts again on the same data directory.
func TestSIGTERMStopsCleanly(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	for round := range 2 {
		out := &syncBuffer{}
		p, exited := sbgateProcess(t, out, "SBGATE_DATA_DIR="+dir, "SBGATE_SAS_KEY="+testKey)
		endpoint := waitEndpoint(t, out, exited)
		if round == 0 {
			if st, _, body := call(t, http.MethodPut, endpoint+"q", nil, ""); st != http.StatusCreated {
				t.Fatalf("create queue: %d %s", st, body)
			}
		} else if st, _, body := call(t, http.MethodGet, endpoint+"q", nil, ""); st != http.StatusOK || !strings.Contains(body, "<title type=\"text\">q</title>") {
			t.Fatalf("queue after restart: %d %s", st, body)
		}
		if err := p.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("round %d: sbgate exited with %v after SIGTERM\n%s", round, err, out)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: sbgate did not stop on SIGTERM\n%s", round, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "pg", "postmaster.pid")); !os.IsNotExist(err) {
			t.Errorf("round %d: postmaster.pid still there after sbgate stopped (err %v): PostgreSQL was not shut down", round, err)
		}
	}
}

// TestServeTLS: with a certificate sbgate serves https (the JS and Go administration clients
// speak nothing else) and announces an https endpoint.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSignedCert(t)
	url := dbtest.NewDatabase(t)
	endpoint, stop, _ := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey,
		"SBGATE_TLS_CERT", certFile, "SBGATE_TLS_KEY", keyFile))
	if !strings.HasPrefix(endpoint, "https://") {
		t.Fatalf("endpoint = %s; want https", endpoint)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(endpoint + "healthz")
	if err != nil {
		t.Fatalf("https healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("https healthz = %d", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key, and returns a pool trusting it.
func selfSignedCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	return writeSelfSignedCert(t, 1, "sbgate test", nil, net.IPv4(127, 0, 0, 1))
}

// writeSelfSignedCert writes a self-signed server certificate with the serial number, common
// name, DNS names and IP addresses given, valid for an hour, and its key into files of a
// temporary directory, and returns a pool trusting it.
func writeSelfSignedCert(t *testing.T, serial int64, commonName string, dnsNames []string, ips ...net.IP) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: commonName},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
