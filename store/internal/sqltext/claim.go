package sqltext

import (
	"strings"

	"github.com/sbgate/sbgate/broker"
)

// Message states and entity kinds as SQL literals, for statements built from constants: SQL
// names a state or kind by these, never by its number (TestSQLNamesMatchGoValues checks them
// against State and Kind, TestSQLHasNoStateNumerals that no statement uses a bare number).
const (
	sqlActive     = "0"
	sqlDeferred   = "1"
	sqlDeadLetter = "2"
	sqlTopic      = "2"
)

// A claim takes up to @n receivable messages of one entity's subqueue (or one session) in one
// statement. It reads two partial indexes: rows receivable since they were written
// (messages_ready, in sequence order) and rows whose scheduled time or lock has passed, or that
// were abandoned (messages_due, by that time). Neither holds a message under a valid lock, so the
// claim does not step over the locks in flight; the lowest sequence numbers win, so a message
// whose lock ended goes back to the front. SKIP LOCKED makes claims of other gateways take other
// rows; on one gateway only one claim per target runs at a time (the dispatcher).
//
// The due rows are found by time but taken by sequence number: the claim reads the due range
// up to @now (due_window, without locking), then locks the lowest sequence numbers of what it
// read. Taking the first @n by time instead handed out a message abandoned a moment ago ahead
// of an earlier one whose lock had just lapsed (its lock end comes later than the abandon). The
// read stops dueLookahead rows past @n, so that thousands of messages coming due together (a
// large schedule, the locks of a gateway that died) cost each claim a bounded read: a message
// behind that many others due before it waits for them.
//
// A row that is locked or removed leaves its index entries behind until vacuum, and in a busy
// queue those pile up at the head of both ranges faster than vacuum comes (after 32,000 claims a
// claim read 470 index pages instead of 20). So each dispatcher keeps a cursor: where its last
// claim ended in each range (@ready_from, @due_from), which the next claim starts from instead of
// the head. A cursor can pass a row committed late (a send whose group commit finished after a
// later one, an abandon in flight during the claim); the dispatcher therefore claims from the
// head now and then, and always before it concludes that nothing is there (cursor).
//
// The rows picked are then updated or deleted by their ctid, a TID scan, which is the one plan
// there is for that: whatever the statistics say, a claim never walks the backlog (statistics
// older than a backlog made the planner pick plans that did, for a join on seq and even for
// entity_id = … AND seq = ANY(…), which it ran as a scan of the entity's rows filtered on seq).
// The rows are locked FOR UPDATE by the same statement, so their versions cannot change in
// between.
const (
	// dueRangeSQL and readyRangeSQL select a target's rows in each range; a session narrows
	// them further (inSessionSQL) before they are ordered and limited.
	dueRangeSQL = `
	SELECT ctid, seq, visible_at FROM messages WHERE ` + dueWhereSQL
	dueWhereSQL = `entity_id = @entity AND state = @state AND visible_at >= @due_from AND visible_at <= @now
		AND (expires_at IS NULL OR expires_at > @now OR state = ` + sqlDeadLetter + `)`
	// dueWindowOrderSQL bounds the read of the due range by time; dueTakeSQL then locks the
	// lowest sequence numbers of the rows read (found again by their ctid, and checked again:
	// a row another claim locked and changed meanwhile is no longer due).
	dueWindowOrderSQL = `
	ORDER BY visible_at LIMIT @n + ` + dueLookahead
	// The EXISTS is a one-time test (it names no column of messages): when the window read
	// nothing, the due rows are not looked for again (otherwise one more index descent a
	// target, through messages_due or the primary key as the planner likes).
	dueTakeSQL = `
	SELECT ctid, seq, visible_at FROM messages
	WHERE EXISTS (` + dueWindowRowsSQL + `) AND ctid = ANY(ARRAY(` + dueWindowRowsSQL + `)) AND ` + dueWhereSQL + `
	ORDER BY seq LIMIT @n FOR UPDATE SKIP LOCKED`
	dueWindowRowsSQL = `SELECT ctid FROM due_window`
	readyRangeSQL    = `
	SELECT ctid, seq FROM messages
	WHERE entity_id = @entity AND state = @state AND visible_at IS NULL AND seq > @ready_from
		AND (expires_at IS NULL OR expires_at > @now OR state = ` + sqlDeadLetter + `)`
	readyOrderSQL = `
	ORDER BY seq LIMIT @n FOR UPDATE SKIP LOCKED`
	claimPickSQL = `
), picked AS (
	SELECT ctid, seq, due_at FROM (SELECT ctid, seq, visible_at AS due_at FROM due
		UNION ALL SELECT ctid, seq, NULL::timestamptz FROM ready) c
	ORDER BY seq LIMIT @n
)`
	// inSession narrows both index ranges to one session, whose lock must still be held.
	inSessionSQL = `
		AND session_id = @session AND EXISTS (SELECT 1 FROM sessions s WHERE s.entity_id = @entity
			AND s.session_id = @session AND s.lock_token = @session_token AND s.locked_until > @now)`
	// claimedSQL returns the claimed rows with what moves the cursors: each row's place in the
	// due range (NULL for a row from the ready range), and the earliest due row the claim read
	// but did not take (locked by another claim, or behind lower sequence numbers), where the
	// due cursor must stop.
	claimedSQL = `, p.due_at AS claimed_due_at,
	(SELECT min(w.visible_at) FROM due_window w WHERE w.ctid <> ALL (ARRAY(SELECT ctid FROM picked))) AS due_left`
)

