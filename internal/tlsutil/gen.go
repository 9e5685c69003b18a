package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// DefaultDomain is the domain of `fusebox tls` names (server.<domain>).
const DefaultDomain = "fusebox"

// CAOptions configure CreateCA. Zero values: 5 years, "fusebox CA <serial>".
type CAOptions struct {
	Days       int
	CommonName string
	Domain     string // recorded in the CA's subject (OU); default "fusebox"
	// NotBefore overrides the start of validity (tests of expiry).
	NotBefore time.Time
}

// CertOptions configure CreateCert.
type CertOptions struct {
	CommonName string   // node id or client name
	Node       bool     // a node certificate: server and client auth
	IPs        []net.IP // beyond 127.0.0.1 (added unless NoDefaultSANs)
	DNSNames   []string // beyond localhost and server.<domain>
	Domain     string   // default "fusebox"
	Days       int      // default 365
	// NoDefaultSANs leaves out 127.0.0.1, localhost and server.<domain>.
	NoDefaultSANs bool
	// NotBefore overrides the start of validity (tests of expiry).
	NotBefore time.Time
}

// PEMPair is a certificate and its private key, PEM-encoded.
type PEMPair struct {
	Cert []byte
	Key  []byte
}

// CreateCA makes a self-signed ECDSA P-256 CA.
func CreateCA(o CAOptions) (PEMPair, error) {
	key, serial, err := prepare(&o.Days, 5*365, &o.Domain)
	if err != nil {
		return PEMPair{}, err
	}
	if o.CommonName == "" {
		id := serial.Text(16)
		o.CommonName = "fusebox CA " + id[:min(8, len(id))]
	}
	skid, err := subjectKeyID(key)
	if err != nil {
		return PEMPair{}, err
	}
	start := o.NotBefore
	if start.IsZero() {
		start = time.Now().Add(-time.Minute)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: o.CommonName, Organization: []string{"fusebox"}, OrganizationalUnit: []string{o.Domain}},
		NotBefore:             start,
		NotAfter:              start.Add(time.Duration(o.Days) * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		SubjectKeyId:          skid,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return PEMPair{}, err
	}
	return encodePair(der, key)
}

// CreateCert makes an ECDSA P-256 certificate signed by the CA (PEM).
func CreateCert(caPair PEMPair, o CertOptions) (PEMPair, error) {
	ca, caKey, err := parseCA(caPair)
	if err != nil {
		return PEMPair{}, err
	}
	if o.CommonName == "" {
		return PEMPair{}, errors.New("certificate needs a name (--node or --name)")
	}
	key, serial, err := prepare(&o.Days, 365, &o.Domain)
	if err != nil {
		return PEMPair{}, err
	}
	start := o.NotBefore
	if start.IsZero() {
		start = time.Now().Add(-time.Minute)
	}
	end := start.Add(time.Duration(o.Days) * 24 * time.Hour)
	if end.After(ca.NotAfter) {
		return PEMPair{}, fmt.Errorf("--days %d: the certificate would outlive its CA (CA expires %s)", o.Days, ca.NotAfter.Format(time.DateOnly))
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: o.CommonName, Organization: []string{"fusebox"}},
		NotBefore:      start,
		NotAfter:       end,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IPAddresses:    o.IPs,
		DNSNames:       o.DNSNames,
		AuthorityKeyId: ca.SubjectKeyId,
	}
	if o.Node {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		if !o.NoDefaultSANs {
			tmpl.DNSNames = appendNew(tmpl.DNSNames, "localhost", "server."+o.Domain)
			if !containsIP(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1)) {
				tmpl.IPAddresses = append(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1))
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return PEMPair{}, err
	}
	return encodePair(der, key)
}

// prepare fills in the validity (days, 0 → def) and the domain, checks
// them, and makes the new certificate's key and serial.
func prepare(days *int, def int, domain *string) (*ecdsa.PrivateKey, *big.Int, error) {
	if *days == 0 {
		*days = def
	}
	if *days < 0 {
		return nil, nil, fmt.Errorf("--days %d: must be positive", *days)
	}
	if *domain == "" {
		*domain = DefaultDomain
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	return key, serial, nil
}

func parseCA(p PEMPair) (*x509.Certificate, any, error) {
	cb, _ := pem.Decode(p.Cert)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("--ca: no PEM CERTIFICATE")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--ca: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("--ca: not a CA certificate")
	}
	kb, _ := pem.Decode(p.Key)
	if kb == nil {
		return nil, nil, errors.New("--ca-key: no PEM private key")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		if key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
			return nil, nil, fmt.Errorf("--ca-key: %w", err)
		}
	}
	pub, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("--ca-key: unsupported key type")
	}
	if e, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !e.Equal(ca.PublicKey) {
		return nil, nil, errors.New("--ca-key does not match --ca")
	}
	return ca, key, nil
}

func encodePair(der []byte, key *ecdsa.PrivateKey) (PEMPair, error) {
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return PEMPair{}, err
	}
	return PEMPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}),
	}, nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func subjectKeyID(key *ecdsa.PrivateKey) ([]byte, error) {
	pk, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(pk)
	return sum[:20], nil
}

func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, l := range list {
			found = found || l == a
		}
		if !found {
			list = append(list, a)
		}
	}
	return list
}

func containsIP(list []net.IP, ip net.IP) bool {
	for _, l := range list {
		if l.Equal(ip) {
			return true
		}
	}
	return false
}
