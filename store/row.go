package store

import (
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sbgate/sbgate/broker"
)

// messageRecord is a row of the messages table as statements return it. Columns are matched to
// fields by name (collectRecords), and the select lists are generated from the db tags below
// (records.gen.go, by go generate), so a column is added or renamed in one place: a statement
// that returns a column the struct lacks, or lacks one it has, fails instead of scanning values
// into the wrong fields. The message insert is generated from the same tags (messageColumns).
//
// Tagged insert:"default": the columns a new row takes from the table's defaults, which the
// insert leaves out. Tagged sqltype: the column's SQL type where the Go type does not decide it
// (insertTypes in internal/recordgen).
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

// messageColumns is a whole row of the messages table: the entity it is in and the message as
// statements return it. insertMessagesSQL writes one from each messageRow: its argument arrays,
// their unnest aliases and the INSERT column list are built from these db tags, so a column is
// added or renamed here and nowhere else in SQL (TestMessageColumnsCoverTable compares them
// with the table).
type messageColumns struct {
	EntityID int64 `db:"entity_id"`
	messageRecord
}

// collectMessages reads every row of rows as a message.
func collectMessages(rows pgx.Rows) ([]*broker.Message, error) {
	recs, err := collectRecords[messageRecord](rows, 0)
	if err != nil {
		return nil, err
	}
	msgs := make([]*broker.Message, len(recs))
	for i := range recs {
		if msgs[i], err = recs[i].message(); err != nil {
			return nil, err
		}
	}
	return msgs, nil
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
