package store_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// sectionMessages are messages with AMQPSections (the store keeps them as opaque bytes; these
// are an AMQP delivery-annotations section and a footer, but the store never looks), with and
// without a TTL of the sender's, and one without sections.
func sectionMessages() []broker.Message {
	return []broker.Message{
		{Body: []byte("ttl"), MessageID: "ttl", TimeToLive: time.Hour,
			AMQPSections: []byte("\x00\x53\x71\xc1\x05\x02\xa3\x01k\x41\x00\x53\x78\xc1\x01\x00")},
		{Body: amqpBody, BodyType: broker.BodyAMQP, MessageID: "no-ttl",
			AMQPSections: []byte{0x00, 0x53, 0x78, 0xc1, 0x05, 0x02, 0xa3, 0x01, 'f', 0x40}},
		{Body: []byte("plain"), MessageID: "plain", TimeToLive: 2 * time.Hour},
	}
}

// checkSections fails unless each of msgs carries the sections and the TTL origin of the message
// of sent with its MessageID; ttl, when not nil, gives the TTL each should have.
func checkSections(t *testing.T, where string, msgs []*broker.Message, sent []broker.Message, ttl func(broker.Message) time.Duration) {
	t.Helper()
	if len(msgs) != len(sent) {
		t.Fatalf("%s: %d messages; want %d", where, len(msgs), len(sent))
	}
	for _, m := range msgs {
		var s *broker.Message
		for i := range sent {
			if sent[i].MessageID == m.MessageID {
				s = &sent[i]
			}
		}
		if s == nil {
			t.Fatalf("%s: unknown message %q", where, m.MessageID)
		}
		if !bytes.Equal(m.AMQPSections, s.AMQPSections) || (m.AMQPSections == nil) != (s.AMQPSections == nil) {
			t.Errorf("%s %s: AMQPSections % x; want % x", where, m.MessageID, m.AMQPSections, s.AMQPSections)
		}
		if want := s.TimeToLive != 0; m.TimeToLiveFromSender != want {
			t.Errorf("%s %s: TimeToLiveFromSender %v; want %v", where, m.MessageID, m.TimeToLiveFromSender, want)
		}
		if ttl != nil {
			if want := ttl(*s); m.TimeToLive != want {
				t.Errorf("%s %s: TimeToLive %v; want %v", where, m.MessageID, m.TimeToLive, want)
			}
		}
	}
}

// TestAMQPSectionsThroughEveryPath: the sections an AMQP sender gave beyond the store's fields,
// and whether the TTL was the sender's, go with a message through every way the store moves or
// copies one: peek, peek-lock, abandon, defer and receive by number, dead-lettering and the
// dead-letter subqueue, resubmit, receive-and-delete, auto-forwarding, a topic's subscriptions
// (with and without a rule action), the forwarding of dead letters.
func TestAMQPSectionsThroughEveryPath(t *testing.T) {
	b := setup(t, manual)
	sent := sectionMessages() // as sent: Send fills in what it sends
	const def = 3 * time.Hour // each entity's default TTL: the sender's TTLs are below it
	withDefault := func(p *broker.Properties) { p.DefaultMessageTimeToLive = def }
	applies := func(s broker.Message) time.Duration {
		if s.TimeToLive == 0 {
			return def
		}
		return s.TimeToLive
	}

	q := b.queue(t, "q", withDefault)
	b.throughQueue(t, q, sectionMessages(), func(where string, got []*broker.Message) {
		t.Helper()
		checkSections(t, where, got, sent, applies)
	})

	dst := b.queue(t, "dst", withDefault)
	fwd := b.queue(t, "fwd", func(p *broker.Properties) { p.DefaultMessageTimeToLive = def; p.ForwardTo = "dst" })
	b.send(t, fwd, sectionMessages()...)
	checkSections(t, "forwarded", b.drain(t, dst, broker.SubQueueMain), sent, applies)

	// A subscription whose default is shorter than one sender's TTL caps it: still the sender's.
	const short = 90 * time.Minute
	capped := func(s broker.Message) time.Duration { return min(applies(s), short) }

	b.topic(t, "t", withDefault)
	plain := b.sub(t, "t", "plain", nil, nil)
	rule := sqlRule("acting", "1=1")
	rule.Action = &broker.RuleAction{SQLExpression: "SET user.added = 1"}
	acted := b.sub(t, "t", "acted", rule, func(p *broker.Properties) { p.DefaultMessageTimeToLive = short })
	b.send(t, mustEntity(t, b, "t"), sectionMessages()...)
	checkSections(t, "subscription", b.drain(t, plain, broker.SubQueueMain), sent, applies)
	checkSections(t, "copy changed by an action", b.drain(t, acted, broker.SubQueueMain), sent, capped)

	collector := b.queue(t, "collector", withDefault)
	work := b.queue(t, "work", func(p *broker.Properties) {
		p.DefaultMessageTimeToLive = def
		p.ForwardDeadLetteredMessagesTo = "collector"
	})
	b.send(t, work, sectionMessages()...)
	b.deadLetterAll(t, work)
	checkSections(t, "dead letters forwarded", b.drain(t, collector, broker.SubQueueMain), sent, applies)
	if c := b.counts(t, "collector"); c.Total() != 0 {
		t.Errorf("collector holds %+v after its drain", c)
	}
}

func mustEntity(t *testing.T, b *bundle, path string) *broker.Entity {
	t.Helper()
	e, err := b.store.Resolve(b.ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// AMQPSections count in a message's size, against the entity's limit and in its SizeInBytes, and
// are bounded by the 64 KiB of a message's header; empty ones are no sections (NULL).
func TestAMQPSectionsSize(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxMessageSizeInKilobytes = 1 })
	// 1000 bytes of body fit in 1 KiB; with 100 bytes of sections they do not.
	err := b.store.Send(b.ctx, q, []broker.Message{{Body: make([]byte, 1000), AMQPSections: make([]byte, 100)}})
	if !errors.Is(err, broker.ErrTooLarge) {
		t.Errorf("1000 bytes of body and 100 of sections in a 1 KiB queue: %v; want ErrTooLarge", err)
	}
	b.send(t, q, broker.Message{Body: []byte("x"), AMQPSections: make([]byte, 500)})
	if c := b.counts(t, "q"); c.SizeInBytes < 501 {
		t.Errorf("SizeInBytes %d; want at least the 501 bytes of body and sections", c.SizeInBytes)
	}

	big := b.queue(t, "big", func(p *broker.Properties) { p.MaxMessageSizeInKilobytes = 1024 })
	err = b.store.Send(b.ctx, big, []broker.Message{{Body: []byte("x"), AMQPSections: make([]byte, broker.MaxAMQPSectionsSize+1)}})
	if !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("%d bytes of sections: %v; want ErrBadRequest", broker.MaxAMQPSectionsSize+1, err)
	}
	b.send(t, big, broker.Message{Body: []byte("x"), AMQPSections: make([]byte, broker.MaxAMQPSectionsSize)})

	empty := b.queue(t, "empty", nil)
	b.send(t, empty, broker.Message{Body: []byte("x"), AMQPSections: []byte{}})
	var null bool
	if err := b.pool.QueryRow(b.ctx, `SELECT amqp_sections IS NULL FROM messages WHERE entity_id = $1`, empty.ID).Scan(&null); err != nil || !null {
		t.Errorf("empty sections stored as NULL: %v, %v; want true", null, err)
	}
	if m := b.receive(t, empty, broker.SubQueueMain, broker.ReceiveAndDelete); m == nil || m.AMQPSections != nil {
		t.Errorf("received %+v; want a message without sections", m)
	}
}
