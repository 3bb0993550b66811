package plan

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// Door is one way of choosing an image.
type Door int

const (
	DoorNone          Door = iota
	DoorRole               // a role or profile name (--role, the app's Role select)
	DoorInstallerRef       // an installer image reference
	DoorInstallerFile      // a talos/installer-<role>.yaml
	DoorImageFile          // a local image file, written as it is
	DoorNode               // only an inventory node: its profile
)

// String is the door in words, for messages ("installer file").
func (d Door) String() string {
	switch d {
	case DoorRole:
		return "role"
	case DoorInstallerRef:
		return "installer"
	case DoorInstallerFile:
		return "installer file"
	case DoorImageFile:
		return "local image"
	case DoorNode:
		return "node"
	}
	return "choice"
}

// Choice is everything a user picked to say what to flash. Exactly one of
// Role, InstallerRef, InstallerFile and ImageFile, or none of them with
// Nodes (their profile). Nodes fix the image: any other pick must agree.
type Choice struct {
	Role          string // role or profile name
	InstallerRef  string // e.g. factory.talos.dev/metal-installer/<id>:v1.14.5
	InstallerFile string // its name; read from disk unless InstallerData is set
	InstallerData []byte // the installer file's contents (the app reads it itself)
	ImageFile     string // local image file
	// Board is the board a role is built for (--board, the app's board
	// select): "" the nodes' board, else the profile's own (the default
	// board for the built-in roles). A known image of another board is
	// refused.
	Board factory.Board

	Nodes    []inventory.Node  // the inventory nodes the cards are for
	Profiles []factory.Profile // the known profiles (nil: the built-ins)

	Version          string // the user's Talos version (a profile's; an installer must agree)
	InventoryVersion string // the inventory's talosVersion: a profile's default, an installer must agree
	Arch             string
	Format           string // factory download format, zst or xz ("" leaves the default URL)

	Factory  *factory.Client
	Register bool // register the schematic with the factory (a profile, an installer file's schematic)
	Lookup   bool // ask the factory for a schematic known only by its ID (bounded, never an error)
	// CacheDir is the image cache's directory: a local image inside it is
	// known by its entry's path (<factory>/<schematic ID>/<version>/<file>,
	// written there by a download of that schematic). A file anywhere else
	// is of unknown content, whatever its folders are called ("": none is
	// known by its path).
	CacheDir string
	// AllowUnknown lets an image that cannot be recognised as any profile
	// (a local file of unknown content, a foreign schematic) be flashed for
	// an inventory node; its card's record then names no profile. It never
	// lets through an image known to contradict the node.
	AllowUnknown bool
}

// Door is the way the image was chosen.
func (c Choice) Door() (Door, string) {
	switch {
	case c.Role != "":
		return DoorRole, c.Role
	case c.InstallerRef != "":
		return DoorInstallerRef, c.InstallerRef
	case c.InstallerFile != "":
		return DoorInstallerFile, c.InstallerFile
	case c.ImageFile != "":
		return DoorImageFile, c.ImageFile
	case len(c.Nodes) > 0:
		return DoorNode, c.Nodes[0].Hostname
	}
	return DoorNone, ""
}

func (c Choice) doors() int {
	n := 0
	for _, s := range []string{c.Role, c.InstallerRef, c.InstallerFile, c.ImageFile} {
		if s != "" {
			n++
		}
	}
	return n
}

// Obligations are what the chosen image demands of the node's machine
// config and what the user must hear before flashing it.
type Obligations struct {
	// Services are the image's extensions that only start with an
	// ExtensionServiceConfig (newt: the reboot-loop incident).
	Services []node.ServiceExtension
	Warnings []string // ImageWarnings, and notes of the decision itself
}

// ChoiceError is a choice that cannot be decided (bad usage or input):
// nothing was read beyond the choice's own files, nothing touched.
type ChoiceError struct{ Err error }

func (e *ChoiceError) Error() string { return e.Err.Error() }
func (e *ChoiceError) Unwrap() error { return e.Err }

func choiceErrorf(format string, args ...any) error {
	return &ChoiceError{fmt.Errorf(format, args...)}
}

