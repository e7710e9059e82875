package amqp

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
)

const (
	propTimeout        amqp.Symbol = "com.microsoft:timeout"
	propLockedUntilUTC amqp.Symbol = "com.microsoft:locked-until-utc"
	// defaultAcceptWait is how long an accept of the next session waits when the peer names no
	// timeout.
	defaultAcceptWait = time.Minute
)

// acceptSession locks the session a receive link's session filter asks for (a session id, ""
// included, or null for the next available) and returns the lock and the attach reply that
// tells the peer which session it got and until when (docs/amqp.md §5).
func (cs *conn) acceptSession(req *amqp.AttachRequest, e *broker.Entity, filter any) (*broker.SessionLock, amqp.SenderOptions, *amqp.Error) {
	var opts amqp.SenderOptions
	desc, ok := filter.(amqp.Described)
	value := filter
	if ok {
		value = desc.Value
	}
	var sid string
	named := false
	switch v := value.(type) {
	case nil:
	case string:
		sid, named = v, true // "" is a session id: the SDKs send null for the next session
	default:
		return nil, opts, amqp.Errorf(condInvalidField, "The session filter must be a session id or null, not %T.", v)
	}
	wait := defaultAcceptWait
	if v, ok := req.Properties().Get(propTimeout); ok {
		if ms, ok := asInt64(v); ok {
			wait = time.Duration(ms) * time.Millisecond
		}
	}
	wait = min(wait, cs.h.cfg.MaxReceiveWait)
	if named {
		// A link of this connection that just closed may still be releasing the session: the
		// peer, having seen the detach, expects to accept it again at once.
		cs.mu.Lock()
		done := cs.releasing[sessionKey(e.Path, sid)]
		cs.mu.Unlock()
		if done != nil {
			select {
			case <-done:
			case <-req.Context().Done():
			}
		}
	}
	var s *broker.Session
	var err error
	if named {
		s, err = cs.h.cfg.Store.AcceptSession(req.Context(), e, sid)
	} else {
		s, err = cs.h.cfg.Store.AcceptNextSession(req.Context(), e, wait)
	}
	switch {
	case err != nil && broker.ErrorCode(err) == broker.CodeConflict:
		return nil, opts, amqp.Errorf(condSessionCannotBeL, "The session '%s' is locked by another receiver.", sid)
	case err != nil:
		return nil, opts, amqpError(err)
	case s == nil:
		return nil, opts, amqp.Errorf(condTimeout, "No session of '%s' became available in time.", e.Path)
	}
	src := *req.Attach().Source
	src.Filter = amqp.Map{{Key: sessionFilter, Value: sessionFilterValue(filter, s.ID)}}
	opts.Source = &src
	opts.Properties = amqp.Map{{Key: propLockedUntilUTC, Value: dotnetTicks(s.LockedUntil)}}
	lock := &broker.SessionLock{SessionID: s.ID, Token: s.LockToken}
	cs.mu.Lock()
	if cs.sessions == nil {
		cs.sessions = map[string]broker.SessionLock{}
	}
	cs.sessions[sessionKey(e.Path, s.ID)] = *lock
	if cs.linkSessions == nil {
		cs.linkSessions = map[string]broker.SessionLock{}
	}
	cs.linkSessions[req.Name()] = *lock
	cs.mu.Unlock()
	return lock, opts, nil
}

// sessionFilterValue is the filter of the attach reply: the peer's, with the session id chosen.
func sessionFilterValue(filter any, sid string) any {
	if d, ok := filter.(amqp.Described); ok {
		return amqp.Described{Descriptor: d.Descriptor, Value: sid}
	}
	return sid
}

func sessionKey(path, sid string) string { return strings.ToLower(path) + "\x00" + sid }

// sessionLock returns the lock this connection holds on a session of the entity at path.
func (cs *conn) sessionLock(path, sid string) (broker.SessionLock, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	l, ok := cs.sessions[sessionKey(path, sid)]
	return l, ok
}

// linkSession returns the session lock of the receive link named name, for $management
// requests that name their link (associated-link-name) instead of a session id.
func (cs *conn) linkSession(name string) (broker.SessionLock, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	l, ok := cs.linkSessions[name]
	return l, ok
}

// releaseSession gives up a session whose link ended, so that it can be accepted again at once.
// Releasing it frees the locks of its messages, so it waits first for settlements (nil: none)
// the link's peer sent before the link ended: a complete that came second would find its lock
// gone and the message would come back, though a peer that settles first has forgotten it.
// A new accept of the session waits for the release meanwhile (releasing).
func (cs *conn) releaseSession(e *broker.Entity, lock broker.SessionLock, settling *sync.WaitGroup) {
	key := sessionKey(e.Path, lock.SessionID)
	done := make(chan struct{})
	cs.mu.Lock()
	if cur, ok := cs.sessions[key]; ok && cur == lock {
		delete(cs.sessions, key)
	}
	for name, l := range cs.linkSessions {
		if l == lock {
			delete(cs.linkSessions, name)
		}
	}
	if cs.releasing == nil {
		cs.releasing = map[string]chan struct{}{}
	}
	cs.releasing[key] = done
	cs.mu.Unlock()
	go func() {
		defer func() {
			cs.mu.Lock()
			if cs.releasing[key] == done {
				delete(cs.releasing, key)
			}
			cs.mu.Unlock()
			close(done)
		}()
		if settling != nil {
			settling.Wait()
		}
		// Timed from here: a settlement it waited for may have taken as long itself.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A lock already lost needs no release.
		_ = cs.h.cfg.Store.ReleaseSession(ctx, e, lock)
	}()
}

// dotnetTicks is t as .NET ticks (100 ns since 0001-01-01), how the SDKs read
// com.microsoft:locked-until-utc.
func dotnetTicks(t time.Time) int64 {
	const unixEpochTicks = 621355968000000000
	return unixEpochTicks + t.UnixNano()/100
}
