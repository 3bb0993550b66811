package plan

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The architecture's boundary (docs/ARCHITECTURE.md; the shape of
// image-factory's architecture_boundaries_test.go): the front ends,
// app/cli and app/gui, fill jobs and render; every step below is plan's,
// so a front end that calls it decides something plan decides, and the
// two front ends drift apart (issue 28). Each row names the step and the
// plan function a front end calls instead.
var planOwns = []struct{ pkg, name, owner string }{
	{"imaging/devices", "Check", "CheckCards"},                // the safety rules before the download
	{"imaging/devices", "Opener", "DeviceOpener"},             // a card is opened by the job
	{"imaging/devices", "NeedsElevation", "DefaultElevation"}, // the root decision
	{"imaging/devices", "ElevatedCommandFor", "DefaultElevation"},
	{"imaging", "FlashAll", "Flash"},    // the flash job
	{"imaging", "OpenDecoded", "Flash"}, // the elevated write's source
	{"node", "Apply", "CheckApply"},     // the apply job: config, probe, checks, send
	{"node", "LoadConfig", "CheckApply"},
	{"node", "InspectWith", "CheckApply"},
	{"node", "FindInstallerPatch", "CheckApply"},
	{"node", "ParseMode", "CheckMode"},       // the mode, parsed once
	{"node", "Bootstrap", "Bootstrap"},       // etcd's bootstrap (and when it is nothing to do)
	{"factory", "NewClient", "LoadSettings"}, // which factory: the user's, else the inventory's
	{"factory", "LoadProfiles", "LoadSettings"},
	{"inventory", "Load", "LoadSettings"},
	{"factory", "ParseInstallerFile", "ChooseImage"}, // the one image decision
	{"internal/userfile", "Read", "ReadInstallerFile"},
}

const module = "github.com/talosflash/talosflash/"

// violation is a front end's reference to a step plan owns.
type violation struct {
	pos    token.Position
	symbol string
	owner  string
}

func (v violation) String() string {
	return fmt.Sprintf("%s: %s is plan's step: call plan.%s", v.pos, v.symbol, v.owner)
}

// boundaryViolations parses one Go file and lists its references to the
// steps of planOwns, through any import name; a local name that shadows
// the package (a variable called node) is not the package.
func boundaryViolations(fset *token.FileSet, name string, src any) ([]violation, error) {
	f, err := parser.ParseFile(fset, name, src, 0) // with object resolution: locals are told from packages
	if err != nil {
		return nil, err
	}
	imports := map[string]string{} // local name -> module-relative path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		rel, ok := strings.CutPrefix(path, module)
		if !ok {
			continue
		}
		local := filepath.Base(rel)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		imports[local] = rel
	}
	var out []violation
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok || id.Obj != nil { // a local declaration, not the package
			return true
		}
		rel, ok := imports[id.Name]
		if !ok {
			return true
		}
		for _, o := range planOwns {
			if o.pkg == rel && o.name == sel.Sel.Name {
				out = append(out, violation{pos: fset.Position(sel.Pos()), symbol: rel + "." + o.name, owner: o.owner})
			}
		}
		return true
	})
	return out, nil
}

// frontEndFiles are the non-test Go files of dir built by default (build
// tags and GOOS suffixes as go build sees them: the demo build is not the
// app).
func frontEndFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		files = append(files, filepath.Join(dir, name))
	}
	return files
}

// Neither front end calls a step plan owns: they fill plan's jobs in and
// render their events.
func TestFrontEndsCallNoStepPlanOwns(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range []string{"../cli", "../gui"} {
		files := frontEndFiles(t, dir)
		if len(files) < 10 {
			t.Fatalf("%s: %d files: the boundary would hold vacuously", dir, len(files))
		}
		for _, file := range files {
			vs, err := boundaryViolations(fset, file, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				t.Error(v)
			}
		}
	}
}

// Every row names a step plan really owns: plan declares the function the
// front ends call instead, and its own source uses the step (so the table
// follows plan, and a row plan no longer needs says so).
func TestPlanOwnsTheSteps(t *testing.T) {
	fset := token.NewFileSet()
	declared := map[string]bool{}
	used := map[string]bool{}
	for _, file := range frontEndFiles(t, ".") {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				declared[fn.Name.Name] = true
			}
		}
		imports := map[string]string{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rel, ok := strings.CutPrefix(path, module); ok {
				imports[filepath.Base(rel)] = rel
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && imports[id.Name] != "" {
					used[imports[id.Name]+"."+sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	for _, o := range planOwns {
		if !declared[o.owner] {
			t.Errorf("%s.%s: plan declares no function %s", o.pkg, o.name, o.owner)
		}
		if !used[o.pkg+"."+o.name] {
			t.Errorf("%s.%s: plan does not use it: not a step plan owns", o.pkg, o.name)
		}
	}
}

// The boundary check fails on a planted call: for every row, a front-end
// file that calls the step (through its package name or another import
// name) is a violation naming plan's function; the same name on a local
// variable is not.
func TestBoundaryFailsOnAPlantedCall(t *testing.T) {
	fset := token.NewFileSet()
	for i, o := range planOwns {
		for _, alias := range []string{"", "lib"} {
			local := filepath.Base(o.pkg)
			imp := strconv.Quote(module + o.pkg)
			if alias != "" {
				local, imp = alias, alias+" "+imp
			}
			src := fmt.Sprintf("package cli\n\nimport %s\n\nfunc planted() { _ = %s.%s }\n", imp, local, o.name)
			vs, err := boundaryViolations(fset, fmt.Sprintf("planted%d.go", i), src)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != 1 || vs[0].owner != o.owner || !strings.Contains(vs[0].String(), "call plan."+o.owner) {
				t.Errorf("%s.%s planted as %s: %v", o.pkg, o.name, local, vs)
			}
		}
	}
	shadow := "package cli\n\nimport \"github.com/talosflash/talosflash/node\"\n\n" +
		"type box struct{ Apply func() }\n\nvar _ node.Node\n\nfunc f() { node := box{}; node.Apply() }\n"
	if vs, err := boundaryViolations(fset, "shadow.go", shadow); err != nil || len(vs) != 0 {
		t.Fatalf("a local variable named node: %v, %v", vs, err)
	}
	// And the real tree with one planted file: found.
	dir := t.TempDir()
	for _, f := range frontEndFiles(t, "../cli") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	planted := "package cli\n\nimport \"github.com/talosflash/talosflash/imaging/devices\"\n\nfunc planted(p string) { _, _ = devices.Check(p, 0, devices.Options{}) }\n"
	if err := os.WriteFile(filepath.Join(dir, "planted.go"), []byte(planted), 0o600); err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range frontEndFiles(t, dir) {
		vs, err := boundaryViolations(fset, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			found = append(found, v.String())
		}
	}
	if len(found) != 1 || !strings.Contains(found[0], "planted.go:5") || !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, "call plan.CheckCards") }) {
		t.Fatalf("a copy of app/cli with a planted devices.Check: %q", found)
	}
}
