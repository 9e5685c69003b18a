package dynconfig

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"fusebox/breakerpool"
)

// Snapshot is an immutable, resolved view of the dynamic-config table. Values
// are decoded once, when the snapshot is built; lookups are map reads. A nil
// *Snapshot behaves as an empty one (every key at its default).
type Snapshot struct {
	keys    []keyValues // indexed like registry
	entries []Entry     // canonical values, sorted by key, namespace, destination
	invalid error
}

// value is one decoded value and its canonical JSON.
type value struct {
	v   any
	raw json.RawMessage
}

type pair struct{ namespace, destination string }

// keyValues holds every value set for one key, by constraint.
type keyValues struct {
	global   *value
	byNS     map[string]*value
	byDest   map[string]*value
	byNSDest map[pair]*value
}

var empty = &Snapshot{keys: make([]keyValues, len(registry))}

// buildSnapshot builds a snapshot from the stored entries (Collection.Update
// is its one caller outside tests). Entries are expected to be valid
// already; one that is not is skipped and reported in the returned error
// (also kept as Invalid), and the snapshot is still usable. When two
// entries address the same key and constraint the later one wins and the
// earlier is reported. It reuses prev's decoded values: an entry whose
// key, constraint and bytes equal a value of prev (the usual case, since the
// store keeps canonical values) is not decoded again.
func buildSnapshot(entries []Entry, prev *Snapshot) (*Snapshot, error) {
	s := &Snapshot{keys: make([]keyValues, len(registry))}
	var errs []error
	type slot struct {
		key int
		p   pair
	}
	at := make(map[slot]int, len(entries)) // slot -> index in s.entries
	for _, e := range entries {
		val := prev.exact(e)
		if val == nil {
			d, v, err := check(e)
			if err != nil {
				errs = append(errs, fmt.Errorf("skipped entry %s: %w", describe(e), err))
				continue
			}
			val = &value{v: v, raw: d.encode(v)}
		}
		i := byName[e.Key]
		kv := &s.keys[i]
		p := pair{e.Namespace, e.Destination}
		switch e.Constraint() {
		case ConstraintGlobal:
			kv.global = val
		case ConstraintNamespace:
			kv.byNS = setIn(kv.byNS, e.Namespace, val)
		case ConstraintDestination:
			kv.byDest = setIn(kv.byDest, e.Destination, val)
		case ConstraintNamespaceDestination:
			kv.byNSDest = setIn(kv.byNSDest, p, val)
		}
		ce := Entry{Key: e.Key, Namespace: e.Namespace, Destination: e.Destination, Value: val.raw}
		if j, dup := at[slot{i, p}]; dup {
			errs = append(errs, fmt.Errorf("entry %s set more than once; the last value wins", describe(e)))
			s.entries[j] = ce
			continue
		}
		at[slot{i, p}] = len(s.entries)
		s.entries = append(s.entries, ce)
	}
	slices.SortFunc(s.entries, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.Key, b.Key),
			strings.Compare(a.Namespace, b.Namespace),
			strings.Compare(a.Destination, b.Destination))
	})
	s.invalid = errors.Join(errs...)
	return s, s.invalid
}

func setIn[K comparable](m map[K]*value, k K, v *value) map[K]*value {
	if m == nil {
		m = make(map[K]*value)
	}
	m[k] = v
	return m
}

// exact returns s's value set for exactly e's key and constraint when its
// canonical bytes equal e.Value, else nil. Values are immutable, so the two
// snapshots may share it.
func (s *Snapshot) exact(e Entry) *value {
	if s == nil {
		return nil
	}
	i, ok := byName[e.Key]
	if !ok {
		return nil
	}
	kv := &s.keys[i]
	var v *value
	switch e.Constraint() {
	case ConstraintGlobal:
		v = kv.global
	case ConstraintNamespace:
		v = kv.byNS[e.Namespace]
	case ConstraintDestination:
		v = kv.byDest[e.Destination]
	case ConstraintNamespaceDestination:
		v = kv.byNSDest[pair{e.Namespace, e.Destination}]
	}
	if v == nil || !bytes.Equal(v.raw, e.Value) {
		return nil
	}
	return v
}

// describe names an entry in an error without repeating its value.
func describe(e Entry) string {
	return fmt.Sprintf("{key %q, namespace %q, destination %q}",
		truncate(e.Key, maxKeyBytes), truncate(e.Namespace, maxEcho), truncate(e.Destination, maxEcho))
}

