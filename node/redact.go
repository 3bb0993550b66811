package node

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/internal/editdistance"
)

// A dry run's config diff, and any node reply that echoes the config, is
// redacted by its structure: every value is replaced unless its key path is
// on publicFields (or it is a bool or number where the schema says so), and
// a key that is not a schema field at its place (a map key, a misplaced
// key) is replaced too. What a value looks like does not matter.

// fieldRule is how a public field's value shows.
type fieldRule int

const (
	showWord    fieldRule = iota + 1 // a lower-case identifier: a type, a version, an operation, a name
	showKind                         // a document kind (CamelCase)
	showImage                        // a container image reference
	showHost                         // a host name or an IP address
	showAddr                         // an IP address or a CIDR
	showPath                         // an absolute path
	showURL                          // a URL without credentials, query or fragment
	showEnvName                      // NAME=value: the name only
	showName                         // a document's name: a lower-case word, or Talos' upper-case volume names (EPHEMERAL)
)

// publicFields is THE allow-list: "<kind>:<path>" ("*" for every kind,
// "v1alpha1" for the main machine config), where a path is the keys from the
// document root joined by ".", "[]" after a list and "*" for a map's value.
// Only fields that name an image, a version, a host, an interface, an
// address or network, or a document are here.
var publicFields = map[string]fieldRule{
	"*:apiVersion": showWord,
	"*:kind":       showKind,
	"*:name":       showName,

	"v1alpha1:version":                                       showWord,
	"v1alpha1:machine.type":                                  showWord,
	"v1alpha1:machine.install.image":                         showImage,
	"v1alpha1:machine.install.disk":                          showPath,
	"v1alpha1:machine.kubelet.image":                         showImage,
	"v1alpha1:machine.kubelet.nodeIP.validSubnets[]":         showAddr,
	"v1alpha1:machine.certSANs[]":                            showHost,
	"v1alpha1:machine.network.hostname":                      showHost,
	"v1alpha1:machine.network.nameservers[]":                 showAddr,
	"v1alpha1:machine.network.interfaces[].interface":        showWord,
	"v1alpha1:machine.network.interfaces[].addresses[]":      showAddr,
	"v1alpha1:machine.network.interfaces[].routes[].network": showAddr,
	"v1alpha1:machine.network.interfaces[].routes[].gateway": showAddr,
	"v1alpha1:machine.network.interfaces[].vip.ip":           showAddr,
	"v1alpha1:machine.time.servers[]":                        showHost,
	"v1alpha1:machine.files[].path":                          showPath,
	"v1alpha1:machine.files[].op":                            showWord,
	"v1alpha1:cluster.clusterName":                           showWord,
	"v1alpha1:cluster.controlPlane.endpoint":                 showURL,
	"v1alpha1:cluster.network.dnsDomain":                     showHost,
	"v1alpha1:cluster.network.podSubnets[]":                  showAddr,
	"v1alpha1:cluster.network.serviceSubnets[]":              showAddr,
	"v1alpha1:cluster.network.cni.name":                      showWord,
	"v1alpha1:cluster.apiServer.image":                       showImage,
	"v1alpha1:cluster.apiServer.certSANs[]":                  showHost,
	"v1alpha1:cluster.controllerManager.image":               showImage,
	"v1alpha1:cluster.scheduler.image":                       showImage,
	"v1alpha1:cluster.proxy.image":                           showImage,
	"v1alpha1:cluster.etcd.image":                            showImage,
	"v1alpha1:cluster.coreDNS.image":                         showImage,

	"ExtensionServiceConfig:configFiles[].mountPath": showPath,
	"ExtensionServiceConfig:environment[]":           showEnvName,
	"HostnameConfig:hostname":                        showHost,
	"LinkConfig:addresses[].address":                 showAddr,
	"LinkConfig:routes[].destination":                showAddr,
	"LinkConfig:routes[].gateway":                    showAddr,

	// Talos 1.14 kinds (talos114.Schema): the same kinds of value as the
	// v1alpha1 fields above, in their new documents. Not here: CEL
	// selectors (provisioning.diskSelector.match and the like), free
	// expressions that may name a disk's serial or WWID.
	"UnattendedInstallConfig:installer.image": showImage,
	"HostnameConfig:auto":                     showWord, // "stable", "off"
	"KubeClusterConfig:clusterName":           showWord,
	"KubeClusterConfig:endpoint":              showURL,
	"KubeNetworkConfig:dnsDomain":             showHost,
	"KubeNetworkConfig:podSubnets[]":          showAddr,
	"KubeNetworkConfig:serviceSubnets[]":      showAddr,
	"KubeNodeConfig:nodeIP.validSubnets[]":    showAddr,
	"KubeletConfig:image":                     showImage,
	"KubeAPIServerConfig:image":               showImage,
	"KubeAPIServerConfig:certExtraSANs[]":     showHost,
	"KubeControllerManagerConfig:image":       showImage,
	"KubeSchedulerConfig:image":               showImage,
	"KubeProxyConfig:image":                   showImage,
	"KubeCoreDNSConfig:image":                 showImage,
}

