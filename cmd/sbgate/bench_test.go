package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sbgate/sbgate/db/dbtest"
)

// benchReport is the part of `sbgate bench -o json` the tests look at.
type benchReport struct {
	Gateways int `json:"gateways"`
	Baseline []struct {
		Operation string `json:"operation"`
		Messages  int64  `json:"messages"`
	} `json:"baseline"`
	Results []struct {
		Operation  string `json:"operation"`
		Variant    string `json:"variant"`
		Clients    int    `json:"clients"`
		Messages   int64  `json:"messages"`
		Errors     int64  `json:"errors"`
		FirstError string `json:"first_error"`
		Ratios     []struct {
			Against string `json:"against"`
		} `json:"ratios"`
	} `json:"results"`
}

func decodeReport(t *testing.T, out string) benchReport {
	t.Helper()
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench -o json output: %v\n%s", err, out)
	}
	return rep
}

// TestBenchCommand drives a running gateway named by its connection string, with the baseline
// on its database.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	endpoint, _, _ := startRun(t, env("DATABASE_URL", url, "SBGATE_SAS_KEY", testKey))
	host := strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/")
	conn := "Endpoint=sb://" + host + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey
	var out, progress syncBuffer
	err := run(t.Context(), []string{"bench", "-clients", "1,4", "-duration", "200ms", "-baseline-clients", "2", "-database-url", url, "-o", "json"},
		env("SBGATE_CONNECTION_STRING", conn), &out, &progress)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, progress.String())
	}
	rep := decodeReport(t, out.String())
	if len(rep.Baseline) != 2 || len(rep.Results) != 10 {
		t.Fatalf("bench ran %d baseline phases and %d others; want 2 and 10 (5 operations × 2 levels):\n%s", len(rep.Baseline), len(rep.Results), out.String())
	}
	for _, r := range rep.Results {
		if r.Messages == 0 || r.Errors != 0 || len(r.Ratios) == 0 {
			t.Errorf("%s at %d clients: %d messages, %d errors (%s), ratios %v; want messages, no errors, ratios",
				r.Operation, r.Clients, r.Messages, r.Errors, r.FirstError, r.Ratios)
		}
	}
}