// Entries returns the snapshot's valid entries with canonical values, sorted
// by key, namespace and destination. The caller must not modify them.
func (s *Snapshot) Entries() []Entry {
	if s == nil {
		return nil
	}
	return s.entries
}

// Invalid returns the entries NewSnapshot skipped, joined, or nil.
func (s *Snapshot) Invalid() error {
	if s == nil {
		return nil
	}
	return s.invalid
}

// Equal reports whether two snapshots hold the same values.
func (s *Snapshot) Equal(o *Snapshot) bool {
	return slices.EqualFunc(s.Entries(), o.Entries(), func(a, b Entry) bool {
		return a.Key == b.Key && a.Namespace == b.Namespace && a.Destination == b.Destination &&
			bytes.Equal(a.Value, b.Value)
	})
}

// resolve returns the most specific value of key i for (ns, dest), or nil
// and ConstraintDefault. Levels the key does not accept hold no values, so
// they need no special case.
func (s *Snapshot) resolve(i int, ns, dest string) (*value, Constraint) {
	if s == nil {
		s = empty
	}
	kv := &s.keys[i]
	if ns != "" && dest != "" && kv.byNSDest != nil {
		if v := kv.byNSDest[pair{ns, dest}]; v != nil {
			return v, ConstraintNamespaceDestination
		}
	}
	if dest != "" && kv.byDest != nil {
		if v := kv.byDest[dest]; v != nil {
			return v, ConstraintDestination
		}
	}
	if ns != "" && kv.byNS != nil {
		if v := kv.byNS[ns]; v != nil {
			return v, ConstraintNamespace
		}
	}
	if kv.global != nil {
		return kv.global, ConstraintGlobal
	}
	return nil, ConstraintDefault
}

// get returns the effective decoded value of key i.
func (s *Snapshot) get(i int, ns, dest string) any {
	if v, _ := s.resolve(i, ns, dest); v != nil {
		return v.v
	}
	return registry[i].def
}

// Lookup returns the effective canonical value of key for (ns, dest) and the
// level it came from (ConstraintDefault: the key's default). ok is false only
// for an unknown key. The caller must not modify the returned value.
func (s *Snapshot) Lookup(key, ns, dest string) (value json.RawMessage, from Constraint, ok bool) {
	i, ok := byName[key]
	if !ok {
		return nil, ConstraintDefault, false
	}
	if v, c := s.resolve(i, ns, dest); v != nil {
		return v.raw, c, true
	}
	return registry[i].defRaw, ConstraintDefault, true
}

// BreakerSettings returns the effective circuit breaker settings for (ns,
// dest), with HintPolicy and MaxRetryAfter resolved from their own keys.
// The result is valid and normalized.
func (s *Snapshot) BreakerSettings(ns, dest string) breakerpool.Settings {
	bs := s.get(idxBreakerSettings, ns, dest).(breakerpool.Settings)
	bs.HintPolicy = breakerpool.HintPolicy(s.get(idxHintPolicy, ns, dest).(string))
	bs.MaxRetryAfter = breakerpool.Duration(s.get(idxMaxRetryAfter, ns, dest).(time.Duration))
	return bs
}

// HintPolicy returns the effective hint policy for (ns, dest).
func (s *Snapshot) HintPolicy(ns, dest string) breakerpool.HintPolicy {
	return breakerpool.HintPolicy(s.get(idxHintPolicy, ns, dest).(string))
}

// CallThroughPeer reports whether the calls this node's open breaker for
// (ns, dest) refuses may be made through a peer whose calls pass
// (fusebox.breaker.callThroughPeer).
func (s *Snapshot) CallThroughPeer(ns, dest string) bool {
	return s.get(idxCallThroughPeer, ns, dest).(string) != CallThroughPeerOff
}

// BatchSize returns history.outboundTaskBatchSize (global only); 0 means
// the reader is stopped.
func (s *Snapshot) BatchSize() int { return s.get(idxBatchSize, "", "").(int) }

// BufferSize returns the group limiter's buffer size for (ns, dest).
func (s *Snapshot) BufferSize(ns, dest string) int { return s.get(idxBufferSize, ns, dest).(int) }

