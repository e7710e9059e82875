package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/store"
)

// batchOverheadFactor allows for JSON escaping and framing when a batch body is read: the
// stored size is checked exactly after parsing.
const (
	batchOverheadFactor = 2
	batchOverheadBytes  = 64 * 1024
	// headerPropertiesSlack is room for the broker and user properties counted in a message's size.
	headerPropertiesSlack = 64 * 1024
)

// messagingEntity resolves the entity of a data-plane request: a queue or subscription, or its
// dead-letter subqueue.
func (s *Server) messagingEntity(r *http.Request, entityPath string) (*store.Entity, store.SubQueue, error) {
	path, sq, _ := splitSubQueue(entityPath)
	e, err := s.store.Resolve(r.Context(), path)
	if err != nil {
		return nil, 0, err
	}
	return e, sq, nil
}

// SendMessage stores one message, or a JSON batch, in a queue.
func (s *Server) SendMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.SendMessageParams) {
	e, sq, err := s.messagingEntity(r, entityPath)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if sq != store.SubQueueMain {
		s.writeError(w, r, badRequest("Messages cannot be sent to a dead-letter queue."))
		return
	}
	limit := e.Props.MaxMessageSizeInKilobytes * 1024
	batch := isBatchContentType(r.Header.Get("Content-Type"))
	readLimit := limit + headerPropertiesSlack
	if batch {
		readLimit = limit*batchOverheadFactor + batchOverheadBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, readLimit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		s.writeError(w, r, &store.Error{Code: store.CodeTooLarge, Message: fmt.Sprintf(
			"The message exceeds the limit of %d bytes allowed on entity '%s'.", limit, e.Path)})
		return
	}
	if err != nil {
		s.writeError(w, r, badRequest("The request body could not be read."))
		return
	}
	var msgs []store.Message
	if batch {
		msgs, err = parseBatch(body, fromTrustedProxy(r))
	} else {
		var m store.Message
		m, err = parseSingle(r, body)
		msgs = []store.Message{m}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.store.Send(r.Context(), e, msgs); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
}

// isBatchContentType recognises the batch media type, including the old documentation's ".yml"
// typo and any other vnd.microsoft.servicebus JSON variant.
func isBatchContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "application/vnd.microsoft.servicebus.")
}

func parseSingle(r *http.Request, body []byte) (store.Message, error) {
	m := store.Message{Body: body, ContentType: r.Header.Get("Content-Type")}
	if err := parseBrokerProperties([]byte(r.Header.Get("BrokerProperties")), &m, false); err != nil {
		return m, err
	}
	props, err := userPropertiesFromHeaders(r.Header, fromTrustedProxy(r))
	if err != nil {
		return m, err
	}
	m.UserProperties = props
	return m, nil
}

// batchMessage is one element of a batch send.
type batchMessage struct {
	Body       *string `json:"Body"`
	BodyBase64 []byte  `json:"BodyBase64"` // extension: a binary body

	BrokerProperties json.RawMessage            `json:"BrokerProperties"`
	UserProperties   map[string]json.RawMessage `json:"UserProperties"`
}

// maxBatchMessages bounds the work one request can ask for.
const maxBatchMessages = 4500

