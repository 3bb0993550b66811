package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The architecture's boundaries (docs/ARCHITECTURE.md), in the shape of
// image-factory's architecture_boundaries_test.go: an import allow-list
// per layer, bans on library functions, types and their methods, no
// dot-imports, and no library importing app/. The front ends (app/cli,
// app/gui and every folder below it, the root package) fill plan's jobs
// in and render its answers: a front end that calls a step plan owns
// decides something plan decides, and the two front ends drift apart.
//
// Two passes. The syntax pass reads every Go file of the front ends
// whatever its build constraints (a file only built for Windows or with
// -tags demo is checked too): its imports, dot-imports and every
// qualified reference to a banned name. The type pass type-checks the
// front ends as go build sees them (default tags, nogui, demo), so a
// banned method reached through a value of any origin (a variable, a
// value plan returns) is found too.

const module = "github.com/talosflash/talosflash"

// layer is a set of folders and the module packages their files may
// import; an import only allowed under a build tag is allowed in files
// that need that tag.
type layer struct {
	name    string
	dirs    []string // module-relative; "x/..." is x and every folder below it
	allow   []string // module-relative packages; "internal/..." every helper
	tagOnly map[string]string
}

var frontEnds = []layer{
	{name: "the CLI", dirs: []string{"app/cli"},
		allow: []string{"app/plan", "app/elevate", "app/contract", "inventory", "node", "kube", "imaging", "imaging/devices", "factory", "internal/..."}},
	{name: "the app", dirs: []string{"app/gui/..."},
		allow: []string{"app/gui", "app/plan", "app/elevate", "app/contract", "inventory", "node", "kube", "imaging", "imaging/devices", "factory", "assets", "internal/..."},
		// The demo build (-tags demo) shows canned nodes from the fakes.
		tagOnly: map[string]string{"node/nodetest": "demo", "factory/factorytest": "demo", "imaging/imagetest": "demo"}},
	{name: "the binary", dirs: []string{"."},
		allow: []string{"app/cli", "app/gui", "app/plan", "app/contract", "factory", "internal/..."}},
}

// planOwns are the steps and rules plan owns, each with what a front end
// calls instead: a function ("Check"), a type ("Lister") or a method
// ("Lister.Check", "Disk.Assess") of a library package.
var planOwns = []struct{ pkg, name, owner string }{
	{"imaging/devices", "Check", "CheckCards"},        // the safety rules before the download
	{"imaging/devices", "Lister.Check", "CheckCards"}, // the same rules through a lister
	{"imaging/devices", "Disk.Assess", "CardRefusal"}, // a listed card's refusal
	{"imaging/devices", "Open", "DeviceOpener"},       // a card is opened by the job
	{"imaging/devices", "Lister.Open", "DeviceOpener"},
	{"imaging/devices", "Opener", "DeviceOpener"},
	{"imaging/devices", "NeedsElevation", "DefaultElevation"}, // the root decision
	{"imaging/devices", "ElevatedCommandFor", "DefaultElevation"},
	{"imaging", "FlashAll", "Flash"}, // the flash job
	{"imaging", "FlashGroups", "Flash"},
	{"imaging", "OpenDecoded", "Flash"}, // the elevated write's source
	{"node", "Apply", "CheckApply"},     // the apply job: config, probe, checks, send
	{"node", "LoadConfig", "CheckApply"},
	{"node", "InspectWith", "CheckApply"},
	{"node", "FindInstallerPatch", "CheckApply"},
	{"node", "ParseMode", "CheckMode"},           // the mode, parsed once
	{"node", "Bootstrap", "Bootstrap"},           // etcd's bootstrap (and when it is nothing to do)
	{"node", "Upgrade", "UpgradeNodes"},          // upgrade --node, node by node
	{"node", "PlanUpgrade", "UpgradeNodes"},      // and its dry run
	{"node", "NormalizeEndpoint", "ClusterAt"},   // an address parsed once, into a member
	{"node", "CNIOf", "Cluster.CNI"},             // where the CNI comes from
	{"node", "SplitHostname", "Member.KubeName"}, // the short name, cut once
	{"node", "SaveEtcdSnapshot", "TakeSnapshot"}, // etcd's snapshot, from the first healthy control plane
	{"node", "RecoverEtcd", "Recover"},           // etcd's recovery from a snapshot
	{"node", "CheckEtcdSnapshot", "Recover"},     // the file checked as a recovery will
	{"kube", "Access.Drain", "Rollout"},          // the rolling upgrade's drain
	{"kube", "Access.Cordon", "Rollout"},
	{"factory", "NewClient", "LoadSettings"}, // which factory: the user's, else the inventory's
	{"factory", "LoadProfiles", "LoadSettings"},
	{"factory", "ParseInstallerFile", "ChooseImage"}, // the one image decision
	{"inventory", "Load", "LoadSettings"},
	{"internal/userfile", "Read", "ReadInstallerFile"},
}

