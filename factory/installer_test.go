package factory

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/schematic"
)

func TestParseInstallerRef(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)

	good := map[string]InstallerRef{
		"factory.talos.dev/metal-installer/" + workerID + ":v1.14.5": {
			Registry: "factory.talos.dev", Repository: "metal-installer", SchematicID: workerID, Version: "v1.14.5",
		},
		"factory.talos.dev/installer/" + controlPlaneID + ":v1.14.5": {
			Registry: "factory.talos.dev", Repository: "installer", SchematicID: controlPlaneID, Version: "v1.14.5",
		},
		"factory.talos.dev/installer-secureboot/" + workerID + ":v1.13.0": {
			Registry: "factory.talos.dev", Repository: "installer-secureboot", SchematicID: workerID, Version: "v1.13.0",
		},
		"factory.example.lan:5000/metal-installer-secureboot/" + workerID + ":v1.14.5@" + digest: {
			Registry: "factory.example.lan:5000", Repository: "metal-installer-secureboot", SchematicID: workerID, Version: "v1.14.5", Digest: digest,
		},
	}

	for in, want := range good {
		got, err := ParseInstallerRef(in)
		if err != nil || got != want {
			t.Errorf("%s:\n got %+v %v\nwant %+v", in, got, err, want)
		}

		if got.String() != in {
			t.Errorf("String() = %s, want %s", got.String(), in)
		}
	}

	r, _ := ParseInstallerRef("factory.talos.dev/metal-installer-secureboot/" + workerID + ":v1.14.5")
	if !r.SecureBoot() || r.Platform() != "metal" {
		t.Errorf("secureboot=%v platform=%q", r.SecureBoot(), r.Platform())
	}

	r, _ = ParseInstallerRef("factory.talos.dev/installer/" + workerID + ":v1.14.5")
	if r.SecureBoot() || r.Platform() != "" {
		t.Errorf("legacy: secureboot=%v platform=%q", r.SecureBoot(), r.Platform())
	}

	if got := NewInstallerRef("factory.talos.dev", workerID, "v1.14.5").String(); got != "factory.talos.dev/metal-installer/"+workerID+":v1.14.5" {
		t.Errorf("NewInstallerRef: %s", got)
	}

	bad := map[string]string{
		"":                                     "empty",
		"ghcr.io/siderolabs/installer:v1.14.5": "schematic ID",
		"factory.talos.dev/metal-installer/" + workerID:                               "missing :<version>",
		"factory.talos.dev/metal-installer/" + workerID + ":":                         "missing :<version>",
		"metal-installer/" + workerID + ":v1.14.5":                                    "expected <registry>",
		"factory.talos.dev/metal-installer/" + workerID[:63] + ":v1.14.5":             "64 lowercase hex",
		"factory.talos.dev/metal-installer/" + strings.ToUpper(workerID) + ":v1.14.5": "64 lowercase hex",
		"factory.talos.dev/imager/" + workerID + ":v1.14.5":                           "not an Image Factory installer",
		"factory.talos.dev/metal-installer/" + workerID + ":v1.14.5@sha256:abc":       "digest",
		"factory.talos.dev/metal-installer/" + workerID + ":v1:14":                    "not a valid image tag",
		"factory.talos.dev/a/metal-installer/" + workerID + ":v1.14.5":                "expected <registry>",
		"factory.talos.dev /metal-installer/" + workerID + ":v1.14.5":                 "whitespace",
		"fac_tory/metal-installer/" + workerID + ":v1.14.5":                           "registry host",
	}

	for in, want := range bad {
		_, err := ParseInstallerRef(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want mention of %q", in, err, want)
		}
	}
}

func parseFile(t *testing.T, name string) (*InstallerFile, error) {
	t.Helper()

	data, err := os.ReadFile(filepath.Join("testdata/installer", name))
	if err != nil {
		t.Fatal(err)
	}

	return ParseInstallerFile(data)
}

func TestParseInstallerFileShapes(t *testing.T) {
	cases := []struct {
		file, id, repo, digest, source string
		schematicExts                  int // -1: no schematic in comments
	}{
		{"patch-worker.yaml", workerID, "metal-installer", "", "machine.install.image (document 1, line 12)", 0},
		{"v1alpha1-controlplane.yaml", controlPlaneID, "installer", "", "machine.install.image (document 1, line 16)", 1},
		{"unattended.yaml", workerID, "metal-installer", "sha256:" + strings.Repeat("ab", 32), "UnattendedInstallConfig installer.image (document 1, line 4)", -1},
		{"multidoc.yaml", controlPlaneID, "metal-installer-secureboot", "", "UnattendedInstallConfig installer.image (document 3, line 25)", 1},
		{"prose-comment.yaml", workerID, "metal-installer", "", "machine.install.image (document 1, line 4)", -1},
	}

	for _, c := range cases {
		f, err := parseFile(t, c.file)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)

			continue
		}

		if f.Ref.SchematicID != c.id || f.Ref.Repository != c.repo || f.Ref.Version != "v1.14.5" || f.Ref.Digest != c.digest || f.Source != c.source {
			t.Errorf("%s: got %+v source %q", c.file, f.Ref, f.Source)
		}

		switch {
		case c.schematicExts < 0 && f.Schematic != nil:
			t.Errorf("%s: unexpected schematic %+v", c.file, f.Schematic)
		case c.schematicExts >= 0 && f.Schematic == nil:
			t.Errorf("%s: schematic in comments not found", c.file)
		case c.schematicExts >= 0:
			if n := len(f.Schematic.Customization.SystemExtensions.OfficialExtensions); n != c.schematicExts || f.Schematic.Overlay.Name != "rpi_generic" {
				t.Errorf("%s: schematic %+v", c.file, f.Schematic)
			}

			if id, _ := f.Schematic.ID(); id != c.id {
				t.Errorf("%s: comment schematic ID %s", c.file, id)
			}
		}
	}
}

