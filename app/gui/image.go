package gui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/dustin/go-humanize"
	"github.com/talosflash/talosflash/app/plan"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/internal/printable"
	"github.com/talosflash/talosflash/inventory"
)

// imageChoice is the image to flash, resolved the same way as in the CLI.
type imageChoice = plan.Image

// imageStep is step 1: role/profile or installer reference -> schematic,
// ID, version, image size.
type imageStep struct {
	ui      *UI
	content fyne.CanvasObject

	profile   *widget.Select
	board     *widget.Select // the board the role is built for, beside the role
	version   *escEntry
	ref       *escEntry
	yaml      *widget.Label
	yamlHead  *widget.Label // what the box below says: the schematic, or the local file
	id        *widget.Label // selectable, so it can be copied
	size      *widget.Label
	problem   *widget.Label
	next      *keyButton
	customRef bool // the choice came from the installer field/file or a local image

	// The background check against the factory's lists (version, overlay,
	// extensions) and its reachability.
	check    *widget.Label
	offline  *widget.Label     // banner: the factory is unreachable, what still works
	checkSeq int               // the latest check; older answers are dropped
	checkDue *time.Timer       // debounces typing in the version field
	names    map[string]string // select option -> profile name
	boards   map[string]factory.Board
	quiet    bool        // the board select is being set by the step itself (no new decision)
	nodes    *nodePicker // the inventory's nodes (nil: no inventory)
	// offlineBlocks: Next is off because the image needs a download and
	// the factory cannot be reached (issue 23: not a failure after the erase)
	offlineBlocks bool

	notes  *widget.Label // what the image implies for the node's config (plan.ImageWarnings)
	choice *imageChoice  // nil while invalid; shared as Session.Choice
	pick   plan.Choice   // the image picked (without the node): decided again when the node changes
}

const (
	schematicHeading = "Schematic (sent to the Image Factory)"
	refChoiceLabel   = "(installer image below)"
	localChoiceLabel = "(local image file)"
)

// checkDelay lets the user finish typing a version before the factory is asked.
const checkDelay = 400 * time.Millisecond

func newImageStep(ui *UI) *imageStep {
	s := &imageStep{ui: ui}
	s.profile = widget.NewSelect(nil, func(string) { s.customRef = false; s.versionEditable(); s.update() })
	s.profile.PlaceHolder = "choose a role"
	s.boards = map[string]factory.Board{}
	var boardOpts []string
	for _, b := range factory.Boards() {
		o := boardOption(b)
		s.boards[o] = b
		boardOpts = append(boardOpts, o)
	}
	s.board = widget.NewSelect(boardOpts, func(string) {
		s.profileOptions()
		if !s.quiet && !s.customRef {
			s.update()
		}
	})
	s.quiet = true
	s.board.SetSelected(boardOption(factory.DefaultBoard))
	s.quiet = false

	s.version = newEscEntry(ui)
	s.version.Validator = factory.ValidateVersion
	s.version.SetPlaceHolder(factory.DefaultTalosVersion)
	s.version.OnChanged = func(string) {
		if !s.customRef {
			s.update()
		}
	}

	s.ref = newEscEntry(ui)
	// The factory in use (--factory), not always the public one.
	s.ref.SetPlaceHolder(ui.deps.Factory.RegistryHost() + "/metal-installer/<schematic-id>:" + factory.DefaultTalosVersion)
	s.ref.OnSubmitted = func(string) { s.useRef() }
	useRef := newKeyButton(ui, "Use", nil, s.useRef)
	openFile := newKeyButton(ui, "Open installer file…", nil, s.openInstallerFile)
	openImage := newKeyButton(ui, "Use a local image file…", theme.FileIcon(), s.openImageFile)

	s.yaml = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	s.id = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	s.id.Selectable = true
	s.size = widget.NewLabel("")
	s.problem = wrapLabel("")
	s.problem.Importance = widget.DangerImportance
	s.problem.Hide()
	s.notes = wrapLabel("")
	s.notes.Importance = widget.WarningImportance
	s.notes.Hide()
	s.next = primaryButton(ui, "Next: choose the card  →", nil, func() { ui.tabs.SelectIndex(tabTarget) })
	s.check = wrapLabel("")
	s.check.Hide()
	s.offline = wrapLabel("")
	s.offline.Importance = widget.WarningImportance
	s.offline.Hide()

	form := widget.NewForm()
	title := "Which image should the card get?"
	if pick := s.newNodePicker(); pick != nil { // with an inventory: a node instead of a role
		form.AppendItem(widget.NewFormItem("Node", pick))
		title = "Which node is this card for?"
	}
	for _, it := range []*widget.FormItem{
		widget.NewFormItem("Role / profile", s.profile),
		widget.NewFormItem("Board", s.board),
		widget.NewFormItem("Talos version", s.version),
		widget.NewFormItem("or installer image", container.NewBorder(nil, nil, nil, container.NewHBox(useRef, openFile), s.ref)),
		widget.NewFormItem("Schematic ID", s.id),
		widget.NewFormItem("Image size", s.size),
	} {
		form.AppendItem(it)
	}
	s.yamlHead = heading(schematicHeading)
	yamlBox := container.NewBorder(s.yamlHead, nil, nil, nil,
		container.NewScroll(s.yaml))
	s.content = container.NewBorder(
		container.NewVBox(heading(title), s.offline, form, s.check, s.problem, s.notes),
		container.NewHBox(openImage, layout.NewSpacer(), s.next),
		nil, nil, yamlBox)
	ui.session.AddListener(func(c Change) {
		switch {
		case c == ChangeFlashed:
			s.imageDownloaded(ui.session.Flashed()[len(ui.session.Flashed())-1])
		case c == ChangeImageSize && s.offline.Visible():
			s.showOffline() // the cache lookup ended after the check
		}
	})
	return s
}

