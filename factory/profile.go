// Package factory knows what to ask the Talos Image Factory for: role
// profiles, their schematics and offline schematic IDs, an HTTP client for
// the factory API, and parsing of installer image references as kept in a
// GitOps repository (talos/installer-<role>.yaml).
package factory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/talosflash/talosflash/internal/userfile"
	"gopkg.in/yaml.v3"
)

const (
	// DefaultBaseURL is the public Image Factory.
	DefaultBaseURL = "https://factory.talos.dev"
	// DefaultTalosVersion is used by profiles that do not pin a version.
	DefaultTalosVersion = "v1.14.5"
	// DefaultArch is the Raspberry Pi 4B architecture.
	DefaultArch = "arm64"

	// RPiOverlayImage and RPiOverlayName select the official Raspberry Pi
	// (models before Pi 5) overlay.
	RPiOverlayImage = "siderolabs/sbc-raspberrypi"
	RPiOverlayName  = "rpi_generic"

	// NewtExtension is the official Newt (Pangolin tunnel) extension. It
	// belongs on the control plane only: a node that has it but lacks an
	// ExtensionServiceConfig keeps restarting the service and, as seen in the
	// field, reboots roughly every 71 minutes.
	NewtExtension = "siderolabs/newt"
)

// Profile is a named recipe for one node role's image.
type Profile struct {
	Name, Description string
	TalosVersion      string            // "" -> DefaultTalosVersion
	Arch              string            // "" -> "arm64"
	Overlay           schematic.Overlay // {Image: "siderolabs/sbc-raspberrypi", Name: "rpi_generic"}
	Extensions        []string          // official extension names, e.g. "siderolabs/newt"
	ExtraKernelArgs   []string
}

// BuiltinProfiles returns the two roles of the Raspberry Pi 4B cluster.
// Only the control plane carries Newt; workers get the bare overlay image.
func BuiltinProfiles() []Profile {
	rpi := func() schematic.Overlay {
		return schematic.Overlay{Image: RPiOverlayImage, Name: RPiOverlayName}
	}

	return []Profile{
		{
			Name:        "controlplane",
			Description: "Raspberry Pi 4B control plane: rpi_generic overlay + Newt extension",
			Overlay:     rpi(),
			Extensions:  []string{NewtExtension},
		},
		{
			Name:        "worker",
			Description: "Raspberry Pi 4B worker: rpi_generic overlay only (no Newt)",
			Overlay:     rpi(),
		},
	}
}

// Version returns the Talos version the profile resolves to.
func (p Profile) Version() string {
	if p.TalosVersion == "" {
		return DefaultTalosVersion
	}

	return p.TalosVersion
}

// Architecture returns the CPU architecture the profile resolves to.
func (p Profile) Architecture() string {
	if p.Arch == "" {
		return DefaultArch
	}

	return p.Arch
}

// Schematic builds the Image Factory schematic for the profile.
//
// Extensions are sorted and deduplicated, as the factory's web UI
// (image-factory internal/frontend/http/ui.go: the checked extensions,
// sorted) and Omni do before the schematic is posted: the factory hashes
// the schematic exactly as posted, so the same set always gets the ID the UI
// gives it. Other lists (kernel args) keep the user's order: it matters.
func (p Profile) Schematic() *schematic.Schematic {
	s := &schematic.Schematic{
		Overlay: schematic.Overlay{
			Image:   p.Overlay.Image,
			Name:    p.Overlay.Name,
			Options: maps.Clone(p.Overlay.Options),
		},
	}

	if len(p.Extensions) > 0 {
		exts := slices.Clone(p.Extensions)
		slices.Sort(exts)
		s.Customization.SystemExtensions.OfficialExtensions = slices.Compact(exts)
	}

	if len(p.ExtraKernelArgs) > 0 {
		s.Customization.ExtraKernelArgs = slices.Clone(p.ExtraKernelArgs)
	}

	return s
}

// SchematicID computes the ID the Image Factory assigns to s, offline.
func SchematicID(s *schematic.Schematic) (string, error) {
	if s == nil {
		return "", errors.New("schematic ID: no schematic")
	}

	id, err := s.ID()
	if err != nil {
		return "", fmt.Errorf("schematic ID: %w", err)
	}

	return id, nil
}

// SchematicID is shorthand for SchematicID(p.Schematic()).
func (p Profile) SchematicID() (string, error) {
	return SchematicID(p.Schematic())
}

var (
	profileNameRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	extensionNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*$`)
	overlayImageRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]*$`)
)

// ValidateVersion checks a Talos version string such as "v1.14.5".
func ValidateVersion(v string) error {
	if !strings.HasPrefix(v, "v") {
		return fmt.Errorf("talos version %q must look like v1.14.5", v)
	}

	if _, err := semver.Parse(v[1:]); err != nil {
		return fmt.Errorf("talos version %q must look like v1.14.5: %v", v, err)
	}

	return nil
}

