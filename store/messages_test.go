package store_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store"
)

func TestSendReceiveKeepsEveryProperty(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	date := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	sent := broker.Message{
		Body:             []byte("\x00binary\xffbody"),
		ContentType:      "application/x-custom",
		MessageID:        "id-1",
		CorrelationID:    "corr",
		SessionID:        "sess",
		ReplyToSessionID: "reply-sess",
		Label:            "lbl",
		To:               "to",
		ReplyTo:          "reply",
		ViaPartitionKey:  "via",
		TimeToLive:       90 * time.Second,
		// In the past: received at once, and returned as sent.
		ScheduledEnqueueTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		UserProperties: broker.UserProperties{
			{Name: "b", Value: true},
			{Name: "d", Value: date},
			{Name: "f", Value: 2.5},
			{Name: "i", Value: int64(-7)},
			{Name: "s", Value: `quote " and , comma`},
		},
	}
	b.send(t, q, sent)
	got := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if got == nil {
		t.Fatal("no message received")
	}
	want := sent
	want.PartitionKey = "sess" // defaults to the session id
	want.HasSessionID = true   // set on every message in a session
	want.TimeToLiveFromSender = true
	want.SequenceNumber = got.SequenceNumber
	want.EnqueuedTime = b.clock.Now()
	want.ExpiresAt = b.clock.Now().Add(90 * time.Second)
	want.DeliveryCount = 1
	want.LockToken = got.LockToken
	want.LockedUntil = b.clock.Now().Add(time.Minute)
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("received message differs (-want +got):\n%s", diff)
	}
	if got.LockToken == uuid.Nil || got.SequenceNumber <= 0 {
		t.Errorf("lock token %v, sequence number %d", got.LockToken, got.SequenceNumber)
	}
}

func TestSendDefaults(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.DefaultMessageTimeToLive = time.Hour })
	b.send(t, q, body("no id"), broker.Message{Body: []byte("long ttl"), TimeToLive: 48 * time.Hour})
	m1 := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete)
	m2 := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete)
	if len(m1.MessageID) != 32 || strings.Trim(m1.MessageID, "0123456789abcdef") != "" {
		t.Errorf("generated MessageId = %q; want 32 lower-case hex digits", m1.MessageID)
	}
	if m1.TimeToLive != time.Hour || m2.TimeToLive != time.Hour {
		t.Errorf("TTLs = %v, %v; want both capped to the queue's 1h", m1.TimeToLive, m2.TimeToLive)
	}
	if m1.DeliveryCount != 1 {
		t.Errorf("receive-and-delete DeliveryCount = %d; want 1", m1.DeliveryCount)
	}
}

func TestSendValidation(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxMessageSizeInKilobytes = 1 })
	for _, tc := range []struct {
		name string
		msgs []broker.Message
		want error
	}{
		{"empty batch", nil, broker.ErrBadRequest},
		{"long MessageId", []broker.Message{{MessageID: strings.Repeat("m", 129)}}, broker.ErrBadRequest},
		{"long SessionId", []broker.Message{{SessionID: strings.Repeat("s", 129)}}, broker.ErrBadRequest},
		{"PartitionKey not SessionId", []broker.Message{{SessionID: "a", PartitionKey: "b"}}, broker.ErrBadRequest},
		{"negative TTL", []broker.Message{{TimeToLive: -time.Second}}, broker.ErrBadRequest},
		{"too large", []broker.Message{{Body: make([]byte, 1025)}}, broker.ErrTooLarge},
		{"batch too large", []broker.Message{{Body: make([]byte, 600)}, {Body: make([]byte, 600)}}, broker.ErrTooLarge},
		{"duplicate property", []broker.Message{{UserProperties: broker.UserProperties{{Name: "a", Value: "x"}, {Name: "a", Value: "y"}}}}, broker.ErrBadRequest},
		// A batch is all or nothing: one bad message refuses the good ones with it.
		{"bad message in batch", []broker.Message{{Body: []byte("good")}, {MessageID: strings.Repeat("m", 129)}}, broker.ErrBadRequest},
	} {
		if err := b.store.Send(b.ctx, q, tc.msgs); !errors.Is(err, tc.want) {
			t.Errorf("%s: Send err = %v; want %v", tc.name, err, tc.want)
		}
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("refused sends stored messages: %+v", c)
	}
	b.send(t, q, broker.Message{Body: make([]byte, 900)}) // within the limit with its properties
}

