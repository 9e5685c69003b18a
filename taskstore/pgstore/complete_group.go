package pgstore

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Group commit of result writes (issue 18). The queue flushes each shard's
// results on its own, so a node owning many shards wrote one statement, and
// committed one transaction — a WAL flush — per shard per flush: at 1,000
// tasks/s on three processes about two-thirds of the database's commits
// were result writes, and every submit's commit queued behind their
// flushes. Calls that arrive while a write is in flight wait and go
// together in the next one: each call's fenced statement (completeSQL,
// unchanged) pipelined in one pgx batch, which PostgreSQL runs as one
// implicit transaction — one round trip and one commit —, as the raft
// store puts a node's concurrent completes in one complete_tasks_multi
// entry. The first caller leads and hands the lead on, as the submit group
// does (leadQueue, lead.go).
//
// What a call keeps from going alone:
//   - its fence: each statement is conditional on its own shard's epoch;
//     a fenced-out shard's statement writes nothing and reports fenced = 0
//     (no error), so the others commit and that caller alone gets its
//     *shardmap.WrongOwnerError. Statements run in shard order (arrival
//     order within a shard), so two groups lock shard rows in one order.
//   - its own error: a statement that fails aborts the whole transaction
//     (nothing of it committed); then each call is written alone, so each
//     caller gets its own answer.
//   - serialization failures and deadlocks (40001, 40P01) retry the whole
//     transaction, as retry does for one statement.

const (
	// maxCompleteGroupRows bounds the rows (results and start markers) of
	// one group's transaction; a larger call goes alone.
	maxCompleteGroupRows = 4096
	// maxCompleteGroupBytes bounds a group's parameters (about); a larger
	// call goes alone.
	maxCompleteGroupBytes = 1 << 20
)

type completeCall struct {
	groupSlot // done is closed when err is set
	shard     int
	epoch     uint64
	args      completeArgs

	fenced bool // the fence matched: the call's rows were written
	ended  int  // tasks that left pending
	err    error
}

type completeGroup struct {
	leadQueue[*completeCall]

	// Committed write transactions and the calls they carried (tests).
	txs, txCalls atomic.Int64
}

func (g *completeGroup) complete(ctx context.Context, s *Store, c *completeCall) error {
	rows, bytes := 0, 0
	calls := g.join(c, func(next *completeCall, first bool) bool {
		if !first && (rows+len(next.args.ids) > maxCompleteGroupRows || bytes+next.args.bytes > maxCompleteGroupBytes) {
			return false
		}
		rows, bytes = rows+len(next.args.ids), bytes+next.args.bytes
		return true
	})
	if calls == nil { // answered by another leader's group
		return c.err
	}
	defer g.handOff() // also if runCompletes panics
	s.runCompletes(ctx, calls)
	<-c.done // c is the first of calls
	return c.err
}

// runCompletes writes calls in one transaction and answers each.
func (s *Store) runCompletes(ctx context.Context, calls []*completeCall) {
	ctx, cancel := groupContext(ctx, len(calls))
	defer cancel()
	answered := 0
	defer func() { // a panic below still answers every call
		for _, c := range calls[answered:] {
			c.err = errCompleteGroupFailed
			close(c.done)
		}
	}()
	err := s.writeCompletes(ctx, calls)
	if err != nil && len(calls) > 1 && !retryable(err) && ctx.Err() == nil {
		// One statement failed and took the transaction down: nothing
		// committed. Each goes alone, so each caller gets its own answer.
		for _, c := range calls {
			c.err = s.writeCompletes(ctx, []*completeCall{c})
		}
	} else {
		for _, c := range calls {
			c.err = err
		}
	}
	for _, c := range calls {
		switch {
		case c.err != nil:
		case !c.fenced:
			cur, err := currentOwner(ctx, s.pool, c.shard)
			if err != nil {
				c.err = err
			} else {
				c.err = cur
			}
		default:
			// No notify: only the shard's owner writes its results, and
			// its queue wakes its own reader after each write. The pending
			// count reused by the submit limits moves by the tasks that
			// ended here.
			s.pending.add(-c.ended)
		}
		close(c.done)
		answered++
	}
}

// writeCompletes runs calls' statements as one pgx batch, one implicit
// transaction (one call or many), planned for their own results
// (queueCustomPlans, plans.go), retrying serialization failures and
// deadlocks, and sets each call's fenced and ended.
func (s *Store) writeCompletes(ctx context.Context, calls []*completeCall) error {
	order := calls
	if len(calls) > 1 {
		order = slices.Clone(calls)
		slices.SortStableFunc(order, func(a, b *completeCall) int { return a.shard - b.shard })
	}
	err := s.retry(ctx, func() error {
		b := &pgx.Batch{}
		wrapped := s.queueCustomPlans(b, func() {
			for _, c := range order {
				b.Queue(completeSQL, c.args.params(c.shard, c.epoch)...)
			}
		})
		// No BEGIN: the batch's statements before its one Sync are one
		// implicit transaction, committed at the Sync; Close reads to
		// it, so a failed commit is reported there.
		br := s.pool.SendBatch(ctx, b)
		if wrapped {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return err
			}
		}
		for _, c := range order {
			var fenced int
			if err := br.QueryRow().Scan(&fenced, &c.ended); err != nil {
				_ = br.Close()
				return err
			}
			c.fenced = fenced == 1
		}
		return br.Close()
	})
	if err == nil {
		s.completes.txs.Add(1)
		s.completes.txCalls.Add(int64(len(calls)))
	}
	return err
}

// errCompleteGroupFailed answers the calls of a group whose write panicked.
var errCompleteGroupFailed = errors.New("pgstore: the result write group failed; nothing is known committed")