// profileOption is a profile as the select shows it: name and description.
func profileOption(p factory.Profile) string {
	if p.Description == "" {
		return p.Name
	}
	return p.Name + "  ·  " + p.Description
}

// boardOption is a board as the board select shows it.
func boardOption(b factory.Board) string {
	o := b.Model() + " (" + string(b) + ")"
	if m := b.MinTalosVersion(); m != "" {
		o += ", Talos " + m + " and later"
	}
	return o
}

// selectedBoard is the board chosen beside the role.
func (s *imageStep) selectedBoard() factory.Board {
	if b, ok := s.boards[s.board.Selected]; ok {
		return b
	}
	return factory.DefaultBoard
}

// showBoard sets the board select without deciding again (the board of a
// node picked, of an installer used).
func (s *imageStep) showBoard(b factory.Board) {
	if !b.Known() || s.selectedBoard() == b && s.board.Selected != "" {
		return
	}
	s.quiet = true
	s.board.SetSelected(boardOption(b))
	s.quiet = false
}

// profileOptions fills the role select for the board chosen: each profile
// as built for it (a built-in role's description names the board), the
// selection kept by profile name.
func (s *imageStep) profileOptions() {
	selected := s.names[s.profile.Selected]
	names := map[string]string{}
	options := make([]string, 0, len(s.ui.deps.Profiles))
	for _, p := range s.ui.deps.Profiles {
		if bp, err := p.ForBoard(s.selectedBoard()); err == nil {
			p = bp
		}
		o := profileOption(p)
		names[o] = p.Name
		options = append(options, o)
	}
	s.names = names
	s.profile.Options = options
	for o, n := range names {
		if n == selected && selected != "" && s.profile.Selected != o {
			s.profile.Selected = o // the same role, its description for this board
		}
	}
	s.profile.Refresh()
}

// selectProfile selects the profile with this name.
func (s *imageStep) selectProfile(name string) {
	for o, n := range s.names {
		if n == name {
			s.profile.SetSelected(o)
			return
		}
	}
}

func (s *imageStep) selectFirst() {
	if len(s.profile.Options) > 0 {
		s.profile.SetSelected(s.profile.Options[0])
	}
}

// update recomputes the choice from the profile select and version entry.
func (s *imageStep) update() {
	p, err := factory.FindProfile(s.ui.deps.Profiles, s.names[s.profile.Selected])
	if err != nil {
		s.setChoice(nil, nil)
		return
	}
	if s.version.Text == "" {
		s.version.SetText(p.Version()) // re-enters update via OnChanged
		return
	}
	if err := factory.ValidateVersion(s.version.Text); err != nil {
		s.setChoice(nil, fmt.Errorf("talos version: %w", err))
		return
	}
	if b := p.TargetBoard(); !p.AnyBoard && b != "" && s.pickedNode() == nil {
		s.showBoard(b) // a profile made for one board: that board
	}
	// A board the profile is not for, or one below its minimum Talos
	// version ("needs Talos v1.12.3 or later"), is the problem shown.
	if _, err := s.choose(plan.Choice{Role: p.Name, Version: s.version.Text, Board: s.selectedBoard()}); err != nil {
		s.setChoice(nil, err)
	}
}

