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
)

// nextAvailableSQL is when the session $2 can next give a message: now if it holds a receivable
// message (or one under a message lock, which accepting the session releases), the earliest
// scheduled time if it holds only scheduled ones, NULL if it holds none. Each branch reads one
// of the session's partial indexes; none scans the entity.
const nextAvailableSQL = `SELECT CASE
	WHEN EXISTS (SELECT 1 FROM messages WHERE entity_id = $1 AND session_id = $2 AND visible_at IS NULL AND state = ` + sqlActive + `
		AND (expires_at IS NULL OR expires_at > $3)) THEN $3::timestamptz
	ELSE (SELECT min(CASE WHEN lock_token IS NOT NULL OR visible_at <= $3 THEN $3::timestamptz ELSE visible_at END)
		FROM messages WHERE entity_id = $1 AND session_id = $2 AND visible_at IS NOT NULL AND state = ` + sqlActive + `
			AND (expires_at IS NULL OR expires_at > $3))
END`

// releaseMessageLocksSQL frees the messages of a session that were locked under an earlier
// session lock: a new holder continues from the first unsettled message. Each of those
// deliveries failed (its lock went with the session's), and counts.
const releaseMessageLocksSQL = `UPDATE messages SET lock_token = NULL, visible_at = NULL, delivery_count = delivery_count + 1
WHERE entity_id = $1 AND session_id = $2 AND visible_at IS NOT NULL AND lock_token IS NOT NULL AND state <> ` + sqlDeadLetter

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
			var next pgtype.Timestamptz
			err := s.pool.QueryRow(ctx, `SELECT min(available_at) FROM sessions WHERE entity_id = $1 AND available_at > $2`,
				e.ID, since).Scan(&next)
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
			var id string
			err := tx.QueryRow(ctx, `SELECT session_id FROM sessions WHERE entity_id = $1 AND available_at <= $2
				ORDER BY available_at LIMIT 1 FOR UPDATE SKIP LOCKED`, e.ID, now).Scan(&id)
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
	var next pgtype.Timestamptz
	if err := tx.QueryRow(ctx, nextAvailableSQL, e.ID, id, now).Scan(&next); err != nil {
		return nil, false, err
	}
	if !next.Valid || next.Time.After(now) {
		_, err := tx.Exec(ctx, `UPDATE sessions SET available_at = $3, lock_token = NULL, locked_until = NULL
			WHERE entity_id = $1 AND session_id = $2`, e.ID, id, next)
		return nil, true, err
	}
	sess, err := s.takeSessionLock(ctx, tx, e, id, now)
	return sess, false, err
}

func (s *Postgres) takeSessionLock(ctx context.Context, tx pgx.Tx, e *broker.Entity, id string, now time.Time) (*broker.Session, error) {
	if _, err := tx.Exec(ctx, releaseMessageLocksSQL, e.ID, id); err != nil {
		return nil, err
	}
	sess := &broker.Session{ID: id}
	err := tx.QueryRow(ctx, `UPDATE sessions SET lock_token = gen_random_uuid(), locked_until = $3::timestamptz + $4::interval,
			available_at = $3::timestamptz + $4::interval
		WHERE entity_id = $1 AND session_id = $2 RETURNING lock_token, locked_until`,
		e.ID, id, now, interval(e.Props.LockDuration)).Scan(&sess.LockToken, &sess.LockedUntil)
	sess.LockedUntil = sess.LockedUntil.UTC()
	return sess, err
}

