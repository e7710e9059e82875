package db

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	embeddedUser     = "sbgate" // the cluster's superuser, created by initdb
	embeddedDatabase = "sbgate"
	embeddedPort     = 5432 // only names the socket file: TCP is off
	// maxSocketPath keeps <dir>/.s.PGSQL.5432 under the kernel's sun_path limit (108 bytes on
	// Linux, 104 on the BSDs) with room to spare.
	maxSocketPath = 100

	readyTimeout = 60 * time.Second
	readyPoll    = 50 * time.Millisecond
	// stopTimeout is how long a fast shutdown (SIGINT) may take before SIGQUIT, and SIGQUIT
	// before SIGKILL.
	stopTimeout = 30 * time.Second
	// logTailLines is how much of the server log a startup error quotes.
	logTailLines = 30
)

// ErrDataDirInUse is matched (errors.Is) by the error StartEmbedded returns when another sbgate,
// in this process or another, already runs the embedded server on the same data directory.
var ErrDataDirInUse = errors.New("data directory in use")

type dataDirInUseError struct {
	dir string
	pid int // 0 when the holder has not written it yet
}

func (e *dataDirInUseError) Error() string {
	if e.pid > 0 {
		return fmt.Sprintf("data directory %s is in use by another sbgate (pid %d)", e.dir, e.pid)
	}
	return fmt.Sprintf("data directory %s is in use by another sbgate", e.dir)
}

func (e *dataDirInUseError) Is(target error) bool { return target == ErrDataDirInUse }

// EmbeddedConfig configures StartEmbedded.
type EmbeddedConfig struct {
	DataDir  string            // cluster lives in DataDir/pg; required
	BinDir   string            // optional; found with FindBinDir when empty
	Settings map[string]string // extra postgresql.conf settings passed as -c (tests use fsync=off etc.)
	Logger   *slog.Logger      // server log lines are written here at Debug level, startup/shutdown at Info
	Restart  RestartPolicy     // what happens when the server exits on its own; the zero value restarts it
	// OnRestart, when set, is called (from the supervisor's goroutine) each time the server has
	// come back after a crash, before Status reports it running, for example to drop pooled
	// connections to the dead server.
	OnRestart func()
}

// RestartPolicy says how the supervisor restarts a server that exited without being asked to:
// after FirstDelay, then after twice as long for each further attempt in a row, up to MaxDelay;
// after MaxAttempts failed attempts in a row it gives up (Status then reports StatusFailed and
// Done is closed). An attempt fails when the server does not come up, or when it exits again
// within StableAfter of coming up; a server that stayed up longer starts a new count.
// Zero fields take the defaults in brackets.
type RestartPolicy struct {
	FirstDelay  time.Duration // [100ms]
	MaxDelay    time.Duration // [10s]
	MaxAttempts int           // [10]
	StableAfter time.Duration // [1m]
	Disabled    bool          // leave a crashed server down (Status is failed at once, Done closes once its log is read, within 2s)
}

func (p RestartPolicy) withDefaults() RestartPolicy {
	if p.FirstDelay <= 0 {
		p.FirstDelay = 100 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 10 * time.Second
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 10
	}
	if p.StableAfter <= 0 {
		p.StableAfter = time.Minute
	}
	return p
}

// delay is the wait before restart attempt n (1-based).
func (p RestartPolicy) delay(n int) time.Duration {
	d := p.FirstDelay
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	return min(d, p.MaxDelay)
}

// Status is the state of an embedded server as its supervisor sees it.
type Status int32

const (
	StatusRunning    Status = iota // accepting connections
	StatusRestarting               // exited on its own; the supervisor is bringing it back
	StatusFailed                   // exited on its own and the supervisor gave up: only a restart of sbgate helps
	StatusStopped                  // Stop was called
)

