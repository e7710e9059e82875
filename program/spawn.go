package program

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/sas"
)

const (
	// spawnReadyTimeout bounds a spawned gateway's start: initdb and migrations included.
	spawnReadyTimeout = 2 * time.Minute
	spawnReadyPoll    = 25 * time.Millisecond
	// spawnStopTimeout is how long a gateway may take to stop on SIGTERM (its shutdown grace
	// and its PostgreSQL's fast shutdown) before it is killed.
	spawnStopTimeout = 90 * time.Second
	// spawnLogTail is how many lines of a failed gateway's log an error quotes.
	spawnLogTail = 20
)

// spawnedEnv are the variables a spawned gateway must not inherit: sbgate bench sets them
// itself, or they would make the gateways collide (one listen or pprof address for all) or speak
// something else than plain HTTP. The other SBGATE_ settings pass through, to tune the gateways.
var spawnedEnv = []string{
	"DATABASE_URL", "SBGATE_LISTEN", "SBGATE_DATA_DIR", "SBGATE_SAS_KEY", "SBGATE_SAS_KEY_NAME",
	"SBGATE_READY_FILE", "SBGATE_TLS_CERT", "SBGATE_TLS_KEY", "SBGATE_PPROF_LISTEN", "SBGATE_CONNECTION_STRING",
}

// spawned is the gateways sbgate bench started for itself, and the temporary directory that
// holds their ready files, logs and the embedded PostgreSQL's data.
type spawned struct {
	dir   string
	procs []*child
	log   io.Writer
	// pg is the embedded PostgreSQL sbgate bench started itself for gateways that are profiled
	// (spawnOptions.profile); nil when the first gateway runs it.
	pg *db.Embedded
	// pprof are the gateways' profiling addresses when profiled, in the order of procs.
	pprof []string
}

// spawnOptions say what gateways to start.
type spawnOptions struct {
	n           int
	databaseURL string // empty: a fresh embedded PostgreSQL
	// profile gives each gateway a profiling listener, and the embedded PostgreSQL, which
	// sbgate bench then runs itself, pg_stat_statements.
	profile bool
	// binary is the sbgate executable the gateways run (empty: this one), to measure two
	// builds with one load tool.
	binary string
}

// profiledSettings are what a profiled run's embedded PostgreSQL is started with.
var profiledSettings = map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track_planning": "on"}

// child is one gateway process.
type child struct {
	cmd     *exec.Cmd
	exited  <-chan error
	waitErr error
	done    bool
	logPath string
	ready   readyInfo
}

// spawnGateways starts o.n gateways, each `sbgate serve` as a child process of this one (the
// same executable) on a free port, with one random SAS key passed in the environment. The first
// runs a fresh embedded PostgreSQL in a temporary directory, unless o.databaseURL names a
// database; the others use the first one's database. Profiled (o.profile), sbgate bench starts
// that embedded PostgreSQL itself, with pg_stat_statements, and every gateway uses it. Each tells
// its endpoint and database through -ready-file. The children run in their own process group,
// so a Ctrl-C reaches only sbgate bench, which stops them in order (stop); on Linux they also get
// SIGTERM if it dies.
func spawnGateways(ctx context.Context, o spawnOptions, progress io.Writer) (_ *spawned, err error) {
	n, databaseURL := o.n, o.databaseURL
	exe := o.binary
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bench: start gateways: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "sbgate-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: start gateways: %w", err)
	}
	s := &spawned{dir: dir, log: progress}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	// The embedded PostgreSQL runs as the postgres user when we are root: it must be able to
	// pass through dir to its data directory (it cannot list it).
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("bench: start gateways: %w", err)
	}
	s.logf("starting %d gateways; their data, ready files and logs in %s (removed at the end)", n, dir)
	key, err := sas.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("bench: start gateways: %w", err)
	}
	if o.profile && databaseURL == "" {
		if s.pg, err = db.StartEmbedded(ctx, db.EmbeddedConfig{DataDir: filepath.Join(dir, "pg"), Settings: profiledSettings}); err != nil {
			return nil, fmt.Errorf("bench: start PostgreSQL: %w", err)
		}
		databaseURL = s.pg.URL()
		s.logf("started PostgreSQL with pg_stat_statements in %s", filepath.Join(dir, "pg"))
	}
	for i := range n {
		name := fmt.Sprintf("gateway-%d", i)
		readyFile := filepath.Join(dir, name+".json")
		args := []string{"serve", "-listen", "127.0.0.1:0", "-amqp-listen", "127.0.0.1:0", "-amqps-listen", "127.0.0.1:0", "-ready-file", readyFile}
		if o.profile {
			addr, err := freeAddress()
			if err != nil {
				return nil, fmt.Errorf("bench: start %s: %w", name, err)
			}
			args = append(args, "-pprof-listen", addr)
			s.pprof = append(s.pprof, addr)
		}
		env := append(childEnvironment(os.Environ()), "SBGATE_SAS_KEY="+key)
		switch {
		case i > 0:
			env = append(env, "DATABASE_URL="+s.procs[0].ready.DatabaseURL)
		case databaseURL != "":
			env = append(env, "DATABASE_URL="+databaseURL)
		default:
			args = append(args, "-data-dir", filepath.Join(dir, "pg"))
		}
		c, err := startChild(exe, args, env, filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, fmt.Errorf("bench: start %s: %w", name, err)
		}
		s.procs = append(s.procs, c)
		if err := c.awaitReady(ctx, readyFile); err != nil {
			return nil, fmt.Errorf("bench: start %s: %w", name, err)
		}
		s.logf("started %s (pid %d) at %s", name, c.cmd.Process.Pid, c.ready.Endpoint)
	}
	return s, nil
}

