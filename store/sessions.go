package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
	"github.com/sbgate/sbgate/store/internal/sqlcdb"
)

// AcceptSession locks the session of e named sessionID for the entity's LockDuration; "" is a
// session id like any other. The session need not have messages. Messages it held under an
// earlier lock become receivable again. Errors: ErrBadRequest (not a session entity, an id
// longer than MaxSessionIDLength or not text), ErrConflict (the session is locked by another
// receiver).
func (s *Postgres) AcceptSession(ctx context.Context, e *broker.Entity, sessionID string) (*broker.Session, error) {
	if err := broker.CheckSessionful(e); err != nil {
		return nil, err
	}
	if len(sessionID) > broker.MaxSessionIDLength || !broker.ValidText(sessionID) {
		return nil, broker.BadRequest("The SessionId is not valid UTF-8 text of at most %d characters.", broker.MaxSessionIDLength)
	}
	return s.acceptNamed(ctx, e, sessionID)
}

// AcceptNextSession locks, for the entity's LockDuration, the session of e whose messages have
// waited longest, waiting up to wait for one. It returns nil, nil when no session became
// available. Messages the session held under an earlier lock become receivable again. Errors:
// ErrBadRequest (not a session entity).
func (s *Postgres) AcceptNextSession(ctx context.Context, e *broker.Entity, wait time.Duration) (*broker.Session, error) {
	if err := broker.CheckSessionful(e); err != nil {
		return nil, err
	}
	s.touch(e)
	key := engine.Key{Entity: e.ID, Accept: true}
	start := func() engine.Claimer[*broker.Session] {
		d := engine.Claimer[*broker.Session]{Recheck: s.recheck(e)}
		d.Claim = func(ctx context.Context, _ broker.ReceiveMode, n int) ([]*broker.Session, bool, error) {
			now, err := s.currentSessionEntity(ctx, e)
			if err != nil {
				return nil, false, err
			}
			var got []*broker.Session
			for range n {
				sess, err := s.acceptNext(ctx, now)
				if err != nil || sess == nil {
					return got, false, err
				}
				got = append(got, sess)
			}
			return got, true, nil
		}
		d.Next = func(ctx context.Context, since time.Time) (time.Time, error) {
			due, err := queries.NextSessionDue(ctx, s.pool,
				sqlcdb.NextSessionDueParams{EntityID: e.ID, Since: since})
			next := nullTime(due)
			if err != nil {
				return time.Time{}, fmt.Errorf("look for sessions coming due in %s: %w", e.Path, interpretError(err))
			}
			return timeOrZero(next), nil
		}
		return d
	}
	got, err := engine.WaitFor(ctx, s.hub, key, start, broker.PeekLock, 1, wait)
	if len(got) == 0 {
		return nil, err
	}
	if ctx.Err() != nil {
		// Whoever asked is gone: let the session go at once rather than when its lock ends.
		_ = s.ReleaseSession(context.WithoutCancel(ctx), e, broker.SessionLock{SessionID: got[0].ID, Token: got[0].LockToken})
		return nil, ctx.Err()
	}
	return got[0], nil
}

// currentSessionEntity is e read again from the cache, refusing accepts it no longer allows.
func (s *Postgres) currentSessionEntity(ctx context.Context, e *broker.Entity) (*broker.Entity, error) {
	now, err := s.Resolve(ctx, e.Path)
	if err == nil && now.ID != e.ID {
		err = broker.NotFound("The messaging entity '%s' could not be found.", e.Path)
	}
	if err != nil {
		return nil, err
	}
	return now, broker.CheckSessionful(now)
}

// maxAcceptCandidates bounds how many stale candidates (sessions whose messages are gone) one
// accept clears before it reports that none is available.
const maxAcceptCandidates = 50

func (s *Postgres) acceptNext(ctx context.Context, e *broker.Entity) (*broker.Session, error) {
	for range maxAcceptCandidates {
		var sess *broker.Session
		stale := false
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			now := s.now()
			id, err := queries.OldestAvailableSession(ctx, tx,
				sqlcdb.OldestAvailableSessionParams{EntityID: e.ID, Now: now})
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			sess, stale, err = s.lockSession(ctx, tx, e, id, now)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("accept a session of %s: %w", e.Path, interpretError(err))
		}
		if !stale {
			return sess, nil
		}
	}
	return nil, nil
}