// dueLookahead is how many due rows past the @n it takes a claim reads to find the lowest
// sequence numbers among them (see above).
const dueLookahead = "1000"

// claimPicks are the picking parts of a claim, outside a session and inside one.
var claimPicks = [2]string{
	`WITH due_window AS MATERIALIZED (` + dueRangeSQL + dueWindowOrderSQL + `
), due AS MATERIALIZED (` + dueTakeSQL + `
), ready AS MATERIALIZED (` + readyRangeSQL + readyOrderSQL + claimPickSQL,
	`WITH due_window AS MATERIALIZED (` + dueRangeSQL + inSessionSQL + dueWindowOrderSQL + `
), due AS MATERIALIZED (` + dueTakeSQL + `
), ready AS MATERIALIZED (` + readyRangeSQL + inSessionSQL + readyOrderSQL + claimPickSQL,
}

// peekLockTailSQL locks what a claim picked for @lock and counts the delivery. A message already
// delivered @max_delivery times is moved to the dead-letter subqueue instead, and counted there;
// the caller drops it from the result.
var peekLockTailSQL = `, locked AS (
	UPDATE messages m SET ` + lockOrDeadLetterSQL + `
	WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM picked))
	RETURNING m.*
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), count(*), 0 FROM locked
	WHERE locked.state = ` + sqlDeadLetter + ` AND @state <> ` + sqlDeadLetter + ` HAVING count(*) > 0
)
SELECT ` + messageSelectFromLocked + claimedSQL + ` FROM locked JOIN picked p ON p.seq = locked.seq`

// removedSelectFrom is messageSelectFrom(alias) for messages a receive-and-delete claim removed:
// a lock that lapsed on one counts as the failed delivery it was (failedSQL), and the removed
// message is delivered without that lock's token.
func removedSelectFrom(alias string) string {
	cols := make([]string, len(messageColumns))
	for i, f := range messageColumns {
		switch f {
		case "delivery_count":
			cols[i] = "(" + strings.ReplaceAll(failedSQL, "m.", alias+".") + ") AS delivery_count"
		case "lock_token":
			cols[i] = "NULL::uuid AS lock_token"
		default:
			cols[i] = alias + "." + f
		}
	}
	return strings.Join(cols, ", ")
}

// failedSQL is the failed deliveries of m (its delivery_count) with a lock that lapsed on it
// counted: a claim only picks a message whose lock token is still set when that lock ran out.
// As on the service, a delivery counts when its lock expires or it is abandoned, not when it is
// made, and nothing counts in the dead-letter subqueue, which has no delivery limit: a message
// received from a queue, dead-lettered and received from the dead-letter subqueue shows the
// same DeliveryCount twice, and a deferred message received by its number is not counted again.
const failedSQL = `(m.delivery_count + CASE WHEN m.lock_token IS NOT NULL AND m.state <> ` + sqlDeadLetter + ` THEN 1 ELSE 0 END)`

// inSessionLock makes a statement that locks messages for @lock lock them, in a session, until
// the session lock (@session, @session_token) ends instead: on the service the session lock is
// its messages' lock, so a receiver that keeps renewing the session settles whenever it is done
// (RenewSessionLock moves the messages' lock ends with it).
func inSessionLock(sql string) string {
	const own = "@now::timestamptz + @lock::interval"
	if strings.Count(sql, own) != 1 {
		panic("store: a locking statement without its lock end")
	}
	return strings.Replace(sql, own, `(SELECT s.locked_until FROM sessions s
		WHERE s.entity_id = @entity AND s.session_id = @session AND s.lock_token = @session_token)`, 1)
}

