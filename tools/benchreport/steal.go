package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuTimes is the machine's CPU time from /proc/stat's first line, in
// clock ticks: steal is what the hypervisor gave other guests while this
// one wanted to run, total every state's ticks (guest time is already in
// user).
type cpuTimes struct{ steal, total uint64 }

// readCPUTimes reads /proc/stat; ok is false off Linux or if the line is
// not as expected.
func readCPUTimes() (cpuTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	return parseCPUTimes(string(b))
}

func parseCPUTimes(stat string) (cpuTimes, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var t cpuTimes
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		t.total += v
		if i == 8 {
			t.steal = v
		}
	}
	return t, true
}

// stealMeter sums the steal and total ticks over the benchmark commands
// of a run (not the time between them).
type stealMeter struct{ steal, total uint64 }

// measure runs fn and adds the ticks that passed during it; it returns
// the share of them stolen (-1 when /proc/stat cannot be read).
func (m *stealMeter) measure(fn func()) float64 {
	a, okA := readCPUTimes()
	fn()
	b, okB := readCPUTimes()
	if !okA || !okB || b.total <= a.total {
		return -1
	}
	m.steal += b.steal - a.steal
	m.total += b.total - a.total
	return float64(b.steal-a.steal) / float64(b.total-a.total)
}

// share is the stolen share of the CPU time over every measured command,
// -1 when none was measured.
func (m *stealMeter) share() float64 {
	if m.total == 0 {
		return -1
	}
	return float64(m.steal) / float64(m.total)
}

// stealNote says how much CPU the hypervisor took during the run; the
// figures of a run with much steal are slower than the machine is, and
// latency tails the most. Empty when unknown.
func stealNote(share float64) string {
	if share < 0 {
		return ""
	}
	return fmt.Sprintf("hypervisor steal %.0f %% of the CPU time while the benchmarks ran (/proc/stat)", 100*share)
}