// lockSession locks session id (whose row tx holds) if it has a message to give, or records when
// it will have one. stale reports the latter.
func (s *Postgres) lockSession(ctx context.Context, tx pgx.Tx, e *broker.Entity, id string, now time.Time) (*broker.Session, bool, error) {
	next, err := nextAvailable(ctx, tx, e, id, now)
	if err != nil {
		return nil, false, err
	}
	if !next.Valid || next.Time.After(now) {
		err := queries.SetSessionAvailable(ctx, tx,
			sqlcdb.SetSessionAvailableParams{EntityID: e.ID, SessionID: id, AvailableAt: next})
		return nil, true, err
	}
	sess, err := s.takeSessionLock(ctx, tx, e, id, now)
	return sess, false, err
}

func (s *Postgres) takeSessionLock(ctx context.Context, tx pgx.Tx, e *broker.Entity, id string, now time.Time) (*broker.Session, error) {
	err := queries.ReleaseMessageLocks(ctx, tx, sqlcdb.ReleaseMessageLocksParams{EntityID: e.ID, SessionID: id})
	if err != nil {
		return nil, err
	}
	row, err := queries.TakeSessionLock(ctx, tx, sqlcdb.TakeSessionLockParams{
		EntityID: e.ID, SessionID: id, Now: now, LockDuration: interval(e.Props.LockDuration)})
	sess := &broker.Session{ID: id, LockToken: row.LockToken.Bytes, LockedUntil: row.LockedUntil.Time.UTC()}
	return sess, err
}

// nextAvailable is when session id of e can next give a message (sqlcdb.NextAvailable).
func nextAvailable(ctx context.Context, tx pgx.Tx, e *broker.Entity, id string, now time.Time) (pgtype.Timestamptz, error) {
	next, err := queries.NextAvailable(ctx, tx, sqlcdb.NextAvailableParams{EntityID: e.ID, SessionID: id, Now: now})
	return nullTime(next), err
}

// nullTime is a timestamptz that sqlc cannot type (a min() or a CASE, which may be NULL), as
// pgx reads it into an any: a time.Time, an InfinityModifier for ±infinity (a message that never
// comes due), or nil for NULL.
func nullTime(v any) pgtype.Timestamptz {
	switch t := v.(type) {
	case time.Time:
		return pgtype.Timestamptz{Time: t, Valid: true}
	case pgtype.InfinityModifier:
		return pgtype.Timestamptz{InfinityModifier: t, Valid: true}
	}
	return pgtype.Timestamptz{}
}

func (s *Postgres) acceptNamed(ctx context.Context, e *broker.Entity, id string) (*broker.Session, error) {
	s.touch(e)
	var sess *broker.Session
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now()
		lockedUntil, err := queries.EnsureSession(ctx, tx, sqlcdb.EnsureSessionParams{EntityID: e.ID, SessionID: id})
		if err != nil {
			return err
		}
		if lockedUntil.Valid && lockedUntil.Time.After(now) {
			return &broker.Error{Code: broker.CodeConflict, Message: fmt.Sprintf(
				"SessionCannotBeLocked: the session '%s' of '%s' is locked by another receiver until %s.", broker.Clip(id), e.Path, lockedUntil.Time.UTC().Format(time.RFC3339))}
		}
		sess, err = s.takeSessionLock(ctx, tx, e, id, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("accept session %s of %s: %w", broker.Clip(id), e.Path, interpretError(err))
	}
	return sess, nil
}

// checkSessionLock verifies that sl is the valid lock of its session. Errors: ErrLockLost.
func (s *Postgres) checkSessionLock(ctx context.Context, db sqlcdb.DBTX, e *broker.Entity, sl broker.SessionLock, now time.Time) error {
	_, err := queries.SessionLockHeld(ctx, db, sqlcdb.SessionLockHeldParams{
		EntityID: e.ID, SessionID: sl.SessionID, LockToken: sl.Token, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return broker.SessionLockLost(e, sl.SessionID)
	}
	return interpretError(err)
}

// RenewSessionLock extends a session lock by the entity's LockDuration, and the locks of the
// messages received under it, and returns its new end. Errors: ErrLockLost.
func (s *Postgres) RenewSessionLock(ctx context.Context, e *broker.Entity, sl broker.SessionLock) (time.Time, error) {
	if err := broker.CheckSessionLockID(e, &sl); err != nil {
		return time.Time{}, err
	}
	until, err := queries.RenewSessionLock(ctx, s.pool, sqlcdb.RenewSessionLockParams{EntityID: e.ID,
		SessionID: sl.SessionID, LockToken: sl.Token, Now: s.now(), LockDuration: interval(e.Props.LockDuration)})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, broker.SessionLockLost(e, sl.SessionID)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renew session %s: %w", broker.Clip(sl.SessionID), interpretError(err))
	}
	s.touch(e)
	return until.UTC(), nil
}

