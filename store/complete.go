package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// completeRequest is one Complete waiting for its shared DELETE.
type completeRequest struct {
	e     *Entity
	state State
	id    string
	token uuid.UUID
}

// completeManySQL deletes every message whose lock (token, unexpired, subqueue, id) a request
// names, counts the removals, and returns the numbers (1-based) of the requests it satisfied; a
// request not returned has lost its lock.
const completeManySQL = `
WITH req AS (
	SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::smallint[]) WITH ORDINALITY AS r(e, tok, id, st, ord)
), removed AS (
	DELETE FROM messages m USING req
	WHERE m.entity_id = req.e AND m.lock_token = req.tok AND m.visible_at > $5
		AND (m.state = 2) = (req.st = 2) AND (m.message_id = req.id OR m.seq::text = req.id)
	RETURNING m.entity_id, m.state, m.size, req.ord
), counted AS (
	INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
	SELECT entity_id, -count(*) FILTER (WHERE state <> 2), -count(*) FILTER (WHERE state = 2), -sum(size)
	FROM removed GROUP BY entity_id
)
SELECT ord FROM removed`

// completeBatchSize bounds the completions one statement takes.
const completeBatchSize = 500

func newCompleter(s *Postgres) *batcher[completeRequest] {
	return newBatcher(s.opts.SendWriters, completeBatchSize, func(completeRequest) int { return 1 }, s.writeCompletes)
}

// writeCompletes completes a group of locks in one statement and tells each request whether its
// lock was there.
func (s *Postgres) writeCompletes(jobs []*job[completeRequest]) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	n := len(jobs)
	entities, tokens, ids, states := make([]int64, n), make([]uuid.UUID, n), make([]string, n), make([]int16, n)
	for i, j := range jobs {
		entities[i], tokens[i], ids[i], states[i] = j.req.e.ID, j.req.token, j.req.id, int16(j.req.state)
	}
	rows, err := s.pool.Query(ctx, completeManySQL, entities, tokens, ids, states, s.now())
	var done []int64
	if err == nil {
		done, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		err = interpretError(err)
		for _, j := range jobs {
			j.finish(fmt.Errorf("complete message %s on %s: %w", truncate(j.req.id), j.req.e.Path, err))
		}
		return
	}
	completed := make([]bool, n+1)
	for _, ord := range done {
		completed[ord] = true
	}
	for i, j := range jobs {
		if completed[i+1] {
			j.finish(nil)
		} else {
			j.finish(lockLost(j.req.e, j.req.token, j.req.id))
		}
	}
}

// complete completes one lock through the shared statement. Errors: ErrLockLost.
func (s *Postgres) complete(ctx context.Context, e *Entity, sq SubQueue, id string, token uuid.UUID) error {
	return s.completer.submit(ctx, completeRequest{e: e, state: sq.state(), id: id, token: token})
}

func lockLost(e *Entity, token uuid.UUID, id string) error {
	return &Error{Code: CodeLockLost, Message: fmt.Sprintf(
		"The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue. Reference: %s, entity '%s', message '%s'.",
		token, e.Path, truncate(id))}
}
