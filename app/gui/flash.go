package gui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/dustin/go-humanize"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// flashStep is step 3: confirm, then download -> write -> verify with
// progress and cancel, then the finish screen: what the card now holds
// (how to label it), the card made safe to remove, and "flash another".
type flashStep struct {
	ui      *UI
	content fyne.CanvasObject

	summary *widget.Label
	bars    map[imaging.Stage]*stageBar
	touched bool // this flash wrote to the card (progress says so)
	status  *widget.Label
	start   *keyButton
	cancel  *keyButton
	another *keyButton
	toNodes *keyButton
	running context.CancelFunc

	// The finish screen, shown after a successful flash.
	done      *fyne.Container
	doneTitle *widget.Label
	doneBody  *widget.Label
	eject     *widget.Label

	finished  bool // the last flash ended (status says how)
	succeeded bool // ... and the card is written and verified
	ejected   bool // the eject step after a success is over
	// What the finish screen is about: another card or image chosen
	// meanwhile clears it (a refresh of the same card does not).
	doneDevice, doneKey string
}

// stageBar is one progress row: name, bar, "12 MiB of 80 MiB · 5 MiB/s · 10 seconds left".
type stageBar struct {
	bar    *bar
	detail *widget.Label
}

func newFlashStep(ui *UI) *flashStep {
	s := &flashStep{ui: ui, bars: map[imaging.Stage]*stageBar{}}
	s.summary = wrapLabel("")
	grid := container.New(layout.NewFormLayout())
	for _, st := range []struct {
		stage imaging.Stage
		name  string
	}{{imaging.StageDownload, "Download"}, {imaging.StageWrite, "Write"}, {imaging.StageVerify, "Verify"}} {
		b := &stageBar{bar: newBar(), detail: widget.NewLabel("waiting")}
		b.detail.Truncation = fyne.TextTruncateEllipsis
		s.bars[st.stage] = b
		grid.Add(widget.NewLabelWithStyle(st.name, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true}))
		grid.Add(container.NewVBox(b.bar, b.detail))
	}
	s.status = wrapLabel("")
	s.start = primaryButton(ui, "Flash", theme.MediaPlayIcon(), s.askConfirm)
	s.cancel = newKeyButton(ui, "Cancel", theme.CancelIcon(), s.Cancel)
	s.cancel.Disable()
	s.another = newKeyButton(ui, "Flash another card", theme.ContentAddIcon(), s.flashAnother)
	s.another.Hide()
	s.toNodes = primaryButton(ui, "Next: configure nodes  →", theme.ComputerIcon(), func() { ui.tabs.SelectIndex(tabNodes) })
	s.toNodes.Hide()

	s.doneTitle = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	s.doneTitle.SizeName = theme.SizeNameSubHeadingText
	s.doneTitle.Importance = widget.SuccessImportance
	s.doneBody = wrapLabel("")
	s.eject = wrapLabel("")
	s.done = container.NewVBox(s.doneTitle, s.doneBody, s.eject, widget.NewSeparator())
	s.done.Hide()

	// Primary actions sit bottom-right in every step; Cancel and
	// "Flash another" on the left.
	s.content = container.NewBorder(
		container.NewVBox(heading("Write the card"), s.summary, widget.NewSeparator()),
		container.NewVBox(s.status, container.NewHBox(s.cancel, s.another, layout.NewSpacer(), s.toNodes, s.start)),
		nil, nil, container.NewVScroll(container.NewVBox(s.done, grid)))
	s.refreshSummary()
	ui.session.AddListener(func(c Change) {
		switch c {
		case ChangeChoice, ChangeDisk, ChangeImageSize:
			s.leaveFinish(c)
			s.refreshSummary()
		}
	})
	return s
}

// leaveFinish clears the finish screen once another card or image is
// chosen, so Flash is offered again for it.
func (s *flashStep) leaveFinish(c Change) {
	if !s.succeeded {
		return
	}
	d, im := s.ui.session.Disk(), s.ui.session.Choice()
	if (c == ChangeDisk && d != nil && d.Path != s.doneDevice) || (c == ChangeChoice && im != nil && im.CacheKey() != s.doneKey) {
		s.finished, s.succeeded = false, false
		s.resetProgress()
	}
}

// primary is the step's Enter action: Flash, or after a success the way on.
func (s *flashStep) primary() *keyButton {
	if s.toNodes.Visible() {
		return s.toNodes
	}
	return s.start
}

// refreshSummary names what will be written where (UI goroutine).
func (s *flashStep) refreshSummary() {
	c, d := s.ui.session.Choice(), s.ui.session.Disk()
	img := "no image chosen (step 1)"
	if c != nil {
		img = imageSummary(c)
		switch {
		case c.LocalPath != "":
		case s.ui.session.ImageCached():
			img += " (cached: no download)"
		default:
			img += " (downloaded from the Image Factory first)"
		}
	}
	card := "no card chosen (step 2)"
	if d != nil {
		card = fmt.Sprintf("%s, %s, %s", d.Path, d.Description(), d.SizeHuman)
	}
	s.summary.SetText("Image: " + img + "\nCard:  " + card)
	if s.running == nil {
		if c != nil && d != nil {
			s.start.Enable()
		} else {
			s.start.Disable()
		}
	}
}

