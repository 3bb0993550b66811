package plan

import (
	"net/http"

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
	s := &Settings{Profiles: factory.BuiltinProfiles()}
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
