package compat_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// goSDKPackage is the Azure SDK for Go's Service Bus package; its own tests run against sbgate
// in TestGoSDKSuite.
const goSDKPackage = "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

// goSDKSkipped are the tests of goSDKPackage that need what no local broker can give, each with
// the reason (the README lists them). A name with a slash is a subtest: its test runs without
// it. Every other test of the package must pass.
var goSDKSkipped = map[string]string{
	"TestReceiveWithDelay": "runs Microsoft's AMQP fault injector (AMQP_FAULT_INJECTOR_PATH), a binary that is not published",
	"TestReceiveWithDifferentWaitTime": "assumes a remote service's latency: it sends 1000 messages and requires a receive of 1000 " +
		"with the default 20 ms wait after the first message to get fewer than one that waits 20 s; a local broker " +
		"delivers all 1000 within the 20 ms",
	"TestClientUnauthorizedCreds/invalid_identity_creds": "tests Entra ID, not the broker: a ClientSecretCredential with a " +
		"bogus secret must fail at login.microsoftonline.com before anything reaches Service Bus (offline it passes " +
		"only after ~27 s of retries)",
	"TestReceiverUnauthorizedCreds/invalid_identity_creds": "as TestClientUnauthorizedCreds/invalid_identity_creds",
}

// goSDKWorkers is how many test processes run at once. The suite's tests do not call
// t.Parallel, and many of them mostly wait (on receive timeouts, lock expiries, sleeps): each
// runs in its own process, several at a time, against one broker, as they would against one
// namespace.
const goSDKWorkers = 6

// TestGoSDKSuite runs the tests of the Go SDK's Service Bus package (azservicebus v1.11.0, the
// data plane: senders, receivers, sessions, settlement, batches, scheduling; and its admin
// helpers), unmodified and live, against sbgate, and requires every test not in goSDKSkipped to
// pass.
//
// The suite derives both endpoints from SERVICEBUS_ENDPOINT (host:port): its data clients dial
// amqps://host:port and its admin clients https://host:port/, so sbgate serves every protocol on
// one port (package portmux). Clients built from a connection string get the test keys; clients
// built with a TokenCredential get DefaultAzureCredential, limited by AZURE_TOKEN_CREDENTIALS to
// the Azure CLI, whose stand-in on PATH answers with a SAS token for the namespace: the admin
// client sends it as its Authorization, the data client as a CBS put-token of type "jwt".
// SSL_CERT_FILE makes Go trust the test certificate. The queues testQueue and
// testQueueWithSessions, which the suite's test-resources.bicep creates, are created as it
// describes them.
func TestGoSDKSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the Go SDK's tests")
	}
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not found: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "azservicebus.test")
	pkgDir, err := exec.CommandContext(ctx, goBin, "list", "-f", "{{.Dir}}", goSDKPackage).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", goSDKPackage, err)
	}
	// One build of the suite, in this module so go.mod's versions apply; each test then runs
	// in a process of its own.
	if out, err := exec.CommandContext(ctx, goBin, "test", "-c", "-o", bin, goSDKPackage).CombinedOutput(); err != nil {
		t.Fatalf("go test -c %s: %v\n%s", goSDKPackage, err, out)
	}
	list, err := exec.CommandContext(ctx, bin, "-test.list", "^Test").Output()
	if err != nil {
		t.Fatalf("%s -test.list: %v", bin, err)
	}
	// SBGATE_GOSDK_TESTS, a regular expression, runs only the tests it matches and logs their
	// whole output, for working on one failure.
	only, err := regexp.Compile(os.Getenv("SBGATE_GOSDK_TESTS"))
	if err != nil {
		t.Fatalf("SBGATE_GOSDK_TESTS: %v", err)
	}
	listed := strings.Fields(string(list))
	for name := range goSDKSkipped {
		if top, _, _ := strings.Cut(name, "/"); !slices.Contains(listed, top) {
			t.Errorf("goSDKSkipped names %s, which the suite does not have", name)
		}
	}
	for _, name := range slices.Concat(goSDKTogether...) {
		if !slices.Contains(listed, name) {
			t.Errorf("goSDKTogether names %s, which the suite does not have", name)
		}
	}
	var tests []string
	for _, name := range listed {
		if _, skip := goSDKSkipped[name]; !skip && only.MatchString(name) {
			tests = append(tests, name)
		}
	}
	if len(tests) < 100 && only.String() == "" {
		t.Fatalf("the suite lists %d tests: %s", len(tests), list)
	}

	b := startBroker(t, &brokerOptions{OnePort: true})
	host := b.OnePort
	// The queues of the suite's test-resources.bicep.
	for _, q := range []struct {
		name     string
		sessions bool
	}{{"testQueue", false}, {"testQueueWithSessions", true}} {
		b.createQueue(t, q.name, func(p *broker.Properties) {
			p.LockDuration = 5 * time.Minute
			p.MaxSizeInMegabytes = 1024
			p.RequiresSession = q.sessions
			p.DuplicateDetectionHistoryTimeWindow = 10 * time.Minute
			p.MaxDeliveryCount = 10
		})
	}
	env := append(goSDKLiveEnv(t, dir, host, b.OnePortCAFile),
		// Unset what would make the suite's credential.New pick a pipeline or service
		// principal credential instead of DefaultAzureCredential.
		"AZURE_SERVICE_DIRECTORY=",
		"SYSTEM_ACCESSTOKEN=",
	)

	started := time.Now()
	results := runGoSDKTests(ctx, t, goSDKGroups(tests), func(ctx context.Context, run string, names []string) *exec.Cmd {
		args := []string{"tool", "test2json", "-t", "-p", goSDKPackage, bin,
			"-test.v=test2json", "-test.count=1", "-test.timeout=5m", "-test.run=" + run}
		if skip := goSDKSubtestSkips(names); skip != "" {
			args = append(args, "-test.skip="+skip)
		}
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = strings.TrimSpace(string(pkgDir)) // its testdata, as go test runs it
		cmd.Env = env
		return cmd
	})
	elapsed := time.Since(started)

	var passed []string
	for _, name := range tests {
		r := results[name]
		switch r.action {
		case "pass":
			passed = append(passed, name)
			if only.String() != "" {
				t.Logf("%s passed (%.1fs):\n%s", name, r.elapsed, r.output.String())
			}
		case "fail":
			t.Errorf("%s failed against sbgate (%.1fs):\n%s", name, r.elapsed, tail(r.output.String(), 12000))
		case "skip":
			t.Errorf("%s skipped itself: %s", name, tail(r.output.String(), 2000))
		default:
			t.Errorf("%s did not finish:\n%s", name, tail(r.output.String(), 12000))
		}
	}
	var report strings.Builder
	for _, name := range tests {
		r := results[name]
		fmt.Fprintf(&report, "  %-4s %6.1fs %s\n", strings.ToUpper(cmp.Or(r.action, "none")), r.elapsed, name)
	}
	skipped := slices.Sorted(maps.Keys(goSDKSkipped))
	t.Logf("%d of %d tests of %s passed in %s (%d left out: %s):\n%s", len(passed), len(tests), goSDKPackage,
		elapsed.Round(time.Second), len(skipped), strings.Join(skipped, ", "), report.String())
}

