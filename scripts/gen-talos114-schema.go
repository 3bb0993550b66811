//go:build ignore

// gen-talos114-schema writes node/internal/talos114/schema.txt: the yaml key
// tree of every config document kind a Talos release registers, read from
// the release's pkg/machinery source with go/parser (no type checking, no
// build: the source is only read). It records field names and their
// shapes, no upstream code. The source: a checkout of siderolabs/talos at
// v1.14.0-rc.1, anywhere outside this repository (TALOS below):
//
//	go run scripts/gen-talos114-schema.go -src "$TALOS/pkg/machinery" -tag v1.14.0-rc.1 > node/internal/talos114/schema.txt
//
// The shapes follow how gopkg.in/yaml.v3 encodes a Go type: pointers are
// followed, slices are lists ("[]" in a path), maps hold user keys ("*" in a
// path), ",inline" fields lift their keys, a type with MarshalText/
// UnmarshalText is a scalar, and one with MarshalYAML/UnmarshalYAML must be on
// yamlCodecs (the generator stops on one that is not, so a new codec gets
// looked at). A type that contains itself is cut where it recurs: keys below
// the cut are unknown, so the redaction hides them.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

const module = "github.com/siderolabs/talos/pkg/machinery"

// yamlCodecs are the types with their own MarshalYAML/UnmarshalYAML and the
// shape they take in a config ("" = as their Go type says: the codec only
// accepts other spellings of the same shape).
var yamlCodecs = map[string]string{
	module + "/config/types/meta.ArgValue":                   "scalar", // a string or a list of strings: opaque
	module + "/config/types/meta.URL":                        "scalar",
	module + "/config/types/network.PortRange":               "scalar",
	module + "/config/types/runtime.EtcFileMode":             "scalar",
	module + "/config/types/v1alpha1.ArgValue":               "scalar", // v1.13 spelling of meta.ArgValue
	module + "/config/types/v1alpha1.Base64Bytes":            "scalar",
	module + "/config/types/v1alpha1.Endpoint":               "scalar",
	module + "/config/types/v1alpha1.InstallDiskSizeMatcher": "scalar",
	module + "/config/types/v1alpha1.DiskSize":               "scalar",
	module + "/config/types/v1alpha1.FileMode":               "scalar",
	module + "/config/types/v1alpha1.ClusterInlineManifests": "", // a list; also reads a legacy form
}

// externalTypes are the types from outside pkg/machinery its config
// documents use, with their shape.
var externalTypes = map[string]string{
	"time.Duration":  "number", // int64 to yaml.v3 ("5m0s" when a Duration encodes itself)
	"net/netip.Addr": "scalar", "net/netip.Prefix": "scalar", "net/netip.AddrPort": "scalar",
	"net/url.URL": "scalar",
	"os.FileMode": "number",
	"github.com/siderolabs/crypto/x509.PEMEncodedCertificateAndKey": "struct:crt,key",
	"github.com/siderolabs/crypto/x509.PEMEncodedCertificate":       "struct:crt",
	"github.com/siderolabs/crypto/x509.PEMEncodedKey":               "struct:key",
	"github.com/opencontainers/runtime-spec/specs-go.Spec":          "scalar",
	"github.com/siderolabs/go-blockdevice/v2/encryption.Key":        "scalar",
}

type typeDecl struct {
	pkg  *pkg
	file *ast.File
	spec *ast.TypeSpec
}

type pkg struct {
	path    string
	types   map[string]typeDecl
	methods map[string]map[string]bool // receiver type -> method names
	consts  map[string]string          // string constants
	files   []*ast.File
}

type gen struct {
	pkgs  map[string]*pkg
	lines []string
	stack []string // types being expanded (cycle cut)
	cuts  map[string]bool
	errs  []string
}

