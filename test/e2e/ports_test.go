package e2e

import "fusebox/internal/localproc"

// assignPorts gives cfg fresh http, gossip (TCP+UDP) and raft ports on host.
// Nothing is reserved (localproc.FreeAddr): another process can take a port
// before fusebox binds it; callers retry on errAddrInUse.
func assignPorts(cfg *ProcessConfig, host string) error {
	var err error
	if cfg.HTTPAddr, err = localproc.FreeAddr(host, false); err != nil {
		return err
	}
	if cfg.GossipAddr, err = localproc.FreeAddr(host, true); err != nil {
		return err
	}
	cfg.RaftAddr, err = localproc.FreeAddr(host, false)
	return err
}