func (s Status) String() string {
	switch s {
	case StatusRunning:
		return "running"
	case StatusRestarting:
		return "restarting"
	case StatusFailed:
		return "failed"
	case StatusStopped:
		return "stopped"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Embedded is a PostgreSQL server run by this process on a private unix socket (no TCP). It is
// started by StartEmbedded and must be stopped with Stop; if this process dies first, the kernel
// tells the server to shut down (Pdeathsig). While it runs, a supervisor restarts the server
// when it exits on its own (a crash, or someone killing it), as its RestartPolicy says.
type Embedded struct {
	dataDir   string
	pgData    string
	socketDir string
	binDir    string
	settings  map[string]string
	log       *slog.Logger
	user      serverUser

	lockMu sync.Mutex
	lock   *os.File // flock on dataDir/sbgate.lock; nil once released

	procMu  sync.Mutex
	proc    *serverProcess // the latest server process started; nil before the first
	logTail *lineRing

	policy     RestartPolicy
	onRestart  func()
	status     atomic.Int32  // a Status
	detached   atomic.Bool   // set by a test that plays a killed sbgate: no restarts
	quit       chan struct{} // closed by Stop: no more restarts
	supervised chan struct{} // closed when the supervisor has returned
	done       chan struct{} // closed when the server is down for good (Stop, or the supervisor gave up)
	doneOnce   sync.Once

	stopOnce    sync.Once
	stopped     chan struct{}
	stopErr     error
	stopTimeout time.Duration
}

// newEmbedded is the server cfg describes, not started: its data directory, made if missing and
// with symlinks resolved, its binaries and the user it runs as.
func newEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("start embedded postgres: no data directory given")
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("start embedded postgres: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	binDir := cfg.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	} else if !hasServer(binDir) {
		return nil, fmt.Errorf("start embedded postgres: %s does not hold initdb and postgres: %w", binDir, ErrNoBinaries)
	}
	su, err := lookupServerUser()
	if err != nil {
		return nil, err
	}

	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("start embedded postgres: %w", err)
	}
	// Symlinks are resolved so that StartEmbedded's permission check looks at the directories the
	// server really walks through, and leftover detection compares real paths.
	if dataDir, err = filepath.EvalSymlinks(dataDir); err != nil {
		return nil, fmt.Errorf("start embedded postgres: %w", err)
	}

	e := &Embedded{
		dataDir:     dataDir,
		pgData:      filepath.Join(dataDir, "pg"),
		socketDir:   socketDirFor(dataDir),
		binDir:      binDir,
		settings:    cfg.Settings,
		log:         log.With(slog.String("component", "postgres")),
		user:        su,
		logTail:     newLineRing(logTailLines),
		policy:      cfg.Restart.withDefaults(),
		onRestart:   cfg.OnRestart,
		quit:        make(chan struct{}),
		supervised:  make(chan struct{}),
		done:        make(chan struct{}),
		stopped:     make(chan struct{}),
		stopTimeout: stopTimeout,
	}
	return e, nil
}

// StartEmbedded initialises the cluster in cfg.DataDir on first use (initdb), starts the server,
// waits until it accepts connections, creates the database "sbgate" if missing, and returns.
// Data survives restarts.
//
// When running as root the server runs as the postgres system user, which then owns DataDir.
// Errors: ErrNoBinaries when the server is not installed; ErrDataDirInUse when another sbgate holds
// DataDir; otherwise an error that says what failed, with the tail of the server log when the
// server did not come up.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (_ *Embedded, err error) {
	e, err := newEmbedded(cfg)
	if err != nil {
		return nil, err
	}
	dataDir, su := e.dataDir, e.user
	if e.lock, err = lockDataDir(dataDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if p := e.current(); p != nil {
				_ = e.terminate(p)
				p.awaitLog()
			}
			e.removeTempSocketDir()
			e.releaseLock()
		}
	}()

	if su.cred != nil {
		if err := checkTraversable(dataDir, su); err != nil {
			return nil, err
		}
	}
	if err := e.stopLeftover(ctx); err != nil {
		return nil, err
	}
	if su.cred != nil {
		// After stopLeftover, so that no server changes the tree while we walk it.
		if err := chownTree(dataDir, su); err != nil {
			return nil, fmt.Errorf("start embedded postgres: give %s to user %s: %w", dataDir, su.name, err)
		}
	}
	if err := e.initdb(ctx); err != nil {
		return nil, err
	}
	if err := prepareSocketDir(e.socketDir, su); err != nil {
		return nil, err
	}

	begin := time.Now()
	p, err := e.start()
	if err != nil {
		return nil, err
	}
	if err := e.waitReady(ctx, p); err != nil {
		return nil, err
	}
	if err := e.createDatabase(ctx); err != nil {
		return nil, err
	}
	e.log.Info("embedded postgres ready",
		slog.String("data_dir", dataDir), slog.String("socket_dir", e.socketDir),
		slog.Int("pid", p.pid), slog.Duration("took", time.Since(begin)))
	go e.supervise()
	return e, nil
}

