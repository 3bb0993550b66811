package talos114

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/node/internal/yamldocs"
)

// Fields are key names v1.14.0-rc.1 added (at any depth) to a kind that
// machinery v1.13.9 already registers: v1.13 reports them as unknown keys.
type Fields struct {
	Source string
	Names  []string
}

// NewerFields: diff of the yaml tags of pkg/machinery/config/types between
// v1.13.9 and v1.14.0-rc.1, for the kinds both register.
var NewerFields = map[string]Fields{
	"ResolverConfig":       {"pkg/machinery/config/types/network/resolver.go", []string{"hostDNS", "protocol", "tlsServerName"}},
	"VolumeConfig":         {"pkg/machinery/config/types/block/volume_config.go, block/encryption.go", []string{"filesystem", "trim", "scrub", "disableAccessTime", "allowDiscards"}},
	"UserVolumeConfig":     {"pkg/machinery/config/types/block/user_volume_config.go, block/encryption.go", []string{"trim", "scrub", "xfs", "allowDiscards"}},
	"RawVolumeConfig":      {"pkg/machinery/config/types/block/encryption.go", []string{"allowDiscards"}},
	"SwapVolumeConfig":     {"pkg/machinery/config/types/block/encryption.go", []string{"allowDiscards"}},
	"ExistingVolumeConfig": {"pkg/machinery/config/types/block/existing_volume_config.go", []string{"trim", "scrub"}},
	"DHCPv4Config":         {"pkg/machinery/config/types/network/dhcp4.go", []string{"ignoreRoutes"}},
	"TimeSyncConfig":       {"pkg/machinery/config/types/network/time_sync.go", []string{"useNTS"}},
}

// Doc is one YAML document of the config.
type Doc struct {
	Index      int // 1-based
	Chunk      yamldocs.Chunk
	Kind       string // "v1alpha1" for the kindless machine config
	APIVersion string
	Name       string     // the document's name field, if any
	Root       *yaml.Node // the document's mapping (nil if not a mapping)
	// Unchecked says why machinery v1.13 did not check this document
	// ("" = it did): a kind newer than v1.13, or fields newer than it.
	Unchecked string
}

// Result is a config loaded as a v1.14 node loads it, as far as v1.13 can.
type Result struct {
	Docs []Doc
	// Provider holds the documents v1.13 could decode (nil if none could).
	Provider config.Provider
}

// Is114 reports whether the config has a document only v1.14 knows.
func (r *Result) Is114() bool {
	return slices.ContainsFunc(r.Docs, func(d Doc) bool { return NewerThanV113(d.Kind) })
}

// ByKind returns the documents of kind, in file order.
func (r *Result) ByKind(kind string) []Doc {
	var out []Doc
	for _, d := range r.Docs {
		if d.Kind == kind {
			out = append(out, d)
		}
	}
	return out
}

// MachineType is the v1alpha1 machine.type ("" without one).
func (r *Result) MachineType() string {
	for _, d := range r.ByKind("v1alpha1") {
		return Scalar(d.Root, "machine", "type")
	}
	return ""
}

// HasMachineInstall reports whether the v1alpha1 document has a
// machine.install key (even an empty one: v1.14 refuses it next to an
// UnattendedInstallConfig when it is set at all).
func (r *Result) HasMachineInstall() bool {
	for _, d := range r.ByKind("v1alpha1") {
		if Node(d.Root, "machine", "install") != nil {
			return true
		}
	}
	return false
}

var decodeErr = regexp.MustCompile(`error decoding document (\S*)/(\S*)/(\S*) \(line (\d+)\)`)

// Load loads data with machinery v1.13 as a v1.14 node would decode it:
// documents of kinds newer than v1.13 and documents whose only unknown keys
// are fields v1.14 added are left out of v1.13's decoding (blanked, line
// numbers kept) and marked Unchecked; anything else the loader refuses is
// its error, raw (a kind v1.14 does not register either, a typo).
func Load(data []byte) (*Result, error) {
	res := &Result{}
	for i, c := range yamldocs.Split(data) {
		var root yaml.Node
		if err := yaml.Unmarshal(data[c.Start:c.End], &root); err != nil || len(root.Content) == 0 {
			continue // empty or broken: the loader reports it
		}
		n := root.Content[0]
		d := Doc{Index: i + 1, Chunk: c, Root: n, Kind: Scalar(n, "kind"), APIVersion: Scalar(n, "apiVersion"), Name: Scalar(n, "name")}
		if d.Kind == "" {
			d.Kind = "v1alpha1"
		}
		if NewerThanV113(d.Kind) {
			d.Unchecked = fmt.Sprintf("kind %s is newer than machinery v1.13 (%s)", d.Kind, Kinds[d.Kind].Source)
		}
		res.Docs = append(res.Docs, d)
	}
	for range len(res.Docs) + 1 {
		blank := res.UncheckedChunks()
		provider, err := configloader.NewFromBytes(yamldocs.Blank(data, blank))
		if err == nil {
			res.Provider = provider
			return res, nil
		}
		if errors.Is(err, configloader.ErrNoConfig) && len(blank) > 0 {
			return res, nil // every document is newer than v1.13
		}
		i := res.newerFieldsDoc(err.Error())
		if i < 0 {
			return res, err
		}
		res.Docs[i].Unchecked = fmt.Sprintf("%s has fields newer than machinery v1.13 (%s)", res.Docs[i].Kind, NewerFields[res.Docs[i].Kind].Source)
	}
	return res, errors.New("the config loader could not process this file")
}

