package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/internal/editdistance"
	"github.com/talosflash/talosflash/internal/humanbytes"
	"github.com/talosflash/talosflash/internal/userfile"
	"github.com/talosflash/talosflash/node/internal/talos114"
	"github.com/talosflash/talosflash/node/internal/yamldocs"
)

// MaxConfigSize bounds what LoadConfig parses: real machine configs are tens
// of KiB; anything this big is the wrong file (an image, a log, ...).
const MaxConfigSize = 4 << 20

// ConfigFileError is a machine config that cannot be read: missing, not a
// regular file, unreadable, or longer than MaxConfigSize (TooLarge:
// errors.Is(err, ErrInvalidConfig), it is no machine config).
type ConfigFileError struct {
	Path     string
	TooLarge bool
	Err      error // why it cannot be read (nil with TooLarge)
}

func (e *ConfigFileError) Error() string {
	if e.TooLarge {
		return fmt.Sprintf("config file %s is too large for a machine config (at most %s)", e.Path, humanbytes.Exact(MaxConfigSize))
	}
	return "config file: " + e.Err.Error()
}

func (e *ConfigFileError) Unwrap() error { return e.Err }

// Is makes a file too large to be a config an invalid config.
func (e *ConfigFileError) Is(target error) bool { return e.TooLarge && target == ErrInvalidConfig }

// ReadConfigFile reads the machine config file the user named: the one
// bounded read of a config (a regular file of at most MaxConfigSize bytes;
// a FIFO or a device is refused, never read endlessly). Errors are
// *ConfigFileError.
func ReadConfigFile(path string) ([]byte, error) {
	data, err := userfile.Read(path, MaxConfigSize)
	var tooLarge *userfile.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &ConfigFileError{Path: path, TooLarge: true}
	case err != nil:
		return nil, &ConfigFileError{Path: path, Err: err}
	}
	return data, nil
}

// ReadConfig is ReadConfigFile for a config that is no local file (r,
// called name in messages): at most MaxConfigSize bytes are read.
func ReadConfig(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxConfigSize+1))
	switch {
	case err != nil:
		return nil, &ConfigFileError{Path: name, Err: err}
	case len(data) > MaxConfigSize:
		return nil, &ConfigFileError{Path: name, TooLarge: true}
	}
	return data, nil
}

// Config is a loaded machine config, reduced to what talosflash checks. It
// deliberately exposes no secret-bearing field. The fields are read from the
// YAML itself, so they are known even in documents the local Talos machinery
// does not know (a config made by a newer talosctl).
type Config struct {
	MachineType       string   // "controlplane", "worker", "init"; "" if the file has no v1alpha1 document
	InstallImage      string   // installer image: UnattendedInstallConfig installer.image, else machine.install.image
	InstallImageFrom  string   // where InstallImage comes from ("machine.install.image" or "UnattendedInstallConfig installer.image")
	InstallDisk       string   // machine.install.disk ("" if a diskSelector is used)
	Hostname          string   // static hostname, if set (machine.network.hostname or HostnameConfig)
	ExtensionServices []string // names of ExtensionServiceConfig documents (any apiVersion)
	// extensionEnv is, by ExtensionServiceConfig name, the environment
	// variables it sets to a non-empty value (names only: values are secrets),
	// and whether it has config files.
	extensionEnv map[string]extensionEnv
	Kinds        []string // document kinds in file order; the legacy machine config is "v1alpha1"
	Warnings     []string // local validation warnings (sanitized)
	// Unchecked lists what the local machinery could not check: document
	// kinds or fields newer than it. They are sent byte for byte; the node decides.
	Unchecked []string

	// Talos 1.14 facts, read from the YAML (see node/internal/talos114).
	Talos114          bool     // has a document kind only Talos >= 1.14 knows (UnattendedInstallConfig, Kube*, ...)
	UnattendedInstall int      // index (1-based) of the UnattendedInstallConfig document, 0 if none
	UICDiskSelector   bool     // the UnattendedInstallConfig has provisioning.diskSelector.match
	MachineInstall    bool     // the v1alpha1 document has a machine.install section (even an empty one)
	ControlPlaneOnly  []string // document kinds Talos 1.14 allows on control plane machines only, found in the file

	// Cluster facts, public (no secret): the cluster's name and its
	// control-plane endpoint, from KubeClusterConfig (Talos 1.14) else
	// .cluster.clusterName / .cluster.controlPlane.endpoint.
	ClusterName string
	Endpoint    string
	// Lines (1-based, in the file; 0: absent) of the values above, for
	// problems that point at them.
	MachineTypeLine, InstallImageLine, ClusterNameLine, EndpointLine int

	// machineTypeLeftOut: the v1alpha1 document has a machine section
	// without a type, which Talos reads as a worker (Role).
	machineTypeLeftOut bool

	size int
}

