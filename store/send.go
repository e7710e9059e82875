package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/engine"
)

// Send stores msgs in e, all or none. See Store.
func (s *Postgres) Send(ctx context.Context, e *broker.Entity, msgs []broker.Message) error {
	_, err := s.send(ctx, e, msgs, false)
	return err
}

// SendSequenced is Send that also returns the number that cancels each message. See Store.
func (s *Postgres) SendSequenced(ctx context.Context, e *broker.Entity, msgs []broker.Message) ([]int64, error) {
	return s.send(ctx, e, msgs, true)
}

// send stores msgs in e; with numbered it returns the numbers SendSequenced promises (a topic's
// copies, and messages forwarded on, then share one drawn for them), else sequence numbers in e
// only (0 for those stored elsewhere).
func (s *Postgres) send(ctx context.Context, e *broker.Entity, msgs []broker.Message, numbered bool) ([]int64, error) {
	d, total, err := s.prepareSendNumbered(ctx, e, msgs, numbered)
	if err != nil {
		return nil, err
	}
	req := &sendRequest{rows: d.rows, woken: d.wakeTargets()}
	if err := s.batcher.Submit(ctx, req); err != nil {
		return nil, err
	}
	s.grew(e.ID, int64(total))
	s.touch(e)
	// Message i's rows start at d.starts[i]; its sequence number in e is that of its first row
	// there. A message with no row in e (sent to a topic, whose copies are in its subscriptions,
	// or forwarded on) has the number its copies share as their EnqueuedSequenceNumber, drawn
	// with the insert, by which CancelScheduled finds them all; a duplicate, not stored, has 0.
	seqs := make([]int64, len(msgs))
	var elsewhere []int // the first row of each message stored only elsewhere
	for i, start := range d.starts {
		end := len(d.rows)
		if i+1 < len(d.starts) {
			end = d.starts[i+1]
		}
		first := -1
		for k := start; k < end; k++ {
			if req.seqs[k] == 0 {
				continue
			}
			if d.rows[k].EntityID == e.ID {
				seqs[i], first = req.seqs[k], -1
				break
			}
			if first < 0 {
				first = k
			}
		}
		if first >= 0 {
			elsewhere = append(elsewhere, i, first)
		}
	}
	if numbered && len(elsewhere) > 0 {
		if err := s.originNumbers(ctx, d.rows, req.seqs, elsewhere, seqs); err != nil {
			return nil, err
		}
	}
	return seqs, nil
}

// originNumbers sets seqs[i] to the EnqueuedSequenceNumber of row k of rows (stored with
// sequence number stored[k]), for each pair i, k of pairs.
func (s *Postgres) originNumbers(ctx context.Context, rows []messageRow, stored []int64, pairs []int, seqs []int64) error {
	entities, nums := make([]int64, 0, len(pairs)/2), make([]int64, 0, len(pairs)/2)
	for j := 0; j < len(pairs); j += 2 {
		k := pairs[j+1]
		entities, nums = append(entities, rows[k].EntityID), append(nums, stored[k])
	}
	var found []int64
	err := s.pool.QueryRow(ctx, readOriginNumbers.sql, entities, nums).Scan(&found)
	if err != nil {
		return fmt.Errorf("read the sequence numbers of messages sent on: %w", interpretError(err))
	}
	for j := 0; j < len(pairs); j += 2 {
		seqs[pairs[j]] = found[j/2] // 0 when the copy is gone already (its time had come)
	}
	return nil
}

// prepareSend checks msgs against every rule of e and returns the rows that store them (with
// topic copies and forwarding resolved) and their total size; the caller writes the rows. The
// SQL-send relay writes them in its own transaction (relay.go).
func (s *Postgres) prepareSend(ctx context.Context, e *broker.Entity, msgs []broker.Message) (*delivery, int, error) {
	return s.prepareSendNumbered(ctx, e, msgs, false)
}

