package deliverybench

import (
	"syscall"
	"time"
)

// CPUClock reads this process's CPU time (user + system, all threads).
func CPUClock() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