// MachineryVersion is the Talos machinery this build checks configs with.
const MachineryVersion = "v1.13"

// Size is the config's length in bytes.
func (c *Config) Size() int { return c.size }

// HasExtensionService reports whether an ExtensionServiceConfig named name exists.
func (c *Config) HasExtensionService(name string) bool {
	return slices.Contains(c.ExtensionServices, name)
}

type extensionEnv struct {
	set   []string // variables set to a non-empty value
	files bool     // configFiles given
}

// ExtensionServiceUnset is which of vars the ExtensionServiceConfig named
// name does not set to a value (nil when it has config files, which the
// service may read instead, or when there is no such document).
func (c *Config) ExtensionServiceUnset(name string, vars []string) []string {
	e, ok := c.extensionEnv[name]
	if !ok || e.files {
		return nil
	}
	var out []string
	for _, v := range vars {
		if !slices.Contains(e.set, v) {
			out = append(out, v)
		}
	}
	return out
}

// metalMode is the runtime mode a Raspberry Pi runs in (Talos "metal"):
// validation then requires an install section, as the node itself does.
type metalMode struct{}

func (metalMode) String() string        { return "metal" }
func (metalMode) RequiresInstall() bool { return true }
func (metalMode) InContainer() bool     { return false }

// LoadConfig reads a machine config (one or more YAML documents). Input that
// is not a config at all (not YAML, not a mapping, no kind) is a
// *ConfigError (errors.Is ErrInvalidConfig), as is a config the Talos
// machinery loader rejects. Document kinds and fields this machinery does
// not know are not errors: they are listed in Unchecked and left to the
// node. Errors never contain config values.
func LoadConfig(data []byte) (cfg *Config, err error) {
	if len(data) > MaxConfigSize {
		return nil, &ConfigError{Reason: fmt.Sprintf("file is %s; a machine config is at most %s, is this the right file?", humanbytes.Exact(int64(len(data))), humanbytes.Exact(MaxConfigSize))}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &ConfigError{Reason: "file is empty"}
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil, &ConfigError{Reason: "file is binary, not a YAML machine config"}
	}

	// The loader's and validator's words are scrubbed of the config's
	// non-public values, whatever they look like (see configEcho).
	defer func() {
		echo := newConfigEcho(data)
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Reason = echo.scrub(ce.Reason)
		}
		if cfg != nil {
			for i, w := range cfg.Warnings {
				cfg.Warnings[i] = echo.scrub(w)
			}
		}
	}()
	docs, err := scanDocuments(data)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, &ConfigError{Reason: "no Talos config documents found"}
	}
	cfg = &Config{size: len(data)}
	for _, d := range docs {
		if (d.Kind == "") != (d.APIVersion == "") {
			return nil, &ConfigError{Line: d.Line, Reason: fmt.Sprintf("document %d: needs both apiVersion and kind (or neither, for the main v1alpha1 machine config)", d.Index)}
		}
		if d.Kind == "" && !d.v1alpha1 {
			return nil, &ConfigError{Line: d.Line, Reason: fmt.Sprintf("document %d has no kind and is not a v1alpha1 machine config (version/machine/cluster); this is not a Talos config", d.Index)}
		}
		d.fill(cfg)
	}

	// The loader is third-party code fed untrusted bytes: never let it crash the app.
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, &ConfigError{Reason: "the config loader could not process this file"}
		}
	}()
	var known114 []yamldocs.Chunk
	if cfg.Talos114 {
		res, err := talos114.Load(data)
		note114(cfg, res)
		if err == nil {
			validate114(cfg, res)
			return cfg, nil
		}
		// Talos 1.14 refuses something here too (a typo, a document twice,
		// an apiVersion no Talos knows): the v1.13 path says what, with the
		// documents 1.14 added or extended left out, or their first newer
		// field would end its check before the refusal.
		known114 = res.UncheckedChunks()
	}
	if err := checkLocally(cfg, data, docs, known114); err != nil {
		return nil, err
	}
	return cfg, nil
}

