package node

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/node/internal/talos114"
	"github.com/talosflash/talosflash/node/internal/yamldocs"
)

// A patch is applied as `talosctl patch machineconfig` applies it
// (cmd/talosctl/cmd/talos/patch.go patchFn): configpatcher.LoadPatch for
// each patch, configpatcher.Apply over the node's config, the result's
// Bytes sent. Strategic merge (configpatcher/strategic.go, merge/merge.go):
// documents match on apiVersion, kind and name; a document the config
// lacks is appended; inside one, lists are APPENDED to (except fields
// tagged merge:"replace" and the few merged by key), which is the trap a
// patch of an existing list falls into. `$patch: delete` on a document or
// a key deletes it; a patch may delete a list and set it again in the
// next document of the same file, which is how a list is replaced.
//
// Machinery v1.13 (the newest this module can link) does not know the
// document kinds Talos 1.14 added, nor 1.14's new fields of older kinds:
// such documents of the node's config are kept byte for byte; a patch may
// delete one, add one, or replace one (ReplaceDocument), never merge into
// one (ErrPatchUnsupported says what to do instead).

// Patch errors; both match ErrInvalidConfig (exit 7): nothing is sent.
var (
	// ErrPatchUnsupported: the patch merges into a document machinery
	// v1.13 cannot decode.
	ErrPatchUnsupported error = invalidConfig("cannot merge this patch with Talos machinery " + MachineryVersion)
	// ErrPatch: a patch that does not load or apply (the patcher's reason
	// follows, scrubbed of the config's values).
	ErrPatch error = invalidConfig("patch")
)

// invalidConfig is a sentinel that also matches ErrInvalidConfig.
type invalidConfig string

func (e invalidConfig) Error() string        { return string(e) }
func (e invalidConfig) Is(target error) bool { return target == ErrInvalidConfig }

// Replacement is one whole document to put in place of the node's
// document of the same kind and name (talosflash patch
// --replace-document Kind/name FILE): a delete and the new document in one
// change, so there is no moment without it.
type Replacement struct {
	Kind, Name string
	Document   []byte // exactly one YAML document of that kind and name
}

// Patched is the node's config after the patches.
type Patched struct {
	Config []byte // what is sent: holds the cluster's PKI, never print it
	// Changed: it differs from the node's config (comments, key order and
	// empty values aside).
	Changed bool
	// Appends are the lists the patch named that already existed and
	// grew by appending: probably not what was meant.
	Appends []ListAppend
	// Diff is the structural diff, redacted as the node's dry-run diffs
	// are (only allow-listed public fields show their values).
	Diff string
}

// ListAppend is one existing list the patch grew by appending.
type ListAppend struct {
	Kind   string // document kind; "v1alpha1" for the main machine config
	Name   string // document name ("" for unnamed kinds)
	Path   string // key path in the document, e.g. "environment", "machine.certSANs"
	Before int    // items before the patch
	After  int    // items after
	// Replace is the patch that replaces the list instead (a document
	// deleting it, then the list), with the values elided; for a named
	// document also the --replace-document form.
	Replace string
}

// Document names the document as messages do: "ExtensionServiceConfig newt".
func (a ListAppend) Document() string { return docLabel(a.Kind, a.Name) }

// docLabel names a document in output, its kind and name shown as the
// dry-run diff shows them (public shapes only).
func docLabel(kind, name string) string {
	if kind != v1alpha1Kind && !showKind.shows(kind) {
		kind = redacted
	}
	if name == "" {
		return kind
	}
	if !showName.shows(name) {
		name = redacted
	}
	return kind + " " + name
}

// patchDoc is one YAML document of a config or patch.
type patchDoc struct {
	chunk            yamldocs.Chunk
	kind, apiVersion string
	name             string
	root             *yaml.Node // the mapping (nil: not a mapping)
	deleteDoc        bool       // a whole-document `$patch: delete`
}

func (d patchDoc) id() string { return d.kind + "/" + d.name }

