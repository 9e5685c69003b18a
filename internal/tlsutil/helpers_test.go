package tlsutil

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pki is a CA and where its files are, for tests.
type pki struct {
	t   *testing.T
	dir string
	ca  PEMPair
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	ca, err := CreateCA(CAOptions{CommonName: name})
	if err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, dir: t.TempDir(), ca: ca}
}

func (p *pki) caFile() string { return p.write("ca.pem", p.ca.Cert) }

func (p *pki) write(name string, b []byte) string {
	p.t.Helper()
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, b, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return f
}

// issue writes a certificate from this CA and returns its files with
// this CA's file.
func (p *pki) issue(name string, o CertOptions) Files {
	p.t.Helper()
	o.CommonName = name
	pair, err := CreateCert(p.ca, o)
	if err != nil {
		p.t.Fatal(err)
	}
	return Files{CertFile: p.write(name+".pem", pair.Cert), KeyFile: p.write(name+"-key.pem", pair.Key), CAFile: p.caFile()}
}

// handshake runs one TLS connection over loopback: the server writes "ok"
// after its handshake; the client reads it. It returns the client's and
// the server's errors.
func handshake(t *testing.T, server, client *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		tc := tls.Server(c, server)
		if err := tc.Handshake(); err != nil {
			srvErr <- err
			return
		}
		_, err = tc.Write([]byte("ok"))
		srvErr <- err
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), client)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 2)
		_, err = io.ReadFull(c, buf)
		if err == nil && string(buf) != "ok" {
			err = errors.New("unexpected answer " + string(buf))
		}
		c.Close()
	}
	return err, <-srvErr
}
