package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// clockTicks is the unit of the CPU times in /proc (USER_HZ), 100 on every Linux architecture Go
// runs on.
const clockTicks = 100

// CPUUse is the cores kept busy on average during a phase, each negative when unknown: by the
// load tool, by the gateways (when it knows their processes: it started them), by their
// PostgreSQL (when it runs on this machine), and by the whole machine, which includes whatever
// else runs on it.
type CPUUse struct {
	Tool     float64 `json:"tool"`
	Gateways float64 `json:"gateways"`
	Database float64 `json:"database"`
	Machine  float64 `json:"machine"`
}

// cpuMeasure starts measuring the CPU a phase uses; stop writes it into res.
func (r *runner) cpuMeasure() (stop func(res *Result)) {
	// Without a database URL the processes watched are another broker's (RunRabbitMQ), whose
	// children are its own, not a PostgreSQL.
	childDB := r.cfg.DatabaseURL != ""
	s0 := sampleCPU(r.cfg.GatewayPIDs, r.postmaster, childDB)
	start := time.Now()
	return func(res *Result) {
		s1 := sampleCPU(r.cfg.GatewayPIDs, r.postmaster, childDB)
		el := time.Since(start).Seconds()
		cores := func(t0, t1 time.Duration) float64 {
			if t0 < 0 || t1 < 0 || el <= 0 {
				return -1
			}
			return (t1 - t0).Seconds() / el
		}
		res.CPU = CPUUse{
			Tool: cores(s0.tool, s1.tool), Gateways: cores(s0.gateways, s1.gateways),
			Database: cores(s0.database, s1.database), Machine: cores(s0.machine, s1.machine),
		}
	}
}

// cpuSample is the CPU time (user + system) used so far by the load tool, the gateways it
// watches, their PostgreSQL (its postmaster, the children it has reaped and those alive), and
// the whole machine. A negative time is one that cannot be known: no gateway pids, a database
// elsewhere, or no /proc.
type cpuSample struct {
	tool, gateways, database, machine time.Duration
}

// sampleCPU reads the CPU times. The database's is that of postmaster and its children when
// postmaster is known (findPostmaster), else, with childDB, that of the gateways' children (an
// embedded PostgreSQL's postmaster) and theirs; else it is unknown, and the gateways' children
// count as theirs (another broker's helpers).
func sampleCPU(gatewayPIDs []int, postmaster int, childDB bool) cpuSample {
	s := cpuSample{gateways: -1, database: -1, machine: machineCPU()}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.tool = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if len(gatewayPIDs) == 0 && postmaster == 0 {
		return s
	}
	procs := readProcs()
	if procs == nil {
		return s
	}
	if postmaster != 0 {
		s.database = treeCPU(procs, postmaster)
	}
	if len(gatewayPIDs) == 0 {
		return s
	}
	s.gateways = 0
	if postmaster != 0 || !childDB {
		for _, pid := range gatewayPIDs {
			t := treeCPU(procs, pid)
			if p, ok := procs[pid]; ok && childDB {
				t = p.own
			}
			if t < 0 {
				s.gateways = -1
				break
			}
			s.gateways += t
		}
		return s
	}
	s.database = 0
	for _, pid := range gatewayPIDs {
		p, ok := procs[pid]
		if !ok {
			s.gateways = -1
			continue
		}
		if s.gateways >= 0 {
			s.gateways += p.own
		}
		for _, child := range procs {
			if child.ppid != pid {
				continue
			}
			s.database += child.own + child.reaped
			for _, grandchild := range procs {
				if grandchild.ppid == child.pid {
					s.database += grandchild.own
				}
			}
		}
	}
	return s
}

// treeCPU is the CPU time of process pid, of the children it has reaped and of those alive; -1
// when it is gone.
func treeCPU(procs map[int]proc, pid int) time.Duration {
	p, ok := procs[pid]
	if !ok {
		return -1
	}
	t := p.own + p.reaped
	for _, child := range procs {
		if child.ppid == pid {
			t += child.own
		}
	}
	return t
}

// findPostmaster returns the postmaster of backend, a PostgreSQL backend's process id
// (pg_backend_pid()), when that server runs on this machine: 0 when there is no such process
// here, or it is no postgres (a server in a container has pids of its own).
func findPostmaster(backend int) int {
	isPostgres := func(pid int) bool {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		name := string(bytes.TrimSpace(comm))
		return err == nil && (name == "postgres" || name == "postmaster")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(backend) + "/stat")
	if err != nil || !isPostgres(backend) {
		return 0
	}
	p, ok := parseStat(b)
	if !ok || p.ppid <= 1 || !isPostgres(p.ppid) {
		return 0
	}
	return p.ppid
}

// proc is one process's CPU time from /proc/<pid>/stat.
type proc struct {
	pid, ppid int
	own       time.Duration // utime + stime
	reaped    time.Duration // cutime + cstime: of the children it has waited for
}

// readProcs reads every process's CPU time; nil without /proc.
func readProcs() map[int]proc {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(paths) == 0 {
		return nil
	}
	out := make(map[int]proc, len(paths))
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone since the glob
		}
		if p, ok := parseStat(b); ok {
			out[p.pid] = p
		}
	}
	return out
}

// parseStat reads pid, ppid, utime, stime, cutime and cstime from a /proc/<pid>/stat line.
func parseStat(b []byte) (proc, bool) {
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || closing < open {
		return proc{}, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return proc{}, false
	}
	// After the parenthesised command name (which may hold spaces): state, ppid, … utime is the
	// 12th, stime, cutime, cstime the next three.
	f := bytes.Fields(b[closing+1:])
	if len(f) < 15 {
		return proc{}, false
	}
	var n [5]int64
	for i, idx := range []int{1, 11, 12, 13, 14} {
		if n[i], err = strconv.ParseInt(string(f[idx]), 10, 64); err != nil {
			return proc{}, false
		}
	}
	tick := time.Second / clockTicks
	return proc{pid: pid, ppid: int(n[0]), own: time.Duration(n[1]+n[2]) * tick, reaped: time.Duration(n[3]+n[4]) * tick}, true
}

// machineCPU is the time all CPUs of the machine spent busy, from /proc/stat; -1 without it.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return -1
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are already in user
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return -1
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks
}
