package store

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sbgate/sbgate/broker"
)

// TestSQLNamesMatchGoValues: the SQL literals statements are built with are the numbers State
// and Kind store.
func TestSQLNamesMatchGoValues(t *testing.T) {
	for _, c := range []struct {
		name, sql string
		value     int
	}{
		{"sqlActive", sqlActive, int(broker.StateActive)},
		{"sqlDeferred", sqlDeferred, int(broker.StateDeferred)},
		{"sqlDeadLetter", sqlDeadLetter, int(broker.StateDeadLetter)},
		{"sqlTopic", sqlTopic, int(broker.KindTopic)},
	} {
		if want := strconv.Itoa(c.value); c.sql != want {
			t.Errorf("%s = %q; want %q", c.name, c.sql, want)
		}
	}
}

// TestSQLHasNoStateNumerals: no statement of the store compares or sets a message state or an
// entity kind by a bare number; they use the names above, so that what a number means is read
// in one place.
func TestSQLHasNoStateNumerals(t *testing.T) {
	numeral := regexp.MustCompile(`\b(state|kind)\s*(=|<>|!=|<|>|<=|>=)\s*[0-9]|\b(state|kind)\s+IN\s*\(\s*[0-9]|::smallint\s*=\s*[0-9]`)
	// The templates of sqltext and the statements written here; statements.gen.go holds the
	// templates with the names resolved, as PostgreSQL receives them.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	templates, err := filepath.Glob("internal/sqltext/*.go")
	if err != nil || len(templates) == 0 {
		t.Fatalf("no templates found: %v", err)
	}
	for _, f := range append(files, templates...) {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, ".gen.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if m := numeral.FindString(line); m != "" {
				t.Errorf("%s:%d: %q compares a state or kind with a number; use sqlActive, sqlDeferred, sqlDeadLetter or sqlTopic", f, i+1, m)
			}
		}
	}
}
