package store

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
)

// messageRecord is a row of the messages table as statements return it. Columns are matched to
// fields by name (pgx.RowToStructByName), and the select lists are built from the db tags
// below, so a column is added or renamed in one place: a statement that returns a column the
// struct lacks, or lacks one it has, fails instead of scanning values into the wrong fields.
// The message insert is built from the same tags (messageColumns).
//
// Tagged insert:"default": the columns a new row takes from the table's defaults, which the
// insert leaves out. Tagged sqltype: the column's SQL type where the Go type does not decide it
// (insertTypes).
type messageRecord struct {
	Seq                   int64              `db:"seq" insert:"default"` // nextval('message_seq')
	State                 broker.State       `db:"state"`
	VisibleAt             pgtype.Timestamptz `db:"visible_at"`
	LockToken             pgtype.UUID        `db:"lock_token" insert:"default"`     // NULL: not locked
	DeliveryCount         int32              `db:"delivery_count" insert:"default"` // 0
	EnqueuedAt            time.Time          `db:"enqueued_at"`
	ExpiresAt             pgtype.Timestamptz `db:"expires_at"`
	TTL                   pgtype.Interval    `db:"ttl"`
	ScheduledAt           pgtype.Timestamptz `db:"scheduled_at"`
	MessageID             string             `db:"message_id"`
	CorrelationID         pgtype.Text        `db:"correlation_id"`
	SessionID             presentText        `db:"session_id"`
	ReplyToSessionID      pgtype.Text        `db:"reply_to_session_id"`
	Label                 pgtype.Text        `db:"label"`
	To                    pgtype.Text        `db:"to_addr"`
	ReplyTo               pgtype.Text        `db:"reply_to"`
	PartitionKey          pgtype.Text        `db:"partition_key"`
	ContentType           pgtype.Text        `db:"content_type"`
	UserProps             []byte             `db:"user_props" sqltype:"jsonb"`
	Body                  []byte             `db:"body"`
	BodyType              broker.BodyType    `db:"body_type"`
	Size                  int32              `db:"size"`
	DeadLetterReason      pgtype.Text        `db:"dead_letter_reason"`
	DeadLetterDescription pgtype.Text        `db:"dead_letter_description"`
	DeadLetterSource      pgtype.Text        `db:"dead_letter_source"`
	ViaPartitionKey       pgtype.Text        `db:"via_partition_key"`
	EnqueuedSeq           pgtype.Int8        `db:"enqueued_seq"`
	AMQPSections          []byte             `db:"amqp_sections"` // NULL: none
	TTLFromSender         bool               `db:"ttl_from_sender"`
}

// presentText is a nullable text column in which "" is a value, not NULL: a session id.
// Embedding pgtype.Text gives it pgtype.Text's scanning and encoding.
type presentText struct{ pgtype.Text }

// messageFields lists the columns of messageRecord, in field order.
var messageFields = dbColumns[messageRecord]()

// messageSelect is the select list of a message row; messageSelectFrom qualifies it with a
// table alias ("m.seq, m.state, …").
var messageSelect = strings.Join(messageFields, ", ")

func messageSelectFrom(alias string) string {
	return alias + "." + strings.Join(messageFields, ", "+alias+".")
}

// messageColumns is a whole row of the messages table: the entity it is in and the message as
// statements return it. insertMessagesSQL writes one from each messageRow: its argument arrays,
// their unnest aliases and the INSERT column list are built from these db tags, so a column is
// added or renamed here and nowhere else in SQL (TestMessageColumnsCoverTable compares them
// with the table).
type messageColumns struct {
	EntityID int64 `db:"entity_id"`
	messageRecord
}

// insertColumn is a column insertMessagesSQL writes: its name, its SQL type, the expression of
// its value in terms of its argument (value, "%s" being the argument), and how the array of
// its values is built from the rows.
type insertColumn struct {
	name, sqlType, value string
	array                func(rows []messageRow) any
}

// insertTypes gives, for each Go type of a messageColumns field, how the insert takes it. The
// arrays are what pgx encodes without reflection and with the fewest allocations per value:
// nullable text and bigint go as plain values, "" and 0 standing for NULL (an empty text
// property of a Message is an unset one, and no sequence number is 0), but for a session id,
// where "" is a session (presentText); State and BodyType go as int16.
var insertTypes = map[reflect.Type]struct {
	sqlType, value string
	array          func(off uintptr) func([]messageRow) any
}{
	reflect.TypeFor[int64]():              {"bigint", "%s", fieldArray[int64]},
	reflect.TypeFor[int32]():              {"integer", "%s", fieldArray[int32]},
	reflect.TypeFor[bool]():               {"boolean", "%s", fieldArray[bool]},
	reflect.TypeFor[string]():             {"text", "%s", fieldArray[string]},
	reflect.TypeFor[[]byte]():             {"bytea", "%s", fieldArray[[]byte]},
	reflect.TypeFor[pgtype.Timestamptz](): {"timestamptz", "%s", fieldArray[pgtype.Timestamptz]},
	reflect.TypeFor[pgtype.Interval]():    {"interval", "%s", fieldArray[pgtype.Interval]},
	reflect.TypeFor[time.Time]():          {"timestamptz", "%s", timeArray},
	reflect.TypeFor[pgtype.Text]():        {"text", "NULLIF(%s, '')", textArray},
	reflect.TypeFor[presentText]():        {"text", "%s", presentTextArray},
	reflect.TypeFor[pgtype.Int8]():        {"bigint", "NULLIF(%s, 0)", int8Array},
	reflect.TypeFor[broker.State]():       {"smallint", "%s", stateArray},
	reflect.TypeFor[broker.BodyType]():    {"smallint", "%s", bodyTypeArray},
}

