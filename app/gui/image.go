package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/widget"
	"github.com/dustin/go-humanize"
	"github.com/talosflash/talosflash/app/plan"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
)

// imageChoice is the image to flash, resolved the same way as in the CLI.
type imageChoice = plan.Image

// imageStep is step 1: role/profile or installer reference -> schematic,
// ID, version, image size.
type imageStep struct {
	ui      *UI
	content fyne.CanvasObject

	profile   *widget.Select
	version   *widget.Entry
	ref       *widget.Entry
	yaml      *widget.Label
	id        *widget.Label // selectable, so it can be copied
	size      *widget.Label
	problem   *widget.Label
	next      *widget.Button
	customRef bool // the choice came from the installer field/file

	notes  *widget.Label // what the image implies for the node's config (plan.ImageWarnings)
	choice *imageChoice  // nil while invalid; shared as Session.Choice
}

const refChoiceLabel = "(installer image below)"

func newImageStep(ui *UI) *imageStep {
	s := &imageStep{ui: ui}
	names := make([]string, 0, len(ui.deps.Profiles))
	for _, p := range ui.deps.Profiles {
		names = append(names, p.Name)
	}
	s.profile = widget.NewSelect(names, func(string) { s.customRef = false; s.update() })
	s.profile.PlaceHolder = "choose a role"

	s.version = widget.NewEntry()
	s.version.Validator = factory.ValidateVersion
	s.version.OnChanged = func(string) {
		if !s.customRef {
			s.update()
		}
	}

	s.ref = widget.NewEntry()
	s.ref.SetPlaceHolder("factory.talos.dev/metal-installer/<schematic-id>:" + factory.DefaultTalosVersion)
	s.ref.OnSubmitted = func(string) { s.useRef() }
	useRef := widget.NewButton("Use", s.useRef)
	openFile := widget.NewButton("Open installer file…", s.openInstallerFile)

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
	s.next = widget.NewButton("Next: choose the card  →", func() { ui.tabs.SelectIndex(tabTarget) })
	s.next.Importance = widget.HighImportance

	form := widget.NewForm(
		widget.NewFormItem("Role / profile", s.profile),
		widget.NewFormItem("Talos version", s.version),
		widget.NewFormItem("or installer image", container.NewBorder(nil, nil, nil, container.NewHBox(useRef, openFile), s.ref)),
		widget.NewFormItem("Schematic ID", s.id),
		widget.NewFormItem("Image size", s.size),
	)
	yamlBox := container.NewBorder(heading("Schematic (sent to the Image Factory)"), nil, nil, nil,
		container.NewScroll(s.yaml))
	s.content = container.NewBorder(
		container.NewVBox(heading("Which node is this card for?"), form, s.problem, s.notes),
		container.NewHBox(layout.NewSpacer(), s.next),
		nil, nil, yamlBox)
	ui.session.AddListener(func(c Change) {
		if c == ChangeFlashed {
			s.imageDownloaded(ui.session.Flashed()[len(ui.session.Flashed())-1])
		}
	})
	return s
}

func (s *imageStep) selectFirst() {
	if len(s.profile.Options) > 0 {
		s.profile.SetSelected(s.profile.Options[0])
	}
}

// update recomputes the choice from the profile select and version entry.
func (s *imageStep) update() {
	p, err := factory.FindProfile(s.ui.deps.Profiles, s.profile.Selected)
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
	p.TalosVersion = s.version.Text
	c, err := plan.FromProfile(context.Background(), s.ui.deps.Factory, p, false) // offline
	s.setChoice(c, err)
}

// useRef takes the installer reference typed into the field.
func (s *imageStep) useRef() {
	ref, err := factory.ParseInstallerRef(strings.TrimSpace(s.ref.Text))
	if err != nil {
		s.setChoice(nil, err)
		return
	}
	c := plan.FromInstallerRef(s.ui.deps.Factory, ref, factory.DefaultArch)
	c.Label = "installer " + ref.String()
	s.useInstaller(c)
}