// note114 lists the documents of a Talos 1.14 config that machinery v1.13
// cannot check (talos114.Load: 1.14 kinds and 1.14 fields), left to the
// node. One line per reason, not per document: a generated 1.14 config has
// two dozen documents v1.13 does not know.
func note114(cfg *Config, res *talos114.Result) {
	var newer, fields []string
	var newerIdx, fieldsIdx []string
	for _, d := range res.Docs {
		switch {
		case d.Unchecked == "":
		case talos114.NewerThanV113(d.Kind):
			newer, newerIdx = append(newer, safeName(d.Kind)), append(newerIdx, fmt.Sprint(d.Index))
		default:
			fields, fieldsIdx = append(fields, safeName(d.Kind)), append(fieldsIdx, fmt.Sprint(d.Index))
		}
	}
	if len(newer) > 0 {
		cfg.Unchecked = append(cfg.Unchecked, fmt.Sprintf("%s (%s): not checked locally (newer than Talos machinery %s); a Talos 1.14 node checks them",
			plural("document", newerIdx), strings.Join(newer, ", "), MachineryVersion))
	}
	if len(fields) > 0 {
		cfg.Unchecked = append(cfg.Unchecked, fmt.Sprintf("%s (%s): not checked locally (has fields newer than Talos machinery %s); a Talos 1.14 node checks them",
			plural("document", fieldsIdx), strings.Join(fields, ", "), MachineryVersion))
	}
}

// validate114 runs v1.13's checks on the rest of a Talos 1.14 config that
// loaded, with the rules 1.14 relaxed (machine.install optional, the
// endpoint in KubeClusterConfig).
func validate114(cfg *Config, res *talos114.Result) {
	warnings, errs := res.ValidateV113()
	for _, w := range warnings {
		cfg.Warnings = append(cfg.Warnings, sanitize(w))
	}
	if len(errs) > 0 {
		cfg.Warnings = append(cfg.Warnings, "local validation without the documents newer than Talos machinery "+MachineryVersion+": "+sanitize(strings.Join(errs, "; "))+" (the node decides)")
	}
}

// checkLocally loads and validates what the local machinery knows. Unknown
// document kinds are blanked (keeping line numbers) and noted; unknown
// fields are a warning with their key paths (a typo such as
// machine.certSANz, or a field newer than this machinery). The documents in
// without are left out from the start (already known to be newer).
func checkLocally(cfg *Config, data []byte, docs []docInfo, without []yamldocs.Chunk) error {
	chunks := yamldocs.Split(data)
	blanked := slices.Clone(without)
	masked := yamldocs.Blank(data, blanked)
	skipped := map[int]bool{}
	for range len(docs) + 1 {
		provider, err := configloader.NewFromBytes(masked)
		if err == nil {
			return validateLocally(cfg, provider, len(blanked) > 0)
		}
		if errors.Is(err, configloader.ErrNoConfig) && len(blanked) > 0 {
			return nil // every document is newer than the machinery: the node checks them
		}
		if !strings.Contains(err.Error(), "not registered") {
			if keys, ok := unknownKeys(err.Error()); ok {
				where := docAt(docs, lineOf(err.Error()))
				cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s: unknown field(s) %s: a typo, or a field newer than Talos machinery %s (not checked locally; the node decides)", where, keys, MachineryVersion))
				return nil
			}
			return loaderError(err, docs)
		}
		matched := false
		for i, d := range docs {
			if d.Kind == "" || skipped[i] || !strings.Contains(err.Error(), fmt.Sprintf("%q %q", d.Kind, d.APIVersion)) {
				continue
			}
			if err := unknownKind(d); err != nil {
				return err
			}
			matched = true
			skipped[i] = true
			cfg.Unchecked = append(cfg.Unchecked, fmt.Sprintf("document %d (%s %s): not checked locally (newer than Talos machinery %s)", d.Index, safeName(d.Kind), safeName(d.APIVersion), MachineryVersion))
			for _, c := range chunks {
				if c.Contains(d.Line) {
					blanked = append(blanked, c)
				}
			}
		}
		if !matched {
			return &ConfigError{Reason: "unknown document kind or apiVersion"}
		}
		masked = yamldocs.Blank(data, blanked)
	}
	return &ConfigError{Reason: "the config loader could not process this file"}
}