func main() {
	src := flag.String("src", "", "pkg/machinery directory of a Talos source tree")
	tag := flag.String("tag", "", "the release tag the source is from (for the header)")
	flag.Parse()
	if *src == "" || *tag == "" {
		fmt.Fprintln(os.Stderr, "usage: go run scripts/gen-talos114-schema.go -src DIR/pkg/machinery -tag vX.Y.Z")
		os.Exit(2)
	}
	g := &gen{pkgs: map[string]*pkg{}, cuts: map[string]bool{}}
	if err := g.parse(*src); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kinds := g.registered()
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, kind := range names {
		d := kinds[kind]
		g.structFields(kind, "", d.pkg, d.file, d.spec.Type.(*ast.StructType), d.pkg.path+"."+d.spec.Name.Name)
	}
	if len(g.errs) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(g.errs, "\n"))
		os.Exit(1)
	}
	sort.Strings(g.lines)
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "# The yaml key tree of every config document kind Talos %s registers\n", *tag)
	fmt.Fprintf(w, "# (pkg/machinery/config/types, registry.Register), one line per key path:\n")
	fmt.Fprintf(w, "# kind<TAB>path<TAB>shape (scalar|bool|number|struct|map|list); \"[]\" is a\n")
	fmt.Fprintf(w, "# list's item, \"*\" a map's value (its keys are user data). Field names only.\n")
	fmt.Fprintf(w, "# Generated, do not edit: see scripts/gen-talos114-schema.go (-tag %s).\n", *tag)
	fmt.Fprintf(w, "# %d kinds, %d paths.\n", len(names), len(g.lines))
	for _, l := range g.lines {
		fmt.Fprintln(w, l)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(g.cuts) > 0 {
		cuts := make([]string, 0, len(g.cuts))
		for c := range g.cuts {
			cuts = append(cuts, c)
		}
		sort.Strings(cuts)
		fmt.Fprintf(os.Stderr, "recursive types cut: %s\n", strings.Join(cuts, ", "))
	}
}

// parse reads every non-test Go file under root.
func (g *gen) parse(root string) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", p, err)
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		ip := module
		if rel != "." {
			ip += "/" + filepath.ToSlash(rel)
		}
		pk := g.pkgs[ip]
		if pk == nil {
			pk = &pkg{path: ip, types: map[string]typeDecl{}, methods: map[string]map[string]bool{}, consts: map[string]string{}}
			g.pkgs[ip] = pk
		}
		pk.files = append(pk.files, f)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				for _, s := range decl.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						pk.types[s.Name.Name] = typeDecl{pkg: pk, file: f, spec: s}
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if i < len(s.Values) {
								if lit, ok := s.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
									pk.consts[n.Name], _ = strconv.Unquote(lit.Value)
								}
							}
						}
					}
				}
			case *ast.FuncDecl:
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					if recv := baseName(decl.Recv.List[0].Type); recv != "" {
						if pk.methods[recv] == nil {
							pk.methods[recv] = map[string]bool{}
						}
						pk.methods[recv][decl.Name.Name] = true
					}
				}
			}
		}
		return nil
	})
}

func baseName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return baseName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return baseName(e.X)
	case *ast.IndexListExpr:
		return baseName(e.X)
	}
	return ""
}

// registered finds registry.Register(kind, func(version) { ... return &T{} })
// in config/types and returns each kind's document type.
func (g *gen) registered() map[string]typeDecl {
	out := map[string]typeDecl{}
	for ip, pk := range g.pkgs {
		if !strings.HasPrefix(ip, module+"/config/types/") {
			continue
		}
		for _, f := range pk.files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Register" || fmt.Sprint(sel.X) != "registry" {
					return true
				}
				var kind string
				switch a := call.Args[0].(type) {
				case *ast.BasicLit:
					kind, _ = strconv.Unquote(a.Value)
				case *ast.Ident:
					kind = pk.consts[a.Name]
				}
				var typ string
				ast.Inspect(call.Args[1], func(n ast.Node) bool {
					if u, ok := n.(*ast.UnaryExpr); ok && u.Op == token.AND {
						if cl, ok := u.X.(*ast.CompositeLit); ok {
							typ = baseName(cl.Type)
						}
					}
					return typ == ""
				})
				d, ok := pk.types[typ]
				if _, isStruct := d.spec.Type.(*ast.StructType); kind == "" || !ok || !isStruct {
					g.errs = append(g.errs, fmt.Sprintf("%s: registry.Register: cannot resolve kind %q / type %q", ip, kind, typ))
					return true
				}
				if _, dup := out[kind]; dup {
					g.errs = append(g.errs, fmt.Sprintf("kind %s registered twice", kind))
				}
				out[kind] = d
				return true
			})
		}
	}
	return out
}

