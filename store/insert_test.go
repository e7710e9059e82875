package store_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sbgate/sbgate/broker"
)

// brokerSet are the fields of a Message the broker sets, not the sender; the others are all
// given a value by fullMessages.
var brokerSet = []string{"SequenceNumber", "EnqueuedSequenceNumber", "EnqueuedTime", "ExpiresAt", "DeliveryCount",
	"LockToken", "LockedUntil", "State", "DeadLetterReason", "DeadLetterDescription", "DeadLetterSource"}

// fullMessages are two messages that give every property a sender sets a value of its own, tag
// telling one test's apart. One carries a PartitionKey, the other a SessionId: a message with
// both must have them equal, and a column mixed up with another must show.
func fullMessages(tag string) []broker.Message {
	msg := func(n int) broker.Message {
		s := tag + "-" + strconv.Itoa(n)
		return broker.Message{
			Body:                 []byte("body\x00\xff" + s),
			ContentType:          "content-type-" + s,
			MessageID:            "message-id-" + s,
			CorrelationID:        "correlation-id-" + s,
			ReplyToSessionID:     "reply-to-session-id-" + s,
			Label:                "label-" + s,
			To:                   "to-" + s,
			ReplyTo:              "reply-to-" + s,
			ViaPartitionKey:      "via-partition-key-" + s,
			TimeToLive:           time.Duration(90+n) * time.Second,
			TimeToLiveFromSender: true, // what Send makes of a TimeToLive
			AMQPSections:         []byte("amqp-sections-" + s),
			ScheduledEnqueueTime: time.Date(2026, 1, 1, 0, 0, n, 123000, time.UTC), // past: receivable, kept as sent
			UserProperties: broker.UserProperties{
				{Name: "b", Value: n == 1}, {Name: "f", Value: 2.5 + float64(n)},
				{Name: "i", Value: int64(-7 - n)}, {Name: "s", Value: "user-" + s},
			},
		}
	}
	a, b := msg(1), msg(2)
	a.PartitionKey = "partition-key-" + tag
	a.BodyType = broker.BodyAMQP // the store keeps the bytes as they are; it does not read them
	b.SessionID, b.HasSessionID = "session-id-"+tag, true
	return []broker.Message{a, b}
}

// TestFullMessagesSetEverySenderProperty keeps fullMessages whole: a property added to Message
// must be given a value there (or be listed in brokerSet), so that the tests below cover it.
func TestFullMessagesSetEverySenderProperty(t *testing.T) {
	msgs := fullMessages("x")
	for _, f := range reflect.VisibleFields(reflect.TypeFor[broker.Message]()) {
		if slices.Contains(brokerSet, f.Name) {
			continue
		}
		set := false
		for _, m := range msgs {
			set = set || !reflect.ValueOf(m).FieldByIndex(f.Index).IsZero()
		}
		if !set {
			t.Errorf("fullMessages leaves Message.%s unset", f.Name)
		}
	}
}

