package program

import "syscall"

// childSysProcAttr puts a spawned gateway in its own process group, so that a Ctrl-C in the
// terminal reaches only sbgate bench, which stops its gateways in order, and asks the kernel to
// send it SIGTERM (a clean shutdown) if sbgate bench dies first.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
