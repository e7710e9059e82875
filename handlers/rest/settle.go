package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/broker"
)

// maxSettleRequest bounds the body of a batch settlement: 1000 elements with dead-letter reasons
// and descriptions fit easily.
const maxSettleRequest = 4 << 20

// maxSettlements bounds the locks one batch settlement names.
const maxSettlements = 1000

// dispositions maps the JSON dispositions to settlements.
var dispositions = map[api.SettlementDisposition]broker.Settlement{
	api.Complete:   broker.Complete,
	api.Abandon:    broker.Abandon,
	api.DeadLetter: broker.DeadLetter,
	api.Defer:      broker.Defer,
	api.RenewLock:  broker.RenewLock,
}

// SettleMessages settles many locks of an entity in one request.
func (s *Server) SettleMessages(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.SettleMessagesParams) {
	s.settleMany(w, r, target{path: entityPath})
}

// SessionSettleMessages settles many locks of an accepted session in one request.
func (s *Server) SessionSettleMessages(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, sessionID api.SessionId, token api.SessionLockToken, params api.SessionSettleMessagesParams) {
	s.settleMany(w, r, sessionTarget(entityPath, sessionID, token))
}

func (s *Server) settleMany(w http.ResponseWriter, r *http.Request, t target) {
	st, err := s.resolve(r, t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	reqs, err := parseSettlements(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	results := s.store.Settle(r.Context(), st, reqs)
	out := make([]api.SettlementResult, len(results))
	for i, res := range results {
		out[i] = api.SettlementResult{LockToken: reqs[i].Token, Status: http.StatusOK}
		switch code := broker.ErrorCode(res.Err); {
		case res.Err == nil:
			if reqs[i].Op == broker.RenewLock {
				until := res.LockedUntil.Format(rfc1123)
				out[i].LockedUntilUtc = &until
			}
		case code == broker.CodeLockLost || code == broker.CodeBadRequest:
			detail := broker.ErrorMessage(res.Err)
			out[i].Status, out[i].Detail = errorStatus[code], &detail
		default:
			// The database is away or failed: the answer for this element is unknown, so the
			// request as a whole fails and the client retries it (a settled lock then answers
			// 404, lock lost).
			s.writeError(w, r, res.Err)
			return
		}
	}
	s.writeJSON(w, http.StatusOK, out)
}

// parseSettlements reads and checks a batch settlement body.
func parseSettlements(w http.ResponseWriter, r *http.Request) ([]broker.SettleRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSettleRequest))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, broker.BadRequest("The settlement request is larger than %d bytes.", maxSettleRequest)
	}
	if err != nil {
		return nil, broker.BadRequest("The request body could not be read.")
	}
	var items []api.Settlement
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&items); err != nil || !atEOF(dec) {
		return nil, broker.BadRequest("The body must be a JSON array of settlements: {\"LockToken\": \"…\", \"Disposition\": \"Complete\"}.")
	}
	switch {
	case len(items) == 0:
		return nil, broker.BadRequest("The settlement request names no locks.")
	case len(items) > maxSettlements:
		return nil, broker.BadRequest("A settlement request may name at most %d locks.", maxSettlements)
	}
	reqs := make([]broker.SettleRequest, len(items))
	for i, it := range items {
		op, ok := dispositions[it.Disposition]
		if !ok {
			return nil, broker.BadRequest("Settlement %d: Disposition must be Complete, Abandon, DeadLetter, Defer or RenewLock.", i+1)
		}
		reqs[i] = broker.SettleRequest{Op: op, Token: it.LockToken}
		if it.DeadLetterReason != nil || it.DeadLetterErrorDescription != nil {
			if op != broker.DeadLetter {
				return nil, broker.BadRequest("Settlement %d: DeadLetterReason and DeadLetterErrorDescription go with the DeadLetter disposition only.", i+1)
			}
		}
		if op == broker.DeadLetter {
			reqs[i].Reason, reqs[i].Description = deadLetterReason(it.DeadLetterReason, it.DeadLetterErrorDescription)
			if !headerSafe(reqs[i].Reason) || !headerSafe(reqs[i].Description) {
				return nil, broker.BadRequest("Settlement %d: the dead-letter reason and description may not contain control characters.", i+1)
			}
			if err := checkDeadLetterText(reqs[i].Reason, reqs[i].Description); err != nil {
				return nil, broker.BadRequest("Settlement %d: %s", i+1, broker.ErrorMessage(err))
			}
		}
	}
	return reqs, nil
}

// deadLetterReason applies the defaults of a dead-letter request: the reason
// DeadLetteredByReceiver, no description.
func deadLetterReason(reason, description *string) (string, string) {
	r, d := "DeadLetteredByReceiver", ""
	if reason != nil && *reason != "" {
		r = *reason
	}
	if description != nil {
		d = *description
	}
	return r, d
}
