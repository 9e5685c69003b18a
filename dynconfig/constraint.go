package dynconfig

import (
	"fmt"
)

// Constraint is the level a value applies at. Resolution picks the most
// specific level that has a value: NamespaceDestination > Destination >
// Namespace > Global > Default.
type Constraint uint8

const (
	// ConstraintDefault means no value is set: the key's default applies.
	ConstraintDefault Constraint = iota
	// ConstraintGlobal is a value with neither namespace nor destination.
	ConstraintGlobal
	// ConstraintNamespace is a value for one namespace, any destination.
	ConstraintNamespace
	// ConstraintDestination is a value for one destination, any namespace.
	ConstraintDestination
	// ConstraintNamespaceDestination is a value for one namespace and one
	// destination.
	ConstraintNamespaceDestination
)

var constraintNames = [...]string{
	ConstraintDefault:              "default",
	ConstraintGlobal:               "global",
	ConstraintNamespace:            "namespace",
	ConstraintDestination:          "destination",
	ConstraintNamespaceDestination: "namespace+destination",
}

func (c Constraint) String() string {
	if int(c) < len(constraintNames) {
		return constraintNames[c]
	}
	return fmt.Sprintf("Constraint(%d)", uint8(c))
}

// MarshalText spells the constraint as String does, for the API.
func (c Constraint) MarshalText() ([]byte, error) {
	if int(c) >= len(constraintNames) {
		return nil, fmt.Errorf("dynconfig: invalid constraint %d", uint8(c))
	}
	return []byte(constraintNames[c]), nil
}

// UnmarshalText parses what MarshalText writes.
func (c *Constraint) UnmarshalText(b []byte) error {
	for i, n := range constraintNames {
		if string(b) == n {
			*c = Constraint(i)
			return nil
		}
	}
	return fmt.Errorf("dynconfig: unknown constraint %q", truncate(string(b), maxEcho))
}

// constraintOf is the level an (namespace, destination) pair addresses.
func constraintOf(namespace, destination string) Constraint {
	switch {
	case namespace != "" && destination != "":
		return ConstraintNamespaceDestination
	case destination != "":
		return ConstraintDestination
	case namespace != "":
		return ConstraintNamespace
	default:
		return ConstraintGlobal
	}
}

// Scope says which constraints a key accepts. Every key accepts a global
// value; a key that accepts both namespace and destination also accepts the
// pair.
type Scope uint8

const (
	// GlobalOnly keys take one cluster-wide value.
	GlobalOnly Scope = 0
	// PerNamespace keys may also be set per namespace.
	PerNamespace Scope = 1
	// PerDestination keys may also be set per destination.
	PerDestination Scope = 2
	// PerNamespaceDestination keys may be set at every level.
	PerNamespaceDestination = PerNamespace | PerDestination
)

// Accepts reports whether a value at level c is allowed.
func (s Scope) Accepts(c Constraint) bool {
	switch c {
	case ConstraintGlobal:
		return true
	case ConstraintNamespace:
		return s&PerNamespace != 0
	case ConstraintDestination:
		return s&PerDestination != 0
	case ConstraintNamespaceDestination:
		return s == PerNamespaceDestination
	default:
		return false
	}
}

// Constraints lists the levels s accepts, least specific first.
func (s Scope) Constraints() []Constraint {
	var out []Constraint
	for c := ConstraintGlobal; c <= ConstraintNamespaceDestination; c++ {
		if s.Accepts(c) {
			out = append(out, c)
		}
	}
	return out
}

func (s Scope) String() string {
	switch s {
	case GlobalOnly:
		return "global only"
	case PerNamespace:
		return "global or per namespace"
	case PerDestination:
		return "global or per destination"
	case PerNamespaceDestination:
		return "global, per namespace and/or per destination"
	default:
		return fmt.Sprintf("Scope(%d)", uint8(s))
	}
}
