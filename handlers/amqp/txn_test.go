package amqp_test

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
	amqpdoor "github.com/sbgate/sbgate/handlers/amqp"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// Transactions as the .NET SDK runs them (azure-amqp Transaction/Controller.cs,
// AmqpTransactionEnlistment; Azure.Messaging.ServiceBus AmqpSender and AmqpReceiver with an
// ambient Transaction): a controller link to the coordinator on a session of its own, declare,
// transfers and dispositions carrying transactional-state{txn-id}, discharge.

const (
	dnDeclare    = 0x31
	dnDischarge  = 0x32
	dnTxnState   = 0x34
	dnRejectedTx = 0x25
)

// dnController is Controller: a sender link to the coordinator.
type dnController struct {
	c   *dnConn
	s   *dnSession
	l   *dnLink
	tag uint64
}

// openController opens Controller's link on s (the ctor: a sender named by a new Guid "N",
// source {address the same Guid, distribution-mode move}, target Coordinator with no
// capabilities) and waits for its credit.
func (c *dnConn) openController(s *dnSession) *dnController {
	c.t.Helper()
	n := dnNull()
	name := dnNewGUID("N")
	l := c.attach(s, name, false, n, n, dnSourceOf(dnString(name), dnSymbol("move"), n), dnPerf(dnCoordinator, n), dnUint(0), n)
	a := c.awaitAttach(l)
	if a.Coordinator == nil {
		c.t.Fatalf("the coordinator attach was answered without a coordinator target (%#v): Controller.OpenAsync fails\n    bytes %s", a.Target, hex.EncodeToString(l.raw))
	}
	if !slices.Contains(a.Coordinator.Capabilities, "amqp:local-transactions") {
		c.t.Errorf("the coordinator's capabilities %v lack amqp:local-transactions", a.Coordinator.Capabilities)
	}
	c.awaitCredit(l)
	return &dnController{c: c, s: s, l: l}
}

// command sends a declare or discharge as Controller does (an amqp-value, an 8-byte
// little-endian counter for a tag, unsettled) and returns the outcome.
func (co *dnController) command(what string, body []byte) (amqp.DeliveryState, []byte) {
	co.c.t.Helper()
	co.tag++
	id := co.c.transfer(co.l, binary.LittleEndian.AppendUint64(nil, co.tag), 0, false, false, dnDescribed(dnValue, body))
	d, raw := co.c.awaitDisposition(what, co.s, amqp.RoleReceiver, id)
	if !d.Settled {
		co.c.t.Errorf("%s: the outcome is not settled\n    bytes %s", what, hex.EncodeToString(raw))
	}
	return d.State, raw
}

// declare declares a transaction and returns its id.
func (co *dnController) declare() []byte {
	co.c.t.Helper()
	st, raw := co.command("declare", dnPerf(dnDeclare))
	d, ok := st.(amqp.Declared)
	if !ok || len(d.TxnID) == 0 {
		co.c.t.Fatalf("declare answered %#v; want declared with a txn-id\n    bytes %s", st, hex.EncodeToString(raw))
	}
	return d.TxnID
}

// discharge ends a transaction (fail: roll it back) and returns the outcome.
func (co *dnController) discharge(id []byte, fail bool) amqp.DeliveryState {
	co.c.t.Helper()
	st, _ := co.command("discharge", dnPerf(dnDischarge, dnBinary(id), dnBool(fail)))
	return st
}

// dnInTxn is the transactional-state a transfer in transaction id carries, with outcome
// (nil: none) for a disposition.
func dnInTxn(id []byte, outcome []byte) []byte {
	if outcome == nil {
		return dnPerf(dnTxnState, dnBinary(id))
	}
	return dnPerf(dnTxnState, dnBinary(id), outcome)
}

// messageIDs are the MessageIds of what path's main queue holds, in order.
func (b *testBroker) messageIDs(t *testing.T, path string) []string {
	t.Helper()
	e, err := b.store.GetEntity(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := b.store.Browse(t.Context(), e, broker.SubQueueMain, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.MessageID)
	}
	return ids
}

// txnClient is a .NET client with a put-token for every entity it uses, a controller, and
// helpers for links.
type txnClient struct {
	t   *testing.T
	b   *testBroker
	c   *dnConn
	cbs *dnRR
	co  *dnController
}

func newTxnClient(t *testing.T, b *testBroker, paths ...string) *txnClient {
	tc := dialTxnClient(t, b, paths...)
	tc.co = tc.c.openController(tc.c.begin(math.MaxUint32))
	return tc
}

// newCrossEntityClient is the .NET SDK's cross-entity mode: the controller is the first link of
// the one session (returned) every link then uses.
func newCrossEntityClient(t *testing.T, b *testBroker, paths ...string) (*txnClient, *dnSession) {
	tc := dialTxnClient(t, b, paths...)
	s := tc.c.begin(math.MaxUint32)
	tc.co = tc.c.openController(s)
	return tc, s
}

