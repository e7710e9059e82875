package program

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/internal/eventually"
)

// txnPeer is a minimal AMQP client, enough to run a transaction against a gateway process:
// SASL PLAIN with the namespace key, one session, a coordinator link (handle 0) and a sender
// link (handle 1). The SDKs cannot be used here: the Go SDK has no transactions.
type txnPeer struct {
	t      *testing.T
	nc     net.Conn
	br     *bufio.Reader
	nextID uint32
}

func dialTxnPeer(t *testing.T, addr, key, queue string) *txnPeer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	p := &txnPeer{t: t, nc: nc, br: bufio.NewReader(nc)}
	p.raw([]byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0})
	p.header()
	p.await(func(b amqp.Performative) bool { _, ok := b.(*amqp.SASLMechanisms); return ok })
	p.send(amqp.FrameTypeSASL, &amqp.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00RootManageSharedAccessKey\x00" + key)})
	out := p.await(func(b amqp.Performative) bool { _, ok := b.(*amqp.SASLOutcome); return ok }).(*amqp.SASLOutcome)
	if out.Code != 0 {
		t.Fatalf("SASL PLAIN refused: %+v", out)
	}
	p.raw([]byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0})
	p.header()
	p.send(amqp.FrameTypeAMQP, &amqp.Open{ContainerID: "txn-crash", Hostname: "localhost", MaxFrameSize: 65536})
	p.send(amqp.FrameTypeAMQP, &amqp.Begin{IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 7})
	p.send(amqp.FrameTypeAMQP, &amqp.Attach{Name: "coordinator", Handle: 0, Role: amqp.RoleSender,
		Source: &amqp.Source{Address: "controller"}, Coordinator: &amqp.Coordinator{}})
	p.send(amqp.FrameTypeAMQP, &amqp.Attach{Name: "sender", Handle: 1, Role: amqp.RoleSender,
		Source: &amqp.Source{Address: "s"}, Target: &amqp.Target{Address: queue}})
	credited := map[uint32]bool{}
	p.await(func(b amqp.Performative) bool {
		if f, ok := b.(*amqp.Flow); ok && f.Handle != nil && f.LinkCredit != nil && *f.LinkCredit > 0 {
			credited[*f.Handle] = true
		}
		if d, ok := b.(*amqp.Detach); ok {
			t.Fatalf("link %d detached: %v", d.Handle, d.Error)
		}
		return credited[0] && credited[1]
	})
	return p
}