func (s *imageStep) useInstaller(c *imageChoice) {
	ref := c.Installer
	s.customRef = true
	s.ref.SetText(ref.String())
	s.profile.ClearSelected()
	s.profile.PlaceHolder = refChoiceLabel
	s.profile.Refresh()
	s.customRef = true // ClearSelected ran the select callback
	s.version.SetText(ref.Version)
	s.setChoice(c, nil)
	if c.Schematic == nil {
		go s.lookupSchematic(c)
	}
}

// lookupSchematic asks the factory for the schematic behind an installer
// reference (as the CLI does), so its YAML and the extension notes show; an
// older factory can't answer, which leaves the ID-only view.
func (s *imageStep) lookupSchematic(c *imageChoice) {
	found := *c
	found.LookupSchematic(context.Background(), s.ui.deps.Factory)
	if found.Schematic == nil {
		return
	}
	s.ui.do(func() {
		if s.choice == c { // still the user's choice
			s.setChoice(&found, nil)
		}
	})
}

// openInstallerFile reads a talos/installer-<role>.yaml.
func (s *imageStep) openInstallerFile() {
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil || r == nil {
			return
		}
		defer r.Close()
		data, err := io.ReadAll(io.LimitReader(r, 1<<20))
		if err != nil {
			s.ui.showError("Cannot read the installer file", err)
			return
		}
		s.loadInstallerFile(r.URI().Name(), data)
	}, s.ui.Window)
	d.Show()
}

func (s *imageStep) loadInstallerFile(name string, data []byte) {
	c, err := plan.FromInstallerData(s.ui.deps.Factory, name, data, factory.DefaultArch)
	var mismatch *factory.SchematicMismatchError
	switch {
	case errors.As(err, &mismatch):
		s.ui.showError("Installer file "+name+" contradicts itself", err)
		return
	case err != nil:
		s.ui.showError("Cannot use "+name, err)
		return
	}
	s.useInstaller(c)
}

// setChoice shows the choice (or the problem) and looks up the image size
// in the cache.
func (s *imageStep) setChoice(c *imageChoice, problem error) {
	s.choice = c
	s.ui.session.SetChoice(c)
	if problem != nil {
		s.problem.SetText(errorText(problem))
		s.problem.Show()
	} else {
		s.problem.Hide()
	}
	s.showNotes(c)
	if c == nil {
		s.next.Disable()
		s.id.SetText("")
		s.yaml.SetText("")
		s.size.SetText("")
		return
	}
	s.next.Enable()
	s.id.SetText(c.SchematicID)
	if c.Schematic != nil {
		y, err := c.Schematic.Marshal()
		if err != nil {
			y = []byte(err.Error())
		}
		s.yaml.SetText(strings.TrimSpace(string(y)))
	} else {
		s.yaml.SetText("(only the schematic ID is known: the installer image does not include the schematic)")
	}
	s.size.SetText("checking the cache…")
	go s.lookupSize(*c)
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
	text, raw := "known after the download (not cached yet)", int64(0)
	if comp, r, ok := cachedSizes(s.ui.deps.Cache, c.CacheKey()); ok {
		text, raw = sizeText(comp, r, true), r
	}
	s.ui.do(func() {
		if s.choice == nil || s.choice.CacheKey() != c.CacheKey() {
			return // the choice changed meanwhile
		}
		s.ui.session.SetImageSize(c.CacheKey(), raw)
		s.size.SetText(text)
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
	s.ui.session.SetImageSize(f.Image.CacheKey(), f.Result.Bytes)
	s.size.SetText(sizeText(st.Size(), f.Result.Bytes, true))
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
	p, err := c.Path(key)
	if err != nil {
		return 0, 0, false
	}
	return fileSizes(p)
}

func fileSizes(path string) (compressed, raw int64, ok bool) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
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

// dropInstallerFile handles a file dropped while step 1 is shown.
func (s *imageStep) dropInstallerFile(u fyne.URI) {
	go func() {
		data, err := readURI(u, 1<<20)
		s.ui.do(func() {
			if err != nil {
				s.ui.showError("Cannot read "+u.Name(), err)
				return
			}
			s.loadInstallerFile(u.Name(), data)
		})
	}()
}