func TestSendToDisabledQueue(t *testing.T) {
	b := setup(t)
	for _, status := range []broker.Status{broker.StatusDisabled, broker.StatusSendDisabled} {
		q := b.queue(t, "q-"+strings.ToLower(string(status)), func(p *broker.Properties) { p.Status = status })
		if err := b.store.Send(b.ctx, q, []broker.Message{body("x")}); !errors.Is(err, broker.ErrForbidden) {
			t.Errorf("send to %s queue: err = %v; want ErrForbidden", status, err)
		}
	}
	q := b.queue(t, "q-receive-disabled", func(p *broker.Properties) { p.Status = broker.StatusReceiveDisabled })
	b.send(t, q, body("x"))
	if _, err := receive1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, 0); !errors.Is(err, broker.ErrForbidden) {
		t.Errorf("receive from ReceiveDisabled queue: err = %v; want ErrForbidden", err)
	}
}

func TestBatchKeepsOrder(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	var batch []broker.Message
	for _, s := range []string{"m1", "m2", "m3", "m4"} {
		batch = append(batch, broker.Message{Body: []byte(s), MessageID: s})
	}
	b.send(t, q, batch...)
	var got []string
	var last int64
	for m := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete); m != nil; m = b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete) {
		got = append(got, m.MessageID)
		if m.SequenceNumber <= last {
			t.Errorf("sequence %d after %d", m.SequenceNumber, last)
		}
		last = m.SequenceNumber
	}
	if diff := cmp.Diff([]string{"m1", "m2", "m3", "m4"}, got); diff != "" {
		t.Errorf("receive order (-want +got):\n%s", diff)
	}
}

func TestPeekLockComplete(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("x"), MessageID: "mid"})
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)

	// While locked, the message is not handed out again.
	if again := b.receive(t, q, broker.SubQueueMain, broker.PeekLock); again != nil {
		t.Fatalf("locked message received again: %+v", again)
	}
	// Wrong token, wrong id: lock lost, and the lock stays.
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, "mid", uuid.New()); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("complete with a wrong token: err = %v; want ErrLockLost", err)
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, "other-id", m.LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("complete with a wrong id: err = %v; want ErrLockLost", err)
	}
	// Settle by sequence number, as the Location header gives it.
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, itoa(m.SequenceNumber), m.LockToken); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, "mid", m.LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("second complete: err = %v; want ErrLockLost", err)
	}
	if c := b.counts(t, "q"); c.Total() != 0 {
		t.Errorf("counts after complete = %+v", c)
	}
}

func TestSettleByMessageID(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("x"), MessageID: "order-17"})
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, "order-17", m.LockToken); err != nil {
		t.Fatalf("complete by message id: %v", err)
	}
}

// A MessageId no message can have (not UTF-8, or with a NUL, which PostgreSQL's text cannot
// hold) loses its own settlement, and not those it would have shared a statement with.
func TestSettleByUnstorableMessageID(t *testing.T) {
	b := setup(t)
	q, m1, m2 := lockedPair(t, b)
	q3 := b.queue(t, "q3", nil)
	b.send(t, q3, body("third"))
	m3 := b.receive(t, q3, broker.SubQueueMain, broker.PeekLock)
	main := broker.Target{Entity: q, SubQueue: broker.SubQueueMain}
	res := b.store.Settle(b.ctx, main, []broker.SettleRequest{
		{Op: broker.Complete, Token: m1.LockToken, ID: "a\x00b"},
		{Op: broker.Complete, Token: m2.LockToken, ID: "\xff"},
		{Op: broker.Complete, Token: m1.LockToken, ID: itoa(m1.SequenceNumber)}})
	for i, want := range []error{broker.ErrLockLost, broker.ErrLockLost, nil} {
		if !errors.Is(res[i].Err, want) {
			t.Errorf("settlement %d: err = %v; want %v", i, res[i].Err, want)
		}
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q3, SubQueue: broker.SubQueueMain}, broker.Complete, "", m3.LockToken); err != nil {
		t.Errorf("complete on another queue: %v", err)
	}
	if _, err := settle1(b.ctx, b.store, main, broker.Complete, "", m2.LockToken); err != nil {
		t.Errorf("complete m2 by token: %v", err)
	}
}

