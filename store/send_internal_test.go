package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
	"github.com/sbgate/sbgate/engine"
)

// TestGroupCommitIsolatesAFailingRequest: requests that share a group commit with one the
// database refuses still commit, each on its own; only the bad one fails. Validation keeps such
// rows out in practice, so the test builds one by hand (a NUL byte PostgreSQL text refuses).
func TestGroupCommitIsolatesAFailingRequest(t *testing.T) {
	t.Parallel()
	pool, err := db.Open(t.Context(), dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool, Options{SendWriters: 1})
	ctx := context.Background()
	e, err := s.CreateEntity(ctx, broker.KindQueue, "q", broker.DefaultProperties(broker.KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	row := func(label string) []messageRow {
		m := broker.Message{Body: []byte("x"), Label: "ok"}
		if err := prepareMessage(e, &m, s.now()); err != nil {
			t.Fatal(err)
		}
		rows := make([]messageRow, 1)
		if err := rows[0].set(e.ID, &m, nil, true); err != nil {
			t.Fatal(err)
		}
		rows[0].Label = text(label)
		return rows
	}
	// Queue the requests before any writer runs, so they are written as one group.
	reqs := []*sendRequest{{rows: row("good-1")}, {rows: row("bad\x00")}, {rows: row("good-2")}}
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		r.woken = []wakeTarget{{entity: e.ID}}
		j, err := s.batcher.Queue(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.batcher.Wait(ctx, j) }()
	}
	s.Start(ctx)
	defer s.Stop()
	wg.Wait()
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("good requests failed: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil || errors.Is(errs[1], broker.ErrUnavailable) {
		t.Errorf("bad request err = %v; want a database error", errs[1])
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE entity_id = $1`, e.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("stored %d messages; want the 2 good ones", n)
	}
}

// TestCoalescedSettlementsAnswerEachLock: settlements of every kind, from several requests and
// two entities, that share one round of statements each learn whether their own lock was there.
func TestCoalescedSettlementsAnswerEachLock(t *testing.T) {
	t.Parallel()
	pool, err := db.Open(t.Context(), dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool, Options{SendWriters: 1})
	ctx := context.Background()
	var qs [2]*broker.Entity
	var msgs [2][]*broker.Message
	for i, name := range []string{"a", "b"} {
		if qs[i], err = s.CreateEntity(ctx, broker.KindQueue, name, broker.DefaultProperties(broker.KindQueue)); err != nil {
			t.Fatal(err)
		}
	}
	s.batcher.Start()
	defer s.batcher.Stop()
	for i, q := range qs {
		if err := s.Send(ctx, q, []broker.Message{{Body: []byte("1")}, {Body: []byte("2")}, {Body: []byte("3")}}); err != nil {
			t.Fatal(err)
		}
		if msgs[i], _, err = s.claimMessages(ctx, broker.Target{Entity: q}, broker.PeekLock, 3, nil); err != nil || len(msgs[i]) != 3 {
			t.Fatalf("claim = %d, %v", len(msgs[i]), err)
		}
	}
	a, b := msgs[0], msgs[1]
	jobs := []*settleJob{
		{items: []settleItem{
			{t: broker.Target{Entity: qs[0]}, req: broker.SettleRequest{Op: broker.Complete, Token: a[0].LockToken, ID: a[0].MessageID}},
			{t: broker.Target{Entity: qs[0]}, req: broker.SettleRequest{Op: broker.Complete, Token: [16]byte{7}}},                   // no such lock
			{t: broker.Target{Entity: qs[0]}, req: broker.SettleRequest{Op: broker.Abandon, Token: a[1].LockToken, ID: "wrong-id"}}, // right lock, wrong message
		}},
		{items: []settleItem{
			{t: broker.Target{Entity: qs[1]}, req: broker.SettleRequest{Op: broker.Complete, Token: a[1].LockToken}}, // another entity's lock
			{t: broker.Target{Entity: qs[1]}, req: broker.SettleRequest{Op: broker.DeadLetter, Token: b[0].LockToken, Reason: "r"}},
			{t: broker.Target{Entity: qs[1]}, req: broker.SettleRequest{Op: broker.RenewLock, Token: b[1].LockToken, ID: itoa(b[1].SequenceNumber)}},
			{t: broker.Target{Entity: qs[0]}, req: broker.SettleRequest{Op: broker.Defer, Token: a[2].LockToken}},
			{t: broker.Target{Entity: qs[1]}, req: broker.SettleRequest{Op: broker.Abandon, Token: b[2].LockToken}},
		}},
	}
	queued := make([]*engine.Job[*settleJob], len(jobs))
	for i, sj := range jobs {
		sj.results = make([]broker.SettleResult, len(sj.items))
		for k := range sj.items {
			sj.items[k].res = &sj.results[k]
		}
		var err error
		// queued before any writer runs: one round takes them all
		if queued[i], err = s.settler.Queue(ctx, sj); err != nil {
			t.Fatal(err)
		}
	}
	s.settler.Start()
	defer s.settler.Stop()
	for _, j := range queued {
		if err := s.settler.Wait(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	want := [][]error{{nil, broker.ErrLockLost, broker.ErrLockLost}, {broker.ErrLockLost, nil, nil, nil, nil}}
	for i, sj := range jobs {
		for k, res := range sj.results {
			if w := want[i][k]; !errors.Is(res.Err, w) && !(w == nil && res.Err == nil) {
				t.Errorf("job %d settlement %d (%v): err = %v; want %v", i, k, sj.items[k].req.Op, res.Err, w)
			}
		}
	}
	if until := jobs[1].results[2].LockedUntil; !until.After(s.now()) {
		t.Errorf("renewed lock until %v; want a time to come", until)
	}
	var states []string
	rows, err := pool.Query(ctx, `SELECT e.path || ':' || m.state || ':' || (m.lock_token IS NOT NULL)
		FROM messages m JOIN entities e ON e.id = m.entity_id ORDER BY e.path, m.seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var st string
		if err := rows.Scan(&st); err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
	}
	// a: 1 completed, 2 still locked (its abandon named the wrong message), 3 deferred;
	// b: 1 dead-lettered, 2 locked (renewed), 3 abandoned.
	if got, want := fmt.Sprint(states), "[a:0:true a:1:false b:2:false b:0:true b:0:false]"; got != want {
		t.Errorf("messages = %s; want %s", got, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
