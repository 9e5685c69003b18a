package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"fusebox/api"
	"fusebox/internal/tlsutil"
	"fusebox/node"
)

// tlsFlags are serve's TLS flags.
type tlsFlags struct {
	certFile, keyFile, caFile string
	insecure                  bool
}

func (t *tlsFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&t.certFile, "tls-cert-file", "", "PEM certificate of this node (from \"fusebox tls cert create --node\"); with --tls-key-file and --tls-ca-file the API serves HTTPS only and Raft and forwarding use mutual TLS")
	fl.StringVar(&t.keyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fl.StringVar(&t.caFile, "tls-ca-file", "", "PEM CA certificates peers and clients must chain to; several during a CA rotation")
	fl.BoolVar(&t.insecure, "insecure", false, "allow --http-addr or --raft-addr beyond loopback without TLS and --admin-token-file, and --gossip-addr without --gossip-key-file (anyone who reaches the ports can read and change the cluster)")
}

func scheme(cfg node.Config) string {
	if cfg.TLSEnabled() {
		return "https"
	}
	return "http"
}

func tlsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Create a cluster CA and node and client certificates",
		Long: `Create the TLS material of a cluster, as "consul tls" does: one CA, a
certificate per node (server and client auth, for the API, Raft and
forwarding) and certificates for CLI clients. Keys are ECDSA P-256, written
with mode 0600. Existing files are never overwritten.

  fusebox tls ca create
  fusebox tls cert create --node n1 --ip 10.0.0.1
  fusebox tls cert create --client --name alice

then start each node with --tls-cert-file fusebox-node-n1.pem
--tls-key-file fusebox-node-n1-key.pem --tls-ca-file fusebox-ca.pem.`,
	}
	ca := &cobra.Command{Use: "ca", Short: "Manage the cluster CA"}
	ca.AddCommand(caCreateCmd())
	cert := &cobra.Command{Use: "cert", Short: "Manage node and client certificates"}
	cert.AddCommand(certCreateCmd())
	cmd.AddCommand(ca, cert)
	return cmd
}

func caCreateCmd() *cobra.Command {
	var o tlsutil.CAOptions
	var outDir string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a CA: fusebox-ca.pem and fusebox-ca-key.pem",
		Long: `Create a self-signed CA (ECDSA P-256): fusebox-ca.pem (give it to every node
as --tls-ca-file and to clients as --ca-file) and fusebox-ca-key.pem (mode
0600; keep it offline, it signs certificates). To rotate the CA, create a new
one in another --out-dir and append its certificate to every node's CA file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pair, err := tlsutil.CreateCA(o)
			if err != nil {
				return err
			}
			return writePair(cmd.OutOrStdout(), outDir, "fusebox-ca", pair)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Days, "days", 5*365, "days the CA is valid")
	fl.StringVar(&o.Domain, "domain", tlsutil.DefaultDomain, "domain of the cluster's names (node certificates carry server.<domain>)")
	fl.StringVar(&o.CommonName, "common-name", "", "subject common name of the CA (default \"fusebox CA <serial>\")")
	fl.StringVar(&outDir, "out-dir", ".", "directory to write the files to")
	return cmd
}

func certCreateCmd() *cobra.Command {
	var (
		o                     tlsutil.CertOptions
		nodeID, name          string
		client                bool
		ips                   []string
		caFile, caKey, outDir string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a node certificate (--node ID) or a CLI client certificate (--client --name NAME)",
		Long: `Create a certificate signed by the CA (ECDSA P-256).

--node ID writes fusebox-node-ID.pem and fusebox-node-ID-key.pem: a node
certificate, for both server and client auth. Like Consul, it always names
127.0.0.1 and localhost (so the node can be reached on loopback) and
server.<domain>, plus every --ip and --dns given: list the addresses clients
use to reach the node's API (peers verify only the CA chain; see
internal/tlsutil/DESIGN.md).

