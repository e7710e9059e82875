package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// A client transaction (AMQP's transaction coordinator: declare, work, discharge) is kept by the
// gateway of its connection until it is discharged: nothing it does touches the database before
// its commit, which is one PostgreSQL transaction for all of it. A gateway that dies before the
// commit leaves nothing behind; one that dies during it leaves what PostgreSQL's commit decided.

// ReserveSequenceNumbers draws n sequence numbers for a transaction's scheduled messages. See
// Store.
func (s *Postgres) ReserveSequenceNumbers(ctx context.Context, n int) ([]int64, error) {
	if n < 0 || n > math.MaxInt32 {
		return nil, fmt.Errorf("reserve sequence numbers: %d is not a number of messages", n)
	}
	nums, err := queries.ReserveSequenceNumbers(ctx, s.pool, int32(n))
	if err != nil {
		return nil, fmt.Errorf("reserve sequence numbers: %w", interpretError(err))
	}
	return nums, nil
}

// CheckSend runs msgs through the checks of a send to e. See Store.
func (s *Postgres) CheckSend(ctx context.Context, e *broker.Entity, msgs []broker.Message) error {
	// On copies: preparing a message fills in what the send decides (its id, enqueue time, time
	// to live from the entity), which the commit's own preparation must find as the sender left it.
	_, _, err := s.prepareSend(ctx, e, slices.Clone(msgs))
	return err
}

// CommitTransaction applies w in one PostgreSQL transaction: every send stored (with its
// sequence numbers, duplicate detection, topic copies and forwarding, as any send) and every
// settlement made, or nothing. A settlement whose lock is no longer held (lapsed, or settled
// outside the transaction) fails the whole with ErrLockLost naming it, and so does a session
// state whose session lock is gone. Errors: those of Send, Settle and SetSessionState,
// ErrUnavailable.
func (s *Postgres) CommitTransaction(ctx context.Context, w broker.TxWork) error {
	sends, err := s.prepareTxSends(ctx, w.Sends)
	if err != nil {
		return err
	}
	for _, st := range w.SessionStates {
		if err := broker.CheckTxSessionState(st); err != nil {
			return err
		}
	}
	groups, err := txSettleGroups(w.Settles)
	if err != nil {
		return err
	}
	var woken []wakeTarget
	err = s.retryConflicts(ctx, func() { woken = woken[:0] }, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
			woken, err = s.commitWithin(ctx, tx, groups, w.SessionStates, sends)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("commit the transaction: %w", interpretError(err))
	}
	s.announce(woken...)
	for _, snd := range sends.sent {
		s.announce(snd.woken...)
		s.grew(snd.e.ID, int64(snd.size))
		s.touch(snd.e)
	}
	for _, st := range w.Settles {
		s.touch(st.Target.Entity)
	}
	for _, st := range w.SessionStates {
		s.touch(st.Entity)
	}
	return nil
}

// txSends are a transaction's sends, prepared: the rows to insert, which of them take a
// reserved number, and what each send grew and wakes.
type txSends struct {
	rows     []messageRow
	numbered []numberedRow
	sent     []txSent
}

// txSent is what one send of a transaction grew its entity by, and wakes, once committed.
type txSent struct {
	e     *broker.Entity
	size  int
	woken []wakeTarget
}

// prepareTxSends runs a transaction's sends through the checks and routing of a send.
func (s *Postgres) prepareTxSends(ctx context.Context, sends []broker.TxSend) (*txSends, error) {
	p := &txSends{}
	for _, snd := range sends {
		msgs := snd.Messages
		if snd.Numbers != nil {
			// Copies elsewhere (a topic's, a forwarded message) share the number as their
			// EnqueuedSequenceNumber, as SendSequenced's do; a row in the entity itself takes it
			// as its sequence number once inserted.
			msgs = slices.Clone(msgs)
			for i := range msgs {
				msgs[i].EnqueuedSequenceNumber = snd.Numbers[i]
			}
		}
		d, size, err := s.prepareSend(ctx, snd.Entity, msgs)
		if err != nil {
			return nil, err
		}
		for k, r := range d.rows {
			if snd.Numbers != nil && r.EntityID == snd.Entity.ID {
				p.numbered = append(p.numbered, numberedRow{row: len(p.rows) + k, number: r.EnqueuedSeq.Int64})
			}
		}
		p.rows = append(p.rows, d.rows...)
		p.sent = append(p.sent, txSent{snd.Entity, size, d.wakeTargets()})
	}
	return p, nil
}

