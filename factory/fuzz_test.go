package factory

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func addFiles(f *testing.F, glob string) {
	files, _ := filepath.Glob(glob)
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
}

func FuzzParseInstallerRef(f *testing.F) {
	for _, s := range []string{
		"factory.talos.dev/metal-installer/" + workerID + ":v1.14.5",
		"factory.talos.dev/installer-secureboot/" + controlPlaneID + ":v1.14.5@sha256:" + workerID,
		"localhost:5000/installer/" + workerID + ":latest",
		"ghcr.io/siderolabs/installer:v1.14.5",
		"a/b/c:d@e",
		"",
	} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseInstallerRef(s)
		if err != nil {
			return
		}

		// Round trip: a parsed ref reassembles to the input and parses back.
		if r.String() != s {
			t.Fatalf("String() = %q, input %q", r.String(), s)
		}

		r2, err := ParseInstallerRef(r.String())
		if err != nil || r2 != r {
			t.Fatalf("round trip: %+v -> %+v (%v)", r, r2, err)
		}

		if !IsSchematicID(r.SchematicID) {
			t.Fatalf("accepted schematic ID %q", r.SchematicID)
		}
	})
}

func FuzzParseInstallerFile(f *testing.F) {
	addFiles(f, "testdata/installer/*.yaml")
	f.Add([]byte("# overlay:\n#\tname: x\n#  image: y\nmachine: {install: {image: x}}\n"))
	f.Add([]byte("---\n---\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseInstallerFile(data)

		var mm *SchematicMismatchError

		switch {
		case err == nil && file == nil:
			t.Fatal("nil file without error")
		case errors.As(err, &mm) && (file == nil || file.Schematic == nil):
			t.Fatal("mismatch without the file")
		case err == nil:
			if r, err := ParseInstallerRef(file.Ref.String()); err != nil || r != file.Ref {
				t.Fatalf("ref does not round-trip: %v", err)
			}

			if file.Schematic != nil {
				if id, _ := file.Schematic.ID(); id != file.Ref.SchematicID {
					t.Fatal("schematic ID mismatch not reported")
				}
			}
		}
	})
}

func FuzzParseProfiles(f *testing.F) {
	addFiles(f, "testdata/profiles/*.yaml")
	f.Add([]byte("- name: a\n  overlay: {image: x/y, name: z, options: {a: [1, {b: c}]}}\n"))
	f.Add([]byte("- &a {name: x}\n- *a\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := ParseProfiles(data)
		if err != nil {
			return
		}

		seen := map[string]bool{}

		for _, p := range ps {
			if err := p.Validate(); err != nil {
				t.Fatalf("returned an invalid profile: %v", err)
			}

			if seen[p.Name] {
				t.Fatalf("duplicate %q returned", p.Name)
			}

			seen[p.Name] = true

			if _, err := p.SchematicID(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
