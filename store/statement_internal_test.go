package store

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/store/internal/sqltext"
)

func TestStatementBindOrdersValues(t *testing.T) {
	st := statement{sql: `SELECT $1::int, $2::text, $1::int + 1 WHERE $3::bool`, names: []string{"b", "a", "c"}}
	sql, values, err := st.bind(pgx.NamedArgs{"a": "x", "b": 2, "c": true, "unused": 9})
	if err != nil {
		t.Fatal(err)
	}
	if sql != st.sql {
		t.Fatalf("sql = %q; want the statement's own %q", sql, st.sql)
	}
	if want := []any{2, "x", true}; !reflect.DeepEqual(values, want) {
		t.Fatalf("values = %v; want %v", values, want)
	}
}

func TestStatementBindRefusesAMissingValue(t *testing.T) {
	st := statement{sql: `SELECT $1::int, $2::int`, names: []string{"a", "b"}}
	if _, _, err := st.bind(pgx.NamedArgs{"a": 1}); err == nil || !strings.Contains(err.Error(), "@b") {
		t.Fatalf("err = %v; want one naming @b", err)
	}
}

// TestGeneratedStatementsAreFresh: statements.gen.go holds every template of sqltext as the
// generator numbers it now (make check also regenerates it and fails on a difference; this
// says which statement is stale in a plain go test).
func TestGeneratedStatementsAreFresh(t *testing.T) {
	if len(generatedStatements) != len(sqltext.Statements) {
		t.Errorf("%d statements generated, %d templates: run go generate ./store", len(generatedStatements), len(sqltext.Statements))
	}
	for _, tmpl := range sqltext.Statements {
		sql, names, err := sqltext.Number(tmpl.SQL)
		if err != nil {
			t.Fatalf("%s: %v", tmpl.Name, err)
		}
		st, ok := generatedStatements[tmpl.Name]
		if !ok || st.sql != sql || !slices.Equal(st.names, names) {
			t.Errorf("statement %s is stale in statements.gen.go: run go generate ./store", tmpl.Name)
		}
	}
}
