package store

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sbgate/sbgate/broker"
)

// TestQueriesNameStateNumerals: the statements sqlc reads (queries/*.sql) cannot take the SQL
// names of the Go statements, so each number they compare a state or kind with says which name
// it stands for, in a comment (`state <> 2 /* sqlDeadLetter */`), and is that name's value.
func TestQueriesNameStateNumerals(t *testing.T) {
	values := map[string]string{
		"sqlActive": sqlActive, "sqlDeferred": sqlDeferred, "sqlDeadLetter": sqlDeadLetter, "sqlTopic": sqlTopic,
	}
	named := regexp.MustCompile(`\b([0-9]+)\s*/\*\s*(\w+)\s*\*/`)
	numeral := regexp.MustCompile(`\b(state|kind)\s*(=|<>|!=|<|>|<=|>=)\s*[0-9]|\b(state|kind)\s+IN\s*\(\s*[0-9]|::smallint\s*=\s*[0-9]`)
	files, err := filepath.Glob("queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries/*.sql (%v)", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			for _, m := range named.FindAllStringSubmatch(line, -1) {
				if want, ok := values[m[2]]; !ok {
					t.Errorf("%s:%d: %q names no state or kind", f, i+1, m[0])
				} else if m[1] != want {
					t.Errorf("%s:%d: %q: %s is %s", f, i+1, m[0], m[2], want)
				}
			}
			if m := numeral.FindString(named.ReplaceAllString(line, "$2")); m != "" {
				t.Errorf("%s:%d: %q compares a state or kind with a bare number; name it (0 /* sqlActive */)", f, i+1, m)
			}
		}
	}
}

// TestQueriesSpellReasons: the dead-letter reasons the maintenance statements set are the
// constants the Go code and its tests compare with.
func TestQueriesSpellReasons(t *testing.T) {
	src, err := os.ReadFile("queries/maintain.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{broker.ReasonMaxDeliveryCount, broker.ReasonTTLExpired} {
		if !strings.Contains(string(src), "'"+reason+"'") {
			t.Errorf("queries/maintain.sql does not set the reason %q", reason)
		}
	}
}