// URL returns the connection URL of database sbgate on the server's unix socket (trust auth).
func (e *Embedded) URL() string { return socketURL(e.socketDir, embeddedDatabase) }

// AdminURL returns the connection URL of database postgres, for work that cannot happen inside
// the database it changes, such as CREATE DATABASE.
func (e *Embedded) AdminURL() string { return socketURL(e.socketDir, "postgres") }

// Done returns a channel that is closed when the server is down for good: Stop was called, or it
// crashed and the supervisor gave up restarting it (Status tells which).
func (e *Embedded) Done() <-chan struct{} { return e.done }

// Status tells whether the server is running, being restarted after a crash, given up on, or
// stopped.
func (e *Embedded) Status() Status { return Status(e.status.Load()) }

// current returns the latest server process started, or nil.
func (e *Embedded) current() *serverProcess {
	e.procMu.Lock()
	defer e.procMu.Unlock()
	return e.proc
}

// finish records that the server is down for good.
func (e *Embedded) finish(s Status) {
	e.status.Store(int32(s))
	e.doneOnce.Do(func() { close(e.done) })
}

// Stop ends supervision, shuts the server down (fast shutdown: SIGINT, which disconnects clients
// and checkpoints), waits for it to exit and then releases the data directory. If it is still running after 30s it
// gets SIGQUIT (immediate shutdown, crash recovery at next start), after another 30s SIGKILL.
//
// Stop is idempotent and safe to call concurrently: every call waits for the same shutdown.
// The shutdown goes on when ctx ends (so the data directory is always released in order); Stop
// then returns ctx's error. It returns an error when the server had to be killed less gently.
func (e *Embedded) Stop(ctx context.Context) error {
	e.stopOnce.Do(func() {
		close(e.quit)
		go func() {
			defer close(e.stopped)
			<-e.supervised // from here on nobody starts a server
			e.status.Store(int32(StatusStopped))
			p := e.current()
			e.stopErr = e.terminate(p)
			e.removeTempSocketDir()
			e.releaseLock()
			p.awaitLog() // so nothing is logged after Stop returns
			e.log.Info("embedded postgres stopped", slog.String("data_dir", e.dataDir))
			e.finish(StatusStopped)
		}()
	})
	select {
	case <-e.stopped:
		return e.stopErr
	case <-ctx.Done():
		return fmt.Errorf("stop embedded postgres: %w", ctx.Err())
	}
}