// prepareSendNumbered is prepareSend; with numbered, a message that has no row in e (a topic's
// copies, a message forwarded on) gets a number its copies share as their
// EnqueuedSequenceNumber, so that it can be cancelled by it (SendSequenced, CancelScheduled).
func (s *Postgres) prepareSendNumbered(ctx context.Context, e *broker.Entity, msgs []broker.Message, numbered bool) (*delivery, int, error) {
	if len(msgs) == 0 {
		return nil, 0, broker.BadRequest("The batch contains no messages.")
	}
	if err := checkSendable(e); err != nil {
		return nil, 0, err
	}
	now := s.now()
	total := 0
	// Each message's properties are checked and encoded once; its row reuses the encoding.
	encoded := make(map[*broker.Message][]byte, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if err := prepareMessage(e, m, now); err != nil {
			if len(msgs) > 1 {
				return nil, 0, &broker.Error{Code: broker.ErrorCode(err), Message: fmt.Sprintf("Message %d of the batch: %s", i+1, broker.ErrorMessage(err))}
			}
			return nil, 0, err
		}
		props, err := broker.EncodeUserProperties(m.UserProperties)
		if err != nil {
			if len(msgs) > 1 {
				return nil, 0, &broker.Error{Code: broker.ErrorCode(err), Message: fmt.Sprintf("Message %d of the batch: %s", i+1, broker.ErrorMessage(err))}
			}
			return nil, 0, err
		}
		encoded[m] = props
		total += broker.MessageSize(m, len(props))
	}
	if limit := e.Props.MaxMessageSizeInKilobytes * 1024; int64(total) > limit {
		return nil, 0, &broker.Error{Code: broker.CodeTooLarge, Message: fmt.Sprintf(
			"The message (size %d bytes) exceeds the limit of %d bytes allowed on entity '%s'.", total, limit, e.Path)}
	}
	if e.Kind == broker.KindQueue {
		if err := s.checkQuota(ctx, e, int64(total)); err != nil {
			return nil, 0, err
		}
	}
	d := s.newDelivery(ctx, now)
	d.encoded = encoded
	if numbered {
		d.numberedIn = e.ID
	}
	d.starts = make([]int, len(msgs))
	for i := range msgs {
		d.begin(e)
		d.starts[i] = len(d.rows)
		if err := d.deliver(e, &msgs[i], e, 0); err != nil {
			return nil, 0, err
		}
	}
	return d, total, nil
}

// checkSendable refuses sends the entity does not take.
func checkSendable(e *broker.Entity) error {
	switch {
	case e.Kind == broker.KindSubscription:
		return broker.BadRequest("Messages cannot be sent to subscription '%s'; send them to its topic.", e.Path)
	case e.Props.Status == broker.StatusDisabled || e.Props.Status == broker.StatusSendDisabled:
		return &broker.Error{Code: broker.CodeForbidden, Message: fmt.Sprintf(
			"SubCode=40301. The messaging entity '%s' is disabled for sending (status %s).", e.Path, e.Props.Status)}
	}
	return nil
}

