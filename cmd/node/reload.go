package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"fusebox/node"
)

// reloadOnSIGHUP calls n.Reload on every SIGHUP until ctx ends or the
// returned stop is called (stop waits for the goroutine; idempotent).
func reloadOnSIGHUP(ctx context.Context, n *node.Node, logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Info("SIGHUP: reloading")
				if err := n.Reload(); err != nil {
					logger.Error("reload failed; the previous configuration stays in force", "err", err)
				}
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(hup)
			cancel()
			wg.Wait()
		})
	}
}
