package main

import (
	"context"
	"fmt"
	"time"

	"fusebox/internal/pgtest"
)

// Task stores (--task-store).
const (
	taskStoreRaft     = "raft"
	taskStorePostgres = "postgres"
)

// startPostgres starts a throwaway PostgreSQL server (internal/pgtest:
// initdb in a temp dir, a free loopback port, removed at teardown) and
// points every node at it with --task-store postgres.
func (d *demo) startPostgres(ctx context.Context) error {
	if _, err := pgtest.BinDir(); err != nil {
		return fmt.Errorf("--task-store postgres: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	srv, err := pgtest.Start(sctx)
	if err != nil {
		return fmt.Errorf("--task-store postgres: %w", err)
	}
	d.pg = srv
	url := srv.URL("postgres") // trust auth on loopback: no password to hide
	for _, p := range d.cl.nodes {
		p.extra = append(p.extra, "--task-store", taskStorePostgres, "--postgres-url", url)
	}
	d.sc.message("task store: PostgreSQL at " + url)
	return nil
}

// stopPostgres stops the server after the nodes (teardown).
func (d *demo) stopPostgres() {
	if d.pg == nil {
		return
	}
	if err := d.pg.Stop(); err != nil {
		d.sc.message("stopping PostgreSQL: " + err.Error())
	}
	d.pg = nil
}