// A batch settlement naming one lock twice is answered as if the two were made one after the
// other: both renewals renew it, the first complete completes it and the second finds it gone.
func TestSettleSameLockTwice(t *testing.T) {
	b := setup(t)
	q, m1, _ := lockedPair(t, b)
	main := broker.Target{Entity: q, SubQueue: broker.SubQueueMain}
	for round := range 3 {
		b.clock.Advance(time.Second)
		res := b.store.Settle(b.ctx, main, []broker.SettleRequest{
			{Op: broker.RenewLock, Token: m1.LockToken}, {Op: broker.RenewLock, Token: m1.LockToken}})
		for i, r := range res {
			if r.Err != nil || !r.LockedUntil.Equal(b.clock.Now().Add(q.Props.LockDuration)) {
				t.Errorf("round %d, renewal %d: until %v, %v; want renewed", round, i, r.LockedUntil, r.Err)
			}
		}
	}
	// The same lock named by its MessageId, by its sequence number and by neither are one lock;
	// a request naming it with another message's id names no lock.
	seq := strconv.FormatInt(m1.SequenceNumber, 10)
	for round := range 3 {
		b.clock.Advance(time.Second)
		res := b.store.Settle(b.ctx, main, []broker.SettleRequest{
			{Op: broker.RenewLock, Token: m1.LockToken, ID: m1.MessageID}, {Op: broker.RenewLock, Token: m1.LockToken, ID: "another"},
			{Op: broker.RenewLock, Token: m1.LockToken, ID: seq}, {Op: broker.RenewLock, Token: m1.LockToken}})
		for i, want := range []error{nil, broker.ErrLockLost, nil, nil} {
			if !errors.Is(res[i].Err, want) || want == nil && !res[i].LockedUntil.Equal(b.clock.Now().Add(q.Props.LockDuration)) {
				t.Errorf("round %d, renewal %d by id: until %v, %v; want %v", round, i, res[i].LockedUntil, res[i].Err, want)
			}
		}
	}
	// A stale token of the same message (its lock before an abandon) between the two does not
	// hide the pair.
	if _, err := settle1(b.ctx, b.store, main, broker.Abandon, "", m1.LockToken); err != nil {
		t.Fatal(err)
	}
	again := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if again == nil || again.SequenceNumber != m1.SequenceNumber {
		t.Fatalf("received %+v after the abandon; want message %d again", again, m1.SequenceNumber)
	}
	res := b.store.Settle(b.ctx, main, []broker.SettleRequest{
		{Op: broker.RenewLock, Token: again.LockToken}, {Op: broker.RenewLock, Token: m1.LockToken}, {Op: broker.RenewLock, Token: again.LockToken}})
	for i, want := range []error{nil, broker.ErrLockLost, nil} {
		if !errors.Is(res[i].Err, want) {
			t.Errorf("renewal %d with a stale token between: %v; want %v", i, res[i].Err, want)
		}
	}
	// Two dead-letterings of the lock with different reasons: the one whose reason the message
	// carries is the one answered as made.
	res = b.store.Settle(b.ctx, main, []broker.SettleRequest{
		{Op: broker.DeadLetter, Token: again.LockToken, Reason: "first"}, {Op: broker.DeadLetter, Token: again.LockToken, Reason: "second"}})
	if (res[0].Err == nil) == (res[1].Err == nil) {
		t.Fatalf("two dead-letterings of one lock: %v, %v; want one made, one lock lost", res[0].Err, res[1].Err)
	}
	dead := b.receive(t, q, broker.SubQueueDeadLetter, broker.PeekLock)
	if made := map[bool]string{true: "first", false: "second"}[res[0].Err == nil]; dead == nil || dead.DeadLetterReason != made {
		t.Fatalf("dead letter %+v; want the reason %q of the settlement answered as made", dead, made)
	}
	again = dead
	main = broker.Target{Entity: q, SubQueue: broker.SubQueueDeadLetter}
	res = b.store.Settle(b.ctx, main, []broker.SettleRequest{
		{Op: broker.Complete, Token: again.LockToken, ID: seq}, {Op: broker.Complete, Token: again.LockToken, ID: again.MessageID},
		{Op: broker.Complete, Token: again.LockToken}})
	for i, want := range []error{nil, broker.ErrLockLost, broker.ErrLockLost} {
		if !errors.Is(res[i].Err, want) {
			t.Errorf("complete %d: %v; want %v", i, res[i].Err, want)
		}
	}
}

