// Package tlsutil holds a node's TLS material — its certificate and key and
// the cluster CA bundle — reloadable without a restart, and builds the
// tls.Configs the node serves and dials with: mutual TLS for Raft and for
// node-to-node HTTP, server TLS with optional client certificates for the
// HTTP API. It also creates CAs and certificates (gen.go) for `fusebox tls`.
package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// Files names the PEM files of a node's TLS material. The flag names are
// used in every error so an operator knows which one to fix.
type Files struct {
	CertFile string // --tls-cert-file: the node's certificate (chain allowed)
	KeyFile  string // --tls-key-file: its private key
	CAFile   string // --tls-ca-file: one or more CA certificates
}

// Set reports whether any of the three files is named.
func (f Files) Set() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// Check requires all three files or none, naming the missing flag.
func (f Files) Check() error {
	if !f.Set() {
		return nil
	}
	for _, m := range []struct{ flag, v string }{
		{"--tls-cert-file", f.CertFile}, {"--tls-key-file", f.KeyFile}, {"--tls-ca-file", f.CAFile},
	} {
		if m.v == "" {
			return fmt.Errorf("%s is missing: --tls-cert-file, --tls-key-file and --tls-ca-file go together", m.flag)
		}
	}
	return nil
}

// Material is one loaded, consistent set of TLS material. It is immutable
// once loaded; a reload builds a new one.
type Material struct {
	Cert    tls.Certificate     // Leaf is set
	CAs     *x509.CertPool      // every CA in the CA file
	CACerts []*x509.Certificate // the same, in file order
}

// NotAfter is when the node's certificate expires.
func (m *Material) NotAfter() time.Time { return m.Cert.Leaf.NotAfter }

// Load reads and checks the three files: the key must match the
// certificate, the CA file must hold at least one CA certificate, and the
// certificate must chain to one of them now (a certificate from another CA
// or an expired one is refused at load, not at the first handshake).
func Load(f Files) (*Material, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if !f.Set() {
		return nil, errors.New("tlsutil: no TLS files given")
	}
	cas, pool, err := LoadCAFile(f.CAFile)
	if err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file: %w", err)
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-key-file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file %s / --tls-key-file %s: %w", f.CertFile, f.KeyFile, err)
	}
	// X509KeyPair sets Leaf since Go 1.23.
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--tls-cert-file %s: %w", f.CertFile, err)
		}
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file %s: chain certificate: %w", f.CertFile, err)
		}
		inter.AddCert(c)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}); err != nil {
		return nil, fmt.Errorf("--tls-cert-file %s does not verify against --tls-ca-file %s: %w", f.CertFile, f.CAFile, err)
	}
	return &Material{Cert: cert, CAs: pool, CACerts: cas}, nil
}

// LoadCAFile reads a PEM bundle of CA certificates (several during a CA
// rotation). Anything but CERTIFICATE blocks, or a certificate that is not
// a CA, is an error naming the file.
func LoadCAFile(path string) ([]*x509.Certificate, *x509.CertPool, error) {
	return loadCAs("--tls-ca-file", path)
}

func loadCAs(flag, path string) ([]*x509.Certificate, *x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	var cas []*x509.Certificate
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, nil, fmt.Errorf("%s %s: PEM block %q, want only CERTIFICATE", flag, path, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: certificate %d: %w", flag, path, len(cas)+1, err)
		}
		if !c.IsCA {
			return nil, nil, fmt.Errorf("%s %s: certificate %d (%s) is not a CA certificate", flag, path, len(cas)+1, c.Subject)
		}
		pool.AddCert(c)
		cas = append(cas, c)
	}
	if len(cas) == 0 {
		return nil, nil, fmt.Errorf("%s %s: no PEM CERTIFICATE found", flag, path)
	}
	return cas, pool, nil
}