// unknownKind refuses a document the machinery does not register when it
// is sure Talos does not either: a kind v1.13 registers under another
// apiVersion (every such kind is v1alpha1 in v1.13 and v1.14), or a word one
// typo away from a Talos 1.14 kind. Any other kind may be newer than both:
// the node decides.
func unknownKind(d docInfo) error {
	if k, ok := talos114.Kinds[d.Kind]; ok && k.InV113 {
		return &ConfigError{Line: d.Line, Reason: fmt.Sprintf("document %d (%s): apiVersion %s is not one Talos knows for this kind (it is v1alpha1); the node refuses this config",
			d.Index, safeName(d.Kind), safeName(d.APIVersion))}
	}
	if talos114.Registered(d.Kind) {
		return nil
	}
	if near := editdistance.Closest(d.Kind, talos114.KindNames()); near != "" {
		return &ConfigError{Line: d.Line, Reason: fmt.Sprintf("document %d: kind %s is not a Talos config document (did you mean %s?); the node refuses this config",
			d.Index, safeName(d.Kind), near)}
	}
	return nil
}

// validateLocally runs the machinery's validation. With documents left out
// (newer than the machinery) a failure may only mean a check needs them:
// then it is a warning and the node's verdict counts.
func validateLocally(cfg *Config, provider config.Provider, partial bool) error {
	warnings, err := provider.Validate(metalMode{}, validation.WithLocal())
	for _, w := range warnings {
		cfg.Warnings = append(cfg.Warnings, sanitize(w))
	}
	if err == nil {
		return nil
	}
	msg := sanitize(err.Error())
	if partial {
		cfg.Warnings = append(cfg.Warnings, "local validation without the documents newer than Talos machinery "+MachineryVersion+": "+msg+" (the node decides)")
		return nil
	}
	return &ConfigError{Line: lineOf(msg), Reason: "validation failed: " + msg}
}

// docAt names the document containing line, for messages.
func docAt(docs []docInfo, line int) string {
	var best *docInfo
	for i := range docs {
		if docs[i].Line <= line || best == nil && line == 0 {
			best = &docs[i]
		}
	}
	if best == nil || line == 0 {
		return "a document"
	}
	kind := best.Kind
	if kind == "" {
		kind = "v1alpha1"
	}
	return fmt.Sprintf("document %d (%s)", best.Index, safeName(kind))
}

// docInfo is what a pre-scan learns about one YAML document, so errors can
// point at a document and line without quoting its content, and the
// incident checks can read any document, known to the machinery or not.
type docInfo struct {
	Index      int // 1-based
	Line       int
	Kind       string
	APIVersion string
	root       *yaml.Node
	v1alpha1   bool // kindless with version/machine/cluster: the main machine config
}

