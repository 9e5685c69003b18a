package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// binPath is the fusebox binary every Process runs, set by TestMain.
var binPath string

// TestMain builds fusebox once (without -race: the processes are the system
// under test, not this test binary) unless FUSEBOX_BIN names a prebuilt one,
// runs the tests, removes the build and checks for leaked goroutines.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if p := os.Getenv("FUSEBOX_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: FUSEBOX_BIN=%q: %v\n", p, err)
			return 2
		}
		if st, err := os.Stat(abs); err != nil || st.IsDir() {
			fmt.Fprintf(os.Stderr, "e2e: FUSEBOX_BIN=%q is not a file: %v\n", p, err)
			return 2
		}
		binPath = abs
	} else {
		dir, err := os.MkdirTemp("", "fusebox-e2e-bin-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			return 2
		}
		defer os.RemoveAll(dir)
		binPath = filepath.Join(dir, "fusebox")
		cmd := exec.Command("go", "build", "-o", binPath, "fusebox/cmd/node")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build fusebox/cmd/node: %v\n", err)
			return 2
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: goleak: %v\n", err)
			return 1
		}
	}
	return code
}
