package gui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/internal/printable"
)

// flashStep is step 3: confirm, then download -> write -> verify with
// progress and cancel, then the finish screen: what the cards now hold
// (how to label them), the cards made safe to remove, and "flash another".
// Several cards are written from one download and one decode, each with
// its own bars and result; one failing does not stop the others. Every
// line it shows is rendered from the Session (viewFlash in flashview.go).
type flashStep struct {
	ui      *UI
	content fyne.CanvasObject

	summary  *widget.Label
	download *stageBar
	dlRow    []fyne.CanvasObject // the Download row's label and bar: hidden for a local file
	grid     *fyne.Container
	cards    []*cardProgress // one per card of the attempt (or the chosen cards before one)
	laidOut  string          // the card paths the rows are for
	status   *widget.Label
	start    *keyButton
	cancel   *keyButton
	another  *keyButton
	toNodes  *keyButton
	all      *keyButton // "Flash all cards…" (flashall.go), nil without an inventory
	running  context.CancelFunc

	// The finish screen, shown after a flash that wrote at least one card.
	done      *fyne.Container
	doneTitle *widget.Label
	doneBody  *breakLabel // schematic IDs and paths: broken at "/" or ":" only
	eject     *widget.Label
}

// cardProgress is one card's rows: its write and verify bars and result.
type cardProgress struct {
	device string
	write  *stageBar
	verify *stageBar
	result *widget.Label
}

// stageBar is one progress row: name, bar, "12 MiB of 80 MiB · 5 MiB/s · 10 seconds left".
type stageBar struct {
	bar    *bar
	detail *widget.Label
}

func newStageBar() *stageBar {
	b := &stageBar{bar: newBar(), detail: widget.NewLabel("waiting")}
	b.detail.Truncation = fyne.TextTruncateEllipsis
	return b
}

// show sets the bar and its line.
func (b *stageBar) show(v barView) {
	if b.bar.Value != v.Value {
		b.bar.SetValue(v.Value)
	}
	setText(b.detail, textView{Text: v.Detail, Importance: v.Importance})
}

// setText sets a label's text and colour, refreshing only on a change.
func setText(l *widget.Label, t textView) {
	if l.Text == t.Text && l.Importance == t.Importance {
		return
	}
	l.Importance = t.Importance
	l.SetText(t.Text)
}

func newFlashStep(ui *UI) *flashStep {
	s := &flashStep{ui: ui}
	s.summary = wrapLabel("")
	s.download = newStageBar()
	s.grid = container.New(layout.NewFormLayout())
	s.status = wrapLabel("")
	s.start = primaryButton(ui, "Flash", theme.MediaPlayIcon(), s.askConfirm)
	s.cancel = newKeyButton(ui, "Cancel", theme.CancelIcon(), s.Cancel)
	s.cancel.Disable()
	s.another = newKeyButton(ui, "Flash another card", theme.ContentAddIcon(), s.flashAnother)
	s.another.Hide()
	s.toNodes = primaryButton(ui, "Next: configure nodes  →", theme.ComputerIcon(), func() { ui.tabs.SelectIndex(tabNodes) })
	s.toNodes.Hide()
	buttons := []fyne.CanvasObject{s.cancel, s.another, layout.NewSpacer(), s.toNodes}
	if s.all = s.newFlashAllButton(); s.all != nil { // with an inventory (flashall.go)
		buttons = append(buttons, s.all)
	}
	buttons = append(buttons, s.start)

	s.doneTitle = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	s.doneTitle.SizeName = theme.SizeNameSubHeadingText
	s.doneTitle.Importance = widget.SuccessImportance
	s.doneTitle.Wrapping = fyne.TextWrapWord
	s.doneBody = newBreakLabel("")
	s.eject = wrapLabel("")
	s.done = container.NewVBox(s.doneTitle, s.doneBody, s.eject, widget.NewSeparator())
	s.done.Hide()

	// Primary actions sit bottom-right in every step; Cancel and
	// "Flash another" on the left.
	s.content = container.NewBorder(
		container.NewVBox(heading("Write the card"), s.summary, widget.NewSeparator()),
		container.NewVBox(s.status, container.NewHBox(buttons...)),
		nil, nil, container.NewVScroll(container.NewVBox(s.done, s.grid)))
	s.refreshSummary()
	ui.session.AddListener(func(c Change) {
		switch c {
		case ChangeAttempt, ChangeProgress, ChangeChoice, ChangeDisk, ChangeImageSize, ChangeNode, ChangeFlashed:
			s.refreshSummary()
		}
	})
	return s
}