// decision is pick as plan.ChooseImage decides it with the node picked
// above (the CLI's flash --inventory --hostname decides the same way).
func (s *imageStep) decision(pick plan.Choice) plan.Choice {
	pick.Profiles, pick.Factory = s.ui.deps.Profiles, s.ui.deps.Factory
	if s.ui.deps.Cache != nil { // a local image in it is known by its path
		pick.CacheDir = s.ui.deps.Cache.Dir
	}
	if n := s.pickedNode(); n != nil {
		pick.Nodes = []inventory.Node{*n}
		pick.InventoryVersion = s.ui.deps.Inventory.TalosVersion
	}
	return pick
}

// choose makes pick the choice, decided offline (plan.ChooseImage). A pick
// that contradicts the node picked is shown as the problem and blocks Next
// and Flash; both picks stay as the user made them. It returns the image
// (nil: none) and the error that is not such a conflict, for the caller
// to show its own way (nil when shown or none).
func (s *imageStep) choose(pick plan.Choice) (*imageChoice, error) {
	s.pick = pick
	c, _, err := plan.ChooseImage(context.Background(), s.decision(pick))
	if err != nil {
		if problem := nodeConflict(err); problem != nil {
			s.setChoice(nil, problem)
			s.showRefused(pick)
			return nil, nil
		}
		return nil, err
	}
	s.setChoice(c, nil)
	if c.Profile == nil || c.Profile.TargetBoard() != "" {
		s.showBoard(c.Board()) // an installer's board, or the node's
	}
	if c.Schematic == nil && c.LocalPath == "" {
		go s.lookupSchematic(pick, c)
	}
	return c, nil
}

// showRefused keeps the schematic fields under their header when the pick
// is refused for the node picked: what the pick is on its own (its
// schematic and ID), said to be refused, so the user sees what was held
// against the node (nothing of it is flashed: Next and Flash stay off).
func (s *imageStep) showRefused(pick plan.Choice) {
	alone := s.decision(pick)
	alone.Nodes, alone.InventoryVersion = nil, ""
	c, _, err := plan.ChooseImage(context.Background(), alone)
	if err != nil || c == nil || c.LocalPath != "" {
		return
	}
	node := "the node"
	if n := s.pickedNode(); n != nil {
		node = n.Hostname
	}
	s.yamlHead.SetText("Your pick's schematic: refused for " + node + " (see above)")
	s.id.SetText(c.SchematicID + " (refused for " + node + ")")
	s.yaml.SetText(schematicText(c))
	s.size.SetText("not flashed")
}

// nodeConflict is err in the app's words when the pick contradicts the
// node picked in step 1 (nil for any other error).
func nodeConflict(err error) error {
	var (
		conflict *plan.ConflictError
		unknown  *plan.UnknownImageError
	)
	// Never "choose Node none" as a way around it: the node fixes its
	// image, and a card without the node is not the node's card.
	switch {
	case errors.As(err, &unknown):
		return errors.New(unknown.Describe(doorWords[unknown.Door], "correct "+unknown.Node+"'s role or profile in the inventory"))
	case errors.As(err, &conflict):
		return errors.New(conflict.Describe(doorWords[conflict.Door]))
	}
	return nil
}

// doorWords name plan's doors as step 1 shows them.
var doorWords = map[plan.Door]string{
	plan.DoorRole: "Role", plan.DoorInstallerRef: "installer", plan.DoorInstallerFile: "installer file",
	plan.DoorImageFile: "local image", plan.DoorNode: "node",
}

// useRef takes the installer reference typed into the field.
func (s *imageStep) useRef() {
	ref := strings.TrimSpace(s.ref.Text)
	if _, err := factory.ParseInstallerRef(ref); err != nil {
		s.setChoice(nil, err) // a typo: the role picked stays
		return
	}
	s.useInstaller(plan.Choice{InstallerRef: ref})
}