// fill copies what the checks need from the document into cfg.
func (d docInfo) fill(cfg *Config) {
	switch d.Kind {
	case "":
		cfg.Kinds = append(cfg.Kinds, "v1alpha1")
		cfg.MachineType, cfg.MachineTypeLine = scalarLineAt(d.root, "machine", "type")
		m := talos114.Node(d.root, "machine")
		cfg.machineTypeLeftOut = m != nil && m.Kind == yaml.MappingNode && talos114.Node(m, "type") == nil && talos114.Node(m, "<<") == nil
		if img, line := scalarLineAt(d.root, "machine", "install", "image"); img != "" && cfg.InstallImageFrom == "" {
			cfg.InstallImage, cfg.InstallImageFrom, cfg.InstallImageLine = img, "machine.install.image", line
		}
		if v, line := scalarLineAt(d.root, "cluster", "clusterName"); v != "" && cfg.ClusterName == "" {
			cfg.ClusterName, cfg.ClusterNameLine = v, line
		}
		if v, line := scalarLineAt(d.root, "cluster", "controlPlane", "endpoint"); v != "" && cfg.Endpoint == "" {
			cfg.Endpoint, cfg.EndpointLine = v, line
		}
		cfg.InstallDisk = scalarAt(d.root, "machine", "install", "disk")
		cfg.MachineInstall = talos114.Node(d.root, "machine", "install") != nil
		if h := scalarAt(d.root, "machine", "network", "hostname"); h != "" && cfg.Hostname == "" {
			cfg.Hostname = h
		}
	case "ExtensionServiceConfig":
		cfg.Kinds = append(cfg.Kinds, d.Kind)
		name := scalarAt(d.root, "name")
		cfg.ExtensionServices = append(cfg.ExtensionServices, name)
		var e extensionEnv
		if f := talos114.Node(d.root, "configFiles"); f != nil && f.Kind == yaml.SequenceNode && len(f.Content) > 0 {
			e.files = true
		}
		if env := talos114.Node(d.root, "environment"); env != nil && env.Kind == yaml.SequenceNode {
			for _, item := range env.Content {
				if k, v, ok := strings.Cut(item.Value, "="); ok && item.Kind == yaml.ScalarNode && v != "" {
					e.set = append(e.set, k)
				}
			}
		}
		if cfg.extensionEnv == nil {
			cfg.extensionEnv = map[string]extensionEnv{}
		}
		cfg.extensionEnv[name] = e
	case "UnattendedInstallConfig":
		cfg.Kinds = append(cfg.Kinds, d.Kind)
		cfg.UnattendedInstall = d.Index
		cfg.UICDiskSelector = talos114.Scalar(d.root, "provisioning", "diskSelector", "match") != ""
		// Talos 1.14: the installer of an unattended install wins over machine.install.
		if img, line := scalarLineAt(d.root, "installer", "image"); img != "" {
			cfg.InstallImage, cfg.InstallImageFrom, cfg.InstallImageLine = img, "UnattendedInstallConfig installer.image", line
		}
	case "KubeClusterConfig":
		// Talos 1.14: the cluster's document wins over .cluster.
		cfg.Kinds = append(cfg.Kinds, d.Kind)
		if v, line := scalarLineAt(d.root, "clusterName"); v != "" {
			cfg.ClusterName, cfg.ClusterNameLine = v, line
		}
		if v, line := scalarLineAt(d.root, "endpoint"); v != "" {
			cfg.Endpoint, cfg.EndpointLine = v, line
		}
	case "HostnameConfig":
		cfg.Kinds = append(cfg.Kinds, d.Kind)
		if h := scalarAt(d.root, "hostname"); h != "" {
			cfg.Hostname = h
		}
	default:
		cfg.Kinds = append(cfg.Kinds, d.Kind)
	}
	if talos114.NewerThanV113(d.Kind) {
		cfg.Talos114 = true
	}
	if slices.Contains(talos114.ControlPlaneOnlyKinds, d.Kind) && !slices.Contains(cfg.ControlPlaneOnly, d.Kind) {
		cfg.ControlPlaneOnly = append(cfg.ControlPlaneOnly, d.Kind)
	}
}

// scalarLineAt is scalarAt with the scalar's line.
func scalarLineAt(n *yaml.Node, path ...string) (string, int) {
	n = talos114.Node(n, path...)
	if n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias // machine.type: *t is t's value to Talos too
	}
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", 0
	}
	return n.Value, n.Line
}

// scalarAt follows mapping keys from n and returns the scalar found there.
func scalarAt(n *yaml.Node, path ...string) string {
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return ""
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				next = n.Content[j+1]
			}
		}
		n = next
	}
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// scanDocuments walks the YAML documents with yaml.v3 to give precise,
// content-free errors for input that is not YAML or not a mapping.
func scanDocuments(data []byte) ([]docInfo, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []docInfo
	for i := 1; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			msg := sanitize(strings.TrimPrefix(err.Error(), "yaml: "))
			return nil, &ConfigError{Line: lineOf(msg), Reason: "not valid YAML: " + msg}
		}
		if i > 1000 {
			return nil, &ConfigError{Reason: "more than 1000 YAML documents; not a machine config"}
		}
		root := &n
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		info := docInfo{Index: i, Line: root.Line, root: root}
		switch root.Kind {
		case yaml.MappingNode:
			for j := 0; j+1 < len(root.Content); j += 2 {
				k, v := root.Content[j], root.Content[j+1]
				switch k.Value {
				case "machine", "cluster", "version":
					info.v1alpha1 = true
				}
				if v.Kind != yaml.ScalarNode {
					continue
				}
				switch k.Value {
				case "kind":
					info.Kind = v.Value
				case "apiVersion":
					info.APIVersion = v.Value
				}
			}
		case yaml.DocumentNode:
			continue // empty document ("---" with nothing after it)
		default:
			return nil, &ConfigError{Line: root.Line, Reason: fmt.Sprintf("document %d is not a YAML mapping; this is not a Talos machine config", i)}
		}
		docs = append(docs, info)
	}
	return docs, nil
}

