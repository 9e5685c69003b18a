// Package authtoken holds a node's API bearer tokens: named tokens with a
// role each, parsed from the --admin-token-file, looked up in constant time
// and reloaded atomically (a bad file keeps the tokens in force).
package authtoken

import (
	"fmt"
	"strings"
)

// Role is what a token may do. Routes declare the roles they accept
// (transport's route table); admin is accepted everywhere.
type Role uint8

// The roles, one bit each so a route can accept a set of them.
const (
	// RoleSubmit produces tasks: POST /v1/tasks, POST /v1/tasks:batch,
	// GET /v1/tasks/{id}.
	RoleSubmit Role = 1 << iota
	// RoleRead may call every GET.
	RoleRead
	// RoleNode is what nodes present to each other: POST
	// /internal/v1/apply and /internal/v1/apply/raw (leader forwarding) and every GET (peers'
	// /v1/breakers for ?scope=cluster, the status page's merges).
	RoleNode
	// RoleAdmin may call everything.
	RoleAdmin
)

// roleNames in the order of the file format's documentation.
var roleNames = []struct {
	r    Role
	name string
}{{RoleSubmit, "submit"}, {RoleRead, "read"}, {RoleNode, "node"}, {RoleAdmin, "admin"}}

// ParseRole maps a role's name to the Role.
func ParseRole(s string) (Role, error) {
	for _, rn := range roleNames {
		if rn.name == s {
			return rn.r, nil
		}
	}
	return 0, fmt.Errorf("unknown role %q (want submit, read, node or admin)", s)
}

// String is the role's name as written in the token file.
func (r Role) String() string {
	for _, rn := range roleNames {
		if rn.r == r {
			return rn.name
		}
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Roles is a set of roles: what a route accepts.
type Roles uint8

// Of builds a set; admin is always in it (an admin token may call
// everything).
func Of(rs ...Role) Roles {
	out := Roles(RoleAdmin)
	for _, r := range rs {
		out |= Roles(r)
	}
	return out
}

// Has reports whether r is in the set.
func (s Roles) Has(r Role) bool { return s&Roles(r) != 0 }

// String lists the set's roles, "read, node or admin".
func (s Roles) String() string {
	var names []string
	for _, rn := range roleNames {
		if s.Has(rn.r) {
			names = append(names, rn.name)
		}
	}
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