// imageSummary is one line naming an image: version, role or source, schematic.
func imageSummary(c *imageChoice) string {
	if c.LocalPath != "" {
		return "local file " + c.LocalPath
	}
	return fmt.Sprintf("Talos %s, %s, schematic %s", c.Version, c.Label, factory.ShortID(c.SchematicID))
}

// cardLabel is what to write on the card: its role, else where it came from.
func cardLabel(c *imageChoice) string {
	switch {
	case c.Role != "":
		return c.Role
	case c.LocalPath != "":
		return filepath.Base(c.LocalPath)
	}
	return "schematic " + factory.ShortID(c.SchematicID)
}

// askConfirm shows the last chance to back out, naming the device.
func (s *flashStep) askConfirm() {
	c, d := s.ui.session.Choice(), s.ui.session.Disk()
	if c == nil || d == nil || s.running != nil {
		s.refreshSummary()
		return
	}
	choice, disk := *c, *d
	what := fmt.Sprintf("Talos %s (%s)", choice.Version, choice.Label)
	if choice.LocalPath != "" {
		what = choice.LocalPath
	}
	msg := fmt.Sprintf("Everything on\n\n    %s  (%s, %s)\n\nwill be erased and replaced with %s.", disk.Path, disk.Description(), disk.SizeHuman, what)
	if s.ui.deps.NeedsElevation(disk.Path) {
		msg += "\n\nWriting to the card needs administrator rights: you will be asked for your password."
	}
	ok := primaryButton(s.ui, "Erase and flash", theme.MediaPlayIcon(), func() { s.begin(choice, disk) })
	s.ui.showModal("Erase "+disk.Path+"?", wrapLabel(msg), "Keep the card", ok, fyne.NewSize(560, 0))
}

// begin starts the flash in the background (UI goroutine).
func (s *flashStep) begin(choice imageChoice, disk devices.Disk) {
	ctx, cancel := context.WithCancel(s.ui.ctx)
	s.running, s.finished, s.succeeded, s.ejected = cancel, false, false, false
	s.resetProgress()
	s.start.Disable()
	s.cancel.Enable()
	s.status.SetText("Preparing " + choice.FileName() + "…")
	go func() {
		out, err := s.run(ctx, choice, disk)
		cancel()
		s.ui.do(func() { s.finish(choice, disk, out, err) })
	}()
}

// resetProgress empties the bars and hides the finish screen.
func (s *flashStep) resetProgress() {
	s.touched = false
	for _, b := range s.bars {
		b.bar.SetValue(0)
		b.detail.SetText("waiting")
	}
	s.done.Hide()
	s.start.Show()
	s.another.Hide()
	s.toNodes.Hide()
	s.status.Importance = widget.MediumImportance
	s.status.SetText("")
}

// Cancel stops the running flash. The imaging package keeps only complete
// images in the cache; the card is reported incomplete.
func (s *flashStep) Cancel() {
	if s.running != nil {
		s.running()
		s.status.SetText("Cancelling…")
	}
}

// run does the work off the UI goroutine: the flash job the CLI runs too.
func (s *flashStep) run(ctx context.Context, c imageChoice, disk devices.Disk) (*plan.Outcome, error) {
	deps := s.ui.deps
	return plan.Flash(ctx, plan.Job{
		Image: &c, Device: disk.Path, Cache: deps.Cache, Factory: deps.Factory, Safety: deps.Safety,
		Open: deps.Open, Elevate: deps.ElevatedCommand, NeedsElevation: deps.NeedsElevation,
		Progress: func(p imaging.Progress) { s.ui.do(func() { s.showProgress(p) }) },
		Status:   func(msg string) { s.setStatus(sentence(msg)) },
	})
}

func (s *flashStep) setStatus(text string) { s.ui.do(func() { s.status.SetText(text) }) }

// showProgress updates one stage's bar (UI goroutine).
func (s *flashStep) showProgress(p imaging.Progress) {
	if p.Stage == imaging.StageDone {
		return
	}
	if p.Stage == imaging.StageBuild {
		s.status.SetText("The Image Factory is building this image (the first time a schematic and version are asked for). This can take a few minutes…")
		s.bars[imaging.StageDownload].detail.SetText("waiting for the factory to build the image")
		return
	}
	b := s.bars[p.Stage]
	if b == nil {
		return
	}
	if p.Stage == imaging.StageVerify || p.Stage == imaging.StageWrite && p.Done > 0 {
		s.touched = true // the card no longer holds what it held
	}
	if p.Total > 0 {
		b.bar.SetValue(float64(p.Done) / float64(p.Total))
	}
	b.detail.SetText(progressText(p))
	switch p.Stage {
	case imaging.StageDownload:
		s.status.SetText("Downloading the image…")
	case imaging.StageWrite:
		s.status.SetText("Writing the card…")
		if d := s.bars[imaging.StageDownload]; d.bar.Value < 1 {
			d.bar.SetValue(1)
			if d.detail.Text == "waiting" {
				d.detail.SetText("cached: no download")
			}
		}
	case imaging.StageVerify:
		s.status.SetText("Reading the card back to verify it…")
	}
}