// publicPrefixes are the paths leading to a public field: their keys show
// even where the machinery's schema does not know the document (a newer kind).
var publicPrefixes = func() map[string]bool {
	out := map[string]bool{}
	for p := range publicFields {
		kind, path, _ := strings.Cut(p, ":")
		for {
			out[kind+":"+path] = true
			i := strings.LastIndexAny(path, ".[")
			if i < 0 {
				break
			}
			path = path[:i]
		}
	}
	return out
}()

// The shapes a public field's value must have to show.
var (
	wordValue  = regexp.MustCompile(`^[a-z][a-z0-9._\-]{0,62}$`)
	upperName  = regexp.MustCompile(`^[A-Z][A-Z_]{0,62}$`) // letters only: no digits, no mixed case, as tokens have
	kindValue  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)
	imageValue = regexp.MustCompile(`^[a-z0-9][a-z0-9.\-]*(?::[0-9]{1,5})?(?:/[a-z0-9][a-z0-9._\-]*)+(?::[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?(?:@sha256:[0-9a-f]{64})?$`)
	hostValue  = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}\.?)*$`)
	pathValue  = regexp.MustCompile(`^/[A-Za-z0-9._\-/]{0,254}$`)
	urlValue   = regexp.MustCompile(`^[a-z][a-z0-9+.\-]*://(?:[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?(?:/[A-Za-z0-9._\-/]*)?$`)
)

// shows reports whether v has the shape rule r shows.
func (r fieldRule) shows(v string) bool {
	switch r {
	case showWord:
		return wordValue.MatchString(v)
	case showName:
		return wordValue.MatchString(v) || upperName.MatchString(v)
	case showKind:
		return kindValue.MatchString(v)
	case showImage:
		return imageValue.MatchString(v)
	case showHost:
		return len(v) <= 253 && hostValue.MatchString(v) || isAddr(v)
	case showAddr:
		return isAddr(v)
	case showPath:
		return pathValue.MatchString(v)
	case showURL:
		return urlValue.MatchString(v)
	}
	return false
}

func isAddr(v string) bool {
	if _, err := netip.ParseAddr(v); err == nil {
		return true
	}
	_, err := netip.ParsePrefix(v)
	return err == nil
}

// rootKeysV1alpha1 are the top-level keys of the main machine config.
var rootKeysV1alpha1 = map[string]bool{"version": true, "debug": true, "persist": true, "machine": true, "cluster": true}

// fieldPublic reports whether the value at path of a kind document shows,
// and how.
func fieldPublic(kind, path string) fieldRule {
	if r := publicFields[kind+":"+path]; r != 0 {
		return r
	}
	return publicFields["*:"+path]
}

// publicValue returns v as it may show at path (a kind document; node is
// its schema, nil if unknown) and true, or false: redact it.
func publicValue(kind, path string, node *schemaNode, v string) (string, bool) {
	switch node.kindOf() {
	case schemaBool:
		if v == "true" || v == "false" {
			return v, true
		}
	case schemaNumber:
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			return v, true
		}
		if _, err := time.ParseDuration(v); err == nil {
			return v, true // time.Duration fields encode as "5m0s"
		}
	}
	switch r := fieldPublic(kind, path); {
	case r == showEnvName:
		if m := envItem.FindStringSubmatch(unquote(v)); m != nil {
			return m[1] + redacted, true
		}
	case r != 0 && r.shows(unquote(v)):
		return v, true
	}
	return "", false
}

func (n *schemaNode) kindOf() schemaKind {
	if n == nil {
		return schemaOpaque
	}
	return n.kind
}

