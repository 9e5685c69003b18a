package main

import (
	"log/slog"
	"os"

	"fusebox/internal/gcfloor"
)

// defaultGCHeapFloorMB is --gc-heap-floor-mb's default: about what Go's
// default already lets a node with 32 MiB live use, so a node with a large
// task table is collected exactly as before, and a small one collects
// about once per 64 MiB allocated instead of every few MiB.
const defaultGCHeapFloorMB = 64

// startGCFloor starts the heap-floor tuner (internal/gcfloor) unless mb is
// 0 or the operator set GOGC, and returns what stops it.
func startGCFloor(mb int, log *slog.Logger) func() {
	if mb == 0 {
		return func() {}
	}
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.Info("GOGC is set: --gc-heap-floor-mb is not applied", "GOGC", v)
		return func() {}
	}
	t := gcfloor.Start(uint64(mb) << 20)
	log.Debug("collector heap floor", "mib", mb, "gogc", t.Percent())
	return t.Stop
}