func TestParseInstallerFileMismatch(t *testing.T) {
	f, err := parseFile(t, "mismatch.yaml")

	var mm *SchematicMismatchError
	if !errors.As(err, &mm) || mm.RefID != controlPlaneID || mm.CommentID != workerID || mm.CommentLine != 2 {
		t.Fatalf("want mismatch error, got %v", err)
	}

	// The file is still returned so the caller can show what it holds.
	if f == nil || f.Ref.SchematicID != controlPlaneID || f.Schematic == nil {
		t.Fatalf("file %+v", f)
	}
}

func TestParseInstallerFileBad(t *testing.T) {
	cases := map[string]string{
		"conflict.yaml":              "conflicting installer images",
		"no-image.yaml":              "no installer image found",
		"vanilla.yaml":               "machine.install.image (document 1, line 3)",
		"bad-comment-schematic.yaml": "schematic in comments (line 1) is not valid",
	}

	for file, want := range cases {
		_, err := parseFile(t, file)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", file, err, want)
		}
	}

	for what, data := range map[string]string{
		"not yaml":     "machine: [\n",
		"empty":        "",
		"image is map": "machine:\n  install:\n    image: {a: b}\n",
		"list":         "- a\n- b\n",
	} {
		if _, err := ParseInstallerFile([]byte(data)); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}

func TestInstallerPatchRoundTrip(t *testing.T) {
	all, err := LoadProfiles("testdata/profiles/good.yaml")
	if err != nil {
		t.Fatal(err)
	}

	for _, p := range all {
		data, err := InstallerPatch(p, "")
		if err != nil {
			t.Fatal(err)
		}

		f, err := ParseInstallerFile(data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", p.Name, err, data)
		}

		id, _ := p.SchematicID()
		if f.Ref.SchematicID != id || f.Ref.Version != p.Version() || f.Ref.Registry != "factory.talos.dev" || f.Schematic == nil {
			t.Fatalf("%s: parsed %+v from\n%s", p.Name, f.Ref, data)
		}

		if got, _ := f.Schematic.ID(); got != id {
			t.Fatalf("%s: comment schematic ID %s, want %s", p.Name, got, id)
		}
	}

	// The incident: a worker file edited to the control plane image while
	// its comment still says overlay-only must be reported.
	wk, _ := FindProfile(all, "worker")
	data, _ := InstallerPatch(wk, "")
	wid, _ := wk.SchematicID()
	tampered := strings.Replace(string(data), "/"+wid+":", "/"+controlPlaneID+":", 1)

	var mm *SchematicMismatchError
	if _, err := ParseInstallerFile([]byte(tampered)); !errors.As(err, &mm) {
		t.Fatalf("tampered file: %v", err)
	}
}

// The empty schematic's ID is the one talosctl 1.14 puts in its default
// installer, and that installer counts as generic.
func TestEmptySchematicIsGeneric(t *testing.T) {
	id, err := SchematicID(&schematic.Schematic{})
	if err != nil || id != EmptySchematicID {
		t.Fatalf("empty schematic ID %q %v, want %s", id, err, EmptySchematicID)
	}
	for img, want := range map[string]bool{
		"factory.talos.dev/metal-installer/" + EmptySchematicID + ":v1.14.5":         true,
		"factory.talos.dev/installer/" + EmptySchematicID + ":v1.14.5":               true,
		"ghcr.io/siderolabs/installer:v1.14.5":                                       true,
		"registry.local:5000/siderolabs/installer-base:v1.14.5":                      true,
		"factory.talos.dev/metal-installer/" + strings.Repeat("ab", 32) + ":v1.14.5": false,
	} {
		if got := IsGenericInstaller(img); got != want {
			t.Errorf("IsGenericInstaller(%q) = %v", img, got)
		}
	}
	_, generic := findInText("f.yaml", []byte("image: factory.talos.dev/metal-installer/"+EmptySchematicID+":v1.14.5\n"))
	if len(generic) != 1 {
		t.Errorf("outdated: the empty-schematic installer is not reported as generic: %v", generic)
	}
}

// The installer patch is the document the Talos version's configs hold
// the installer in: machine.install before 1.14, the whole
// UnattendedInstallConfig (with the disk selector 1.14 requires) from 1.14
// on, pre-releases included; either parses back to the same reference.
func TestInstallerPatchByVersion(t *testing.T) {
	p, err := FindProfile(BuiltinProfiles(), "worker")
	if err != nil {
		t.Fatal(err)
	}
	for v, uic := range map[string]bool{"v1.12.6": false, "v1.13.9": false, "v1.14.0-alpha.1": true, "v1.14.0-beta.0": true, "v1.14.5": true, "v1.15.0": true} {
		p.TalosVersion = v
		data, err := InstallerPatch(p, "")
		if err != nil {
			t.Fatal(err)
		}
		isUIC := bytes.Contains(data, []byte("\nkind: UnattendedInstallConfig\ninstaller:\n  image: ")) &&
			bytes.Contains(data, []byte("\nprovisioning:\n  diskSelector:\n    match: disk.dev_path == \"/dev/mmcblk0\""))
		if isUIC != uic || bytes.Contains(data, []byte("\nmachine:\n  install:\n")) == uic {
			t.Errorf("%s: UnattendedInstallConfig %v, want %v:\n%s", v, isUIC, uic, data)
		}
		f, err := ParseInstallerFile(data)
		if err != nil || f.Ref.Version != v {
			t.Errorf("%s: parsed back %+v, %v", v, f, err)
		}
	}
}