// prepareMessage validates the sender-set properties of m and fills the defaults the broker sets.
func prepareMessage(e *broker.Entity, m *broker.Message, now time.Time) error {
	switch {
	case len(m.MessageID) > broker.MaxMessageIDLength:
		return broker.BadRequest("The MessageId is longer than %d characters.", broker.MaxMessageIDLength)
	case len(m.SessionID) > broker.MaxSessionIDLength:
		return broker.BadRequest("The SessionId is longer than %d characters.", broker.MaxSessionIDLength)
	case m.PartitionKey != "" && m.InSession() && m.PartitionKey != m.SessionID:
		return broker.BadRequest("The PartitionKey '%s' must be equal to the SessionId '%s'.", broker.Clip(m.PartitionKey), broker.Clip(m.SessionID))
	case m.TimeToLive < 0:
		return broker.BadRequest("The TimeToLive must be positive.")
	case m.BodyType != broker.BodyData && m.BodyType != broker.BodyAMQP:
		return broker.BadRequest("Unknown body type %d.", m.BodyType)
	case m.BodyType == broker.BodyAMQP && len(m.Body) == 0:
		return broker.BadRequest("An AMQP body holds at least one body section.")
	case len(m.AMQPSections) > broker.MaxAMQPSectionsSize:
		return broker.BadRequest("The message's AMQP header, annotations, properties and footer take %d bytes, more than the %d allowed.",
			len(m.AMQPSections), broker.MaxAMQPSectionsSize)
	case e.Props.RequiresSession && !m.InSession():
		return broker.BadRequest("The SessionId was not set on a message, and it cannot be sent to the entity '%s'. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value.", e.Path)
	}
	for _, f := range []struct{ name, v string }{
		{"MessageId", m.MessageID}, {"CorrelationId", m.CorrelationID}, {"SessionId", m.SessionID},
		{"ReplyToSessionId", m.ReplyToSessionID}, {"Label", m.Label}, {"To", m.To}, {"ReplyTo", m.ReplyTo},
		{"PartitionKey", m.PartitionKey}, {"ViaPartitionKey", m.ViaPartitionKey}, {"ContentType", m.ContentType},
	} {
		if !broker.ValidText(f.v) {
			return broker.BadRequest("The %s is not valid UTF-8 text (or contains a NUL character).", f.name)
		}
	}
	if m.MessageID == "" {
		m.MessageID = newMessageID()
	}
	if m.PartitionKey == "" {
		m.PartitionKey = m.SessionID
	}
	m.TimeToLiveFromSender = m.TimeToLive != 0
	if m.TimeToLive == 0 || m.TimeToLive > e.Props.DefaultMessageTimeToLive {
		m.TimeToLive = e.Props.DefaultMessageTimeToLive
	}
	m.EnqueuedTime = now
	if !m.ScheduledEnqueueTime.IsZero() {
		// Kept as sent, past or future, so that it is returned as sent; only a future one holds
		// the message back, and is its enqueued time (see scheduledVisible).
		m.ScheduledEnqueueTime = m.ScheduledEnqueueTime.UTC().Truncate(time.Microsecond)
		if m.ScheduledEnqueueTime.After(now) {
			m.EnqueuedTime = m.ScheduledEnqueueTime
		}
	}
	m.ExpiresAt = addClamped(m.EnqueuedTime, m.TimeToLive)
	return nil
}

// scheduledVisible is when a message becomes receivable: its scheduled time when that was in the
// future at the send (prepareMessage made it the enqueued time), else the zero time (now).
func scheduledVisible(m *broker.Message) time.Time {
	if m.ScheduledEnqueueTime.IsZero() || m.ScheduledEnqueueTime.Before(m.EnqueuedTime) {
		return time.Time{}
	}
	return m.ScheduledEnqueueTime
}

// newMessageID returns 32 lower-case hex digits, the form the service generates.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// messageRow is one message as the INSERT takes it: the row of the messages table and what
// decides whether and how it is written.
type messageRow struct {
	messageColumns
	// Duplicate detection: the entity whose history the MessageId goes into (the one the client
	// sent to; for a topic, every subscription copy shares the topic's record) and until when.
	// dedupUntil NULL: no detection.
	dedupEntity int64
	dedupUntil  pgtype.Timestamptz
	// msgIndex tells the copies of one sent message apart from a duplicate sent with it.
	msgIndex int
	// sessioned: the entity requires sessions, so the message's session must be acceptable.
	sessioned bool
	// originOf, when not 0, asks for an EnqueuedSequenceNumber to be drawn with the insert,
	// shared by every row of the same sent message (msgIndex): an auto-forwarded message that
	// never had a row where it was sent.
	originOf int64
}

// set makes the zero row r hold m as a row of entity entityID; props is m's encoded user
// properties, or nil with encode set to have them encoded here. Empty text is stored as NULL.
// The row is filled in place: it is large, and sends build one per message.
func (r *messageRow) set(entityID int64, m *broker.Message, props []byte, encode bool) error {
	if encode {
		var err error
		if props, err = broker.EncodeUserProperties(m.UserProperties); err != nil {
			return err
		}
	}
	body := m.Body
	if body == nil {
		body = []byte{} // the column is NOT NULL; a message may have no body
	}
	r.EntityID = entityID
	r.State = m.State
	r.VisibleAt = timestamptz(scheduledVisible(m))
	r.EnqueuedAt = m.EnqueuedTime
	r.ExpiresAt = timestamptz(m.ExpiresAt)
	r.TTL = interval(m.TimeToLive)
	r.ScheduledAt = timestamptz(m.ScheduledEnqueueTime)
	r.MessageID = m.MessageID
	r.CorrelationID = text(m.CorrelationID)
	r.SessionID = presentText{pgtype.Text{String: m.SessionID, Valid: m.InSession()}}
	r.ReplyToSessionID = text(m.ReplyToSessionID)
	r.Label = text(m.Label)
	r.To = text(m.To)
	r.ReplyTo = text(m.ReplyTo)
	r.PartitionKey = text(m.PartitionKey)
	r.ContentType = text(m.ContentType)
	r.UserProps = props
	r.Body = body
	r.BodyType = m.BodyType
	if len(m.AMQPSections) > 0 {
		r.AMQPSections = m.AMQPSections // else NULL
	}
	r.TTLFromSender = m.TimeToLiveFromSender
	r.Size = int32(broker.MessageSize(m, len(props)))
	r.DeadLetterReason = text(m.DeadLetterReason)
	r.DeadLetterDescription = text(m.DeadLetterDescription)
	r.DeadLetterSource = text(m.DeadLetterSource)
	r.ViaPartitionKey = text(m.ViaPartitionKey)
	r.EnqueuedSeq = pgtype.Int8{Int64: m.EnqueuedSequenceNumber, Valid: m.EnqueuedSequenceNumber != 0}
	if m.State == broker.StateDeadLetter {
		r.VisibleAt = pgtype.Timestamptz{} // a dead letter is receivable at once, whatever its schedule
	}
	return nil
}

