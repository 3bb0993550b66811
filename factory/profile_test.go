package factory

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/schematic"
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

func TestSchematicSortsAndDedupesLikeFactoryUI(t *testing.T) {
	p := Profile{Name: "x", Extensions: []string{"siderolabs/util-linux-tools", "siderolabs/iscsi-tools", "siderolabs/util-linux-tools"}}
	q := Profile{Name: "x", Extensions: []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools"}}

	a, _ := p.SchematicID()
	b, _ := q.SchematicID()

	// The factory UI posts the checked extensions sorted (one each): the
	// same set must get the same ID whatever order the profile lists.
	if a != b {
		t.Fatalf("IDs differ by extension order: %s vs %s", a, b)
	}

	want := []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools"}
	if got := p.Schematic().Customization.SystemExtensions.OfficialExtensions; !slices.Equal(got, want) {
		t.Fatalf("extensions %v, want %v", got, want)
	}

	// Schematic must not alias the profile's slices.
	s := p.Schematic()
	s.Customization.SystemExtensions.OfficialExtensions[0] = "mutated/x"

	if p.Extensions[0] != "siderolabs/util-linux-tools" || p.Extensions[1] != "siderolabs/iscsi-tools" {
		t.Fatalf("profile changed: %v", p.Extensions)
	}
}

func TestLoadProfilesGood(t *testing.T) {
	all, err := LoadProfiles("testdata/profiles/good.yaml")
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, p := range all {
		names = append(names, p.Name)
	}

	// The user's worker replaces the builtin in place; new ones follow.
	if strings.Join(names, ",") != "controlplane,worker,storage,plain" {
		t.Fatalf("names %v", names)
	}

	w, _ := FindProfile(all, "worker")
	if w.Version() != "v1.14.4" || !slices.Equal(w.Extensions, []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools"}) {
		t.Fatalf("worker override %+v", w)
	}

	cp, _ := FindProfile(all, "controlplane")
	if id, _ := cp.SchematicID(); id != controlPlaneID {
		t.Fatalf("builtin controlplane changed: %s", id)
	}

	plain, _ := FindProfile(all, "plain")
	if plain.Overlay.Image != "" || plain.Architecture() != "amd64" {
		t.Fatalf("plain %+v", plain)
	}

	// The ID must equal what the factory computes from the same schematic
	// written by hand (it decodes with schematic.Unmarshal, then hashes).
	storage, _ := FindProfile(all, "storage")

	handWritten := `overlay:
  image: siderolabs/sbc-raspberrypi
  name: rpi_generic
  options:
    configTxtAppend: |
      dtoverlay=disable-wifi
customization:
  extraKernelArgs: [console=tty1, net.ifnames=0]
`

	sc, err := schematicUnmarshal(handWritten)
	if err != nil {
		t.Fatal(err)
	}

	want, _ := sc.ID()
	if got, _ := storage.SchematicID(); got != want {
		t.Fatalf("storage ID %s, factory would compute %s", got, want)
	}
}

func TestParseProfilesBareList(t *testing.T) {
	data, _ := os.ReadFile("testdata/profiles/list.yaml")

	ps, err := ParseProfiles(data)
	if err != nil || len(ps) != 1 || ps[0].Name != "edge" || !slices.Equal(ps[0].Extensions, []string{"siderolabs/newt", "siderolabs/tailscale"}) {
		t.Fatalf("%+v %v", ps, err)
	}
}

func TestLoadProfilesBad(t *testing.T) {
	cases := map[string][]string{
		"unknown-field.yaml":         {"line 6", `unknown field "extension"`, "extensions"},
		"overlay-unknown-field.yaml": {"line 6", `unknown field "option" in overlay`},
		"overlay-half.yaml":          {"line 2", "both image and name"},
		"bad-version.yaml":           {"line 2", `"1.14.5"`, "v1.14.5"},
		"dup.yaml":                   {"line 4", `"worker" already defined on line 2`},
		"bad-extension.yaml":         {"line 2", `"newt"`, "siderolabs/newt"},
		"wrong-type.yaml":            {"line 3", "extensions must be a list"},
		"no-name.yaml":               {"line 2", "no name"},
		"not-yaml.yaml":              {"not valid YAML", "line"},
		"empty.yaml":                 {"empty"},
	}

	for file, wants := range cases {
		_, err := LoadProfiles(filepath.Join("testdata/profiles", file))
		if err == nil {
			t.Errorf("%s: accepted", file)

			continue
		}

		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", file, err, w)
			}
		}

		if !strings.Contains(err.Error(), file) {
			t.Errorf("%s: error should name the file: %v", file, err)
		}
	}

	if _, err := LoadProfiles(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestParseProfilesEdgeCases(t *testing.T) {
	bad := map[string]string{
		"two docs":        "- name: a\n---\n- name: b\n",
		"scalar":          "hello\n",
		"profiles scalar": "profiles: 3\n",
		"top-level typo":  "profile:\n  - name: a\n",
		"empty list":      "profiles: []\n",
		"bad arch":        "- name: a\n  arch: riscv64\n",
		"name spaces":     "- name: my worker\n",
		"dup extension":   "- name: a\n  extensions: [siderolabs/newt, siderolabs/newt]\n",
		"kernel arg ws":   "- name: a\n  extraKernelArgs: ['a b']\n",
		"options alone":   "- name: a\n  overlay: {options: {x: 1}}\n",
		"map as name":     "- name: {a: b}\n",
	}

	for what, data := range bad {
		if _, err := ParseProfiles([]byte(data)); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}

func schematicUnmarshal(s string) (*schematic.Schematic, error) {
	return schematic.Unmarshal([]byte(s))
}

// A typo of a role gets the role it is probably a typo of (issue 39:
// `--role wroker` got only the list).
func TestFindProfileDidYouMean(t *testing.T) {
	for name, want := range map[string]string{
		"wroker":       `unknown profile "wroker" (did you mean worker?; valid: controlplane, worker)`,
		"controlplan":  `unknown profile "controlplan" (did you mean controlplane?; valid: controlplane, worker)`,
		"Worker":       `unknown profile "Worker" (did you mean worker?; valid: controlplane, worker)`,
		"storage-node": `unknown profile "storage-node" (valid: controlplane, worker)`,
	} {
		_, err := FindProfile(BuiltinProfiles(), name)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", name, err, want)
		}
	}
}
