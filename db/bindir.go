package db

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoBinaries is returned by FindBinDir (and StartEmbedded) when no PostgreSQL server
// installation can be found. Its message tells the user what to install.
var ErrNoBinaries = errors.New("PostgreSQL server binaries not found (initdb, postgres); " +
	"install them with `sudo apt-get install -y postgresql` (Debian/Ubuntu), " +
	"or set DATABASE_URL to use an existing server")

// FindBinDir locates the directory holding initdb and postgres: the one `pg_config --bindir`
// names, then the highest-versioned /usr/lib/postgresql/*/bin (Debian and Ubuntu keep the server
// out of PATH there), then PATH. It returns ErrNoBinaries when none holds both programs.
func FindBinDir() (string, error) {
	return findBinDir(binSearch{
		lookPath: exec.LookPath,
		pgConfig: runPGConfig,
		libDir:   "/usr/lib/postgresql",
	})
}

// binSearch holds FindBinDir's inputs so tests can take each one away.
type binSearch struct {
	lookPath func(file string) (string, error)
	pgConfig func(path string) (string, error) // runs `path --bindir`
	libDir   string                            // holds <version>/bin directories
}

func findBinDir(s binSearch) (string, error) {
	if pgc, err := s.lookPath("pg_config"); err == nil {
		// pg_config may come from a client-only package (libpq-dev) whose bindir lacks the
		// server; then keep looking.
		if dir, err := s.pgConfig(pgc); err == nil && hasServer(dir) {
			return dir, nil
		}
	}

	if dir := highestVersionDir(s.libDir); dir != "" {
		return dir, nil
	}

	if initdb, err := s.lookPath("initdb"); err == nil {
		// Resolve symlinks (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb)
		// so that initdb and postgres come from one installation.
		if real, err := filepath.EvalSymlinks(initdb); err == nil && hasServer(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if hasServer(filepath.Dir(initdb)) {
			return filepath.Dir(initdb), nil
		}
	}
	return "", ErrNoBinaries
}

func runPGConfig(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--bindir").Output()
	if err != nil {
		return "", fmt.Errorf("%s --bindir: %w", path, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// highestVersionDir returns libDir/<v>/bin for the highest numeric version v (so 10 beats 9.6)
// that holds a server, or "" when there is none.
func highestVersionDir(libDir string) string {
	if libDir == "" {
		return ""
	}
	entries, err := os.ReadDir(libDir)
	if err != nil {
		return ""
	}
	best, bestVersion := "", -1.0
	for _, e := range entries {
		v, err := strconv.ParseFloat(e.Name(), 64)
		if err != nil {
			continue
		}
		dir := filepath.Join(libDir, e.Name(), "bin")
		if v > bestVersion && hasServer(dir) {
			best, bestVersion = dir, v
		}
	}
	return best
}

// hasServer reports whether dir holds executable initdb and postgres programs.
func hasServer(dir string) bool {
	if dir == "" {
		return false
	}
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// DefaultDataDir returns the per-user default data directory for the embedded server:
// /var/lib/sbgate when running as root, otherwise $XDG_DATA_HOME/sbgate or, when that is unset
// or relative, ~/.local/share/sbgate. The caller handles $SBGATE_DATA_DIR. It fails only when
// the home directory is unknown. getenv is the caller's view of the environment ($XDG_DATA_HOME,
// $HOME): settings are read in one place, sbgate's configuration.
func DefaultDataDir(getenv func(string) string) (string, error) {
	home := func() (string, error) {
		if h := getenv("HOME"); h != "" {
			return h, nil
		}
		return "", errors.New("$HOME is not set")
	}
	return defaultDataDir(os.Geteuid(), getenv, home)
}

func defaultDataDir(euid int, getenv func(string) string, home func() (string, error)) (string, error) {
	if euid == 0 {
		return "/var/lib/sbgate", nil
	}
	// The XDG spec says relative paths are invalid and must be ignored.
	if x := getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "sbgate"), nil
	}
	h, err := home()
	if err != nil {
		return "", fmt.Errorf("default data directory: %w", err)
	}
	return filepath.Join(h, ".local", "share", "sbgate"), nil
}
