package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// LastAnswer moves with every statement the database answers, an error of
// its own included (it was reached), so the node's watch needs no ping
// while its store is busy.
func TestLastAnswerFollowsStatements(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	before := time.Now()
	if _, err := s.pool.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if at := s.LastAnswer(); at.Before(before) {
		t.Fatalf("LastAnswer %v, before the statement at %v", at, before)
	}
	before = time.Now()
	if _, err := s.pool.Exec(ctx, `SELECT no_such_column FROM fusebox_tasks`); err == nil {
		t.Fatal("a bad statement succeeded")
	}
	if at := s.LastAnswer(); at.Before(before) {
		t.Fatalf("LastAnswer %v: the database's own error is an answer too (statement at %v)", at, before)
	}
	before = time.Now()
	batch := &pgx.Batch{}
	batch.Queue(`SELECT 1`)
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	if at := s.LastAnswer(); at.Before(before) {
		t.Fatalf("LastAnswer %v after a batch sent at %v", at, before)
	}
}