// ConflictError: a pick contradicts the inventory node it is for. Door and
// Value are the pick as the user gave it; Profile/Schematic what it was
// recognised as ("" Profile: none of the known profiles); Reason says why
// when it is not simply another profile (an extension, a version).
type ConflictError struct {
	Door        Door
	Value       string
	Profile     string
	Schematic   string
	Node        string
	NodeProfile string
	Reason      string
	// Board is the board the pick was recognised as built for, NodeBoard
	// the node's ("" unknown).
	Board, NodeBoard factory.Board
}

// Error names the pick with Door's words; Describe lets a front end name it
// its own way (the CLI's flag).
func (e *ConflictError) Error() string { return e.Describe(e.Door.String()) }

// Describe is the message with the pick called door ("--installer-file").
func (e *ConflictError) Describe(door string) string {
	what := door + " " + e.Value
	node := e.nodeIs()
	if e.Reason != "" {
		return fmt.Sprintf("%s %s; the inventory says %s is a %s: flash %s's own image (%s), or correct the inventory", what, e.Reason, e.Node, node, e.Node, e.ownImage())
	}
	is := "the " + e.Profile + " image"
	if b := e.boardShown(e.Board); b != "" {
		is = "the " + e.Profile + " image for " + string(b)
	}
	if e.Profile == "" {
		is = "none of the known profiles' images"
	}
	if e.Schematic != "" {
		is += " (schematic " + factory.ShortID(e.Schematic) + ")"
	}
	return fmt.Sprintf("%s is %s; the inventory says %s is a %s: flash %s's own image (%s), or correct the inventory", what, is, e.Node, node, e.Node, e.ownImage())
}

// boardShown is b when boards are worth naming in the message: the
// node's is not the default, or the pick's is another.
func (e *ConflictError) boardShown(b factory.Board) factory.Board {
	if e.NodeBoard != "" && e.NodeBoard != factory.DefaultBoard || e.Board != "" && e.Board != e.NodeBoard {
		return b
	}
	return ""
}

// nodeIs is what the node is: its profile, and its board when it matters
// ("worker", "worker on board rpi5").
func (e *ConflictError) nodeIs() string {
	if b := e.boardShown(e.NodeBoard); b != "" {
		return e.NodeProfile + " on board " + string(b)
	}
	return e.NodeProfile
}

// ownImage names the node's own image ("profile worker", "profile worker,
// board rpi5").
func (e *ConflictError) ownImage() string {
	if b := e.boardShown(e.NodeBoard); b != "" {
		return "profile " + e.NodeProfile + ", board " + string(b)
	}
	return "profile " + e.NodeProfile
}

// BoardLabel names a profile built for board b ("" or the default board:
// the name alone): "worker", "worker for rpi5".
func BoardLabel(profile string, b factory.Board) string {
	if b == "" || b == factory.DefaultBoard || profile == "" {
		return profile
	}
	return profile + " for " + string(b)
}

// ChooseImage is the one image decision: every way of choosing an image
// (a role or profile, an installer reference or file, a local image, an
// inventory node, the app's picks) resolves here into the image and its
// obligations. An inventory node fixes its image: a pick that contradicts
// it is refused (*ConflictError) before anything is touched. Errors of the
// choice itself are *ChoiceError or wrap one; the factory is contacted only
// with Register or Lookup.
func ChooseImage(ctx context.Context, c Choice) (*Image, Obligations, error) {
	if c.Profiles == nil {
		c.Profiles = factory.BuiltinProfiles()
	}
	want, err := c.nodeProfile()
	if err != nil {
		return nil, Obligations{}, err
	}
	switch n := c.doors(); {
	case n > 1 || n == 0 && want == nil:
		return nil, Obligations{}, choiceErrorf("choose exactly one of a role, an installer image, an installer file or a local image")
	case n == 0:
		// The node's own image, on its board: a board asked for must be it.
		for _, nd := range c.Nodes {
			if c.Board != "" && nd.Board != "" && nd.Board != c.Board {
				return nil, Obligations{}, choiceErrorf("board %s contradicts the inventory: %s is board %s (the %s): leave the board out and each node gets its own board's image", c.Board, nd.Hostname, nd.Board, nd.Board.Model())
			}
		}
		c.Role = want.Name
	}
	if c.Format != "" && c.Format != "xz" && c.Format != "zst" {
		return nil, Obligations{}, choiceErrorf("format %q: want zst or xz", c.Format)
	}
	im, err := c.image(ctx)
	if err != nil {
		return nil, Obligations{}, err
	}
	var notes []string
	if want != nil {
		if notes, err = c.checkNode(im, *want); err != nil {
			return nil, Obligations{}, err
		}
	}
	if c.Format != "" {
		im.UseFormat(c.Format)
	}
	obl := Obligations{Warnings: append(ImageWarnings(im), notes...)}
	for _, se := range node.ServiceExtensions() {
		if slices.Contains(im.Extensions(), se.Extension) {
			obl.Services = append(obl.Services, se)
		}
	}
	return im, obl, nil
}