// text is s as a nullable text column: "" is NULL.
func text(s string) pgtype.Text {
	return pgtype.Text{String: s, Valid: s != ""}
}

// insertArgPositions gives the place of each argument of insertMessages in its argument list.
type insertArgPositions struct {
	columns                                           []int // of insertColumnNames[i]
	dedupEntity, dedupUntil, sessioned, originOf, now int
	n                                                 int
}

// insertArg gives the place of each argument of insertMessages in its argument list.
var insertArg = insertArgPositionsOf(insertMessages)

// insertArgPositionsOf says which of st's arguments is which: every name must be an input or a
// column, and every input and column must be used.
func insertArgPositionsOf(st statement) insertArgPositions {
	inputs := []string{"dedup_entity", "dedup_until", "sessioned", "origin_of", "now"}
	for _, c := range insertColumnNames {
		if slices.Contains(inputs, c) {
			panic("store: message column " + c + " has the name of an input of the insert")
		}
	}
	at := make(map[string]int, len(st.names))
	for i, name := range st.names {
		at[name] = i
	}
	position := func(name string) int {
		i, ok := at[name]
		if !ok {
			panic("store: message insert does not use @" + name)
		}
		delete(at, name)
		return i
	}
	pos := insertArgPositions{columns: make([]int, len(insertColumnNames)), n: len(st.names),
		dedupEntity: position("dedup_entity"), dedupUntil: position("dedup_until"), sessioned: position("sessioned"),
		originOf: position("origin_of"), now: position("now")}
	for i, c := range insertColumnNames {
		pos.columns[i] = position(c)
	}
	if len(at) > 0 {
		panic(fmt.Sprintf("store: message insert uses %v, neither inputs nor columns", slices.Sorted(maps.Keys(at))))
	}
	return pos
}

// insertRows writes rows in one statement, so in one transaction, and returns the sequence
// number of each row in rows, 0 for one not stored (a duplicate). db is the pool or a
// transaction (onConn).
func (s *Postgres) insertRows(ctx context.Context, db querier, all []messageRow) ([]int64, error) {
	rows, kept := dropDuplicateIDs(all)
	var ords, seqs []int64
	read := 0
	err := onConn(ctx, db, func(c *pgx.Conn) error {
		return queryWire(ctx, c, insertMessages, insertArgs(rows, s.now()), func(r *wireRow) error {
			read++
			return r.scan(&ords, &seqs)
		})
	})
	if err != nil {
		return nil, err
	}
	if read != 1 {
		return nil, fmt.Errorf("store messages: the insert returned %d rows, not one", read)
	}
	if len(ords) != len(seqs) {
		return nil, fmt.Errorf("store messages: %d rows inserted but %d sequence numbers returned", len(ords), len(seqs))
	}
	out := make([]int64, len(all))
	for i, ord := range ords {
		k := int(ord) - 1 // ORDINALITY counts from 1
		if kept != nil {
			k = kept[k]
		}
		out[k] = seqs[i]
	}
	return out, nil
}

