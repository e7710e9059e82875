package sqltext

import (
	"slices"
	"strings"
	"testing"
)

func TestNumberNumbersOnceAndOrdersNames(t *testing.T) {
	sql, names, err := Number(`SELECT @b::int, @a::text, @b::int + 1 WHERE @c::bool`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `SELECT $1::int, $2::text, $1::int + 1 WHERE $3::bool`; sql != want {
		t.Fatalf("sql = %q; want %q", sql, want)
	}
	if want := []string{"b", "a", "c"}; !slices.Equal(names, want) {
		t.Fatalf("names = %v; want %v", names, want)
	}
}

// An @word in a string literal is not an argument for pgx; the numbering must not take it for
// one (and then ask for a value that no statement would use).
func TestNumberKnowsLiteralsAreNotArguments(t *testing.T) {
	if _, _, err := Number(`SELECT 'mail@example', @a::int`); err == nil {
		t.Fatal("a statement whose string literal holds an @word numbered without complaint")
	}
}

// Every statement numbers (a broken one would fail every claim or settlement), and every
// settlement the templates make is listed.
func TestStatementsNumber(t *testing.T) {
	for _, st := range Statements {
		if _, _, err := Number(st.SQL); err != nil {
			t.Errorf("%s: %v\n%s", st.Name, err, st.SQL)
		}
	}
	listed := func(prefix, sql string) bool {
		return slices.ContainsFunc(Statements, func(st Statement) bool {
			return strings.HasPrefix(st.Name, prefix) && st.SQL == sql
		})
	}
	for op, sql := range settleStatements {
		if !listed("settle", sql) {
			t.Errorf("the settlement %s has no statement in Statements", op)
		}
	}
	for op, sql := range modifyStatements {
		if !listed("modify", sql) {
			t.Errorf("the modifying settlement %s has no statement in Statements", op)
		}
	}
}
