package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
)

// Connection failure classes: what an attempt records instead of the raw
// dial or read error (which can name internal addresses, ports and
// resolver details).
const (
	ConnRefused = "refused" // nothing listens (ECONNREFUSED)
	ConnTimeout = "timeout" // no answer in time
	ConnTLS     = "tls"     // handshake failed: not TLS, bad certificate, alert
	ConnReset   = "reset"   // the peer reset or closed the connection
	ConnDNS     = "dns"     // the name did not resolve
	ConnBlocked = "blocked" // fusebox refused the address (a member's)
	ConnLocal   = "local"   // this node ran out of a resource (descriptors, ports, buffers)
	ConnOther   = "network" // any other network error
)

// isLocalResource reports whether err is this node running out of
// something a connection needs — file descriptors (EMFILE, ENFILE), local
// ports (EADDRNOTAVAIL), socket buffers (ENOBUFS, ENOMEM) — before the
// destination was reached. It says nothing about the destination: counted
// as its failure, a node short of descriptors tripped the breakers of
// every destination it called, a dead destination's and healthy ones'
// alike (the isolation review).
func isLocalResource(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.EADDRNOTAVAIL, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ConnClass classifies a transport error with errors.As / errors.Is on the
// standard library's error types, not on message text.
func ConnClass(err error) string {
	var (
		dnsErr  *net.DNSError
		destErr *DestinationError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &destErr):
		return ConnBlocked
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout && !dnsErr.IsNotFound {
			return ConnTimeout
		}
		return ConnDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ConnRefused
	case isLocalResource(err):
		return ConnLocal
	case errors.Is(err, http.ErrSchemeMismatch), // https to a plain HTTP server
		errors.As(err, &recErr), errors.As(err, &alert), errors.As(err, &verify),
		errors.As(err, &unknown), errors.As(err, &host), errors.As(err, &invalid):
		return ConnTLS
	case isTimeout(err):
		return ConnTimeout
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ConnReset
	}
	return ConnOther
}