// TestEveryInsertPathKeepsEveryProperty sends messages with every sender property set through
// each way a message is written (single send, batch, topic fan-out, auto-forwarding, the SQL
// send relay) and reads them back whole.
func TestEveryInsertPathKeepsEveryProperty(t *testing.T) {
	for _, c := range []struct {
		name string
		// write sends msgs its way and returns the entities they end up in.
		write func(t *testing.T, b *bundle, msgs []broker.Message) []*broker.Entity
		// forwarded: the messages carry the sequence number of their original send.
		forwarded bool
		// data: the way has bodies of bytes only (SQL sends).
		data bool
	}{
		{name: "send", write: func(t *testing.T, b *bundle, msgs []broker.Message) []*broker.Entity {
			q := b.queue(t, "q", nil)
			for _, m := range msgs {
				b.send(t, q, m)
			}
			return []*broker.Entity{q}
		}},
		{name: "batch", write: func(t *testing.T, b *bundle, msgs []broker.Message) []*broker.Entity {
			q := b.queue(t, "q", nil)
			b.send(t, q, msgs...)
			return []*broker.Entity{q}
		}},
		{name: "topic", write: func(t *testing.T, b *bundle, msgs []broker.Message) []*broker.Entity {
			tp := b.topic(t, "t", nil)
			s1, s2 := b.sub(t, "t", "s1", nil, nil), b.sub(t, "t", "s2", nil, nil)
			b.send(t, tp, msgs...)
			return []*broker.Entity{s1, s2}
		}},
		{name: "forward", forwarded: true, write: func(t *testing.T, b *bundle, msgs []broker.Message) []*broker.Entity {
			dst := b.queue(t, "dst", nil)
			src := b.queue(t, "src", func(p *broker.Properties) { p.ForwardTo = "dst" })
			b.send(t, src, msgs...)
			return []*broker.Entity{dst}
		}},
		{name: "relay", write: func(t *testing.T, b *bundle, msgs []broker.Message) []*broker.Entity {
			q := b.queue(t, "q", nil)
			for _, m := range msgs {
				if _, err := b.pool.Exec(b.ctx, `SELECT sbgate.send('q', $1::bytea, $2::jsonb)`, m.Body, stagedJSON(t, m)); err != nil {
					t.Fatalf("sbgate.send: %v", err)
				}
			}
			if n := b.relayPending(t); n != len(msgs) {
				t.Fatalf("relayed %d messages; want %d", n, len(msgs))
			}
			return []*broker.Entity{q}
		}, data: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t)
			sent := fullMessages(c.name)
			now := b.clock.Now()
			for _, e := range c.write(t, b, slices.Clone(sent)) {
				got, err := b.store.Browse(b.ctx, e, broker.SubQueueMain, 0, 10)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(sent) {
					t.Fatalf("%s holds %d messages; want %d", e.Path, len(got), len(sent))
				}
				for i, g := range got {
					want := sent[i]
					if want.PartitionKey == "" {
						want.PartitionKey = want.SessionID // its default
					}
					if c.data {
						want.BodyType = broker.BodyData
						want.AMQPSections = nil // SQL sends have none
					}
					want.SequenceNumber = g.SequenceNumber
					want.EnqueuedTime = now
					want.ExpiresAt = now.Add(want.TimeToLive)
					want.DeliveryCount = 1 // never delivered: no delivery failed
					if c.forwarded {
						if g.EnqueuedSequenceNumber == 0 || g.EnqueuedSequenceNumber == g.SequenceNumber {
							t.Errorf("%s message %d: EnqueuedSequenceNumber %d; want that of its send to src (its sequence number is %d)",
								e.Path, i, g.EnqueuedSequenceNumber, g.SequenceNumber)
						}
						want.EnqueuedSequenceNumber = g.EnqueuedSequenceNumber
					}
					if g.SequenceNumber <= 0 {
						t.Errorf("%s message %d: SequenceNumber %d", e.Path, i, g.SequenceNumber)
					}
					if diff := cmp.Diff(want, *g); diff != "" {
						t.Errorf("%s message %d differs (-want +got):\n%s", e.Path, i, diff)
					}
				}
			}
		})
	}
}

// stagedJSON is m as sbgate.send takes it.
func stagedJSON(t *testing.T, m broker.Message) string {
	t.Helper()
	bp := map[string]any{
		"MessageId": m.MessageID, "CorrelationId": m.CorrelationID, "ReplyToSessionId": m.ReplyToSessionID,
		"Label": m.Label, "To": m.To, "ReplyTo": m.ReplyTo, "ViaPartitionKey": m.ViaPartitionKey,
		"TimeToLive": m.TimeToLive.Seconds(), "ScheduledEnqueueTimeUtc": m.ScheduledEnqueueTime.Format(time.RFC3339Nano),
	}
	if m.SessionID != "" {
		bp["SessionId"] = m.SessionID
	}
	if m.PartitionKey != "" {
		bp["PartitionKey"] = m.PartitionKey
	}
	up := map[string]any{}
	for _, p := range m.UserProperties {
		up[p.Name] = p.Value
	}
	j, err := json.Marshal(map[string]any{"BrokerProperties": bp, "UserProperties": up, "ContentType": m.ContentType})
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}