func TestLockExpiryRedelivers(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.LockDuration = 30 * time.Second })
	b.send(t, q, body("first"), body("second"))
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if string(m.Body) != "first" || !m.LockedUntil.Equal(b.clock.Now().Add(30*time.Second)) {
		t.Fatalf("first receive = %q locked until %v", m.Body, m.LockedUntil)
	}

	b.clock.Advance(29 * time.Second)
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.RenewLock, m.MessageID, m.LockToken); err != nil {
		t.Fatalf("renew before expiry: %v", err)
	}
	b.clock.Advance(29 * time.Second) // past the original expiry, within the renewed one
	again := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if string(again.Body) != "second" {
		t.Fatalf("while renewed, receive got %q; want second", again.Body)
	}

	b.clock.Advance(2 * time.Second) // the renewed lock on "first" has now expired
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, m.MessageID, m.LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("complete after expiry: err = %v; want ErrLockLost", err)
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.RenewLock, m.MessageID, m.LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("renew after expiry: err = %v; want ErrLockLost", err)
	}
	redelivered := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if string(redelivered.Body) != "first" || redelivered.DeliveryCount != 2 || redelivered.LockToken == m.LockToken {
		t.Errorf("redelivered = %q, DeliveryCount %d, token %v; want first, 2, a new token", redelivered.Body, redelivered.DeliveryCount, redelivered.LockToken)
	}
	if redelivered.SequenceNumber != m.SequenceNumber {
		t.Errorf("redelivered sequence %d; want the original %d", redelivered.SequenceNumber, m.SequenceNumber)
	}
}

func TestAbandonPutsMessageBackAtFront(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	b.send(t, q, body("first"), body("second"), body("third"))
	m1 := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	m2 := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Abandon, itoa(m1.SequenceNumber), m1.LockToken); err != nil {
		t.Fatal(err)
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Abandon, m1.MessageID, m1.LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("second abandon: err = %v; want ErrLockLost", err)
	}
	next := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if string(next.Body) != "first" || next.DeliveryCount != 2 {
		t.Errorf("after abandon received %q (DeliveryCount %d); want first again with 2", next.Body, next.DeliveryCount)
	}
	_ = m2
}

