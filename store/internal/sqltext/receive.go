package sqltext

// releaseSQL gives peek-locked messages back as if they had not been delivered, due at once (in
// the due range, which claims look at from the time they last looked). Each is found by its
// primary key, a lookup of one row whatever the statistics say.
const releaseSQL = `UPDATE messages m SET lock_token = NULL, visible_at = @now
FROM unnest(@seq::bigint[], @token::uuid[]) r(seq, token)
WHERE m.entity_id = @entity AND m.seq = r.seq AND m.lock_token = r.token`
