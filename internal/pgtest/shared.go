package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
	dbSeq     atomic.Int64
)

// Main runs a package's tests and then stops the shared server, if one was
// started: call it from TestMain as os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stopping the shared server:", err)
		}
		shared = nil
	}
	return code
}

// Runner wraps m so that its Run is Main's, for goleak.VerifyTestMain: a
// package whose tests use the shared server and check for leaked
// goroutines calls goleak.VerifyTestMain(pgtest.Runner(m)).
func Runner(m *testing.M) interface{ Run() int } { return runner{m} }

type runner struct{ m *testing.M }

func (r runner) Run() int { return Main(r.m) }

// SharedServer returns the package's shared server, started on first use
// (TestMain must call Main so it is stopped). Without PostgreSQL's
// binaries the test is skipped, saying how to install them.
func SharedServer(tb testing.TB) *Server {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		if _, err := BinDir(); err != nil {
			tb.Skip(err.Error())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		shared, sharedErr = Start(ctx)
		cancel()
	}
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return shared
}

// NewDatabase creates a fresh database on the shared server and returns its
// URL; it is dropped when the test ends.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	s := SharedServer(tb)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := s.Exec("CREATE DATABASE " + name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	return s.URL(name)
}

// Exec runs one statement on the server's postgres database over a
// connection of its own (CREATE DATABASE cannot run in a transaction).
func (s *Server) Exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}