// dialTxnClient connects and puts a token for each of paths; the controller is the caller's.
func dialTxnClient(t *testing.T, b *testBroker, paths ...string) *txnClient {
	c := dnDial(t, b)
	c.handshake()
	tc := &txnClient{t: t, b: b, c: c, cbs: c.openCBS()}
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, p := range paths {
		id, r := c.putToken(tc.cbs, dnSASToken, dnAudience(p), dnToken("key", exp), exp)
		dnCheckReply(t, "put-token for "+p, id, r, "status-code", "status-description", 202)
	}
	return tc
}

// sender opens a sending link to target on a session of its own, with properties (nil: none).
func (tc *txnClient) sender(s *dnSession, target string, properties []byte) (*dnLink, *amqp.Attach) {
	n := dnNull()
	if properties == nil {
		properties = n
	}
	l := tc.c.attach(s, dnNewGUID("D"), false, n, n, dnSourceOf(dnString(dnNewGUID("D")), n, n), dnTargetOf(dnString("/"+target)), dnUint(0), properties)
	a := tc.c.awaitAttach(l)
	if a.Target == nil {
		tc.t.Fatalf("the sender to %s was refused\n    bytes %s", target, hex.EncodeToString(l.raw))
	}
	tc.c.awaitCredit(l)
	return l, a
}

// send sends one message in transaction id and returns the outcome.
func (tc *txnClient) send(l *dnLink, tag int32, id []byte, msgID string) (amqp.DeliveryState, []byte) {
	did := tc.c.transferState(l, dnLE32(tag), 0, false, true, dnInTxn(id, nil), dnMessage(msgID, time.Now(), "body of "+msgID))
	d, raw := tc.c.awaitDisposition("send "+msgID, l.s, amqp.RoleReceiver, did)
	return d.State, raw
}

// receive peek-locks one message of path on a session of its own.
func (tc *txnClient) receive(path string) (*dnLink, *amqp.Transfer) {
	return tc.receiveOn(tc.c.begin(math.MaxUint32), path)
}

// receiveOn peek-locks one message of path on session s.
func (tc *txnClient) receiveOn(s *dnSession, path string) (*dnLink, *amqp.Transfer) {
	n := dnNull()
	l := tc.c.attach(s, dnNewGUID("D"), true, n, dnUbyte(1), dnSourceOf(dnString("/"+path), n, dnMap()), dnTargetOf(dnString(dnNewGUID("D"))), n, n)
	a := tc.c.awaitAttach(l)
	tc.c.flow(l, *a.InitialDeliveryCount, 1)
	tr, _, _ := tc.c.awaitMessage("the message of "+path, l)
	return l, tr
}

// settle sends a disposition of a received delivery with state and returns the answer.
func (tc *txnClient) settle(l *dnLink, tr *amqp.Transfer, state []byte) (*amqp.Disposition, []byte) {
	tc.c.disposition(l.s, true, *tr.DeliveryID, false, state)
	return tc.c.awaitDisposition("the answer to the settlement", l.s, amqp.RoleSender, *tr.DeliveryID)
}

func wantAcceptedInTxn(t *testing.T, what string, st amqp.DeliveryState, id []byte, raw []byte) {
	t.Helper()
	ts, ok := st.(amqp.TransactionalState)
	if _, accepted := ts.Outcome.(amqp.Accepted); !ok || !accepted || !slices.Equal(ts.TxnID, id) {
		t.Errorf("%s: outcome %#v; want transactional-state{txn-id, accepted}\n    bytes %s", what, st, hex.EncodeToString(raw))
	}
}

func wantRejected(t *testing.T, what string, st amqp.DeliveryState, cond amqp.Symbol) {
	t.Helper()
	r, ok := st.(amqp.Rejected)
	if !ok || r.Error == nil || r.Error.Condition != cond {
		t.Errorf("%s: outcome %#v; want rejected with %s", what, st, cond)
	}
}

