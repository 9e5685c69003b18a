package transport

import "net/http"

// HTTPClient is the client the executor calls destinations with: its
// dialer refuses cluster members' addresses (Options.Policy) and it follows
// no redirects. The health prober (healthprobe) calls health URLs through it,
// so a health check takes the same outbound path as a task.
func (e *Executor) HTTPClient() *http.Client { return e.client }
