package breakerpool

// SettingsSource resolves the settings of a (namespace, destination) pair —
// the most specific dynamic-config value wins — and tells subscribers when
// any value may have changed. The pool re-resolves every live breaker on a
// change; identical settings are a no-op. The Raft-backed source lives in
// raftstore; StaticSource is the in-memory one.
type SettingsSource interface {
	// Settings returns valid, effective settings for the pair.
	Settings(namespaceID, destination string) Settings
	// Subscribe registers fn to be called after settings may have changed.
	// fn must not block for long; calls to one fn are never concurrent.
	// The returned cancel stops further calls and is idempotent.
	Subscribe(fn func()) (cancel func())
}