// Validate reports the first problem that would make the profile unusable.
func (p Profile) Validate() error {
	if p.Name == "" {
		return errors.New("profile has no name")
	}

	if !profileNameRe.MatchString(p.Name) {
		return fmt.Errorf("profile %q: name may use letters, digits, '.', '_' and '-' only", p.Name)
	}

	if p.TalosVersion != "" {
		if err := ValidateVersion(p.TalosVersion); err != nil {
			return fmt.Errorf("profile %q: %w", p.Name, err)
		}
	}

	switch p.Arch {
	case "", "arm64", "amd64":
	default:
		return fmt.Errorf("profile %q: arch %q is not supported (use arm64 or amd64)", p.Name, p.Arch)
	}

	if (p.Overlay.Image == "") != (p.Overlay.Name == "") {
		return fmt.Errorf("profile %q: overlay needs both image and name (or neither)", p.Name)
	}

	if p.Overlay.Image != "" && !overlayImageRe.MatchString(p.Overlay.Image) {
		return fmt.Errorf("profile %q: overlay image %q is not a valid image name", p.Name, p.Overlay.Image)
	}

	if p.Overlay.Image == "" && len(p.Overlay.Options) > 0 {
		return fmt.Errorf("profile %q: overlay options given without an overlay", p.Name)
	}

	seen := map[string]bool{}

	for _, ext := range p.Extensions {
		if !extensionNameRe.MatchString(ext) {
			return fmt.Errorf("profile %q: extension %q must be an official extension name like siderolabs/newt", p.Name, ext)
		}

		if seen[ext] {
			return fmt.Errorf("profile %q: extension %q listed twice", p.Name, ext)
		}

		seen[ext] = true
	}

	for _, arg := range p.ExtraKernelArgs {
		if arg == "" || strings.ContainsAny(arg, " \t\r\n") {
			return fmt.Errorf("profile %q: extraKernelArgs entry %q must be one non-empty argument", p.Name, arg)
		}
	}

	if _, err := p.SchematicID(); err != nil {
		return fmt.Errorf("profile %q: %w", p.Name, err)
	}

	return nil
}

// FindProfile returns the profile called name.
func FindProfile(all []Profile, name string) (Profile, error) {
	for _, p := range all {
		if p.Name == name {
			return p, nil
		}
	}

	names := make([]string, 0, len(all))
	for _, p := range all {
		names = append(names, p.Name)
	}

	if len(names) == 0 {
		return Profile{}, fmt.Errorf("unknown profile %q: no profiles defined", name)
	}

	return Profile{}, fmt.Errorf("unknown profile %q (valid: %s)", name, strings.Join(names, ", "))
}

// MergeProfiles returns base with every profile of overrides applied: one
// with a base profile's name replaces it in place, others are appended.
func MergeProfiles(base, overrides []Profile) []Profile {
	out := slices.Clone(base)

	for _, o := range overrides {
		if i := slices.IndexFunc(out, func(p Profile) bool { return p.Name == o.Name }); i >= 0 {
			out[i] = o
		} else {
			out = append(out, o)
		}
	}

	return out
}

// MaxProfileFile bounds a profile file (regular files only).
const MaxProfileFile = 1 << 20

// LoadProfiles reads a user profile file and returns the effective set: the
// builtin profiles, with user profiles of the same name replacing them, then
// the user's other profiles in file order.
func LoadProfiles(path string) ([]Profile, error) {
	data, err := userfile.Read(path, MaxProfileFile)
	if err != nil {
		return nil, fmt.Errorf("load profiles: %w", err)
	}

	user, err := ParseProfiles(data)
	if err != nil {
		return nil, fmt.Errorf("load profiles %s: %w", path, err)
	}

	return MergeProfiles(BuiltinProfiles(), user), nil
}

// Field names of the profile file; also the list shown for unknown fields.
var (
	fileFields    = []string{"profiles"}
	profileFields = []string{"name", "description", "talosVersion", "arch", "overlay", "extensions", "extraKernelArgs"}
	overlayFields = []string{"image", "name", "options"}
)