// view is what the step shows now.
func (s *flashStep) view() flashView {
	return viewFlash(s.ui.session.flashInputs(s.ui.image.offlineReason()))
}

// refreshSummary shows the Session as viewFlash renders it (UI goroutine).
func (s *flashStep) refreshSummary() {
	if s.ui.image == nil {
		return // building the window
	}
	v := s.view()
	if s.summary.Text != v.Summary {
		s.summary.SetText(v.Summary)
	}
	s.layoutCards(v.Cards)
	for _, o := range s.dlRow {
		if v.ShowDownload {
			o.Show()
		} else {
			o.Hide()
		}
	}
	s.download.show(v.Download)
	for i, c := range v.Cards {
		cp := s.cards[i]
		cp.write.show(c.Write)
		cp.verify.show(c.Verify)
		setText(cp.result, c.Result)
		if c.Result.Text == "" {
			cp.result.Hide()
		} else {
			cp.result.Show()
		}
	}
	setText(s.status, v.Status)
	if v.Done {
		setText(s.doneTitle, v.Title)
		if s.doneBody.Text != v.Body {
			s.doneBody.SetText(v.Body)
		}
		setText(s.eject, v.Eject)
		s.done.Show()
	} else {
		s.done.Hide()
	}
	showIf(s.start, v.StartVisible)
	enableIf(s.start, v.StartEnabled)
	enableIf(s.cancel, v.CancelEnabled)
	showIf(s.another, v.AnotherVisible)
	showIf(s.toNodes, v.ToNodesVisible)
	if s.all != nil {
		enableIf(s.all, v.FlashAllEnabled)
	}
}

func showIf(o fyne.CanvasObject, on bool) {
	if on && !o.Visible() {
		o.Show()
	} else if !on && o.Visible() {
		o.Hide()
	}
}

func enableIf(b *keyButton, on bool) {
	if on && b.Disabled() {
		b.Enable()
	} else if !on && !b.Disabled() {
		b.Disable()
	}
}

// layoutCards builds the rows, once per set of cards: Download (not for a
// local file), then each card's Write and Verify (named by card when
// there are several).
func (s *flashStep) layoutCards(cards []cardRowView) {
	var key strings.Builder
	for _, c := range cards {
		key.WriteString(c.Path + "\n")
	}
	if s.grid.Objects != nil && key.String() == s.laidOut {
		return
	}
	s.laidOut = key.String()
	s.grid.RemoveAll()
	s.dlRow = []fyne.CanvasObject{widget.NewLabelWithStyle("Download", fyne.TextAlignTrailing, fyne.TextStyle{Bold: true}), container.NewVBox(s.download.bar, s.download.detail)}
	s.grid.Add(s.dlRow[0])
	s.grid.Add(s.dlRow[1])
	s.cards = nil
	for _, d := range cards {
		cp := &cardProgress{device: d.Path, write: newStageBar(), verify: newStageBar(), result: wrapLabel("")}
		cp.result.Hide()
		writeName, verifyName := "Write", "Verify"
		if len(cards) > 1 {
			writeName, verifyName = "Write "+d.Name, "Verify "+d.Name
		}
		s.grid.Add(widget.NewLabelWithStyle(writeName, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true}))
		s.grid.Add(container.NewVBox(cp.write.bar, cp.write.detail))
		s.grid.Add(widget.NewLabelWithStyle(verifyName, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true}))
		s.grid.Add(container.NewVBox(cp.verify.bar, cp.verify.detail, cp.result))
		s.cards = append(s.cards, cp)
	}
	s.grid.Refresh()
}

// finished says the attempt shown has ended.
func (s *flashStep) finished() bool { return s.ui.session.Attempt().Ended() }

