package store

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store/internal/sqltext"
)

// The statements of the receive, settle and send paths are written with @names in package
// sqltext, from shared parts; go generate writes each one complete into statements.gen.go, its
// @names numbered $1, $2, … as PostgreSQL takes them. What the store sends is that text: nothing
// is assembled or rewritten at run time (pgx.NamedArgs would lex the whole statement on every
// call: with 64 receivers on 64 queues that lexing of the claim and settle statements was 9% of
// the gateway's CPU). recordgen runs first: the templates take their column lists from the
// records' db tags.
//
//go:generate go run ./internal/recordgen
//go:generate go run ./internal/sqlgen

// statement is a complete statement and the names of its arguments in the order of $1, $2, ….
type statement struct {
	sql   string
	names []string
	// prepared names a generated statement on a connection (queryWire), so that pgx finds it
	// without hashing its text.
	prepared string
}

// preparedName is the name st is prepared under on a connection: its own for a generated
// statement, else its text, which pgx names by its hash.
func (st statement) preparedName() string {
	if st.prepared == "" {
		return st.sql
	}
	return st.prepared
}

// bind returns st's text and the values of named in the order st takes them. named may hold
// names st does not use; a name st uses that named lacks is an error, as with
// pgx.StrictNamedArgs.
func (st statement) bind(named pgx.NamedArgs) (string, []any, error) {
	values := make([]any, len(st.names))
	for i, name := range st.names {
		value, ok := named[name]
		if !ok {
			return "", nil, fmt.Errorf("store: no value for argument @%s of a statement", name)
		}
		values[i] = value
	}
	return st.sql, values, nil
}

// Message states and entity kinds as SQL literals, for the statements written in this package:
// those of sqltext (TestSQLNamesMatchGoValues, TestSQLHasNoStateNumerals).
const (
	sqlActive     = sqltext.SQLActive
	sqlDeferred   = sqltext.SQLDeferred
	sqlDeadLetter = sqltext.SQLDeadLetter
	sqlTopic      = sqltext.SQLTopic
)

// claimStatements are the claims of one target by mode, outside a session and inside one.
var claimStatements = [2][2]statement{
	broker.PeekLock:         {claimPeekLock, claimPeekLockInSession},
	broker.ReceiveAndDelete: {claimReceiveAndDelete, claimReceiveAndDeleteInSession},
}

// claimManyStatements are the claims of several targets at once, by mode.
var claimManyStatements = [2]statement{
	broker.PeekLock:         claimManyPeekLock,
	broker.ReceiveAndDelete: claimManyReceiveAndDelete,
}

// settleStatements settle locks by settlement; modifyStatements do it for requests that modify
// properties (PropertiesToModify), which only an abandon, a defer or a dead-lettering takes.
var (
	settleStatements = map[broker.Settlement]statement{
		broker.Complete: settleComplete, broker.Abandon: settleAbandon, broker.RenewLock: settleRenewLock,
		broker.Defer: settleDefer, broker.DeadLetter: settleDeadLetter, broker.Release: settleRelease,
	}
	modifyStatements = map[broker.Settlement]statement{
		broker.Abandon: modifyAbandon, broker.Defer: modifyDefer, broker.DeadLetter: modifyDeadLetter,
	}
)
