package emulator_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sbgate/sbgate/emulator"
)

func TestConnectionString(t *testing.T) {
	for _, tc := range []struct {
		host string
		port int
		want string
	}{
		{"localhost", 5672, "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"},
		{"localhost", 0, "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"},
		{"localhost", 5300, "Endpoint=sb://localhost:5300;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"},
		{"::1", 5300, "Endpoint=sb://[::1]:5300;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"},
	} {
		if got := emulator.ConnectionString(tc.host, tc.port); got != tc.want {
			t.Errorf("ConnectionString(%q, %d) = %q; want %q", tc.host, tc.port, got, tc.want)
		}
	}
}

func TestHealth(t *testing.T) {
	var notReady error
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	srv := httptest.NewServer(emulator.Health(next, func(*http.Request) error { return notReady }))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != 200 || body != `{"status":"healthy","message":"Service is healthy."}` {
		t.Errorf("GET /health = %d %s", code, body)
	}
	if code, _ := get("/health?api-version=2021-05"); code != http.StatusTeapot {
		t.Errorf("GET /health?api-version= = %d; want the queue named health (next)", code)
	}
	if code, _ := get("/healthz"); code != http.StatusTeapot {
		t.Errorf("GET /healthz = %d; want next", code)
	}
	notReady = errors.New("database away")
	if code, body := get("/health"); code != 503 || body != `{"status":"unhealthy","message":"Service not available. Please try after some time."}` {
		t.Errorf("GET /health while not ready = %d %s", code, body)
	}
}