// useInstaller makes an installer reference or file the pick.
func (s *imageStep) useInstaller(pick plan.Choice) error {
	s.versionEditable()
	s.customRef = true
	s.profile.ClearSelected()
	s.profile.PlaceHolder = refChoiceLabel
	s.profile.Refresh()
	s.customRef = true // ClearSelected ran the select callback
	c, err := s.choose(pick)
	if c != nil {
		s.ref.SetText(c.Installer.String())
		s.version.SetText(c.Installer.Version)
	}
	return err
}

// lookupSchematic asks the factory for the schematic behind an installer
// reference (as the CLI does) and decides again with it, so its YAML and
// the extension notes show and a schematic known to carry Newt is held
// against the node; an older factory can't answer, which leaves the
// ID-only view.
func (s *imageStep) lookupSchematic(pick plan.Choice, c *imageChoice) {
	d := s.decision(pick)
	d.Lookup = true
	found, _, err := plan.ChooseImage(s.ui.ctx, d)
	if err == nil && found.Schematic == nil {
		return
	}
	s.ui.do(func() {
		if s.choice != c { // no longer the user's choice
			return
		}
		if problem := nodeConflict(err); problem != nil {
			s.setChoice(nil, problem)
		} else if err == nil {
			s.setChoice(found, nil)
		}
	})
}

// rechoose decides the pick again (the node changed).
func (s *imageStep) rechoose() {
	if !s.customRef {
		s.update()
		return
	}
	if _, err := s.choose(s.pick); err != nil {
		s.setChoice(nil, err)
	}
}

// openInstallerFile reads a talos/installer-<role>.yaml.
func (s *imageStep) openInstallerFile() {
	s.ui.chooseFile(kindInstaller, FileRequest{Title: "Open an installer file", FilterName: "Installer files", Exts: []string{".yaml", ".yml"}, Folder: s.installerFolder()},
		func(u fyne.URI) {
			go func() {
				data, err := readInstallerURI(u)
				s.ui.do(func() {
					if err != nil {
						s.ui.showError("Cannot read the installer file", err)
						return
					}
					s.loadInstallerFile(u.Name(), data)
				})
			}()
		})
}

func (s *imageStep) loadInstallerFile(name string, data []byte) {
	err := s.useInstaller(plan.Choice{InstallerFile: name, InstallerData: data})
	var mismatch *factory.SchematicMismatchError
	switch {
	case errors.As(err, &mismatch):
		s.ui.showError("Installer file "+name+" contradicts itself", err)
		return
	case err != nil:
		s.ui.showError("Cannot use "+name, err)
		return
	}
}

// installerFolder is where the installer chooser opens: the picked node's
// installer file's folder, else the inventory's ("": no inventory).
func (s *imageStep) installerFolder() string {
	inv := s.ui.deps.Inventory
	switch {
	case inv == nil:
		return ""
	case s.pickedNode() != nil && s.pickedNode().Installer != "":
		return filepath.Dir(s.pickedNode().Installer)
	case inv.Path != "":
		return filepath.Dir(inv.Path)
	}
	return ""
}

// readInstallerURI reads an installer file bounded as plan reads one
// (plan.ReadInstallerFile).
func readInstallerURI(u fyne.URI) ([]byte, error) {
	if u.Scheme() == "file" {
		return plan.ReadInstallerFile(u.Path())
	}
	rc, err := storage.Reader(u)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return plan.ReadInstaller(rc, u.Name())
}

// openImageFile picks a local image (Raspberry Pi Imager's "Use custom").
func (s *imageStep) openImageFile() {
	s.ui.chooseFile(kindLocalImage, FileRequest{Title: "Use a local image file", Accept: "Use", FilterName: "Disk images", Exts: localImageExts},
		func(u fyne.URI) { s.useLocal(u.Path()) })
}

// localImageExts are the names offered and dropped as local images; the
// content decides the format when flashing.
var localImageExts = []string{".xz", ".zst", ".raw", ".img", ".gz"}

func isLocalImage(name string) bool {
	for _, e := range localImageExts {
		if strings.HasSuffix(strings.ToLower(name), e) {
			return true
		}
	}
	return false
}