// terminate stops server process p if it runs, escalating as Stop describes, and waits for its
// exit.
func (e *Embedded) terminate(p *serverProcess) error {
	if p == nil {
		return nil
	}
	steps := []struct {
		sig  syscall.Signal
		name string
	}{{syscall.SIGINT, "SIGINT"}, {syscall.SIGQUIT, "SIGQUIT"}, {syscall.SIGKILL, "SIGKILL"}}
	var escalated []string
	for i, s := range steps {
		if i > 0 {
			e.log.Warn("embedded postgres did not stop in time; escalating",
				slog.String("signal", s.name), slog.Duration("waited", e.stopTimeout))
			escalated = append(escalated, s.name)
		}
		_ = p.proc.Signal(s.sig) // fails only when it has exited, which exited reports
		var timeout <-chan time.Time
		if s.sig != syscall.SIGKILL {
			t := time.NewTimer(e.stopTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-p.exited:
			return escalationError(escalated)
		case <-timeout:
		}
	}
	panic("unreachable: SIGKILL has no timeout")
}

func escalationError(escalated []string) error {
	if len(escalated) == 0 {
		return nil
	}
	return fmt.Errorf("stop embedded postgres: fast shutdown timed out; sent %s", strings.Join(escalated, ", then "))
}

// removeTempSocketDir removes a socket directory made under os.TempDir(), which would otherwise
// outlive a data directory that is removed (as tests do). It runs while we still hold the lock,
// so no other server can be using it.
func (e *Embedded) removeTempSocketDir() {
	if filepath.Dir(e.socketDir) != e.dataDir {
		_ = os.RemoveAll(e.socketDir)
	}
}

func (e *Embedded) releaseLock() {
	e.lockMu.Lock()
	defer e.lockMu.Unlock()
	if e.lock != nil {
		_ = e.lock.Close() // closing the last descriptor drops the flock
		e.lock = nil
	}
}

// initdb creates the cluster unless it exists. It runs into a scratch directory that is renamed
// into place when complete, so an interrupted run can never pass for a cluster (initdb writes
// PG_VERSION long before it finishes).
func (e *Embedded) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(e.pgData, "PG_VERSION")); err == nil {
		return nil
	}
	if _, err := os.Lstat(e.pgData); err == nil {
		e.log.Info("removing incomplete cluster left by an interrupted initdb", slog.String("dir", e.pgData))
		if err := os.RemoveAll(e.pgData); err != nil {
			return fmt.Errorf("start embedded postgres: remove incomplete cluster: %w", err)
		}
	}
	scratch := e.pgData + ".initdb"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("start embedded postgres: remove incomplete cluster: %w", err)
	}

	args := []string{"-D", scratch, "-U", embeddedUser, "--auth-local=trust", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--locale=C"}
	noSync := e.settings["fsync"] == "off" // the caller has given up durability; skip initdb's sync too
	if noSync {
		args = append(args, "--no-sync")
	}
	begin := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(e.binDir, "initdb"), args...)
	cmd.Dir = e.dataDir
	cmd.SysProcAttr = e.sysProcAttr(syscall.SIGKILL)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	waited, err := StartLocked(cmd)
	if err == nil {
		err = <-waited
	}
	for line := range strings.Lines(out.String()) {
		e.log.Debug(strings.TrimRight(line, "\n"))
	}
	if err != nil {
		_ = os.RemoveAll(scratch)
		return fmt.Errorf("start embedded postgres: initdb: %w\n%s", withCtx(ctx, err), indent(out.String()))
	}
	if err := os.Rename(scratch, e.pgData); err != nil {
		return fmt.Errorf("start embedded postgres: %w", err)
	}
	if !noSync {
		if err := syncDir(e.dataDir); err != nil {
			return fmt.Errorf("start embedded postgres: %w", err)
		}
	}
	e.log.Info("embedded postgres cluster initialised", slog.String("dir", e.pgData),
		slog.Duration("took", time.Since(begin)))
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// sysProcAttr runs a child as the server user in its own process group (so a Ctrl-C in the
// terminal reaches sbgate, which stops the server in order, and not the server directly), with
// deathSig delivered to it if we die.
func (e *Embedded) sysProcAttr(deathSig syscall.Signal) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Credential: e.user.cred}
	setPdeathsig(a, deathSig)
	return a
}

// StartLocked starts cmd from a goroutine locked to its OS thread and waits for it there. The
// kernel sends the parent-death signal when the thread that forked the child exits, not the
// process, and Go may retire an unlocked thread at any time; holding the thread until the
// child has exited makes the signal mean "sbgate died".
func StartLocked(cmd *exec.Cmd) (exited <-chan error, err error) {
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // only after the child has exited
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return waited, nil
}

// serverProcess is one run of the postmaster.
type serverProcess struct {
	proc    *os.Process
	pid     int
	exited  chan struct{} // closed when the process has exited
	waitErr error         // its exit status; set before exited is closed
	logDone chan struct{} // closed when its output pipe reached EOF
}

// start launches postgres as our child and makes it the current process; its output goes to the
// logger and the tail buffer.
func (e *Embedded) start() (*serverProcess, error) {
	args := []string{
		"-D", e.pgData,
		"-k", e.socketDir,
		"-p", strconv.Itoa(embeddedPort),
		"-c", "listen_addresses=",
		"-c", "unix_socket_permissions=0700",
	}
	for _, k := range slices.Sorted(maps.Keys(e.settings)) {
		args = append(args, "-c", k+"="+e.settings[k])
	}
	cmd := exec.Command(filepath.Join(e.binDir, "postgres"), args...)
	cmd.Dir = e.pgData
	// SIGINT is a fast shutdown: clients are disconnected and a checkpoint is written.
	cmd.SysProcAttr = e.sysProcAttr(syscall.SIGINT)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start embedded postgres: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	waited, err := StartLocked(cmd)
	_ = w.Close() // the server (and every backend it forks) holds its own copy
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("start embedded postgres: %w", err)
	}
	p := &serverProcess{proc: cmd.Process, pid: cmd.Process.Pid, exited: make(chan struct{}), logDone: make(chan struct{})}
	e.procMu.Lock()
	e.proc = p
	e.procMu.Unlock()
	go e.readLog(r, p.logDone)
	go func() {
		p.waitErr = <-waited
		close(p.exited)
	}()
	return p, nil
}

