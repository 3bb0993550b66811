package gui

import (
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/internal/testkit"
)

// `talosflash gui --inventory F` takes the inventory's defaults as the CLI
// does (plan.LoadSettings): its factory: and its profiles: file, whose
// profiles its nodes use; --factory and --profiles still win.
func TestDefaultDepsInventoryDefaults(t *testing.T) {
	dir := testkit.WriteFiles(t, map[string]string{
		"profiles.yaml": "profiles:\n  - name: storage\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}\n    extensions: [siderolabs/iscsi-tools]\n",
		"talosflash.yaml": "factory: http://127.0.0.1:9\nprofiles: profiles.yaml\nnodes:\n" +
			"  - hostname: nas-1\n    profile: storage\n    address: 127.0.0.31/8\n",
	})
	d, err := DefaultDeps(Options{Inventory: dir + "/talosflash.yaml", FactoryURL: factory.DefaultBaseURL, Cache: &imaging.Cache{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Factory.BaseURL() != "http://127.0.0.1:9" {
		t.Errorf("factory %s, want the inventory's", d.Factory.BaseURL())
	}
	if _, err := factory.FindProfile(d.Profiles, "storage"); err != nil || d.Inventory == nil || d.Inventory.Nodes[0].Profile != "storage" {
		t.Errorf("the inventory's profiles: %v, inventory %v", err, d.Inventory)
	}
	d, err = DefaultDeps(Options{Inventory: dir + "/talosflash.yaml", FactoryURL: "http://127.0.0.1:7", Cache: &imaging.Cache{Dir: t.TempDir()}})
	if err != nil || d.Factory.BaseURL() != "http://127.0.0.1:7" {
		t.Fatalf("--factory: %v, %v", err, d.Factory)
	}
}