func TestMaxDeliveryCountDeadLetters(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) { p.MaxDeliveryCount = 2; p.LockDuration = 10 * time.Second })
	b.send(t, q, broker.Message{Body: []byte("poison"), MessageID: "p"}, body("healthy"))
	for i := 1; i <= 2; i++ {
		m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
		if string(m.Body) != "poison" || m.DeliveryCount != int32(i) {
			t.Fatalf("delivery %d: got %q with DeliveryCount %d", i, m.Body, m.DeliveryCount)
		}
		b.clock.Advance(11 * time.Second) // let the lock expire
	}
	// The third claim finds the poison message delivered twice: it goes to the dead-letter
	// subqueue and the healthy one is delivered instead.
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if m == nil || string(m.Body) != "healthy" {
		t.Fatalf("third receive = %v; want healthy", m)
	}
	dl := b.receive(t, q, broker.SubQueueDeadLetter, broker.PeekLock)
	if dl == nil || dl.MessageID != "p" {
		t.Fatalf("dead-letter receive = %+v; want the poison message", dl)
	}
	if dl.DeadLetterReason != "MaxDeliveryCountExceeded" || !strings.Contains(dl.DeadLetterDescription, "2 delivery attempts") {
		t.Errorf("dead-letter reason %q, description %q", dl.DeadLetterReason, dl.DeadLetterDescription)
	}
	if dl.State != broker.StateDeadLetter {
		t.Errorf("state = %v; want dead-letter", dl.State)
	}
	// Messages in the dead-letter subqueue are settled there and never dead-lettered again.
	for range 3 {
		if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueDeadLetter}, broker.Abandon, dl.MessageID, dl.LockToken); err != nil {
			t.Fatal(err)
		}
		dl = b.receive(t, q, broker.SubQueueDeadLetter, broker.PeekLock)
		if dl == nil {
			t.Fatal("dead-lettered message lost after abandon")
		}
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.Complete, dl.MessageID, dl.LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("complete of a dead-letter lock through the main queue: err = %v; want ErrLockLost", err)
	}
	if _, err := settle1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueDeadLetter}, broker.Complete, dl.MessageID, dl.LockToken); err != nil {
		t.Errorf("complete in the dead-letter subqueue: %v", err)
	}
}

func TestTimeToLive(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	b.send(t, q, broker.Message{Body: []byte("short"), TimeToLive: 10 * time.Second}, body("forever"))
	b.clock.Advance(11 * time.Second)
	m := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete)
	if m == nil || string(m.Body) != "forever" {
		t.Fatalf("received %v; want only the message without TTL", m)
	}
	if m := b.receive(t, q, broker.SubQueueMain, broker.ReceiveAndDelete); m != nil {
		t.Errorf("expired message received: %q", m.Body)
	}
}

func TestScheduledMessage(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", nil)
	at := b.clock.Now().Add(time.Hour)
	b.send(t, q, broker.Message{Body: []byte("later"), ScheduledEnqueueTime: at, TimeToLive: time.Minute})
	if m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock); m != nil {
		t.Fatalf("scheduled message received early: %q", m.Body)
	}
	b.clock.Advance(time.Hour + 30*time.Second) // due, and within its TTL counted from the schedule
	m := b.receive(t, q, broker.SubQueueMain, broker.PeekLock)
	if m == nil {
		t.Fatal("scheduled message not received when due")
	}
	if !m.EnqueuedTime.Equal(at) || !m.ScheduledEnqueueTime.Equal(at) || !m.ExpiresAt.Equal(at.Add(time.Minute)) {
		t.Errorf("enqueued %v, scheduled %v, expires %v; want enqueued at the schedule and TTL from it", m.EnqueuedTime, m.ScheduledEnqueueTime, m.ExpiresAt)
	}
}

func TestLongPollWakesOnSend(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: store.Options{Recheck: time.Hour}})
	q := b.queue(t, "q", nil)
	got := make(chan *broker.Message, 1)
	go func() {
		m, err := receive1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, time.Minute)
		if err != nil {
			t.Errorf("Receive: %v", err)
		}
		got <- m
	}()
	// The receiver may or may not be waiting yet; either way it must get the message, and with
	// the hour-long poll interval only the wake-up can deliver it in time.
	b.send(t, q, body("wake"))
	select {
	case m := <-got:
		if m == nil || string(m.Body) != "wake" {
			t.Errorf("long poll got %v", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("long poll was not woken by the send")
	}
}

func TestLongPollTimesOut(t *testing.T) {
	b := setup(t, setupOptions{realClock: true, opts: store.Options{Recheck: 20 * time.Millisecond}})
	q := b.queue(t, "q", nil)
	m, err := receive1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, 100*time.Millisecond)
	if err != nil || m != nil {
		t.Errorf("Receive on an empty queue = %v, %v; want nil, nil", m, err)
	}
}