// loaderError turns a configloader error into a content-free ConfigError.
func loaderError(err error, docs []docInfo) error {
	if errors.Is(err, configloader.ErrNoConfig) {
		return &ConfigError{Reason: "no Talos config documents found"}
	}
	raw := err.Error()
	if strings.Contains(raw, "not registered") {
		for _, d := range docs {
			if d.Kind != "" && strings.Contains(raw, fmt.Sprintf("%q %q", d.Kind, d.APIVersion)) {
				return &ConfigError{Line: d.Line, Reason: fmt.Sprintf("document %d: unknown document kind %s (apiVersion %s); Talos machinery v1.13 does not know it",
					d.Index, safeName(d.Kind), safeName(d.APIVersion))}
			}
		}
		return &ConfigError{Reason: "unknown document kind or apiVersion"}
	}
	// "error decoding document <apiVersion>/<kind>/<name> (line N): <cause>"
	if m := decodeDocErr.FindStringSubmatchIndex(raw); m != nil {
		line := lineOf(raw[m[0]:m[1]])
		where := fmt.Sprintf("document at line %d", line)
		for _, d := range docs {
			if d.Line == line {
				kind := d.Kind
				if kind == "" {
					kind = "v1alpha1"
				}
				where = fmt.Sprintf("document %d (%s)", d.Index, safeName(kind))
			}
		}
		cause := raw[m[1]:]
		if l := lineOf(cause); l > 0 {
			line = l // the exact line inside the document
		}
		return &ConfigError{Line: line, Reason: where + ": " + decodeCause(cause)}
	}
	if m := duplicateDocErr.FindStringSubmatch(raw); m != nil {
		line := lineOf(m[0])
		kind, name := m[2], m[3]
		return &ConfigError{Line: line, Reason: fmt.Sprintf("%s document named %s appears twice; each name may be used once", safeName(kind), safeName(name))}
	}
	msg := sanitize(decodeCause(raw))
	return &ConfigError{Line: lineOf(msg), Reason: msg}
}

var duplicateDocErr = regexp.MustCompile(`duplicate document ([^/\s]*)/([^/\s]*)/(\S*) is not allowed \(line \d+\)`)

var decodeDocErr = regexp.MustCompile(`error decoding document \S* \(line \d+\):\s*`)

// decodeCause rewrites the loader's "unknown keys found during decoding:
// <YAML dump of the keys and their values>" to the key names only: the
// values may be secrets under a misspelled key.
func decodeCause(cause string) string {
	keys, ok := unknownKeys(cause)
	if !ok {
		return sanitize(cause)
	}
	i := strings.Index(cause, "unknown keys found during decoding:")
	if prefix := sanitize(cause[:i]); prefix != "" {
		return prefix + " unknown field(s) " + keys
	}
	return "unknown field(s) " + keys
}

// unknownKeys returns the key paths of a loader's or node's "unknown keys
// found during decoding" error, without any value.
func unknownKeys(msg string) (string, bool) {
	const unknown = "unknown keys found during decoding:"
	i := strings.Index(msg, unknown)
	if i < 0 {
		return "", false
	}
	var dump map[string]any
	var keys []string
	if err := yaml.Unmarshal([]byte(msg[i+len(unknown):]), &dump); err == nil {
		keys = unknownKeyPaths(dump, "")
	}
	if len(keys) == 0 {
		return "(names not shown)", true
	}
	sort.Strings(keys)
	return strings.Join(keys, ", "), true
}

// unknownKeyPaths turns the loader's dump of unknown keys (nested down to
// the misspelled key) into quoted dotted paths such as "machine.certSANz",
// never including a value.
func unknownKeyPaths(dump map[string]any, prefix string) []string {
	var out []string
	for k, v := range dump {
		name := k
		if !safeQuoted.MatchString(k) || looksRandom(k) {
			name = redacted
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && name != redacted {
			out = append(out, unknownKeyPaths(sub, path)...)
			continue
		}
		out = append(out, `"`+path+`"`)
	}
	return out
}

// safeName quotes s if it is a plain identifier, else hides it.
func safeName(s string) string {
	if safeQuoted.MatchString(s) && !looksRandom(s) {
		return fmt.Sprintf("%q", s)
	}
	return `"` + redacted + `"`
}

// plural is "document 4" or "documents 2, 3, 5".
func plural(word string, items []string) string {
	if len(items) == 1 {
		return word + " " + items[0]
	}
	return word + "s " + strings.Join(items, ", ")
}
