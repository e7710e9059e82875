package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

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
	for i, a := range insertColumnArrays(rows) {
		args[insertColumnNames[i]] = a
	}
	sql, values, err := restoreMessages.bind(args)
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, sql, values...).Scan(&n); err != nil {
		return 0, fmt.Errorf("restore %d messages of %s: %w", len(msgs), t, interpretError(err))
	}
	s.announce(woken...)
	return n, nil
}