// splitDocs reads data's documents (null documents skipped).
func splitDocs(data []byte) ([]patchDoc, error) {
	var out []patchDoc
	for _, c := range yamldocs.Split(data) {
		var n yaml.Node
		if err := yaml.Unmarshal(data[c.Start:c.End], &n); err != nil {
			return nil, fmt.Errorf("document at line %d is not valid YAML", c.FirstLine)
		}
		if len(n.Content) == 0 || n.Content[0].Tag == "!!null" {
			continue
		}
		d := patchDoc{chunk: c, root: n.Content[0]}
		if d.root.Kind == yaml.MappingNode {
			d.kind, d.apiVersion, d.name = scalarAt(d.root, "kind"), scalarAt(d.root, "apiVersion"), scalarAt(d.root, "name")
			d.deleteDoc = scalarAt(d.root, "$patch") == "delete"
		}
		if d.kind == "" {
			d.kind = v1alpha1Kind
		}
		out = append(out, d)
	}
	return out, nil
}

// PatchConfig applies the patches (each a strategic merge patch or a JSON
// patch, as talosctl's --patch takes them) and the replacements, in that
// order, to current, a node's config; it flags the lists that grew by
// appending and makes the redacted diff. Its errors never quote the
// config or the patch.
func PatchConfig(current []byte, patches [][]byte, replace []Replacement) (*Patched, error) {
	for _, r := range replace {
		p, err := replacementPatch(r)
		if err != nil {
			return nil, err
		}
		patches = append(patches, p)
	}
	out, appends, err := patchConfig(current, patches)
	if err != nil {
		return nil, err
	}
	res := &Patched{Config: out, Appends: appends}
	oldDocs, err := splitDocs(current)
	if err != nil {
		return nil, &ConfigError{Reason: "the node's config: " + err.Error()}
	}
	newDocs, err := splitDocs(out)
	if err != nil {
		return nil, fmt.Errorf("%w: the patched config is not YAML", ErrPatch)
	}
	res.Diff, res.Changed = structuralDiff(oldDocs, newDocs)
	return res, nil
}

// replacementPatch is r as one patch: the document deleted, then the new one.
func replacementPatch(r Replacement) ([]byte, error) {
	if r.Kind == "" || r.Kind == v1alpha1Kind {
		return nil, &ConfigError{Reason: "the v1alpha1 document cannot be replaced whole (it has no kind to match: --replace-document takes a document such as ExtensionServiceConfig/newt); patch it with --patch instead"}
	}
	docs, err := splitDocs(r.Document)
	if err != nil {
		return nil, &ConfigError{Reason: "replacement " + docLabel(r.Kind, r.Name) + ": " + err.Error()}
	}
	if len(docs) != 1 || docs[0].kind != r.Kind || docs[0].name != r.Name || docs[0].deleteDoc {
		return nil, &ConfigError{Reason: fmt.Sprintf("the replacement for %s must hold exactly that one document (kind: %s, name: %s)",
			safeDoc(r.Kind, r.Name), safeName(r.Kind), safeName(r.Name))}
	}
	api := docs[0].apiVersion
	if api == "" {
		api = "v1alpha1"
	}
	del := "apiVersion: " + api + "\nkind: " + r.Kind + "\n"
	if r.Name != "" {
		del += "name: " + r.Name + "\n"
	}
	del += "$patch: delete\n---\n"
	return append([]byte(del), r.Document...), nil
}

func safeDoc(kind, name string) string {
	if name == "" {
		return safeName(kind)
	}
	return safeName(kind) + " " + safeName(name)
}