// Concurrency returns the group limiter's concurrency for (ns, dest).
func (s *Snapshot) Concurrency(ns, dest string) int { return s.get(idxConcurrency, ns, dest).(int) }

// MaxTaskRPS returns the host scheduler's rate for (ns, dest); burst = rate.
func (s *Snapshot) MaxTaskRPS(ns, dest string) float64 {
	return s.get(idxMaxTaskRPS, ns, dest).(float64)
}

// RequestTimeout returns the outbound request timeout for a task group:
// component.nexusoperations.request.timeout for the Nexus task groups,
// component.callbacks.request.timeout for callbacks, and
// DefaultRequestTimeout for a task group fusebox does not know.
func (s *Snapshot) RequestTimeout(taskGroup, ns, dest string) time.Duration {
	switch taskGroup {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation:
		return s.get(idxNexusTimeout, ns, dest).(time.Duration)
	case breakerpool.TaskGroupCallback:
		return s.get(idxCallbackTimeout, ns, dest).(time.Duration)
	default:
		return DefaultRequestTimeout
	}
}

// RetryPolicy returns the retry backoff of a task group for (ns, dest): the
// first delay and the cap (Temporal's retryPolicy.initialInterval and
// maxInterval of components/nexusoperations and components/callbacks). A
// task group fusebox does not know gets Temporal's defaults (1s, 1h).
func (s *Snapshot) RetryPolicy(taskGroup, ns, dest string) (initial, maxInterval time.Duration) {
	switch taskGroup {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation:
		return s.get(idxNexusRetryInit, ns, dest).(time.Duration), s.get(idxNexusRetryMax, ns, dest).(time.Duration)
	case breakerpool.TaskGroupCallback:
		return s.get(idxCbRetryInit, ns, dest).(time.Duration), s.get(idxCbRetryMax, ns, dest).(time.Duration)
	default:
		return DefaultRetryInitialInterval, DefaultRetryMaxInterval
	}
}

// MinRequestTimeout returns the least time that must remain before a task's
// deadline for a call to be made: component.nexusoperations.limit.request.
// timeout.min for the Nexus task groups, 0 otherwise (Temporal has no such
// limit for callbacks).
func (s *Snapshot) MinRequestTimeout(taskGroup, ns string) time.Duration {
	switch taskGroup {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation:
		return s.get(idxNexusMinTimeout, ns, "").(time.Duration)
	}
	return 0
}

// MaxUnexpectedErrors returns history.TaskDLQUnexpectedErrorAttempts: the
// unexpected errors after which a task is dead-lettered.
func (s *Snapshot) MaxUnexpectedErrors() int { return s.get(idxDLQAttempts, "", "").(int) }

// ScheduleToClose returns the schedule-to-close timeout of a task submitted
// with requested (0: none given): requested, else
// fusebox.tasks.defaultScheduleToCloseTimeout for (ns, dest); for the Nexus
// task groups capped by component.nexusoperations.limit.scheduleToCloseTimeout
// when that is set (Temporal caps both given and missing timeouts). 0 means
// no deadline.
func (s *Snapshot) ScheduleToClose(taskGroup, ns, dest string, requested time.Duration) time.Duration {
	d := requested
	if d <= 0 {
		d = s.get(idxTaskS2C, ns, dest).(time.Duration)
	}
	switch taskGroup {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation:
		if limit := s.get(idxNexusMaxS2C, ns, "").(time.Duration); limit > 0 && (d <= 0 || d > limit) {
			d = limit
		}
	}
	return d
}

// RampStartRPS returns fusebox.destination.rampStartRPS for (ns, dest): the
// fleet-wide rate of the first ramp stage after a close.
func (s *Snapshot) RampStartRPS(ns, dest string) float64 {
	return s.get(idxRampStartRPS, ns, dest).(float64)
}

// FleetRPS returns fusebox.destination.fleetRPS for (ns, dest): the
// destination's fleet-wide rate budget; 0 means none.
func (s *Snapshot) FleetRPS(ns, dest string) float64 {
	return s.get(idxFleetRPS, ns, dest).(float64)
}

// RampDuration returns fusebox.destination.rampDuration for (ns, dest); 0
// means no ramp.
func (s *Snapshot) RampDuration(ns, dest string) time.Duration {
	return s.get(idxRampDuration, ns, dest).(time.Duration)
}
