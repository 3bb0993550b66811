package factory

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Pinned IDs of the builtin roles. The worker ID is the one the real
// image-factory's own tests pin for the rpi_generic overlay
// (rpiGenericOverlaySchematicID) and the one the Talos Raspberry Pi guide links.
const (
	workerID       = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
	controlPlaneID = "29a2fae6a7f059e83882db3447b6411d474c6154d8cd1a34ec27779ab198f50d"
)

// The YAML the factory UI shows for these schematics (factory.talos.dev
// format: overlay first, then customization).
const (
	workerYAML = `overlay:
    image: siderolabs/sbc-raspberrypi
    name: rpi_generic
customization: {}
`
	controlPlaneYAML = `overlay:
    image: siderolabs/sbc-raspberrypi
    name: rpi_generic
customization:
    systemExtensions:
        officialExtensions:
            - siderolabs/newt
`
)

func TestBuiltinProfileIDs(t *testing.T) {
	all := BuiltinProfiles()
	want := map[string][2]string{
		"controlplane": {controlPlaneID, controlPlaneYAML},
		"worker":       {workerID, workerYAML},
	}

	if len(all) != len(want) {
		t.Fatalf("got %d builtin profiles, want %d", len(all), len(want))
	}

	for _, p := range all {
		if err := p.Validate(); err != nil {
			t.Fatalf("builtin %s invalid: %v", p.Name, err)
		}

		w, ok := want[p.Name]
		if !ok {
			t.Fatalf("unexpected builtin %q", p.Name)
		}

		id, err := p.SchematicID()
		if err != nil || id != w[0] {
			t.Errorf("%s: ID %s (%v), want %s", p.Name, id, err, w[0])
		}

		y, err := p.Schematic().Marshal()
		if err != nil || string(y) != w[1] {
			t.Errorf("%s: YAML\n%s\nwant\n%s", p.Name, y, w[1])
		}

		if p.Version() != "v1.14.5" || p.Architecture() != "arm64" {
			t.Errorf("%s: version %s arch %s", p.Name, p.Version(), p.Architecture())
		}
	}

	cp, _ := FindProfile(all, "controlplane")
	wk, _ := FindProfile(all, "worker")

	if !slices.Contains(cp.Extensions, NewtExtension) || len(wk.Extensions) != 0 {
		t.Fatalf("Newt must be on the control plane only: cp=%v worker=%v", cp.Extensions, wk.Extensions)
	}
}

func TestFindProfileListsNames(t *testing.T) {
	_, err := FindProfile(BuiltinProfiles(), "wroker")
	if err == nil || !strings.Contains(err.Error(), "controlplane, worker") || !strings.Contains(err.Error(), `"wroker"`) {
		t.Fatalf("error %v should name the bad profile and list valid ones", err)
	}
}

func TestSchematicKeepsOrder(t *testing.T) {
	p := Profile{Name: "x", Extensions: []string{"siderolabs/util-linux-tools", "siderolabs/iscsi-tools"}}
	q := Profile{Name: "x", Extensions: []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools"}}

	a, _ := p.SchematicID()
	b, _ := q.SchematicID()

	// The factory hashes what it is sent; order matters there, so it must here.
	if a == b {
		t.Fatal("extension order must be preserved (it changes the factory's ID)")
	}

	if got := p.Schematic().Customization.SystemExtensions.OfficialExtensions; !slices.Equal(got, p.Extensions) {
		t.Fatalf("order changed: %v", got)
	}

	// Schematic must not alias the profile's slices.
	s := p.Schematic()
	s.Customization.SystemExtensions.OfficialExtensions[0] = "mutated/x"

	if p.Extensions[0] != "siderolabs/util-linux-tools" {
		t.Fatal("Schematic() shares the profile's slice")
	}
}

func writeTemp(t *testing.T, name, data string) string {
	t.Helper()

	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}

	return p
}
