package store

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Column options a record's db tags may carry after the name. pgx ignores them (it reads the
// name before the comma); the statements that write a record leave such columns out.
const (
	// colGenerated is a column the database fills (an identity): never written.
	colGenerated = "generated"
	// colInsertOnly is a column set when the row is created and never changed by an update.
	colInsertOnly = "insertonly"
)

// dbColumns returns the column names of record type T, one per field, in field order, from the
// fields' db tags: the one source for a record's select, insert and update lists, so a column
// is added or renamed in one place. Columns whose tag carries one of the options skip are left
// out. A field without a db tag, or with an unknown option, panics when the package loads.
func dbColumns[T any](skip ...string) []string {
	t := reflect.TypeFor[T]()
	cols := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("db")
		name, opts, _ := strings.Cut(tag, ",")
		if !ok || name == "" || name == "-" {
			panic(fmt.Sprintf("%s.%s has no db column", t.Name(), t.Field(i).Name))
		}
		skipped := false
		for o := range strings.SplitSeq(opts, ",") {
			if o != "" && o != colGenerated && o != colInsertOnly {
				panic(fmt.Sprintf("%s.%s: unknown db tag option %q", t.Name(), t.Field(i).Name, o))
			}
			skipped = skipped || slices.Contains(skip, o)
		}
		if !skipped {
			cols = append(cols, name)
		}
	}
	return cols
}
