package rest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sqlfilter"
)

// The sbgate extensions: what the Service Bus REST protocol lacks, on $-segments after
// "messages" (entity names cannot contain '$'), with messages as JSON objects of the shape a
// batch send takes.

// toJSON converts a message to the extensions' JSON form, api.Message: the body as text when it
// is UTF-8, else base64; BrokerProperties as formatBrokerProperties writes them (the generated
// model holds them raw for that, see api/server.overlay.yaml), with the dead-letter reason and
// description, which a REST receive carries as headers, added; user property values as JSON
// values (a date as its RFC 1123 text, a double always with a fraction or exponent so it reads
// back as a double).
func (s *Server) toJSON(r *http.Request, t target, m *broker.Message) api.Message {
	jm := api.Message{BrokerProperties: formatBrokerProperties(m, s.now())}
	if m.ContentType != "" {
		jm.ContentType = &m.ContentType
	}
	if body := restBody(m); utf8.Valid(body) {
		b := string(body)
		jm.Body = &b
	} else {
		jm.BodyBase64 = &body
	}
	if m.DeadLetterReason != "" || m.DeadLetterDescription != "" {
		var bp map[string]json.RawMessage
		if json.Unmarshal(jm.BrokerProperties, &bp) == nil {
			if m.DeadLetterReason != "" {
				bp["DeadLetterReason"], _ = json.Marshal(m.DeadLetterReason)
			}
			if m.DeadLetterDescription != "" {
				bp["DeadLetterErrorDescription"], _ = json.Marshal(m.DeadLetterDescription)
			}
			jm.BrokerProperties, _ = json.Marshal(bp)
		}
	}
	if len(m.UserProperties) > 0 {
		up := make(map[string]any, len(m.UserProperties))
		for _, p := range m.UserProperties {
			up[p.Name] = jsonPropertyOf(p.Value)
		}
		jm.UserProperties = &up
	}
	if m.LockToken != [16]byte{} {
		loc := s.lockLocation(r, t, m)
		jm.Location = &loc
	}
	return jm
}