// patchConfig is talosctl's patchFn over the documents machinery v1.13
// decodes, with the others kept, deleted or added as the patches say.
func patchConfig(current []byte, patches [][]byte) ([]byte, []ListAppend, error) {
	// The patcher's words may quote a value of the config or the patches.
	echo := newConfigEcho(append(append([]byte{}, current...), bytes.Join(patches, []byte("\n---\n"))...))
	failed := func(i int, err error) error {
		where := ""
		if i > 0 {
			where = fmt.Sprintf("patch %d: ", i)
		}
		// The loader quotes the unknown part of a patch as YAML, values and
		// all: a short value (a password, "{a: 1}") would pass the scrub.
		// Only the key paths are said (unknownKeys, of the YAML as the
		// loader wrote it), never a value.
		if keys, ok := unknownKeys(err.Error()); ok {
			return fmt.Errorf("%w: %sunknown field(s) %s: a typo, or a field newer than Talos machinery %s (values not shown)", ErrPatch, where, keys, MachineryVersion)
		}
		return fmt.Errorf("%w: %s%s", ErrPatch, where, echo.scrub(sanitize(err.Error())))
	}
	res, err := talos114.Load(current)
	if err != nil {
		return nil, nil, &ConfigError{Reason: "the node's config does not load: " + sanitize(err.Error())}
	}
	// Documents v1.13 cannot decode, by id, in file order.
	var (
		opaque    []patchDoc
		known     [][]byte
		opaqueIdx = map[string]int{}
	)
	for _, d := range res.Docs {
		raw := current[d.Chunk.Start:d.Chunk.End]
		if d.Unchecked == "" {
			known = append(known, raw)
			continue
		}
		pd := patchDoc{chunk: d.Chunk, kind: d.Kind, apiVersion: d.APIVersion, name: d.Name, root: d.Root}
		opaqueIdx[pd.id()] = len(opaque)
		opaque = append(opaque, pd)
	}
	raw := map[string][]byte{} // opaque documents' bytes, by id (nil: deleted)
	for _, d := range opaque {
		raw[d.id()] = bytes.TrimSpace(current[d.chunk.Start:d.chunk.End])
	}
	order := make([]string, 0, len(opaque))
	for _, d := range opaque {
		order = append(order, d.id())
	}

	var loaded []configpatcher.Patch
	for i, p := range patches {
		docs, err := splitDocs(p)
		if err != nil || len(docs) == 0 || docs[0].root.Kind != yaml.MappingNode {
			// Not YAML documents of a strategic merge patch: a JSON patch (or nothing).
			lp, err := configpatcher.LoadPatch(p)
			if err != nil {
				return nil, nil, failed(i+1, err)
			}
			if _, isJSON := lp.(jsonpatch.Patch); isJSON && len(res.Docs) > 1 {
				return nil, nil, fmt.Errorf("%w: patch %d: JSON6902 patches are not supported for multi-document machine configuration (configpatcher/json6902.go): use a strategic merge patch", ErrPatch, i+1)
			}
			loaded = append(loaded, lp)
			continue
		}
		var handled []yamldocs.Chunk
		for _, d := range docs {
			_, isOpaque := raw[d.id()]
			if !isOpaque && !talos114.NewerThanV113(d.kind) {
				continue // machinery's
			}
			handled = append(handled, d.chunk)
			switch {
			case d.deleteDoc:
				if _, ok := raw[d.id()]; ok {
					raw[d.id()] = nil
				}
			case raw[d.id()] != nil:
				return nil, nil, fmt.Errorf("%w: patch %d merges into %s, a document it does not know (Talos 1.14): replace the whole document instead "+
					"(talosflash patch --replace-document %s/%s FILE, or a patch with `$patch: delete` for it followed by the whole new document)",
					ErrPatchUnsupported, i+1, safeDoc(d.kind, d.name), safeName(d.kind), safeName(d.name))
			default:
				if _, seen := raw[d.id()]; !seen {
					order = append(order, d.id())
				}
				raw[d.id()] = bytes.TrimSpace(p[d.chunk.Start:d.chunk.End])
			}
		}
		rest := yamldocs.Blank(p, handled)
		if len(handled) == len(docs) {
			continue
		}
		lp, err := configpatcher.LoadPatch(rest)
		if err != nil {
			return nil, nil, failed(i+1, err)
		}
		loaded = append(loaded, lp)
	}

	var out bytes.Buffer
	var appends []ListAppend
	if len(loaded) > 0 {
		b, a, err := applyPatches(yamldocs.Blank(current, chunksOf(opaque)), loaded)
		if err != nil {
			return nil, nil, failed(0, err)
		}
		out.Write(bytes.TrimSpace(b))
		appends = a
	} else {
		for i, k := range known {
			if i > 0 {
				out.WriteString("\n---\n")
			}
			out.Write(bytes.TrimSpace(k))
		}
	}
	for _, id := range order {
		if raw[id] == nil {
			continue
		}
		if out.Len() > 0 {
			out.WriteString("\n---\n")
		}
		out.Write(raw[id])
	}
	out.WriteString("\n")
	return out.Bytes(), appends, nil
}

