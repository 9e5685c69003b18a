package node

import (
	"fusebox/internal/authtoken"
)

// loadTokens reads --admin-token-file (and starts its poller), or makes a
// one-admin-token set of Config.AdminToken; with neither, the set is empty
// and the API asks for no token.
func (n *Node) loadTokens() error {
	if n.cfg.AdminTokenFile == "" {
		n.tokens = authtoken.Static(authtoken.Single(n.cfg.AdminToken))
		return nil
	}
	st, err := authtoken.Load(n.cfg.AdminTokenFile, n.reg, n.log.With("component", "auth"))
	if err != nil {
		return err
	}
	st.Watch(authtoken.DefaultPollInterval)
	n.tokens = st
	n.addReloader("--admin-token-file", st.Reload)
	return nil
}

// ReloadTokens re-reads --admin-token-file now (SIGHUP); a bad file keeps
// the tokens in force and returns the error naming the line and field.
// Without a file it does nothing.
func (n *Node) ReloadTokens() error {
	return n.tokens.Reload()
}