// unquote strips one pair of YAML quotes from a scalar without escapes.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') &&
		!strings.ContainsAny(v[1:len(v)-1], `"'\`) {
		return v[1 : len(v)-1]
	}
	return v
}

// yamlFrame is one open collection of the YAML being read.
type yamlFrame struct {
	col    int         // column of its keys or dashes
	node   *schemaNode // its schema (nil: unknown)
	path   string      // key path from the document root
	known  bool        // the path is real (every key on it is a schema field or leads to a public one)
	mapKey bool        // its key is a map's key: user data, never shown
}

// yamlWalker follows one side (old or new) of a diff of Talos-encoded YAML
// documents, line by line, and rewrites each line to its redacted form.
type yamlWalker struct {
	kind      string // the document's kind, "" until known
	started   bool   // the document's first line was seen (its kind can be trusted)
	stack     []yamlFrame
	pending   *yamlFrame // opened by "key:" on the previous line; its column is not known yet
	pendCol   int        // column of that key
	blockCol  int        // a block scalar runs on lines indented past it (-1: none)
	contCol   int        // a flow value may continue on lines indented past it (-1: none)
	flowDepth int        // open brackets of a flow collection
}

func newYAMLWalker(started bool) *yamlWalker {
	w := &yamlWalker{}
	w.reset(started)
	return w
}

// reset starts a document: started says its first line is the next one.
func (w *yamlWalker) reset(started bool) {
	*w = yamlWalker{started: started, blockCol: -1, contCol: -1,
		stack: []yamlFrame{{col: 0, known: started}}}
}

// lineKind tells how a rewritten line may be folded.
type lineKind int

const (
	lineStructure lineKind = iota
	lineContent            // redacted content of a multi-line value: runs show as one line
	lineSkip               // drop it (a blank line inside a block scalar)
)

// line rewrites one line of YAML (without its diff marker).
func (w *yamlWalker) line(t string) (string, lineKind) {
	if strings.TrimRight(t, " ") == "---" {
		w.reset(true)
		return "---", lineStructure
	}
	indent := len(t) - len(strings.TrimLeft(t, " "))
	rest := strings.TrimRight(t[indent:], " ")
	pad := strings.Repeat(" ", indent)
	if w.blockCol >= 0 {
		if rest == "" {
			return "", lineSkip
		}
		if indent > w.blockCol {
			return pad + redacted, lineContent
		}
		w.blockCol = -1
	}
	if w.contCol >= 0 {
		if rest != "" && (indent > w.contCol || w.flowDepth > 0) {
			w.flowDepth = max(w.flowDepth+bracketBalance(rest), 0)
			return pad + redacted, lineContent
		}
		w.contCol, w.flowDepth = -1, 0
	}
	if rest == "" {
		return "", lineStructure
	}
	if strings.ContainsAny(rest[:1], "#\t?&*!%@`") || strings.Contains(t[:indent], "\t") {
		return pad + redacted, lineContent // a comment, a complex key, an anchor...: not what the encoder writes
	}

	if p := w.pending; p != nil {
		w.pending = nil
		if indent > w.pendCol || indent == w.pendCol && isDash(rest) && p.node.kindOf() == schemaSeq {
			p.col = indent
			w.stack = append(w.stack, *p)
		}
	}
	for len(w.stack) > 1 && w.stack[len(w.stack)-1].col > indent {
		w.stack = w.stack[:len(w.stack)-1]
	}
	if top := w.stack[len(w.stack)-1]; top.col != indent {
		w.stack = append(w.stack, yamlFrame{col: indent}) // a place this diff does not show the way to
	}

	var b strings.Builder
	b.WriteString(pad)
	col, ownerCol := indent, indent // ownerCol: a scalar item's content runs past its dash
	for isDash(rest) {
		cur := w.stack[len(w.stack)-1]
		item := yamlFrame{path: cur.path + "[]", known: cur.known}
		if cur.node.kindOf() == schemaSeq {
			item.node = cur.node.elem
		}
		dashCol := col
		ownerCol = dashCol
		after := strings.TrimLeft(rest[1:], " ")
		col += len(rest) - len(after)
		rest = after
		if rest == "" { // "-" alone: the item follows on the next lines
			b.WriteString("-")
			w.pending, w.pendCol = &item, dashCol
			return b.String(), lineStructure
		}
		b.WriteString("-" + strings.Repeat(" ", col-dashCol-1))
		item.col = col
		w.stack = append(w.stack, item)
	}
	cur := w.stack[len(w.stack)-1]

	key, value, isKey := splitKey(rest)
	if !isKey { // a list item's scalar
		b.WriteString(w.value(cur, rest, ownerCol))
		return b.String(), lineStructure
	}
	child := w.child(cur, key, value)
	if child.known && !child.mapKey {
		b.WriteString(key)
	} else {
		b.WriteString(redacted)
	}
	b.WriteString(":")
	if value == "" {
		w.pending, w.pendCol = &child, col
		return b.String(), lineStructure
	}
	b.WriteString(" " + w.value(child, value, col))
	return b.String(), lineStructure
}

