package pgstore

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// PublicReason says why the database could not be used, for readers who
// hold no token (/readyz): a class of failure and, for the server's own
// refusals, its SQLSTATE, never the URL, host, user or database name that
// the driver's errors carry. The whole error (its URL redacted) is in the
// node's log.
func PublicReason(err error) string {
	var pe *pgconn.PgError
	var dns *net.DNSError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pe):
		switch pe.Code {
		case "28P01", "28000":
			return "the database refused the credentials (SQLSTATE " + pe.Code + ")"
		case "3D000":
			return "the database does not exist (SQLSTATE 3D000)"
		default:
			return "the database refused (SQLSTATE " + pe.Code + ")"
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		return "the database host name did not resolve"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "the database did not answer in time"
	default:
		return "unreachable or refused (the node's log has the error)"
	}
}
