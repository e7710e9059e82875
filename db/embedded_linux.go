package db

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// setPdeathsig asks the kernel to send sig to the child when the thread that started it dies.
// Go applies it after switching credentials, so it holds for a server run as postgres.
func setPdeathsig(a *syscall.SysProcAttr, sig syscall.Signal) { a.Pdeathsig = sig }

// postmasterState tells what pid is. A pid from postmaster.pid is trusted only when the process
// is a postgres whose working directory is pgData (the postmaster chdirs there), because the
// pid may since have been reused by any process.
func postmasterState(pid int, pgData string) processState {
	proc := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return processGone
	}
	// The state follows the parenthesised command name, which may itself contain ") ".
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return processGone
	}
	comm, err := os.ReadFile(proc + "/comm")
	if err != nil {
		return processGone
	}
	if name := string(bytes.TrimSpace(comm)); name != "postgres" && name != "postmaster" {
		return processOther
	}
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil {
		// Not permitted to look: it is not running as our server user, so it is not ours.
		return processOther
	}
	if real, err := filepath.EvalSymlinks(pgData); err == nil && cwd == real {
		return processPostmaster
	}
	return processOther
}
