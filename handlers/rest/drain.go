package rest

import (
	"context"
	"errors"
)

// errDraining ends the wait of a receive when the server shuts down.
var errDraining = errors.New("the server is shutting down")

// waitContext is the context a waiting operation (a long-poll receive, a session accept) waits
// under: the request's, ended early when the server starts draining, so that a shutdown answers
// every waiting receiver at once instead of holding it to the end of its timeout. end releases it.
func (s *Server) waitContext(ctx context.Context) (wctx context.Context, end func()) {
	count := func(int) {}
	if s.cfg.Waiting != nil {
		count = s.cfg.Waiting
	}
	count(1)
	if s.cfg.Drain == nil {
		return ctx, func() { count(-1) }
	}
	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.cfg.Drain, func() { cancel(errDraining) })
	return wctx, func() { stop(); cancel(nil); count(-1) }
}

// drained reports whether err only says that the wait under wctx was ended by draining while
// the client is still there: the operation found nothing, and answers so (204), as if its
// timeout had passed.
func drained(reqCtx, wctx context.Context, err error) bool {
	return err != nil && reqCtx.Err() == nil && errors.Is(context.Cause(wctx), errDraining) && errors.Is(err, context.Canceled)
}
