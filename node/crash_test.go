package node

import "context"

// Test scaffolding kept out of the production build: the in-process
// harness's kill. Keep it in step with Node.Close (node.go): the same
// parts in the same order, minus the graceful steps.

// crash stops the node the way a SIGKILL would, for in-process tests: no
// gossip leave and no leadership transfer.
func (n *Node) crash() {
	n.closeOnce.Do(func() {
		if n.api != nil {
			_ = n.api.Close(context.Background())
		}
		n.closeHealth()
		_ = n.deliver.close()
		if n.cancel != nil {
			n.cancel()
		}
		n.wg.Wait()
		closeShards(n.shards)
		if n.hints != nil {
			n.hints.Close()
		}
		if n.members != nil {
			_ = n.members.Shutdown()
		}
		if n.store != nil {
			_ = n.store.Close()
		}
		n.pg.close()
		if n.pool != nil {
			n.pool.Close()
		}
		if n.config != nil {
			_ = n.config.Close()
		}
		n.closeTLS()
		if n.dirLock != nil {
			_ = n.dirLock.Close() // a dead process holds no lock
		}
	})
}
