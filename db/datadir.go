package db

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What StartEmbedded does to and in its data directory before the server starts: who owns it,
// whether that user can reach it, the lock, a leftover server, and the socket directory.

// serverUser is who runs initdb and postgres: ourselves, or postgres when we are root
// (PostgreSQL refuses to run as root).
type serverUser struct {
	name     string
	uid, gid int
	cred     *syscall.Credential // nil: run as ourselves
}

func lookupServerUser() (serverUser, error) {
	if os.Geteuid() != 0 {
		name := strconv.Itoa(os.Geteuid())
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		return serverUser{name: name, uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return serverUser{}, fmt.Errorf("start embedded postgres: running as root, so the server must run as "+
			"the postgres system user, which is missing (%w); install the postgresql package, which creates it, "+
			"or run sbgate as an ordinary user", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return serverUser{}, fmt.Errorf("start embedded postgres: user postgres: %w", err)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				groups = append(groups, uint32(g))
			}
		}
	}
	return serverUser{
		name: "postgres", uid: int(uid), gid: int(gid),
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups},
	}, nil
}

// checkTraversable makes sure the server user can reach dataDir: a root-owned 0700 directory on
// the way (a home directory, or a t.TempDir) would otherwise fail deep inside initdb with an
// unhelpful "permission denied".
func checkTraversable(dataDir string, su serverUser) error {
	for dir := filepath.Dir(dataDir); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("start embedded postgres: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && !mayTraverse(fi.Mode().Perm(), int(st.Uid), int(st.Gid), su) {
			return fmt.Errorf("data directory %s cannot be used: the embedded PostgreSQL server runs as user %s, "+
				"which cannot enter %s (mode %s, owner uid %d); choose a data directory it can reach, such as "+
				"/var/lib/sbgate (set SBGATE_DATA_DIR), or let it through with `chmod o+x %s`",
				dataDir, su.name, dir, fi.Mode().Perm(), st.Uid, dir)
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

func mayTraverse(perm fs.FileMode, uid, gid int, su serverUser) bool {
	switch {
	case uid == su.uid:
		return perm&0o100 != 0
	case gid == su.gid || (su.cred != nil && slices.Contains(su.cred.Groups, uint32(gid))):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// chownTree gives dataDir and everything in it to the server user.
func chownTree(dataDir string, su serverUser) error {
	return filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != su.uid || int(st.Gid) != su.gid) {
			return os.Lchown(path, su.uid, su.gid)
		}
		return nil
	})
}

// lockDataDir takes the exclusive flock that makes one sbgate the only user of dataDir. The
// kernel drops it when the process dies, however it dies, so no stale-lock cleanup is needed.
func lockDataDir(dataDir string) (*os.File, error) {
	path := filepath.Join(dataDir, "sbgate.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start embedded postgres: %w", err)
	}
	if err := flock(f); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &dataDirInUseError{dir: dataDir, pid: readPIDFile(path)}
		}
		return nil, fmt.Errorf("start embedded postgres: lock %s: %w", path, err)
	}
	if err := writePID(f, os.Getpid()); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start embedded postgres: write %s: %w", path, err)
	}
	return f, nil
}

// writePID replaces the lock file's content with pid, which a second sbgate refused the data
// directory names in its error.
func writePID(f *os.File, pid int) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0)
	return err
}

func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// readPIDFile returns the number on the first line of path, or 0.
func readPIDFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

type processState int

const (
	processGone       processState = iota // no such process, or a zombie
	processOther                          // alive, but not a postmaster on our data directory
	processPostmaster                     // a postgres process working in our data directory
	processUnknown                        // alive, and this system cannot tell whose it is
)

// stopLeftover stops a postmaster that still runs on our data directory although no sbgate holds
// it (we do now): its sbgate was killed and the parent-death signal did not reach it, e.g.
// because the thread that started it was already gone. Left running, it would make our start
// fail ("lock file postmaster.pid already exists").
func (e *Embedded) stopLeftover(ctx context.Context) error {
	pidFile := filepath.Join(e.pgData, "postmaster.pid")
	pid := readPIDFile(pidFile)
	if pid == 0 {
		return nil
	}
	switch postmasterState(pid, e.pgData) {
	case processGone:
		return nil // postgres replaces a postmaster.pid whose process is gone by itself
	case processUnknown:
		return nil // let postgres decide; it refuses to start if the pid is alive
	case processOther:
		// The pid was reused by an unrelated process, which would make postgres refuse to
		// start. Nothing else can run on this data directory while we hold its lock.
		e.log.Info("removing stale postmaster.pid", slog.Int("pid", pid))
		if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("start embedded postgres: remove stale %s: %w", pidFile, err)
		}
		return nil
	}

	e.log.Info("stopping leftover embedded postgres from an earlier sbgate", slog.Int("pid", pid))
	poll := time.NewTicker(readyPoll)
	defer poll.Stop()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGKILL} {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("start embedded postgres: stop leftover server (pid %d): %w", pid, err)
		}
		deadline := time.Now().Add(e.stopTimeout)
		for time.Now().Before(deadline) {
			if postmasterState(pid, e.pgData) == processGone {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("start embedded postgres: stop leftover server (pid %d): %w", pid, ctx.Err())
			case <-poll.C:
			}
		}
	}
	return fmt.Errorf("start embedded postgres: leftover server (pid %d) did not exit", pid)
}

// socketDirFor returns where the server puts its socket: dataDir/run, or, when that path is too
// long for a unix socket, a directory under os.TempDir() named by a hash of dataDir so that each
// data directory still gets its own.
func socketDirFor(dataDir string) string {
	dir := filepath.Join(dataDir, "run")
	if len(filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", embeddedPort))) <= maxSocketPath {
		return dir
	}
	sum := sha256.Sum256([]byte(dataDir))
	return filepath.Join(os.TempDir(), "sbgate-"+hex.EncodeToString(sum[:8]))
}

// prepareSocketDir creates dir for the server user alone. A directory under a shared /tmp may
// have been made by someone else to intercept connections, so an existing one must already
// belong to the server user (or to us, and is then handed over).
func prepareSocketDir(dir string, su serverUser) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("start embedded postgres: socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("start embedded postgres: socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return fmt.Errorf("start embedded postgres: socket directory %s is not a directory; remove it", dir)
	}
	if int(st.Uid) != su.uid {
		if int(st.Uid) != os.Geteuid() {
			return fmt.Errorf("start embedded postgres: socket directory %s belongs to uid %d, not %s; remove it",
				dir, st.Uid, su.name)
		}
		if err := os.Lchown(dir, su.uid, su.gid); err != nil {
			return fmt.Errorf("start embedded postgres: socket directory: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("start embedded postgres: socket directory: %w", err)
	}
	// Only a server on our data directory uses this directory and none runs (we hold the lock and
	// stopped any leftover), so socket lock files here are stale; postgres would refuse to start
	// if a stale one named a pid that has since been reused.
	for _, name := range []string{".s.PGSQL.5432.lock", ".s.PGSQL.5432"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("start embedded postgres: remove stale socket file: %w", err)
		}
	}
	return nil
}
