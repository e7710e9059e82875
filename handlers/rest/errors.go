package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/atom"
	"github.com/sbgate/sbgate/broker"
)

// errorStatus is the one table from domain error codes to HTTP statuses (protocol.md §2.10, §6).
var errorStatus = map[broker.Code]int{
	broker.CodeBadRequest:    http.StatusBadRequest,
	broker.CodeNotFound:      http.StatusNotFound,
	broker.CodeConflict:      http.StatusConflict,
	broker.CodeLockLost:      http.StatusNotFound,
	broker.CodeTooLarge:      http.StatusForbidden, // "Quota exceeded or message too large"
	broker.CodeQuotaExceeded: http.StatusForbidden,
	broker.CodeForbidden:     http.StatusForbidden,
	broker.CodeUnavailable:   http.StatusServiceUnavailable,
	broker.CodeInternal:      http.StatusInternalServerError,
	codeUnauthorized:         http.StatusUnauthorized,
}

// codeUnauthorized is the one error that starts in this package: authorization happens here.
const codeUnauthorized broker.Code = "unauthorized"

// retryAfterSeconds is what a 503 asks clients to wait.
const retryAfterSeconds = 2

// writeError answers with the Service Bus error body for err. Domain errors carry a message safe
// to show; anything else is logged with the tracking id and shown only as an internal error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := broker.ErrorCode(err)
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client is gone; nobody reads the answer
	}
	status, ok := errorStatus[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	tracking := uuid.New().String()
	msg := broker.ErrorMessage(err)
	if status == http.StatusInternalServerError || msg == "" {
		rt, _ := routeFrom(r.Context())
		s.log.ErrorContext(r.Context(), "request failed", slog.String("operation", rt.label()), slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("tracking_id", tracking), slog.Any("err", err))
		msg = "The server was unable to process the request; please retry the operation. If the problem persists, please contact your Service Bus administrator and provide the tracking id."
		status = http.StatusInternalServerError
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	detail := msg + " TrackingId:" + tracking + ", SystemTracker:" + s.systemTracker(r) +
		", Timestamp:" + s.now().UTC().Format(time.RFC3339)
	body := atom.AppendError(nil, status, detail)
	if phrase := errorPhrase(err); phrase != "" && writeWithReasonPhrase(w, r, status, phrase, atom.ErrorContentType, body) {
		return
	}
	w.Header().Set("Content-Type", atom.ErrorContentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// systemTracker names the namespace and entity an error concerns, as the service does.
func (s *Server) systemTracker(r *http.Request) string {
	if rt, ok := routeFrom(r.Context()); ok && rt.entity != "" {
		return s.cfg.Namespace + ":" + rt.entity
	}
	return s.cfg.Namespace
}