// field is the T field at offset off of row i's messageColumns. The send path builds the
// insert's arrays for every row of every send, so fields are read by their offset (found once,
// by reflection, in columnsOf, which checks the field is a T) rather than by reflection per
// value.
func field[T any](rows []messageRow, i int, off uintptr) T {
	return *(*T)(unsafe.Add(unsafe.Pointer(&rows[i].messageColumns), off))
}

func fieldArray[T any](off uintptr) func([]messageRow) any {
	return func(rows []messageRow) any {
		a := make(pgtype.FlatArray[T], len(rows))
		for i := range rows {
			a[i] = field[T](rows, i, off)
		}
		return a
	}
}

func timeArray(off uintptr) func([]messageRow) any {
	return func(rows []messageRow) any {
		a := make(pgtype.FlatArray[pgtype.Timestamptz], len(rows))
		for i := range rows {
			a[i] = timestamptz(field[time.Time](rows, i, off)) // a zero time is NULL
		}
		return a
	}
}

func textArray(off uintptr) func([]messageRow) any {
	return func(rows []messageRow) any {
		a := make(pgtype.FlatArray[string], len(rows))
		for i := range rows {
			a[i] = field[pgtype.Text](rows, i, off).String
		}
		return a
	}
}

func presentTextArray(off uintptr) func([]messageRow) any {
	return func(rows []messageRow) any {
		a := make(pgtype.FlatArray[pgtype.Text], len(rows))
		for i := range rows {
			a[i] = field[presentText](rows, i, off).Text
		}
		return a
	}
}

func bodyTypeArray(off uintptr) func([]messageRow) any {
	return func(rows []messageRow) any {
		a := make(pgtype.FlatArray[int16], len(rows))
		for i := range rows {
			a[i] = int16(field[broker.BodyType](rows, i, off))
		}
		return a
	}
}

func int8Array(off uintptr) func([]messageRow) any {
	return func(rows []messageRow) any {
		a := make(pgtype.FlatArray[int64], len(rows))
		for i := range rows {
			a[i] = field[pgtype.Int8](rows, i, off).Int64
		}
		return a
	}
}

func stateArray(off uintptr) func([]messageRow) any {
	return func(rows []messageRow) any {
		a := make(pgtype.FlatArray[int16], len(rows))
		for i := range rows {
			a[i] = int16(field[broker.State](rows, i, off))
		}
		return a
	}
}

// insertColumns are the columns of messageColumns the insert writes, in field order: all but
// those tagged insert:"default". A field of a type insertTypes lacks stops the program at start.
var insertColumns = columnsOf(reflect.TypeFor[messageColumns](), 0, nil)

func columnsOf(t reflect.Type, base uintptr, cols []insertColumn) []insertColumn {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			cols = columnsOf(f.Type, base+f.Offset, cols)
			continue
		}
		if f.Tag.Get("insert") == "default" {
			continue
		}
		kind, ok := insertTypes[f.Type]
		if !ok {
			panic(fmt.Sprintf("store: no SQL type for %s %s of messageColumns", f.Name, f.Type))
		}
		name := f.Tag.Get("db")
		c := insertColumn{name: name, sqlType: kind.sqlType, value: fmt.Sprintf(kind.value, name), array: kind.array(base + f.Offset)}
		if st := f.Tag.Get("sqltype"); st != "" {
			c.sqlType = st
		}
		cols = append(cols, c)
	}
	return cols
}

// collectMessages reads every row of rows as a message.
func collectMessages(rows pgx.Rows) ([]*broker.Message, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*broker.Message, error) {
		rec, err := pgx.RowToStructByName[messageRecord](r)
		if err != nil {
			return nil, err
		}
		return rec.message()
	})
}

// message turns a row into a Message.
func (r *messageRecord) message() (*broker.Message, error) {
	m := &broker.Message{
		Body:                   r.Body,
		BodyType:               r.BodyType,
		AMQPSections:           r.AMQPSections,
		TimeToLiveFromSender:   r.TTLFromSender,
		ContentType:            r.ContentType.String,
		MessageID:              r.MessageID,
		CorrelationID:          r.CorrelationID.String,
		SessionID:              r.SessionID.String,
		HasSessionID:           r.SessionID.Valid,
		ReplyToSessionID:       r.ReplyToSessionID.String,
		Label:                  r.Label.String,
		To:                     r.To.String,
		ReplyTo:                r.ReplyTo.String,
		PartitionKey:           r.PartitionKey.String,
		ViaPartitionKey:        r.ViaPartitionKey.String,
		EnqueuedSequenceNumber: r.EnqueuedSeq.Int64,
		TimeToLive:             duration(r.TTL),
		ScheduledEnqueueTime:   timeOrZero(r.ScheduledAt),
		SequenceNumber:         r.Seq,
		EnqueuedTime:           r.EnqueuedAt.UTC(),
		ExpiresAt:              timeOrZero(r.ExpiresAt),
		DeliveryCount:          r.DeliveryCount + 1,
		State:                  r.State,
		DeadLetterReason:       r.DeadLetterReason.String,
		DeadLetterDescription:  r.DeadLetterDescription.String,
		DeadLetterSource:       r.DeadLetterSource.String,
	}
	if r.LockToken.Valid {
		m.LockToken = uuid.UUID(r.LockToken.Bytes)
		m.LockedUntil = r.VisibleAt.Time.UTC()
	}
	var err error
	if m.UserProperties, err = broker.DecodeUserProperties(r.UserProps); err != nil {
		return nil, err
	}
	return m, nil
}

// timeOrZero decodes a nullable timestamp: NULL is the zero time.
func timeOrZero(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}