// ParseProfiles decodes and validates user profiles. The file is either a
// mapping with a "profiles" list or a bare list of profiles:
//
//	profiles:
//	  - name: storage
//	    description: worker with iSCSI
//	    talosVersion: v1.14.5
//	    arch: arm64
//	    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}
//	    extensions: [siderolabs/iscsi-tools]
//	    extraKernelArgs: [console=tty1]
//
// Decoding is strict: unknown fields, wrong types and duplicate names are
// errors that name the line.
func ParseProfiles(data []byte) ([]Profile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))

	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("profile file is empty")
		}

		return nil, fmt.Errorf("profile file is not valid YAML: %w", err)
	}

	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("line %d: profile file must hold a single YAML document", extra.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("profile file is not valid YAML: %w", err)
	}

	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}

	var list *yaml.Node

	switch root.Kind {
	case yaml.SequenceNode:
		list = root
	case yaml.MappingNode:
		if err := checkKeys(root, "profile file", fileFields); err != nil {
			return nil, err
		}

		list = mappingValue(root, "profiles")
		if list == nil {
			return nil, fmt.Errorf("line %d: profile file has no \"profiles\" list", root.Line)
		}

		if list.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("line %d: \"profiles\" must be a list", list.Line)
		}
	default:
		return nil, fmt.Errorf("line %d: profile file must be a list of profiles or a mapping with \"profiles\"", root.Line)
	}

	profiles := make([]Profile, 0, len(list.Content))
	lines := map[string]int{}

	for _, item := range list.Content {
		p, err := decodeProfile(item)
		if err != nil {
			return nil, err
		}

		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("line %d: %w", item.Line, err)
		}

		if prev, dup := lines[p.Name]; dup {
			return nil, fmt.Errorf("line %d: profile %q already defined on line %d", item.Line, p.Name, prev)
		}

		lines[p.Name] = item.Line
		profiles = append(profiles, p)
	}

	if len(profiles) == 0 {
		return nil, errors.New("profile file defines no profiles")
	}

	return profiles, nil
}

func decodeProfile(n *yaml.Node) (Profile, error) {
	if n.Kind != yaml.MappingNode {
		return Profile{}, fmt.Errorf("line %d: each profile must be a mapping (name, overlay, extensions and so on)", n.Line)
	}

	if err := checkKeys(n, "profile", profileFields); err != nil {
		return Profile{}, err
	}

	var p Profile

	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]

		var err error

		switch key {
		case "name":
			err = decodeScalar(val, key, &p.Name)
		case "description":
			err = decodeScalar(val, key, &p.Description)
		case "talosVersion":
			err = decodeScalar(val, key, &p.TalosVersion)
		case "arch":
			err = decodeScalar(val, key, &p.Arch)
		case "extensions":
			err = decodeStringList(val, key, &p.Extensions)
		case "extraKernelArgs":
			err = decodeStringList(val, key, &p.ExtraKernelArgs)
		case "overlay":
			err = decodeOverlay(val, &p.Overlay)
		}

		if err != nil {
			return Profile{}, err
		}
	}

	return p, nil
}

func decodeOverlay(n *yaml.Node, o *schematic.Overlay) error {
	if isNull(n) {
		return nil
	}

	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: overlay must be a mapping with image and name", n.Line)
	}

	if err := checkKeys(n, "overlay", overlayFields); err != nil {
		return err
	}

	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]

		var err error

		switch key {
		case "image":
			err = decodeScalar(val, "overlay."+key, &o.Image)
		case "name":
			err = decodeScalar(val, "overlay."+key, &o.Name)
		case "options":
			if isNull(val) {
				continue
			}

			if val.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: overlay.options must be a mapping", val.Line)
			}

			// Options are free-form (overlay specific); decode them exactly
			// as the factory does so the ID matches.
			if err = val.Decode(&o.Options); err != nil {
				err = fmt.Errorf("line %d: overlay.options: %v", val.Line, err)
			}
		}

		if err != nil {
			return err
		}
	}

	return nil
}

func checkKeys(n *yaml.Node, what string, allowed []string) error {
	seen := map[string]bool{}

	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s keys must be plain names", k.Line, what)
		}

		if !slices.Contains(allowed, k.Value) {
			return fmt.Errorf("line %d: unknown field %q in %s (valid: %s)", k.Line, k.Value, what, strings.Join(allowed, ", "))
		}

		if seen[k.Value] {
			return fmt.Errorf("line %d: field %q repeated in %s", k.Line, k.Value, what)
		}

		seen[k.Value] = true
	}

	return nil
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}

	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func decodeScalar(n *yaml.Node, field string, dst *string) error {
	if isNull(n) {
		return nil
	}

	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float") {
		return fmt.Errorf("line %d: %s must be a string", n.Line, field)
	}

	*dst = n.Value

	return nil
}

func decodeStringList(n *yaml.Node, field string, dst *[]string) error {
	if isNull(n) {
		return nil
	}

	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: %s must be a list of strings", n.Line, field)
	}

	for _, item := range n.Content {
		var s string
		if isNull(item) {
			return fmt.Errorf("line %d: %s has an empty entry", item.Line, field)
		}

		if err := decodeScalar(item, field+" entry", &s); err != nil {
			return err
		}

		*dst = append(*dst, s)
	}

	return nil
}
