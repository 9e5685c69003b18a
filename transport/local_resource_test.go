package transport_test

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// A node out of file descriptors has learnt nothing about the destination:
// the attempt gives the breaker no verdict and is not "down", so it cannot
// trip the breaker of a healthy destination. Before, the dial's EMFILE was
// a network error like any other, and a node short of descriptors tripped
// the breaker of every destination it called. The descriptors really run
// out, in a child process whose limit is lowered (the test's own process
// keeps its limit).
func TestOutOfDescriptorsIsNoVerdict(t *testing.T) {
	if os.Getenv("FUSEBOX_TEST_EMFILE_CHILD") == "1" {
		outOfDescriptors(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOutOfDescriptorsIsNoVerdict$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "FUSEBOX_TEST_EMFILE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func outOfDescriptors(t *testing.T) {
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	req := transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: srv.URL + "/cb", Body: []byte("x")}
	if res, err := execute(t, newExecutor(t, transport.Options{}), req); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("before: %+v, %v", res, err)
	}
	e := newExecutor(t, transport.Options{}) // no idle connection: its calls dial

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	var held []*os.File
	defer func() {
		for _, f := range held {
			_ = f.Close()
		}
	}()
	for range 1024 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("opening descriptors: %v", err)
			}
			break
		}
		held = append(held, f)
	}
	res, err := execute(t, e, req)
	if err == nil || !errors.Is(err, breakerpool.ErrNoVerdict) || breakerpool.IsDestinationDown(err) || res.Outcome == transport.OutcomeDown {
		t.Fatalf("out of descriptors: %+v, %v; want no verdict, not down", res, err)
	}
	if !strings.Contains(res.Message, transport.ConnLocal) {
		t.Fatalf("message %q does not say the cause is local", res.Message)
	}
	for _, f := range held[len(held)-16:] {
		_ = f.Close()
	}
	held = held[:len(held)-16]
	if res, err := execute(t, e, req); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("with descriptors again: %+v, %v", res, err)
	}
}
