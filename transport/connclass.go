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
	ConnOther   = "network" // any other network error
)

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
