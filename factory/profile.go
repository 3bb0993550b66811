// Package factory knows what to ask the Talos Image Factory for: role
// profiles built for a board (board.go: the Raspberry Pi 4B and 5), their
// schematics and offline schematic IDs, an HTTP client for
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
	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/internal/editdistance"
	"github.com/talosflash/talosflash/internal/userfile"
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

	// Board is the board the profile is built for: Overlay is then that
	// board's overlay (with the profile's options). "" for a profile that
	// names its overlay itself (TargetBoard reads the board from it).
	Board Board
	// AnyBoard: the profile is a role's recipe for every board, and
	// ForBoard swaps in the board's overlay (the built-in roles; `board:
	// any` in a profiles file). Otherwise the profile is for its
	// TargetBoard only.
	AnyBoard bool

	// builtin marks the built-in roles, whose description names the board.
	builtin bool
}

// The built-in roles: the names of the built-in profiles.
const (
	RoleControlPlane = "controlplane"
	RoleWorker       = "worker"
)

// BuiltinRoles lists the built-in roles in BuiltinProfiles order.
func BuiltinRoles() []string { return []string{RoleControlPlane, RoleWorker} }

// BuiltinProfiles returns the two roles built for the default board (the
// Raspberry Pi 4B): BuiltinProfilesFor(DefaultBoard). Only the control
// plane carries Newt; workers get the bare overlay image.
func BuiltinProfiles() []Profile { return BuiltinProfilesFor(DefaultBoard) }

// BuiltinProfilesFor returns the two roles built for board b (nil for an
// unknown board): controlplane (the board's overlay + siderolabs/newt) and
// worker (the overlay only). Each follows the board it is asked for
// (AnyBoard): ForBoard gives the same profile for another board.
func BuiltinProfilesFor(b Board) []Profile {
	if !b.Known() {
		return nil
	}

	out := make([]Profile, 0, 2)
	for _, role := range BuiltinRoles() {
		p := Profile{Name: role, Overlay: b.Overlay(), Board: b, AnyBoard: true, builtin: true}
		if role == RoleControlPlane {
			p.Extensions = []string{NewtExtension}
		}

		p.Description = builtinDescription(role, b)
		out = append(out, p)
	}

	return out
}

// BuiltinProfile is the built-in role's profile for board b: "the profile
// of role R for board B".
func BuiltinProfile(role string, b Board) (Profile, error) {
	if err := b.check(); err != nil {
		return Profile{}, err
	}

	for _, p := range BuiltinProfilesFor(b) {
		if p.Name == role {
			return p, nil
		}
	}

	return Profile{}, fmt.Errorf("unknown role %q (valid: %s)", role, strings.Join(BuiltinRoles(), ", "))
}

func builtinDescription(role string, b Board) string {
	o := b.Overlay().Name
	if role == RoleControlPlane {
		return fmt.Sprintf("%s control plane: %s overlay + Newt extension", b.Model(), o)
	}

	return fmt.Sprintf("%s worker: %s overlay only (no Newt)", b.Model(), o)
}

// TargetBoard is the board the profile builds for: Board, else the board
// whose overlay the profile names (BoardOfOverlay); "" when it names no
// board's overlay (none, or another overlay image).
func (p Profile) TargetBoard() Board {
	if p.Board != "" {
		return p.Board
	}

	b, _ := BoardOfOverlay(p.Overlay)

	return b
}