// readLog copies the server's output, line by line, to the logger and the tail buffer. It must
// keep reading whatever comes, or the server would block writing its log.
func (e *Embedded) readLog(r *os.File, logDone chan<- struct{}) {
	defer close(logDone)
	defer r.Close()
	const maxLine = 4096
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		text := strings.TrimRight(string(line[:min(len(line), maxLine)]), "\r\n")
		for long { // skip the rest of an overlong line
			_, err = br.ReadSlice('\n')
			long = errors.Is(err, bufio.ErrBufferFull)
		}
		if text != "" {
			e.logTail.add(text)
			e.log.Debug(text)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				e.log.Warn("reading postgres output", slog.Any("err", err))
			}
			return
		}
	}
}

// awaitLog waits briefly for the server's last output to be read, so an error quotes it. A
// backend that outlives the postmaster can hold the pipe open, hence the bound.
func (p *serverProcess) awaitLog() {
	if p == nil {
		return
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-p.logDone:
	case <-t.C:
	}
}

// waitReady polls until server process p accepts a connection to database postgres.
func (e *Embedded) waitReady(ctx context.Context, p *serverProcess) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	poll := time.NewTicker(readyPoll)
	defer poll.Stop()
	cfg, err := pgx.ParseConfig(e.AdminURL())
	if err != nil {
		return fmt.Errorf("start embedded postgres: %w", err)
	}
	cfg.ConnectTimeout = 5 * time.Second // per attempt, in case the server accepts and stalls
	var lastErr error
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		select {
		case <-p.exited:
			p.awaitLog()
			return fmt.Errorf("start embedded postgres: server exited during startup (%v); last server log lines:\n%s",
				p.waitErr, indent(strings.Join(e.logTail.lines(), "\n")))
		case <-ctx.Done():
			p.awaitLogIfDone()
			return fmt.Errorf("start embedded postgres: server did not accept connections (%w; last attempt: %v); "+
				"last server log lines:\n%s", context.Cause(ctx), lastErr, indent(strings.Join(e.logTail.lines(), "\n")))
		case <-poll.C:
		}
	}
}

func (p *serverProcess) awaitLogIfDone() {
	select {
	case <-p.exited:
		p.awaitLog()
	default:
	}
}

// createDatabase creates database sbgate unless it exists (it does after the first start).
func (e *Embedded) createDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, e.AdminURL())
	if err != nil {
		return fmt.Errorf("start embedded postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`,
		embeddedDatabase).Scan(&exists); err != nil {
		return fmt.Errorf("start embedded postgres: look up database %s: %w", embeddedDatabase, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{embeddedDatabase}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	if err != nil {
		return fmt.Errorf("start embedded postgres: create database %s: %w", embeddedDatabase, err)
	}
	return nil
}

// socketURL returns a URL for database on the server in socketDir. Port and sslmode are spelled
// out so that PGPORT or PGSSLMODE in the environment cannot redirect it.
func socketURL(socketDir, database string) string {
	// QueryEscape writes a space as "+", which not every parser reads back as a space.
	host := strings.NewReplacer("%2F", "/", "+", "%20").Replace(url.QueryEscape(socketDir))
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", embeddedUser, database, host, embeddedPort)
}

func indent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(strings.TrimRight(s, "\n")) {
		b.WriteString("    ")
		b.WriteString(line)
	}
	return b.String()
}

// lineRing keeps the last few lines of the server log for error messages.
type lineRing struct {
	mu   sync.Mutex
	buf  []string
	next int
	full bool
}

func newLineRing(n int) *lineRing { return &lineRing{buf: make([]string, n)} }

func (r *lineRing) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = line
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

func (r *lineRing) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return slices.Clone(r.buf[:r.next])
	}
	return append(slices.Clone(r.buf[r.next:]), r.buf[:r.next]...)
}

// RunningEmbeddedURL is the connection URL of the embedded server that a running sbgate keeps on
// dataDir, for commands such as `sbgate key` that work on a running broker's database.
func RunningEmbeddedURL(dataDir string) string {
	return socketURL(socketDirFor(dataDir), embeddedDatabase)
}