func (p *txnPeer) raw(b []byte) {
	if _, err := p.nc.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

func (p *txnPeer) header() {
	var h [8]byte
	if _, err := io.ReadFull(p.br, h[:]); err != nil {
		p.t.Fatal(err)
	}
}

func (p *txnPeer) send(typ uint8, body amqp.Performative) {
	b, err := amqp.AppendFrame(nil, typ, 0, body)
	if err != nil {
		p.t.Fatal(err)
	}
	p.raw(b)
}

// await reads frames until match accepts a body, and returns it.
func (p *txnPeer) await(match func(amqp.Performative) bool) amqp.Performative {
	p.t.Helper()
	for {
		var size [4]byte
		if _, err := io.ReadFull(p.br, size[:]); err != nil {
			p.t.Fatalf("read a frame: %v", err)
		}
		buf := make([]byte, binary.BigEndian.Uint32(size[:]))
		copy(buf, size[:])
		if _, err := io.ReadFull(p.br, buf[4:]); err != nil {
			p.t.Fatalf("read a frame: %v", err)
		}
		f, _, err := amqp.ParseFrame(buf, 1<<20)
		if err != nil {
			p.t.Fatalf("parse a frame: %v", err)
		}
		if f.Body != nil && match(f.Body) {
			return f.Body
		}
	}
}

// transfer sends payload on handle with state, and returns the disposition's state.
func (p *txnPeer) transfer(handle uint32, state amqp.DeliveryState, m *amqp.Message) amqp.DeliveryState {
	p.t.Helper()
	payload, err := amqp.Marshal(m)
	if err != nil {
		p.t.Fatal(err)
	}
	id := p.nextID
	p.nextID++
	format := uint32(0)
	p.send(amqp.FrameTypeAMQP, &amqp.Transfer{Handle: handle, DeliveryID: &id, DeliveryTag: []byte(fmt.Sprint(id)),
		MessageFormat: &format, State: state, Payload: payload})
	d := p.await(func(b amqp.Performative) bool {
		d, ok := b.(*amqp.Disposition)
		return ok && d.Role == amqp.RoleReceiver && d.First <= id && (d.Last == nil && d.First == id || d.Last != nil && *d.Last >= id)
	}).(*amqp.Disposition)
	return d.State
}

func (p *txnPeer) declare() []byte {
	p.t.Helper()
	st := p.transfer(0, nil, &amqp.Message{Value: amqp.Described{Descriptor: uint64(0x31), Value: amqp.List{}}, HasValue: true})
	d, ok := st.(amqp.Declared)
	if !ok {
		p.t.Fatalf("declare: %#v", st)
	}
	return d.TxnID
}

func (p *txnPeer) sendInTxn(id []byte, msgID string) {
	p.t.Helper()
	st := p.transfer(1, amqp.TransactionalState{TxnID: id}, &amqp.Message{Properties: &amqp.Properties{MessageID: msgID}, Data: [][]byte{[]byte(msgID)}})
	if ts, ok := st.(amqp.TransactionalState); !ok || ts.Outcome == nil {
		p.t.Fatalf("send in the transaction: %#v", st)
	}
}

// dischargeAsync sends the commit and does not wait for its outcome.
func (p *txnPeer) dischargeAsync(id []byte) {
	payload, err := amqp.Marshal(&amqp.Message{Value: amqp.Described{Descriptor: uint64(0x32), Value: amqp.List{id, false}}, HasValue: true})
	if err != nil {
		p.t.Fatal(err)
	}
	did := p.nextID
	p.nextID++
	format := uint32(0)
	p.send(amqp.FrameTypeAMQP, &amqp.Transfer{Handle: 0, DeliveryID: &did, DeliveryTag: []byte("discharge"), MessageFormat: &format, Payload: payload})
}

// txnGateway starts a gateway process on url and returns its HTTP endpoint, its AMQP address
// and the means to kill it.
func txnGateway(t *testing.T, url string) (endpoint, amqpAddr string, kill func()) {
	t.Helper()
	out := &syncBuffer{}
	p, exited := sbgateProcess(t, out, "DATABASE_URL="+url, "SBGATE_SAS_KEY="+testKey)
	endpoint = waitEndpoint(t, out, exited)
	m := regexp.MustCompile(`sbgate serving AMQP" endpoint=amqp://(\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no AMQP endpoint in the log:\n%s", out)
	}
	return endpoint, strings.TrimSuffix(m[1], "/"), func() {
		_ = p.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// queueMessages is how many messages a queue holds, read through a gateway.
func queueMessages(t *testing.T, endpoint, queue string) int {
	t.Helper()
	st, _, body := call(t, http.MethodGet, endpoint+queue, nil, "")
	if st != http.StatusOK {
		t.Fatalf("get %s: %d %s", queue, st, body)
	}
	m := regexp.MustCompile(`<MessageCount>(\d+)</MessageCount>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no MessageCount in %s", body)
	}
	var n int
	fmt.Sscan(m[1], &n)
	return n
}

// A transaction lives in its gateway's memory until its commit: a gateway SIGKILLed between
// declare and discharge leaves nothing of it; one SIGKILLed during the commit (the commit waits
// for a row lock held elsewhere, so the kill lands inside it) leaves what PostgreSQL decided —
// the transaction's connection is gone, so nothing.
func TestKilledGatewayTransactions(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	endpoint, addr, kill := txnGateway(t, url)
	if st, _, body := call(t, http.MethodPut, endpoint+"txq", nil, ""); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}

	// Killed between declare and discharge.
	p := dialTxnPeer(t, addr, testKey, "txq")
	id := p.declare()
	p.sendInTxn(id, "before-kill")
	kill()
	endpoint, addr, kill = txnGateway(t, url)
	if n := queueMessages(t, endpoint, "txq"); n != 0 {
		t.Errorf("txq holds %d messages after the gateway died before the discharge; want 0", n)
	}

	// Killed during the commit: the entity's row is locked elsewhere so the commit's insert
	// (which checks and counts against the entity) waits; the kill lands while it waits.
	p = dialTxnPeer(t, addr, testKey, "txq")
	id = p.declare()
	p.sendInTxn(id, "during-commit")
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `LOCK TABLE messages IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	watch, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(t.Context())
	p.dischargeAsync(id)
	eventually.True(t, "the commit waiting for the lock", func() bool {
		var waiting bool
		_ = watch.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%WITH input AS%')`).Scan(&waiting) // the message insert (its text is cut at 1 KiB here)
		return waiting
	})
	kill()
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	endpoint, _, _ = txnGateway(t, url)
	if n := queueMessages(t, endpoint, "txq"); n != 0 {
		t.Errorf("txq holds %d messages after the gateway died during the commit; want 0", n)
	}
}

// A transaction lives on the gateway of its connection; what it did is visible through another
// gateway on the same database once it commits, and not before.
func TestTransactionAcrossGateways(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	a, addrA, _ := txnGateway(t, url)
	b, _, _ := txnGateway(t, url)
	if st, _, body := call(t, http.MethodPut, a+"txq", nil, ""); st != http.StatusCreated {
		t.Fatalf("create queue: %d %s", st, body)
	}
	p := dialTxnPeer(t, addrA, testKey, "txq")
	id := p.declare()
	p.sendInTxn(id, "one")
	p.sendInTxn(id, "two")
	if n := queueMessages(t, b, "txq"); n != 0 {
		t.Errorf("the other gateway sees %d messages before the commit; want 0", n)
	}
	p.dischargeAsync(id)
	d := p.await(func(x amqp.Performative) bool { _, ok := x.(*amqp.Disposition); return ok }).(*amqp.Disposition)
	if _, ok := d.State.(amqp.Accepted); !ok {
		t.Fatalf("commit: %#v", d.State)
	}
	if n := queueMessages(t, b, "txq"); n != 2 {
		t.Errorf("the other gateway sees %d messages after the commit; want 2", n)
	}
	for _, want := range []string{"one", "two"} {
		if st, _, body := call(t, http.MethodDelete, b+"txq/messages/head?timeout=5", nil, ""); st != http.StatusOK || body != want {
			t.Errorf("receive through the other gateway: %d %q; want %q", st, body, want)
		}
	}
}
