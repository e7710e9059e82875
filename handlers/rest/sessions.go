package rest

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/broker"
)

// Sessions over HTTP, an extension: the REST protocol cannot receive from a session entity.
// Accepting a session answers with its Location, {entity}/sessions/{id}/{lock token}; every
// operation inside the session goes under that path, so the lock travels in the URL as a message
// lock does in a settlement URL.

// sessionTarget is the target of an operation inside an accepted session.
func sessionTarget(entityPath, sessionID string, token api.SessionLockToken) target {
	return target{path: entityPath, session: &broker.SessionLock{SessionID: sessionIDParam(sessionID), Token: token}}
}

// sessionEntity resolves the entity of a session operation: a queue or subscription (its
// dead-letter subqueue has no sessions).
func (s *Server) sessionEntity(r *http.Request, entityPath string) (*broker.Entity, error) {
	e, sq, err := s.messagingEntity(r, entityPath)
	if err == nil && sq != broker.SubQueueMain {
		err = broker.BadRequest("Sessions live in the entity, not its dead-letter subqueue.")
	}
	return e, err
}

func (s *Server) writeSession(w http.ResponseWriter, r *http.Request, entityPath string, status int, sess *broker.Session) {
	w.Header().Set("Location", requestScheme(r)+"://"+r.Host+"/"+escapePath(entityPath)+"/sessions/"+
		url.PathEscape(sess.ID)+"/"+sess.LockToken.String())
	s.writeJSON(w, status, api.SessionLock{SessionId: sess.ID, LockToken: sess.LockToken, LockedUntilUtc: sess.LockedUntil.Format(rfc1123)})
}

// ListSessions lists the sessions with messages or state.
func (s *Server) ListSessions(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.ListSessionsParams) {
	e, err := s.sessionEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	skip, top, err := page(params.Skip, params.Top)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.store.ListSessions(r.Context(), e, skip, top)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]api.SessionInfo, len(list))
	for i, info := range list {
		out[i] = api.SessionInfo{SessionId: info.ID, HasMessages: info.HasMessages, HasState: info.HasState}
		if !info.LockedUntil.IsZero() {
			until := info.LockedUntil.Format(rfc1123)
			out[i].LockedUntilUtc = &until
		}
	}
	s.writeJSON(w, http.StatusOK, out)
}

// AcceptNextSession locks the session whose messages have waited longest.
func (s *Server) AcceptNextSession(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.AcceptNextSessionParams) {
	wait, err := s.receiveWait(params.Timeout)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.accept(w, r, entityPath, func(ctx context.Context, e *broker.Entity) (*broker.Session, error) {
		return s.store.AcceptNextSession(ctx, e, wait)
	})
}

// AcceptSession locks a named session.
func (s *Server) AcceptSession(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, params api.AcceptSessionParams) {
	sessionID = sessionIDParam(sessionID)
	s.accept(w, r, entityPath, func(ctx context.Context, e *broker.Entity) (*broker.Session, error) {
		return s.store.AcceptSession(ctx, e, sessionID)
	})
}

