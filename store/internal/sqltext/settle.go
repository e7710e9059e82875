package sqltext

import (
	"strings"

	"github.com/sbgate/sbgate/broker"
)

// The settlement statements take one array per field of the requests (unnest keeps them in
// step); settleInputSQL names them and settleMatchSQL is the lock check every one of them makes:
// the message its token names, still locked under that token, in the right subqueue, with the
// sequence number or MessageId the client gave (if any), and in the session whose lock the
// client holds (if any; in_session tells the session "" from none).
//
// Requests that modify properties (SettleRequest.PropertiesToModify) run statements of their
// own, written from the same text ({{…}} marks what they add): they take two arrays more, the
// message's user properties as modified and its size after, write both, and match only the
// requests whose modification passed its checks (props not NULL). The statements of the other
// requests, the hot path, are the text with the marks removed.
const (
	settleInputSQL = `
WITH r AS (
	SELECT * FROM unnest(@entity::bigint[], @seq::bigint[], @token::uuid[], @state::smallint[], @id::text[],
		@session::text[], @in_session::boolean[], @session_token::uuid[], @max_delivery::int[], @lock_us::bigint[],
		@reason::text[], @description::text[]{{inputs}})
		WITH ORDINALITY AS r(entity, seq, token, state, id, session, in_session, session_token, max_delivery, lock_us,
			reason, description{{columns}}, ord)
)`
	settleMatchSQL = `m.entity_id = r.entity AND m.seq = r.seq AND m.lock_token = r.token AND m.visible_at > @now
		AND (m.state = ` + sqlDeadLetter + `) = (r.state = ` + sqlDeadLetter + `)
		AND (r.id = '' OR m.message_id = r.id OR m.seq::text = r.id)
		AND (NOT r.in_session OR m.session_id = r.session AND EXISTS (SELECT 1 FROM sessions s
			WHERE s.entity_id = r.entity AND s.session_id = r.session AND s.lock_token = r.session_token AND s.locked_until > @now))`
)

// settleStatementTemplates are the statements by settlement, with the marks of the modifying
// variants. Each returns, for every request it satisfied, its ord (1-based), the message's
// entity, session, state after, MessageId and lock end.
var settleStatementTemplates = map[broker.Settlement]string{
	broker.Complete: settleInputSQL + `, done AS (
	DELETE FROM messages m USING r WHERE ` + settleMatchSQL + `
	RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, m.size, NULL::timestamptz AS until
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `), -count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), -sum(size)
	FROM done GROUP BY entity_id
)
SELECT ord, entity_id, session_id, state, message_id, until, false AS expired FROM done`,

	// An abandon releases the lock; the message is receivable again at once, at the front (due
	// now: claims look at the due range from where they last looked, not at the ready range
	// below their cursor). If that delivery was the last MaxDeliveryCount allows, the message
	// goes to the dead-letter subqueue now, not at the next receive (which may never come). A
	// deferred message stays deferred.
	broker.Abandon: settleInputSQL + `, done AS (
	UPDATE messages m SET {{set}}lock_token = NULL,
		delivery_count = m.delivery_count + CASE WHEN m.state <> ` + sqlDeadLetter + ` THEN 1 ELSE 0 END,
		visible_at = CASE WHEN ` + abandonedLastSQL + ` THEN NULL ELSE @now::timestamptz END,
		state = CASE WHEN ` + abandonedLastSQL + ` THEN ` + sqlDeadLetter + ` ELSE m.state END,
		dead_letter_reason = CASE WHEN ` + abandonedLastSQL + ` THEN '` + broker.ReasonMaxDeliveryCount + `' ELSE m.dead_letter_reason END,
		dead_letter_description = CASE WHEN ` + abandonedLastSQL + `
			THEN 'Message could not be consumed after ' || r.max_delivery || ' delivery attempts.' ELSE m.dead_letter_description END
	FROM r WHERE ` + settleMatchSQL + `{{match}}
	RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, r.state AS was, NULL::timestamptz AS until
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM done WHERE state = ` + sqlDeadLetter + ` AND was <> ` + sqlDeadLetter + `
	GROUP BY entity_id
)
SELECT ord, entity_id, session_id, state, message_id, until, false AS expired FROM done`,

	// A message whose time to live ended while it was locked stays with its receiver until the
	// lock ends (the expiry document: expiration does not affect a locked message, and takes
	// effect when the lock expires or is abandoned), but its lock is not renewed: renewals would
	// otherwise keep an expired message out of the expiry sweep and the dead-letter queue forever.
	broker.RenewLock: settleInputSQL + `