// violation is one reference or import a layer may not have.
type violation struct {
	pos  token.Position
	what string
}

func (v violation) String() string { return fmt.Sprintf("%s: %s", v.pos, v.what) }

// owned says what a front end calls instead of pkg.name ("" not banned).
func owned(pkg, name string) string {
	for _, o := range planOwns {
		if o.pkg == pkg && o.name == name {
			return o.owner
		}
	}
	return ""
}

// inLayer: the module-relative folder dir is one of l's.
func (l layer) has(dir string) bool {
	for _, d := range l.dirs {
		base, all := strings.CutSuffix(d, "/...")
		if dir == base || all && strings.HasPrefix(dir, base+"/") {
			return true
		}
	}
	return false
}

// allows: l's files (with the build constraint of the file, expr) may
// import the module-relative package p.
func (l layer) allows(p string, expr constraint.Expr) bool {
	for _, a := range l.allow {
		base, all := strings.CutSuffix(a, "/...")
		if p == base || all && strings.HasPrefix(p, base+"/") {
			return true
		}
	}
	if tag, ok := l.tagOnly[p]; ok && expr != nil {
		return !expr.Eval(func(t string) bool { return t != tag }) // false without the tag
	}
	return false
}

// syntaxViolations reads one file of layer l (any build constraint):
// imports outside l's allow-list, dot-imports, and qualified references
// to a banned function or type.
func syntaxViolations(fset *token.FileSet, l layer, name string, src any) ([]violation, error) {
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var expr constraint.Expr
	for _, c := range f.Comments {
		for _, line := range c.List {
			if constraint.IsGoBuild(line.Text) {
				expr, _ = constraint.Parse(line.Text)
			}
		}
	}
	var out []violation
	imports := map[string]string{} // local name -> module-relative path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		rel, ok := moduleRel(p)
		if !ok {
			continue
		}
		local := path.Base(rel)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		switch {
		case local == ".":
			out = append(out, violation{fset.Position(imp.Pos()), fmt.Sprintf("dot-import of %s: %s names its package", rel, l.name)})
		case !l.allows(rel, expr):
			out = append(out, violation{fset.Position(imp.Pos()), fmt.Sprintf("%s imports %s, which it may not (allowed: %s)", l.name, rel, strings.Join(l.allow, ", "))})
		}
		imports[local] = rel
	}
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
		if owner := owned(rel, sel.Sel.Name); owner != "" {
			out = append(out, violation{fset.Position(sel.Pos()), fmt.Sprintf("%s.%s is plan's step: call plan.%s", rel, sel.Sel.Name, owner)})
		}
		return true
	})
	return out, nil
}

func moduleRel(p string) (string, bool) {
	if p == module {
		return ".", true
	}
	return strings.CutPrefix(p, module+"/")
}