// commitWithin applies a transaction's work in tx: its settlements, each of whose locks must be
// held, its session states, and its sends. It returns the wake-ups the settlements call for.
func (s *Postgres) commitWithin(ctx context.Context, tx pgx.Tx, groups []*settleArgs, states []broker.TxSessionState, sends *txSends) ([]wakeTarget, error) {
	now := s.now()
	var woken []wakeTarget
	for _, a := range groups {
		found, ids, refused := make([]bool, len(a.items)), make([]string, len(a.items)), make([]bool, len(a.items))
		wk, err := s.settleWithin(ctx, tx, a.items[0].req.Op, a, now, found, ids, refused)
		if err != nil {
			return nil, err
		}
		for i, it := range a.items {
			switch {
			case refused[i]:
				return nil, it.res.Err
			case !found[i]:
				return nil, lockLost(it.t, it.req)
			}
		}
		woken = append(woken, wk...)
	}
	for _, st := range states {
		if err := s.setSessionState(ctx, tx, st.Entity, st.Lock, st.State, now); err != nil {
			return nil, err
		}
	}
	if len(sends.rows) == 0 {
		return woken, nil
	}
	stored, err := s.insertRows(ctx, tx, sends.rows)
	if err != nil {
		return nil, err
	}
	return woken, renumber(ctx, tx, sends.rows, stored, sends.numbered, now)
}

// numberedRow is a row of a transaction's insert (its index) that takes a reserved number as its
// sequence number.
type numberedRow struct {
	row    int
	number int64
}

// renumber gives the rows of numbered, stored with the sequence numbers stored, their reserved
// numbers. Such a row, lower than the numbers its entity's claims may have passed, is put in
// the due range (visible_at set) so that claims find it wherever their cursor is, as a restored
// message is.
func renumber(ctx context.Context, tx pgx.Tx, rows []messageRow, stored []int64, numbered []numberedRow, now time.Time) error {
	var entities, from, to []int64
	for _, n := range numbered {
		if stored[n.row] == 0 {
			continue // a duplicate, not stored
		}
		entities, from, to = append(entities, rows[n.row].EntityID), append(from, stored[n.row]), append(to, n.number)
	}
	if len(entities) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, renumberTxMessages.sql, entities, from, to, now)
	return err
}

// txSettleGroups checks settles and sorts them into one statement's arguments per kind (the
// settlement, and whether it modifies properties), each in primary-key order, as writeSettles
// runs them. Two settlements of one lock are refused: the second would find it gone.
func txSettleGroups(settles []broker.TxSettle) ([]*settleArgs, error) {
	type kind struct {
		op     broker.Settlement
		modify bool
	}
	byKind := make(map[kind][]settleItem)
	var kinds []kind
	seen := make(map[[2]int64]bool)
	results := make([]broker.SettleResult, len(settles))
	for i, st := range settles {
		if err := broker.CheckTxSettle(st); err != nil {
			return nil, err
		}
		lock := [2]int64{st.Target.Entity.ID, lockTokenSeq(st.Request.Token)}
		if seen[lock] || !broker.ValidText(st.Request.ID) {
			return nil, lockLost(st.Target, st.Request)
		}
		seen[lock] = true
		k := kind{st.Request.Op, len(st.Request.PropertiesToModify) > 0}
		if byKind[k] == nil {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], settleItem{t: st.Target, req: st.Request, res: &results[i]})
	}
	groups := make([]*settleArgs, 0, len(kinds))
	for _, k := range kinds {
		items := byKind[k]
		slices.SortStableFunc(items, func(x, y settleItem) int {
			return cmp.Or(cmp.Compare(x.t.Entity.ID, y.t.Entity.ID), cmp.Compare(lockTokenSeq(x.req.Token), lockTokenSeq(y.req.Token)))
		})
		a := newSettleArgs(len(items), k.modify)
		for _, it := range items {
			a.add(it)
		}
		groups = append(groups, a)
	}
	return groups, nil
}
