package node

import (
	"errors"
	"fmt"
)

// reloader is one piece of configuration Reload re-reads.
type reloader struct {
	name string
	fn   func() error
}

// addReloader registers fn with Reload. Register during Start.
func (n *Node) addReloader(name string, fn func() error) {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	n.reloaders = append(n.reloaders, reloader{name: name, fn: fn})
}

// Reload re-reads what can change without a restart (serve calls it on
// SIGHUP): the TLS certificate, key and CA bundle, and the token file.
// Every reloader runs even if an earlier one fails; each failure keeps that
// piece's old value and is returned, named. Reloads run one at a time.
func (n *Node) Reload() error {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	var errs []error
	for _, r := range n.reloaders {
		if err := r.fn(); err != nil {
			errs = append(errs, fmt.Errorf("reload %s: %w", r.name, err))
			continue
		}
		n.log.Info("reloaded", "what", r.name)
	}
	return errors.Join(errs...)
}