// insertArgs are the arguments of insertMessages that write rows: an array per column and
// per input the statement uses to decide.
func insertArgs(rows []messageRow, now time.Time) []any {
	args := make([]any, insertArg.n)
	for i, a := range insertColumnArrays(rows) {
		args[insertArg.columns[i]] = a
	}
	n := len(rows)
	dedupEntity, dedupUntil := make([]int64, n), make(pgtype.FlatArray[pgtype.Timestamptz], n)
	sessioned, originOf := make([]bool, n), make([]int64, n)
	for i := range rows {
		r := &rows[i]
		dedupEntity[i], dedupUntil[i], sessioned[i], originOf[i] = r.dedupEntity, r.dedupUntil, r.sessioned, r.originOf
	}
	args[insertArg.dedupEntity], args[insertArg.dedupUntil] = dedupEntity, dedupUntil
	args[insertArg.sessioned], args[insertArg.originOf] = sessioned, originOf
	args[insertArg.now] = now
	return args
}

// dropDuplicateIDs keeps, for each MessageId sent to an entity that detects duplicates, only the
// rows of the first message that carried it (a topic message has one row per subscription copy):
// one statement may not claim a dedup key twice, and the later messages are duplicates anyway
// (their senders still get their 201, as the service answers). kept holds the index in rows of
// each row returned, nil when all are.
func dropDuplicateIDs(rows []messageRow) (out []messageRow, kept []int) {
	type key struct {
		entity int64
		id     string
	}
	var first map[key]int
	out = rows[:0:0]
	for i, r := range rows {
		if !r.dedupUntil.Valid {
			if first != nil {
				out, kept = append(out, r), append(kept, i)
			}
			continue
		}
		if first == nil {
			first = make(map[key]int)
			out = append(out, rows[:i]...)
			for j := range i {
				kept = append(kept, j)
			}
		}
		k := key{r.dedupEntity, r.MessageID}
		owner, seen := first[k]
		if !seen {
			first[k] = r.msgIndex
			owner = r.msgIndex
		}
		if owner == r.msgIndex {
			out, kept = append(out, r), append(kept, i)
		}
	}
	if first == nil {
		return rows, nil
	}
	return out, kept
}

// sendRequest is one Send call waiting for its group commit; seqs is set, before it is
// answered without error, to its rows' sequence numbers (see insertRows).
type sendRequest struct {
	rows  []messageRow
	woken []wakeTarget
	seqs  []int64
}

// newSendBatcher group-commits concurrent sends: their rows go into one INSERT.
func newSendBatcher(s *Postgres) *engine.Batcher[*sendRequest] {
	return engine.NewBatcher(s.opts.SendWriters, s.opts.MaxBatchRows,
		func(r *sendRequest) int { return len(r.rows) }, s.writeSends)
}

func (s *Postgres) writeSends(jobs []*engine.Job[*sendRequest]) {
	ctx, cancel := context.WithTimeout(context.Background(), engine.WriteTimeout)
	defer cancel()
	n := 0
	for _, j := range jobs {
		n += len(j.Req.rows)
	}
	rows := make([]messageRow, 0, n)
	for _, j := range jobs {
		rows = append(rows, j.Req.rows...)
	}
	// insert writes rows in one statement, again after a deadlock (the duplicate-detection
	// entries are locked in one order, but other writers lock them too).
	insert := func(rows []messageRow) (seqs []int64, err error) {
		err = s.retryConflicts(ctx, nil, func() (err error) {
			seqs, err = s.insertRows(ctx, s.pool, rows)
			return err
		})
		return seqs, interpretError(err)
	}
	seqs, err := insert(rows)
	if err != nil && len(jobs) > 1 && !errors.Is(err, broker.ErrUnavailable) {
		// One request's rows failed the shared statement; write each alone so the others commit.
		for _, j := range jobs {
			var err error
			j.Req.seqs, err = insert(j.Req.rows)
			s.finishSend(j, err)
		}
		return
	}
	for _, j := range jobs {
		if err == nil {
			j.Req.seqs, seqs = seqs[:len(j.Req.rows)], seqs[len(j.Req.rows):]
		}
		s.finishSend(j, err)
	}
}

func (s *Postgres) finishSend(j *engine.Job[*sendRequest], err error) {
	if err == nil {
		s.announce(j.Req.woken...)
	} else {
		err = fmt.Errorf("store messages: %w", err)
	}
	j.Finish(err)
}