func (s *spawned) logf(format string, args ...any) {
	if s.log != nil {
		fmt.Fprintf(s.log, format+"\n", args...)
	}
}

// amqpConnectionStrings are the gateways' plain AMQP listeners, in the order of
// connectionStrings.
func (s *spawned) amqpConnectionStrings() []string {
	out := make([]string, len(s.procs))
	for i, c := range s.procs {
		out[i] = c.ready.AMQPConnectionString
	}
	return out
}

func (s *spawned) connectionStrings() []string {
	out := make([]string, len(s.procs))
	for i, c := range s.procs {
		out[i] = c.ready.ConnectionString
	}
	return out
}

// stop stops the gateways, those on the first one's database first and then the first, which
// takes its PostgreSQL down with it, and removes the temporary directory. It is safe to call
// more than once.
func (s *spawned) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		if err := s.procs[i].stop(); err != nil {
			s.logf("gateway-%d: %v", i, err)
		}
	}
	if s.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), spawnStopTimeout)
		if err := s.pg.Stop(ctx); err != nil {
			s.logf("PostgreSQL: %v", err)
		}
		cancel()
		s.pg = nil
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			s.logf("remove %s: %v", s.dir, err)
		}
		s.dir = ""
	}
}

// freeAddress is a loopback address with a port free a moment ago, for a listener whose address
// must be known before the process that opens it starts.
func freeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// childEnvironment is environ without the variables spawned gateways get from sbgate bench.
func childEnvironment(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(spawnedEnv, k) {
			out = append(out, kv)
		}
	}
	return out
}

// startChild starts exe with args and env, its output going to logPath.
func startChild(exe string, args, env []string, logPath string) (*child, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childSysProcAttr()
	exited, err := db.StartLocked(cmd) // with the parent-death signal set on cmd
	if err != nil {
		return nil, err
	}
	return &child{cmd: cmd, exited: exited, logPath: logPath}, nil
}

// awaitReady polls for the child's ready file until it appears, the child exits, or ctx ends.
func (c *child) awaitReady(ctx context.Context, path string) error {
	deadline := time.NewTimer(spawnReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(spawnReadyPoll)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if err := json.Unmarshal(b, &c.ready); err != nil {
				return fmt.Errorf("ready file %s: %w", path, err)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-c.exited:
			c.done, c.waitErr = true, err
			return fmt.Errorf("exited before serving (%v):\n%s", err, logTail(c.logPath))
		case <-deadline.C:
			return fmt.Errorf("not serving after %s:\n%s", spawnReadyTimeout, logTail(c.logPath))
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM, waits for the child to exit, and kills it if it takes too long.
func (c *child) stop() error {
	if c.done {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(spawnStopTimeout)
	defer timer.Stop()
	select {
	case err := <-c.exited:
		c.done, c.waitErr = true, err
	case <-timer.C:
		_ = c.cmd.Process.Kill()
		c.done, c.waitErr = true, <-c.exited
		return fmt.Errorf("did not stop within %s of SIGTERM; killed:\n%s", spawnStopTimeout, logTail(c.logPath))
	}
	if c.waitErr != nil {
		return fmt.Errorf("exited with %v:\n%s", c.waitErr, logTail(c.logPath))
	}
	return nil
}

// logTail is the end of a log file, indented, for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-spawnLogTail):]
	return "  " + string(bytes.Join(lines, []byte("\n  ")))
}
