package program

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/internal/eventually"
)

// TestStandbyOnlyWaitsForPrimary: a gateway whose DATABASE_URL leads only to a read-only
// standby (with or without target_session_attrs=read-write) says so in one log line, keeps
// running without logging on and on, answers /readyz 503 with Retry-After, and serves once the
// standby is promoted, without a restart.
func TestStandbyOnlyWaitsForPrimary(t *testing.T) {
	t.Parallel()
	pair := newPGPair(t, false)
	urls := []string{pair.standby.url(), pair.standby.url() + "&target_session_attrs=read-write"}
	type gateway struct {
		out    *syncBuffer
		exited <-chan error
		addr   string
	}
	var gws []*gateway
	listenRE := regexp.MustCompile(`msg="no writable PostgreSQL[^"]*".* listen=(\S+)`)
	for _, u := range urls {
		g := &gateway{out: &syncBuffer{}}
		_, g.exited = sbgateProcess(t, g.out, "DATABASE_URL="+u, "SBGATE_SAS_KEY="+testKey)
		eventually.Within(60*time.Second).True(t, "the no-primary log line", func() bool {
			select {
			case err := <-g.exited:
				t.Fatalf("gateway on a standby exited: %v\n%s", err, g.out)
			default:
			}
			m := listenRE.FindStringSubmatch(g.out.String())
			if m != nil {
				g.addr = m[1]
			}
			return m != nil
		})
		gws = append(gws, g)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, g := range gws {
				t.Logf("gateway log:\n%s", g.out)
			}
		}
	})
	// Three seconds of waiting: still running, still one line, 503 throughout.
	client := &http.Client{Timeout: 10 * time.Second}
	for range 6 {
		for _, g := range gws {
			resp, err := client.Get("http://" + g.addr + "/readyz")
			if err != nil {
				t.Fatalf("/readyz while on a standby: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("/readyz while on a standby: %d Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			resp, err = client.Get("http://" + g.addr + "/healthz")
			if err != nil {
				t.Fatalf("/healthz while on a standby: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz while on a standby: %d; want 200 (the process is fine)", resp.StatusCode)
			}
		}
		time.Sleep(500 * time.Millisecond) // checks spread over the 3 s the test observes
	}
	for _, g := range gws {
		select {
		case err := <-g.exited:
			t.Fatalf("gateway on a standby exited: %v\n%s", err, g.out)
		default:
		}
		if n := strings.Count(g.out.String(), "\n"); n > 3 {
			t.Errorf("gateway on a standby logged %d lines in 3 s; want the one that says why it waits:\n%s", n, g.out)
		}
	}

	pair.primary.kill()
	pair.standby.promote()
	for _, g := range gws {
		ep := waitEndpoint(t, g.out, g.exited)
		if st, _, body := call(t, http.MethodPut, ep+"after-promotion-"+strings.TrimSuffix(strings.Split(ep, ":")[2], "/"), nil, ""); st != http.StatusCreated {
			t.Errorf("create a queue once the standby is promoted: %d %s", st, body)
		}
		resp, err := client.Get(ep + "readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz once the standby is promoted: %d", resp.StatusCode)
		}
	}
}
