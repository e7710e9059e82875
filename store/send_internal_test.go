package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/db/dbtest"
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
	e, err := s.CreateEntity(ctx, KindQueue, "q", DefaultProperties(KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	row := func(label string) []messageRow {
		m := Message{Body: []byte("x"), Label: "ok"}
		if err := prepareMessage(e, &m, s.now()); err != nil {
			t.Fatal(err)
		}
		r, err := newMessageRow(e.ID, &m, "", true)
		if err != nil {
			t.Fatal(err)
		}
		r.label = label
		return []messageRow{r}
	}
	// Queue the requests before any writer runs, so they are written as one group.
	reqs := []*sendRequest{{rows: row("good-1")}, {rows: row("bad\x00")}, {rows: row("good-2")}}
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		r.entityIDs = []int64{e.ID}
		j := &job[*sendRequest]{req: r, done: make(chan error, 1)}
		s.batcher.reqs <- j
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = <-j.done }()
	}
	s.Start(ctx)
	defer s.Stop()
	wg.Wait()
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("good requests failed: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil || errors.Is(errs[1], ErrUnavailable) {
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

// TestCoalescedCompletesAnswerEachLock: completions that share one statement each learn whether
// their own lock was there.
func TestCoalescedCompletesAnswerEachLock(t *testing.T) {
	t.Parallel()
	pool, err := db.Open(t.Context(), dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool, Options{SendWriters: 1})
	ctx := context.Background()
	e, err := s.CreateEntity(ctx, KindQueue, "q", DefaultProperties(KindQueue))
	if err != nil {
		t.Fatal(err)
	}
	s.batcher.start()
	defer s.batcher.stop()
	if err := s.Send(ctx, e, []Message{{Body: []byte("a")}, {Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.claim(ctx, e, SubQueueMain, PeekLock, 2)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("claim = %d, %v", len(msgs), err)
	}
	reqs := []completeRequest{
		{e: e, id: msgs[0].MessageID, token: msgs[0].LockToken},
		{e: e, id: msgs[1].MessageID, token: [16]byte{7}}, // no such lock
		{e: e, id: "wrong-id", token: msgs[1].LockToken},  // right lock, wrong message
		{e: e, id: itoa(msgs[1].SequenceNumber), token: msgs[1].LockToken},
	}
	jobs := make([]*job[completeRequest], len(reqs))
	for i, r := range reqs {
		jobs[i] = &job[completeRequest]{req: r, done: make(chan error, 1)}
		s.completer.reqs <- jobs[i] // queued before any writer runs: one statement takes them all
	}
	s.completer.start()
	defer s.completer.stop()
	for i, want := range []error{nil, ErrLockLost, ErrLockLost, nil} {
		if err := <-jobs[i].done; !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("completion %d: err = %v; want %v", i, err, want)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d messages left (%v); want both completed", n, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
