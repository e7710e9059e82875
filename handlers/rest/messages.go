package rest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/broker"
)

// batchOverheadFactor allows for JSON escaping and framing when a batch body is read; what counts
// is the decoded size, checked message by message while the batch is read.
const (
	batchOverheadFactor = 2
	batchOverheadBytes  = 64 * 1024
)

// messagingEntity resolves the entity of a data-plane request: a queue or subscription, or its
// dead-letter subqueue.
func (s *Server) messagingEntity(r *http.Request, entityPath string) (*broker.Entity, broker.SubQueue, error) {
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
	if sq != broker.SubQueueMain {
		s.writeError(w, r, broker.BadRequest("Messages cannot be sent to a dead-letter queue."))
		return
	}
	limit := e.Props.MaxMessageSizeInKilobytes * 1024
	batch := isBatchContentType(r.Header.Get("Content-Type"))
	var msgs []broker.Message
	if batch {
		msgs, err = s.readBatch(w, r, e, limit)
	} else {
		var body []byte
		if body, err = s.readBody(w, r, e, limit); err == nil {
			var m broker.Message
			m, err = parseSingle(r, body)
			msgs = []broker.Message{m}
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for i := range msgs {
		if err := CheckDeliverable(&msgs[i]); err != nil {
			if batch {
				err = broker.BadRequest("Message %d of the batch: %s", i+1, broker.ErrorMessage(err))
			}
			s.writeError(w, r, err)
			return
		}
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

func parseSingle(r *http.Request, body []byte) (broker.Message, error) {
	m := broker.Message{Body: body, ContentType: r.Header.Get("Content-Type")}
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

// maxBatchMessages bounds the work one request can ask for.
const maxBatchMessages = 4500

// tooLarge is the error for a message or batch over the entity's limit.
func tooLarge(e *broker.Entity, limit int64) error {
	return &broker.Error{Code: broker.CodeTooLarge, Message: fmt.Sprintf(
		"The message exceeds the limit of %d bytes allowed on entity '%s'.", limit, e.Path)}
}

// readError is the answer to a body that could not be read: too large, too slow, or cut off.
func (s *Server) readError(e *broker.Entity, limit int64, err error) error {
	var big *http.MaxBytesError
	switch {
	case errors.As(err, &big):
		return tooLarge(e, limit)
	case bodyTimedOut(err):
		return broker.BadRequest("The request body did not arrive within %s.", s.cfg.BodyTimeout)
	}
	return broker.BadRequest("The request body could not be read.")
}

// readBody reads a single message's body, never past the entity's limit: a declared length over
// it is refused before anything is read, and an undeclared one is cut off at the limit. The
// buffer is allocated once at the declared length, not grown by doubling.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, e *broker.Entity, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &broker.Error{Code: broker.CodeTooLarge, Message: fmt.Sprintf(
			"The message body (%d bytes) exceeds the limit of %d bytes allowed on entity '%s'.", r.ContentLength, limit, e.Path)}
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength >= 0 {
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, s.readError(e, limit, err)
		}
		return body, nil
	}
	body, err := io.ReadAll(rd)
	if err != nil {
		return nil, s.readError(e, limit, err)
	}
	return body, nil
}

// readBatch reads a JSON batch message by message from the body, so that its size is checked
// while it is read: a batch over the entity's limit is refused as soon as the messages read so
// far exceed it, and never held whole in memory beside its decoded messages.
func (s *Server) readBatch(w http.ResponseWriter, r *http.Request, e *broker.Entity, limit int64) ([]broker.Message, error) {
	readLimit := limit*batchOverheadFactor + batchOverheadBytes
	if r.ContentLength > readLimit {
		return nil, tooLarge(e, limit)
	}
	rd := &errorReader{r: http.MaxBytesReader(w, r.Body, readLimit)}
	msgs, err := decodeBatch(rd, limit, fromTrustedProxy(r))
	if rd.err != nil && !errors.Is(rd.err, io.EOF) {
		return nil, s.readError(e, limit, rd.err)
	}
	if errors.Is(err, errBatchTooLarge) {
		return nil, tooLarge(e, limit)
	}
	return msgs, err
}

// errorReader remembers the first error its reader returned, so that a read failure is told
// apart from bad JSON.
type errorReader struct {
	r   io.Reader
	err error
}

func (r *errorReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

var errBatchTooLarge = errors.New("batch too large")

// parseBatch decodes a whole JSON batch held in memory.
func parseBatch(body []byte, fromProxy bool) ([]broker.Message, error) {
	return decodeBatch(bytes.NewReader(body), math.MaxInt64, fromProxy)
}

// decodeBatch decodes a JSON array of messages from rd, one element at a time. It returns
// errBatchTooLarge as soon as the bodies read exceed limit (the store checks the exact size,
// properties included).
//
// It reads the array with jsontext, the tokenizer of Go's encoding/json/v2, and reads each
// element exactly as encoding/json would decode it into an api.BatchMessage (names matched
// without regard to case, the last of a name given twice kept, invalid UTF-8 read as U+FFFD;
// FuzzDecodeBatchAsEncodingJSON holds the two to the same messages or the same refusal). Two
// refusals are worded differently at the edges, both a 400: 4,500 elements followed by broken
// JSON (encoding/json named the limit), and an ignored value nested exactly 10,000 deep (jsontext
// counts the array around the element). encoding/json's Decoder
// scanned each 1 KB body twice, once to find the element's end and once to decode it: a third
// of the gateway's CPU in a send-batch profile.
func decodeBatch(rd io.Reader, limit int64, fromProxy bool) ([]broker.Message, error) {
	dec := jsontext.NewDecoder(rd, batchJSONOptions...)
	notArray := broker.BadRequest("The batch is not a JSON array of messages.")
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, notArray
	}
	var msgs []broker.Message
	var total int64
	for i := 0; ; i++ {
		switch dec.PeekKind() {
		case ']':
		case 0: // not JSON, or the end of the input
			return nil, notArray
		default:
			if i == maxBatchMessages {
				return nil, broker.BadRequest("A batch may contain at most %d messages.", maxBatchMessages)
			}
			it, body, err := readBatchMessage(dec)
			if err != nil {
				return nil, notArray
			}
			m, err := batchItem(i, it, body, fromProxy)
			if err != nil {
				return nil, err
			}
			if total += int64(len(m.Body)); total > limit {
				return nil, errBatchTooLarge
			}
			msgs = append(msgs, m)
			continue
		}
		break
	}
	if _, err := dec.ReadToken(); err != nil { // the ']'
		return nil, notArray
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, notArray
	}
	if len(msgs) == 0 {
		return nil, broker.BadRequest("The batch contains no messages.")
	}
	return msgs, nil
}

// batchJSONOptions read JSON as encoding/json does: invalid UTF-8 in a string becomes U+FFFD, and
// a name given twice in an object is allowed (the last one counts).
var batchJSONOptions = []jsontext.Options{jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true)}

