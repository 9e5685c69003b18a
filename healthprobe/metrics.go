package healthprobe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	checks *prometheus.CounterVec
}

// newMetrics registers fusebox_health_checks_total{role,result}: 4 roles ×
// 4 results, no per-destination label.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_health_checks_total",
			Help: "Active health checks of open breakers' destinations, by role (owner, fallback, settle, confirm) and result (pass, fail, error, refused).",
		}, []string{"role", "result"}),
	}
	for _, role := range []string{RoleOwner, RoleFallback, RoleSettle, RoleConfirm} {
		for _, res := range []string{ResultPass, ResultFail, ResultError, ResultRefused} {
			m.checks.WithLabelValues(role, res)
		}
	}
	if reg != nil {
		if err := reg.Register(m.checks); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// drain reads a little of the body so the connection can be reused, then
// closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
}

// errorKind names a transport error without its URL (which may hold a
// secret in its query).
func errorKind(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op + " error"
	}
	return "transport error"
}
