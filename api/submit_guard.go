package api

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/dynconfig"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// Reason label of fusebox_tasks_submit_refused_total for the data-dir floor
// (the others are raftstore's overload reasons).
const refusedDiskSpace = "disk_space"

// diskRetryAfter is the Retry-After of a 503 for a data dir below its floor.
const diskRetryAfter = 5

// submitGuard keeps one destination's backlog from refusing another's
// tasks, and protects the node: a per-(namespace, destination) backlog cap
// and a total pending-task ceiling (both enforced exactly by the FSM from
// limits carried in the command, checked here first against the local
// replica so a full destination costs no Raft round trip), and a node-local
// data-dir free-space floor.
type submitGuard struct {
	svc     TaskService
	refused *prometheus.CounterVec
}

func newSubmitGuard(svc TaskService, reg prometheus.Registerer, log *slog.Logger) *submitGuard {
	g := &submitGuard{svc: svc, refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fusebox_tasks_submit_refused_total",
		Help: "Tasks refused at submit by a backlog limit or the node's guard: destination_backlog (429, fusebox.tasks.maxDestinationBacklog), pending_limit (429, fusebox.tasks.maxPendingTasks), disk_space (503, fusebox.tasks.minFreeDiskMB), shard_backlog (old log entries only).",
	}, []string{"reason"})}
	for _, r := range []string{state.OverloadDestination, state.OverloadPending, refusedDiskSpace} {
		g.refused.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(g.refused); err != nil {
			log.Warn("task submit metrics not registered", "err", err)
		}
	}
	return g
}

func (g *submitGuard) count(reason string) { g.refused.WithLabelValues(reason).Inc() }

// admitNode refuses every submit through this node while its data dir is
// below the free-space floor: Raft's log and snapshots live there, and a
// full disk stops the node applying anything at all.
func (g *submitGuard) admitNode() error {
	free, floor := g.svc.DataDirSpace()
	if floor == 0 || free >= floor {
		return nil
	}
	g.count(refusedDiskSpace)
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: diskRetryAfter, Key: dynconfig.KeyTaskMinFreeDiskMB,
		Message: fmt.Sprintf("this node's data dir has %d MiB free, below its floor of %d MiB (%s); submit through another node or free space",
			free>>20, floor>>20, dynconfig.KeyTaskMinFreeDiskMB)}
}

// admit is admitNode, then the backlog limits nt carries against the local
// replica's counts (possibly stale; the FSM decides exactly). A task with a
// request id, or a retry of a write the replica remembers an answer to
// (its X-Request-Id answered, not refused), goes to the FSM regardless: a
// retry of one already accepted must get its original answer (duplicate,
// or the first answer), not a 429 the task itself filled. A first attempt
// refused here is never proposed, so nothing remembers the refusal and its
// retry is decided afresh. A refusal the FSM made is remembered, but a
// retry of it is checked here again and, if admitted, decided afresh by
// the store (raftstore's submit_retry.go): a 429 here adds nothing to the
// log.
func (g *submitGuard) admit(nt *state.NewTask, retry bool) error {
	if err := g.admitNode(); err != nil {
		return err
	}
	if nt.RequestID != "" || retry {
		return nil
	}
	dest := breakerDestination(nt)
	switch {
	case nt.MaxDestinationBacklog > 0 && g.svc.DestinationBacklog(nt.NamespaceID, dest) >= nt.MaxDestinationBacklog:
		return g.refusedErr(nt, state.OverloadDestination)
	case nt.MaxPendingTasks > 0 && g.svc.PendingTasks() >= nt.MaxPendingTasks:
		return g.refusedErr(nt, state.OverloadPending)
	}
	return nil
}

// refusedErr counts a refusal and returns its 429.
func (g *submitGuard) refusedErr(nt *state.NewTask, reason string) error {
	g.count(reason)
	return g.overloadError(nt, reason)
}

// overloadError is the 429 for a task a limit refused: the message, the
// field and the key name the limit, and for a destination's cap the
// destination, so a client can tell that only that destination is full.
func (g *submitGuard) overloadError(nt *state.NewTask, reason string) *Error {
	e := &Error{Status: http.StatusTooManyRequests, Code: CodeOverloaded, RetryAfter: overloadRetryAfter}
	switch reason {
	case state.OverloadDestination:
		dest := transport.RedactURL(breakerDestination(nt))
		e.Field, e.Key = "destination", dynconfig.KeyTaskMaxDestinationBacklog
		e.Message = fmt.Sprintf("destination %q of namespace %q has %d or more pending tasks (%s); tasks for other destinations are accepted; retry later",
			dest, nt.NamespaceID, nt.MaxDestinationBacklog, dynconfig.KeyTaskMaxDestinationBacklog)
	case state.OverloadPending:
		e.Key = dynconfig.KeyTaskMaxPendingTasks
		e.Message = fmt.Sprintf("the cluster holds %d or more pending tasks (%s); retry later", nt.MaxPendingTasks, dynconfig.KeyTaskMaxPendingTasks)
	default:
		e.Message = fmt.Sprintf("shard %d is over its backlog limit; retry later", nt.Shard)
	}
	return e
}

// breakerDestination is the destination nt's limits count by.
func breakerDestination(nt *state.NewTask) string {
	if nt.DestinationKey != "" {
		return nt.DestinationKey
	}
	return nt.Destination
}
