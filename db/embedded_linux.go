package db

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
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

// killOrphans ends what is left of a postmaster that died on pgData: its backends and auxiliary
// processes notice its death only at their next check, and a new postmaster refuses to start
// while they hold the old shared memory. Each is a postgres working in pgData, which is how
// postmasterState recognises them; the wait ends when all are gone or after timeout.
func killOrphans(pgData string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		for _, de := range entries {
			pid, err := strconv.Atoi(de.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			if postmasterState(pid, pgData) == processPostmaster {
				_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: it went by itself
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the crashed server still running after SIGKILL: %v", left)
		}
		time.Sleep(readyPoll)
	}
}