// progressText is "12 MiB of 80 MiB · 5.1 MiB/s · 10 seconds left".
func progressText(p imaging.Progress) string {
	t := humanize.IBytes(uint64(max(p.Done, 0)))
	if p.Total > 0 {
		t += " of " + humanize.IBytes(uint64(p.Total))
		if p.Compressed {
			t += " (compressed)"
		}
	}
	if p.Rate > 0 {
		t += " · " + humanize.IBytes(uint64(p.Rate)) + "/s"
	}
	switch {
	case p.Total > 0 && p.Done >= p.Total:
		t += " · done"
	case p.ETA >= time.Second:
		now := time.Now()
		t += " · " + humanize.RelTime(now, now.Add(p.ETA), "left", "")
	}
	return t
}

// cardState says what a failed or cancelled flash left on the card: only a
// card that was written to is "incomplete" (a refusal, a card too small or
// a download that failed before the write left it as it was).
func cardState(err error, touched bool) string {
	var writeErr *imaging.WriteError
	switch {
	case errors.Is(err, imaging.ErrVerifyMismatch):
		return "does not read back as the image: do not use it (try another card)."
	case errors.Is(err, imaging.ErrIncomplete), errors.As(err, &writeErr):
		return "is incomplete and will not boot: flash it again before using it."
	case touched:
		return "was written but not verified: flash it again before using it."
	}
	return "was not changed."
}

// finish shows the outcome (UI goroutine).
func (s *flashStep) finish(c imageChoice, disk devices.Disk, out *plan.Outcome, err error) {
	s.running, s.finished = nil, true
	s.cancel.Disable()
	s.start.Enable()
	s.another.Show()
	if err != nil {
		s.status.Importance = widget.DangerImportance
		state := cardState(err, s.touched)
		if errors.Is(err, context.Canceled) {
			s.status.SetText("Cancelled: " + disk.Path + " " + state)
			return
		}
		s.status.SetText("Failed: " + disk.Path + " " + state)
		s.ui.showError("Flashing "+disk.Path+" failed", err)
		return
	}
	s.succeeded, s.doneDevice, s.doneKey = true, disk.Path, c.CacheKey()
	for _, b := range s.bars {
		b.bar.SetValue(1)
		if b.detail.Text == "waiting" {
			b.detail.SetText("skipped")
		}
	}
	verified := "written (not verified)"
	if out.Verified {
		verified = "written and verified"
	}
	s.doneTitle.SetText("✓ Card ready. Label it: " + cardLabel(&c))
	body := fmt.Sprintf("%s %s: %s, SHA-256 %s", disk.Path, verified, humanize.IBytes(uint64(out.Bytes)), factory.ShortID(out.SHA256))
	if c.LocalPath == "" {
		body += fmt.Sprintf("\nTalos %s · %s · schematic %s", c.Version, c.Label, c.SchematicID)
	} else {
		body += "\nImage " + c.LocalPath
	}
	for _, n := range out.Notes {
		body += "\n" + n
	}
	s.doneBody.SetText(body)
	s.eject.Importance = widget.MediumImportance
	s.eject.SetText("Making the card safe to remove…")
	s.done.Show()
	s.status.Importance = widget.SuccessImportance
	s.status.SetText("Put the card in the Pi and power it on, then give it its config under Nodes.")
	s.toNodes.Show()
	s.start.Hide() // the same card again: "Flash another card" first
	s.ui.session.AddFlashed(Flashed{Image: c, Device: disk.Path, Result: out.Result, CachePath: out.CachePath, At: time.Now()})
	go func() {
		e := s.ui.deps.Eject(s.ui.ctx, disk.Path)
		s.ui.do(func() { s.showEjected(e) })
	}()
}

// showEjected says whether the card can be pulled out (UI goroutine).
func (s *flashStep) showEjected(e devices.Ejected) {
	s.ejected = true
	if !s.done.Visible() {
		return // "Flash another card" was pressed meanwhile
	}
	if e.PoweredOff {
		s.eject.Importance = widget.SuccessImportance
		s.eject.SetText("Safe to remove: the card was flushed and powered off.")
		return
	}
	s.eject.Importance = widget.MediumImportance
	switch {
	case e.PowerOffFailed:
		s.eject.Importance = widget.WarningImportance
		s.eject.SetText("Written and verified, but not yet safe to remove: " + e.Note + ".")
	case !e.Flushed:
		s.eject.SetText("Written and synced; " + e.Note + ".")
	default:
		s.eject.SetText("Safe to remove (" + e.Note + ").")
	}
}

// flashAnother starts over from the role choice: no card selected, no
// progress or result of the last card left.
func (s *flashStep) flashAnother() {
	s.finished, s.succeeded = false, false
	s.resetProgress()
	s.ui.session.SetDisk(nil)
	s.ui.tabs.SelectIndex(tabImage)
	s.refreshSummary()
}
