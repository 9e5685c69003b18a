package node

import (
	"context"
	"net/url"
	"sync/atomic"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/healthprobe"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// healthForwarder carries the pool's transitions to the health prober,
// which is built after the queue (it calls through the executor's client).
type healthForwarder struct {
	p atomic.Pointer[healthprobe.Prober]
}

func (f *healthForwarder) observe(t breakerpool.Transition) {
	if p := f.p.Load(); p != nil {
		p.Observe(t)
	}
}

// startHealth builds and starts the node's health prober: the health check
// of a key comes from its endpoint's registration (Nexus task groups, the
// destination is the endpoint name); the key's probe owner is the hint
// policy's; calls go through the outbound executor's client (its dialer
// refuses members) after the endpoint allowlist check.
func (n *Node) startHealth(policy *transport.Policy) error {
	p, err := healthprobe.New(healthprobe.Config{
		NodeID:     n.cfg.NodeID,
		Logger:     n.log.With("component", "healthprobe"),
		Registerer: n.reg,
	}, healthprobe.Deps{
		Pool:   n.pool,
		Checks: n.healthCheckOf,
		Owner:  n.hints.Owner,
		Allow: func(ctx context.Context, k breakerpool.Key, rawURL string) error {
			if k.TaskGroup == breakerpool.TaskGroupCallback {
				return policy.Check(ctx, k.NamespaceID, rawURL) // the namespace's allowlist, as for its callbacks
			}
			return policy.CheckEndpoint(ctx, rawURL)
		},
		Client: n.deliver.exec.HTTPClient(),
	})
	if err != nil {
		return err
	}
	n.health = p
	n.healthFwd.p.Store(p)
	p.Start()
	return nil
}

// healthCheckOf is the health check of a breaker key, if its destination
// has one: a Nexus endpoint registered with "health", or a callback
// destination (scheme://host) given a path by fusebox.destination.healthPath
// (checked with the registration defaults: every 10s, 2s timeout, 200).
func (n *Node) healthCheckOf(k breakerpool.Key) (healthprobe.Check, bool) {
	if k.TaskGroup == breakerpool.TaskGroupCallback {
		path := n.config.Current().HealthPath(k.NamespaceID, k.Destination)
		if path == "" {
			return healthprobe.Check{}, false
		}
		u, err := url.Parse(k.Destination)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Path != "" || u.User != nil {
			return healthprobe.Check{}, false
		}
		return healthprobe.Check{URL: k.Destination + path, Interval: state.HealthDefaultInterval,
			Timeout: state.HealthDefaultTimeout, HealthyStatus: state.HealthDefaultStatus}, true
	}
	e, ok := n.state.Endpoint(k.Destination)
	if !ok || e.Health == nil {
		return healthprobe.Check{}, false
	}
	interval, timeout := e.Health.Durations()
	return healthprobe.Check{URL: e.Health.URL, Interval: interval, Timeout: timeout, HealthyStatus: e.Health.HealthyStatus}, true
}

// hasHealthCheck is hintpolicy.Config.HealthChecked.
func (n *Node) hasHealthCheck(k breakerpool.Key) bool {
	_, ok := n.healthCheckOf(k)
	return ok
}

// confirmByHealth is hintpolicy.Config.ConfirmProbe: under the confirm
// hint policy, the designated peer of a key with a health check answers
// with a health call instead of a real task (healthprobe.Prober.CheckNow).
func (n *Node) confirmByHealth(k breakerpool.Key) bool {
	p := n.healthFwd.p.Load()
	return p != nil && p.CheckNow(k)
}

// closeHealth stops the prober (before the executor whose client it uses).
func (n *Node) closeHealth() {
	n.healthFwd.p.Store(nil)
	if n.health != nil {
		n.health.Close()
	}
}

// healthAPI adapts the prober's last results to the API's breaker list.
type healthAPI struct{ n *Node }

func (h healthAPI) HealthOf(k breakerpool.Key) (api.BreakerHealth, bool) {
	p := h.n.health
	if p == nil {
		return api.BreakerHealth{}, false
	}
	r, ok := p.Last(k)
	if !ok {
		return api.BreakerHealth{}, false
	}
	return api.BreakerHealth{At: r.At, Result: r.Result, Role: r.Role, Status: r.Status, Error: r.Error,
		DurationSeconds: r.Duration.Seconds()}, true
}