func TestReceiveFromMissingOrWrongEntity(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "session-queue", func(p *broker.Properties) { p.RequiresSession = true })
	if err := b.store.Send(b.ctx, q, []broker.Message{body("no session")}); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("send without SessionId to a session queue: err = %v; want ErrBadRequest", err)
	}
	b.send(t, q, broker.Message{Body: []byte("x"), SessionID: "s1"})
	if _, err := receive1(b.ctx, b.store, broker.Target{Entity: q, SubQueue: broker.SubQueueMain}, broker.PeekLock, 0); !errors.Is(err, broker.ErrBadRequest) {
		t.Errorf("plain receive from a session queue: err = %v; want ErrBadRequest", err)
	}
	if _, err := b.store.Resolve(b.ctx, "nope"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("Resolve(nope) err = %v; want ErrNotFound", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestSendSequenced: each sent message gets back the sequence number it was stored under, in a
// batch (a duplicate, not stored, gets 0), across requests sharing one group commit, and 0 for
// a topic, whose copies live in its subscriptions.
func TestSendSequenced(t *testing.T) {
	b := setup(t)
	q := b.queue(t, "q", func(p *broker.Properties) {
		p.RequiresDuplicateDetection = true
		p.DuplicateDetectionHistoryTimeWindow = time.Minute
	})
	seqOf := func() map[string]int64 {
		t.Helper()
		msgs, err := b.store.Browse(b.ctx, q, broker.SubQueueMain, 0, broker.MaxBrowse)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, m := range msgs {
			got[string(m.Body)] = m.SequenceNumber
		}
		return got
	}
	seqs, err := b.store.SendSequenced(b.ctx, q, []broker.Message{
		{Body: []byte("a"), MessageID: "a"}, {Body: []byte("b"), MessageID: "b"},
		{Body: []byte("dup"), MessageID: "a"}, {Body: []byte("c"), MessageID: "c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	stored := seqOf()
	if want := []int64{stored["a"], stored["b"], 0, stored["c"]}; !slices.Equal(seqs, want) || len(stored) != 3 {
		t.Errorf("SendSequenced = %v; want %v (stored %v)", seqs, want, stored)
	}

	// Concurrent single sends share group commits; each gets its own number.
	const n = 24
	got := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := b.store.SendSequenced(b.ctx, q, []broker.Message{{Body: []byte("p" + strconv.Itoa(i))}, {Body: []byte("r" + strconv.Itoa(i))}})
			if err != nil {
				t.Error(err)
				return
			}
			if len(s) == 2 {
				got[i] = s[0]
				if s[1] <= s[0] {
					t.Errorf("send %d: sequence numbers %v; want increasing", i, s)
				}
			}
		}()
	}
	wg.Wait()
	stored = seqOf()
	for i := range n {
		if want := stored["p"+strconv.Itoa(i)]; got[i] != want || want == 0 {
			t.Errorf("send %d got sequence number %d; stored as %d", i, got[i], want)
		}
	}

	topic := b.topic(t, "t", nil)
	b.sub(t, "t", "s", nil, nil)
	// To a topic: the number its copies share as their EnqueuedSequenceNumber (what cancels them).
	seqs, err = b.store.SendSequenced(b.ctx, topic, []broker.Message{body("x")})
	if err != nil || len(seqs) != 1 || seqs[0] == 0 {
		t.Fatalf("SendSequenced to a topic = %v, %v; want one number", seqs, err)
	}
	sub, err := b.store.Resolve(b.ctx, "t/Subscriptions/s")
	if err != nil {
		t.Fatal(err)
	}
	if m := b.receive(t, sub, broker.SubQueueMain, broker.ReceiveAndDelete); m == nil || m.EnqueuedSequenceNumber != seqs[0] {
		t.Errorf("the subscription's copy: %+v; want EnqueuedSequenceNumber %d", m, seqs[0])
	}
}
