package plan

import (
	"errors"
	"os"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
)

const storageProfiles = "profiles:\n  - name: storage\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}\n    extensions: [siderolabs/iscsi-tools]\n"

// The inventory's defaults apply where the user gave none: its factory:
// and its profiles: file (its nodes checked against them); the user's
// --factory and --profiles win; none of them: the built-ins and the
// default factory.
func TestLoadSettingsInventoryDefaults(t *testing.T) {
	dir := testkit.WriteFiles(t, map[string]string{
		"profiles.yaml": storageProfiles,
		"talosflash.yaml": "factory: http://127.0.0.1:9\nprofiles: profiles.yaml\nnodes:\n" +
			"  - hostname: nas-1\n    profile: storage\n    address: 127.0.0.31/8\n",
		"mine.yaml": storageProfiles + "  - name: mine\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}\n",
	})
	inv := dir + "/talosflash.yaml"
	for _, tc := range []struct {
		name     string
		d        Defaults
		factory  string
		profiles []string // present
	}{
		{"none", Defaults{}, factory.DefaultBaseURL, []string{"controlplane", "worker"}},
		{"inventory's", Defaults{Inventory: inv, FactoryURL: factory.DefaultBaseURL}, "http://127.0.0.1:9", []string{"controlplane", "worker", "storage"}},
		{"inventory's, no flag default", Defaults{Inventory: inv}, "http://127.0.0.1:9", []string{"storage"}},
		{"the user's win", Defaults{Inventory: inv, FactoryURL: "http://127.0.0.1:7", ProfilesFile: dir + "/mine.yaml"}, "http://127.0.0.1:7", []string{"storage", "mine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := LoadSettings(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Factory.BaseURL(); got != tc.factory {
				t.Errorf("factory %s, want %s", got, tc.factory)
			}
			for _, name := range tc.profiles {
				if _, err := factory.FindProfile(s.Profiles, name); err != nil {
					t.Errorf("profile %s: %v", name, err)
				}
			}
			if (tc.d.Inventory != "") != (s.Inventory != nil) {
				t.Fatalf("inventory %v", s.Inventory)
			}
		})
	}

	// A missing inventory, one with problems (what could be read comes
	// along), a broken profiles file: typed, for the front ends' words.
	_, err := LoadSettings(Defaults{Inventory: dir + "/none.yaml"})
	var ie *InventoryError
	if !errors.As(err, &ie) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing inventory: %v", err)
	}
	bad := testkit.WriteFile(t, dir, "bad.yaml", "nodes:\n  - hostname: x\n    role: nope\n    address: 127.0.0.1/8\n")
	_, err = LoadSettings(Defaults{Inventory: bad})
	var problems inventory.Problems
	if !errors.As(err, &ie) || !errors.As(err, &problems) || ie.Inventory == nil {
		t.Fatalf("inventory with problems: %v", err)
	}
	_, err = LoadSettings(Defaults{Inventory: inv, ProfilesFile: bad})
	var pe *ProfilesError
	if !errors.As(err, &pe) {
		t.Fatalf("bad profiles file: %v", err)
	}
}