// readBatchMessage reads one element of a batch as encoding/json decodes it into an
// api.BatchMessage. A string Body or BodyBase64 (the bulk of a batch) is read here; any other
// value of a known name goes through encoding/json, so that whatever it accepts or refuses
// there stays so. A string Body comes back as body, its bytes, with it.Body set but empty.
func readBatchMessage(dec *jsontext.Decoder) (it api.BatchMessage, body []byte, err error) {
	switch dec.PeekKind() {
	case 'n': // null decodes to nothing
		_, err := dec.ReadToken()
		return it, nil, err
	case '{':
	default:
		return it, nil, errors.New("not an object")
	}
	if _, err := dec.ReadToken(); err != nil {
		return it, nil, err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return it, nil, err
		}
		n := tok.String() // before the next read, which reuses the token's buffer
		v, err := dec.ReadValue()
		if err != nil {
			return it, nil, err
		}
		switch {
		case strings.EqualFold(n, "Body"):
			if v.Kind() == '"' {
				// Valid JSON: AppendUnquote can only report invalid UTF-8, which it reads as U+FFFD.
				body, _ = jsontext.AppendUnquote(make([]byte, 0, len(v)), v)
				it.Body = new(string)
				continue
			}
			body = nil
			err = json.Unmarshal(v, &it.Body)
		case strings.EqualFold(n, "BodyBase64"):
			if v.Kind() == '"' {
				text, _ := jsontext.AppendUnquote(make([]byte, 0, len(v)), v)
				b := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
				k, err := base64.StdEncoding.Decode(b, text)
				if err != nil {
					return it, nil, err
				}
				b = b[:k]
				it.BodyBase64 = &b
				continue
			}
			err = json.Unmarshal(v, &it.BodyBase64)
		case strings.EqualFold(n, "BrokerProperties"):
			err = json.Unmarshal(v, &it.BrokerProperties)
		case strings.EqualFold(n, "UserProperties"):
			// User property values are the only untyped values of a batch element: as
			// json.Number an integer stays apart from a double (jsonPropertyValue).
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			err = d.Decode(&it.UserProperties)
		}
		if err != nil {
			return it, nil, err
		}
	}
	_, err = dec.ReadToken() // the '}'
	return it, body, err
}

