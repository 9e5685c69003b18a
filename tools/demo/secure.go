package main

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"fusebox/internal/tlsutil"
)

// secure is the demo's material for --secure: a cluster CA, a node
// certificate per node, a gossip key and a token file with named tokens,
// made as an operator would with `fusebox tls` (docs/security.md). The
// demo itself calls the API with the admin token over HTTPS, verifying
// the CA.
type secure struct {
	dir           string
	caFile        string
	gossipKeyFile string
	tokenFile     string
	// adminToken is the demo's own token ("demo", role admin); the nodes
	// talk to each other with the "nodes" token (role node).
	adminToken string
	// viewerToken (role read) opens the status page.
	viewerToken string
	client      *tls.Config
}

// newSecure writes the material for nodes ids under dir/tls.
func newSecure(dir string, ids []string) (*secure, error) {
	s := &secure{dir: filepath.Join(dir, "tls")}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := tlsutil.CreateCA(tlsutil.CAOptions{CommonName: "fusebox demo CA", Days: 2})
	if err != nil {
		return nil, err
	}
	if s.caFile, err = s.write("ca.pem", ca.Cert); err != nil {
		return nil, err
	}
	for _, id := range ids {
		pair, err := tlsutil.CreateCert(ca, tlsutil.CertOptions{CommonName: id, Node: true, Days: 1})
		if err != nil {
			return nil, err
		}
		if _, err := s.write(id+".pem", pair.Cert); err != nil {
			return nil, err
		}
		if _, err := s.write(id+"-key.pem", pair.Key); err != nil {
			return nil, err
		}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if s.gossipKeyFile, err = s.write("gossip.keys", []byte(base64.StdEncoding.EncodeToString(key)+"\n")); err != nil {
		return nil, err
	}
	nodes := randomToken()
	s.adminToken, s.viewerToken = randomToken(), randomToken()
	tokens := fmt.Sprintf("# <name> <role> <token> (docs/operations.md, API tokens)\nnodes node %s\ndemo admin %s\nviewer read %s\n",
		nodes, s.adminToken, s.viewerToken)
	if s.tokenFile, err = s.write("tokens", []byte(tokens)); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.Cert)
	s.client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return s, nil
}

func (s *secure) write(name string, b []byte) (string, error) {
	p := filepath.Join(s.dir, name)
	return p, os.WriteFile(p, b, 0o600)
}

// args are node id's serve flags.
func (s *secure) args(id string) []string {
	return []string{
		"--tls-cert-file", filepath.Join(s.dir, id+".pem"),
		"--tls-key-file", filepath.Join(s.dir, id+"-key.pem"),
		"--tls-ca-file", s.caFile,
		"--gossip-key-file", s.gossipKeyFile,
		"--admin-token-file", s.tokenFile,
	}
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