func (s *Postgres) acceptNamed(ctx context.Context, e *broker.Entity, id string) (*broker.Session, error) {
	s.touch(e)
	var sess *broker.Session
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now()
		var lockedUntil pgtype.Timestamptz
		err := tx.QueryRow(ctx, `INSERT INTO sessions (entity_id, session_id) VALUES ($1, $2)
			ON CONFLICT (entity_id, session_id) DO UPDATE SET session_id = excluded.session_id
			RETURNING locked_until`, e.ID, id).Scan(&lockedUntil)
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
func (s *Postgres) checkSessionLock(ctx context.Context, db querier, e *broker.Entity, sl broker.SessionLock, now time.Time) error {
	rows, err := db.Query(ctx, `SELECT 1 FROM sessions WHERE entity_id = $1 AND session_id = $2 AND lock_token = $3 AND locked_until > $4`,
		e.ID, sl.SessionID, sl.Token, now)
	if err != nil {
		return interpretError(err)
	}
	held := rows.Next()
	rows.Close()
	if err := rows.Err(); err != nil {
		return interpretError(err)
	}
	if !held {
		return broker.SessionLockLost(e, sl.SessionID)
	}
	return nil
}

// renewSessionLockSQL extends a session lock, and the locks of the messages received under it
// with it (a message in a session is locked as long as its session).
const renewSessionLockSQL = `WITH renewed AS (
	UPDATE sessions SET locked_until = $4::timestamptz + $5::interval, available_at = $4::timestamptz + $5::interval
	WHERE entity_id = $1 AND session_id = $2 AND lock_token = $3 AND locked_until > $4 RETURNING locked_until
), held AS (
	UPDATE messages m SET visible_at = r.locked_until FROM renewed r
	WHERE m.entity_id = $1 AND m.session_id = $2 AND m.lock_token IS NOT NULL AND m.visible_at > $4
		AND m.state <> ` + sqlDeadLetter + `
)
SELECT locked_until FROM renewed`

// RenewSessionLock extends a session lock by the entity's LockDuration, and the locks of the
// messages received under it, and returns its new end. Errors: ErrLockLost.
func (s *Postgres) RenewSessionLock(ctx context.Context, e *broker.Entity, sl broker.SessionLock) (time.Time, error) {
	if err := broker.CheckSessionLockID(e, &sl); err != nil {
		return time.Time{}, err
	}
	var until time.Time
	err := s.pool.QueryRow(ctx, renewSessionLockSQL,
		e.ID, sl.SessionID, sl.Token, s.now(), interval(e.Props.LockDuration)).Scan(&until)
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
		var held bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE entity_id = $1 AND session_id = $2
			AND lock_token = $3 AND locked_until > $4 FOR UPDATE)`, e.ID, sl.SessionID, sl.Token, now).Scan(&held); err != nil {
			return err
		}
		if !held {
			return broker.SessionLockLost(e, sl.SessionID)
		}
		if _, err := tx.Exec(ctx, releaseMessageLocksSQL, e.ID, sl.SessionID); err != nil {
			return err
		}
		var next pgtype.Timestamptz
		if err := tx.QueryRow(ctx, nextAvailableSQL, e.ID, sl.SessionID, now).Scan(&next); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE sessions SET lock_token = NULL, locked_until = NULL, available_at = $3
			WHERE entity_id = $1 AND session_id = $2`, e.ID, sl.SessionID, next)
		return err
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
	var state []byte
	err := s.pool.QueryRow(ctx, `SELECT state FROM sessions WHERE entity_id = $1 AND session_id = $2 AND lock_token = $3 AND locked_until > $4`,
		e.ID, sl.SessionID, sl.Token, s.now()).Scan(&state)
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
func (s *Postgres) setSessionState(ctx context.Context, db execer, e *broker.Entity, sl broker.SessionLock, state []byte, now time.Time) error {
	if len(state) == 0 {
		state = nil
	}
	tag, err := db.Exec(ctx, `UPDATE sessions SET state = $5, state_updated_at = $4
		WHERE entity_id = $1 AND session_id = $2 AND lock_token = $3 AND locked_until > $4`,
		e.ID, sl.SessionID, sl.Token, now, state)
	if err != nil {
		return fmt.Errorf("set state of session %s: %w", broker.Clip(sl.SessionID), interpretError(err))
	}
	if tag.RowsAffected() == 0 {
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
	rows, err := s.pool.Query(ctx, `SELECT session_id, locked_until, state IS NOT NULL,
			EXISTS (SELECT 1 FROM messages m WHERE m.entity_id = s.entity_id AND m.session_id = s.session_id
				AND m.visible_at IS NULL AND m.state <> `+sqlDeadLetter+`)
			OR EXISTS (SELECT 1 FROM messages m WHERE m.entity_id = s.entity_id AND m.session_id = s.session_id
				AND m.visible_at IS NOT NULL AND m.state <> `+sqlDeadLetter+`)
		FROM sessions s WHERE entity_id = $1 AND (available_at IS NOT NULL OR state IS NOT NULL OR locked_until > $2)
		ORDER BY session_id OFFSET $3 LIMIT $4`, e.ID, now, skip, top)
	if err != nil {
		return nil, fmt.Errorf("list sessions of %s: %w", e.Path, interpretError(err))
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (broker.SessionInfo, error) {
		var info broker.SessionInfo
		var locked pgtype.Timestamptz
		err := r.Scan(&info.ID, &locked, &info.HasState, &info.HasMessages)
		if locked.Valid && locked.Time.After(now) {
			info.LockedUntil = locked.Time.UTC()
		}
		return info, err
	})
}
