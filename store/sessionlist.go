package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// ListSessionsUpdatedSince lists, by id, the sessions of e whose state was set (or cleared)
// after since: Service Bus's get-message-sessions with a last-updated-time, which counts state
// updates only — not messages sent to the session, nor its lock. Errors: ErrBadRequest (e holds
// no sessions).
func (s *Postgres) ListSessionsUpdatedSince(ctx context.Context, e *broker.Entity, since time.Time, skip, top int) ([]string, error) {
	if err := broker.CheckSessionful(e); err != nil && !errors.Is(err, broker.ErrForbidden) {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT session_id FROM sessions WHERE entity_id = $1 AND state_updated_at > $2
		ORDER BY session_id OFFSET $3 LIMIT $4`, e.ID, since, skip, top)
	if err != nil {
		return nil, fmt.Errorf("list sessions of %s updated since %s: %w", e.Path, since.Format(time.RFC3339), interpretError(err))
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