// goSDKLiveEnv is the environment in which the live tests of a Go SDK package (azservicebus,
// admin) run against sbgate at host (host:port), whose certificate is in caFile: this process's
// environment, SSL_CERT_FILE=caFile, the suite's SERVICEBUS_* variables (the endpoint, and
// connection strings with the test keys) and, for clients built with a TokenCredential,
// AZURE_TOKEN_CREDENTIALS limiting DefaultAzureCredential to the Azure CLI, with dir first on
// PATH, where it writes an `az` stand-in that answers with a SAS token for the namespace (the
// root key's, valid two hours).
func goSDKLiveEnv(t *testing.T, dir, host, caFile string) []string {
	t.Helper()
	expires := time.Now().Add(2 * time.Hour)
	token := sas.Sign("sb://"+host+"/", "RootManageSharedAccessKey", key, expires)
	az := fmt.Sprintf("#!/bin/sh\ncat <<'END'\n{\"accessToken\": %q, \"expiresOn\": %q, \"expires_on\": %d, \"tokenType\": \"Bearer\"}\nEND\n",
		token, expires.Format("2006-01-02 15:04:05.000000"), expires.Unix())
	if err := os.WriteFile(filepath.Join(dir, "az"), []byte(az), 0o700); err != nil {
		t.Fatal(err)
	}
	conn := func(name string) string { return connString(host, name, false) }
	return append(os.Environ(),
		"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AZURE_RECORD_MODE=live",
		"AZURE_TOKEN_CREDENTIALS=AzureCLICredential",
		"SSL_CERT_FILE="+caFile,
		"SERVICEBUS_ENDPOINT="+host,
		"SERVICEBUS_ENDPOINT_PREMIUM="+host,
		"SERVICEBUS_CONNECTION_STRING="+conn("RootManageSharedAccessKey"),
		"SERVICEBUS_CONNECTION_STRING_PREMIUM="+conn("RootManageSharedAccessKey"),
		"SERVICEBUS_CONNECTION_STRING_NO_MANAGE="+conn("SendListen"),
		"SERVICEBUS_CONNECTION_STRING_SEND_ONLY="+conn("SendOnly"),
		"SERVICEBUS_CONNECTION_STRING_LISTEN_ONLY="+conn("ListenOnly"),
	)
}