// child is the frame of key under cur (its column set when it opens).
func (w *yamlWalker) child(cur yamlFrame, key, value string) yamlFrame {
	path := key
	if cur.path != "" {
		path = cur.path + "." + key
	}
	if len(w.stack) == 1 && cur.known { // the document's root
		switch {
		case key == "kind" && w.kind == "":
			w.kind = unquote(value)
			w.stack[0].node = documentSchemas()[w.kind]
		case rootKeysV1alpha1[key] && w.kind == "":
			w.kind = v1alpha1Kind
			w.stack[0].node = documentSchemas()[w.kind]
		}
		cur = w.stack[0]
	}
	if !cur.known {
		return yamlFrame{path: path}
	}
	switch {
	case cur.node.kindOf() == schemaMap:
		// A map's keys are user data (header names, labels, arguments).
		return yamlFrame{path: cur.path + ".*", node: cur.node.elem, known: true, mapKey: true}
	case cur.node.field(key) != nil:
		return yamlFrame{path: path, node: cur.node.field(key), known: true}
	case len(w.stack) == 1 && (key == "apiVersion" || key == "kind"),
		publicPrefixes[w.kind+":"+path] || publicPrefixes["*:"+path]:
		return yamlFrame{path: path, known: true}
	}
	return yamlFrame{path: path}
}

// value rewrites the value at f, which starts at column col.
func (w *yamlWalker) value(f yamlFrame, v string, col int) string {
	switch {
	case blockIndicator.MatchString(v):
		w.blockCol = col
		return v
	case v == "{}" || v == "[]" || v == `""` || v == "''" || v == "~" || v == "null":
		return v
	}
	w.contCol = col // a plain or quoted scalar may continue on the next lines
	if v[0] == '{' || v[0] == '[' {
		w.flowDepth = max(bracketBalance(v), 0)
		return redacted
	}
	if f.known {
		if out, ok := publicValue(w.kind, f.path, f.node, v); ok {
			return out
		}
	}
	return redacted
}

// isDash reports whether a line's content starts a list item.
func isDash(rest string) bool {
	return rest == "-" || strings.HasPrefix(rest, "- ")
}

// splitKey splits "key: value" / "key:" (plain or quoted key).
func splitKey(rest string) (key, value string, ok bool) {
	if rest[0] == '"' || rest[0] == '\'' {
		end := strings.IndexByte(rest[1:], rest[0])
		if end < 0 {
			return "", "", false
		}
		after := rest[end+2:]
		if after != ":" && !strings.HasPrefix(after, ": ") {
			return "", "", false
		}
		return rest[:end+2], strings.TrimSpace(after[1:]), true
	}
	if strings.HasSuffix(rest, ":") && !strings.Contains(rest[:len(rest)-1], ": ") {
		return rest[:len(rest)-1], "", true
	}
	if i := strings.Index(rest, ": "); i > 0 {
		return rest[:i], strings.TrimSpace(rest[i+2:]), true
	}
	return "", "", false
}

// bracketBalance counts the flow brackets a line opens (negative: closes).
func bracketBalance(s string) int {
	n := 0
	for _, r := range s {
		switch r {
		case '{', '[':
			n++
		case '}', ']':
			n--
		}
	}
	return n
}

