package program

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/emulator"
	"github.com/sbgate/sbgate/internal/eventually"
)

// TestEmulatorSDKsVerbatim runs the SDK stacks that honour UseDevelopmentEmulator against sbgate
// in emulator mode, on the emulator's ports, each with the emulator's connection string verbatim
// for its data client (Endpoint=sb://localhost: 5672, plain AMQP) and with the management port
// for its administration client (Endpoint=sb://localhost:5300, as the emulator's documentation
// says): Go (azservicebus 1.11.0), JS (@azure/service-bus 7.9.5) and Python (azure-servicebus
// 7.15.0, pyamqp), and Java (azure-messaging-servicebus 7.17.19), whose administration client
// goes to https://localhost/ whatever the Endpoint's port: sbgate serves it with -mux-listen on
// 443. Their administration clients speak https whatever the flag says (the .NET one alone
// speaks http with it, which TestEmulatorContainerContract's request stands for), so the
// management port is given the test certificate, and each stack is told to trust it the way it
// reads trust from its environment (Java: a trust store made with keytool).
func TestEmulatorSDKsVerbatim(t *testing.T) {
	if !onFixedPorts(t, emulator.AMQPPort, emulator.HTTPPort, 443) {
		return
	}
	certFile, keyFile, pool := localhostCert(t)
	_, stop, out := startRun(t, env("DATABASE_URL", dbtest.NewDatabase(t), "SBGATE_EMULATOR", "true", "SBGATE_CONFIG", sampleConfig),
		"-amqp-listen", "127.0.0.1:5672", "-emulator-http-listen", "127.0.0.1:5300", "-mux-listen", "127.0.0.1:443", "-tls-cert", certFile, "-tls-key", keyFile)
	eventually.Within(time.Minute).True(t, "the readiness line", func() bool {
		return strings.Contains(out.String(), emulator.ReadyLine)
	})
	const data = "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
	const admin = "Endpoint=sb://localhost:5300;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
	if !strings.Contains(out.String(), `connection_string="`+data+`"`) || !strings.Contains(out.String(), `connection_string="`+admin+`"`) {
		t.Errorf("the start-up log does not give the emulator's connection strings:\n%s", out)
	}

	t.Run("Go", func(t *testing.T) {
		ctx := context.Background()
		ac := adminClient(t, admin, pool)
		q, err := ac.GetQueue(ctx, "queue.1", nil)
		if err != nil || q == nil || *q.MaxDeliveryCount != 3 {
			t.Fatalf("GetQueue(queue.1) = %+v, %v", q, err)
		}
		if _, err := ac.CreateQueue(ctx, "go-admin", nil); err != nil {
			t.Fatal(err)
		}
		c, err := azservicebus.NewClientFromConnectionString(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		roundTrip(t, c, "go-admin", "from go")
	})
	t.Run("JS", func(t *testing.T) {
		runClient(t, "node", []string{"testdata/emulator_sdk.js"},
			"NODE_PATH="+absPath(t, "../compat/js-admin/node_modules"), "NODE_EXTRA_CA_CERTS="+certFile, "DATA="+data, "ADMIN="+admin)
	})
	t.Run("Python", func(t *testing.T) {
		runClient(t, absPath(t, "../compat/python/.venv/bin/python"), []string{"testdata/emulator_sdk.py"},
			"REQUESTS_CA_BUNDLE="+certFile, "DATA="+data, "ADMIN="+admin)
	})
	t.Run("Java", func(t *testing.T) {
		cp, err := os.ReadFile(absPath(t, "../compat/java/target/classpath.txt"))
		if err != nil {
			t.Fatal(err)
		}
		java, err := exec.LookPath("java")
		if err != nil {
			t.Fatalf("java not found (make test installs a JDK): %v", err)
		}
		keytool, err := exec.LookPath("keytool")
		if err != nil {
			t.Fatalf("keytool not found (it comes with the JDK make test installs): %v", err)
		}
		trust := filepath.Join(t.TempDir(), "trust.p12")
		if out, err := exec.Command(keytool, "-importcert", "-noprompt", "-alias", "sbgate", "-file", certFile,
			"-keystore", trust, "-storetype", "PKCS12", "-storepass", "changeit").CombinedOutput(); err != nil {
			t.Fatalf("keytool: %v\n%s", err, out)
		}
		runClient(t, java, []string{"-Djavax.net.ssl.trustStore=" + trust, "-Djavax.net.ssl.trustStorePassword=changeit",
			"-cp", strings.TrimSpace(string(cp)), "testdata/EmulatorSdk.java"}, "DATA="+data)
	})
	if err := stop(); err != nil {
		t.Errorf("run returned %v on shutdown", err)
	}
}

func absPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed (make test installs the compat clients): %v", rel, err)
	}
	return p
}

// runClient runs one SDK's script, which prints "all checks passed" when it is content.
func runClient(t *testing.T, prog string, args []string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "all checks passed") {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, b)
	}
}
