package talos114

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The committed table parses, holds exactly the kinds v1.14 registers
// (Kinds), and says where it comes from.
func TestSchemaTable(t *testing.T) {
	if _, err := parseSchema(schemaTable); err != nil {
		t.Fatal(err)
	}
	st := Stats()
	t.Logf("schema.txt: %d kinds, %d paths", st.Kinds, st.Paths)
	for kind := range Kinds {
		if Schema()[kind] == nil {
			t.Errorf("kind %s not in schema.txt", kind)
		}
	}
	for kind := range Schema() {
		if !Registered(kind) {
			t.Errorf("schema.txt has kind %s that Kinds does not list", kind)
		}
	}
	for _, want := range []string{"Talos v1.14.0-rc.1 registers", "scripts/gen-talos114-schema.go"} {
		if !strings.Contains(schemaTable, want) {
			t.Errorf("header does not say %q", want)
		}
	}
	u := Schema()["UnattendedInstallConfig"]
	if m := u.Fields["provisioning"].Fields["diskSelector"].Fields["match"]; m == nil || m.Shape != ShapeScalar {
		t.Errorf("UnattendedInstallConfig provisioning.diskSelector.match: %+v", m)
	}
	if l := Schema()["KubeNodeConfig"].Fields["labels"]; l == nil || l.Shape != ShapeMap || l.Elem == nil {
		t.Errorf("KubeNodeConfig labels: %+v", l)
	}
}

func TestParseSchemaRejects(t *testing.T) {
	for _, bad := range []string{
		"K\ta.b\tscalar\n",               // parent not listed
		"K\ta\tscalar\nK\ta.b\tscalar\n", // a key under a scalar
		"K\ta\tlist\nK\ta.*\tscalar\n",   // a map value under a list
		"K\ta\tstrange\n",                // unknown shape
		"K\ta\n",                         // two columns
		"K\ta\tscalar\nK\ta\tscalar\n",   // twice
		"K\ta\tmap\nK\ta[]\tscalar\n",    // a list item under a map
		"K\ta\tstruct\nK\ta.*\tscalar\n", // a map value under a struct
		"K\ta\tlist\nK\ta[].b\tscalar\n", // item not listed
		"\ta\tscalar\n",                  // no kind
		"K\t\tscalar\n",                  // no path
	} {
		if _, err := parseSchema(bad); err == nil {
			t.Errorf("parseSchema accepts %q", bad)
		}
	}
	s, err := parseSchema("# c\nK\ta\tlist\nK\ta[]\tmap\nK\ta[].*\tlist\nK\ta[].*[]\tbool\n")
	if err != nil || s.kinds["K"].Fields["a"].Elem.Elem.Elem.Shape != ShapeBool || s.stats != (SchemaStats{Kinds: 1, Paths: 4}) {
		t.Errorf("parseSchema: %+v %v", s, err)
	}
}

// The committed table is what the generator writes from v1.14.0-rc.1.
// Needs a git clone of siderolabs/talos: TALOS_GIT_DIR (its git dir).
func TestSchemaTableIsGenerated(t *testing.T) {
	gitDir := os.Getenv("TALOS_GIT_DIR")
	if gitDir == "" {
		t.Skip("TALOS_GIT_DIR (git dir of a siderolabs/talos clone) not set: schema.txt not regenerated")
	}
	if testing.Short() {
		t.Skip("short")
	}
	src := t.TempDir()
	archive := exec.Command("git", "--git-dir="+gitDir, "archive", "v1.14.0-rc.1", "pkg/machinery")
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive: %v", err)
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	var out, errb bytes.Buffer
	gen := exec.Command("go", "run", filepath.Join("..", "..", "..", "scripts", "gen-talos114-schema.go"),
		"-src", filepath.Join(src, "pkg", "machinery"), "-tag", "v1.14.0-rc.1")
	gen.Stdout, gen.Stderr = &out, &errb
	if err := gen.Run(); err != nil {
		t.Fatalf("generator: %v: %s", err, errb.String())
	}
	if out.String() != schemaTable {
		t.Error("schema.txt differs from the generator's output: regenerate it (see its header)")
	}
}
