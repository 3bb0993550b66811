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
	"github.com/dustin/go-humanize"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// flashStep is step 3: confirm, then download -> write -> verify with
// progress and cancel, then the finish screen: what the cards now hold
// (how to label them), the cards made safe to remove, and "flash another".
// Several cards are written from one download and one decode, each with
// its own bars and result; one failing does not stop the others.
type flashStep struct {
	ui      *UI
	content fyne.CanvasObject

	summary  *widget.Label
	meta     []*plan.CardMeta // the picked node's META for the attempt confirmed (nodepick.go)
	images   []*plan.Image    // each card's image, for "Flash all cards" (flashall.go); nil: the choice
	download *stageBar
	dlRow    []fyne.CanvasObject // the Download row's label and bar: hidden for a local file
	grid     *fyne.Container
	cards    []*cardProgress // one per card of the attempt (or the chosen cards before one)
	status   *widget.Label
	start    *keyButton
	cancel   *keyButton
	another  *keyButton
	toNodes  *keyButton
	running  context.CancelFunc

	// The finish screen, shown after a flash that wrote at least one card.
	done      *fyne.Container
	doneTitle *widget.Label
	doneBody  *breakLabel // schematic IDs and paths: broken at "/" or ":" only
	eject     *widget.Label

	// The lines about a flash describe the Session's Attempt (nil before
	// one, and once forgotten: then they are cleared).
	finished  bool // the attempt ended (status says how)
	succeeded bool // ... and at least one card is written and verified
	ejected   bool // the eject step after a success is over
}

