package plan

import (
	"testing"

	"github.com/talosflash/talosflash/factory"
)

func TestRecognizeBuiltinInstallerRef(t *testing.T) {
	c := factory.NewClient("http://127.0.0.1:1", nil)
	profiles := factory.BuiltinProfiles()
	worker, err := factory.FindProfile(profiles, "worker")
	if err != nil {
		t.Fatal(err)
	}
	id, err := worker.SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := factory.ParseInstallerRef("factory.talos.dev/metal-installer/" + id + ":v1.14.4")
	if err != nil {
		t.Fatal(err)
	}
	im := FromInstallerRef(c, ref, "")
	if !im.Recognize(profiles) {
		t.Fatal("the worker's own installer reference was not recognised")
	}
	if im.ProfileName() != "worker" || im.Profile.Version() != "v1.14.4" || im.Schematic == nil || im.SchematicID != id {
		t.Fatalf("recognised as role %q version %q schematic %v id %s", im.ProfileName(), im.Profile.Version(), im.Schematic != nil, im.SchematicID)
	}
	if got, _ := factory.SchematicID(im.Schematic); got != id {
		t.Fatalf("schematic hashes to %s, want %s", got, id)
	}

	other, _ := factory.ParseInstallerRef("factory.talos.dev/metal-installer/" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef:v1.14.5")
	im = FromInstallerRef(c, other, "")
	if im.Recognize(profiles) || im.ProfileName() != "" || im.Schematic != nil {
		t.Fatalf("an unknown schematic was recognised as %q", im.ProfileName())
	}
}