// useLocal makes a local image file the choice: written as it is, no factory.
func (s *imageStep) useLocal(path string) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		s.ui.showError("Cannot use "+filepath.Base(path), err)
		return
	case !st.Mode().IsRegular():
		s.ui.showError("Cannot use "+filepath.Base(path), fmt.Errorf("%s is not a regular file", path))
		return
	}
	s.customRef = true
	s.profile.ClearSelected()
	s.profile.PlaceHolder = localChoiceLabel
	s.profile.Refresh()
	s.ref.SetText("")
	s.customRef = true
	// The file does not say its Talos version: "unknown", never a red
	// field the user did not touch.
	s.version.Validator = nil
	s.version.SetText("")
	s.version.SetPlaceHolder("unknown (a local image file does not say)")
	s.version.SetValidationError(nil)
	s.version.Disable()
	if c, err := s.choose(plan.Choice{ImageFile: path}); err != nil {
		s.ui.showError("Cannot use "+filepath.Base(path), err)
	} else if c != nil && c.Profile == nil {
		c.Label = "local file " + filepath.Base(path)
	}
}

// versionEditable makes the version field a checked entry again (a role or
// profile chosen after a local image).
func (s *imageStep) versionEditable() {
	if s.version.Validator != nil {
		return
	}
	s.version.Validator = factory.ValidateVersion
	s.version.SetPlaceHolder(factory.DefaultTalosVersion)
	s.version.Enable()
}

// setChoice shows the choice (or the problem) and looks up the image size
// in the cache.
func (s *imageStep) setChoice(c *imageChoice, problem error) {
	if c != nil {
		c.UseFormat(plan.DefaultFormat) // the factory compression the CLI uses too
	}
	s.choice = c
	s.offlineBlocks = false // a new choice: its own check says
	s.ui.session.SetChoice(c)
	if problem != nil {
		s.problem.SetText(errorText(problem))
		s.problem.Show()
	} else {
		s.problem.Hide()
	}
	s.showNotes(c)
	s.startCheck(c)
	if c == nil {
		s.next.Disable()
		s.id.SetText("")
		s.yaml.SetText("")
		s.size.SetText("")
		return
	}
	s.next.Enable()
	s.id.SetText(c.SchematicID)
	s.yamlHead.SetText(schematicHeading)
	switch {
	case c.LocalPath != "":
		s.id.SetText("unknown (a local image file does not say)")
		s.yamlHead.SetText("Local image file (nothing is sent to the Image Factory)")
		s.yaml.SetText("File: " + c.LocalPath + "\n\nA local image is written as it is: .raw.xz, .raw.zst, .raw.gz or .raw, told apart by content.")
	default:
		s.yaml.SetText(schematicText(c))
	}
	s.size.SetText("checking the cache…")
	go s.lookupSize(*c)
}

// schematicText is the preview of c's schematic: its YAML (overlay, its
// options, extensions), then its board and the overlay options in words,
// as the CLI's schematic prints them.
func schematicText(c *imageChoice) string {
	if c.Schematic == nil {
		return "(only the schematic ID is known: the installer image does not include the schematic)"
	}
	y, err := c.Schematic.Marshal()
	if err != nil {
		y = []byte(errString(err))
	}
	text := strings.TrimSpace(string(y))
	if b := c.Board(); b != "" {
		text += fmt.Sprintf("\n\n# board: %s (%s, overlay %s)", b, b.Model(), b.Overlay().Name)
	}
	if opts := c.Schematic.Overlay.Options; len(opts) > 0 {
		keys := make([]string, 0, len(opts))
		for k := range opts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		text += "\n# overlay options: " + strings.Join(keys, ", ") + " (written to the card's config.txt by the overlay)"
	}
	return printable.Lines(text) // the factory's or a file's names
}

// showNotes shows what the chosen image demands of the machine config, e.g.
// Newt's ExtensionServiceConfig (the reboot-loop incident).
func (s *imageStep) showNotes(c *imageChoice) {
	var notes []string
	if c != nil {
		notes = plan.ImageWarnings(c)
	}
	if len(notes) == 0 {
		s.notes.Hide()
		return
	}
	s.notes.SetText("⚠ " + strings.Join(notes, "\n⚠ "))
	s.notes.Show()
}

