package factory

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/client"

	"github.com/talosflash/talosflash/factory/factorytest"
)

type gitopsRepo struct {
	dir                string
	cpFile, wkFile     string
	notes, genericFile string
	cpID, wkID         string
	host               string
}

func newGitopsRepo(t *testing.T, c *Client, srv *factorytest.Server) gitopsRepo {
	t.Helper()
	r := gitopsRepo{dir: t.TempDir(), host: c.RegistryHost()}
	cp, wk := BuiltinProfiles()[0], BuiltinProfiles()[1]
	var err error
	if r.cpID, err = srv.AddSchematic(cp.Schematic()); err != nil {
		t.Fatal(err)
	}
	if r.wkID, err = srv.AddSchematic(wk.Schematic()); err != nil {
		t.Fatal(err)
	}
	write := func(rel, text string) string {
		p := filepath.Join(r.dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o640); err != nil {
			t.Fatal(err)
		}
		return p
	}
	patch, err := InstallerPatch(cp, r.host)
	if err != nil {
		t.Fatal(err)
	}
	// Hand edits a rewrite must keep: comments, odd spacing, CRLF-free trailing comment, quotes.
	r.cpFile = write("talos/installer-controlplane.yaml", "# keep me  \n"+string(patch)+"    # pinned by hand\n# trailing comment without newline")
	r.wkFile = write("talos/installer-worker.yaml", "machine:\n  install:\n    image: \""+r.host+"/metal-installer/"+r.wkID+":v1.14.5@"+factorytest.InstallerDigest("metal-installer", r.wkID, "v1.14.5")+"\"  # worker\n")
	r.notes = write("docs/upgrade.md", "Upgrade with `talosctl upgrade --image "+r.host+"/metal-installer/"+r.cpID+":v1.14.5`.\nNot this one: "+r.host+"/metal-installer/"+r.cpID+":v1.14.50x\n")
	r.genericFile = write("patches/oops.yaml", "machine:\n  install:\n    image: ghcr.io/siderolabs/installer:v1.14.5\n")
	// What talosctl gen config v1.14 writes: the default installer only in
	// its example comments (node/testdata/talos114): no stock installer used.
	write("generated/worker.yaml", "kind: UnattendedInstallConfig\ninstaller: {}\n    # # Allows for supplying the image used to perform the installation.\n    # image: factory.talos.dev/metal-installer/"+EmptySchematicID+":latest\n\n#   image: ghcr.io/siderolabs/installer:v1.14.5 # Allows for supplying the image.\n")
	write(".git/objects/x.yaml", "image: "+r.host+"/metal-installer/"+r.cpID+":v1.14.5\n")
	return r
}

func newOutdatedFactory(t *testing.T) (*Client, *factorytest.Server) {
	c, srv := newTestClient(t)
	srv.SetVersions("v1.14.4", "v1.14.5", "v1.14.6", "v1.15.0-beta.0", "v1.15.0")
	// newt is gone in v1.15.0: upgrading the control plane there would lose it.
	var exts []client.ExtensionInfo
	for _, e := range mustExtensions(t, c, "v1.14.6") {
		if e.Name != "siderolabs/newt" {
			exts = append(exts, e)
		}
	}
	srv.SetExtensions("v1.15.0", exts)
	return c, srv
}

