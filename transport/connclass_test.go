package transport_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// rawCallback is a raw callback to url.
func rawCallback(url string) transport.Request {
	return transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: url, Body: []byte("x"), Timeout: 2 * time.Second}
}

// silentListener accepts connections and never answers (nor closes them
// until the test ends).
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return l.Addr().String()
}

// resettingListener reads the request, then resets the connection (RST:
// SO_LINGER 0) without answering.
func resettingListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return l.Addr().String()
}

// Each connection failure is recorded as its class, never as the raw error
// (which would name the address and port probed).
func TestConnectionFailureClasses(t *testing.T) {
	plain := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(untrusted.Close)
	cases := []struct {
		name, url, class string
		timeout          time.Duration
	}{
		{"closed port", closedPortURL(t) + "/cb", transport.ConnRefused, 0},
		{"listener that never answers", "http://" + silentListener(t) + "/cb", transport.ConnTimeout, 200 * time.Millisecond},
		{"https to a plain server", strings.Replace(plain.URL, "http://", "https://", 1) + "/cb", transport.ConnTLS, 0},
		{"https with an untrusted certificate", untrusted.URL + "/cb", transport.ConnTLS, 0},
		{"server that resets", "http://" + resettingListener(t) + "/cb", transport.ConnReset, 0},
		{"unresolvable name", "http://fusebox-test.invalid/cb", transport.ConnDNS, 0},
	}
	e := newExecutor(t, transport.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rawCallback(c.url)
			if c.timeout > 0 {
				r.Timeout = c.timeout
			}
			res, err := execute(t, e, r)
			checkOutcome(t, res, err, true, 0)
			want := "transport error: " + c.class
			if !strings.HasPrefix(res.Message, want) {
				t.Fatalf("Message = %q, want prefix %q", res.Message, want)
			}
			host := strings.TrimPrefix(strings.TrimPrefix(c.url, "http://"), "https://")
			host = strings.TrimSuffix(host, "/cb")
			if _, port, _ := net.SplitHostPort(host); port != "" && strings.Contains(res.Message, port) {
				t.Errorf("Message %q names the port probed", res.Message)
			}
			if strings.Contains(res.Message, "dial") || strings.Contains(res.Message, "127.0.0.1") {
				t.Errorf("Message %q carries the raw dial error", res.Message)
			}
		})
	}
}

// A destination's answer is kept to MaxAnswerBytes of its body.
func TestAnswerBodyTruncated(t *testing.T) {
	body := strings.Repeat("A", 4000)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(body))
	}))
	e := newExecutor(t, transport.Options{})
	res, err := execute(t, e, rawCallback(srv.URL+"/cb"))
	checkOutcome(t, res, err, false, http.StatusBadRequest)
	if n := strings.Count(res.Message, "A"); n != transport.MaxAnswerBytes {
		t.Fatalf("Message keeps %d bytes of the body, want %d: %q", n, transport.MaxAnswerBytes, res.Message)
	}
	if !strings.HasPrefix(res.Message, "HTTP 400 Bad Request: ") {
		t.Errorf("Message = %.60q…", res.Message)
	}
}