// UncheckedChunks are the documents Load left to the node (newer kinds,
// newer fields), found so far when Load failed.
func (r *Result) UncheckedChunks() []yamldocs.Chunk {
	var out []yamldocs.Chunk
	for _, d := range r.Docs {
		if d.Unchecked != "" {
			out = append(out, d.Chunk)
		}
	}
	return out
}

// newerFieldsDoc finds the document an "unknown keys" error is about and
// returns its index if every unknown key is a field v1.14 added; else -1.
func (r *Result) newerFieldsDoc(msg string) int {
	const unknown = "unknown keys found during decoding:"
	at := strings.Index(msg, unknown)
	m := decodeErr.FindStringSubmatch(msg)
	if at < 0 || m == nil {
		return -1
	}
	line, _ := strconv.Atoi(m[4])
	idx := -1
	for i, d := range r.Docs {
		if d.Unchecked == "" && (d.Chunk.Contains(line) || line == 1 && d.Kind == m[2] && d.Name == m[3]) {
			idx = i
			break
		}
	}
	if idx < 0 {
		return -1
	}
	fields, ok := NewerFields[r.Docs[idx].Kind]
	if !ok {
		return -1
	}
	var dump yaml.Node
	if yaml.Unmarshal([]byte(msg[at+len(unknown):]), &dump) != nil || len(dump.Content) == 0 {
		return -1
	}
	paths := KeyPaths(dump.Content[0], nil)
	if len(paths) == 0 {
		return -1
	}
	for _, p := range paths {
		if !slices.ContainsFunc(p, func(k string) bool { return slices.Contains(fields.Names, k) }) {
			return -1
		}
	}
	return idx
}

// KeyPaths lists the paths to every leaf of n (keys only, never values);
// list items are walked into.
func KeyPaths(n *yaml.Node, prefix []string) [][]string {
	switch n.Kind {
	case yaml.MappingNode:
		var out [][]string
		for j := 0; j+1 < len(n.Content); j += 2 {
			p := append(slices.Clone(prefix), n.Content[j].Value)
			sub := KeyPaths(n.Content[j+1], p)
			if len(sub) == 0 {
				sub = [][]string{p}
			}
			out = append(out, sub...)
		}
		return out
	case yaml.SequenceNode:
		var out [][]string
		for _, c := range n.Content {
			out = append(out, KeyPaths(c, prefix)...)
		}
		return out
	}
	return nil
}

// Node follows mapping keys from n.
func Node(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				next = n.Content[j+1]
			}
		}
		n = next
	}
	return n
}

// Scalar is the scalar at path under n ("" if none).
func Scalar(n *yaml.Node, path ...string) string {
	n = Node(n, path...)
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// mode is the metal runtime mode. v1.14 validates .machine.install only when
// it is present (v1alpha1_validation.go: "no longer required"); v1.13
// requires it whenever RequiresInstall is true, so it is true only then.
type mode struct{ install bool }

func (mode) String() string          { return "metal" }
func (m mode) RequiresInstall() bool { return m.install }
func (mode) InContainer() bool       { return false }

// ValidateV113 runs machinery v1.13's validation over the documents it
// decoded, adjusted where v1.14 changed the v1alpha1 rules:
//   - .machine.install is optional (see mode);
//   - the control plane endpoint may come from KubeClusterConfig: v1.14
//     generates no .cluster.controlPlane (v1alpha1_validation.go checks the
//     endpoint only when .cluster.controlPlane is set); v1.13 requires it and
//     stops checking .cluster there, so the validated copy gets the endpoint
//     of the KubeClusterConfig document (or a placeholder) instead.
//
// The errors are the top-level entries of the loader's multierror, each
// formatted as the node formats it ("v1alpha1.Config: ...", "Kind: ...").
func (r *Result) ValidateV113() (warnings, errs []string) {
	if r.Provider == nil {
		return nil, nil
	}
	p := r.Provider.Clone()
	if raw := p.RawV1Alpha1(); raw != nil && raw.ClusterConfig != nil && raw.ClusterConfig.ControlPlane == nil {
		endpoint := "https://127.0.0.1:6443"
		for _, d := range r.ByKind("KubeClusterConfig") {
			if e := Scalar(d.Root, "endpoint"); e != "" {
				endpoint = e
			}
		}
		if u, err := url.Parse(endpoint); err == nil {
			raw.ClusterConfig.ControlPlane = &v1alpha1.ControlPlaneConfig{Endpoint: &v1alpha1.Endpoint{URL: u}}
		}
	}
	w, err := p.Validate(mode{install: r.HasMachineInstall()})
	if err == nil {
		return w, nil
	}
	var multi interface{ WrappedErrors() []error }
	if errors.As(err, &multi) {
		for _, e := range multi.WrappedErrors() {
			errs = append(errs, e.Error())
		}
		return w, errs
	}
	return w, []string{err.Error()}
}

// FormatErrors joins errors the way the node's multierror prints them.
func FormatErrors(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	head := "1 error occurred:"
	if len(errs) > 1 {
		head = fmt.Sprintf("%d errors occurred:", len(errs))
	}
	var b strings.Builder
	b.WriteString(head)
	for _, e := range errs {
		b.WriteString("\n\t* " + e)
	}
	b.WriteString("\n\n")
	return b.String()
}
