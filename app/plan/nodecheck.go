package plan

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/node"
)

// RoleOf is the Talos role a profile stands for: a built-in role's name, or
// the role a custom profile is named after ("" when it names none, e.g.
// "storage": the role check is then skipped, the image checks are not).
func RoleOf(p factory.Profile) node.Role {
	r, err := node.ParseRole(p.Name, true)
	if err != nil {
		return node.RoleUnknown
	}
	return r
}

// Match is what a node's booted schematic was recognised as.
type Match struct {
	Profile string    // profile name ("" if none matches)
	Role    node.Role // RoleOf(profile), RoleUnknown if none
	// Source: "profile" (built-in or --profiles), "cache" (an image flashed
	// from this machine), "" when nothing matched.
	Source string
}

// Label is a short badge text: the profile name, "flashed here", or "".
func (m Match) Label() string {
	switch {
	case m.Profile != "":
		return m.Profile
	case m.Source == "cache":
		return "flashed here"
	}
	return ""
}

// NodeCheck holds everything a config check for one node is built from.
// The CLI (`apply`, `nodes`) and the GUI Nodes step fill it the same way.
type NodeCheck struct {
	Profiles []factory.Profile // built-ins merged with --profiles
	Factory  *factory.Client   // registry host of installer refs; schematic look-ups
	// CachedIDs are schematic IDs of images this machine downloaded (see
	// CachedSchematicIDs): a node that booted one of them was flashed here.
	CachedIDs []string
	// Node is what the node reports (nil: not probed).
	Node *node.Node
	// Declared is the role/profile the user says the card was flashed with
	// ("" = not said): only a fallback when the node does not say what it booted.
	Declared string
	// FlashedInstaller is an installer ref the user says the card was
	// flashed from (CLI --flashed-installer): also only a fallback.
	FlashedInstaller string
	// Endpoint is the node address for the suggested commands (host or host:port).
	Endpoint string
}

// MatchBooted names the profile (or cached image) whose schematic the node booted.
func (nc NodeCheck) MatchBooted() Match {
	id := nc.knownSchematicID()
	if id == "" {
		return Match{}
	}
	// Every board's build of each profile: a Pi 5 that booted the worker
	// role's rpi_5 image is the worker profile's.
	if p, ok := factory.ProfileOfSchematicID(nc.Profiles, id); ok {
		return Match{Profile: p.Name, Role: RoleOf(p), Source: "profile"}
	}
	for _, c := range nc.CachedIDs {
		if c == id {
			return Match{Source: "cache"}
		}
	}
	return Match{}
}

// Options builds the incident-check options: the node's booted image when
// it reports one, else the declared role/profile or installer as an
// announced fallback. Errors are usage errors (unknown profile, bad ref).
func (nc NodeCheck) Options(ctx context.Context) (node.InspectOptions, error) {
	opts := node.InspectOptions{Node: nc.host(), Resolve: nc.resolver(ctx), Profiles: nc.Profiles}
	if nc.Node != nil {
		opts.TalosVersion = nc.Node.TalosVersion
	}
	version := factory.DefaultTalosVersion
	if nc.Node != nil && nc.Node.TalosVersion != "" {
		version = nc.Node.TalosVersion
	}

	var declared *factory.Profile
	if nc.Declared != "" {
		p, err := factory.FindProfile(nc.Profiles, nc.Declared)
		if err != nil {
			return opts, err
		}
		declared = &p
	}
	var declaredRef *factory.InstallerRef
	if nc.FlashedInstaller != "" {
		ref, err := factory.ParseInstallerRef(nc.FlashedInstaller)
		if err != nil {
			return opts, err
		}
		declaredRef = &ref
	}

	if nc.Node != nil && nc.Node.Booted != nil {
		b := nc.Node.Booted
		if b.Schematic == nil && b.SchematicID != "" {
			// The node names its schematic but not what is in it (no
			// extension names, no schematic YAML): a known schematic
			// (a profile, the factory) is evidence of its extensions.
			if sc, err := opts.Resolve(b.SchematicID); err == nil {
				known := *b
				known.Schematic, known.Overlay = sc, sc.Overlay.Image
				b = &known
			}
		}
		opts.Booted = b
		if b.SchematicID != "" {
			opts.Installer = factory.NewInstallerRef(nc.registryHost(), b.SchematicID, version).String()
		}
		// The node's image decides the extension checks, not the role: a
		// worker may run the Newt image with its ExtensionServiceConfig, and
		// the user's declared role does not override what the node booted.
		return opts, nil
	}

	if id := nc.knownSchematicID(); id != "" {
		// No extension statuses, but the node reports its schematic
		// (ImageFactorySchematics): the node's word before the user's.
		if sc, err := opts.Resolve(id); err == nil {
			opts.Flashed = sc
			opts.Fallback = "the schematic the node reports (ImageFactorySchematics " + id + ")"
			opts.Installer = factory.NewInstallerRef(nc.registryHost(), id, version).String()
			return opts, nil
		}
	}

	switch {
	case declared != nil:
		opts.Flashed = declared.Schematic()
		opts.Role = RoleOf(*declared)
		opts.Fallback = fmt.Sprintf("the profile you declared (%s)", declared.Name)
		if id, err := factory.SchematicID(opts.Flashed); err == nil {
			v := declared.TalosVersion
			if v == "" {
				v = version
			}
			opts.Installer = factory.NewInstallerRef(nc.registryHost(), id, v).String()
		}
	case declaredRef != nil:
		opts.Installer = declaredRef.String()
		if s, err := opts.Resolve(declaredRef.SchematicID); err == nil {
			opts.Flashed = s
			opts.Fallback = "the installer you declared (" + declaredRef.String() + ")"
		}
	}
	return opts, nil
}