// ReleaseSession gives a session up: it can be accepted again at once if it holds messages.
// Messages still locked under it become receivable by the next holder. Errors: ErrLockLost.
func (s *Postgres) ReleaseSession(ctx context.Context, e *broker.Entity, sl broker.SessionLock) error {
	if err := broker.CheckSessionLockID(e, &sl); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now()
		held, err := queries.LockSessionHeld(ctx, tx, sqlcdb.LockSessionHeldParams{
			EntityID: e.ID, SessionID: sl.SessionID, LockToken: sl.Token, Now: now})
		if err != nil {
			return err
		}
		if !held {
			return broker.SessionLockLost(e, sl.SessionID)
		}
		err = queries.ReleaseMessageLocks(ctx, tx, sqlcdb.ReleaseMessageLocksParams{EntityID: e.ID, SessionID: sl.SessionID})
		if err != nil {
			return err
		}
		next, err := nextAvailable(ctx, tx, e, sl.SessionID, now)
		if err != nil {
			return err
		}
		return queries.ReleaseSessionLock(ctx, tx, sqlcdb.ReleaseSessionLockParams{
			EntityID: e.ID, SessionID: sl.SessionID, AvailableAt: next})
	})
	if err != nil {
		return fmt.Errorf("release session %s: %w", broker.Clip(sl.SessionID), interpretError(err))
	}
	s.announce(wakeTarget{entity: e.ID})
	return nil
}

// SessionState returns a session's state (nil when it has none). Errors: ErrLockLost.
func (s *Postgres) SessionState(ctx context.Context, e *broker.Entity, sl broker.SessionLock) ([]byte, error) {
	if err := broker.CheckSessionLockID(e, &sl); err != nil {
		return nil, err
	}
	state, err := queries.SessionState(ctx, s.pool, sqlcdb.SessionStateParams{
		EntityID: e.ID, SessionID: sl.SessionID, LockToken: sl.Token, Now: s.now()})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, broker.SessionLockLost(e, sl.SessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("read state of session %s: %w", broker.Clip(sl.SessionID), interpretError(err))
	}
	return state, nil
}

// SetSessionState replaces a session's state; nil or empty clears it. Errors: ErrLockLost,
// ErrTooLarge.
func (s *Postgres) SetSessionState(ctx context.Context, e *broker.Entity, sl broker.SessionLock, state []byte) error {
	if err := broker.CheckSessionState(e, sl, state); err != nil {
		return err
	}
	return s.setSessionState(ctx, s.pool, e, sl, state, s.now())
}

// setSessionState replaces the state of the session sl locks, on db (the pool, or a
// transaction's connection), if the lock is still held at now.
func (s *Postgres) setSessionState(ctx context.Context, db sqlcdb.DBTX, e *broker.Entity, sl broker.SessionLock, state []byte, now time.Time) error {
	if len(state) == 0 {
		state = nil
	}
	n, err := queries.SetSessionState(ctx, db, sqlcdb.SetSessionStateParams{
		EntityID: e.ID, SessionID: sl.SessionID, LockToken: sl.Token, Now: now, State: state})
	if err != nil {
		return fmt.Errorf("set state of session %s: %w", broker.Clip(sl.SessionID), interpretError(err))
	}
	if n == 0 {
		return broker.SessionLockLost(e, sl.SessionID)
	}
	return nil
}

// ListSessions lists the sessions of e that hold messages or state, or are locked, by id.
func (s *Postgres) ListSessions(ctx context.Context, e *broker.Entity, skip, top int) ([]broker.SessionInfo, error) {
	if err := broker.CheckSessionful(e); err != nil && !errors.Is(err, broker.ErrForbidden) {
		return nil, err
	}
	now := s.now()
	rows, err := queries.ListSessions(ctx, s.pool, sqlcdb.ListSessionsParams{
		EntityID: e.ID, Now: now, Skip: int64(skip), Top: int64(top)})
	if err != nil {
		return nil, fmt.Errorf("list sessions of %s: %w", e.Path, interpretError(err))
	}
	list := make([]broker.SessionInfo, len(rows))
	for i, r := range rows {
		list[i] = broker.SessionInfo{ID: r.SessionID, HasState: r.HasState, HasMessages: r.HasMessages}
		if r.LockedUntil.Valid && r.LockedUntil.Time.After(now) {
			list[i].LockedUntil = r.LockedUntil.Time.UTC()
		}
	}
	return list, nil
}