func parseBatch(body []byte, fromProxy bool) ([]store.Message, error) {
	var items []batchMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&items); err != nil || !atEOF(dec) {
		return nil, badRequest("The batch is not a JSON array of messages.")
	}
	if len(items) == 0 {
		return nil, badRequest("The batch contains no messages.")
	}
	if len(items) > maxBatchMessages {
		return nil, badRequest("A batch may contain at most %d messages.", maxBatchMessages)
	}
	msgs := make([]store.Message, len(items))
	for i, it := range items {
		m := &msgs[i]
		switch {
		case it.Body != nil && it.BodyBase64 != nil:
			return nil, badRequest("Message %d of the batch has both Body and BodyBase64.", i+1)
		case it.Body != nil:
			m.Body = []byte(*it.Body)
		case it.BodyBase64 != nil:
			m.Body = it.BodyBase64
		default:
			return nil, badRequest("Message %d of the batch has no Body.", i+1)
		}
		if len(it.BrokerProperties) > 0 && string(it.BrokerProperties) != "null" {
			if err := parseBrokerProperties(it.BrokerProperties, m, true); err != nil {
				// The client-safe message is all a client sees, so the position goes into it.
				return nil, badRequest("Message %d of the batch: %s", i+1, store.ErrorMessage(err))
			}
		}
		// Each property comes back as a header, and header names ignore case: two names that
		// differ only in case would be one header given twice.
		seen := make(map[string]string, len(it.UserProperties))
		for name := range it.UserProperties {
			lower := strings.ToLower(name)
			if other, dup := seen[lower]; dup {
				return nil, badRequest("Message %d of the batch: the user properties '%s' and '%s' differ only in case; they would be one HTTP header.",
					i+1, truncate(min(name, other)), truncate(max(name, other)))
			}
			seen[lower] = name
		}
		for name, raw := range it.UserProperties {
			if !validPropertyName(name, fromProxy) {
				return nil, badRequest("Message %d of the batch: '%s' cannot be a user property name.", i+1, truncate(name))
			}
			v, err := jsonPropertyValue(raw)
			if err != nil {
				return nil, badRequest("Message %d of the batch: user property '%s' must be a string, number or boolean.", i+1, truncate(name))
			}
			if s, ok := v.(string); ok && !headerSafe(s) {
				return nil, badRequest("Message %d of the batch: user property '%s' contains control characters, which cannot be sent in an HTTP header.", i+1, truncate(name))
			}
			m.UserProperties = append(m.UserProperties, store.Property{Name: name, Value: v})
		}
	}
	return msgs, nil
}

// jsonPropertyValue types a batch user property: strings stay strings, integers are int64,
// other numbers double, booleans bool.
func jsonPropertyValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case string, bool:
		return x, nil
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		f, err := x.Float64()
		return f, err
	}
	return nil, fmt.Errorf("unsupported value")
}

// PeekLockMessage locks and returns the next message.
func (s *Server) PeekLockMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.PeekLockMessageParams) {
	s.receive(w, r, target{path: entityPath}, params.Timeout, store.PeekLock)
}

// ReceiveAndDeleteMessage removes and returns the next message.
func (s *Server) ReceiveAndDeleteMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.ReceiveAndDeleteMessageParams) {
	s.receive(w, r, target{path: entityPath}, params.Timeout, store.ReceiveAndDelete)
}

// target is where a data-plane operation acts: an entity path (possibly ending in
// $DeadLetterQueue) and, inside an accepted session, the session lock.
type target struct {
	path    string
	session *store.SessionLock
}

// base is the escaped URL path under which the target's messages are settled.
func (t target) base() string {
	b := escapePath(t.path)
	if t.session != nil {
		b += "/sessions/" + url.PathEscape(t.session.SessionID) + "/" + t.session.Token.String()
	}
	return b
}

// resolve finds the store target of t: its entity (a session lives in the entity proper), the
// subqueue, and the session lock.
func (s *Server) resolve(r *http.Request, t target) (store.Target, error) {
	if t.session != nil {
		e, err := s.sessionEntity(r, t.path)
		return store.Target{Entity: e, Session: t.session}, err
	}
	e, sq, err := s.messagingEntity(r, t.path)
	return store.Target{Entity: e, SubQueue: sq}, err
}