// ForBoard is the profile as built for board b: the profile of role
// p.Name for board b.
//
//   - An AnyBoard profile (the built-in roles, `board: any`) gets b's
//     overlay, keeping its overlay options.
//   - A profile for one board (`board: rpi5`, or an overlay that is a
//     board's) is returned as it is for that board and refused for another
//     (*BoardMismatchError).
//   - A profile whose overlay is no board's (none, or another overlay
//     image) is returned as it is: talosflash cannot tell which board it
//     is for (its TargetBoard is then "", which a caller may report).
//
// An unknown b is an *UnknownBoardError; a board whose overlay the
// profile's Talos version does not have is a *BoardVersionError (a caller
// that sets TalosVersion afterwards checks again with CheckBoardVersion).
func (p Profile) ForBoard(b Board) (Profile, error) {
	if err := b.check(); err != nil {
		return Profile{}, fmt.Errorf("profile %q: %w", p.Name, err)
	}

	q := p.clone()

	switch cur := p.TargetBoard(); {
	case p.AnyBoard:
		q.Board = b
		q.Overlay = b.Overlay()
		q.Overlay.Options = maps.Clone(p.Overlay.Options)

		if p.builtin {
			q.Description = builtinDescription(p.Name, b)
		}
	case cur == "":
		return q, nil
	case cur != b:
		return Profile{}, &BoardMismatchError{Profile: p.Name, ProfileBoard: cur, Board: b}
	}

	if err := q.CheckBoardVersion(); err != nil {
		return Profile{}, err
	}

	return q, nil
}

// CheckBoardVersion refuses a profile whose board's overlay does not exist
// at the profile's Talos version (*BoardVersionError, naming the version
// the board needs). A profile of no known board passes.
func (p Profile) CheckBoardVersion() error {
	b := p.TargetBoard()
	if b == "" {
		return nil
	}

	if err := b.CheckVersion(p.Version()); err != nil {
		return fmt.Errorf("profile %q: %w", p.Name, err)
	}

	return nil
}

// ExpandBoards lists every image the profiles make: an AnyBoard profile
// once per board whose overlay its Talos version has (Boards order), the
// others as they are.
func ExpandBoards(profiles []Profile) []Profile {
	var out []Profile

	for _, p := range profiles {
		if !p.AnyBoard {
			out = append(out, p.clone())

			continue
		}

		for _, b := range Boards() {
			if q, err := p.ForBoard(b); err == nil {
				out = append(out, q)
			}
		}
	}

	return out
}

// ProfileOfSchematicID finds the profile (built for its board, see
// ExpandBoards) whose schematic has ID id: which role and board an image,
// a card or an installer was made for, from its schematic ID alone.
func ProfileOfSchematicID(profiles []Profile, id string) (Profile, bool) {
	for _, p := range ExpandBoards(profiles) {
		if got, err := p.SchematicID(); err == nil && got == id {
			return p, true
		}
	}

	return Profile{}, false
}