// jsonPropertyOf is a user property as the extensions' JSON shows it: what its header value
// (formatPropertyValue) says, as a JSON value. Strings, booleans and whole numbers are
// themselves; a double or decimal is its header text as a JSON number (a double keeps a
// fraction, so it reads back as one); every quoted header value (a date, a Guid, a time span,
// binary's base64, a char, a Uri) is a JSON string of its text.
func jsonPropertyOf(v any) any {
	switch x := v.(type) {
	case nil:
		return nil // JSON null: an AMQP property present without a value
	case string, bool, int64, int32, int16, int8, uint64, uint32, uint16, uint8:
		return x
	}
	text := formatPropertyValue(v)
	if len(text) >= 2 && text[0] == '"' {
		return unescapeQuoted(text[1 : len(text)-1])
	}
	return json.Number(text)
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

func (s *Server) writeMessages(w http.ResponseWriter, r *http.Request, t target, status int, msgs []*broker.Message) error {
	out := make([]api.Message, len(msgs))
	for i, m := range msgs {
		out[i] = s.toJSON(r, t, m)
	}
	return s.writeJSON(w, status, out)
}

// handOut answers a receive with what it took (write). A receive-and-delete's messages whose
// client has gone (its request ended before the answer) or whose answer could not be written
// are put back as they were (store.Restore): the client never had them. A peek-locked message
// needs nothing: its lock runs out.
func (s *Server) handOut(r *http.Request, t broker.Target, mode broker.ReceiveMode, msgs []*broker.Message, write func() error) {
	if mode == broker.ReceiveAndDelete && r.Context().Err() != nil {
		s.restore(r, t, msgs, r.Context().Err())
		return
	}
	if err := write(); err != nil && mode == broker.ReceiveAndDelete {
		s.restore(r, t, msgs, err)
	}
}

func (s *Server) restore(r *http.Request, t broker.Target, msgs []*broker.Message, why error) {
	n, err := s.store.Restore(context.WithoutCancel(r.Context()), t, msgs)
	if err != nil {
		s.log.Error("receive-and-delete: messages taken for a client that did not get them are lost",
			"entity", t.Entity.Path, "count", len(msgs), "first_sequence_number", msgs[0].SequenceNumber, "why", why, "err", err)
		return
	}
	s.log.Debug("receive-and-delete: messages the client did not get were put back", "entity", t.Entity.Path, "count", n, "why", why)
}

// count reads an optional count parameter.
func count(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// BrowseMessages lists messages without locking them.
func (s *Server) BrowseMessages(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.BrowseMessagesParams) {
	e, sq, err := s.messagingEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var from int64
	if params.From != nil {
		from = *params.From
	}
	msgs, err := s.store.Browse(r.Context(), e, sq, from, count(params.Count, 10))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A peeked message's DeliveryCount is its failed deliveries, not the one more a received
	// message shows: what the service's peek gives the .NET SDK (which adds one only on receive)
	// and the portal.
	for _, m := range msgs {
		m.DeliveryCount--
	}
	s.writeMessages(w, r, target{path: entityPath}, http.StatusOK, msgs)
}

// PeekLockBatch locks up to count messages.
func (s *Server) PeekLockBatch(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.PeekLockBatchParams) {
	s.receiveBatch(w, r, target{path: entityPath}, params.Count, params.Timeout, broker.PeekLock)
}

// ReceiveAndDeleteBatch removes and returns up to count messages.
func (s *Server) ReceiveAndDeleteBatch(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.ReceiveAndDeleteBatchParams) {
	s.receiveBatch(w, r, target{path: entityPath}, params.Count, params.Timeout, broker.ReceiveAndDelete)
}

func (s *Server) receiveBatch(w http.ResponseWriter, r *http.Request, t target, n, timeout *int, mode broker.ReceiveMode) {
	st, err := s.resolve(r, t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wait, err := s.receiveWait(timeout)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wctx, end := s.waitContext(r.Context())
	defer end()
	msgs, err := s.store.Receive(wctx, broker.ReceiveRequest{Target: st, Mode: mode, Max: count(n, 10), Wait: wait})
	if drained(r.Context(), wctx, err) {
		msgs, err = nil, nil
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(msgs) == 0 {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	status := http.StatusOK
	if mode == broker.PeekLock {
		status = http.StatusCreated
	}
	s.handOut(r, st, mode, msgs, func() error { return s.writeMessages(w, r, t, status, msgs) })
}

// PeekLockDeferred locks a deferred message; the answer is that of a peek-lock.
func (s *Server) PeekLockDeferred(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, seq api.SequenceNumber, params api.PeekLockDeferredParams) {
	s.receiveDeferred(w, r, target{path: entityPath}, seq, broker.PeekLock)
}

// ReceiveAndDeleteDeferred removes and returns a deferred message.
func (s *Server) ReceiveAndDeleteDeferred(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, seq api.SequenceNumber, params api.ReceiveAndDeleteDeferredParams) {
	s.receiveDeferred(w, r, target{path: entityPath}, seq, broker.ReceiveAndDelete)
}

func (s *Server) receiveDeferred(w http.ResponseWriter, r *http.Request, t target, seq int64, mode broker.ReceiveMode) {
	st, err := s.resolve(r, t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	msgs, err := s.store.ReceiveDeferred(r.Context(), st, []int64{seq}, mode)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	m := msgs[0]
	status := http.StatusOK
	if mode == broker.PeekLock {
		status = http.StatusCreated
		w.Header().Set("Location", s.lockLocation(r, t, m))
	}
	s.handOut(r, st, mode, msgs, func() error { return s.writeMessage(w, status, m) })
}

// CancelScheduled removes a scheduled message before its time.
func (s *Server) CancelScheduled(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, seq api.SequenceNumber, params api.CancelScheduledParams) {
	e, sq, err := s.messagingEntity(r, entityPath)
	if err == nil && sq != broker.SubQueueMain {
		err = broker.BadRequest("Scheduled messages live in the entity, not its dead-letter subqueue.")
	}
	if err == nil {
		err = s.store.CancelScheduled(r.Context(), e, []int64{seq})
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// maxDeadLetterRequest bounds the body of a dead-letter request.
const maxDeadLetterRequest = 64 * 1024

// DeadLetterMessage moves a locked message to the dead-letter subqueue.
func (s *Server) DeadLetterMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.DeadLetterMessageParams) {
	s.deadLetter(w, r, target{path: entityPath}, messageID, lockToken)
}

func (s *Server) deadLetter(w http.ResponseWriter, r *http.Request, t target, messageID string, lockToken uuid.UUID) {
	var req api.DeadLetterRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDeadLetterRequest))
	if err != nil {
		s.writeError(w, r, broker.BadRequest("The request body is larger than %d bytes or could not be read.", maxDeadLetterRequest))
		return
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			s.writeError(w, r, broker.BadRequest("The body must be a JSON object with DeadLetterReason and DeadLetterErrorDescription."))
			return
		}
	}
	reason, description := deadLetterReason(req.DeadLetterReason, req.DeadLetterErrorDescription)
	if !headerSafe(reason) || !headerSafe(description) {
		s.writeError(w, r, broker.BadRequest("The dead-letter reason and description may not contain control characters."))
		return
	}
	if err := checkDeadLetterText(reason, description); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.settleOne(w, r, t, broker.SettleRequest{Op: broker.DeadLetter, ID: messageID, Token: lockToken, Reason: reason, Description: description})
}

// DeferMessage sets a locked message aside until it is received by sequence number.
func (s *Server) DeferMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.DeferMessageParams) {
	s.settle(w, r, target{path: entityPath}, broker.Defer, messageID, lockToken)
}

// PurgeMessages deletes every message of an entity or its dead-letter subqueue.
func (s *Server) PurgeMessages(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.PurgeMessagesParams) {
	e, sq, err := s.messagingEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.store.Purge(r.Context(), e, sq)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.CountResult{Count: n})
}

// ResubmitAll puts every (matching) dead-lettered message back in its entity.
func (s *Server) ResubmitAll(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.ResubmitAllParams) {
	var match func(*broker.Message) bool
	if params.Filter != nil && *params.Filter != "" {
		f, err := compileResubmitFilter(*params.Filter)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		match = f
	}
	s.resubmit(w, r, entityPath, 0, match)
}

// ResubmitOne puts one dead-lettered message back in its entity.
func (s *Server) ResubmitOne(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, seq api.SequenceNumber, params api.ResubmitOneParams) {
	s.resubmit(w, r, entityPath, seq, nil)
}

func (s *Server) resubmit(w http.ResponseWriter, r *http.Request, entityPath string, seq int64, match func(*broker.Message) bool) {
	e, sq, err := s.messagingEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if sq != broker.SubQueueDeadLetter {
		s.writeError(w, r, broker.BadRequest("Resubmit takes messages from a dead-letter subqueue: use %s/$DeadLetterQueue/messages/$resubmit.", broker.Clip(entityPath)))
		return
	}
	n, err := s.store.Resubmit(r.Context(), e, seq, match)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.CountResult{Count: n})
}

// compileResubmitFilter compiles a SQL filter that picks the dead letters to resubmit. A message
// the filter cannot evaluate (it names a property the message lacks in a way the language calls
// an error) is not resubmitted.
func compileResubmitFilter(expr string) (func(*broker.Message) bool, error) {
	f, err := sqlfilter.ParseFilter(expr, nil)
	if err != nil {
		return nil, broker.BadRequest("The filter is not a valid SQL filter expression: %s", err.Error())
	}
	return func(m *broker.Message) bool {
		ok, err := f.Match(broker.FilterView(m))
		return err == nil && ok
	}, nil
}
