package db

import (
	"os"
	"path/filepath"
	"testing"
)

// A lock file the pid cannot be written to is an error, not a silent success: the pid is what
// a second sbgate refused the data directory reports.
func TestWritePIDReportsFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sbgate.lock")
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := writePID(ro, 42); err == nil {
		t.Fatal("writePID on a read-only file: no error")
	}

	rw, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if err := writePID(rw, 42); err != nil {
		t.Fatal(err)
	}
	if got := readPIDFile(path); got != 42 {
		t.Fatalf("pid file reads %d, want 42", got)
	}
}