func (p Profile) clone() Profile {
	q := p
	q.Overlay.Options = maps.Clone(p.Overlay.Options)
	q.Extensions = slices.Clone(p.Extensions)
	q.ExtraKernelArgs = slices.Clone(p.ExtraKernelArgs)

	return q
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
		return fmt.Errorf("profile %q: overlay options given without an overlay (name a board or an overlay)", p.Name)
	}

	if p.AnyBoard && p.Board == "" {
		return fmt.Errorf("profile %q: it follows each node's board but is built for none (Board unset)", p.Name)
	}

	if p.Board != "" {
		if err := p.Board.check(); err != nil {
			return fmt.Errorf("profile %q: %w", p.Name, err)
		}

		if want := p.Board.Overlay(); p.Overlay.Image != want.Image || p.Overlay.Name != want.Name {
			return fmt.Errorf("profile %q: board %s has the overlay %s of %s, not %q of %q", p.Name, p.Board, want.Name, want.Image, p.Overlay.Name, p.Overlay.Image)
		}
	}

	if b := p.TargetBoard(); b != "" && p.Architecture() != b.Arch() {
		return fmt.Errorf("profile %q: the %s (board %s) is %s, not %s", p.Name, b.Model(), b, b.Arch(), p.Architecture())
	}

	if err := checkOverlayOptions(p.Overlay); err != nil {
		return fmt.Errorf("profile %q: %w", p.Name, err)
	}

	if err := p.CheckBoardVersion(); err != nil {
		return err
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

// FindProfile returns the profile called name; an unknown name is an
// error with the profile it is probably a typo of ("wroker": did you mean
// worker?) and the valid ones.
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

	near := editdistance.Closest(name, names)
	for _, n := range names {
		if strings.EqualFold(n, name) { // names are case-sensitive: a case typo
			near = n
		}
	}

	hint := ""
	if near != "" {
		hint = "did you mean " + near + "?; "
	}

	return Profile{}, fmt.Errorf("unknown profile %q (%svalid: %s)", name, hint, strings.Join(names, ", "))
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
	profileFields = []string{"name", "description", "talosVersion", "arch", "board", "overlay", "extensions", "extraKernelArgs"}
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
//	  - name: nvme
//	    board: rpi5          # or rpi4, or any: follow each node's board
//	    overlay:
//	      options:
//	        configTxtAppend: |-
//	          dtparam=pciex1_gen=3
//
// A profile names its board (`board:`, whose overlay it gets) or its
// overlay (image and name), not both; overlay options go with either.
// Decoding is strict: unknown fields, wrong types, duplicate names, an
// unknown board ("did you mean rpi5?") and, for the official Raspberry Pi
// overlay, an option it does not read (RPiOverlayOptions) are errors that
// name the line.
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

	var (
		p         Profile
		board     *yaml.Node // the board: value
		boardName string
		options   *yaml.Node // overlay.options
	)

	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]

		var err error

		switch key {
		case "board":
			if err = decodeScalar(val, key, &boardName); err == nil && !isNull(val) {
				board = val
			}
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
			options, err = decodeOverlay(val, &p.Overlay)
		}

		if err != nil {
			return Profile{}, err
		}
	}

	if board != nil {
		if err := p.setBoard(board, boardName); err != nil {
			return Profile{}, err
		}
	} else {
		p.Board, _ = BoardOfOverlay(p.Overlay)
	}

	if options != nil && p.Overlay.Image == RPiOverlayImage {
		if err := checkOverlayOptionsNode(options); err != nil {
			return Profile{}, err
		}
	}

	return p, nil
}

// setBoard applies a profiles file's `board:` (a board name, or AnyBoard):
// the overlay becomes the board's, keeping the overlay options given.
func (p *Profile) setBoard(n *yaml.Node, name string) error {
	b := DefaultBoard
	if name == AnyBoard {
		p.AnyBoard = true
	} else {
		var err error
		if b, err = ParseBoard(name); err != nil {
			return fmt.Errorf("line %d: board: %w, or %s for a profile that follows each node's board", n.Line, err, AnyBoard)
		}
	}

	if p.Overlay.Image != "" || p.Overlay.Name != "" {
		return fmt.Errorf("line %d: profile gives both board: %s and an overlay image/name: board %s means the overlay %s of %s; keep one (overlay options go with either)",
			n.Line, name, b, b.Overlay().Name, RPiOverlayImage)
	}

	opts := p.Overlay.Options
	p.Board, p.Overlay = b, b.Overlay()
	p.Overlay.Options = opts

	return nil
}

// decodeOverlay decodes a profile's overlay; it returns the options
// mapping (nil if none) for the caller to check once the image is known.
func decodeOverlay(n *yaml.Node, o *schematic.Overlay) (*yaml.Node, error) {
	if isNull(n) {
		return nil, nil
	}

	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: overlay must be a mapping with image and name", n.Line)
	}

	if err := checkKeys(n, "overlay", overlayFields); err != nil {
		return nil, err
	}

	var options *yaml.Node

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
				return nil, fmt.Errorf("line %d: overlay.options must be a mapping", val.Line)
			}

			// Options go into the schematic as the factory UI puts them:
			// the YAML mapping decoded into map[string]any, the
			// schematic's overlay.options as it is (image-factory
			// internal/frontend/http/ui.go ToSchematic), so the ID is the
			// UI's for the same values.
			options = val
			if err = val.Decode(&o.Options); err != nil {
				err = fmt.Errorf("line %d: overlay.options: %v", val.Line, err)
			}
		}

		if err != nil {
			return nil, err
		}
	}

	return options, nil
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
