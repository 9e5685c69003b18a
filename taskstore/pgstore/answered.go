package pgstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// answerTracer records when the database last answered one of the pool's
// statements (a result, or an error of its own such as a unique violation:
// either way it was reached). The node's reachability watch
// (node/pghealth.go) reads it and pings only when nothing answered lately:
// under load a ping waited for one of the pool's two connections, timed out
// while the database was answering every statement, and counted as a
// failure. It runs on the statement's goroutine: a clock read and a store.
type answerTracer struct{ at *atomic.Int64 }

var (
	_ pgx.QueryTracer = answerTracer{}
	_ pgx.BatchTracer = answerTracer{}
)

func (t answerTracer) note(err error) {
	var pe *pgconn.PgError
	if err == nil || errors.As(err, &pe) {
		t.at.Store(time.Now().UnixNano())
	}
}

func (answerTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (t answerTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	t.note(d.Err)
}

func (answerTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (t answerTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.note(d.Err)
}

func (answerTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// LastAnswer is when the database last answered one of this store's
// statements (zero before the first).
func (s *Store) LastAnswer() time.Time {
	if ns := s.answered.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