func mustExtensions(t *testing.T, c *Client, v string) []ExtensionInfo {
	t.Helper()
	l, err := c.Extensions(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestOutdatedFindsAndCompares(t *testing.T) {
	c, srv := newOutdatedFactory(t)
	r := newGitopsRepo(t, c, srv)
	uses, generic, err := FindInstallerRefs(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) != 4 {
		t.Fatalf("found %d references: %+v", len(uses), uses)
	}
	if len(generic) != 1 || generic[0].File != r.genericFile || generic[0].Line != 3 {
		t.Fatalf("generic installers %+v", generic)
	}
	ups, err := c.CheckUpdates(context.Background(), uses, "patch")
	if err != nil {
		t.Fatal(err)
	}
	byFile := map[string]Update{}
	for _, u := range ups {
		if u.Current == "v1.14.50x" {
			if u.Target != "" || !strings.Contains(u.Note, "not vX.Y.Z") {
				t.Errorf("odd tag: %+v", u)
			}
			continue
		}
		byFile[u.Use.File] = u
		if u.Current != "v1.14.5" || u.Patch != "v1.14.6" || u.Latest != "v1.15.0" || u.Target != "v1.14.6" || u.Blocked != "" {
			t.Errorf("%s: %+v", u.Use.File, u)
		}
	}
	cp := byFile[r.cpFile]
	if cp.Use.Schematic == nil || len(cp.Extensions) != 1 || cp.Extensions[0] != (ExtensionChange{Name: "siderolabs/newt", From: "v1.14.5", To: "v1.14.6"}) {
		t.Fatalf("control plane extensions %+v (schematic from comments %v)", cp.Extensions, cp.Use.Schematic != nil)
	}
	// The notes have no pasted schematic: the factory's copy is used.
	if n := byFile[r.notes]; len(n.Extensions) != 1 || n.Note != "" {
		t.Fatalf("notes: %+v", n)
	}
	wk := byFile[r.wkFile]
	if len(wk.Extensions) != 0 || wk.NewRaw != r.host+"/metal-installer/"+r.wkID+":v1.14.6@"+factorytest.InstallerDigest("metal-installer", r.wkID, "v1.14.6") {
		t.Fatalf("worker: %+v", wk)
	}

	// Skipping a minor release gets a note.
	far := uses[0]
	far.Ref.Version = "v1.13.4"
	if ups, err := c.CheckUpdates(context.Background(), []InstallerUse{far}, "latest"); err != nil || !strings.Contains(ups[0].Note, "one minor release at a time: go through the newest v1.14") {
		t.Fatalf("skip a minor: %+v, %v", ups, err)
	}

	latest, err := c.CheckUpdates(context.Background(), uses, "latest")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range latest {
		if u.Current == "v1.14.50x" {
			continue
		}
		blocked := u.Use.Ref.SchematicID == r.cpID
		if (u.Blocked != "") != blocked || u.Target != "v1.15.0" {
			t.Errorf("latest %s: %+v", u.Use.File, u)
		}
		if blocked && !strings.Contains(u.Blocked, "siderolabs/newt not offered for v1.15.0") {
			t.Errorf("blocked reason %q", u.Blocked)
		}
	}
}

func TestOutdatedWriteKeepsEveryOtherByte(t *testing.T) {
	c, srv := newOutdatedFactory(t)
	r := newGitopsRepo(t, c, srv)
	before := map[string][]byte{}
	for _, f := range []string{r.cpFile, r.wkFile, r.notes, r.genericFile} {
		before[f], _ = os.ReadFile(f)
	}
	uses, _, err := FindInstallerRefs(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	ups, err := c.CheckUpdates(context.Background(), uses, "patch")
	if err != nil {
		t.Fatal(err)
	}
	results, err := WriteUpdates(ups)
	changed := written(results)
	if err != nil || len(changed) != 3 {
		t.Fatalf("changed %v, %v", changed, err)
	}
	for f, old := range before {
		got, _ := os.ReadFile(f)
		want := old
		for _, u := range ups {
			if u.Use.File == f && u.NewRaw != "" {
				want = bytes.ReplaceAll(want, []byte(u.Use.Raw+"`"), []byte(u.NewRaw+"`"))
				want = bytes.ReplaceAll(want, []byte(u.Use.Raw+"\n"), []byte(u.NewRaw+"\n"))
				want = bytes.ReplaceAll(want, []byte(u.Use.Raw+"\""), []byte(u.NewRaw+"\""))
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", f, got, want)
		}
		if st, _ := os.Stat(f); st.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v", f, st.Mode())
		}
		// Only the reference lines differ.
		ol, nl := strings.Split(string(old), "\n"), strings.Split(string(got), "\n")
		if len(ol) != len(nl) {
			t.Fatalf("%s: line count changed", f)
		}
		for i := range ol {
			if ol[i] != nl[i] && !strings.Contains(ol[i], "/metal-installer/") {
				t.Errorf("%s:%d changed: %q -> %q", f, i+1, ol[i], nl[i])
			}
		}
	}
	if !strings.Contains(string(must(os.ReadFile(r.notes))), ":v1.14.50x") {
		t.Fatal("a longer tag was rewritten")
	}
	// A second run finds nothing to do.
	uses, _, _ = FindInstallerRefs(r.dir)
	ups, _ = c.CheckUpdates(context.Background(), uses, "patch")
	if results, err := WriteUpdates(ups); err != nil || len(written(results)) != 0 {
		changed := written(results)
		t.Fatalf("second run changed %v, %v", changed, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(r.cpFile)); len(entries) != 2 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func written(results []FileResult) []string {
	var out []string
	for _, r := range results {
		if r.Outcome == OutcomeWritten {
			out = append(out, r.File)
		}
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
