package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"gopkg.in/yaml.v3"
)

// MaxConfigSize bounds what LoadConfig parses: real machine configs are tens
// of KiB; anything this big is the wrong file (an image, a log, ...).
const MaxConfigSize = 4 << 20

// Config is a loaded machine config, reduced to what talosflash checks. It
// deliberately exposes no secret-bearing field.
type Config struct {
	MachineType       string   // "controlplane", "worker", "init"; "" if the file has no v1alpha1 document
	InstallImage      string   // machine.install.image
	InstallDisk       string   // machine.install.disk ("" if a diskSelector is used)
	Hostname          string   // static hostname, if set (machine.network.hostname or HostnameConfig)
	ExtensionServices []string // names of ExtensionServiceConfig documents
	Kinds             []string // document kinds in file order; the legacy machine config is "v1alpha1"
	Warnings          []string // validation warnings (sanitized)

	size int
}

// Size is the config's length in bytes.
func (c *Config) Size() int { return c.size }

// HasExtensionService reports whether an ExtensionServiceConfig named name exists.
func (c *Config) HasExtensionService(name string) bool {
	for _, n := range c.ExtensionServices {
		if n == name {
			return true
		}
	}
	return false
}

// metalMode is the runtime mode a Raspberry Pi runs in (Talos "metal"):
// validation then requires an install section, as the node itself does.
type metalMode struct{}

func (metalMode) String() string        { return "metal" }
func (metalMode) RequiresInstall() bool { return true }
func (metalMode) InContainer() bool     { return false }

// LoadConfig parses and validates a machine config (one or more YAML
// documents) with the Talos machinery loader. Errors are *ConfigError
// (errors.Is ErrInvalidConfig) and never contain config values.
func LoadConfig(data []byte) (cfg *Config, err error) {
	if len(data) > MaxConfigSize {
		return nil, &ConfigError{Reason: fmt.Sprintf("file is %d bytes; a machine config is at most %d bytes, is this the right file?", len(data), MaxConfigSize)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &ConfigError{Reason: "file is empty"}
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil, &ConfigError{Reason: "file is binary, not a YAML machine config"}
	}

	docs, err := scanDocuments(data)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if (d.Kind == "") != (d.APIVersion == "") {
			return nil, &ConfigError{Line: d.Line, Reason: fmt.Sprintf("document %d: needs both apiVersion and kind (or neither, for the main v1alpha1 machine config)", d.Index)}
		}
	}

	// The loader is third-party code fed untrusted bytes: never let it crash the app.
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, &ConfigError{Reason: "the config loader could not process this file"}
		}
	}()

	provider, err := configloader.NewFromBytes(data)
	if err != nil {
		return nil, loaderError(err, docs)
	}

	cfg = describe(provider)
	cfg.size = len(data)

	warnings, err := provider.Validate(metalMode{}, validation.WithLocal())
	for _, w := range warnings {
		cfg.Warnings = append(cfg.Warnings, sanitize(w))
	}
	if err != nil {
		msg := sanitize(err.Error())
		return nil, &ConfigError{Line: lineOf(msg), Reason: "validation failed: " + msg}
	}

	return cfg, nil
}

func describe(p config.Provider) *Config {
	cfg := &Config{}
	for _, d := range p.Documents() {
		cfg.Kinds = append(cfg.Kinds, d.Kind())
	}
	if raw := p.RawV1Alpha1(); raw != nil && raw.MachineConfig != nil {
		m := raw.MachineConfig
		cfg.MachineType = m.MachineType
		if m.MachineInstall != nil {
			cfg.InstallImage = m.MachineInstall.InstallImage
			cfg.InstallDisk = m.MachineInstall.InstallDisk
		}
		if m.MachineNetwork != nil {
			cfg.Hostname = m.MachineNetwork.NetworkHostname
		}
	}
	if h := p.NetworkHostnameConfig(); h != nil && h.Hostname() != "" {
		cfg.Hostname = h.Hostname()
	}
	for _, esc := range p.ExtensionServiceConfigs() {
		cfg.ExtensionServices = append(cfg.ExtensionServices, esc.Name())
	}
	return cfg
}

// docInfo is what a pre-scan learns about one YAML document, so errors can
// point at a document and line without quoting its content.
type docInfo struct {
	Index      int // 1-based
	Line       int
	Kind       string
	APIVersion string
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
		info := docInfo{Index: i, Line: root.Line}
		switch root.Kind {
		case yaml.MappingNode:
			for j := 0; j+1 < len(root.Content); j += 2 {
				k, v := root.Content[j], root.Content[j+1]
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
	const unknown = "unknown keys found during decoding:"
	i := strings.Index(cause, unknown)
	if i < 0 {
		return sanitize(cause)
	}
	var dump map[string]any
	var keys []string
	if err := yaml.Unmarshal([]byte(cause[i+len(unknown):]), &dump); err == nil {
		keys = unknownKeyPaths(dump, "")
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return sanitize(cause[:i]) + "unknown fields"
	}
	return sanitize(cause[:i]) + "unknown field(s) " + strings.Join(keys, ", ")
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