// goSDKSubtestSkips is the -test.skip pattern for the skipped subtests of the tests names, or
// "".
func goSDKSubtestSkips(names []string) string {
	var tops, subs []string
	for s := range goSDKSkipped {
		if top, sub, ok := strings.Cut(s, "/"); ok && slices.Contains(names, top) {
			tops = append(tops, regexp.QuoteMeta(top))
			subs = append(subs, regexp.QuoteMeta(sub))
		}
	}
	if len(subs) == 0 {
		return ""
	}
	if len(tops) > 1 {
		// One pattern skips the same subtests of each test it names; goSDKGroups keeps
		// tests with skipped subtests apart, so this does not happen.
		panic("goSDKSubtestSkips: tests with skipped subtests grouped: " + strings.Join(names, ", "))
	}
	return "^" + tops[0] + "$/^(" + strings.Join(subs, "|") + ")$"
}

// goSDKTogether are tests that must run in one process, one after the other, as the suite runs
// them: they name their queues with the suite's test.RandomString, seeded with the current
// second, so two of them starting within one second in different processes create the same
// queue, and the second fails with 409 Conflict.
var goSDKTogether = [][]string{
	{"TestRenewLocks", "TestRenewLocksEarlyCancel"},
}

// goSDKGroups divides tests into the groups each run in one process: those of goSDKTogether
// together, every other test alone.
func goSDKGroups(tests []string) [][]string {
	var groups [][]string
	grouped := map[string]bool{}
	for _, g := range goSDKTogether {
		var in []string
		for _, name := range g {
			if slices.Contains(tests, name) {
				in = append(in, name)
				grouped[name] = true
			}
		}
		if len(in) > 0 {
			groups = append(groups, in)
		}
	}
	for _, name := range tests {
		if !grouped[name] {
			groups = append(groups, []string{name})
		}
	}
	return groups
}

// goSDKResult is what test2json said of one top-level test.
type goSDKResult struct {
	action  string // pass, fail, skip; "" when it never ended
	elapsed float64
	output  strings.Builder
}

// runGoSDKTests runs each group of tests in a process of its own (cmd returns it, for a -run
// pattern), goSDKWorkers at a time, and reads their test2json events.
func runGoSDKTests(ctx context.Context, t *testing.T, groups [][]string, cmd func(ctx context.Context, run string, names []string) *exec.Cmd) map[string]*goSDKResult {
	results := make(map[string]*goSDKResult)
	for _, g := range groups {
		for _, name := range g {
			results[name] = &goSDKResult{}
		}
	}
	var mu sync.Mutex
	next := make(chan []string)
	var wg sync.WaitGroup
	for range goSDKWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range next {
				quoted := make([]string, len(g))
				for i, name := range g {
					quoted[i] = regexp.QuoteMeta(name)
				}
				c := cmd(ctx, "^("+strings.Join(quoted, "|")+")$", g)
				out, err := c.StdoutPipe()
				if err != nil {
					t.Errorf("%s: %v", g, err)
					continue
				}
				var stderr strings.Builder
				c.Stderr = &stderr
				if err := c.Start(); err != nil {
					t.Errorf("%s: %v", g, err)
					continue
				}
				sc := bufio.NewScanner(out)
				sc.Buffer(make([]byte, 1<<20), 16<<20)
				last := results[g[0]] // where output outside any test goes (a panic, a timeout)
				for sc.Scan() {
					var ev struct {
						Action, Test, Output string
						Elapsed              float64
					}
					if json.Unmarshal(sc.Bytes(), &ev) != nil {
						continue
					}
					top, _, sub := strings.Cut(ev.Test, "/")
					mu.Lock()
					r := results[top]
					if r == nil || !slices.Contains(g, top) {
						r = last
					}
					last = r
					switch {
					case ev.Action == "output":
						r.output.WriteString(ev.Output)
					case !sub && ev.Test == top && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
						r.action, r.elapsed = ev.Action, ev.Elapsed
					}
					mu.Unlock()
				}
				err = c.Wait()
				mu.Lock()
				anyFailed := slices.ContainsFunc(g, func(name string) bool { return results[name].action == "fail" })
				for _, name := range g {
					r := results[name]
					// A process that failed with every test passed failed outside them (in
					// TestMain, or a cleanup): that counts against each.
					if r.action == "" || (err != nil && !anyFailed && r.action == "pass") {
						fmt.Fprintf(&r.output, "\n(process: %v; stderr: %s)\n", err, stderr.String())
						if r.action == "pass" {
							r.action = "fail"
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, g := range groups {
		select {
		case next <- g:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return results
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
