package sqltext

// renumberSQL gives the rows (entity $1, seq $2) a transaction sent the numbers ($3) it
// reserved for them, receivable from $4 unless scheduled. The row was sent to its entity, not
// forwarded there: like any such row it has no EnqueuedSequenceNumber (the number was set on the
// message for its copies elsewhere).
const renumberSQL = `UPDATE messages m SET seq = u.number, enqueued_seq = NULL, visible_at = coalesce(m.visible_at, $4)
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(entity, seq, number)
		WHERE m.entity_id = u.entity AND m.seq = u.seq`
