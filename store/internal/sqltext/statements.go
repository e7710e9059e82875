// Package sqltext holds the templates of store's claim, settle, send and lifecycle statements:
// the SQL with @names for its arguments, built from shared parts (a claim's pick and tail, a
// session's narrowing, the column lists generated from store's records). Nothing here runs in
// the broker: go generate (store/internal/sqlgen) builds every statement listed in Statements,
// numbers its arguments as PostgreSQL takes them ($1, $2, …) and writes the complete text into
// store/statements.gen.go, which is what store sends. A reviewer reads the parts and why here,
// and the whole statement there.
package sqltext

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// Message states and entity kinds as SQL literals, for statements built from constants: SQL
// names a state or kind by these, never by its number (store's TestSQLNamesMatchGoValues checks
// them against State and Kind, TestSQLHasNoStateNumerals that no statement uses a bare number).
const (
	SQLActive     = sqlActive
	SQLDeferred   = sqlDeferred
	SQLDeadLetter = sqlDeadLetter
	SQLTopic      = sqlTopic
)

// Statement is a statement of store by the name of the variable store/statements.gen.go
// declares for it.
type Statement struct {
	Name, SQL, Doc string
}

// Statements are every statement store/statements.gen.go holds.
var Statements = []Statement{
	{"claimPeekLock", claimStatements[broker.PeekLock][0], "claims for peek-lock (claim.go)"},
	{"claimPeekLockInSession", claimStatements[broker.PeekLock][1], "claims for peek-lock in a session"},
	{"claimReceiveAndDelete", claimStatements[broker.ReceiveAndDelete][0], "claims for receive-and-delete"},
	{"claimReceiveAndDeleteInSession", claimStatements[broker.ReceiveAndDelete][1],
		"claims for receive-and-delete in a session"},
	{"claimManyPeekLock", claimManyStatements[broker.PeekLock], "claims for peek-lock for several targets"},
	{"claimManyReceiveAndDelete", claimManyStatements[broker.ReceiveAndDelete],
		"claims for receive-and-delete for several targets"},
	{"nextDue", nextDueSQL, "is when the next message of a subqueue becomes receivable by itself"},
	{"nextDueInSession", nextDueInSessionSQL, "is nextDue in a session"},
	{"availableDeferred", availableDeferredSQL, "lists the deferred messages asked for that are there"},
	{"receiveDeferred", receiveDeferredSQL, "takes deferred messages by sequence number"},
	{"receiveDeferredInSession", receiveDeferredInSessionSQL, "is receiveDeferred in a session"},
	{"deadLetterDeferred", deadLetterDeferredSQL, "dead-letters deferred messages past MaxDeliveryCount"},
	{"deleteDeferred", deleteDeferredSQL, "takes deferred messages in receive-and-delete mode"},
	{"settleComplete", settleStatements[broker.Complete], "completes locks"},
	{"settleAbandon", settleStatements[broker.Abandon], "abandons locks"},
	{"settleRenewLock", settleStatements[broker.RenewLock], "renews locks"},
	{"settleDefer", settleStatements[broker.Defer], "defers locked messages"},
	{"settleDeadLetter", settleStatements[broker.DeadLetter], "dead-letters locked messages"},
	{"settleRelease", settleStatements[broker.Release], "releases locks"},
	{"modifyAbandon", modifyStatements[broker.Abandon], "abandons locks, modifying properties"},
	{"modifyDefer", modifyStatements[broker.Defer], "defers locked messages, modifying properties"},
	{"modifyDeadLetter", modifyStatements[broker.DeadLetter],
		"dead-letters locked messages, modifying properties"},
	{"lockedForModify", lockedForModifySQL, "reads and locks the messages whose properties are modified"},
	{"insertMessages", insertMessagesSQL, "writes a group of messages (send.go)"},
	{"restoreMessages", restoreSQL, "puts back messages a receive-and-delete could not hand out"},
	{"releaseLocks", releaseSQL, "releases the locks of messages never handed out"},
	{"browseMessages", browseSQL, "lists messages without locks"},
	{"cancelScheduled", cancelScheduledSQL, "removes scheduled messages"},
	{"cancelScheduledCopies", cancelScheduledCopiesSQL, "removes the scheduled copies of a topic message"},
	{"purgeMessages", purgeSQL, "deletes a chunk of a subqueue's messages"},
	{"resubmitCandidates", resubmitCandidatesSQL, "lists dead letters to resubmit"},
	{"resubmitMessages", resubmitSQL, "moves dead letters back"},
	{"lastSeq", lastSeqSQL, "is the highest sequence number an entity holds"},
	{"readOriginNumbers", originNumbersSQL, "reads the EnqueuedSequenceNumber of rows"},
	{"grownBytes", grownBytesSQL, "counts the bytes modified properties added"},
	{"deadLettersToForward", deadLettersToForwardSQL, "reads dead letters to forward"},
	{"removeForwarded", removeForwardedSQL, "deletes forwarded dead letters"},
	{"renumberTxMessages", renumberSQL, "gives a transaction's rows their reserved numbers"},
}

// Number turns the @names of a statement into $1, $2, … through pgx's own rewriting, and
// returns the names in the order of their numbers. An @word that pgx does not see as an
// argument (in a string literal or a comment) is an error rather than a value asked for.
func Number(named string) (sql string, names []string, err error) {
	strict := pgx.StrictNamedArgs{}
	for _, m := range namedArgRE.FindAllStringSubmatch(named, -1) {
		strict[m[1]] = m[1]
	}
	sql, order, err := strict.RewriteQuery(context.Background(), nil, named, nil)
	if err != nil {
		return "", nil, err
	}
	names = make([]string, len(order))
	for i, n := range order {
		names[i] = n.(string)
	}
	return sql, names, nil
}
