//go:build !linux

package program

import "syscall"

// childSysProcAttr puts a spawned gateway in its own process group, so that a Ctrl-C in the
// terminal reaches only sbgate bench, which stops its gateways in order. Only Linux has a
// parent-death signal: elsewhere a gateway whose sbgate bench was killed keeps running.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