// lockOrDeadLetterSQL is the SET list that locks message m from @now for @lock, or, when
// @max_delivery deliveries of it have failed, moves it to the dead-letter subqueue
// (MaxDeliveryCountExceeded).
var lockOrDeadLetterSQL = `
		state = CASE WHEN ` + failedSQL + ` >= @max_delivery THEN ` + sqlDeadLetter + ` ELSE m.state END,
		lock_token = CASE WHEN ` + failedSQL + ` >= @max_delivery THEN NULL ELSE ` + newLockTokenSQL + ` END,
		visible_at = CASE WHEN ` + failedSQL + ` >= @max_delivery THEN NULL ELSE @now::timestamptz + @lock::interval END,
		delivery_count = ` + failedSQL + `,
		dead_letter_reason = CASE WHEN ` + failedSQL + ` >= @max_delivery THEN '` + broker.ReasonMaxDeliveryCount + `' ELSE m.dead_letter_reason END,
		dead_letter_description = CASE WHEN ` + failedSQL + ` >= @max_delivery
			THEN 'Message could not be consumed after ' || @max_delivery::int || ' delivery attempts.' ELSE m.dead_letter_description END`

// receiveAndDeleteTailSQL removes what a claim picked, counts the removal and returns it.
var receiveAndDeleteTailSQL = `, removed AS (
	DELETE FROM messages m WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM picked))
	RETURNING m.*
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `), -count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), -sum(size)
	FROM removed HAVING count(*) > 0
)
SELECT ` + removedSelectFrom("removed") + claimedSQL + ` FROM removed JOIN picked p ON p.seq = removed.seq`

// claimStatements[mode][inSession] is the whole claim.
var claimStatements = [2][2]string{
	broker.PeekLock:         {claimPicks[0] + peekLockTailSQL, claimPicks[1] + inSessionLock(peekLockTailSQL)},
	broker.ReceiveAndDelete: {claimPicks[0] + receiveAndDeleteTailSQL, claimPicks[1] + receiveAndDeleteTailSQL},
}

// nextDueSQL is when the next message of a subqueue (or session) becomes receivable by itself:
// the earliest scheduled time or lock end still to come. It reads the head of messages_due.
const nextDueSQL = `SELECT min(visible_at) FROM messages
	WHERE entity_id = @entity AND state = @state AND visible_at > @now`

const nextDueInSessionSQL = `SELECT least(
	(SELECT min(visible_at) FROM messages WHERE entity_id = @entity AND session_id = @session
		AND state = @state AND visible_at > @now),
	(SELECT locked_until FROM sessions WHERE entity_id = @entity AND session_id = @session
		AND lock_token = @session_token AND locked_until > @now))`

// availableDeferredSQL picks, of the messages asked for, the deferred ones (in session @session
// when not NULL) that are not locked and have not expired.
const availableDeferredSQL = `
	WHERE m.entity_id = w.entity AND m.seq = w.seq AND m.state = ` + sqlDeferred + `
		AND (@session::text IS NULL OR m.session_id = @session)
		AND (m.visible_at IS NULL OR m.visible_at <= @now) AND (m.expires_at IS NULL OR m.expires_at > @now)`

// receiveDeferredSQL locks the available deferred messages @seqs, counting the delivery; one
// past MaxDeliveryCount is dead-lettered instead (and counted there).
var receiveDeferredSQL = `
WITH locked AS (
	UPDATE messages m SET ` + lockOrDeadLetterSQL + `
	FROM` + askedSeqsSQL + availableDeferredSQL + `
	RETURNING m.*
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), count(*), 0 FROM locked WHERE locked.state = ` + sqlDeadLetter + ` HAVING count(*) > 0
)
SELECT ` + messageSelect + ` FROM locked`

// receiveDeferredInSessionSQL is receiveDeferredSQL in a session: the locks end with the session's.
var receiveDeferredInSessionSQL = inSessionLock(receiveDeferredSQL)

// deadLetterDeferredSQL is receiveDeferredSQL for the messages past MaxDeliveryCount only, all
// of which it dead-letters.
var deadLetterDeferredSQL = `
WITH moved AS (
	UPDATE messages m SET ` + lockOrDeadLetterSQL + `
	FROM` + askedSeqsSQL + availableDeferredSQL + `
		AND ` + failedSQL + ` >= @max_delivery
	RETURNING 1
)
INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
SELECT @entity, -count(*), count(*), 0 FROM moved HAVING count(*) > 0`

// deleteDeferredSQL removes the available deferred messages @seqs and counts the removal.
var deleteDeferredSQL = `
WITH removed AS (
	DELETE FROM messages m USING` + askedSeqsSQL + availableDeferredSQL + `
	RETURNING m.*
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT @entity, -count(*), 0, -sum(size) FROM removed HAVING count(*) > 0
)
SELECT ` + messageSelect + ` FROM removed`

// newLockTokenSQL is the SQL expression that makes a lock token for the row m.
const newLockTokenSQL = `encode(substring(uuid_send(gen_random_uuid()) from 1 for 8) || int8send(m.seq), 'hex')::uuid`