func (g *gen) emit(kind, path, shape string) {
	g.lines = append(g.lines, kind+"\t"+path+"\t"+shape)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// structFields emits the keys of struct st (declared in pk's file f) under path.
func (g *gen) structFields(kind, path string, pk *pkg, f *ast.File, st *ast.StructType, name string) {
	for _, fld := range st.Fields.List {
		tag := ""
		if fld.Tag != nil {
			raw, _ := strconv.Unquote(fld.Tag.Value)
			tag = reflect.StructTag(raw).Get("yaml")
		}
		key, opts, _ := strings.Cut(tag, ",")
		if key == "-" {
			continue
		}
		if len(fld.Names) == 0 { // embedded
			if strings.Contains(","+opts+",", ",inline,") {
				if !g.inline(kind, path, pk, f, fld.Type) {
					g.errs = append(g.errs, fmt.Sprintf("%s: %s: inline field of a type that is not a struct", kind, name))
				}
				continue
			}
			if key == "" {
				key = strings.ToLower(baseName(fld.Type))
			}
			if !ast.IsExported(baseName(fld.Type)) {
				continue
			}
			g.field(kind, join(path, key), pk, f, fld.Type)
			continue
		}
		for _, n := range fld.Names {
			if !n.IsExported() {
				continue
			}
			k := key
			if k == "" {
				k = strings.ToLower(n.Name)
			}
			if strings.Contains(","+opts+",", ",inline,") {
				if !g.inline(kind, path, pk, f, fld.Type) {
					g.errs = append(g.errs, fmt.Sprintf("%s: %s.%s: inline field of a type that is not a struct", kind, name, n.Name))
				}
				continue
			}
			g.field(kind, join(path, k), pk, f, fld.Type)
		}
	}
}

// inline lifts the fields of the struct type e into path.
func (g *gen) inline(kind, path string, pk *pkg, f *ast.File, e ast.Expr) bool {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if st, ok := e.(*ast.StructType); ok {
		g.structFields(kind, path, pk, f, st, "inline")
		return true
	}
	d, _, ok := g.resolve(pk, f, e)
	if !ok {
		return false
	}
	st, ok := d.spec.Type.(*ast.StructType)
	if !ok {
		return false
	}
	g.structFields(kind, path, d.pkg, d.file, st, d.pkg.path+"."+d.spec.Name.Name)
	return true
}

// resolve finds the declaration of a named type expression; ext is the
// qualified name of a type from outside pkg/machinery (then ok is false).
func (g *gen) resolve(pk *pkg, f *ast.File, e ast.Expr) (d typeDecl, ext string, ok bool) {
	switch e := e.(type) {
	case *ast.Ident:
		d, ok = pk.types[e.Name]
		return d, "", ok
	case *ast.IndexExpr:
		return g.resolve(pk, f, e.X)
	case *ast.IndexListExpr:
		return g.resolve(pk, f, e.X)
	case *ast.SelectorExpr:
		x, isIdent := e.X.(*ast.Ident)
		if !isIdent {
			return d, "", false
		}
		ip := importPath(f, x.Name)
		if p := g.pkgs[ip]; p != nil {
			d, ok = p.types[e.Sel.Name]
			return d, ip + "." + e.Sel.Name, ok
		}
		return d, ip + "." + e.Sel.Name, false
	}
	return d, "", false
}

func importPath(f *ast.File, name string) string {
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		n := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			n = imp.Name.Name
		} else if strings.HasPrefix(n, "v") && strings.Trim(n[1:], "0123456789") == "" && strings.Contains(p, "/") {
			q := p[:strings.LastIndex(p, "/")] // gopkg.in/yaml.v3 style and /v2 suffixes
			n = q[strings.LastIndex(q, "/")+1:]
		}
		n = strings.TrimSuffix(strings.Split(n, ".")[0], "-go")
		if n == name || strings.ReplaceAll(n, "-", "") == name {
			return p
		}
	}
	return name // a package of the standard library imported without a path we can see
}

var builtins = map[string]string{
	"string": "scalar", "bool": "bool", "any": "scalar", "error": "scalar",
	"int": "number", "int8": "number", "int16": "number", "int32": "number", "int64": "number",
	"uint": "number", "uint8": "number", "uint16": "number", "uint32": "number", "uint64": "number",
	"float32": "number", "float64": "number", "byte": "number", "rune": "number", "uintptr": "number",
}

