package bench

import (
	"testing"
	"time"
)

func TestParseCPUInfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in  string
		model     string
		wantCores int
	}{
		{"two cores one socket", "processor\t: 0\nmodel name\t: AMD EPYC\nphysical id\t: 0\ncore id\t: 0\ncpu cores\t: 2\n\n" +
			"processor\t: 1\nmodel name\t: AMD EPYC\nphysical id\t: 0\ncore id\t: 1\ncpu cores\t: 2\n", "AMD EPYC", 2},
		{"hyper-threads share a core", "processor: 0\nmodel name: X\nphysical id: 0\ncore id: 0\n\nprocessor: 1\nmodel name: X\nphysical id: 0\ncore id: 0\n", "X", 1},
		{"no ids", "processor: 0\nmodel name: Y\ncpu cores: 4\n", "Y", 4},
		{"nothing", "", "", 0},
	} {
		model, cores := parseCPUInfo([]byte(tc.in))
		if model != tc.model || cores != tc.wantCores {
			t.Errorf("%s: parseCPUInfo = %q, %d; want %q, %d", tc.name, model, cores, tc.model, tc.wantCores)
		}
	}
}

func TestParseMemTotal(t *testing.T) {
	t.Parallel()
	if got := parseMemTotal([]byte("MemTotal:       24684092 kB\nMemFree: 1 kB\n")); got != 24684092*1024 {
		t.Errorf("parseMemTotal = %d; want %d", got, 24684092*1024)
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	// The command name may hold spaces and parentheses.
	line := "4242 (postgres: a) b) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 1 0 100 0 0\n"
	p, ok := parseStat([]byte(line))
	want := proc{pid: 4242, ppid: 17, own: 3 * time.Second, reaped: 500 * time.Millisecond}
	if !ok || p != want {
		t.Errorf("parseStat = %+v, %v; want %+v", p, ok, want)
	}
	if _, ok := parseStat([]byte("garbage")); ok {
		t.Error("parseStat(garbage) succeeded")
	}
}

func TestSettlements(t *testing.T) {
	t.Parallel()
	batch := `[{"Body":"xx","BrokerProperties":{"LockToken":"11111111-1111-1111-1111-111111111111","SequenceNumber":1}},` +
		`{"Body":"xx","BrokerProperties":{"LockToken":"22222222-2222-2222-2222-222222222222","SequenceNumber":2}}]`
	body, n := settlements(nil, []byte(batch), "Complete")
	want := `[{"LockToken":"11111111-1111-1111-1111-111111111111","Disposition":"Complete"},` +
		`{"LockToken":"22222222-2222-2222-2222-222222222222","Disposition":"Complete"}]`
	if n != 2 || string(body) != want {
		t.Errorf("settlements = %s, %d; want %s, 2", body, n, want)
	}
	if got := lockTokens([]byte(batch)); len(got) != 2 || string(got[1]) != "22222222-2222-2222-2222-222222222222" {
		t.Errorf("lockTokens = %q", got)
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.6: "1,234,568"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q; want %q", in, got, want)
		}
	}
}