// ChooseImages is ChooseImage for one card per inventory node
// (Choice.Nodes, in order) when the nodes may have different profiles or
// boards: a cluster's control plane and workers, Pi 4s and Pi 5s, in one
// run. Nodes of one profile and board share one image (one decision, one download, one decode); each profile
// is decided by ChooseImage with its nodes. A pick (a role, an installer,
// a local image) is one image for every node, held against each as
// ChooseImage does. The images are per node, in order (the same *Image for
// nodes that share one); the obligations are every image's, each warning
// once.
func ChooseImages(ctx context.Context, c Choice) ([]*Image, Obligations, error) {
	if c.doors() > 0 || len(c.Nodes) == 0 {
		im, obl, err := ChooseImage(ctx, c)
		if err != nil {
			return nil, obl, err
		}
		ims := make([]*Image, max(len(c.Nodes), 1))
		for i := range ims {
			ims[i] = im
		}
		return ims, obl, nil
	}
	// One image a profile and board (a Pi 5 worker's is not a Pi 4's).
	var profiles []string
	byProfile := map[string][]int{}
	for i, n := range c.Nodes {
		key := n.Profile + "\x00" + string(n.Board)
		if _, ok := byProfile[key]; !ok {
			profiles = append(profiles, key)
		}
		byProfile[key] = append(byProfile[key], i)
	}
	ims := make([]*Image, len(c.Nodes))
	var all Obligations
	for _, p := range profiles {
		pc := c
		pc.Nodes = nil
		for _, i := range byProfile[p] {
			pc.Nodes = append(pc.Nodes, c.Nodes[i])
		}
		im, obl, err := ChooseImage(ctx, pc)
		if err != nil {
			return nil, Obligations{}, err
		}
		for _, i := range byProfile[p] {
			ims[i] = im
		}
		for _, se := range obl.Services {
			if !slices.ContainsFunc(all.Services, func(x node.ServiceExtension) bool { return x.Extension == se.Extension }) {
				all.Services = append(all.Services, se)
			}
		}
		for _, w := range obl.Warnings {
			if !slices.Contains(all.Warnings, w) {
				all.Warnings = append(all.Warnings, w)
			}
		}
	}
	return ims, all, nil
}

// nodeProfile is the profile the choice's nodes share, built for their
// board (nil: no nodes).
func (c Choice) nodeProfile() (*factory.Profile, error) {
	if len(c.Nodes) == 0 {
		return nil, nil
	}
	first := c.Nodes[0]
	for _, n := range c.Nodes[1:] {
		if n.Profile != first.Profile || n.Board != first.Board {
			door, value := c.Door()
			return nil, choiceErrorf("%s is a %s and %s a %s, but the %s %s is one image: leave it out and each node gets its own image, or flash them in separate runs",
				first.Hostname, BoardLabel(first.Profile, first.Board), n.Hostname, BoardLabel(n.Profile, n.Board), door, value)
		}
	}
	p, err := factory.FindProfile(c.Profiles, first.Profile)
	if err != nil {
		return nil, choiceErrorf("node %s: %v", first.Hostname, err)
	}
	if first.Board != "" {
		if c.InventoryVersion != "" {
			p.TalosVersion = c.InventoryVersion
		}
		if p, err = p.ForBoard(first.Board); err != nil {
			return nil, choiceErrorf("node %s: %v", first.Hostname, err)
		}
	}
	return &p, nil
}