// applyPatches is configpatcher.Apply as talosctl 1.14 runs it, one
// strategic merge document at a time (StrategicMerge goes through a
// patch's documents in order, so this is the same merge): a delete of a
// document the config lacks (at that document) is skipped
// (configpatcher/strategic.go, siderolabs/talos c3052e845 "a delete
// selector for a non-existent document is silently skipped"), where
// machinery v1.13 appends the selector, which its encoder then panics on.
// Each document's merge is compared with the config as it stood just
// before it: the lists it grew by appending (listAppends). The patcher is
// third-party code fed the user's patches: a panic of it is the patch's
// error, never a crash.
func applyPatches(current []byte, patches []configpatcher.Patch) (out []byte, appends []ListAppend, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, appends, err = nil, nil, errors.New("the config patcher could not process this patch")
		}
	}()
	in := configpatcher.WithBytes(current)
	for _, p := range patches {
		sm, ok := p.(configpatcher.StrategicMergePatch)
		if !ok {
			if in, err = configpatcher.Apply(in, []configpatcher.Patch{p}); err != nil {
				return nil, nil, err
			}
			continue
		}
		for _, d := range sm.Documents() {
			cfg, err := in.Config()
			if err != nil {
				return nil, nil, err
			}
			before := map[string]config.Document{}
			for _, doc := range cfg.Documents() {
				before[machineryDocID(doc)] = doc
			}
			_, del := d.(configloader.Selector)
			if del && before[machineryDocID(d)] == nil {
				continue
			}
			one, err := container.New(d)
			if err != nil {
				return nil, nil, err
			}
			if in, err = configpatcher.Apply(in, []configpatcher.Patch{configpatcher.NewStrategicMergePatch(one)}); err != nil {
				return nil, nil, err
			}
			if del || before[machineryDocID(d)] == nil {
				continue // a delete, or a new document: no list grew
			}
			after, err := in.Config()
			if err != nil {
				return nil, nil, err
			}
			for _, doc := range after.Documents() {
				if machineryDocID(doc) == machineryDocID(d) {
					a, err := listAppends(before[machineryDocID(d)], doc)
					if err != nil {
						return nil, nil, err
					}
					appends = append(appends, a...)
				}
			}
		}
	}
	out, err = in.Bytes()
	return out, appends, err
}

// machineryDocID is how the strategic merge matches documents: apiVersion,
// kind and name (configpatcher/strategic.go documentID).
func machineryDocID(d config.Document) string {
	id := d.APIVersion() + "/" + d.Kind()
	if named, ok := d.(config.NamedDocument); ok {
		id += "/" + named.Name()
	}
	return id
}

func chunksOf(docs []patchDoc) []yamldocs.Chunk {
	out := make([]yamldocs.Chunk, len(docs))
	for i, d := range docs {
		out[i] = d.chunk
	}
	return out
}

// listAppends are the lists of doc (a document before a merge) that
// after (the same document after it) holds grown by appending: non-empty
// before, longer after, the old items first. Lists are followed through
// mappings and, for lists merged by key (an interface's addresses), into
// the items both share at the same place.
func listAppends(doc, after config.Document) ([]ListAppend, error) {
	b, err := docNode(doc)
	if err != nil {
		return nil, err
	}
	a, err := docNode(after)
	if err != nil {
		return nil, err
	}
	kind, api, name := doc.Kind(), doc.APIVersion(), ""
	if named, ok := doc.(config.NamedDocument); ok {
		name = named.Name()
	}
	if api == "" {
		kind = v1alpha1Kind // the main machine config
	}
	var out []ListAppend
	growth(b, a, nil, func(path []string, old, cur *yaml.Node) {
		out = append(out, ListAppend{Kind: kind, Name: name, Path: pathString(path), Before: len(old.Content), After: len(cur.Content),
			Replace: replaceForm(kind, api, name, path, b, len(old.Content), len(cur.Content)-len(old.Content))})
	})
	return out, nil
}

// docNode is doc as the patched config encodes it, a YAML mapping.
func docNode(doc config.Document) (*yaml.Node, error) {
	b, err := encoder.NewEncoder(doc, encoder.WithComments(encoder.CommentsDisabled)).Encode()
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	if len(n.Content) == 0 {
		return nil, errors.New("empty document")
	}
	return n.Content[0], nil
}

// growth calls f for every sequence of a that is b's there grown by
// appending; path holds keys and "[i]" for list items.
func growth(b, a *yaml.Node, path []string, f func(path []string, old, cur *yaml.Node)) {
	switch {
	case b == nil || a == nil || b.Kind != a.Kind:
	case a.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(a.Content); i += 2 {
			k := a.Content[i].Value
			if old := talos114.Node(b, k); old != nil {
				growth(old, a.Content[i+1], append(append([]string{}, path...), k), f)
			}
		}
	case a.Kind == yaml.SequenceNode:
		shared := min(len(b.Content), len(a.Content))
		if len(b.Content) > 0 && len(a.Content) > len(b.Content) && sameItems(b.Content, a.Content[:shared]) {
			f(path, b, a)
			return
		}
		for i := range shared {
			growth(b.Content[i], a.Content[i], append(append([]string{}, path...), fmt.Sprintf("[%d]", i)), f)
		}
	}
}