var (
	hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@`)
	fileHeader = regexp.MustCompile(`^(?:--- a|\+\+\+ b)$`)
)

// redactDiff rewrites a node's mode details: free text lines go through
// sanitize, and the unified diff of YAML documents that follows
// "Config diff:" (or starts with a diff header) is redacted by structure.
func redactDiff(msg string) string {
	const maxLines = 1000
	lines := strings.Split(msg, "\n")
	if len(lines) > maxLines {
		lines = append(lines[:maxLines], "…")
	}
	var (
		out      = make([]string, 0, len(lines))
		inDiff   bool
		old, new = newYAMLWalker(true), newYAMLWalker(true)
		lastRun  string // marker of the last folded content line
	)
	for _, l := range lines {
		switch {
		case l == "Config diff:":
			inDiff = true
			old.reset(true)
			new.reset(true)
			out, lastRun = append(out, l), ""
			continue
		case fileHeader.MatchString(l):
			inDiff = true
			out, lastRun = append(out, l), ""
			continue
		case strings.HasPrefix(l, "@@"):
			m := hunkHeader.FindStringSubmatch(l)
			if m == nil {
				out = append(out, redacted)
				continue
			}
			inDiff = true
			// A hunk that starts at the first line shows its document from the start.
			old.reset(m[1] == "0" || m[1] == "1")
			new.reset(m[2] == "0" || m[2] == "1")
			out, lastRun = append(out, m[0]), ""
			continue
		case l == `\ No newline at end of file`:
			out = append(out, l)
			continue
		}
		if l != "" && strings.ContainsAny(l[:1], "+-") {
			inDiff = true // a diff without its headers
		}
		if !inDiff || l == "" || !strings.ContainsAny(l[:1], " +-") {
			inDiff = inDiff && l == "" // "No changes." or the next message's text
			if l != "" {
				out = append(out, sanitize(l))
			} else {
				out = append(out, l)
			}
			lastRun = ""
			continue
		}
		marker, body := l[:1], l[1:]
		var text string
		var kind lineKind
		switch marker {
		case "-":
			text, kind = old.line(body)
		case "+":
			text, kind = new.line(body)
		default:
			old.line(body)
			text, kind = new.line(body)
		}
		switch {
		case kind == lineSkip:
			continue
		case kind == lineContent && lastRun == marker:
			continue
		case kind == lineContent:
			lastRun = marker
		default:
			lastRun = ""
		}
		out = append(out, printable(marker+text, maxDiffLine))
	}
	return strings.Join(out, "\n")
}

// configEcho finds, in a node's free-text reply (an error, a warning, a
// validation message), any part of a value or user key of the config that
// was sent, and replaces it: what the structure says is not public is never
// echoed back, whatever it looks like and however the message quotes it.
type configEcho struct {
	grams map[string]bool // every gramLen-byte piece of a non-public value longer than that
	short []string        // non-public values of minShort..gramLen bytes, matched as whole tokens
}

const (
	gramLen  = 8
	minShort = 4
)

// newConfigEcho collects the non-public values of data (a machine config).
// Pieces that also occur in a public value or key are left out: they show
// anyway. Where the YAML cannot be read, each line of it counts as a value.
func newConfigEcho(data []byte) *configEcho {
	e := &configEcho{grams: map[string]bool{}}
	var public []string
	shortSet := map[string]bool{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for { // every document of the (bounded) config: the node skips null ones, so no cap
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if !errors.Is(err, io.EOF) {
				// What this YAML library cannot read the node's may: every
				// line of the config counts as a value.
				for _, l := range strings.Split(string(data), "\n") {
					switch l = strings.TrimSpace(l); {
					case len(l) > gramLen:
						for i := 0; i+gramLen <= len(l); i++ {
							e.grams[l[i:i+gramLen]] = true
						}
					case len(l) >= minShort:
						shortSet[l] = true
					}
				}
			}
			break
		}
		root := &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		kind := scalarAt(root, "kind")
		if kind == "" {
			kind = v1alpha1Kind
		}
		walkConfig(root, kind, documentSchemas()[kind], "", true, func(s string, isPublic bool) {
			switch {
			case isPublic:
				public = append(public, s)
			case len(s) > gramLen:
				for i := 0; i+gramLen <= len(s); i++ {
					e.grams[s[i:i+gramLen]] = true
				}
			case len(s) >= minShort:
				shortSet[s] = true
			}
		})
	}
	for _, p := range public {
		for i := 0; i+gramLen <= len(p); i++ {
			delete(e.grams, p[i:i+gramLen])
		}
		delete(shortSet, p)
	}
	for s := range shortSet {
		e.short = append(e.short, s)
	}
	return e
}

// walkConfig reports every scalar and key of n: public (shown in a diff) or not.
func walkConfig(n *yaml.Node, kind string, schema *schemaNode, path string, known bool, visit func(string, bool)) {
	join := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch {
			case !known:
				visit(k.Value, false)
				walkConfig(v, kind, nil, join(k.Value), false, visit)
			case schema.kindOf() == schemaMap:
				visit(k.Value, false) // a map's keys are user data
				walkConfig(v, kind, schema.elem, path+".*", true, visit)
			case schema.field(k.Value) != nil:
				visit(k.Value, true)
				walkConfig(v, kind, schema.field(k.Value), join(k.Value), true, visit)
			case path == "" && (k.Value == "apiVersion" || k.Value == "kind"),
				publicPrefixes[kind+":"+join(k.Value)] || publicPrefixes["*:"+join(k.Value)]:
				visit(k.Value, true)
				walkConfig(v, kind, nil, join(k.Value), true, visit)
			default:
				// Not a schema key here: a typo of a field shows (it names no
				// secret), anything else is user data.
				visit(k.Value, schema.nearField(k.Value))
				walkConfig(v, kind, nil, join(k.Value), false, visit)
			}
		}
	case yaml.SequenceNode:
		var elem *schemaNode
		if schema.kindOf() == schemaSeq {
			elem = schema.elem
		}
		for _, item := range n.Content {
			walkConfig(item, kind, elem, path+"[]", known, visit)
		}
	case yaml.ScalarNode:
		if n.Value == "" {
			return
		}
		_, ok := publicValue(kind, path, schema, n.Value)
		if ok && fieldPublic(kind, path) == showEnvName {
			name, _, _ := strings.Cut(n.Value, "=")
			visit(name+"="+redacted, true) // as it shows
			ok = false                     // the value after "=" is not public
		}
		visit(n.Value, known && ok)
	}
}

// nearField reports whether key is a misspelling of a field of n (edit
// distance at most 2, both at least 4 long).
func (n *schemaNode) nearField(key string) bool {
	if n == nil || n.kind != schemaStruct || len(key) < 4 || len(key) > 64 {
		return false
	}
	for f := range n.fields {
		if len(f) >= 4 && editdistance.Levenshtein(strings.ToLower(key), strings.ToLower(f)) <= 2 {
			return true
		}
	}
	return false
}

// scrub replaces every run of msg that holds a piece of a non-public value.
func (e *configEcho) scrub(msg string) string {
	if e == nil || len(e.grams) == 0 && len(e.short) == 0 || msg == "" {
		return msg
	}
	mark := make([]bool, len(msg))
	for i := 0; i+gramLen <= len(msg); i++ {
		if e.grams[msg[i:i+gramLen]] {
			for j := i; j < i+gramLen; j++ {
				mark[j] = true
			}
		}
	}
	isWord := func(c byte) bool { return c == '_' || c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z' }
	for _, s := range e.short {
		for from := 0; ; {
			i := strings.Index(msg[from:], s)
			if i < 0 {
				break
			}
			i += from
			end := i + len(s)
			if (i == 0 || !isWord(msg[i-1]) || !isWord(s[0])) && (end == len(msg) || !isWord(msg[end]) || !isWord(s[len(s)-1])) {
				for j := i; j < end; j++ {
					mark[j] = true
				}
			}
			from = i + 1
		}
	}
	for i := 1; i < len(msg); i++ { // whole characters only
		if mark[i-1] && !mark[i] && !utf8.RuneStart(msg[i]) {
			mark[i] = true
		}
	}
	for i := len(msg) - 2; i >= 0; i-- {
		if mark[i+1] && !mark[i] && !utf8.RuneStart(msg[i+1]) {
			mark[i] = true
		}
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		if !mark[i] {
			b.WriteByte(msg[i])
			i++
			continue
		}
		for i < len(msg) && mark[i] {
			i++
		}
		b.WriteString(redacted)
	}
	return b.String()
}

// scrubError applies e to the node's words in err (a refusal's message, a
// network error's detail).
func (e *configEcho) scrubError(err error) error {
	var refused *RefusedError
	var netErr *NetworkError
	switch {
	case errors.As(err, &refused):
		refused.Message = e.scrub(refused.Message)
	case errors.As(err, &netErr):
		netErr.Detail = e.scrub(netErr.Detail)
	}
	return err
}