// lookupSize reads the sizes of a cached image (cheap: the xz index).
func (s *imageStep) lookupSize(c imageChoice) {
	text, raw, cached := "known after the download (not cached yet)", int64(0), false
	var bad error
	if c.LocalPath != "" {
		text, raw, bad = localText(c.LocalPath)
	} else if comp, r, ok := cachedSizes(s.ui.deps.Cache, c.CacheKey()); ok && s.ui.deps.Cache.Has(c.CacheKey()) {
		text, raw, cached = sizeText(comp, r, true), r, true
	}
	s.ui.do(func() {
		if s.choice == nil || s.choice.CacheKey() != c.CacheKey() || s.choice.LocalPath != c.LocalPath {
			return // the choice changed meanwhile
		}
		s.ui.session.SetImageSize(c.CacheKey(), raw)
		s.ui.session.SetCached(c.CacheKey(), cached)
		s.size.SetText(text)
		if bad != nil { // the file is no image talosflash writes
			s.problem.SetText(errorText(bad))
			s.problem.Show()
			s.next.Disable()
		}
	})
}

// imageDownloaded shows the size once a flash has the image in the cache:
// the bytes it wrote, and the cached file's (one stat, no read).
func (s *imageStep) imageDownloaded(f Flashed) {
	if f.CachePath == "" || s.choice == nil || s.choice.CacheKey() != f.Image.CacheKey() {
		return
	}
	st, err := os.Stat(f.CachePath)
	if err != nil {
		return
	}
	s.ui.session.SetImageSize(f.Image.CacheKey(), f.Card.Bytes)
	s.ui.session.SetCached(f.Image.CacheKey(), true)
	s.size.SetText(sizeText(st.Size(), f.Card.Bytes, true))
}

func sizeText(compressed, raw int64, cached bool) string {
	t := humanize.IBytes(uint64(compressed)) + " download"
	if raw > 0 {
		t += ", " + humanize.IBytes(uint64(raw)) + " on the card"
	}
	if cached {
		t += " (cached)"
	}
	return t
}

func cachedSizes(c *imaging.Cache, key string) (compressed, raw int64, ok bool) {
	if c == nil {
		return 0, 0, false
	}
	f, err := c.Open(key) // no symlink, no FIFO: the cache's own checks
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	return fileSizes(f)
}

// localText is what a local image file says of itself: its name, size,
// format and (xz) size on the card; an error when it is no image
// talosflash writes.
func localText(path string) (text string, raw int64, bad error) {
	f, err := os.OpenFile(filepath.Clean(path), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "unknown", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "unknown", 0, fmt.Errorf("%s is not a regular file", path)
	}
	format, err := imaging.SniffFile(f)
	if err != nil {
		return filepath.Base(path) + ": " + humanize.IBytes(uint64(st.Size())), 0, err
	}
	text = fmt.Sprintf("%s: %s file, %s", filepath.Base(path), humanize.IBytes(uint64(st.Size())), format)
	if format == imaging.FormatRaw {
		return text + ", " + humanize.IBytes(uint64(st.Size())) + " on the card", st.Size(), nil
	}
	if r, err := imaging.XZUncompressedSize(f, st.Size()); err == nil && r > 0 {
		return text + ", " + humanize.IBytes(uint64(r)) + " on the card", r, nil
	}
	return text + " (size on the card: known once written)", 0, nil
}

func fileSizes(f *os.File) (compressed, raw int64, ok bool) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, false
	}
	raw, err = imaging.XZUncompressedSize(f, st.Size())
	if err != nil {
		raw = 0
	}
	return st.Size(), raw, true
}

// dropInstallerFile handles a file dropped while step 1 is shown: an image
// file is a local image, anything else an installer file.
func (s *imageStep) dropInstallerFile(u fyne.URI) {
	if u.Scheme() == "file" && isLocalImage(u.Name()) {
		s.useLocal(u.Path())
		return
	}
	go func() {
		data, err := readInstallerURI(u)
		s.ui.do(func() {
			if err != nil {
				s.ui.showError("Cannot read "+u.Name(), err)
				return
			}
			s.loadInstallerFile(u.Name(), data)
		})
	}()
}