// accept answers a session accept that take makes.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, entityPath string, take func(context.Context, *broker.Entity) (*broker.Session, error)) {
	e, err := s.sessionEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wctx, end := s.waitContext(r.Context())
	defer end()
	sess, err := take(wctx, e)
	if sess == nil && drained(r.Context(), wctx, err) {
		err = nil
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if sess == nil {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.writeSession(w, r, entityPath, http.StatusCreated, sess)
}

// RenewSessionLock extends a session lock.
func (s *Server) RenewSessionLock(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.RenewSessionLockParams) {
	sessionID = sessionIDParam(sessionID)
	e, err := s.sessionEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	until, err := s.store.RenewSessionLock(r.Context(), e, broker.SessionLock{SessionID: sessionID, Token: token})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeSession(w, r, entityPath, http.StatusOK, &broker.Session{ID: sessionID, LockToken: token, LockedUntil: until})
}

// ReleaseSession gives a session up.
func (s *Server) ReleaseSession(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.ReleaseSessionParams) {
	sessionID = sessionIDParam(sessionID)
	e, err := s.sessionEntity(r, entityPath)
	if err == nil {
		err = s.store.ReleaseSession(r.Context(), e, broker.SessionLock{SessionID: sessionID, Token: token})
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// GetSessionState returns the session's state.
func (s *Server) GetSessionState(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.GetSessionStateParams) {
	sessionID = sessionIDParam(sessionID)
	e, err := s.sessionEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	state, err := s.store.SessionState(r.Context(), e, broker.SessionLock{SessionID: sessionID, Token: token})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if state == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(state)
}

// SetSessionState replaces the session's state; an empty body clears it.
func (s *Server) SetSessionState(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.SetSessionStateParams) {
	sessionID = sessionIDParam(sessionID)
	e, err := s.sessionEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	state, err := io.ReadAll(http.MaxBytesReader(w, r.Body, broker.MaxSessionStateSize+1))
	if err != nil || len(state) > broker.MaxSessionStateSize {
		s.writeError(w, r, &broker.Error{Code: broker.CodeTooLarge, Message: "A session state may be at most 262144 bytes."})
		return
	}
	if err := s.store.SetSessionState(r.Context(), e, broker.SessionLock{SessionID: sessionID, Token: token}, state); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// SessionPeekLock locks the session's next message.
func (s *Server) SessionPeekLock(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.SessionPeekLockParams) {
	s.receive(w, r, sessionTarget(entityPath, sessionID, token), params.Timeout, broker.PeekLock)
}

// SessionReceiveAndDelete removes and returns the session's next message.
func (s *Server) SessionReceiveAndDelete(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.SessionReceiveAndDeleteParams) {
	s.receive(w, r, sessionTarget(entityPath, sessionID, token), params.Timeout, broker.ReceiveAndDelete)
}

// SessionPeekLockBatch locks up to count messages of the session.
func (s *Server) SessionPeekLockBatch(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.SessionPeekLockBatchParams) {
	s.receiveBatch(w, r, sessionTarget(entityPath, sessionID, token), params.Count, params.Timeout, broker.PeekLock)
}

// SessionReceiveAndDeleteBatch removes and returns up to count messages of the session.
func (s *Server) SessionReceiveAndDeleteBatch(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.SessionReceiveAndDeleteBatchParams) {
	s.receiveBatch(w, r, sessionTarget(entityPath, sessionID, token), params.Count, params.Timeout, broker.ReceiveAndDelete)
}

// SessionComplete completes a message of the session.
func (s *Server) SessionComplete(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, messageID api.MessageId, lockToken api.LockToken, params api.SessionCompleteParams) {
	s.settle(w, r, sessionTarget(entityPath, sessionID, token), broker.Complete, messageID, lockToken)
}

// SessionUnlock abandons a message of the session.
func (s *Server) SessionUnlock(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, messageID api.MessageId, lockToken api.LockToken, params api.SessionUnlockParams) {
	s.settle(w, r, sessionTarget(entityPath, sessionID, token), broker.Abandon, messageID, lockToken)
}

// SessionRenewMessageLock renews the lock of a message of the session.
func (s *Server) SessionRenewMessageLock(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, messageID api.MessageId, lockToken api.LockToken, params api.SessionRenewMessageLockParams) {
	s.settle(w, r, sessionTarget(entityPath, sessionID, token), broker.RenewLock, messageID, lockToken)
}

// SessionDefer defers a message of the session.
func (s *Server) SessionDefer(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, messageID api.MessageId, lockToken api.LockToken, params api.SessionDeferParams) {
	s.settle(w, r, sessionTarget(entityPath, sessionID, token), broker.Defer, messageID, lockToken)
}

// SessionDeadLetter dead-letters a message of the session.
func (s *Server) SessionDeadLetter(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, messageID api.MessageId, lockToken api.LockToken, params api.SessionDeadLetterParams) {
	s.deadLetter(w, r, sessionTarget(entityPath, sessionID, token), messageID, lockToken)
}

// SessionPeekLockDeferred locks a deferred message of the session.
func (s *Server) SessionPeekLockDeferred(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, seq api.SequenceNumber, params api.SessionPeekLockDeferredParams) {
	s.receiveDeferred(w, r, sessionTarget(entityPath, sessionID, token), seq, broker.PeekLock)
}

// SessionReceiveAndDeleteDeferred removes and returns a deferred message of the session.
func (s *Server) SessionReceiveAndDeleteDeferred(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, seq api.SequenceNumber, params api.SessionReceiveAndDeleteDeferredParams) {
	s.receiveDeferred(w, r, sessionTarget(entityPath, sessionID, token), seq, broker.ReceiveAndDelete)
}