// succeeded says the attempt shown wrote at least one card.
func (s *flashStep) succeeded() bool {
	a := s.ui.session.Attempt()
	return a.Ended() && len(a.Good()) > 0
}

// card is the rows of the card with this path.
func (s *flashStep) card(path string) *cardProgress {
	for _, c := range s.cards {
		if c.device == path {
			return c
		}
	}
	return nil
}

// primary is the step's Enter action: Flash, or after a success the way on.
func (s *flashStep) primary() *keyButton {
	if s.toNodes.Visible() {
		return s.toNodes
	}
	return s.start
}

func cardText(d devices.Disk) string {
	return fmt.Sprintf("%s, %s, %s", d.Path, d.Description(), d.SizeHuman)
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
	case c.ProfileName() != "":
		return c.ProfileName()
	case c.LocalPath != "":
		return filepath.Base(c.LocalPath)
	}
	return "schematic " + factory.ShortID(c.SchematicID)
}

// askConfirm shows the last chance to back out, naming every device, what
// each holds now, and a second card for a node that has one.
func (s *flashStep) askConfirm() {
	c, cards := s.ui.session.Choice(), s.ui.session.Cards()
	if c == nil || len(cards) == 0 || s.running != nil || s.start.Disabled() {
		s.refreshSummary()
		return
	}
	if a := s.ui.session.Attempt(); a != nil && !s.succeeded() {
		s.ui.session.ForgetAttempt() // a new attempt: no "Failed: ..." or old bar of the last one
	}
	choice, disks := *c, slices.Clone(cards)
	what := fmt.Sprintf("Talos %s (%s)", choice.Version, choice.Label)
	if choice.LocalPath != "" {
		what = choice.LocalPath
	}
	var list strings.Builder
	elevated := false
	for _, d := range disks {
		fmt.Fprintf(&list, "    %s  (%s, %s)\n", d.Path, d.Description(), d.SizeHuman)
		if h := s.ui.target.holds[d.Path]; h != "" {
			fmt.Fprintf(&list, "        now holds %s\n", printable.String(h))
		}
		elevated = elevated || s.ui.deps.NeedsElevation(d.Path)
	}
	msg := fmt.Sprintf("Everything on\n\n%s\nwill be erased and replaced with %s.", list.String(), what)
	title := "Erase " + disks[0].Path + "?"
	if len(disks) > 1 {
		msg = fmt.Sprintf("Everything on these %d cards\n\n%s\nwill be erased and replaced with %s.", len(disks), list.String(), what)
		title = fmt.Sprintf("Erase %d cards?", len(disks))
	}
	if elevated {
		msg += "\n\nWriting to the card needs administrator rights: you will be asked for your password once."
	}
	metas, err := s.nodeCardMetas(&choice, len(disks))
	if err != nil {
		s.ui.showError("Cannot write the node onto the card", err)
		return
	}
	if len(metas) > 0 {
		msg += fmt.Sprintf("\n\nThen node %s (%s) is written onto the card.", metas[0].Node, metas[0].Address)
		if prev := flashedFor(otherCards(s.ui.session.Flashed(), disks), metas[0].Node); len(prev) > 0 {
			msg += "\n\n" + secondCardNote(metas[0].Node, prev)
		}
	}
	ok := primaryButton(s.ui, "Erase and flash", theme.MediaPlayIcon(), func() { s.begin(choice, disks, metas, nil) })
	keep := "Keep the card"
	if len(disks) > 1 {
		keep = "Keep the cards"
	}
	s.ui.showModal(title, wrapLabel(msg), keep, ok, fyne.NewSize(min(760, s.ui.Window.Canvas().Size().Width-40), 0))
}

// begin starts the flash in the background (UI goroutine): choice on
// every card, or with images ("Flash all cards", flashall.go) each card's
// own image, metas each card's node.
func (s *flashStep) begin(choice imageChoice, disks []devices.Disk, metas []*plan.CardMeta, images []*plan.Image) {
	ctx, cancel := context.WithCancel(s.ui.ctx)
	s.running = cancel
	a := &Attempt{Image: choice, Images: images, Cards: disks, Metas: metas,
		Cached: len(images) == 0 && choice.LocalPath == "" && s.ui.session.ImageCached()}
	if len(images) > 0 {
		a.Choice = s.ui.session.Choice()
	}
	s.ui.session.StartAttempt(a)
	seq := a.Seq
	go func() {
		out, err := s.run(ctx, seq, choice, disks, metas, images)
		cancel()
		s.ui.do(func() { s.finish(seq, out, err) })
	}()
}