// image builds the image of the one door chosen.
func (c Choice) image(ctx context.Context) (*Image, error) {
	switch {
	case c.ImageFile != "":
		im := FromFile(c.ImageFile)
		im.recognizePath(c.CacheDir, c.Profiles)
		return im, nil
	case c.InstallerRef != "":
		ref, err := factory.ParseInstallerRef(strings.TrimSpace(c.InstallerRef))
		if err != nil {
			return nil, &ChoiceError{err}
		}
		if err := c.installerVersion(ref); err != nil {
			return nil, err
		}
		im := FromInstallerRef(c.Factory, ref, c.Arch)
		if err := c.finishInstaller(ctx, im); err != nil {
			return nil, err
		}
		return im, nil
	case c.InstallerFile != "":
		var (
			im  *Image
			err error
		)
		if c.InstallerData != nil {
			im, err = FromInstallerData(c.Factory, c.InstallerFile, c.InstallerData, c.Arch)
		} else {
			im, err = FromInstallerFile(c.Factory, c.InstallerFile, c.Arch)
		}
		if err != nil {
			return nil, &ChoiceError{err}
		}
		if err := c.installerVersion(im.Installer); err != nil {
			return nil, err
		}
		if c.Register {
			if err := im.Register(ctx, c.Factory); err != nil {
				return nil, err
			}
		}
		if err := c.finishInstaller(ctx, im); err != nil {
			return nil, err
		}
		return im, nil
	}
	p, err := factory.FindProfile(c.Profiles, c.Role)
	if err != nil {
		return nil, &ChoiceError{err}
	}
	switch v := c.Version; {
	case v == "":
		if c.InventoryVersion != "" {
			p.TalosVersion = c.InventoryVersion
		}
	default:
		if err := factory.ValidateVersion(v); err != nil {
			return nil, &ChoiceError{err}
		}
		p.TalosVersion = v
	}
	if c.Arch != "" {
		p.Arch = c.Arch
	}
	// The role's image is the role built for the board: the one asked
	// for, else the nodes' (a Pi 5 node's role is its Pi 5 image), else
	// the profile's own. A board below its minimum Talos version is
	// refused with the version it needs, before the factory is asked.
	board := c.Board
	if board == "" && len(c.Nodes) > 0 {
		board = c.Nodes[0].Board
	}
	if board != "" {
		if p, err = p.ForBoard(board); err != nil {
			return nil, &ChoiceError{err}
		}
	} else if err := p.CheckBoardVersion(); err != nil {
		return nil, &ChoiceError{err}
	}
	return FromProfile(ctx, c.Factory, p, c.Register)
}

// installerVersion refuses an installer of another Talos version than the
// one the user or the inventory asked for.
func (c Choice) installerVersion(ref factory.InstallerRef) error {
	switch {
	case c.Version != "" && c.Version != ref.Version:
		return choiceErrorf("--version %s contradicts the installer's version %s", c.Version, ref.Version)
	case c.Version == "" && len(c.Nodes) > 0 && c.InventoryVersion != "" && c.InventoryVersion != ref.Version:
		return choiceErrorf("installer %s is Talos %s; the inventory says talosVersion %s: flash the inventory's version, or change talosVersion", ref, ref.Version, c.InventoryVersion)
	}
	return nil
}

// finishInstaller recognises an installer's schematic among the profiles
// on every board offline and, with Lookup, asks the factory for one it
// does not know; a board asked for (Choice.Board) must be its board when
// that is known.
func (c Choice) finishInstaller(ctx context.Context, im *Image) error {
	im.Recognize(factory.ExpandBoards(c.Profiles))
	if c.Lookup {
		im.LookupSchematic(ctx, c.Factory)
	}
	if b := im.Board(); c.Board != "" && b != "" && b != c.Board {
		return choiceErrorf("board %s contradicts the installer's board %s (the %s, overlay %s)", c.Board, b, b.Model(), b.Overlay().Name)
	}
	return nil
}

// recognizePath knows a local image by where it lies: an entry of the
// image cache (cacheDir) sits under <factory>/<schematic ID>/<version>/,
// where a download of that schematic put it. Any other file is of unknown
// content, a copy in the factory's layout too (its folders are anybody's
// to name: the control plane's image under the worker's ID reached a
// worker's card so): talosflash reads no schematic out of an image. Links
// are resolved first, so a link into the cache names the file it points at.
func (im *Image) recognizePath(cacheDir string, profiles []factory.Profile) {
	if !insideDir(cacheDir, im.LocalPath) {
		return
	}
	dir := filepath.Dir(filepath.Clean(im.LocalPath))
	version, id := filepath.Base(dir), filepath.Base(filepath.Dir(dir))
	if !factory.IsSchematicID(id) || factory.ValidateVersion(version) != nil {
		return
	}
	known := &Image{SchematicID: id, Version: version, Label: im.Label}
	if !known.Recognize(factory.ExpandBoards(profiles)) {
		return
	}
	im.SchematicID, im.Version = id, version
	im.Profile, im.Schematic, im.Label = known.Profile, known.Schematic, known.Label
}