// startCheck asks the factory, in the background, whether it offers the
// choice's version, overlay and extensions (with "did you mean"), and
// whether it can be reached at all. Only the latest check is shown.
func (s *imageStep) startCheck(c *imageChoice) {
	s.checkSeq++
	seq := s.checkSeq
	if s.checkDue != nil {
		s.checkDue.Stop()
	}
	s.check.Importance = widget.MediumImportance
	s.check.Show()
	switch {
	case c == nil:
		s.check.Hide()
		return
	case c.LocalPath != "":
		s.check.SetText("A local image needs no Image Factory.")
		s.offline.Hide()
		return
	}
	s.check.SetText("Checking with the Image Factory…")
	choice := *c
	s.checkDue = time.AfterFunc(checkDelay, func() {
		if s.ui.ctx.Err() != nil {
			return // the window is closed
		}
		ctx, cancel := context.WithTimeout(s.ui.ctx, 2*factory.APITimeout)
		defer cancel()
		err := checkChoice(ctx, s.ui.deps.Factory, &choice)
		s.ui.do(func() {
			if seq == s.checkSeq {
				s.showCheck(&choice, err)
			}
		})
	})
}

// checkChoice checks a profile against the factory's lists, and the
// version of an image known by schematic ID only.
func checkChoice(ctx context.Context, f *factory.Client, c *imageChoice) error {
	if c.Profile != nil {
		return f.ValidateProfile(ctx, *c.Profile)
	}
	versions, err := f.Versions(ctx)
	if err != nil {
		return err
	}
	for _, v := range versions {
		if v == c.Version {
			return nil
		}
	}
	newest := "none"
	if len(versions) > 0 {
		newest = versions[len(versions)-1]
	}
	return fmt.Errorf("%w %s at %s (newest: %s)", factory.ErrUnknownVersion, c.Version, f.BaseURL(), newest)
}

// showCheck shows the factory's verdict (UI goroutine): an unknown name
// blocks Next; an unreachable factory shows what still works.
func (s *imageStep) showCheck(c *imageChoice, err error) {
	switch {
	case err == nil:
		s.offline.Hide()
		s.blockOffline(false)
		s.check.Importance = widget.SuccessImportance
		what := "Talos " + c.Version
		if c.Profile != nil {
			if c.Profile.Overlay.Name != "" {
				what += ", overlay " + c.Profile.Overlay.Name
			}
			if n := len(c.Profile.Extensions); n > 0 {
				what += ", " + strings.Join(c.Profile.Extensions, ", ")
			}
		}
		s.check.SetText("✓ The Image Factory offers " + what + ".")
	case errors.Is(err, factory.ErrUnreachable):
		s.check.SetText("")
		s.check.Hide()
		s.showOffline()
	default:
		s.offline.Hide()
		s.check.SetText("")
		s.check.Hide()
		if errors.Is(err, factory.ErrUnknownVersion) && !s.customRef {
			s.version.SetValidationError(err) // no check mark on a version the factory lacks
		}
		s.problem.SetText(errorText(err))
		s.problem.Show()
		s.next.Disable()
	}
}

// showOffline shows the banner for an unreachable factory: what still
// works, including whether the chosen image is cached (UI goroutine).
func (s *imageStep) showOffline() {
	cached := "this image is not cached: it needs the factory"
	if s.ui.session.ImageCached() {
		cached = "this image is cached and flashes offline"
	}
	s.offline.SetText(fmt.Sprintf("⚠ The Image Factory (%s) cannot be reached, so names and versions are not checked. Still works: images already in the cache (%s), local image files (\"Use a local image file…\"), and step 4 (nodes).",
		s.ui.deps.Factory.BaseURL(), cached))
	s.offline.Show()
	s.blockOffline(s.choice != nil && s.choice.LocalPath == "" && !s.ui.session.ImageCached())
}

// offlineReason is why Next is off while the factory cannot be reached and
// the chosen image is not cached ("" when it is not off for that).
func (s *imageStep) offlineReason() string {
	if !s.offlineBlocks {
		return ""
	}
	return fmt.Sprintf("This image must be downloaded and the Image Factory (%s) cannot be reached, so it cannot be flashed now: choose a cached image or a local image file, or choose it again once the factory answers.", s.ui.deps.Factory.BaseURL())
}

// blockOffline turns Next off (with the reason) or on again as the
// factory's reachability and the cache say (UI goroutine).
func (s *imageStep) blockOffline(block bool) {
	was := s.offlineBlocks
	s.offlineBlocks = block
	switch {
	case block:
		s.next.Disable()
		s.problem.SetText(s.offlineReason())
		s.problem.Show()
	case was:
		s.next.Enable()
		s.problem.Hide()
	}
	if was != block && s.ui.flash != nil {
		s.ui.flash.refreshSummary()
	}
}
