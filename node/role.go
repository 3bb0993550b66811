package node

import (
	"fmt"
	"strings"

	"github.com/talosflash/talosflash/internal/editdistance"
)

// Role is a node's Talos machine type: what its config's machine.type says
// and what the inventory's role: promises. Talos' own type
// (pkg/machinery/config/machine/machine.go Type) has the same three
// values; init, long deprecated, is a control plane that starts etcd by
// itself (IsControlPlane counts it, as Talos' does).
type Role string

const (
	RoleUnknown      Role = ""             // not said (a custom profile naming no role, a typed address)
	RoleInit         Role = "init"         // a control plane whose config bootstraps etcd itself
	RoleControlPlane Role = "controlplane" // runs etcd and the Kubernetes control plane
	RoleWorker       Role = "worker"       // runs workloads only
)

// Roles are the roles a user picks (an inventory's role:, the CLI's
// --role): init is accepted only where Talos still takes it (ParseRole
// with init).
var Roles = []Role{RoleControlPlane, RoleWorker}

// IsControlPlane: the node runs etcd and the API server (controlplane or init).
func (r Role) IsControlPlane() bool { return r == RoleControlPlane || r == RoleInit }

// Known: a machine type, not RoleUnknown.
func (r Role) Known() bool { return r == RoleControlPlane || r == RoleWorker || r == RoleInit }

func (r Role) String() string { return string(r) }

// WithArticle is the role in a sentence: "a worker", "an init".
func (r Role) WithArticle() string {
	if r == RoleInit {
		return "an init"
	}
	return "a " + string(r)
}

// Same: the two roles give the node the same machine (init and
// controlplane are both control planes, as Talos counts them); an unknown
// role is the same as any.
func (r Role) Same(o Role) bool {
	if r == RoleUnknown || o == RoleUnknown {
		return true
	}
	return r == o || r.IsControlPlane() && o.IsControlPlane()
}

// RoleError is a role the user typed that is none of the allowed ones.
type RoleError struct {
	Value   string
	Allowed []Role
	Near    Role // the closest allowed one ("" none)
}

func (e *RoleError) Error() string {
	names := make([]string, len(e.Allowed))
	for i, r := range e.Allowed {
		names[i] = string(r)
	}
	msg := fmt.Sprintf("unknown role %q (roles: %s)", e.Value, strings.Join(names, ", "))
	if e.Near != "" {
		msg = fmt.Sprintf("unknown role %q (did you mean %s?)", e.Value, e.Near)
	}
	return msg
}

// ParseRole reads a role the user typed, ignoring case and spaces: one of
// Roles, and init when withInit (a config's machine type, apply's
// --role). An unknown word is a *RoleError with the closest role.
func ParseRole(s string, withInit bool) (Role, error) {
	allowed := Roles
	if withInit {
		allowed = append(allowed[:len(allowed):len(allowed)], RoleInit)
	}
	word := strings.ToLower(strings.TrimSpace(s))
	names := make([]string, len(allowed))
	for i, r := range allowed {
		if word == string(r) {
			return r, nil
		}
		names[i] = string(r)
	}
	return RoleUnknown, &RoleError{Value: s, Allowed: allowed, Near: Role(editdistance.Closest(word, names))}
}

// Role is the role the config gives its node, as Talos reads machine.type
// (pkg/machinery/config/machine/machine.go ParseType, v1alpha1_provider.go
// Type): "join", the old word, and a machine section without a type are a
// worker; a word Talos refuses, or a config without the v1alpha1 machine
// section (a patch), is RoleUnknown.
func (c *Config) Role() Role {
	switch c.MachineType {
	case "init":
		return RoleInit
	case "controlplane":
		return RoleControlPlane
	case "worker", "join":
		return RoleWorker
	case "":
		if c.machineTypeLeftOut {
			return RoleWorker
		}
	}
	return RoleUnknown
}

// RoleNote says how the config states a role that Talos reads as another
// word ("machine.type: join, a worker to Talos", "no machine.type, a
// worker to Talos"); "" when machine.type names the role itself, or no
// role is known.
func (c *Config) RoleNote() string {
	r := c.Role()
	switch {
	case !r.Known() || c.MachineType == string(r):
		return ""
	case c.MachineType == "":
		return "no machine.type, " + r.WithArticle() + " to Talos"
	}
	return "machine.type: " + sanitize(c.MachineType) + ", " + r.WithArticle() + " to Talos"
}
