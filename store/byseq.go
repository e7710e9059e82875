package store

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/sbgate/sbgate/broker"
)

// Requests for messages of one entity by sequence number (deferred receives, cancels of
// scheduled messages) take all they name or none.

// distinctSeqs is seqs with each sequence number once, at its first place.
func distinctSeqs(seqs []int64) []int64 {
	seen := make(map[int64]bool, len(seqs))
	out := make([]int64, 0, len(seqs))
	for _, seq := range seqs {
		if !seen[seq] {
			seen[seq] = true
			out = append(out, seq)
		}
	}
	return out
}

// askSeqs sets the arguments naming the messages of e a statement looks for (askedSeqsSQL):
// @seqs, in ascending order, each with its entity in @entities.
//
// The statements join the pairs to messages, one primary-key lookup each. With the entity as a
// constant instead (entity_id = @entity AND seq = ANY(@seqs), or a join on seq alone) the
// planner, whenever the statistics predate the entity's backlog, read all of the entity's rows
// to pick out those asked for (14,673 pages instead of 4,000 for 1,000 sequence numbers among
// 100,000 messages: TestClaimPlanWithStaleStatistics). The plan, a nested loop from the pairs,
// looks them up in the order given, so ascending order makes two requests for overlapping
// messages lock them in one order, never each waiting for the other.
func askSeqs(args pgx.NamedArgs, e *broker.Entity, seqs []int64) {
	sorted := slices.Clone(seqs)
	slices.Sort(sorted)
	entities := make([]int64, len(sorted))
	for i := range entities {
		entities[i] = e.ID
	}
	args["seqs"], args["entities"] = sorted, entities
}

// errNotAll rolls back a request that did not find every message it names.
var errNotAll = errors.New("not every message asked for is there")

// allOrNone runs attempt in a transaction, again after a conflict (retryConflicts), and commits
// it only when attempt found every sequence number of want: attempt marks in found those it
// found (found is empty at each attempt). It returns, in want's order, those not found (none:
// committed), or the error that ended it.
func (s *Postgres) allOrNone(ctx context.Context, want []int64, attempt func(tx pgx.Tx, found map[int64]bool) error) ([]int64, error) {
	found := make(map[int64]bool, len(want))
	err := s.retryConflicts(ctx, nil, func() error {
		clear(found)
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := attempt(tx, found); err != nil {
				return err
			}
			if len(found) < len(want) {
				return errNotAll // rolls back what the attempt locked, removed or moved
			}
			return nil
		})
	})
	if !errors.Is(err, errNotAll) {
		return nil, err
	}
	var missing []int64
	for _, seq := range want {
		if !found[seq] {
			missing = append(missing, seq)
		}
	}
	return missing, nil
}
