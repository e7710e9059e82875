package store

import (
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestPositionalNumbersOnceAndOrdersValues(t *testing.T) {
	named := `SELECT @b::int, @a::text, @b::int + 1 WHERE @c::bool`
	sql, values, err := positional(named, pgx.NamedArgs{"a": "x", "b": 2, "c": true, "unused": 9})
	if err != nil {
		t.Fatal(err)
	}
	if want := `SELECT $1::int, $2::text, $1::int + 1 WHERE $3::bool`; sql != want {
		t.Fatalf("sql = %q; want %q", sql, want)
	}
	if want := []any{2, "x", true}; !reflect.DeepEqual(values, want) {
		t.Fatalf("values = %v; want %v", values, want)
	}
	if _, ok := numberedStatements.Load(named); !ok {
		t.Fatal("the numbered statement is not remembered")
	}
	// A second call with other values reuses the numbering.
	if _, values, err = positional(named, pgx.NamedArgs{"a": "y", "b": 3, "c": false}); err != nil ||
		!reflect.DeepEqual(values, []any{3, "y", false}) {
		t.Fatalf("second call: values = %v, err = %v", values, err)
	}
}

func TestPositionalRefusesAMissingValue(t *testing.T) {
	_, _, err := positional(`SELECT @a::int, @b::int`, pgx.NamedArgs{"a": 1})
	if err == nil || !strings.Contains(err.Error(), "@b") {
		t.Fatalf("err = %v; want one naming @b", err)
	}
}

// An @word in a string literal is not an argument for pgx; the numbering must not take it for
// one (and then ask for a value that no statement would use).
func TestPositionalKnowsLiteralsAreNotArguments(t *testing.T) {
	_, _, err := positional(`SELECT 'mail@example', @a::int`, pgx.NamedArgs{"a": 1})
	if err == nil {
		t.Fatal("a statement whose string literal holds an @word numbered without complaint")
	}
}

// Every statement of the receive path numbers: a broken one would fail every claim or settlement.
func TestReceiveStatementsNumber(t *testing.T) {
	all := []string{releaseSQL, nextDueSQL, nextDueInSessionSQL}
	for _, bySession := range claimStatements {
		all = append(all, bySession[:]...)
	}
	for _, sql := range settleStatements {
		all = append(all, sql)
	}
	for _, sql := range all {
		if _, err := number(sql); err != nil {
			t.Errorf("%v\n%s", err, sql)
		}
	}
}
