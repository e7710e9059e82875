package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// restoreSQL inserts rows as they were when a receive-and-delete removed them: their sequence
// number and failed deliveries, the other columns as insertColumns has them, with their count
// deltas. A sequence number in use again (it cannot be, short of a restore run twice) keeps
// what holds it.
var restoreSQL = strings.NewReplacer("{{arrays}}", insertArrayList(), "{{columns}}", insertColumnList()).Replace(`
WITH input AS (
	SELECT * FROM unnest({{arrays}}, @seq::bigint[], @delivery_count::integer[])
		AS u({{columns}}, seq, delivery_count)
), ins AS (
	INSERT INTO messages (seq, delivery_count, {{columns}})
	SELECT seq, delivery_count, {{columns}} FROM input
	ON CONFLICT (entity_id, seq) DO NOTHING
	RETURNING entity_id, session_id, state, size
), opened AS (
	-- A session a message comes back to can be accepted for it, as when it was sent.
	INSERT INTO sessions (entity_id, session_id, available_at)
	SELECT DISTINCT entity_id, session_id, @now::timestamptz FROM ins
	WHERE @sessioned AND session_id IS NOT NULL AND state <> ` + sqlDeadLetter + `
	ON CONFLICT (entity_id, session_id) DO UPDATE SET
		available_at = CASE WHEN sessions.locked_until > @now THEN sessions.available_at
			ELSE least(coalesce(sessions.available_at, excluded.available_at), excluded.available_at) END
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, count(*) FILTER (WHERE state <> ` + sqlDeadLetter + `),
		count(*) FILTER (WHERE state = ` + sqlDeadLetter + `), sum(size)
	FROM ins GROUP BY entity_id
)
SELECT count(*) FROM ins`)

// Restore puts back messages a receive-and-delete took from t but could not hand out. See
// Store. A restored message is due now (not in the ready range a claim's cursor may have
// passed), so the next claim finds it ahead of later messages, as an abandoned one.
func (s *Postgres) Restore(ctx context.Context, t broker.Target, msgs []*broker.Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	now := s.now()
	rows := make([]messageRow, len(msgs))
	seqs, counts := make([]int64, len(msgs)), make([]int32, len(msgs))
	var woken []wakeTarget
	for i, m := range msgs {
		if err := rows[i].set(t.Entity.ID, m, nil, true); err != nil {
			return 0, fmt.Errorf("restore message %d of %s: %w", m.SequenceNumber, t, err)
		}
		if m.State != broker.StateDeadLetter && m.State != broker.StateDeferred {
			rows[i].VisibleAt = timestamptz(now)
		}
		seqs[i], counts[i] = m.SequenceNumber, max(m.DeliveryCount-1, 0)
		w := wakeTarget{entity: t.Entity.ID}
		if m.InSession() && t.Entity.Props.RequiresSession {
			w.session = m.SessionID
		}
		woken = append(woken, w)
	}
	args := pgx.NamedArgs{"seq": seqs, "delivery_count": counts, "now": now, "sessioned": t.Entity.Props.RequiresSession}
	for _, c := range insertColumns {
		args[c.name] = c.array(rows)
	}
	var n int
	if err := s.pool.QueryRow(ctx, restoreSQL, args).Scan(&n); err != nil {
		return 0, fmt.Errorf("restore %d messages of %s: %w", len(msgs), t, interpretError(err))
	}
	s.announce(woken...)
	return n, nil
}
