package store

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"github.com/jackc/pgx/v5"
)

// The statements of the receive path are written with @names (pgx named arguments), but handing
// pgx.NamedArgs to a query makes pgx lex the whole statement on every call to turn the names into
// $1, $2, …: with 64 receivers on 64 queues, a claim statement for each message, that lexing
// of the claim and settle statements was 9% of the gateway's CPU. positional does it once per
// statement and remembers it; numberInsertArgs numbers the message insert the same way.

// numbered is a statement with its @names turned into $n, and the names in the order of n.
type numbered struct {
	sql   string
	names []string
}

// numberedStatements maps a statement's text with @names to its numbered form.
var numberedStatements sync.Map

// namedArgRE finds what may be an @name. The names of a statement are checked by pgx's own lexer
// (pgx.StrictNamedArgs): one found here that pgx does not see as an argument (in a string or a
// comment) fails the numbering instead of passing silently.
var namedArgRE = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)

// positional returns the numbered form of the statement named and the values of args in the
// order its $n ask for. args may hold names the statement does not use; a name it uses that args
// lacks is an error, as with pgx.StrictNamedArgs.
func positional(named string, args pgx.NamedArgs) (string, []any, error) {
	v, ok := numberedStatements.Load(named)
	if !ok {
		st, err := number(named)
		if err != nil {
			return "", nil, err
		}
		v, _ = numberedStatements.LoadOrStore(named, st)
	}
	st := v.(numbered)
	values := make([]any, len(st.names))
	for i, name := range st.names {
		value, ok := args[name]
		if !ok {
			return "", nil, fmt.Errorf("store: no value for argument @%s of a statement", name)
		}
		values[i] = value
	}
	return st.sql, values, nil
}

// number turns the @names of a statement into $1, $2, … through pgx's own rewriting, once.
func number(named string) (numbered, error) {
	strict := pgx.StrictNamedArgs{}
	for _, m := range namedArgRE.FindAllStringSubmatch(named, -1) {
		strict[m[1]] = m[1]
	}
	sql, order, err := strict.RewriteQuery(context.Background(), nil, named, nil)
	if err != nil {
		return numbered{}, fmt.Errorf("store: number the arguments of a statement: %w", err)
	}
	st := numbered{sql: sql, names: make([]string, len(order))}
	for i, name := range order {
		st.names[i] = name.(string)
	}
	return st, nil
}
