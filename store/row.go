package store

import (
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// messageRecord is a row of the messages table as statements return it. Columns are matched to
// fields by name (pgx.RowToStructByName), and the select lists are built from the db tags
// below, so a column is added or renamed in one place: a statement that returns a column the
// struct lacks, or lacks one it has, fails instead of scanning values into the wrong fields.
type messageRecord struct {
	Seq                   int64              `db:"seq"`
	State                 State              `db:"state"`
	VisibleAt             pgtype.Timestamptz `db:"visible_at"`
	LockToken             pgtype.UUID        `db:"lock_token"`
	DeliveryCount         int32              `db:"delivery_count"`
	EnqueuedAt            time.Time          `db:"enqueued_at"`
	ExpiresAt             pgtype.Timestamptz `db:"expires_at"`
	TTL                   pgtype.Interval    `db:"ttl"`
	ScheduledAt           pgtype.Timestamptz `db:"scheduled_at"`
	MessageID             string             `db:"message_id"`
	CorrelationID         pgtype.Text        `db:"correlation_id"`
	SessionID             pgtype.Text        `db:"session_id"`
	ReplyToSessionID      pgtype.Text        `db:"reply_to_session_id"`
	Label                 pgtype.Text        `db:"label"`
	To                    pgtype.Text        `db:"to_addr"`
	ReplyTo               pgtype.Text        `db:"reply_to"`
	PartitionKey          pgtype.Text        `db:"partition_key"`
	ContentType           pgtype.Text        `db:"content_type"`
	UserProps             []byte             `db:"user_props"`
	Body                  []byte             `db:"body"`
	Size                  int32              `db:"size"`
	DeadLetterReason      pgtype.Text        `db:"dead_letter_reason"`
	DeadLetterDescription pgtype.Text        `db:"dead_letter_description"`
	DeadLetterSource      pgtype.Text        `db:"dead_letter_source"`
	ViaPartitionKey       pgtype.Text        `db:"via_partition_key"`
	EnqueuedSeq           pgtype.Int8        `db:"enqueued_seq"`
}

// messageFields lists the columns of messageRecord, in field order.
var messageFields = dbColumns[messageRecord]()

// messageSelect is the select list of a message row; messageSelectFrom qualifies it with a
// table alias ("m.seq, m.state, …").
var messageSelect = strings.Join(messageFields, ", ")

func messageSelectFrom(alias string) string {
	return alias + "." + strings.Join(messageFields, ", "+alias+".")
}

// collectMessages reads every row of rows as a message.
func collectMessages(rows pgx.Rows) ([]*Message, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Message, error) {
		rec, err := pgx.RowToStructByName[messageRecord](r)
		if err != nil {
			return nil, err
		}
		return rec.message()
	})
}

// collectMessage reads the one row of rows as a message; pgx.ErrNoRows when there is none.
func collectMessage(rows pgx.Rows) (*Message, error) {
	rec, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[messageRecord])
	if err != nil {
		return nil, err
	}
	return rec.message()
}

// message turns a row into a Message.
func (r *messageRecord) message() (*Message, error) {
	m := &Message{
		Body:                   r.Body,
		ContentType:            r.ContentType.String,
		MessageID:              r.MessageID,
		CorrelationID:          r.CorrelationID.String,
		SessionID:              r.SessionID.String,
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
		DeliveryCount:          r.DeliveryCount,
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
	if m.UserProperties, err = decodeUserProperties(r.UserProps); err != nil {
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
