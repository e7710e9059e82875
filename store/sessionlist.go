package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store/internal/sqlcdb"
)

// ListSessionsUpdatedSince lists, by id, the sessions of e whose state was set (or cleared)
// after since: Service Bus's get-message-sessions with a last-updated-time, which counts state
// updates only — not messages sent to the session, nor its lock. Errors: ErrBadRequest (e holds
// no sessions).
func (s *Postgres) ListSessionsUpdatedSince(ctx context.Context, e *broker.Entity, since time.Time, skip, top int) ([]string, error) {
	if err := broker.CheckSessionful(e); err != nil && !errors.Is(err, broker.ErrForbidden) {
		return nil, err
	}
	ids, err := queries.SessionsUpdatedSince(ctx, s.pool, sqlcdb.SessionsUpdatedSinceParams{
		EntityID: e.ID, Since: since, Skip: int64(skip), Top: int64(top)})
	if err != nil {
		return nil, fmt.Errorf("list sessions of %s updated since %s: %w", e.Path, since.Format(time.RFC3339), interpretError(err))
	}
	return ids, nil
}
