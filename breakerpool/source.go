package breakerpool

// SettingsSource resolves the settings of a (namespace, destination) pair —
// the most specific dynamic-config value wins — and tells subscribers when
// any value may have changed. The pool re-resolves every live breaker on a
// change; identical settings are a no-op. The source in production is
// dynconfig.Collection, fed from Raft; this package's tests use an in-memory
// StaticSource (static_source_test.go).
type SettingsSource interface {
	// Settings returns valid, effective settings for the pair.
	Settings(namespaceID, destination string) Settings
	// Subscribe registers fn to be called after settings may have changed.
	// fn must not block for long; calls to one fn are never concurrent.
	// The returned cancel stops further calls and is idempotent.
	Subscribe(fn func()) (cancel func())
}
