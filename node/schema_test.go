package node

import (
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/node/internal/talos114"
)

// schemaPaths lists, for each document of data, the key paths the schema
// does not know (in the notation of publicFields). Everything below a map's
// value is user data and is not looked at.
func unknownSchemaPaths(t *testing.T, data []byte) []string {
	t.Helper()
	var unknown []string
	var walk func(n *yaml.Node, s *schemaNode, kind, path string)
	walk = func(n *yaml.Node, s *schemaNode, kind, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			if s.kindOf() == schemaMap {
				return // user keys and whatever they hold
			}
			if s.kindOf() != schemaStruct {
				unknown = append(unknown, kind+":"+path+" (a mapping where the schema has no fields)")
				return
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				p := k
				if path != "" {
					p = path + "." + k
				}
				f := s.field(k)
				if f == nil {
					unknown = append(unknown, kind+":"+p)
					continue
				}
				walk(n.Content[i+1], f, kind, p)
			}
		case yaml.SequenceNode:
			if s.kindOf() != schemaSeq {
				unknown = append(unknown, kind+":"+path+" (a list where the schema has none)")
				return
			}
			for _, c := range n.Content {
				walk(c, s.elem, kind, path+"[]")
			}
		}
	}
	for _, doc := range parseDocs(t, data) {
		root := doc.Content[0]
		kind := scalarAt(root, "kind")
		if kind == "" {
			kind = v1alpha1Kind
		}
		s := documentSchemas()[kind]
		if s == nil {
			unknown = append(unknown, kind+": (kind not in the schema)")
			continue
		}
		walk(root, s, kind, "")
	}
	return unknown
}