// sameItems: the two lists of nodes encode alike (comments aside).
func sameItems(x, y []*yaml.Node) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if normalDoc(x[i]) != normalDoc(y[i]) {
			return false
		}
	}
	return true
}

// pathString is "machine.certSANs", "machine.network.interfaces[0].addresses".
func pathString(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteString(".")
		}
		b.WriteString(p)
	}
	return b.String()
}

// replaceForm is what replaces the list at path of the document root
// instead of appending to it (it held n items; added: how many the patch
// appended),
// values elided (the user fills in the list they meant). In the main
// v1alpha1 document: one patch file deleting the list, then setting it
// (configloader's delete selectors; the documents apply in order); a list
// inside a list's item cannot be deleted alone (configloader refuses a
// delete under a list), so its item is: deleted by its first key, then
// given whole. In a named document that file is refused (the delete
// leaves apiVersion, kind and name: a duplicate document), so: the whole
// document, deleted then given again, which --replace-document does.
func replaceForm(kind, apiVersion, name string, path []string, root *yaml.Node, n, added int) string {
	if kind != v1alpha1Kind {
		ref := kind
		if name != "" {
			ref += "/" + name
		}
		head := "apiVersion: " + or(apiVersion, "v1alpha1") + "\nkind: " + kind + "\n"
		if name != "" {
			head += "name: " + name + "\n"
		}
		return "replace the whole document instead: talosflash patch --replace-document " + ref + " FILE (FILE: the whole new document, " +
			pathString(path) + " as it should be), or in one patch file:\n" + head + "$patch: delete\n---\n" + head + "... (the whole new document)\n"
	}
	nest := func(keys []string, last string) string {
		var b strings.Builder
		for i, k := range keys {
			b.WriteString(strings.Repeat("    ", i) + k + ":")
			if i < len(keys)-1 {
				b.WriteString("\n")
			}
		}
		b.WriteString(last)
		return b.String()
	}
	if at := slices.IndexFunc(path, func(p string) bool { return strings.HasPrefix(p, "[") }); at >= 0 {
		keys := path[:at]
		indent := strings.Repeat("    ", len(keys))
		key := "the item's first key"
		if item := nodeAt(root, path[:at+1]); item != nil && item.Kind == yaml.MappingNode && len(item.Content) > 0 {
			key = item.Content[0].Value
		}
		return "replace the whole item instead of appending to its " + pathString(path[at+1:]) + ", in one patch file:\n" +
			nest(keys, "\n"+indent+"- "+key+": ...\n"+indent+"  $patch: delete") + "\n---\n" +
			nest(keys, "\n"+indent+"- "+key+": ...\n"+indent+"  ... (the whole item, "+pathString(path[at+1:])+" as it should be)") + "\n"
	}
	indent := strings.Repeat("    ", len(path))
	items := ""
	for range n + added {
		items += "\n" + indent + "- ..."
	}
	return "replace the list instead of appending to it, in one patch file:\n" +
		nest(path, "\n"+indent+"$patch: delete") + "\n---\n" + nest(path, items) + "\n"
}

