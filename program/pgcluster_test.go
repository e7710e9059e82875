package program

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/internal/eventually"
)

// pgNode is one PostgreSQL server of a replication pair the failover tests build from the
// installed server binaries: it listens on 127.0.0.1 on a port of its own, runs as the postgres
// user when the tests run as root (PostgreSQL refuses to run as root), and is a process group of
// its own so that SIGKILL takes the postmaster and all its backends at once, as losing the
// machine would.
type pgNode struct {
	t      *testing.T
	name   string
	dir    string // the data directory
	port   int
	args   []string
	cmd    *exec.Cmd
	exited chan error
	log    *syncBuffer
}

// pgPair is a primary and a streaming standby made from it with pg_basebackup.
type pgPair struct {
	binDir           string
	cred             *syscall.Credential
	primary, standby *pgNode
}

// newPGPair starts a primary, takes a base backup of it, and starts the backup as a streaming
// standby named "standby1". sync makes the primary wait for the standby to flush every commit
// (synchronous_standby_names); otherwise replication is asynchronous.
func newPGPair(t *testing.T, sync bool) *pgPair {
	t.Helper()
	binDir, err := db.FindBinDir()
	if err != nil {
		t.Fatalf("PostgreSQL server binaries: %v", err)
	}
	p := &pgPair{binDir: binDir}
	base, err := os.MkdirTemp("", "sbgate-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the postgres user: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(base, uid, gid); err != nil {
			t.Fatal(err)
		}
	}

	primaryDir := filepath.Join(base, "primary")
	p.run(t, "initdb", "-D", primaryDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	common := []string{
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + base,
		"-c", "wal_level=replica",
		"-c", "max_wal_senders=4",
		"-c", "max_connections=100",
		"-c", "fsync=off", // only the primary's process dies, never the machine's page cache
		"-c", "shared_buffers=32MB",
		"-c", "wal_sender_timeout=5s",
		"-c", "wal_receiver_status_interval=1s",
	}
	primaryArgs := append([]string{}, common...)
	if sync {
		primaryArgs = append(primaryArgs, "-c", "synchronous_standby_names=standby1", "-c", "synchronous_commit=on")
	}
	p.primary = p.startNode(t, "primary", primaryDir, primaryArgs)

	standbyDir := filepath.Join(base, "standby")
	p.run(t, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.primary.port), "-U", "postgres",
		"-D", standbyDir, "-X", "stream", "--no-sync")
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=standby1", p.primary.port)
	if err := os.WriteFile(filepath.Join(standbyDir, "standby.signal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Chown(filepath.Join(standbyDir, "standby.signal"), uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	p.standby = p.startNode(t, "standby", standbyDir, append(append([]string{}, common...),
		"-c", "primary_conninfo="+conninfo, "-c", "hot_standby=on"))

	// The pair is ready when the primary sees the standby streaming (and, for sync, as its
	// synchronous standby).
	want := "async"
	if sync {
		want = "sync"
	}
	eventually.Within(60*time.Second).True(t, "the standby to stream", func() bool {
		var state string
		err := p.primary.queryRow(`SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1' AND state = 'streaming'`, &state)
		return err == nil && state == want
	})
	return p
}

// run runs one of the server binaries as the server user and fails the test on error.
func (p *pgPair) run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(p.binDir, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func (p *pgPair) startNode(t *testing.T, name, dir string, args []string) *pgNode {
	t.Helper()
	n := &pgNode{t: t, name: name, dir: dir, port: freePort(t), log: &syncBuffer{}}
	n.args = append([]string{"-D", dir, "-p", strconv.Itoa(n.port)}, args...)
	n.cmd = exec.Command(filepath.Join(p.binDir, "postgres"), n.args...)
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	n.cmd.Dir = "/"
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.exited = make(chan error, 1)
	go func() { n.exited <- n.cmd.Wait() }()
	t.Cleanup(func() {
		n.kill()
		if t.Failed() {
			t.Logf("%s PostgreSQL log:\n%s", name, n.log)
		}
	})
	accepting := name + " PostgreSQL to accept connections"
	eventually.Within(60*time.Second).True(t, accepting, func() bool {
		select {
		case err := <-n.exited:
			t.Fatalf("%s PostgreSQL exited: %v\n%s", name, err, n.log)
		default:
		}
		var one int
		return n.queryRow(`SELECT 1`, &one) == nil
	})
	return n
}

// url is a single-host URL of the node's postgres database.
func (n *pgNode) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", n.port)
}

func (n *pgNode) queryRow(sql string, dest ...any) error {
	return n.queryRowWithin(3*time.Second, sql, dest...)
}

func (n *pgNode) queryRowWithin(timeout time.Duration, sql string, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.url())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// kill SIGKILLs the node's whole process group (postmaster and backends) and waits for the
// postmaster to be gone; it does nothing once the node is down.
func (n *pgNode) kill() {
	if n.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	// PostgreSQL's children leave the postmaster's process group (setsid): kill them too, as
	// losing the machine would, rather than let them finish what they were doing.
	killCwd(n.dir)
	select {
	case <-n.exited:
		n.exited <- nil // later callers return at once
	case <-time.After(30 * time.Second):
		n.t.Errorf("%s PostgreSQL did not die on SIGKILL", n.name)
	}
}

// promote makes the standby a primary and returns when PostgreSQL says it is one.
func (n *pgNode) promote() {
	n.t.Helper()
	var ok bool
	// Promotion can take seconds on a loaded machine (the end of recovery, a new timeline).
	if err := n.queryRowWithin(90*time.Second, `SELECT pg_promote(true, 60)`, &ok); err != nil || !ok {
		n.t.Fatalf("promote %s: %v (%v)", n.name, err, ok)
	}
}

// killCwd SIGKILLs every process working in dir (a postmaster chdirs to its data directory, and
// its children inherit that).
func killCwd(dir string) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return
	}
	entries, _ := os.ReadDir("/proc")
	for _, de := range entries {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + de.Name() + "/cwd"); err == nil && cwd == real {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// freePort is a TCP port nothing listens on at the moment of asking.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
