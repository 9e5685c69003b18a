package main

import "testing"

func TestParseCPUTimes(t *testing.T) {
	got, ok := parseCPUTimes("cpu  458633 1298 94528 5978091 15431 0 14462 85603 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if !ok || got.steal != 85603 || got.total != 458633+1298+94528+5978091+15431+0+14462+85603 {
		t.Fatalf("parseCPUTimes = %+v %v", got, ok)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x"} {
		if _, ok := parseCPUTimes(bad); ok {
			t.Errorf("parseCPUTimes(%q) accepted", bad)
		}
	}
	if stealNote(-1) != "" || stealNote(0.304) != "hypervisor steal 30 % of the CPU time while the benchmarks ran (/proc/stat)" {
		t.Fatalf("stealNote = %q", stealNote(0.304))
	}
}