// knownSchematicID is the schematic the node says it booted: its
// extension statuses' schematic entry, else (Talos >= 1.14) its
// ImageFactorySchematics; "" when it says neither.
func (nc NodeCheck) knownSchematicID() string {
	switch {
	case nc.Node == nil:
		return ""
	case nc.Node.Booted != nil && nc.Node.Booted.SchematicID != "":
		return nc.Node.Booted.SchematicID
	case nc.Node.Factory != nil && factory.IsSchematicID(nc.Node.Factory.SchematicID):
		return nc.Node.Factory.SchematicID // a rogue node's other text is no ID
	}
	return ""
}

// DeclaredNote says how the user's declared role relates to what the node
// booted ("" when there is nothing to say).
func (nc NodeCheck) DeclaredNote() string {
	if nc.Declared == "" && nc.FlashedInstaller == "" {
		return ""
	}
	what := nc.Declared
	if what == "" {
		what = nc.FlashedInstaller
	}
	if nc.Node == nil || nc.Node.Booted == nil {
		return fmt.Sprintf("the node does not report what it booted (no extension statuses): checking against %s, as you declared (fallback)", what)
	}
	m := nc.MatchBooted()
	if m.Profile == nc.Declared && nc.Declared != "" {
		return ""
	}
	booted := "schematic " + nc.Node.Booted.SchematicID
	if m.Profile != "" {
		booted = "profile " + m.Profile
	}
	return fmt.Sprintf("you declared %s, but the node reports it booted %s (%s): checking against what the node booted", what, booted, nc.Node.Booted)
}

func (nc NodeCheck) host() string {
	ep := nc.Endpoint
	if ep == "" && nc.Node != nil {
		ep = nc.Node.Addr
	}
	n, err := node.NormalizeEndpoint(ep)
	if err != nil {
		return ep
	}
	if h, p, err := net.SplitHostPort(n); err == nil && p == strconv.Itoa(node.DefaultPort) {
		return h // talosctl's --nodes takes the bare address
	}
	return n
}

func (nc NodeCheck) registryHost() string {
	if nc.Factory != nil {
		return nc.Factory.RegistryHost()
	}
	return factory.NewClient(factory.DefaultBaseURL, nil).RegistryHost()
}

// resolver maps a schematic ID to its content: the profiles first
// (offline), then the factory (bounded).
func (nc NodeCheck) resolver(ctx context.Context) func(string) (*schematic.Schematic, error) {
	return func(id string) (*schematic.Schematic, error) {
		if p, ok := factory.ProfileOfSchematicID(nc.Profiles, id); ok {
			return p.Schematic(), nil
		}
		if nc.Factory == nil {
			return nil, fmt.Errorf("schematic %s: no factory to ask", id)
		}
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return nc.Factory.Schematic(c, id)
	}
}

// CachedSchematicIDs lists the schematic IDs the image cache holds (the
// directories below each factory's, see imaging.FactoryCacheKey; top-level
// ones from before the factory was part of the key): images flashed from
// this machine. Symlinks are not followed; a missing cache is no error.
func CachedSchematicIDs(c *imaging.Cache) []string {
	if c == nil || c.Dir == "" {
		return nil
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return nil
	}
	var ids []string
	add := func(name string) {
		if factory.IsSchematicID(name) && !slices.Contains(ids, name) {
			ids = append(ids, name)
		}
	}
	for _, e := range entries {
		if !e.IsDir() { // a DirEntry of a symlink is not a directory
			continue
		}
		if factory.IsSchematicID(e.Name()) {
			add(e.Name())
			continue
		}
		sub, err := os.ReadDir(filepath.Join(c.Dir, e.Name()))
		if err != nil {
			continue
		}
		for _, s := range sub {
			if s.IsDir() {
				add(s.Name())
			}
		}
	}
	return ids
}
