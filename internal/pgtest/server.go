// Package pgtest starts throwaway PostgreSQL servers for tests: initdb in a
// temporary directory, a free loopback port, fsync off, run as a non-root
// user (nobody when the tests run as root, since PostgreSQL refuses root),
// stopped and removed afterwards. The binaries are PostgreSQL's own
// (`make pg-tools` installs the distribution's package when missing).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"fusebox/internal/localproc"
)

// Server is one running throwaway PostgreSQL server.
type Server struct {
	dir  string // data dir and log, removed by Stop
	bin  string
	port int
	user string // the OS user the server runs as ("": this process's)
	opts Options
	// xidAtReset is the next transaction id when ResetStatements ran
	// (stats.go).
	xidAtReset atomic.Int64
	// lsnAtReset is the WAL insert position then (walLSN), in bytes.
	lsnAtReset atomic.Int64
}

// Options change how a server runs.
type Options struct {
	// Durable keeps fsync and synchronous commit on (crash tests: an
	// immediate shutdown must not lose a commit). Off by default: faster.
	Durable bool
	// Listen adds addresses to 127.0.0.1 for the server to listen on, and
	// TrustFrom the client networks (CIDRs) it lets in without a password
	// beside loopback: nodes in network namespaces (URLAt).
	Listen    []string
	TrustFrom []string
}

// BinDir finds PostgreSQL's server binaries: $FUSEBOX_PG_BIN, else the
// newest /usr/lib/postgresql/*/bin holding initdb, else initdb on PATH.
func BinDir() (string, error) {
	if d := os.Getenv("FUSEBOX_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgtest: PostgreSQL's initdb not found (install the postgresql package: make pg-tools)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises and starts a fast (non-durable) server. Stop it with
// Stop.
func Start(ctx context.Context) (*Server, error) { return StartWith(ctx, Options{}) }

// StartWith initialises and starts a server with opts.
func StartWith(ctx context.Context, opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fusebox-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, opts: opts}
	if os.Geteuid() == 0 {
		s.user = "nobody"
		if err := chownTo(dir, s.user); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	if len(opts.TrustFrom) > 0 {
		if err := s.trust(data, opts.TrustFrom); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	for try := 0; ; try++ {
		s.port, err = freePort()
		if err == nil {
			var out []byte
			out, err = s.run(ctx, "pg_ctl", "start", "-w", "-t", "30", "-D", data, "-l", filepath.Join(dir, "log"), "-o", s.serverOpts())
			if err == nil {
				return s, nil
			}
			err = fmt.Errorf("pg_ctl start: %v: %s %s", err, out, s.logTail())
		}
		if try == 2 {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
}

func (s *Server) serverOpts() string {
	listen := strings.Join(append([]string{"127.0.0.1"}, s.opts.Listen...), ",")
	o := fmt.Sprintf("-p %d -c listen_addresses=%s -c unix_socket_directories=%s -c max_connections=200", s.port, listen, s.dir)
	if !s.opts.Durable {
		o += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	if StatsEnabled() {
		o += " -c shared_preload_libraries=pg_stat_statements" // stats.go
	}
	if extra := os.Getenv("FUSEBOX_PGTEST_OPTS"); extra != "" {
		o += " " + extra // profiling: e.g. -c shared_preload_libraries=pg_stat_statements
	}
	return o
}

// trust lets clients from the given networks in without a password
// (pg_hba.conf), as initdb's --auth=trust does for loopback.
func (s *Server) trust(data string, cidrs []string) error {
	f, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgtest: pg_hba.conf: %w", err)
	}
	for _, c := range cidrs {
		if _, err := fmt.Fprintf(f, "host all all %s trust\n", c); err != nil {
			_ = f.Close()
			return fmt.Errorf("pgtest: pg_hba.conf: %w", err)
		}
	}
	return f.Close()
}

// URLAt is URL through host, one of Options.Listen.
func (s *Server) URLAt(host, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", net.JoinHostPort(host, strconv.Itoa(s.port)), db)
}

// URL is a connection URL for database db ("postgres" is always there).
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// StopImmediate stops the server with pg_ctl's immediate mode, keeping its data.
func (s *Server) StopImmediate(ctx context.Context) error {
	out, err := s.run(ctx, "pg_ctl", "stop", "-w", "-m", "immediate", "-D", filepath.Join(s.dir, "data"))
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// StartAgain starts a stopped server on its port.
func (s *Server) StartAgain(ctx context.Context) error {
	out, err := s.run(ctx, "pg_ctl", "start", "-w", "-t", "30", "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-o", s.serverOpts())
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl start: %v: %s %s", err, out, s.logTail())
	}
	return nil
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.run(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", filepath.Join(s.dir, "data"))
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

func (s *Server) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if s.user != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.user, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd.CombinedOutput()
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func chownTo(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("pgtest: user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// freePort is a free loopback port below the ephemeral range: a server
// restarted on its port (the restart tests) must find it still free.
func freePort() (int, error) {
	addr, err := localproc.FreeAddr("127.0.0.1", false)
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}