// batchItem turns element i of a batch into a message. body, when not nil, is it.Body already
// as bytes (readBatchMessage).
func batchItem(i int, it api.BatchMessage, body []byte, fromProxy bool) (broker.Message, error) {
	var m broker.Message
	switch {
	case it.Body != nil && it.BodyBase64 != nil:
		return m, broker.BadRequest("Message %d of the batch has both Body and BodyBase64.", i+1)
	case body != nil:
		m.Body = body
	case it.Body != nil:
		m.Body = []byte(*it.Body)
	case it.BodyBase64 != nil:
		m.Body = *it.BodyBase64
	default:
		return m, broker.BadRequest("Message %d of the batch has no Body.", i+1)
	}
	if len(it.BrokerProperties) > 0 && string(it.BrokerProperties) != "null" {
		if err := parseBrokerProperties(it.BrokerProperties, &m, true); err != nil {
			// The client-safe message is all a client sees, so the position goes into it.
			return m, broker.BadRequest("Message %d of the batch: %s", i+1, broker.ErrorMessage(err))
		}
	}
	// Each property comes back as a header, and header names ignore case: two names that
	// differ only in case would be one header given twice. The names are taken in order, so
	// that a refusal names the same ones every time.
	var props map[string]any
	if it.UserProperties != nil {
		props = *it.UserProperties
	}
	names := slices.Sorted(maps.Keys(props))
	seen := make(map[string]string, len(props))
	for _, name := range names {
		lower := strings.ToLower(name)
		if other, dup := seen[lower]; dup {
			return m, broker.BadRequest("Message %d of the batch: the user properties '%s' and '%s' differ only in case; they would be one HTTP header.",
				i+1, broker.Clip(min(name, other)), broker.Clip(max(name, other)))
		}
		seen[lower] = name
	}
	for _, name := range names {
		value := props[name]
		if !validPropertyName(name, fromProxy) {
			return m, broker.BadRequest("Message %d of the batch: '%s' cannot be a user property name.", i+1, broker.Clip(name))
		}
		v, err := jsonPropertyValue(value)
		if err != nil {
			return m, broker.BadRequest("Message %d of the batch: user property '%s' must be a string, number or boolean.", i+1, broker.Clip(name))
		}
		if s, ok := v.(string); ok && !headerSafe(s) {
			return m, broker.BadRequest("Message %d of the batch: user property '%s' contains control characters, which cannot be sent in an HTTP header.", i+1, broker.Clip(name))
		}
		m.UserProperties = append(m.UserProperties, broker.Property{Name: name, Value: v})
	}
	return m, nil
}

// jsonPropertyValue types a batch user property, decoded with json.Decoder.UseNumber: strings
// stay strings, integers are int64, other numbers double, booleans bool.
func jsonPropertyValue(v any) (any, error) {
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
	s.receive(w, r, target{path: entityPath}, params.Timeout, broker.PeekLock)
}

// ReceiveAndDeleteMessage removes and returns the next message.
func (s *Server) ReceiveAndDeleteMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.ReceiveAndDeleteMessageParams) {
	s.receive(w, r, target{path: entityPath}, params.Timeout, broker.ReceiveAndDelete)
}

