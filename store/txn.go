package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// A client transaction (AMQP's transaction coordinator: declare, work, discharge) is kept by the
// gateway of its connection until it is discharged: nothing it does touches the database before
// its commit, which is one PostgreSQL transaction for all of it. A gateway that dies before the
// commit leaves nothing behind; one that dies during it leaves what PostgreSQL's commit decided.

// MaxTransactionMessages is how many messages one transaction may send, as the service allows.
const MaxTransactionMessages = 100

// TxSend is a send a transaction makes when it commits.
type TxSend struct {
	Entity   *Entity
	Messages []Message
}

// TxSettle is a settlement a transaction makes when it commits: Complete, Abandon, Defer or
// DeadLetter.
type TxSettle struct {
	Target  Target
	Request SettleRequest
}

// TxWork is the work of one client transaction.
type TxWork struct {
	Sends   []TxSend
	Settles []TxSettle
}

// CheckSend runs msgs through the checks of a send to e. See Store.
func (s *Postgres) CheckSend(ctx context.Context, e *Entity, msgs []Message) error {
	_, _, err := s.prepareSend(ctx, e, msgs)
	return err
}

// CheckTxSettle refuses, when it is asked, a settlement a transaction cannot make whatever the
// state of its lock.
func CheckTxSettle(st TxSettle) error {
	switch st.Request.Op {
	case Complete, Abandon, Defer, DeadLetter:
	default:
		return BadRequest("A %s is not made in a transaction.", st.Request.Op.noun())
	}
	if err := checkSettleTarget(st.Target); err != nil {
		return err
	}
	return checkSettleRequest(st.Target, st.Request)
}

// CommitTransaction applies w in one PostgreSQL transaction: every send stored (with its
// sequence numbers, duplicate detection, topic copies and forwarding, as any send) and every
// settlement made, or nothing. A settlement whose lock is no longer held (lapsed, or settled
// outside the transaction) fails the whole with ErrLockLost naming it. Errors: those of Send and
// Settle, ErrUnavailable.
func (s *Postgres) CommitTransaction(ctx context.Context, w TxWork) error {
	type sent struct {
		e     *Entity
		size  int
		woken []wakeTarget
	}
	var rows []messageRow
	var sends []sent
	for _, snd := range w.Sends {
		d, size, err := s.prepareSend(ctx, snd.Entity, snd.Messages)
		if err != nil {
			return err
		}
		rows = append(rows, d.rows...)
		sends = append(sends, sent{snd.Entity, size, d.wakeTargets()})
	}
	groups, err := txSettleGroups(w.Settles)
	if err != nil {
		return err
	}
	var woken []wakeTarget
	err = s.retryConflicts(ctx, func() { woken = woken[:0] }, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			now := s.now()
			for _, a := range groups {
				op := a.items[0].req.Op
				found, ids, refused := make([]bool, len(a.items)), make([]string, len(a.items)), make([]bool, len(a.items))
				wk, err := s.settleWithin(ctx, tx, op, a, now, found, ids, refused)
				if err != nil {
					return err
				}
				for i, it := range a.items {
					switch {
					case refused[i]:
						return it.res.Err
					case !found[i]:
						return lockLost(it.t, it.req)
					}
				}
				woken = append(woken, wk...)
			}
			if len(rows) > 0 {
				if _, err := s.insertRows(ctx, tx, rows); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("commit the transaction: %w", interpretError(err))
	}
	s.announce(woken...)
	for _, snd := range sends {
		s.announce(snd.woken...)
		s.grew(snd.e.ID, int64(snd.size))
		s.touch(snd.e)
	}
	for _, st := range w.Settles {
		s.touch(st.Target.Entity)
	}
	return nil
}

// txSettleGroups checks settles and sorts them into one statement's arguments per kind (the
// settlement, and whether it modifies properties), each in primary-key order, as writeSettles
// runs them. Two settlements of one lock are refused: the second would find it gone.
func txSettleGroups(settles []TxSettle) ([]*settleArgs, error) {
	type kind struct {
		op     Settlement
		modify bool
	}
	byKind := make(map[kind][]settleItem)
	var kinds []kind
	seen := make(map[[2]int64]bool)
	results := make([]SettleResult, len(settles))
	for i, st := range settles {
		if err := CheckTxSettle(st); err != nil {
			return nil, err
		}
		lock := [2]int64{st.Target.Entity.ID, lockTokenSeq(st.Request.Token)}
		if seen[lock] || !validText(st.Request.ID) {
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