// Cancel stops the running flash. The imaging package keeps only complete
// images in the cache; the card is reported incomplete.
func (s *flashStep) Cancel() {
	if s.running != nil {
		s.running()
		if a := s.ui.session.Attempt(); a != nil {
			s.ui.session.CancelAttempt(a.Seq)
		}
	}
}

// run does the work off the UI goroutine: the flash job the CLI runs too.
// Several cards go in one job (one download, one decode, one elevated
// child: one password prompt). Its reports go to attempt seq only.
func (s *flashStep) run(ctx context.Context, seq int, c imageChoice, disks []devices.Disk, metas []*plan.CardMeta, images []*plan.Image) (*plan.Outcome, error) {
	deps := s.ui.deps
	job := plan.Job{
		Image: &c, Cache: deps.Cache, Factory: deps.Factory, Safety: deps.Safety,
		Open:     deps.Open,
		Progress: func(p imaging.Progress) { s.ui.do(func() { s.ui.session.AttemptProgress(seq, p) }) },
		Status:   func(msg string) { s.ui.do(func() { s.ui.session.AttemptStatus(seq, msg) }) },
		Meta:     metas,  // the node picked in step 1
		Images:   images, // each node's image ("Flash all cards"), nil: c
	}
	job.SetElevation(plan.Elevation{Needs: deps.NeedsElevation, Command: deps.ElevatedCommand, UDisks: deps.UDisks})
	for _, d := range disks {
		job.Devices = append(job.Devices, d.Path)
	}
	return plan.Flash(ctx, job)
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

// finish records the outcome (UI goroutine): the Session's attempt ends,
// the written cards are recorded and made safe to remove.
func (s *flashStep) finish(seq int, out *plan.Outcome, err error) {
	s.running = nil
	s.ui.session.EndAttempt(seq, out, err, time.Now())
	a := s.ui.session.Attempt()
	if a == nil || a.Seq != seq {
		return
	}
	good := a.Good()
	if len(good) == 0 {
		if !cancelled(err) {
			s.ui.showError(failTitle(a.Cards), firstErr(a, err))
		}
		return
	}
	var paths []string
	for _, r := range good {
		paths = append(paths, r.Target)
	}
	go func() {
		var notes []devices.Ejected
		for _, d := range paths {
			notes = append(notes, s.ui.deps.Eject(s.ui.ctx, d))
		}
		s.ui.do(func() { s.ui.session.AttemptEjected(seq, paths, notes) })
	}()
}

// firstErr is the job's error, else the first card's.
func firstErr(a *Attempt, err error) error {
	if err != nil {
		return err
	}
	for _, r := range a.Results {
		if r.Err != nil {
			return r.Err
		}
	}
	return errors.New("no card was written")
}

func verifiedText(r imaging.CardResult) string {
	if heldAlready(r) {
		return "already held the image, verified" // not "written": nothing was
	}
	if r.Verified {
		return "written and verified"
	}
	return "written (not verified)"
}

// heldAlready: the card held the whole image before this flash (every
// unit found identical by the direct read that verifies it): nothing was
// written.
func heldAlready(r imaging.CardResult) bool {
	return r.Bytes > 0 && r.Written == 0 && r.Skipped == r.Bytes
}

func failTitle(disks []devices.Disk) string {
	if len(disks) == 1 {
		return "Flashing " + disks[0].Path + " failed"
	}
	return fmt.Sprintf("Flashing %d cards failed", len(disks))
}

// flashAnother starts over from the role choice: no card selected, no
// progress or result of the last card left.
func (s *flashStep) flashAnother() {
	s.ui.session.ForgetAttempt()
	s.ui.session.SetDisk(nil)
	s.ui.tabs.SelectIndex(tabImage)
	s.refreshSummary()
}
