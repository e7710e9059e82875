package program

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbgate/sbgate/db/dbtest"
)

// envNetNS names the test a re-executed test binary runs inside its own network namespace.
const envNetNS = "SBGATE_TEST_NETNS"

// onFixedPorts lets a test bind the emulator's fixed ports (5672, 5300), which the SDKs dial for
// Endpoint=sb://localhost with no port, whatever else the machine listens on. Where it can, it
// runs the test again in a network namespace of its own (unshare -n, loopback up), where every
// port is free and localhost is still 127.0.0.1, and returns false: the caller returns, this
// run having reported the inner one's result. Inside, it returns true and the test goes on.
// Where no namespace can be made (not root, no unshare), it takes a lock shared by sbgate's
// tests and returns true when those ports are free on this machine; when they are taken it
// fails, naming them, rather than skip.
func onFixedPorts(t *testing.T, ports ...int) bool {
	t.Helper()
	if os.Getenv(envNetNS) == t.Name() {
		return true
	}
	const loUp = `ip link set lo up && exec "$0" "$@"`
	unshare, err := exec.LookPath("unshare")
	if err == nil {
		// The probe is the real thing: a namespace whose loopback comes up (needs root and ip).
		err = exec.Command(unshare, "-n", "sh", "-c", loUp, "true").Run()
	}
	if err != nil {
		t.Logf("no network namespace (%v): using this machine's ports %v", err, ports)
		lockFixedPorts(t, ports)
		return true
	}
	args := []string{"-n", "sh", "-c", loUp, os.Args[0],
		"-test.run", "^" + t.Name() + "$", "-test.count=1", "-test.v"}
	cmd := exec.Command(unshare, args...)
	// The inner run uses this run's PostgreSQL for dbtest (its socket is a file, reachable from
	// the namespace); the inner test itself may start its own.
	cmd.Env = append(os.Environ(), envNetNS+"="+t.Name(), dbtest.EnvDatabaseURL+"="+dbtest.AdminURL())
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("the test failed in its network namespace: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not run in its network namespace")
	}
	return false
}

// lockFixedPorts serialises sbgate's tests that bind fixed ports on the machine itself, and
// fails when another program holds one of them.
func lockFixedPorts(t *testing.T, ports []int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "sbgate-test-fixed-ports.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
	var taken []error
	for _, p := range ports {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			taken = append(taken, err)
			continue
		}
		ln.Close()
	}
	if len(taken) > 0 {
		t.Fatalf("this test needs ports %v free (the SDKs dial them for an Endpoint without a port) and cannot make a network namespace: %v", ports, errors.Join(taken...))
	}
}
