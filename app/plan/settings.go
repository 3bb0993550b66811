package plan

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/inventory"
)

// Defaults are what the user named for a run: an inventory, a profiles
// file and an Image Factory, each optional.
type Defaults struct {
	Inventory string // talosflash.yaml; "" none
	// ProfilesFile is the user's profiles (--profiles); "" the inventory's
	// profiles: file, else the built-in roles.
	ProfilesFile string
	// FactoryURL is the user's factory (--factory); "" or
	// factory.DefaultBaseURL: the inventory's factory:, else the default.
	FactoryURL string
	// HTTPClient talks to the factory and downloads (nil: factory's).
	HTTPClient *http.Client
}

// Settings are a run's profiles, Image Factory and inventory, the
// inventory's defaults (factory:, profiles:) applied: the one place both
// front ends take them from.
type Settings struct {
	Inventory *inventory.Inventory // nil: none named
	Profiles  []factory.Profile
	Factory   *factory.Client

	from Defaults // what they were loaded from (Recheck)
}

// ProfilesError is a profiles file that cannot be used (bad usage: the
// user named it).
type ProfilesError struct{ Err error }

func (e *ProfilesError) Error() string { return e.Err.Error() }
func (e *ProfilesError) Unwrap() error { return e.Err }

// InventoryError is an inventory that cannot be used: it unwraps to
// inventory.Problems (every problem, with file:line), or to the error of
// reading it (os.ErrNotExist for a missing one). Inventory is what could
// be read of it despite its problems (nil when nothing could).
type InventoryError struct {
	File      string
	Inventory *inventory.Inventory
	Err       error
}

func (e *InventoryError) Error() string { return e.Err.Error() }
func (e *InventoryError) Unwrap() error { return e.Err }

// LoadSettings applies the defaults: the user's profiles file, else the
// inventory's, else the built-ins (the inventory's nodes are checked
// against the same set); the user's factory, else the inventory's, else
// the default. Nothing is sent anywhere.
func LoadSettings(d Defaults) (*Settings, error) {
	s := &Settings{Profiles: factory.BuiltinProfiles(), from: d}
	var opts inventory.Options
	if d.ProfilesFile != "" {
		all, err := factory.LoadProfiles(d.ProfilesFile)
		if err != nil {
			return nil, &ProfilesError{Err: err}
		}
		s.Profiles, opts.Profiles = all, all
	}
	url := d.FactoryURL
	if d.Inventory != "" {
		inv, err := inventory.Load(d.Inventory, opts)
		if err != nil {
			return nil, &InventoryError{File: d.Inventory, Inventory: inv, Err: err}
		}
		s.Inventory, s.Profiles = inv, inv.Known
		if inv.Factory != "" && (url == "" || url == factory.DefaultBaseURL) {
			url = inv.Factory
		}
	}
	s.Factory = factory.NewClient(url, d.HTTPClient)
	return s, nil
}

// Recheck reads the files again (the inventory, its configs, the
// profiles) and returns the named nodes as they stand now: a front end
// that stays open (the app) asks before it writes cards, so a config or a
// profile edited since it started is judged as a CLI run starting now
// judges it (the incident, the role: an *InventoryError). A node no
// longer in the file is an error; without an inventory the nodes are
// given back as they are.
func (s *Settings) Recheck(nodes []inventory.Node) (*Settings, []inventory.Node, error) {
	if s.from.Inventory == "" {
		return s, nodes, nil
	}
	fresh, err := LoadSettings(s.from)
	if err != nil {
		return nil, nil, err
	}
	now := make([]inventory.Node, len(nodes))
	for i, n := range nodes {
		j := slices.IndexFunc(fresh.Inventory.Nodes, func(f inventory.Node) bool { return strings.EqualFold(f.Hostname, n.Hostname) })
		if j < 0 {
			return nil, nil, fmt.Errorf("node %s is no longer in %s", n.Hostname, s.from.Inventory)
		}
		now[i] = fresh.Inventory.Nodes[j]
	}
	return fresh, now, nil
}

// Cluster is the run's cluster: the inventory's, each node at port (0:
// node.DefaultPort), else the members at the addresses the user typed
// (each parsed once: a typo is an *InputError, nothing looked up).
func (s *Settings) Cluster(port int, addresses ...string) (*Cluster, error) {
	if s.Inventory != nil {
		return NewCluster(s.Inventory, s.Profiles, port), nil
	}
	return ClusterAt(s.Profiles, addresses...)
}

// TalosVersion reads a Talos version the user typed ("v1.14.6", or
// "1.14.6", which is given its v): the one place the prefix is added.
func TalosVersion(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		v = "v" + v
	}
	if err := factory.ValidateVersion(v); err != nil {
		return "", &InputError{Setting: "version", Err: err}
	}
	return v, nil
}
