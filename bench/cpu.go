package bench

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ), 100 on every Linux
// architecture Go runs on.
const clockTicks = 100

// cpuTimes is the CPU time (user + system) the tool and the gateways it watches have used so
// far; gateways is negative when it cannot be known (no pids, or no /proc).
func cpuTimes(pids []int) (tool, gateways time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		tool = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if len(pids) == 0 {
		return tool, -1
	}
	for _, pid := range pids {
		t, ok := processCPU(pid)
		if !ok {
			return tool, -1
		}
		gateways += t
	}
	return tool, gateways
}

// processCPU reads a process's user and system time from /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the parenthesised command name, which may itself hold spaces: state is
	// the first, utime the 12th, stime the 13th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}