// nodeAt follows path (keys, and "[i]" for list items) from n.
func nodeAt(n *yaml.Node, path []string) *yaml.Node {
	for _, p := range path {
		if n == nil {
			return nil
		}
		if i, ok := strings.CutPrefix(p, "["); ok {
			k, err := strconv.Atoi(strings.TrimSuffix(i, "]"))
			if err != nil || n.Kind != yaml.SequenceNode || k >= len(n.Content) {
				return nil
			}
			n = n.Content[k]
			continue
		}
		n = talos114.Node(n, p)
	}
	return n
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// structuralDiff compares the documents by id, each normalized (comments,
// key order of the root and empty values aside), and renders the changed
// ones as a unified diff redacted by structure. changed is false when
// nothing differs.
func structuralDiff(oldDocs, newDocs []patchDoc) (diff string, changed bool) {
	oldText := map[string]string{}
	for _, d := range oldDocs {
		oldText[d.id()] = normalDoc(d.root)
	}
	var b strings.Builder
	seen := map[string]bool{}
	emit := func(id, label, a, z string) {
		if a == z {
			return
		}
		changed = true
		b.WriteString(redactedDocDiff(label, a, z))
	}
	for _, d := range newDocs {
		seen[d.id()] = true
		emit(d.id(), docLabel(d.kind, d.name), oldText[d.id()], normalDoc(d.root))
	}
	for _, d := range oldDocs {
		if !seen[d.id()] {
			emit(d.id(), docLabel(d.kind, d.name), oldText[d.id()], "")
		}
	}
	if !changed {
		return "No changes.", false
	}
	return strings.TrimRight(b.String(), "\n"), true
}

// normalDoc renders a document canonically: no comments, the root's
// apiVersion, kind and name first, keys with empty values dropped (the
// encoder writes some, e.g. key: ""; decoded, they are the zero value).
func normalDoc(root *yaml.Node) string {
	if root == nil {
		return ""
	}
	n := clean(root)
	if n == nil {
		return ""
	}
	if n.Kind == yaml.MappingNode {
		var head, rest []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch n.Content[i].Value {
			case "apiVersion", "kind", "name":
				head = append(head, n.Content[i], n.Content[i+1])
			default:
				rest = append(rest, n.Content[i], n.Content[i+1])
			}
		}
		n.Content = append(head, rest...)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(4)
	if err := enc.Encode(n); err != nil {
		return ""
	}
	_ = enc.Close()
	return buf.String()
}

// clean copies n without comments and without empty values in mappings.
func clean(n *yaml.Node) *yaml.Node {
	c := *n
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Style != 0 && !needsQuotes(n.Value) {
		c.Style = 0 // quoting is presentation
	}
	switch n.Kind {
	case yaml.MappingNode:
		c.Content = nil
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := clean(n.Content[i+1])
			if v == nil {
				continue
			}
			k := clean(n.Content[i])
			if k == nil { // a null or empty key stays a key
				kc := *n.Content[i]
				kc.HeadComment, kc.LineComment, kc.FootComment = "", "", ""
				k = &kc
			}
			c.Content = append(c.Content, k, v)
		}
		if len(c.Content) == 0 {
			return nil
		}
	case yaml.SequenceNode:
		c.Content = nil
		for _, item := range n.Content {
			if v := clean(item); v != nil {
				c.Content = append(c.Content, v)
			}
		}
		if len(c.Content) == 0 {
			return nil
		}
	case yaml.ScalarNode:
		if n.Tag == "!!null" || n.Tag == "!!str" && n.Value == "" {
			return nil
		}
	}
	return &c
}

// needsQuotes: a plain scalar would read as something else than this string.
func needsQuotes(v string) bool {
	var probe any
	if err := yaml.Unmarshal([]byte(v), &probe); err != nil {
		return true
	}
	s, ok := probe.(string)
	return !ok || s != v || strings.ContainsAny(v, "\n#:{}[],&*!|>'\"%@`")
}

// redactedDocDiff is one document's unified diff (3 lines of context)
// whose lines are rewritten by the dry-run diff's structural redaction:
// each side is read from its first line, so every shown line knows its
// key path.
func redactedDocDiff(label, a, z string) string {
	al, zl := splitLines(a), splitLines(z)
	render := func(lines []string) ([]string, []lineKind) {
		w := newYAMLWalker(true)
		out, kinds := make([]string, len(lines)), make([]lineKind, len(lines))
		for i, l := range lines {
			out[i], kinds[i] = w.line(l)
		}
		return out, kinds
	}
	ar, ak := render(al)
	zr, zk := render(zl)
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", printable(label, maxName*2), printable(label, maxName*2))
	for _, group := range difflib.NewMatcher(al, zl).GetGroupedOpCodes(3) {
		first, end := group[0], group[len(group)-1]
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", first.I1+1, end.I2-first.I1, first.J1+1, end.J2-first.J1)
		last := ""
		put := func(marker, text string, kind lineKind) {
			switch {
			case kind == lineSkip:
				return
			case kind == lineContent && last == marker:
				return
			case kind == lineContent:
				last = marker
			default:
				last = ""
			}
			b.WriteString(printable(marker+text, maxDiffLine) + "\n")
		}
		for _, op := range group {
			if op.Tag == 'e' {
				for j := op.J1; j < op.J2; j++ {
					put(" ", zr[j], zk[j])
				}
				continue
			}
			for i := op.I1; i < op.I2; i++ {
				put("-", ar[i], ak[i])
			}
			for j := op.J1; j < op.J2; j++ {
				put("+", zr[j], zk[j])
			}
		}
	}
	return b.String()
}

func splitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