// checkNode holds the image against the node's profile: the same
// schematic passes (named as the node's profile); a known other profile, or
// a known schematic whose service extensions differ, is a conflict; an
// image that cannot be recognised passes only with AllowUnknown, and then
// names no profile (so its card's record claims none).
func (c Choice) checkNode(im *Image, want factory.Profile) ([]string, error) {
	n := c.Nodes[0]
	door, value := c.Door()
	wantID, err := want.SchematicID()
	if err != nil {
		return nil, choiceErrorf("profile %s: %v", want.Name, err)
	}
	conflict := &ConflictError{Door: door, Value: value, Profile: im.ProfileName(), Schematic: im.SchematicID, Node: n.Hostname, NodeProfile: want.Name,
		Board: im.Board(), NodeBoard: want.TargetBoard()}
	if im.SchematicID == wantID { // the same schematic is the same image, whatever it is called
		if im.ProfileName() != want.Name { // the record names the node's profile
			p := want
			if im.Version != "" {
				p.TalosVersion = im.Version
			}
			im.Profile, im.Schematic = &p, want.Schematic()
		}
		return nil, nil
	}
	if im.Profile != nil {
		return nil, conflict // a role, or recognised as another profile
	}
	if im.Schematic != nil {
		if reason := serviceDifference(im.Extensions(), want.Extensions); reason != "" {
			conflict.Reason = reason
			return nil, conflict
		}
	}
	if !c.AllowUnknown {
		return nil, &UnknownImageError{ConflictError: *conflict, WantSchematic: wantID}
	}
	im.Profile = nil
	return []string{fmt.Sprintf("%s %s is not recognised as %s's image (profile %s): flashed as you said (allow unknown image); its card names no profile", door, value, n.Hostname, want.Name)}, nil
}

// UnknownImageError: an image that cannot be recognised, for an inventory
// node; refused unless Choice.AllowUnknown.
type UnknownImageError struct {
	ConflictError
	WantSchematic string
}

func (e *UnknownImageError) Error() string {
	return e.Describe(e.Door.String(), "allow an unknown image explicitly (its card then names no profile)")
}

// Describe is the message with the pick called door and the way to allow
// it anyway called allow ("give --allow-unknown-image").
func (e *UnknownImageError) Describe(door, allow string) string {
	what := door + " " + e.Value
	is := "of unknown content (talosflash cannot tell which schematic it holds)"
	if e.Schematic != "" {
		is = "schematic " + factory.ShortID(e.Schematic) + ", none of the known profiles"
	}
	return fmt.Sprintf("%s is %s; the inventory says %s is a %s (schematic %s): flash %s's own image, or %s",
		what, is, e.Node, e.NodeProfile, factory.ShortID(e.WantSchematic), e.Node, allow)
}

// serviceDifference says how two extension lists differ in the extensions
// that need an ExtensionServiceConfig ("" when they do not).
func serviceDifference(have, want []string) string {
	for _, se := range node.ServiceExtensions() {
		h, w := slices.Contains(have, se.Extension), slices.Contains(want, se.Extension)
		switch {
		case h && !w:
			return "includes " + se.Extension + ", which the node's profile does not"
		case w && !h:
			return "lacks " + se.Extension + ", which the node's profile includes"
		}
	}
	return ""
}

// IsChoiceError reports whether err is a problem of the choice itself
// (usage: refused before anything is touched).
func IsChoiceError(err error) bool {
	var (
		ce *ChoiceError
		cf *ConflictError
		ue *UnknownImageError
	)
	return errors.As(err, &ce) || errors.As(err, &cf) || errors.As(err, &ue)
}

// insideDir reports whether path, its links resolved, lies below dir (its
// links resolved too); false when dir is "" or either cannot be resolved.
func insideDir(dir, path string) bool {
	if dir == "" {
		return false
	}
	d, err1 := filepath.EvalSymlinks(dir)
	f, err2 := filepath.EvalSymlinks(path)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, f)
	return err == nil && rel != "." && !filepath.IsAbs(rel) && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