// typedViolations lists the uses, in the type-checked files, of a banned
// function, type or method, however they were reached.
func typedViolations(fset *token.FileSet, files []*ast.File, info *types.Info) []violation {
	var out []violation
	for id, obj := range info.Uses {
		if obj.Pkg() == nil {
			continue
		}
		rel, ok := moduleRel(obj.Pkg().Path())
		if !ok {
			continue
		}
		name := obj.Name()
		if fn, ok := obj.(*types.Func); ok {
			if recv := fn.Type().(*types.Signature).Recv(); recv != nil {
				t := recv.Type()
				if p, ok := t.(*types.Pointer); ok {
					t = p.Elem()
				}
				if n, ok := t.(*types.Named); ok {
					name = n.Obj().Name() + "." + name
				}
			}
		}
		if owner := owned(rel, name); owner != "" {
			out = append(out, violation{fset.Position(id.Pos()), fmt.Sprintf("%s.%s is plan's step: call plan.%s", rel, name, owner)})
		}
	}
	slices.SortFunc(out, func(a, b violation) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// listed is `go list -export -deps` of the front ends under one set of
// build tags: each package's export data (the type pass's importer) and
// the front ends' own files.
type listed struct {
	export map[string]string // import path -> export data file
	pkgs   []listedPkg
}

type listedPkg struct {
	ImportPath, Dir, Export string
	GoFiles, CgoFiles       []string
	Module                  *struct{ Path string }
	DepOnly                 bool
}

var listCache sync.Map // tags -> *listed

func goList(t *testing.T, tags string) *listed {
	t.Helper()
	if l, ok := listCache.Load(tags); ok {
		return l.(*listed)
	}
	args := []string{"list", "-e", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,CgoFiles,Module,DepOnly", "-tags", tags, "../..", "../cli", "../gui/..."}
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outData, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	l := &listed{export: map[string]string{}}
	dec := json.NewDecoder(bytes.NewReader(outData))
	for {
		var p listedPkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Export != "" {
			l.export[p.ImportPath] = p.Export
		}
		if !p.DepOnly {
			l.pkgs = append(l.pkgs, p)
		}
	}
	listCache.Store(tags, l)
	return l
}

// check type-checks files as package pkgPath against the export data
// listed, recording uses.
func (l *listed) check(fset *token.FileSet, pkgPath string, files []*ast.File) (*types.Info, error) {
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
			f, ok := l.export[p]
			if !ok {
				return nil, fmt.Errorf("no export data for %s", p)
			}
			return os.Open(f)
		}),
		FakeImportC: true,
	}
	_, err := conf.Check(pkgPath, fset, files, info)
	return info, err
}

func parseFiles(t *testing.T, fset *token.FileSet, dir string, names []string) []*ast.File {
	t.Helper()
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// frontEndDirs are the folders of a layer that hold Go files (below the
// module root, walked).
func frontEndDirs(t *testing.T, root string, l layer) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "third_party") {
			return filepath.SkipDir
		}
		if l.has(rel) {
			if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// productionFiles are a folder's Go files but its tests, whatever their
// build constraints.
func productionFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, filepath.Join(dir, n))
		}
	}
	return files
}

// The syntax pass over the real tree: every file of every front end.
func TestFrontEndsSyntax(t *testing.T) {
	fset := token.NewFileSet()
	root := filepath.Join("..", "..")
	for _, l := range frontEnds {
		dirs := frontEndDirs(t, root, l)
		n := 0
		for _, d := range dirs {
			for _, file := range productionFiles(t, filepath.Join(root, d)) {
				n++
				vs, err := syntaxViolations(fset, l, file, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range vs {
					t.Error(v)
				}
			}
		}
		if n < 3 {
			t.Fatalf("%s: %d files: the boundary would hold vacuously", l.name, n)
		}
	}
}

// The type pass over the real tree, under each set of build tags the
// front ends are built with.
func TestFrontEndsTyped(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the front ends against go list's export data")
	}
	for _, tags := range []string{"", "nogui", "demo"} {
		l := goList(t, tags)
		checked := 0
		for _, p := range l.pkgs {
			rel, ok := moduleRel(p.ImportPath)
			if !ok || !slices.ContainsFunc(frontEnds, func(fe layer) bool { return fe.has(rel) }) {
				continue
			}
			fset := token.NewFileSet()
			files := parseFiles(t, fset, p.Dir, append(slices.Clone(p.GoFiles), p.CgoFiles...))
			info, err := l.check(fset, p.ImportPath, files)
			if err != nil {
				t.Fatalf("tags %q: type-check %s: %v", tags, p.ImportPath, err)
			}
			checked++
			for _, v := range typedViolations(fset, files, info) {
				t.Errorf("tags %q: %s", tags, v)
			}
		}
		if checked < 2 {
			t.Fatalf("tags %q: %d front-end packages checked", tags, checked)
		}
	}
}

