package localproc

import "net/http"

// Bearer adds a bearer token to the raw requests of a program driving
// fusebox nodes (/metrics and the other reads need a token once the node has
// one); a request that has its own Authorization header keeps it. An empty
// token adds nothing.
type Bearer struct {
	Token string
	Next  *http.Transport
}

// RoundTrip implements http.RoundTripper.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.Token != "" && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.Token)
	}
	return b.Next.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (b Bearer) CloseIdleConnections() { b.Next.CloseIdleConnections() }