func (s *Server) receive(w http.ResponseWriter, r *http.Request, t target, timeout *int, mode store.ReceiveMode) {
	wait, err := s.receiveWait(timeout)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.resolve(r, t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	msgs, err := s.store.Receive(r.Context(), store.ReceiveRequest{Target: st, Mode: mode, Max: 1, Wait: wait})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(msgs) == 0 {
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	m := msgs[0]
	status := http.StatusOK
	if mode == store.PeekLock {
		status = http.StatusCreated
		w.Header().Set("Location", s.lockLocation(r, t, m))
	}
	s.writeMessage(w, status, m)
}

// receiveWait is how long a receive waits: the timeout asked for (seconds), capped by the
// configured maximum; the default when none is given. A negative timeout is a bad request.
func (s *Server) receiveWait(timeout *int) (time.Duration, error) {
	switch {
	case timeout == nil:
		return min(s.cfg.DefaultReceiveWait, s.cfg.MaxReceiveWait), nil
	case *timeout < 0:
		return 0, badRequest("The timeout must be a number of seconds, 0 or more.")
	case time.Duration(*timeout) > s.cfg.MaxReceiveWait/time.Second:
		return s.cfg.MaxReceiveWait, nil // compared in seconds: a huge timeout must not overflow to a negative wait
	}
	return time.Duration(*timeout) * time.Second, nil
}

// lockLocation is the settlement URL of a locked message, built from the request's own scheme and
// Host header, or what a trusted proxy says they were (clients derive the settlement path from
// it).
func (s *Server) lockLocation(r *http.Request, t target, m *store.Message) string {
	return requestScheme(r) + "://" + r.Host + "/" + t.base() + "/messages/" +
		strconv.FormatInt(m.SequenceNumber, 10) + "/" + m.LockToken.String()
}

// writeMessage writes a received message: its body, BrokerProperties and one header per user
// property, and nothing else. The body is sent chunked, as the service does, because azure-sb
// reads every unknown response header (Content-Length included) as a user property. Asking for
// chunking in the header (rather than flushing the headers first) lets net/http send the whole
// answer in one write.
func (s *Server) writeMessage(w http.ResponseWriter, status int, m *store.Message) {
	h := w.Header()
	if m.ContentType != "" {
		h.Set("Content-Type", m.ContentType)
	} else {
		h["Content-Type"] = nil // no sniffed type: the sender gave none
	}
	h["BrokerProperties"] = []string{string(formatBrokerProperties(m, s.now()))}
	for _, p := range m.UserProperties {
		name := p.Name
		if strings.EqualFold(name, "date") {
			name = "Date" // in the server's own spelling, so that it is not sent a second time
		}
		h[name] = []string{formatPropertyValue(p.Value)}
	}
	if m.DeadLetterReason != "" {
		h["DeadLetterReason"] = []string{formatPropertyValue(m.DeadLetterReason)}
	}
	if m.DeadLetterDescription != "" {
		h["DeadLetterErrorDescription"] = []string{formatPropertyValue(m.DeadLetterDescription)}
	}
	h["Transfer-Encoding"] = []string{"chunked"}
	w.WriteHeader(status)
	_, _ = w.Write(m.Body)
}

// CompleteMessage deletes a locked message.
func (s *Server) CompleteMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.CompleteMessageParams) {
	s.settle(w, r, target{path: entityPath}, store.Complete, messageID, lockToken)
}

// UnlockMessage abandons a lock.
func (s *Server) UnlockMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.UnlockMessageParams) {
	s.settle(w, r, target{path: entityPath}, store.Abandon, messageID, lockToken)
}

// RenewLock extends a lock.
func (s *Server) RenewLock(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.RenewLockParams) {
	s.settle(w, r, target{path: entityPath}, store.RenewLock, messageID, lockToken)
}

func (s *Server) settle(w http.ResponseWriter, r *http.Request, t target, op store.Settlement, messageID string, token uuid.UUID) {
	s.settleOne(w, r, t, store.SettleRequest{Op: op, ID: messageID, Token: token})
}

// settleOne settles one lock and answers 200, with the new lock expiry for a renewal.
func (s *Server) settleOne(w http.ResponseWriter, r *http.Request, t target, req store.SettleRequest) {
	st, err := s.resolve(r, t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res := s.store.Settle(r.Context(), st, []store.SettleRequest{req})[0]
	if res.Err != nil {
		s.writeError(w, r, res.Err)
		return
	}
	if req.Op == store.RenewLock {
		bp, _ := json.Marshal(map[string]string{"LockToken": req.Token.String(), "LockedUntilUtc": res.LockedUntil.Format(rfc1123)})
		w.Header()["BrokerProperties"] = []string{string(bp)}
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}