// No library imports app/: the front ends and plan sit above them.
func TestLibrariesImportNoApp(t *testing.T) {
	fset := token.NewFileSet()
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "app" || rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "third_party") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || !strings.Contains(rel, "/") {
			return nil // the root package is the binary
		}
		if strings.HasPrefix(rel, "bench/") || strings.HasPrefix(rel, "scripts/") {
			return nil // tools, not libraries
		}
		for _, v := range libraryViolations(fset, p, nil) {
			t.Error(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func libraryViolations(fset *token.FileSet, name string, src any) []violation {
	f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
	if err != nil {
		return []violation{{what: err.Error()}}
	}
	var out []violation
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if rel, ok := moduleRel(p); ok && (rel == "app" || strings.HasPrefix(rel, "app/")) {
			out = append(out, violation{fset.Position(imp.Pos()), fmt.Sprintf("a library imports %s: libraries know nothing of app/", rel)})
		}
	}
	return out
}

// Every row names a step plan really owns: plan declares the function
// or method the front ends call instead, and its own source takes that
// step through one of the owner's rows (CheckCards calls devices.Check,
// which is what Lister.Check does): the table follows plan, and an owner
// plan no longer needs says so.
func TestPlanOwnsTheSteps(t *testing.T) {
	fset := token.NewFileSet()
	declared := map[string]bool{}
	var files []*ast.File
	entries, _ := os.ReadDir(".")
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, n, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				name := fn.Name.Name
				if fn.Recv != nil {
					rt := fn.Recv.List[0].Type
					if s, ok := rt.(*ast.StarExpr); ok {
						rt = s.X
					}
					name = rt.(*ast.Ident).Name + "." + name
				}
				declared[name] = true
			}
		}
	}
	l := goList(t, "")
	info, err := l.check(fset, module+"/app/plan", files)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, v := range typedViolations(fset, files, info) {
		used[strings.SplitN(v.what, " is plan's step", 2)[0]] = true
	}
	takes := map[string]bool{}
	for _, o := range planOwns {
		if !declared[o.owner] {
			t.Errorf("%s.%s: plan declares no %s", o.pkg, o.name, o.owner)
		}
		takes[o.owner] = takes[o.owner] || used[o.pkg+"."+o.name]
	}
	for owner, ok := range takes {
		if !ok {
			t.Errorf("plan.%s takes none of its steps: not a step plan owns", owner)
		}
	}
}

// plant is a counterexample: a file the boundaries must refuse.
type plant struct {
	name  string
	dir   string // module-relative folder it is planted in
	file  string
	src   string
	typed bool   // also type-checked with the folder's files (build tags "")
	want  string // in the violation
}

