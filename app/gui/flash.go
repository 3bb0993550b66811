package gui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
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
// progress, cancel, and "flash another".
type flashStep struct {
	ui      *UI
	content fyne.CanvasObject

	summary *widget.Label
	bars    map[imaging.Stage]*stageBar
	status  *widget.Label
	start   *widget.Button
	cancel  *widget.Button
	another *widget.Button
	toNodes *widget.Button
	running context.CancelFunc
	// flashed mirrors Session.Flashed for nodes.go until it observes the
	// session itself.
	flashed  []imageChoice
	finished bool // the last flash ended (status says how)
}

// stageBar is one progress row: name, bar, "12 MiB of 80 MiB · 5 MiB/s · 10 seconds left".
type stageBar struct {
	bar    *widget.ProgressBar
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
		b := &stageBar{bar: widget.NewProgressBar(), detail: widget.NewLabel("waiting")}
		b.detail.Truncation = fyne.TextTruncateEllipsis
		s.bars[st.stage] = b
		grid.Add(widget.NewLabelWithStyle(st.name, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true}))
		grid.Add(container.NewVBox(b.bar, b.detail))
	}
	s.status = wrapLabel("")
	s.start = widget.NewButtonWithIcon("Flash", theme.MediaPlayIcon(), s.askConfirm)
	s.start.Importance = widget.HighImportance
	s.cancel = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), s.Cancel)
	s.cancel.Disable()
	s.another = widget.NewButtonWithIcon("Flash another card", theme.ContentAddIcon(), s.flashAnother)
	s.another.Hide()
	s.toNodes = widget.NewButtonWithIcon("Next: configure nodes  →", theme.ComputerIcon(), func() { ui.tabs.SelectIndex(tabNodes) })
	s.toNodes.Hide()

	s.content = container.NewBorder(
		container.NewVBox(heading("Write the card"), s.summary, widget.NewSeparator()),
		container.NewVBox(s.status, container.NewHBox(s.start, s.cancel, layout.NewSpacer(), s.another, s.toNodes)),
		nil, nil, container.NewVScroll(grid))
	s.refreshSummary()
	ui.session.AddListener(func(c Change) {
		if c == ChangeChoice || c == ChangeDisk {
			s.refreshSummary()
		}
	})
	return s
}

// refreshSummary names what will be written where (UI goroutine).
func (s *flashStep) refreshSummary() {
	c, d := s.ui.session.Choice(), s.ui.session.Disk()
	img := "no image chosen (step 1)"
	if c != nil {
		img = fmt.Sprintf("Talos %s, %s, schematic %s", c.Version, c.Label, factory.ShortID(c.SchematicID))
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

// askConfirm shows the last chance to back out, naming the device.
func (s *flashStep) askConfirm() {
	c, d := s.ui.session.Choice(), s.ui.session.Disk()
	if c == nil || d == nil {
		s.refreshSummary()
		return
	}
	choice, disk := *c, *d
	msg := fmt.Sprintf("Everything on\n\n    %s  (%s, %s)\n\nwill be erased and replaced with Talos %s (%s).", disk.Path, disk.Description(), disk.SizeHuman, choice.Version, choice.Label)
	if s.ui.deps.NeedsElevation(disk.Path) {
		msg += "\n\nWriting to the card needs administrator rights: you will be asked for your password."
	}
	confirm := dialog.NewConfirm("Erase "+disk.Path+"?", msg, func(ok bool) {
		if ok {
			s.begin(choice, disk)
		}
	}, s.ui.Window)
	confirm.SetConfirmText("Erase and flash")
	confirm.SetDismissText("Keep the card")
	confirm.Show()
}

// begin starts the flash in the background (UI goroutine).
func (s *flashStep) begin(choice imageChoice, disk devices.Disk) {
	ctx, cancel := context.WithCancel(s.ui.ctx)
	s.running, s.finished = cancel, false
	for _, b := range s.bars {
		b.bar.SetValue(0)
		b.detail.SetText("waiting")
	}
	s.start.Disable()
	s.cancel.Enable()
	s.another.Hide()
	s.toNodes.Hide()
	s.status.Importance = widget.MediumImportance
	s.status.SetText("Preparing " + choice.FileName() + "…")
	go func() {
		out, err := s.run(ctx, choice, disk)
		cancel()
		s.ui.do(func() { s.finish(choice, disk, out, err) })
	}()
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
		Image: &c, Device: disk.Path, Cache: deps.Cache, Factory: deps.Factory,
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
	b := s.bars[p.Stage]
	if b == nil {
		return
	}
	if p.Total > 0 {
		b.bar.SetValue(float64(p.Done) / float64(p.Total))
	}
	b.detail.SetText(progressText(p))
	switch p.Stage {
	case imaging.StageWrite:
		s.status.SetText("Writing the card…")
		s.bars[imaging.StageDownload].bar.SetValue(1)
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

// finish shows the outcome (UI goroutine).
func (s *flashStep) finish(c imageChoice, disk devices.Disk, out *plan.Outcome, err error) {
	s.running, s.finished = nil, true
	s.cancel.Disable()
	s.start.Enable()
	s.another.Show()
	if err != nil {
		s.status.Importance = widget.DangerImportance
		if errors.Is(err, context.Canceled) {
			s.status.SetText("Cancelled. " + disk.Path + " is incomplete and will not boot: flash it again before using it.")
			return
		}
		s.status.SetText("Failed: " + disk.Path + " is incomplete and will not boot.")
		s.ui.showError("Flashing "+disk.Path+" failed", err)
		return
	}
	for st, b := range s.bars {
		b.bar.SetValue(1)
		if st == imaging.StageDownload && b.detail.Text == "waiting" {
			b.detail.SetText("cached")
		}
	}
	s.status.Importance = widget.SuccessImportance
	verified := "written"
	if out.Verified {
		verified = "written and verified"
	}
	text := fmt.Sprintf("%s %s (%s, SHA-256 %s). Put it in the Pi and power it on, then configure it under Nodes.",
		disk.Path, verified, humanize.IBytes(uint64(out.Bytes)), factory.ShortID(out.SHA256))
	for _, n := range out.Notes {
		text += "\n" + n
	}
	s.status.SetText(text)
	s.toNodes.Show()
	s.flashed = append(s.flashed, c)
	s.ui.session.AddFlashed(Flashed{Image: c, Device: disk.Path, Result: out.Result, CachePath: out.CachePath, At: time.Now()})
}

// flashAnother keeps the image (cached) and goes back to the card list.
func (s *flashStep) flashAnother() {
	for _, b := range s.bars {
		b.bar.SetValue(0)
		b.detail.SetText("waiting")
	}
	s.status.Importance = widget.MediumImportance
	s.status.SetText("Insert the next card and select it. The image is cached: no second download.")
	s.another.Hide()
	s.toNodes.Hide()
	s.ui.tabs.SelectIndex(tabTarget) // the card list refreshes when shown
}