// target is where a data-plane operation acts: an entity path (possibly ending in
// $DeadLetterQueue) and, inside an accepted session, the session lock.
type target struct {
	path    string
	session *broker.SessionLock
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
func (s *Server) resolve(r *http.Request, t target) (broker.Target, error) {
	if t.session != nil {
		e, err := s.sessionEntity(r, t.path)
		return broker.Target{Entity: e, Session: t.session}, err
	}
	e, sq, err := s.messagingEntity(r, t.path)
	return broker.Target{Entity: e, SubQueue: sq}, err
}

func (s *Server) receive(w http.ResponseWriter, r *http.Request, t target, timeout *int, mode broker.ReceiveMode) {
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
	wctx, end := s.waitContext(r.Context())
	defer end()
	msgs, err := s.store.Receive(wctx, broker.ReceiveRequest{Target: st, Mode: mode, Max: 1, Wait: wait})
	if drained(r.Context(), wctx, err) {
		msgs, err = nil, nil
	}
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
	if mode == broker.PeekLock {
		status = http.StatusCreated
		w.Header().Set("Location", s.lockLocation(r, t, m))
	}
	s.handOut(r, st, mode, msgs, func() error { return s.writeMessage(w, status, m) })
}

// receiveWait is how long a receive waits: the timeout asked for (seconds), capped by the
// configured maximum; the default when none is given. A negative timeout is a bad request.
func (s *Server) receiveWait(timeout *int) (time.Duration, error) {
	switch {
	case timeout == nil:
		return min(s.cfg.DefaultReceiveWait, s.cfg.MaxReceiveWait), nil
	case *timeout < 0:
		return 0, broker.BadRequest("The timeout must be a number of seconds, 0 or more.")
	case time.Duration(*timeout) > s.cfg.MaxReceiveWait/time.Second:
		return s.cfg.MaxReceiveWait, nil // compared in seconds: a huge timeout must not overflow to a negative wait
	}
	return time.Duration(*timeout) * time.Second, nil
}

// lockLocation is the settlement URL of a locked message, built from the request's own scheme and
// Host header, or what a trusted proxy says they were (clients derive the settlement path from
// it).
func (s *Server) lockLocation(r *http.Request, t target, m *broker.Message) string {
	return requestScheme(r) + "://" + r.Host + "/" + t.base() + "/messages/" +
		strconv.FormatInt(m.SequenceNumber, 10) + "/" + m.LockToken.String()
}

// writeMessage writes a received message: its body, BrokerProperties and one header per user
// property, and nothing else. The body is sent chunked, as the service does, because azure-sb
// reads every unknown response header (Content-Length included) as a user property. Asking for
// chunking in the header (rather than flushing the headers first) lets net/http send the whole
// answer in one write.
func (s *Server) writeMessage(w http.ResponseWriter, status int, m *broker.Message) error {
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
	h["Transfer-Encoding"] = chunked
	w.WriteHeader(status)
	_, err := w.Write(restBody(m))
	return err
}

// chunked is the Transfer-Encoding of a received message, one slice for all (net/http only reads
// it).
var chunked = []string{"chunked"}

// CompleteMessage deletes a locked message.
func (s *Server) CompleteMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.CompleteMessageParams) {
	s.settle(w, r, target{path: entityPath}, broker.Complete, messageID, lockToken)
}

// UnlockMessage abandons a lock.
func (s *Server) UnlockMessage(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.UnlockMessageParams) {
	s.settle(w, r, target{path: entityPath}, broker.Abandon, messageID, lockToken)
}

// RenewLock extends a lock.
func (s *Server) RenewLock(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, messageID string, lockToken openapi_types.UUID, params api.RenewLockParams) {
	s.settle(w, r, target{path: entityPath}, broker.RenewLock, messageID, lockToken)
}

func (s *Server) settle(w http.ResponseWriter, r *http.Request, t target, op broker.Settlement, messageID string, token uuid.UUID) {
	s.settleOne(w, r, t, broker.SettleRequest{Op: op, ID: messageID, Token: token})
}

// settleOne settles one lock and answers 200, with the new lock expiry for a renewal.
func (s *Server) settleOne(w http.ResponseWriter, r *http.Request, t target, req broker.SettleRequest) {
	st, err := s.resolve(r, t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res := s.store.Settle(r.Context(), st, []broker.SettleRequest{req})[0]
	if res.Err != nil {
		s.writeError(w, r, res.Err)
		return
	}
	if req.Op == broker.RenewLock {
		until := res.LockedUntil.Format(rfc1123)
		bp, _ := json.Marshal(api.BrokerProperties{LockToken: &req.Token, LockedUntilUtc: &until})
		w.Header()["BrokerProperties"] = []string{string(bp)}
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}