var plants = []plant{
	{name: "a plain call of a step", dir: "app/cli", file: "planted.go", typed: true, want: "imaging/devices.Check is plan's step: call plan.CheckCards",
		src: "package cli\n\nimport \"github.com/talosflash/talosflash/imaging/devices\"\n\nfunc planted(p string) { _, _ = devices.Check(p, 0, devices.Options{}) }\n"},
	{name: "a method on a library type", dir: "app/cli", file: "planted.go", typed: true, want: "imaging/devices.Lister.Check is plan's step",
		src: "package cli\n\nimport \"github.com/talosflash/talosflash/imaging/devices\"\n\nfunc planted(p string) { var l devices.Lister; _, _ = l.Check(p, 0, devices.Options{}) }\n"},
	{name: "a method on a value from elsewhere", dir: "app/gui", file: "planted.go", typed: true, want: "imaging/devices.Disk.Assess is plan's step",
		src: "package gui\n\nfunc (s *targetStep) planted() { for _, d := range s.ui.session.Disks() { _ = d.Assess(0, s.ui.deps.Safety) } }\n"},
	{name: "a dot-import", dir: "app/cli", file: "planted.go", typed: true, want: "dot-import of imaging",
		src: "package cli\n\nimport . \"github.com/talosflash/talosflash/imaging\"\n\nfunc planted() { _ = FlashAll }\n"},
	{name: "a dot-import's banned call", dir: "app/cli", file: "planted.go", typed: true, want: "imaging.FlashAll is plan's step: call plan.Flash",
		src: "package cli\n\nimport . \"github.com/talosflash/talosflash/imaging\"\n\nfunc planted() { _ = FlashAll }\n"},
	{name: "an import under another name", dir: "app/cli", file: "planted.go", typed: true, want: "node.Apply is plan's step: call plan.CheckApply",
		src: "package cli\n\nimport lib \"github.com/talosflash/talosflash/node\"\n\nvar planted = lib.Apply\n"},
	{name: "the app importing imaging/meta", dir: "app/gui", file: "planted.go", want: "the app imports imaging/meta, which it may not",
		src: "package gui\n\nimport \"github.com/talosflash/talosflash/imaging/meta\"\n\nvar planted = meta.WriteTag\n"},
	{name: "the root package calling the flash", dir: ".", file: "planted.go", want: "the binary imports imaging, which it may not",
		src: "package main\n\nimport \"github.com/talosflash/talosflash/imaging\"\n\nvar planted = imaging.FlashAll\n"},
	{name: "a subfolder of app/gui", dir: "app/gui/cmd/x", file: "main.go", typed: true, want: "node.Apply is plan's step: call plan.CheckApply",
		src: "package main\n\nimport \"github.com/talosflash/talosflash/node\"\n\nfunc main() { _ = node.Apply }\n"},
	{name: "a file built for Windows only", dir: "app/cli", file: "planted_windows.go", want: "node.Bootstrap is plan's step",
		src: "//go:build windows\n\npackage cli\n\nimport \"github.com/talosflash/talosflash/node\"\n\nvar planted = node.Bootstrap\n"},
	{name: "the fakes outside the demo build", dir: "app/gui", file: "planted.go", want: "the app imports node/nodetest, which it may not",
		src: "package gui\n\nimport \"github.com/talosflash/talosflash/node/nodetest\"\n\nvar planted = nodetest.Start\n"},
	{name: "a library importing app/", dir: "kube", file: "planted.go", want: "a library imports app/contract",
		src: "package kube\n\nimport \"github.com/talosflash/talosflash/app/contract\"\n\nvar planted = contract.ExitUsage\n"},
	{name: "the CLI taking the snapshot itself", dir: "app/cli", file: "planted.go", typed: true, want: "node.SaveEtcdSnapshot is plan's step: call plan.TakeSnapshot",
		src: "package cli\n\nimport (\n\t\"context\"\n\n\t\"github.com/talosflash/talosflash/node\"\n)\n\nfunc planted() { _, _ = node.SaveEtcdSnapshot(context.Background(), \"\", nil, \"x\", node.SnapshotOptions{}) }\n"},
	{name: "a method through a parameter", dir: "app/cli", file: "planted.go", typed: true, want: "kube.Access.Cordon is plan's step: call plan.Rollout",
		src: "package cli\n\nimport (\n\t\"context\"\n\n\t\"github.com/talosflash/talosflash/kube\"\n)\n\nfunc planted(a *kube.Access) { _ = a.Cordon(context.Background(), \"x\") }\n"},
}

// Each plant is caught, by the pass that sees it, and the real tree
// passes (the tests above): the boundaries are not vacuous.
func TestBoundariesCatchEveryPlant(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			fset := token.NewFileSet()
			var found []string
			if strings.HasPrefix(p.dir, "app/") && !strings.HasPrefix(p.dir, "app/cli") && !strings.HasPrefix(p.dir, "app/gui") || !strings.HasPrefix(p.dir, "app") && p.dir != "." {
				for _, v := range libraryViolations(fset, filepath.Join(p.dir, p.file), p.src) {
					found = append(found, v.String())
				}
			}
			for _, l := range frontEnds {
				if !l.has(p.dir) {
					continue
				}
				vs, err := syntaxViolations(fset, l, filepath.Join(p.dir, p.file), p.src)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range vs {
					found = append(found, v.String())
				}
			}
			if p.typed && !testing.Short() {
				found = append(found, typedPlant(t, root, p)...)
			}
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, p.want) }) {
				t.Fatalf("not caught (%q): %q", p.want, found)
			}
		})
	}
}

// typedPlant type-checks the plant with its folder's files (a new folder:
// alone) and lists what the type pass finds.
func typedPlant(t *testing.T, root string, p plant) []string {
	t.Helper()
	l := goList(t, "")
	fset := token.NewFileSet()
	var files []*ast.File
	pkgPath := module + "/" + p.dir
	for _, lp := range l.pkgs {
		if lp.ImportPath == pkgPath {
			files = parseFiles(t, fset, lp.Dir, append(slices.Clone(lp.GoFiles), lp.CgoFiles...))
		}
	}
	f, err := parser.ParseFile(fset, filepath.Join(root, p.dir, p.file), p.src, 0)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, f)
	info, err := l.check(fset, pkgPath, files)
	if err != nil {
		t.Fatalf("the plant does not compile: %v", err)
	}
	var out []string
	for _, v := range typedViolations(fset, []*ast.File{f}, info) {
		if v.pos.Filename == filepath.Join(root, p.dir, p.file) {
			out = append(out, v.String())
		}
	}
	return out
}