// Every key of the configs talosctl v1.14 generates (the fixtures made by
// talosctl v1.14) is a schema key: 1.14 key names show in diffs and
// refusals; only values off the allow-list are redacted.
func TestSchemaKnowsTalos114Fixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/talos114/*/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	kinds := map[string]bool{}
	for _, f := range files {
		data := []byte(readFixture(t, strings.TrimPrefix(f, "testdata/")))
		if u := unknownSchemaPaths(t, data); len(u) > 0 {
			t.Errorf("%s: keys the schema does not know:\n%s", f, strings.Join(u, "\n"))
		}
		for _, d := range parseDocs(t, data) {
			if k := scalarAt(d.Content[0], "kind"); talos114.NewerThanV113(k) {
				kinds[k] = true
			}
		}
	}
	if len(kinds) < 10 {
		t.Errorf("the fixtures hold only %d kinds newer than v1.13: %v", len(kinds), kinds)
	}
}

// The schema is complete for what a v1.14 node registers: every kind, and
// the fields v1.14 added to kinds machinery v1.13 knows (talos114.NewerFields,
// which the v1.13 types lack).
func TestSchemaHasTalos114Kinds(t *testing.T) {
	for kind := range talos114.Kinds {
		if documentSchemas()[kind] == nil {
			t.Errorf("kind %s registered by v1.14 has no schema", kind)
		}
	}
	v113 := map[string]*schemaNode{}
	memo := map[reflect.Type]*schemaNode{}
	for kind, v := range documentTypes() {
		v113[kind] = schemaOf(reflect.TypeOf(v), memo)
	}
	for kind, nf := range talos114.NewerFields {
		for _, name := range nf.Names {
			if !hasKey(documentSchemas()[kind], name, map[*schemaNode]bool{}) {
				t.Errorf("%s: v1.14 field %s not in the schema", kind, name)
			}
			if hasKey(v113[kind], name, map[*schemaNode]bool{}) {
				t.Errorf("%s: %s is in the v1.13 types already: NewerFields is wrong", kind, name)
			}
		}
	}
}

// hasKey reports whether key is a field anywhere in n's tree.
func hasKey(n *schemaNode, key string, seen map[*schemaNode]bool) bool {
	if n == nil || seen[n] {
		return false
	}
	seen[n] = true
	if n.fields[key] != nil {
		return true
	}
	for _, f := range n.fields {
		if hasKey(f, key, seen) {
			return true
		}
	}
	return hasKey(n.elem, key, seen)
}

// Every allow-listed path is a real place of its kind's schema (a typo or
// a field Talos does not have would make a dead rule, or show a key the
// schema does not know).
func TestPublicFieldsAreSchemaPaths(t *testing.T) {
	for p := range publicFields {
		kind, path, _ := strings.Cut(p, ":")
		if kind == "*" {
			continue
		}
		n := documentSchemas()[kind]
		for _, step := range schemaSteps(path) {
			switch {
			case step == "[]" && n.kindOf() == schemaSeq, step == "*" && n.kindOf() == schemaMap:
				n = n.elem
			default:
				n = n.field(step)
			}
			if n == nil {
				break
			}
		}
		if n == nil {
			t.Errorf("publicFields %q: no such place in the schema", p)
		}
	}
}

// schemaSteps splits "a.b[].*" into "a", "b", "[]", "*".
func schemaSteps(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, ".") {
		base := strings.TrimRight(seg, "[]")
		out = append(out, base)
		for range (len(seg) - len(base)) / 2 {
			out = append(out, "[]")
		}
	}
	return out
}

// A key that is not in the v1.14 table is still redacted, in a diff and in
// a refusal that echoes it, while the table's keys show; values off the
// allow-list are redacted under the new keys too.
func TestTalos114UnknownKeyRedacted(t *testing.T) {
	const secret = "Zq8sekritKeyNm3"
	doc := "+apiVersion: v1alpha1\n+kind: UnattendedInstallConfig\n+installer:\n+    image: factory.talos.dev/metal-installer/abc:v1.14.0\n" +
		"+provisioning:\n+    diskSelector:\n+        match: disk.serial == \"" + secret + "v\"\n+    " + secret + ": x\n+    wipe: true\n+" + secret + "2: y"
	got := redactDiff(doc)
	want := "+apiVersion: v1alpha1\n+kind: UnattendedInstallConfig\n+installer:\n+    image: factory.talos.dev/metal-installer/abc:v1.14.0\n" +
		"+provisioning:\n+    diskSelector:\n+        match: <redacted>\n+    <redacted>: <redacted>\n+    wipe: true\n+<redacted>: <redacted>"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}

	cfg := []byte(strings.ReplaceAll(strings.TrimPrefix(doc, "+"), "\n+", "\n"))
	e := newConfigEcho(cfg)
	msg := e.scrub("UnattendedInstallConfig: provisioning." + secret + ": unknown field; provisioning.diskSelector.match: " + secret + "v")
	if strings.Contains(msg, secret[:8]) || strings.Contains(msg, secret[4:12]) {
		t.Errorf("refusal shows the unknown key: %s", msg)
	}
	if !strings.Contains(msg, "UnattendedInstallConfig: provisioning.") || !strings.Contains(msg, "provisioning.diskSelector.match: ") {
		t.Errorf("refusal lost the schema's key names: %s", msg)
	}
}

// The 1.14 table only adds to the v1.13 types: the shared v1.13 nodes stay
// as reflection built them (a v1.14 field of one place does not appear at
// another place that uses the same Go type).
func TestMergeSchemaCopies(t *testing.T) {
	memo := map[reflect.Type]*schemaNode{}
	var before []string
	for kind, v := range documentTypes() {
		before = append(before, dumpSchema(kind, schemaOf(reflect.TypeOf(v), memo))...)
	}
	for kind := range documentTypes() {
		mergeSchema(memo[reflect.TypeOf(documentTypes()[kind])], talos114.Schema()[kind])
	}
	var after []string
	for kind, v := range documentTypes() {
		after = append(after, dumpSchema(kind, schemaOf(reflect.TypeOf(v), memo))...)
	}
	sort.Strings(before)
	sort.Strings(after)
	if !reflect.DeepEqual(before, after) {
		t.Error("mergeSchema changed the v1.13 nodes")
	}
}

func dumpSchema(prefix string, n *schemaNode) []string {
	var out []string
	var walk func(n *schemaNode, path string, depth int)
	walk = func(n *schemaNode, path string, depth int) {
		if n == nil || depth > 12 {
			return
		}
		out = append(out, path+" "+string(rune('0'+n.kind)))
		for k, f := range n.fields {
			walk(f, path+"."+k, depth+1)
		}
		walk(n.elem, path+"[]", depth+1)
	}
	walk(n, prefix, 0)
	return out
}