// field emits path with the shape of type e, and its keys below.
func (g *gen) field(kind, path string, pk *pkg, f *ast.File, e ast.Expr) {
	switch t := e.(type) {
	case *ast.StarExpr:
		g.field(kind, path, pk, f, t.X)
		return
	case *ast.ParenExpr:
		g.field(kind, path, pk, f, t.X)
		return
	case *ast.ArrayType:
		if id, ok := t.Elt.(*ast.Ident); ok && (id.Name == "byte" || id.Name == "uint8") {
			g.emit(kind, path, "scalar") // base64 text
			return
		}
		g.emit(kind, path, "list")
		g.field(kind, path+"[]", pk, f, t.Elt)
		return
	case *ast.MapType:
		g.emit(kind, path, "map")
		g.field(kind, path+".*", pk, f, t.Value)
		return
	case *ast.InterfaceType:
		g.emit(kind, path, "scalar")
		return
	case *ast.StructType:
		g.emit(kind, path, "struct")
		g.structFields(kind, path, pk, f, t, path)
		return
	case *ast.Ident:
		if _, local := pk.types[t.Name]; !local {
			if shape, ok := builtins[t.Name]; ok {
				g.emit(kind, path, shape)
				return
			}
			// A type parameter of a generic type: whatever it is, opaque.
			g.emit(kind, path, "scalar")
			return
		}
	case *ast.FuncType, *ast.ChanType:
		g.errs = append(g.errs, fmt.Sprintf("%s: %s: a func or chan field", kind, path))
		return
	}
	d, ext, ok := g.resolve(pk, f, e)
	if !ok {
		shape, known := externalTypes[ext]
		if !known {
			g.errs = append(g.errs, fmt.Sprintf("%s: %s: type %s from outside pkg/machinery: add it to externalTypes", kind, path, ext))
			return
		}
		if keys, isStruct := strings.CutPrefix(shape, "struct:"); isStruct {
			g.emit(kind, path, "struct")
			for _, k := range strings.Split(keys, ",") {
				g.emit(kind, join(path, k), "scalar")
			}
			return
		}
		g.emit(kind, path, shape)
		return
	}
	qname := d.pkg.path + "." + d.spec.Name.Name
	m := g.methodSet(d, 0)
	if m["MarshalText"] || m["UnmarshalText"] {
		g.emit(kind, path, "scalar")
		return
	}
	if m["MarshalYAML"] || m["UnmarshalYAML"] {
		shape, known := yamlCodecs[qname]
		if !known {
			g.errs = append(g.errs, fmt.Sprintf("%s: %s: %s has its own MarshalYAML/UnmarshalYAML: add it to yamlCodecs", kind, path, qname))
			return
		}
		if shape != "" {
			g.emit(kind, path, shape)
			return
		}
	}
	for _, s := range g.stack {
		if s == qname {
			g.cuts[qname] = true
			g.emit(kind, path, shapeOf(d.spec.Type))
			return
		}
	}
	g.stack = append(g.stack, qname)
	defer func() { g.stack = g.stack[:len(g.stack)-1] }()
	if st, isStruct := d.spec.Type.(*ast.StructType); isStruct {
		if elem := inlineMap(st); elem != nil {
			// An ",inline" map takes every key: all of them are user data.
			g.emit(kind, path, "map")
			g.field(kind, path+".*", d.pkg, d.file, elem)
			return
		}
		g.emit(kind, path, "struct")
		g.structFields(kind, path, d.pkg, d.file, st, qname)
		return
	}
	g.field(kind, path, d.pkg, d.file, d.spec.Type)
}

// externalTextMarshalers are the types from outside pkg/machinery with a
// MarshalText method that a config type embeds (promoting it).
var externalTextMarshalers = map[string]bool{
	"net/netip.Addr": true, "net/netip.Prefix": true, "net/netip.AddrPort": true,
}

// methodSet is d's methods and those its embedded fields promote.
func (g *gen) methodSet(d typeDecl, depth int) map[string]bool {
	out := map[string]bool{}
	for m := range d.pkg.methods[d.spec.Name.Name] {
		out[m] = true
	}
	st, ok := d.spec.Type.(*ast.StructType)
	if !ok || depth > 8 {
		return out
	}
	for _, fld := range st.Fields.List {
		if len(fld.Names) != 0 {
			continue
		}
		e, ext, ok := g.resolve(d.pkg, d.file, starless(fld.Type))
		switch {
		case ok:
			for m := range g.methodSet(e, depth+1) {
				out[m] = true
			}
		case externalTextMarshalers[ext]:
			out["MarshalText"] = true
		}
	}
	return out
}

func starless(e ast.Expr) ast.Expr {
	if s, ok := e.(*ast.StarExpr); ok {
		return s.X
	}
	return e
}

// inlineMap is the value type of st's ",inline" map field, if it has one.
func inlineMap(st *ast.StructType) ast.Expr {
	for _, fld := range st.Fields.List {
		if fld.Tag == nil {
			continue
		}
		raw, _ := strconv.Unquote(fld.Tag.Value)
		_, opts, _ := strings.Cut(reflect.StructTag(raw).Get("yaml"), ",")
		if m, ok := fld.Type.(*ast.MapType); ok && strings.Contains(","+opts+",", ",inline,") {
			return m.Value
		}
	}
	return nil
}

// shapeOf is the shape of a type expression without looking further.
func shapeOf(e ast.Expr) string {
	switch e.(type) {
	case *ast.StructType:
		return "struct"
	case *ast.MapType:
		return "map"
	case *ast.ArrayType:
		return "list"
	}
	return "scalar"
}
