package compat_test

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// javaSkips are the common scenarios the Java SDK cannot express, with the reason (checked in
// azure-messaging-servicebus 7.17.19's sources; see compat/java/src/.../Sessions.java).
var javaSkips = map[string]string{
	"list-sessions": "azure-messaging-servicebus 7.17.19 has no API to list sessions (no get-message-sessions)",
}

// javaOwnScenarios are the Java program's scenarios beyond commonScenarios: AMQP over TLS on
// the AMQPS port, and transactions (committed, rolled back, across entities).
var javaOwnScenarios = []string{"amqps", "transaction-commit", "transaction-rollback", "transaction-cross-entity",
	"transaction-lock-lapsed", "transaction-timeout"}

// javaTxnTimeout is the transaction timeout of the Java scenarios' broker.
const javaTxnTimeout = 10 * time.Second

// TestJavaClients runs compat/java: the Java client stack (com.azure:azure-messaging-servicebus
// from the azure-sdk-bom pinned in compat/java/pom.xml, over azure-core-amqp and proton-j) runs
// the common scenarios against an in-process sbgate, one JVM for all, scenarios in parallel
// threads. `make java-clients` (part of `make test`) installs Java and Maven and resolves the
// dependencies into ~/.m2, writing compat/java/target/classpath.txt; this test compiles the
// scenario program with javac and runs it with no Maven and no download. PN_TRACE_FRM=1 in the
// environment prints proton-j's frame trace, AZURE_LOG_LEVEL=verbose the SDK's log.
func TestJavaClients(t *testing.T) {
	t.Parallel()
	classpath := javaClasspath(t)
	javac, java := javaTool(t, "javac"), javaTool(t, "java")

	// Compile first: a compile error is reported without starting a broker.
	classes := t.TempDir()
	sources, err := filepath.Glob(filepath.Join("java", "src", "main", "java", "sbgate", "compat", "*.java"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no Java sources in compat/java/src: %v", err)
	}
	compile := exec.CommandContext(t.Context(), javac, append([]string{"--release", "17", "-encoding", "UTF-8",
		"-d", classes, "-cp", classpath}, sources...)...)
	if out, err := compile.CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}

	// Transactions time out after javaTxnTimeout here, so the timeout scenario ends in seconds;
	// the others commit well within it.
	b := startBroker(t, &brokerOptions{TransactionTimeout: javaTxnTimeout})
	queues := map[string]func(*broker.Properties){
		"PROPS": nil, "BODIES": nil, "RND": nil, "COMPLETE": nil, "ABANDON": nil, "DEFER": nil,
		"DEADLETTER": nil, "PEEK": nil, "SCHED_QUEUE": nil, "BATCH": nil, "LARGE": nil, "WS": nil,
		"TLS": nil, "ERRORS": nil, "TXN": nil, "TXN_ROLLBACK": nil, "TXN_IN": nil, "TXN_OUT": nil, "TXN_TIMEOUT": nil,
		"TXN_LAPSE":     func(p *broker.Properties) { p.LockDuration = 5 * time.Second },
		"RENEW":         func(p *broker.Properties) { p.LockDuration = 5 * time.Second },
		"SESSION_STATE": func(p *broker.Properties) { p.RequiresSession = true },
		"SESSION_EMPTY": func(p *broker.Properties) { p.RequiresSession = true },
	}
	env := []string{}
	for key, mut := range queues {
		name := "java-" + strings.ToLower(strings.ReplaceAll(key, "_", "-"))
		b.createQueue(t, name, mut)
		env = append(env, "SB_ENTITY_"+key+"="+name)
	}
	b.createTopic(t, "java-sched-topic", "sub")
	env = append(env,
		"SB_ENTITY_SCHED_TOPIC=java-sched-topic", "SB_ENTITY_SCHED_SUB=sub",
		// The rules scenario creates these itself with the administration client (REST).
		"SB_ENTITY_RULES_TOPIC=java-rules", "SB_ENTITY_RULES_SUB=java-rules-sub",
		"SB_ENTITY_MISSING=java-no-such-queue",
	)

	https, err := url.Parse(b.HTTPS)
	if err != nil {
		t.Fatal(err)
	}
	// A key that is some key, but not SendListen's.
	wrongKey := "Endpoint=sb://" + b.AMQP + "/;SharedAccessKeyName=SendListen;SharedAccessKey=" + sendOnlyKey +
		";UseDevelopmentEmulator=true"
	env = append(env,
		"SB_CONN="+connString(b.AMQP, "SendListen", true),
		"SB_CONN_ROOT="+connString(b.AMQP, "RootManageSharedAccessKey", true),
		"SB_CONN_LISTEN_ONLY="+connString(b.AMQP, "ListenOnly", true),
		"SB_CONN_WRONG_KEY="+wrongKey,
		"SB_CONN_WEBSOCKETS="+connString(https.Host, "SendListen", false),
		"SB_CONN_TLS="+connString(b.AMQPS, "SendListen", false),
		"SB_CONN_ADMIN="+connString(https.Host, "RootManageSharedAccessKey", false),
		"SB_HTTPS_PORT="+https.Port(),
		"SB_CA_FILE="+b.CAFile,
		// The program reports what has not ended by then and exits, before the context below
		// ends it without a report.
		"SB_RUN_SECONDS="+strconv.Itoa(int((scenarioTimeout-30*time.Second)/time.Second)),
	)

	// One JVM for every scenario. C1 only and the serial collector: the run is short and shares 2
	// cores with other tests, so start-up and compile time matter more than peak speed.
	cmd := scenarioCommand(t, java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k",
		"-cp", classes+string(os.PathListSeparator)+classpath, "sbgate.compat.Scenarios")
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	want := append(append([]string{}, commonScenarios...), javaOwnScenarios...)
	results := scenarioResults(t, cmd, want, javaSkips)
	t.Logf("Java scenarios: %d reported in %s", len(results), time.Since(start).Round(time.Millisecond))
}

// javaClasspath returns the class path `make java-clients` resolved, failing the test when it or
// any jar it names is missing.
func javaClasspath(t *testing.T) string {
	t.Helper()
	const file = "java/target/classpath.txt"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the Java client is not installed (run `make java-clients`, part of `make test`): %v", err)
	}
	cp := strings.TrimSpace(string(data))
	for _, jar := range filepath.SplitList(cp) {
		if _, err := os.Stat(jar); err != nil {
			t.Fatalf("compat/%s names a missing jar (run `make java-clients` again): %v", file, err)
		}
	}
	return cp
}

// javaTool finds a JDK tool (java, javac) or fails the test saying how to install it.
func javaTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (run `make java-clients`, which installs a JDK): %v", name, err)
	}
	return p
}