// Receive, process, send via the received-from queue, complete: nothing is visible before the
// commit, all of it after.
func TestTransactionSendViaAndComplete(t *testing.T) {
	b := newBroker(t)
	in := b.createQueue(t, "in", nil)
	b.createQueue(t, "out", nil)
	if err := b.store.Send(t.Context(), in, []broker.Message{{MessageID: "work", Body: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	tc := newTxnClient(t, b, "in", "out")
	rl, tr := tc.receive("in")
	id := tc.co.declare()

	// The sender to out via in: the service echoes the destination in its attach.
	snd, a := tc.sender(tc.c.begin(math.MaxUint32), "in", dnMap(dnSymbol("com.microsoft:transfer-destination-address"), dnString("out")))
	if v, _ := dnProp(a, "com.microsoft:transfer-destination-address"); v != "out" {
		t.Errorf("send-via attach answer properties %#v; want the transfer-destination-address echoed", a.Properties)
	}
	st, raw := tc.send(snd, 1, id, "result")
	wantAcceptedInTxn(t, "the send in the transaction", st, id, raw)
	d, raw := tc.settle(rl, tr, dnInTxn(id, dnPerf(dnAccepted)))
	if !d.Settled {
		t.Errorf("the completion in the transaction was answered unsettled")
	}
	wantAcceptedInTxn(t, "the completion in the transaction", d.State, id, raw)

	if got := b.messageIDs(t, "out"); len(got) != 0 {
		t.Errorf("out holds %q before the commit; want nothing", got)
	}
	if got := b.messageIDs(t, "in"); !slices.Equal(got, []string{"work"}) {
		t.Errorf("in holds %q before the commit; want the received message, still locked", got)
	}
	if st := tc.co.discharge(id, false); st == nil || !isAccepted(st) {
		t.Fatalf("commit: %#v; want accepted", st)
	}
	if got := b.messageIDs(t, "out"); !slices.Equal(got, []string{"result"}) {
		t.Errorf("out holds %q after the commit; want the message sent", got)
	}
	if got := b.messageIDs(t, "in"); len(got) != 0 {
		t.Errorf("in holds %q after the commit; want the completed message gone", got)
	}
	if st := tc.co.discharge(id, false); !isRejectedWith(st, "amqp:transaction:unknown-id") {
		t.Errorf("a second discharge: %#v; want rejected with amqp:transaction:unknown-id", st)
	}
}

func isAccepted(st amqp.DeliveryState) bool { _, ok := st.(amqp.Accepted); return ok }

func isRejectedWith(st amqp.DeliveryState, cond amqp.Symbol) bool {
	r, ok := st.(amqp.Rejected)
	return ok && r.Error != nil && r.Error.Condition == cond
}

// A rollback forgets the sends and settlements; the received message stays locked until its
// lock ends, then comes back.
func TestTransactionRollback(t *testing.T) {
	b := newBroker(t)
	q := b.createQueue(t, "q", nil)
	if err := b.store.Send(t.Context(), q, []broker.Message{{MessageID: "work", Body: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	tc := newTxnClient(t, b, "q")
	rl, tr := tc.receive("q")
	id := tc.co.declare()
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "q", nil)
	st, raw := tc.send(snd, 1, id, "new")
	wantAcceptedInTxn(t, "the send", st, id, raw)
	d, raw := tc.settle(rl, tr, dnInTxn(id, dnPerf(dnAccepted)))
	wantAcceptedInTxn(t, "the completion", d.State, id, raw)
	if st := tc.co.discharge(id, true); !isAccepted(st) {
		t.Fatalf("rollback: %#v; want accepted", st)
	}
	if got := b.messageIDs(t, "q"); !slices.Equal(got, []string{"work"}) {
		t.Errorf("q holds %q after the rollback; want only the received message", got)
	}
	// Still locked by the rolled-back receive: its lock is the receiver's until it ends.
	e, _ := b.store.GetEntity(t.Context(), "q")
	res := b.store.Settle(t.Context(), broker.Target{Entity: e}, []broker.SettleRequest{{Op: broker.RenewLock, Token: dnLockToken(tr.DeliveryTag)}})
	if res[0].Err != nil {
		t.Errorf("the lock after the rollback: %v; want still held", res[0].Err)
	}
}

// A lock that lapses before the commit fails the discharge with amqp:transaction:rollback and
// nothing of the transaction is applied.
func TestTransactionLockLapsedBeforeCommit(t *testing.T) {
	b := newBroker(t)
	q := b.createQueue(t, "q", func(p *broker.Properties) { p.LockDuration = 5 * time.Second })
	if err := b.store.Send(t.Context(), q, []broker.Message{{MessageID: "work", Body: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	tc := newTxnClient(t, b, "q")
	rl, tr := tc.receive("q")
	id := tc.co.declare()
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "q", nil)
	tc.send(snd, 1, id, "new")
	tc.settle(rl, tr, dnInTxn(id, dnPerf(dnAccepted)))
	b.clock.Advance(6 * time.Second)
	st := tc.co.discharge(id, false)
	r, ok := st.(amqp.Rejected)
	if !ok || r.Error == nil || r.Error.Condition != "amqp:transaction:rollback" {
		t.Fatalf("commit after the lock lapsed: %#v; want rejected with amqp:transaction:rollback", st)
	}
	if got := b.messageIDs(t, "q"); !slices.Equal(got, []string{"work"}) {
		t.Errorf("q holds %q; want only the message whose completion was rolled back", got)
	}
}

// Without send-via or cross-entity, a transaction works on one entity: a send elsewhere is
// refused, and the transaction goes on.
func TestTransactionOneEntity(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "a", nil)
	b.createQueue(t, "b", nil)
	tc := newTxnClient(t, b, "a", "b")
	id := tc.co.declare()
	sa, _ := tc.sender(tc.c.begin(math.MaxUint32), "a", nil)
	sb, _ := tc.sender(tc.c.begin(math.MaxUint32), "b", nil)
	st, raw := tc.send(sa, 1, id, "to-a")
	wantAcceptedInTxn(t, "the send to a", st, id, raw)
	st, _ = tc.send(sb, 1, id, "to-b")
	wantRejected(t, "a send to b in a's transaction", st, "amqp:not-allowed")
	// All or nothing: with one operation refused, the commit can only fail.
	if st := tc.co.discharge(id, false); !isRejectedWith(st, "amqp:transaction:rollback") {
		t.Fatalf("commit after a refused operation: %#v; want rejected with amqp:transaction:rollback", st)
	}
	if a, bb := b.messageIDs(t, "a"), b.messageIDs(t, "b"); len(a) != 0 || len(bb) != 0 {
		t.Errorf("a holds %q, b %q; want nothing", a, bb)
	}
}

// The .NET SDK's cross-entity transactions: the controller is the first link of the one
// session every link then uses, and sends go straight to their entities.
func TestTransactionCrossEntitySession(t *testing.T) {
	b := newBroker(t)
	in := b.createQueue(t, "in", nil)
	b.createQueue(t, "out", nil)
	if err := b.store.Send(t.Context(), in, []broker.Message{{MessageID: "work", Body: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	tc, s := newCrossEntityClient(t, b, "in", "out")
	rl, tr := tc.receiveOn(s, "in")
	id := tc.co.declare()
	d, raw := tc.settle(rl, tr, dnInTxn(id, dnPerf(dnAccepted)))
	wantAcceptedInTxn(t, "the completion", d.State, id, raw)
	snd, _ := tc.sender(s, "out", nil)
	st, raw := tc.send(snd, 1, id, "result")
	wantAcceptedInTxn(t, "the send to out", st, id, raw)
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Fatalf("commit: %#v", st)
	}
	if got, gone := b.messageIDs(t, "out"), b.messageIDs(t, "in"); !slices.Equal(got, []string{"result"}) || len(gone) != 0 {
		t.Errorf("out holds %q, in %q; want result in out, in empty", got, gone)
	}
}

// A transaction sends at most 100 messages, as the service allows.
func TestTransactionMessageLimit(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	tc := newTxnClient(t, b, "q")
	id := tc.co.declare()
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "q", nil)
	for i := range broker.MaxTransactionMessages {
		if st, raw := tc.send(snd, int32(i), id, "m"); !isTxnAccepted(st) {
			t.Fatalf("send %d: %#v\n    bytes %s", i, st, hex.EncodeToString(raw))
		}
	}
	st, _ := tc.send(snd, 1000, id, "one too many")
	wantRejected(t, "send 101", st, "amqp:resource-limit-exceeded")
	if st := tc.co.discharge(id, false); !isRejectedWith(st, "amqp:transaction:rollback") {
		t.Fatalf("commit after the refused send: %#v; want rejected with amqp:transaction:rollback", st)
	}
	if got := b.messageIDs(t, "q"); len(got) != 0 {
		t.Errorf("q holds %d messages; want none", len(got))
	}
	// Within the limit, all 100 commit.
	id = tc.co.declare()
	for i := range broker.MaxTransactionMessages {
		if st, raw := tc.send(snd, int32(2000+i), id, "m"); !isTxnAccepted(st) {
			t.Fatalf("send %d: %#v\n    bytes %s", i, st, hex.EncodeToString(raw))
		}
	}
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Fatalf("commit: %#v", st)
	}
	if got := b.messageIDs(t, "q"); len(got) != broker.MaxTransactionMessages {
		t.Errorf("q holds %d messages; want %d", len(got), broker.MaxTransactionMessages)
	}
}

func isTxnAccepted(st amqp.DeliveryState) bool {
	ts, ok := st.(amqp.TransactionalState)
	return ok && isAccepted(ts.Outcome)
}

// A transaction not discharged within its timeout is rolled back; its discharge says so.
func TestTransactionTimeout(t *testing.T) {
	b := newBrokerConfig(t, func(c *amqpdoor.Config) { c.TransactionTimeout = 300 * time.Millisecond })
	b.createQueue(t, "q", nil)
	tc := newTxnClient(t, b, "q")
	id := tc.co.declare()
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "q", nil)
	tc.send(snd, 1, id, "late")
	// A send after the timeout is refused with it: that is the condition waited for.
	// Each probe is one of the transaction's 100 messages: the waiter's pauses keep them few.
	tag := int32(2)
	eventually.NoError(t, "the transaction to time out", func() error {
		st, _ := tc.send(snd, tag, id, "probe")
		tag++
		if isRejectedWith(st, "amqp:transaction:timeout") {
			return nil
		}
		return fmt.Errorf("the transaction did not time out: %#v", st)
	})
	if st := tc.co.discharge(id, false); !isRejectedWith(st, "amqp:transaction:timeout") {
		t.Errorf("commit after the timeout: %#v; want rejected with amqp:transaction:timeout", st)
	}
	if got := b.messageIDs(t, "q"); len(got) != 0 {
		t.Errorf("q holds %q; want nothing of the timed-out transaction", got)
	}
}

// Settlements through $management (update-disposition, as the SDKs settle deferred messages)
// carry the transaction in their request's transfer state.
func TestTransactionManagementDisposition(t *testing.T) {
	b := newBroker(t)
	q := b.createQueue(t, "q", nil)
	if err := b.store.Send(t.Context(), q, []broker.Message{{MessageID: "work", Body: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	tc := newTxnClient(t, b, "q", "q/$management")
	_, tr := tc.receive("q")
	id := tc.co.declare()
	mgmt := tc.c.openRR(tc.c.begin(5000), "q/$management", dnMap(dnSymbol("com.microsoft:entity-type"), dnString("entity-mgmt")))
	lock := dnLockToken(tr.DeliveryTag)
	// A renewal in a transaction (the Service Bus document lists it) renews at once.
	reqID, r := tc.c.requestState(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:renew-lock")},
		dnMap(dnString("lock-tokens"), dnArray(0x98, lock[:])), dnInTxn(id, nil))
	dnCheckReply(t, "renew-lock in the transaction", reqID, r, "statusCode", "statusDescription", 200)
	reqID, r = tc.c.requestState(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:update-disposition")},
		dnMap(dnString("lock-tokens"), dnArray(0x98, lock[:]), dnString("disposition-status"), dnString("completed")), dnInTxn(id, nil))
	dnCheckReply(t, "update-disposition in the transaction", reqID, r, "statusCode", "statusDescription", 200)
	if got := b.messageIDs(t, "q"); !slices.Equal(got, []string{"work"}) {
		t.Errorf("q holds %q before the commit; want the message", got)
	}
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Fatalf("commit: %#v", st)
	}
	if got := b.messageIDs(t, "q"); len(got) != 0 {
		t.Errorf("q holds %q after the commit; want nothing", got)
	}
	// A read in a transaction (the .NET SDK sends every request of a TransactionScope with its
	// id) is made at once and leaves the transaction as it was.
	id = tc.co.declare()
	reqID, r = tc.c.requestState(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:peek-message")},
		dnMap(dnString("from-sequence-number"), dnLong(0), dnString("message-count"), dnInt(1)), dnInTxn(id, nil))
	dnCheckReply(t, "peek in the transaction", reqID, r, "statusCode", "statusDescription", 204)
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Errorf("commit after a peek: %#v; want accepted", st)
	}
	// An operation no transaction can include is refused, and dooms its transaction.
	id = tc.co.declare()
	reqID, r = tc.c.requestState(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:cancel-scheduled-message")},
		dnMap(dnString("sequence-numbers"), dnArray(0x81, binary.BigEndian.AppendUint64(nil, 1))), dnInTxn(id, nil))
	dnCheckReply(t, "cancel-scheduled-message in the transaction", reqID, r, "statusCode", "statusDescription", 400)
	if st := tc.co.discharge(id, false); !isRejectedWith(st, "amqp:transaction:rollback") {
		t.Errorf("commit after a refused operation: %#v; want rejected with amqp:transaction:rollback", st)
	}
}

// A connection that closes rolls back its open transactions.
func TestTransactionConnectionClosed(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	tc := newTxnClient(t, b, "q")
	id := tc.co.declare()
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "q", nil)
	st, raw := tc.send(snd, 1, id, "never")
	wantAcceptedInTxn(t, "the send", st, id, raw)
	_ = tc.c.nc.Close()
	// A new connection cannot discharge it (transactions belong to their connection), and
	// nothing was stored.
	other := newTxnClient(t, b, "q")
	if st := other.co.discharge(id, false); !isRejectedWith(st, "amqp:transaction:unknown-id") {
		t.Errorf("discharge from another connection: %#v; want amqp:transaction:unknown-id", st)
	}
	if got := b.messageIDs(t, "q"); len(got) != 0 {
		t.Errorf("q holds %q; want nothing", got)
	}
}

// A connection holds at most MaxOpenTxns transactions open: a peer cannot make the gateway keep
// transactions without end. Discharging one makes room.
func TestTransactionsPerConnection(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	tc := newTxnClient(t, b, "q")
	var first []byte
	for i := range amqpdoor.MaxOpenTxns {
		id := tc.co.declare()
		if i == 0 {
			first = id
		}
	}
	st, _ := tc.co.command("one declare too many", dnPerf(dnDeclare))
	wantRejected(t, "declare beyond the limit", st, "amqp:resource-limit-exceeded")
	if st := tc.co.discharge(first, true); !isAccepted(st) {
		t.Fatalf("rollback: %#v", st)
	}
	tc.co.declare()
}

// An update-disposition in a transaction is recorded whole or not at all: one that fails (a
// lock named twice) leaves nothing of it, and its transaction can then only roll back.
func TestTransactionManagementDispositionAllOrNone(t *testing.T) {
	b := newBroker(t)
	q := b.createQueue(t, "q", nil)
	if err := b.store.Send(t.Context(), q, []broker.Message{{MessageID: "work", Body: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	tc := newTxnClient(t, b, "q", "q/$management")
	_, tr := tc.receive("q")
	id := tc.co.declare()
	mgmt := tc.c.openRR(tc.c.begin(5000), "q/$management", dnMap(dnSymbol("com.microsoft:entity-type"), dnString("entity-mgmt")))
	lock := dnLockToken(tr.DeliveryTag)
	reqID, r := tc.c.requestState(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:update-disposition")},
		dnMap(dnString("lock-tokens"), dnArray(0x98, lock[:], lock[:]), dnString("disposition-status"), dnString("completed")), dnInTxn(id, nil))
	dnCheckReply(t, "update-disposition naming one lock twice", reqID, r, "statusCode", "statusDescription", 410)
	if st := tc.co.discharge(id, false); !isRejectedWith(st, "amqp:transaction:rollback") {
		t.Fatalf("commit after the failed request: %#v; want rejected with amqp:transaction:rollback", st)
	}
	if got := b.messageIDs(t, "q"); !slices.Equal(got, []string{"work"}) {
		t.Errorf("q holds %q after the commit; want the message: the failed request recorded nothing", got)
	}
}

// schedule asks q's management node to schedule one message in transaction id and returns the
// number the reply gives it.
func (tc *txnClient) schedule(mgmt *dnRR, id []byte, msgID string, at time.Time) int64 {
	tc.t.Helper()
	payload, err := amqp.Marshal(&amqp.Message{
		MessageAnnotations: amqp.Map{{Key: amqp.Symbol("x-opt-scheduled-enqueue-time"), Value: at}},
		Properties:         &amqp.Properties{MessageID: msgID},
		Data:               [][]byte{[]byte("scheduled " + msgID)},
	})
	if err != nil {
		tc.t.Fatal(err)
	}
	reqID, r := tc.c.requestState(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:schedule-message")},
		dnMap(dnString("messages"), dnList(dnMap(dnString("message-id"), dnString(msgID), dnString("message"), dnBinary(payload)))), dnInTxn(id, nil))
	dnCheckReply(tc.t, "schedule-message in the transaction", reqID, r, "statusCode", "statusDescription", 200)
	body, _ := r.m.Value.(amqp.Map)
	v, _ := body.Get("sequence-numbers")
	arr, ok := v.(amqp.Array)
	if !ok || len(arr.Elems) != 1 {
		tc.t.Fatalf("schedule-message reply %#v; want one sequence number", r.m.Value)
	}
	n, _ := arr.Elems[0].(int64)
	return n
}

// Scheduling through $management in a transaction: the reply names the number before the
// commit, nothing is stored before it, and after it the message (or a topic's copies) is
// scheduled under that number, by which it is cancelled.
func TestTransactionSchedule(t *testing.T) {
	b := newBroker(t)
	q := b.createQueue(t, "q", nil)
	top, err := b.store.CreateEntity(t.Context(), broker.KindTopic, "t", broker.DefaultProperties(broker.KindTopic))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.CreateSubscription(t.Context(), "t/Subscriptions/s", broker.DefaultProperties(broker.KindSubscription), nil); err != nil {
		t.Fatal(err)
	}
	tc := newTxnClient(t, b, "q/$management", "t/$management")
	at := time.Now().Add(time.Hour)

	id := tc.co.declare()
	mq := tc.c.openRR(tc.c.begin(5000), "q/$management", dnMap(dnSymbol("com.microsoft:entity-type"), dnString("entity-mgmt")))
	n := tc.schedule(mq, id, "later", at)
	if got := b.messageIDs(t, "q"); len(got) != 0 {
		t.Errorf("q holds %q before the commit; want nothing", got)
	}
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Fatalf("commit: %#v", st)
	}
	msgs, err := b.store.Browse(t.Context(), q, broker.SubQueueMain, 0, 10)
	if err != nil || len(msgs) != 1 || msgs[0].SequenceNumber != n || msgs[0].MessageID != "later" {
		t.Fatalf("q after the commit: %+v, %v; want the message scheduled as number %d", msgs, err, n)
	}
	if err := b.store.CancelScheduled(t.Context(), q, []int64{n}); err != nil {
		t.Errorf("cancel by the number the transaction's reply gave: %v", err)
	}

	id = tc.co.declare()
	mt := tc.c.openRR(tc.c.begin(5000), "t/$management", dnMap(dnSymbol("com.microsoft:entity-type"), dnString("entity-mgmt")))
	n = tc.schedule(mt, id, "later-t", at)
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Fatalf("commit on the topic: %#v", st)
	}
	scheduled := func() int64 {
		sub, err := b.store.GetEntity(t.Context(), "t/Subscriptions/s")
		if err != nil {
			t.Fatal(err)
		}
		return sub.Counts.Scheduled
	}
	if got := scheduled(); got != 1 {
		t.Errorf("the subscription holds %d scheduled copies after the commit; want 1", got)
	}
	if err := b.store.CancelScheduled(t.Context(), top, []int64{n}); err != nil {
		t.Errorf("cancel on the topic by the transaction's number: %v", err)
	}
	if got := scheduled(); got != 0 {
		t.Errorf("the subscription holds %d scheduled copies after the cancel; want none", got)
	}
}

// Send-via without a transaction delivers to the destination; it needs Send on the entity it
// goes through and on the destination.
func TestSendViaWithoutTransaction(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "in", nil)
	b.createQueue(t, "out", nil)
	tc := newTxnClient(t, b) // no token yet: one scoped to in alone, then one for out
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	scoped := func(path string) {
		rid, r := tc.c.putToken(tc.cbs, dnSASToken, dnAudience(path), sas.Sign("amqps://"+dnHost+"/"+path, "root", "key", exp), exp)
		dnCheckReply(t, "put-token for "+path, rid, r, "status-code", "status-description", 202)
	}
	scoped("in")
	n := dnNull()
	via := dnMap(dnSymbol("com.microsoft:transfer-destination-address"), dnString("out"))
	l := tc.c.attach(tc.c.begin(math.MaxUint32), dnNewGUID("D"), false, n, n, dnSourceOf(dnString(dnNewGUID("D")), n, n), dnTargetOf(dnString("/in")), dnUint(0), via)
	if a := tc.c.awaitAttach(l); a.Target != nil {
		t.Fatalf("send-via to out with a token for in only was accepted")
	}
	scoped("out")
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "in", via)
	id := tc.c.transfer(snd, dnLE32(1), 0, false, true, dnMessage("direct", time.Now(), "via in"))
	dnCheckSendOutcome(t, tc.c, "send-via without a transaction", snd.s, id)
	if got, in := b.messageIDs(t, "out"), b.messageIDs(t, "in"); !slices.Equal(got, []string{"direct"}) || len(in) != 0 {
		t.Errorf("out holds %q, in %q; want the message in out only", got, in)
	}
}

// Every refusal of an operation made in a transaction dooms it, wherever it is refused: here a
// send that does not decode, before the transaction's own checks.
func TestTransactionRefusedSendDooms(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	tc := newTxnClient(t, b, "q")
	id := tc.co.declare()
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "q", nil)
	if st, raw := tc.send(snd, 1, id, "fine"); !isTxnAccepted(st) {
		t.Fatalf("send: %#v\n    bytes %s", st, hex.EncodeToString(raw))
	}
	did := tc.c.transferState(snd, dnLE32(2), 0, false, true, dnInTxn(id, nil), []byte{0xff, 0x00})
	d, _ := tc.c.awaitDisposition("the send that does not decode", snd.s, amqp.RoleReceiver, did)
	if _, ok := d.State.(amqp.Rejected); !ok {
		t.Fatalf("a send that does not decode: %#v; want rejected", d.State)
	}
	if st := tc.co.discharge(id, false); !isRejectedWith(st, "amqp:transaction:rollback") {
		t.Fatalf("commit after a refused send: %#v; want rejected with amqp:transaction:rollback", st)
	}
	if got := b.messageIDs(t, "q"); len(got) != 0 {
		t.Errorf("q holds %q; want nothing", got)
	}
}

// Setting a session state in a transaction, as the .NET SDK's transactions sample does
// (complete the session's message and set its state, one transaction): the state is set when
// the transaction commits, under the session lock, and not before.
func TestTransactionSessionState(t *testing.T) {
	b := newBroker(t)
	sq := b.createQueue(t, "sq", func(p *broker.Properties) { p.RequiresSession = true })
	if err := b.store.Send(t.Context(), sq, []broker.Message{{MessageID: "m", Body: []byte("one"), SessionID: "s1"}}); err != nil {
		t.Fatal(err)
	}
	tc := newTxnClient(t, b, "sq", "sq/$management")
	n := dnNull()
	s := tc.c.begin(math.MaxUint32)
	rl := tc.c.attach(s, dnNewGUID("D"), true, n, dnUbyte(1),
		dnSourceOf(dnString("/sq"), n, dnMap(dnSymbol("com.microsoft:session-filter"), dnString("s1"))), dnTargetOf(dnString(dnNewGUID("D"))), n, n)
	a := tc.c.awaitAttach(rl)
	tc.c.flow(rl, *a.InitialDeliveryCount, 1)
	tr, _, _ := tc.c.awaitMessage("the session's message", rl)
	mgmt := tc.c.openRR(tc.c.begin(5000), "sq/$management", dnMap(dnSymbol("com.microsoft:entity-type"), dnString("entity-mgmt")))

	id := tc.co.declare()
	d, raw := tc.settle(rl, tr, dnInTxn(id, dnPerf(dnAccepted)))
	wantAcceptedInTxn(t, "the completion", d.State, id, raw)
	reqID, r := tc.c.requestState(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:set-session-state")},
		dnMap(dnString("session-id"), dnString("s1"), dnString("session-state"), dnBinary([]byte("some state"))), dnInTxn(id, nil))
	dnCheckReply(t, "set-session-state in the transaction", reqID, r, "statusCode", "statusDescription", 200)
	get := func(what string) []byte {
		reqID, r := tc.c.request(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:get-session-state")},
			dnMap(dnString("session-id"), dnString("s1")))
		dnCheckReply(t, what, reqID, r, "statusCode", "statusDescription", 200)
		body, _ := r.m.Value.(amqp.Map)
		v, _ := body.Get("session-state")
		b, _ := v.([]byte)
		return b
	}
	if got := get("get-session-state before the commit"); got != nil {
		t.Errorf("the session state before the commit: %q; want none", got)
	}
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Fatalf("commit: %#v", st)
	}
	if got := get("get-session-state after the commit"); string(got) != "some state" {
		t.Errorf("the session state after the commit: %q; want %q", got, "some state")
	}
	if got := b.messageIDs(t, "sq"); len(got) != 0 {
		t.Errorf("sq holds %q after the commit; want the completed message gone", got)
	}
}

// Cross-entity, as the .NET SDK's sample has it: sends are routed through the transaction's
// first entity, a settlement cannot be: one on another entity is refused.
func TestTransactionCrossEntitySettleElsewhere(t *testing.T) {
	b := newBroker(t)
	in := b.createQueue(t, "in", nil)
	b.createQueue(t, "out", nil)
	if err := b.store.Send(t.Context(), in, []broker.Message{{MessageID: "work", Body: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	tc, s := newCrossEntityClient(t, b, "in", "out")
	rl, tr := tc.receiveOn(s, "in")
	id := tc.co.declare()
	snd, _ := tc.sender(s, "out", nil)
	st, raw := tc.send(snd, 1, id, "first")
	wantAcceptedInTxn(t, "the first operation, a send to out", st, id, raw)
	d, _ := tc.settle(rl, tr, dnInTxn(id, dnPerf(dnAccepted)))
	wantRejected(t, "a completion on in after out became the transaction's entity", d.State, "amqp:not-allowed")
}

// A peer that settles first sends its transactional disposition and transfer settled and the
// discharge right after, expecting no answer in between: the discharge waits for what came
// before it on the wire, on whatever link, so the commit holds both.
func TestTransactionDischargeAfterSettledWork(t *testing.T) {
	b := newBroker(t)
	q := b.createQueue(t, "q", nil)
	if err := b.store.Send(t.Context(), q, []broker.Message{{MessageID: "work", Body: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	tc := newTxnClient(t, b, "q")
	n := dnNull()
	rs := tc.c.begin(math.MaxUint32)
	// Receiver settle mode first: the peer settles its outcomes itself.
	rl := tc.c.attach(rs, dnNewGUID("D"), true, n, dnUbyte(0), dnSourceOf(dnString("/q"), n, dnMap()), dnTargetOf(dnString(dnNewGUID("D"))), n, n)
	a := tc.c.awaitAttach(rl)
	tc.c.flow(rl, *a.InitialDeliveryCount, 1)
	tr, _, _ := tc.c.awaitMessage("the message", rl)
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "q", nil)
	id := tc.co.declare()
	tc.c.disposition(rs, true, *tr.DeliveryID, true, dnInTxn(id, dnPerf(dnAccepted)))
	tc.c.transferState(snd, dnLE32(1), 0, true, false, dnInTxn(id, nil), dnMessage("result", time.Now(), "r"))
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Fatalf("commit: %#v", st)
	}
	if got := b.messageIDs(t, "q"); !slices.Equal(got, []string{"result"}) {
		t.Errorf("q holds %q after the commit; want the completion and the send both in it", got)
	}
}

// A read or renewal that fails inside a transaction fails as outside one: the transaction goes
// on (the .NET SDK sends every request of a TransactionScope with its id).
func TestTransactionFailedReadLeavesIt(t *testing.T) {
	b := newBroker(t)
	b.createQueue(t, "q", nil)
	tc := newTxnClient(t, b, "q", "q/$management")
	id := tc.co.declare()
	snd, _ := tc.sender(tc.c.begin(math.MaxUint32), "q", nil)
	if st, raw := tc.send(snd, 1, id, "kept"); !isTxnAccepted(st) {
		t.Fatalf("send: %#v\n    bytes %s", st, hex.EncodeToString(raw))
	}
	mgmt := tc.c.openRR(tc.c.begin(5000), "q/$management", dnMap(dnSymbol("com.microsoft:entity-type"), dnString("entity-mgmt")))
	gone := dnLockToken([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	reqID, r := tc.c.requestState(mgmt, [][]byte{dnString("operation"), dnString("com.microsoft:renew-lock")},
		dnMap(dnString("lock-tokens"), dnArray(0x98, gone[:])), dnInTxn(id, nil))
	dnCheckReply(t, "renew-lock of a lock not held, in the transaction", reqID, r, "statusCode", "statusDescription", 410)
	if st := tc.co.discharge(id, false); !isAccepted(st) {
		t.Fatalf("commit after a failed renewal: %#v; want accepted", st)
	}
	if got := b.messageIDs(t, "q"); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("q holds %q; want the message sent in the transaction", got)
	}
}

// A distributed transaction (a declare with a global-id) is refused, as the README says.
func TestTransactionGlobalIDRefused(t *testing.T) {
	b := newBroker(t)
	tc := newTxnClient(t, b)
	st, _ := tc.co.command("declare with a global-id", dnPerf(dnDeclare, dnBinary([]byte("xid"))))
	wantRejected(t, "declare with a global-id", st, "amqp:not-implemented")
}