UPDATE messages m SET visible_at = CASE WHEN ` + expiredSQL + ` THEN m.visible_at
	ELSE @now::timestamptz + r.lock_us * interval '1 microsecond' END
FROM r WHERE ` + settleMatchSQL + `
RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, m.visible_at AS until, ` + expiredSQL + ` AS expired`,

	// A deferred message leaves the head of the queue; it is received again only by its
	// sequence number.
	broker.Defer: settleInputSQL + `
UPDATE messages m SET {{set}}state = ` + sqlDeferred + `, lock_token = NULL, visible_at = NULL
FROM r WHERE ` + settleMatchSQL + ` AND m.state <> ` + sqlDeadLetter + `{{match}}
RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, NULL::timestamptz AS until, false AS expired`,

	// A release undoes the delivery: the lock ends and the message is receivable again at once,
	// without counting the delivery, so it never dead-letters a message.
	broker.Release: settleInputSQL + `
UPDATE messages m SET lock_token = NULL, visible_at = @now::timestamptz
FROM r WHERE ` + settleMatchSQL + `
RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, NULL::timestamptz AS until, false AS expired`,

	broker.DeadLetter: settleInputSQL + `, done AS (
	UPDATE messages m SET {{set}}state = ` + sqlDeadLetter + `, lock_token = NULL, visible_at = NULL,
		dead_letter_reason = r.reason, dead_letter_description = r.description
	FROM r WHERE ` + settleMatchSQL + ` AND m.state <> ` + sqlDeadLetter + `{{match}}
	RETURNING r.ord, m.entity_id, m.session_id, m.state, m.message_id, NULL::timestamptz AS until
), moved AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*), count(*), 0 FROM done GROUP BY entity_id
)
SELECT ord, entity_id, session_id, state, message_id, until, false AS expired FROM done`,
}

// settleStatements are the statements of requests without modifications; modifyStatements those
// of the settlements that can modify properties.
var settleStatements, modifyStatements = func() (plain, modify map[broker.Settlement]string) {
	plain, modify = map[broker.Settlement]string{}, map[broker.Settlement]string{}
	bare := strings.NewReplacer("{{inputs}}", "", "{{columns}}", "", "{{set}}", "", "{{match}}", "")
	marked := strings.NewReplacer("{{inputs}}", ", @props::jsonb[], @size::int[]", "{{columns}}", ", props, size",
		"{{set}}", "user_props = r.props, size = r.size, ", "{{match}}", " AND r.props IS NOT NULL")
	for op, t := range settleStatementTemplates {
		plain[op] = bare.Replace(t)
		if strings.Contains(t, "{{set}}") {
			modify[op] = marked.Replace(t)
		}
	}
	return plain, modify
}()

// lockedForModifySQL reads, and locks until the transaction ends, the messages whose properties
// requests are to modify: those their locks name, as the settlement statements match them.
var lockedForModifySQL = strings.NewReplacer("{{inputs}}", "", "{{columns}}", "").Replace(settleInputSQL) + `
SELECT r.ord, ` + messageSelectFromM + `
FROM r JOIN messages m ON ` + settleMatchSQL + `
ORDER BY m.entity_id, m.seq
FOR UPDATE OF m`

// expiredSQL: m's time to live has ended (dead letters never expire).
const expiredSQL = `coalesce(m.state <> ` + sqlDeadLetter + ` AND m.expires_at <= @now, false)`

// abandonedLastSQL: the abandoned delivery of m was the last its entity allows (it is counted
// as it is abandoned).
const abandonedLastSQL = `(m.state <> ` + sqlDeadLetter + ` AND m.delivery_count + 1 >= r.max_delivery)`

// grownBytesSQL counts the bytes by which modified properties grew messages ($2), by entity ($1).
const grownBytesSQL = `INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
		SELECT e, 0, 0, sum(b) FROM unnest($1::bigint[], $2::bigint[]) AS d(e, b) GROUP BY e`