--client --name NAME writes fusebox-client-NAME.pem and its key: client auth
only, for "fusebox admin --client-cert". The HTTP API accepts it; Raft does
not (Raft accepts node certificates only).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var file string
			switch {
			case client && nodeID != "":
				return errors.New("--client and --node: choose one")
			case client:
				if name == "" {
					return errors.New("--client needs --name NAME (the user or tool the certificate is for)")
				}
				o.CommonName, file = name, "fusebox-client-"+name
				if len(ips) > 0 || len(o.DNSNames) > 0 {
					return errors.New("--ip and --dns are for node certificates (--node), not --client")
				}
			case nodeID != "":
				o.CommonName, o.Node, file = nodeID, true, "fusebox-node-"+nodeID
			default:
				return errors.New("say what the certificate is for: --node ID, or --client --name NAME")
			}
			if strings.ContainsAny(o.CommonName, `/\`) || strings.HasPrefix(o.CommonName, ".") {
				return fmt.Errorf("%q: a name must not contain / or \\ or start with a dot (it becomes a file name)", o.CommonName)
			}
			for _, s := range ips {
				ip := net.ParseIP(s)
				if ip == nil {
					return fmt.Errorf("--ip %q: not an IP address", s)
				}
				o.IPs = append(o.IPs, ip)
			}
			certPEM, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("--ca: %w (create one with \"fusebox tls ca create\")", err)
			}
			keyPEM, err := os.ReadFile(caKey)
			if err != nil {
				return fmt.Errorf("--ca-key: %w", err)
			}
			pair, err := tlsutil.CreateCert(tlsutil.PEMPair{Cert: certPEM, Key: keyPEM}, o)
			if err != nil {
				return err
			}
			return writePair(cmd.OutOrStdout(), outDir, file, pair)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&nodeID, "node", "", "node id (its --node-id): create a node certificate")
	fl.BoolVar(&client, "client", false, "create a CLI client certificate (with --name)")
	fl.StringVar(&name, "name", "", "name of the client certificate's holder (with --client)")
	fl.StringSliceVar(&ips, "ip", nil, "IP address the node is reached on (repeatable or comma-separated); 127.0.0.1 is always added")
	fl.StringSliceVar(&o.DNSNames, "dns", nil, "DNS name the node is reached on (repeatable or comma-separated); localhost and server.<domain> are always added")
	fl.StringVar(&o.Domain, "domain", tlsutil.DefaultDomain, "domain of the cluster's names (server.<domain>)")
	fl.IntVar(&o.Days, "days", 365, "days the certificate is valid (at most until the CA expires)")
	fl.StringVar(&caFile, "ca", "fusebox-ca.pem", "CA certificate to sign with")
	fl.StringVar(&caKey, "ca-key", "fusebox-ca-key.pem", "CA private key to sign with")
	fl.StringVar(&outDir, "out-dir", ".", "directory to write the files to")
	return cmd
}

// writePair writes base.pem (0644) and base-key.pem (0600) into dir,
// refusing to overwrite either.
func writePair(out io.Writer, dir, base string, pair tlsutil.PEMPair) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out-dir: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, base+".pem"), filepath.Join(dir, base+"-key.pem")
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s already exists; not overwriting it (remove it or pick another --out-dir)", p)
		}
	}
	if err := writeNew(keyPath, pair.Key, 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, pair.Cert, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "==> wrote %s\n==> wrote %s (private key, mode 0600)\n", certPath, keyPath)
	return nil
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// applyAdminEnv fills admin's unset flags from the environment, Consul and
// Nomad style; FUSEBOX_ADMIN_TOKEN_FILE is the deprecated name of
// FUSEBOX_TOKEN_FILE.
func applyAdminEnv(cmd *cobra.Command) error {
	fl := cmd.Flags()
	if err := applyEnvNamed(fl, map[string]string{
		"addr": "FUSEBOX_ADDR", "token-file": "FUSEBOX_TOKEN_FILE",
		"ca-file": "FUSEBOX_CACERT", "client-cert": "FUSEBOX_CLIENT_CERT", "client-key": "FUSEBOX_CLIENT_KEY",
	}); err != nil {
		return err
	}
	if v, ok := os.LookupEnv("FUSEBOX_ADMIN_TOKEN_FILE"); ok && !fl.Changed("token-file") {
		fmt.Fprintln(cmd.ErrOrStderr(), "fusebox: FUSEBOX_ADMIN_TOKEN_FILE is deprecated; use FUSEBOX_TOKEN_FILE")
		return fl.Set("token-file", v)
	}
	return nil
}

// newClient builds the API client: plain HTTP, or HTTPS verified against
// --ca-file (presenting --client-cert when given) when --addr is https://
// or has no scheme and TLS flags are set.
func (o *adminOpts) newClient(tok string) (*api.Client, error) {
	useTLS := strings.HasPrefix(o.addr, "https://") ||
		(!strings.Contains(o.addr, "://") && (o.tls.CAFile != "" || o.tls.CertFile != ""))
	if !useTLS {
		return api.NewClient(o.addr, tok, nil), nil
	}
	cfg, err := tlsutil.ClientConfig(o.tls)
	if err != nil {
		return nil, err
	}
	return api.NewTLSClient(o.addr, tok, newHTTPSClient(cfg)), nil
}

// tlsHint turns a scheme or CA mismatch into advice.
func tlsHint(addr string, err error) error {
	msg := err.Error()
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	switch {
	case strings.Contains(msg, "Client sent an HTTP request to an HTTPS server"):
		host := strings.TrimPrefix(addr, "http://")
		return &exitError{code: 4, msg: fmt.Sprintf("%s serves HTTPS: use --addr https://%s with --ca-file CA.pem (or FUSEBOX_ADDR and FUSEBOX_CACERT)", addr, host)}
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"),
		strings.Contains(msg, "first record does not look like a TLS handshake"):
		host := strings.TrimPrefix(addr, "https://")
		return &exitError{code: 4, msg: fmt.Sprintf("%s serves plain HTTP, not HTTPS: use --addr http://%s", addr, host)}
	case errors.As(err, &ua):
		return &exitError{code: 4, msg: fmt.Sprintf("%s: the node's certificate is not signed by a CA in --ca-file (FUSEBOX_CACERT): %v", addr, err)}
	case errors.As(err, &hn):
		return &exitError{code: 4, msg: fmt.Sprintf("%s: %v; use an address the node's certificate names (\"fusebox tls cert create --ip/--dns\")", addr, err)}
	}
	return err
}

func newHTTPSClient(cfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, TLSClientConfig: cfg, TLSHandshakeTimeout: 10 * time.Second, ForceAttemptHTTP2: true,
	}}
}