// cardProgress is one card's rows: its write and verify bars and result.
type cardProgress struct {
	device  string
	write   *stageBar
	verify  *stageBar
	result  *widget.Label
	touched bool // this flash wrote to the card (progress says so)
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

func (b *stageBar) reset() {
	b.bar.SetValue(0)
	b.detail.SetText("waiting")
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
	if all := s.newFlashAllButton(); all != nil { // with an inventory (flashall.go)
		buttons = append(buttons, all)
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
	s.layoutCards(nil)
	s.refreshSummary()
	ui.session.AddListener(func(c Change) {
		switch c {
		case ChangeAttempt:
			if ui.session.Attempt() == nil && s.finished {
				s.clearAttempt() // nothing of an attempt that is over outlives it
			}
			s.refreshSummary()
		case ChangeChoice, ChangeDisk, ChangeImageSize:
			if c == ChangeDisk && ui.session.Attempt() == nil {
				s.layoutCards(ui.session.Cards()) // a row per chosen card, waiting
			}
			s.refreshSummary()
		}
	})
	return s
}

// layoutCards builds the rows: Download (not for a local file), then each
// card's Write and Verify (named by card when there are several).
func (s *flashStep) layoutCards(cards []devices.Disk) {
	if len(cards) == 0 {
		cards = []devices.Disk{{}} // the rows of one card, waiting
	}
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
	s.showDownloadRow()
	s.grid.Refresh()
}

// showDownloadRow shows the Download row unless the image is a local file.
func (s *flashStep) showDownloadRow() {
	c := s.ui.session.Choice()
	if a := s.ui.session.Attempt(); a != nil {
		c = &a.Image
	}
	for _, o := range s.dlRow {
		if c != nil && c.LocalPath != "" {
			o.Hide()
		} else {
			o.Show()
		}
	}
}

// card is the rows of the card with this path (a one-card report has no
// path: the only card).
func (s *flashStep) card(path string) *cardProgress {
	if path == "" && len(s.cards) == 1 {
		return s.cards[0]
	}
	for _, c := range s.cards {
		if c.device == path {
			return c
		}
	}
	return nil
}

// clearAttempt clears the last flash's bars, status and finish screen.
func (s *flashStep) clearAttempt() {
	s.finished, s.succeeded = false, false
	s.resetProgress()
	s.layoutCards(s.ui.session.Cards())
}

// primary is the step's Enter action: Flash, or after a success the way on.
func (s *flashStep) primary() *keyButton {
	if s.toNodes.Visible() {
		return s.toNodes
	}
	return s.start
}

// refreshSummary names what will be (or was) written where (UI goroutine).
func (s *flashStep) refreshSummary() {
	c, cards := s.ui.session.Choice(), s.ui.session.Cards()
	cached := s.ui.session.ImageCached()
	a := s.ui.session.Attempt()
	if a != nil {
		c, cards, cached = &a.Image, a.Cards, a.Cached
	}
	img := "no image chosen (step 1)"
	if a != nil && len(s.images) > 0 { // "Flash all cards": each node's image
		var labels []string
		for _, im := range attemptImages(c, s.images) {
			labels = append(labels, imageSummary(im))
		}
		img = strings.Join(labels, "; ")
	} else if c != nil {
		img = imageSummary(c)
		switch {
		case c.LocalPath != "":
		case a != nil && !cached && !a.Running:
			img += " (downloaded from the Image Factory for this flash; cached now)"
		case a != nil && !cached:
			img += " (downloading from the Image Factory)"
		case cached:
			img += " (cached: no download)"
		default:
			img += " (downloaded from the Image Factory first)"
		}
	}
	card := "Card:  no card chosen (step 2)"
	switch len(cards) {
	case 0:
	case 1:
		card = "Card:  " + cardText(cards[0])
	default:
		names := make([]string, len(cards))
		for i, d := range cards {
			names[i] = cardText(d)
		}
		card = fmt.Sprintf("Cards: %d, written at once: %s", len(cards), strings.Join(names, "; "))
	}
	nodeLine, nodeBlocked := s.nodeSummary(len(s.ui.session.Cards()))
	if nodeLine != "" && a == nil {
		card += "\n" + nodeLine
	}
	if nodeBlocked == "" {
		nodeBlocked = s.ui.image.offlineReason() // no download possible: no erase either
	}
	if nodeBlocked != "" {
		card += "\n" + nodeBlocked
	}
	s.summary.SetText("Image: " + img + "\n" + card)
	s.showDownloadRow()
	if s.running == nil {
		if s.ui.session.Choice() != nil && len(s.ui.session.Cards()) > 0 && nodeBlocked == "" {
			s.start.Enable()
		} else {
			s.start.Disable()
		}
	}
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
	case c.Role != "":
		return c.Role
	case c.Profile != nil && c.Profile.Name != "":
		return c.Profile.Name
	case c.LocalPath != "":
		return filepath.Base(c.LocalPath)
	}
	return "schematic " + factory.ShortID(c.SchematicID)
}

// askConfirm shows the last chance to back out, naming every device.
func (s *flashStep) askConfirm() {
	c, cards := s.ui.session.Choice(), s.ui.session.Cards()
	if c == nil || len(cards) == 0 || s.running != nil {
		s.refreshSummary()
		return
	}
	if s.ui.session.Attempt() != nil && !s.succeeded {
		s.ui.session.SetAttempt(nil) // a new attempt: no "Failed: ..." or old bar of the last one
		s.clearAttempt()
		s.refreshSummary()
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
	}
	ok := primaryButton(s.ui, "Erase and flash", theme.MediaPlayIcon(), func() { s.meta, s.images = metas, nil; s.begin(choice, disks) })
	keep := "Keep the card"
	if len(disks) > 1 {
		keep = "Keep the cards"
	}
	s.ui.showModal(title, wrapLabel(msg), keep, ok, fyne.NewSize(min(760, s.ui.Window.Canvas().Size().Width-40), 0))
}

// begin starts the flash in the background (UI goroutine).
func (s *flashStep) begin(choice imageChoice, disks []devices.Disk) {
	ctx, cancel := context.WithCancel(s.ui.ctx)
	s.running, s.finished, s.succeeded, s.ejected = cancel, false, false, false
	s.resetProgress()
	s.layoutCards(disks)
	s.ui.session.SetAttempt(&Attempt{Image: choice, Cards: disks, Cached: choice.LocalPath == "" && s.ui.session.ImageCached(), Running: true})
	s.start.Disable()
	s.cancel.Enable()
	s.status.SetText("Preparing " + choice.FileName() + "…")
	go func() {
		out, err := s.run(ctx, choice, disks)
		cancel()
		s.ui.do(func() { s.finish(choice, disks, out, err) })
	}()
}

// resetProgress empties the bars and hides the finish screen.
func (s *flashStep) resetProgress() {
	s.download.reset()
	for _, c := range s.cards {
		c.touched = false
		c.write.reset()
		c.verify.reset()
		c.result.Hide()
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
// Several cards go in one job (one download, one decode, one elevated
// child: one password prompt).
func (s *flashStep) run(ctx context.Context, c imageChoice, disks []devices.Disk) (*plan.Outcome, error) {
	deps := s.ui.deps
	job := plan.Job{
		Image: &c, Cache: deps.Cache, Factory: deps.Factory, Safety: deps.Safety,
		Open:     deps.Open,
		Progress: func(p imaging.Progress) { s.ui.do(func() { s.showProgress(p) }) },
		Status:   func(msg string) { s.setStatus(sentence(msg)) },
		Meta:     s.meta,   // the node picked in step 1 (set before this goroutine)
		Images:   s.images, // each node's image ("Flash all cards"), nil: c
	}
	job.SetElevation(plan.Elevation{Needs: deps.NeedsElevation, Command: deps.ElevatedCommand, UDisks: deps.UDisks})
	for _, d := range disks {
		job.Devices = append(job.Devices, d.Path)
	}
	return plan.Flash(ctx, job)
}

func (s *flashStep) setStatus(text string) {
	s.ui.do(func() {
		if s.running != nil { // a late line of an attempt that ended must not replace its result
			s.status.SetText(text)
		}
	})
}

// showProgress updates one stage's bar (UI goroutine).
func (s *flashStep) showProgress(p imaging.Progress) {
	if p.Stage == imaging.StageDone || s.running == nil {
		return
	}
	if p.Stage == imaging.StageBuild {
		s.status.SetText("The Image Factory is building this image (the first time a schematic and version are asked for). This can take a few minutes…")
		s.download.detail.SetText("waiting for the factory to build the image")
		return
	}
	var b *stageBar
	switch p.Stage {
	case imaging.StageDownload:
		b = s.download
		s.status.SetText("Downloading the image…")
	case imaging.StageWrite, imaging.StageVerify:
		targets := s.cards
		if c := s.card(p.Target); c != nil {
			targets = []*cardProgress{c}
		}
		for _, c := range targets {
			if p.Stage == imaging.StageVerify || p.Done > 0 {
				c.touched = true // the card no longer holds what it held
			}
		}
		if len(targets) != 1 {
			return
		}
		b = targets[0].write
		s.status.SetText("Writing the card…")
		if p.Stage == imaging.StageVerify {
			b = targets[0].verify
			s.status.SetText("Reading the card back to verify it…")
		} else if len(s.cards) > 1 {
			s.status.SetText(fmt.Sprintf("Writing %d cards…", len(s.cards)))
		}
		if d := s.download; d.bar.Value < 1 {
			d.bar.SetValue(1)
			if d.detail.Text == "waiting" {
				d.detail.SetText("cached: no download")
			}
		}
	default:
		return
	}
	if p.Total > 0 {
		b.bar.SetValue(float64(p.Done) / float64(p.Total))
	}
	b.detail.SetText(progressText(p))
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
	if p.Image != "" { // one of several images' downloads
		t = p.Image + ": " + t
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

// finish shows the outcome (UI goroutine): each card's result on its
// rows; the finish screen when at least one card is written.
func (s *flashStep) finish(c imageChoice, disks []devices.Disk, out *plan.Outcome, err error) {
	s.running, s.finished = nil, true
	s.cancel.Disable()
	s.start.Enable()
	s.another.Show()
	if a := s.ui.session.Attempt(); a != nil {
		ended := *a // shown until another image or other cards are chosen
		ended.Running = false
		s.ui.session.SetAttempt(&ended)
	}
	results := cardOutcomes(disks, out, err)
	var good, bad []string
	for _, r := range results {
		cp := s.card(r.Target)
		if cp == nil {
			continue
		}
		if r.Err != nil {
			cp.result.Importance = widget.DangerImportance
			verb := "Failed: "
			if errors.Is(r.Err, context.Canceled) {
				verb = "Cancelled: "
			}
			cp.result.SetText(verb + r.Target + " " + cardState(r.Err, cp.touched))
			if len(disks) > 1 {
				cp.result.SetText(cp.result.Text + " (" + errorText(r.Err) + ")")
			}
			cp.result.Show()
			bad = append(bad, r.Target)
			continue
		}
		cp.write.bar.SetValue(1)
		if r.Verified {
			cp.verify.bar.SetValue(1)
		} else if cp.verify.detail.Text == "waiting" {
			cp.verify.detail.SetText("skipped")
		}
		if len(disks) > 1 {
			cp.result.Importance = widget.SuccessImportance
			cp.result.SetText("✓ " + r.Target + " " + verifiedText(r))
			cp.result.Show()
		}
		good = append(good, r.Target)
	}
	if len(good) == 0 {
		s.status.Importance = widget.DangerImportance
		if errors.Is(err, context.Canceled) {
			s.status.SetText("Cancelled: " + stateLines(s, results))
			return
		}
		s.status.SetText("Failed: " + stateLines(s, results))
		s.ui.showError(failTitle(disks), err)
		return
	}
	s.succeeded = true
	if s.download.detail.Text == "waiting" {
		s.download.bar.SetValue(1)
		s.download.detail.SetText("skipped")
	}
	label := cardLabel(&c)
	if len(good) == 1 {
		s.doneTitle.SetText("✓ Card ready. Label it: " + label)
	} else {
		s.doneTitle.SetText(fmt.Sprintf("✓ %d cards ready. Label each: %s", len(good), label))
	}
	if t := cardsReady(results, s.meta); t != "" { // written for its node
		s.doneTitle.SetText(t)
	}
	var body []string
	for _, r := range results {
		if r.OK() {
			body = append(body, fmt.Sprintf("%s %s: %s, SHA-256 %s", r.Target, verifiedText(r), humanize.IBytes(uint64(r.Bytes)), factory.ShortID(r.SHA256)))
		}
	}
	for _, im := range attemptImages(&c, s.images) {
		if im.LocalPath == "" {
			body = append(body, fmt.Sprintf("Talos %s · %s · schematic %s", im.Version, im.Label, im.SchematicID))
		} else {
			body = append(body, "Image "+im.LocalPath)
		}
	}
	if out != nil {
		body = append(body, out.Notes()...)
	}
	s.doneBody.SetText(strings.Join(body, "\n"))
	s.eject.Importance = widget.MediumImportance
	s.eject.SetText("Making the card safe to remove…")
	s.done.Show()
	s.status.Importance = widget.SuccessImportance
	s.status.SetText("Put the card in the Pi and power it on, then give it its config under Nodes.")
	if len(good) > 1 {
		s.status.SetText("Put each card in its Pi and power them on, then give each node its config under Nodes.")
	}
	if len(bad) > 0 {
		s.status.Importance = widget.WarningImportance
		s.status.SetText(fmt.Sprintf("%d of %d cards failed (%s): see each card above. The others are ready for their Pis.", len(bad), len(disks), strings.Join(bad, ", ")))
	}
	s.toNodes.Show()
	s.start.Hide() // the same cards again: "Flash another card" first
	cachePath := ""
	if out != nil {
		cachePath = out.CachePath
	}
	for i, r := range results {
		if r.OK() {
			im, cache := c, cachePath
			if i < len(s.images) && s.images[i] != nil {
				im = *s.images[i]
			}
			if out != nil && i < len(out.CachePaths) {
				cache = out.CachePaths[i]
			}
			s.ui.session.AddFlashed(Flashed{Image: im, Card: r, CachePath: cache, At: time.Now()})
		}
	}
	go func() {
		var notes []devices.Ejected
		for _, d := range good {
			notes = append(notes, s.ui.deps.Eject(s.ui.ctx, d))
		}
		s.ui.do(func() { s.showEjected(good, notes) })
	}()
}

// cardOutcomes is each card's result: the job's cards, or, when it failed
// as a whole (cancelled, the download failed), its error on every card.
func cardOutcomes(disks []devices.Disk, out *plan.Outcome, err error) []imaging.CardResult {
	if out != nil && len(out.Cards) == len(disks) {
		return out.Cards
	}
	cards := make([]imaging.CardResult, len(disks))
	for i, d := range disks {
		cards[i] = imaging.CardResult{Target: d.Path, Err: err}
	}
	return cards
}

func verifiedText(r imaging.CardResult) string {
	if r.Verified {
		return "written and verified"
	}
	return "written (not verified)"
}

// stateLines is what each failed card was left as.
func stateLines(s *flashStep, results []imaging.CardResult) string {
	var lines []string
	for _, r := range results {
		if cp := s.card(r.Target); cp != nil && r.Err != nil {
			lines = append(lines, r.Target+" "+cardState(r.Err, cp.touched))
		}
	}
	return strings.Join(lines, "; ")
}

func failTitle(disks []devices.Disk) string {
	if len(disks) == 1 {
		return "Flashing " + disks[0].Path + " failed"
	}
	return fmt.Sprintf("Flashing %d cards failed", len(disks))
}

// showEjected says whether the cards can be pulled out (UI goroutine).
func (s *flashStep) showEjected(paths []string, ejected []devices.Ejected) {
	s.ejected = true
	if !s.done.Visible() {
		return // "Flash another card" was pressed meanwhile
	}
	var lines []string
	powered, warn := true, false
	for i, e := range ejected {
		who := ""
		if len(ejected) > 1 {
			who = paths[i] + ": "
		}
		switch {
		case e.PoweredOff:
			lines = append(lines, who+"Safe to remove: the card was flushed and powered off.")
		case e.PowerOffFailed:
			powered, warn = false, true
			lines = append(lines, who+"Written and verified, but not yet safe to remove: "+e.Note+".")
		case !e.Flushed:
			powered = false
			lines = append(lines, who+"Written and synced; "+e.Note+".")
		default:
			powered = false
			lines = append(lines, who+"Safe to remove ("+e.Note+").")
		}
	}
	s.eject.Importance = widget.MediumImportance
	switch {
	case warn:
		s.eject.Importance = widget.WarningImportance
	case powered:
		s.eject.Importance = widget.SuccessImportance
	}
	s.eject.SetText(strings.Join(lines, "\n"))
}

// flashAnother starts over from the role choice: no card selected, no
// progress or result of the last card left.
func (s *flashStep) flashAnother() {
	s.ui.session.SetAttempt(nil)
	s.finished, s.succeeded = false, false
	s.resetProgress()
	s.ui.session.SetDisk(nil)
	s.layoutCards(nil)
	s.ui.tabs.SelectIndex(tabImage)
	s.refreshSummary()
}
