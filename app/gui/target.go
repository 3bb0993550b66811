package gui

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/internal/printable"
)

// targetStep is step 2: the detected disks, unsafe ones disabled with the
// reason, listed again when a block device comes or goes (or, without
// device events, polled while the step is shown). Several cards can be chosen (a click or Space toggles one): they are
// written from one download and one decode.
type targetStep struct {
	ui      *UI
	content fyne.CanvasObject

	list    *cardList
	status  *widget.Label
	next    *keyButton
	disks   []devices.Disk
	sig     string
	chosen  []string // the chosen cards' paths, in the order chosen
	refresh chan struct{}
	visible chan bool // step 2 shown or hidden: polling (without device events) only while shown
	preset  []string  // Deps.Preselect until each was selected once
	// holds says what each listed card holds (Deps.CardHolds); read is the
	// lister's cache of it, dropped when cardsStale (a flash ended).
	holds      map[string]string
	read       map[string]string
	cardsStale atomic.Bool
	// unticked is the last attempt whose written cards were unticked.
	unticked int
	// dropped says which cards the app unticked and why (written, gone,
	// too small): shown under the selection until the user picks again.
	dropped string
}

// cardList is the disk list; Enter and Esc reach the window (Fyne's list
// takes every key), so Enter after clicking a card runs Next.
type cardList struct {
	widget.List
	ui *UI
}

// TypedKey implements fyne.Focusable.
func (l *cardList) TypedKey(ev *fyne.KeyEvent) {
	switch ev.Name {
	case fyne.KeyReturn, fyne.KeyEnter, fyne.KeyEscape:
		l.ui.typedKey(ev)
	default:
		l.List.TypedKey(ev)
	}
}

// TypedShortcut implements fyne.Shortcutable: Alt+1…4 are the window's.
func (l *cardList) TypedShortcut(s fyne.Shortcut) {
	if c, ok := s.(*desktop.CustomShortcut); ok && c.Modifier == fyne.KeyModifierAlt {
		if i, ok := tabKeys[c.KeyName]; ok {
			l.ui.switchTab(i)
		}
	}
}

func newTargetStep(ui *UI) *targetStep {
	s := &targetStep{ui: ui, refresh: make(chan struct{}, 1), visible: make(chan bool, 1), preset: slices.Clone(ui.deps.Preselect)}
	s.list = &cardList{ui: ui}
	s.list.Length = func() int { return len(s.disks) }
	s.list.CreateItem = func() fyne.CanvasObject {
		icon := widget.NewIcon(theme.StorageIcon())
		check := widget.NewIcon(theme.CheckButtonIcon())
		title := widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		detail := widget.NewLabel("")
		detail.Truncation = fyne.TextTruncateEllipsis
		return container.NewBorder(nil, nil, container.NewHBox(check, icon), nil, container.NewVBox(title, detail))
	}
	s.list.UpdateItem = func(i widget.ListItemID, o fyne.CanvasObject) {
		if i >= len(s.disks) {
			return
		}
		d := s.disks[i]
		row := o.(*fyne.Container)
		box := row.Objects[0].(*fyne.Container)
		check := row.Objects[1].(*fyne.Container).Objects[0].(*widget.Icon)
		title, detail := box.Objects[0].(*widget.Label), box.Objects[1].(*widget.Label)
		title.SetText(printable.String(fmt.Sprintf("%s   %s   %s", d.Path, d.SizeHuman, d.Description()))) // the model and what the card holds are the card's text: shown escaped
		if r := s.refusal(d); r != nil {
			check.SetResource(theme.NewDisabledResource(theme.CheckButtonIcon()))
			title.Importance = widget.LowImportance
			detail.Importance = widget.DangerImportance
			detail.SetText(printable.String("Not selectable: " + r.Msg))
		} else {
			if s.isChosen(d.Path) {
				check.SetResource(theme.CheckButtonCheckedIcon())
			} else {
				check.SetResource(theme.CheckButtonIcon())
			}
			title.Importance = widget.MediumImportance
			detail.Importance = widget.MediumImportance
			text := transportText(d)
			if h := s.holds[d.Path]; h != "" {
				text += " · holds " + h
			}
			detail.SetText(printable.String(text))
		}
		title.Refresh()
		detail.Refresh()
	}
	s.list.ExtendBaseWidget(s.list)
	s.list.OnSelected = func(i widget.ListItemID) {
		s.list.Unselect(i) // the check marks show the choice: a click toggles
		if i >= len(s.disks) {
			return
		}
		d := s.disks[i]
		if r := s.refusal(d); r != nil {
			s.status.SetText(printable.String("Cannot use " + d.Path + ": " + r.Msg))
			return
		}
		s.toggle(d.Path)
	}
	s.status = wrapLabel("Looking for disks…")
	s.next = primaryButton(ui, "Next: flash  →", nil, func() { ui.tabs.SelectIndex(tabFlash) })
	s.next.Disable()
	refresh := newKeyButton(ui, "Refresh", theme.ViewRefreshIcon(), s.Refresh)

	s.content = container.NewBorder(
		container.NewVBox(heading("Which card should be written? Insert it now; the list updates by itself."),
			wrapLabel("Only removable cards and USB disks can be chosen; click several to write them at once. Everything on them will be erased.")),
		container.NewVBox(s.status, container.NewHBox(refresh, layout.NewSpacer(), s.next)),
		nil, nil, s.list)
	ui.session.AddListener(func(c Change) {
		switch {
		case c == ChangeFlashed:
			s.cardsStale.Store(true) // what the written cards hold is read again
			s.Refresh()              // now: its events came while it was written, before its node
		case c == ChangeImageSize:
			s.list.Refresh() // a card too small for the image is now known
			s.dropRefused()
		case c == ChangeAttempt:
			s.untickWritten()
		case c == ChangeDisk && len(ui.session.Cards()) == 0 && len(s.chosen) > 0:
			s.chosen, s.dropped = nil, "" // "Flash another card": choose again
			s.list.Refresh()
			s.next.Disable()
			s.status.SetText("Insert the next card and select it.")
		}
	})
	return s
}

func (s *targetStep) isChosen(path string) bool { return slices.Contains(s.chosen, path) }

// untickWritten unticks the cards an attempt just wrote, saying so: the
// next flash does not erase a card just made by mistake (going back to
// step 1 for the next node keeps no card ticked).
func (s *targetStep) untickWritten() {
	a := s.ui.session.Attempt()
	if !a.Ended() || a.Seq == s.unticked {
		return
	}
	s.unticked = a.Seq
	var written []string
	for _, r := range a.Good() {
		if s.isChosen(r.Target) {
			written = append(written, r.Target)
		}
	}
	if len(written) == 0 {
		return
	}
	s.chosen = slices.DeleteFunc(s.chosen, func(p string) bool { return slices.Contains(written, p) })
	s.dropped = strings.Join(written, ", ") + " written: no longer selected, so the next flash does not erase it by mistake. Insert the next card and select it."
	s.publish()
}

// toggle adds or removes the card with this path.
func (s *targetStep) toggle(path string) {
	if i := slices.Index(s.chosen, path); i >= 0 {
		s.chosen = slices.Delete(s.chosen, i, i+1)
	} else {
		s.chosen = append(s.chosen, path)
	}
	s.dropped = "" // the user picks again: what the app unticked is old news
	s.publish()
}

// publish shares the chosen cards (in list order) and says what is chosen.
func (s *targetStep) publish() {
	var cards []devices.Disk
	var names []string
	for _, d := range s.disks {
		if s.isChosen(d.Path) {
			cards = append(cards, d)
			names = append(names, d.String())
		}
	}
	s.list.Refresh()
	var line string
	switch len(cards) {
	case 0:
		s.next.Disable()
		line = "Select the card to write (several: click each)."
	case 1:
		s.next.Enable()
		line = "Selected " + names[0]
	default:
		s.next.Enable()
		line = fmt.Sprintf("Selected %d cards, written at once: %s", len(cards), strings.Join(names, "; "))
	}
	if s.dropped != "" {
		line = s.dropped + "\n" + line
	}
	s.status.SetText(line)
	s.ui.session.SetCards(cards)
}

// dropRefused unchooses cards that are now refused (too small for the image).
func (s *targetStep) dropRefused() {
	var why []string
	s.chosen = slices.DeleteFunc(s.chosen, func(p string) bool {
		for _, d := range s.disks {
			if d.Path == p {
				if r := s.refusal(d); r != nil {
					why = append(why, printable.String(r.Msg))
					return true
				}
				return false
			}
		}
		why = append(why, p+" is gone")
		return true
	})
	if len(why) > 0 {
		s.dropped = "No longer selected: " + strings.Join(why, "; ") + "."
		s.publish()
	}
}

// refusal is why d may not be written, given the image size once known.
func (s *targetStep) refusal(d devices.Disk) *devices.RefusedError {
	return plan.CardRefusal(d, s.ui.session.ImageSize(), s.ui.deps.Safety)
}

func transportText(d devices.Disk) string {
	var parts []string
	if d.Transport != devices.TransportUnknown {
		parts = append(parts, strings.ToUpper(string(d.Transport)))
	}
	if d.Transport != devices.TransportFile {
		if d.RemovableLike() {
			parts = append(parts, "removable")
		}
	} else {
		parts = append(parts, "image file")
	}
	if n := len(d.AllMounts()); n > 0 {
		parts = append(parts, fmt.Sprintf("%d mounted filesystem(s), unmounted before writing", n))
	}
	if len(parts) == 0 {
		return d.Name
	}
	return strings.Join(parts, " · ")
}

// Refresh lists the disks again now.
func (s *targetStep) Refresh() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// setVisible tells the lister whether step 2 is shown (UI goroutine).
func (s *targetStep) setVisible(v bool) {
	select {
	case <-s.visible: // replace a value not taken yet
	default:
	}
	s.visible <- v
}

// eventSettle lets a card's partitions (and an automount) appear before the
// list is read after a device event; the list is read again after
// eventRecheck for what came later.
const (
	eventSettle  = 300 * time.Millisecond
	eventRecheck = 2 * time.Second
)

// start lists the disks until the window closes: once now, then on each
// block device event (kernel uevents) and when step 2 is shown; polling,
// every RefreshEvery, only where there are no events and only while step 2
// is shown. An idle window does no work.
func (s *targetStep) start() {
	events := s.ui.deps.DeviceEvents(s.ui.ctx)
	go func() {
		var ticker *time.Ticker
		var tick <-chan time.Time
		defer func() {
			if ticker != nil {
				ticker.Stop()
			}
		}()
		settle := time.NewTimer(time.Hour)
		settle.Stop()
		recheck, shown := false, false
		pollWhileShown := func() { // no events (any more): poll, only while step 2 shows
			if every := s.ui.deps.RefreshEvery; shown && events == nil && every > 0 && ticker == nil {
				ticker = time.NewTicker(every)
				tick = ticker.C
			}
		}
		s.poll()
		for {
			select {
			case <-s.ui.ctx.Done():
				return
			case <-tick:
				s.poll()
			case <-s.refresh:
				s.poll()
			case _, ok := <-events:
				if !ok { // the event source failed for good
					events = nil
					pollWhileShown()
					continue
				}
				settle.Reset(eventSettle)
				recheck = true
			case <-settle.C:
				s.poll()
				if recheck {
					recheck = false
					settle.Reset(eventRecheck)
				}
			case v := <-s.visible:
				shown = v
				pollWhileShown()
				if !v && ticker != nil {
					ticker.Stop()
					ticker, tick = nil, nil
				}
			}
		}
	}()
}

func (s *targetStep) poll() {
	disks, err := s.ui.deps.ListDevices()
	holds := s.readCards(disks)
	sig := signature(disks, err)
	for _, d := range disks {
		sig += d.Path + "=" + holds[d.Path] + "\n"
	}
	s.ui.do(func() {
		if sig == s.sig {
			return
		}
		s.sig = sig
		s.holds = holds
		s.setDisks(disks, err)
	})
}

// readCards says what each selectable card holds, read once per card as
// listed (a card swapped in the same reader lists anew) and again after a
// flash: the list does no I/O while nothing changes. System, mounted and
// other refused disks are not read. Called by the lister goroutine only.
func (s *targetStep) readCards(disks []devices.Disk) map[string]string {
	if s.cardsStale.Swap(false) || s.read == nil {
		s.read = map[string]string{}
	}
	holds := map[string]string{}
	for _, d := range disks {
		if plan.CardRefusal(d, 0, s.ui.deps.Safety) != nil {
			continue
		}
		key := fmt.Sprintf("%s|%s|%d|%s|%d", d.Path, d.Dev, d.Size, d.Model, len(d.Partitions))
		h, ok := s.read[key]
		if !ok {
			h = readCardBounded(s.ui.deps.CardHolds, d.Path, cardReadTimeout)
			s.read[key] = h // a card that did not answer is not asked again while listed
		}
		holds[d.Path] = h
	}
	return holds
}

// signature changes when anything shown in the list changes.
func signature(disks []devices.Disk, err error) string {
	var b strings.Builder
	if err != nil {
		b.WriteString(errString(err))
	}
	for _, d := range disks {
		fmt.Fprintf(&b, "%s|%d|%s|%v|%d\n", d.Path, d.Size, d.Model, d.Safe, len(d.AllMounts()))
	}
	return b.String()
}

func (s *targetStep) setDisks(disks []devices.Disk, err error) {
	s.disks = disks
	s.ui.session.SetDisks(disks)
	s.list.Refresh()
	// Keep the chosen cards that are still listed and allowed; name the gone.
	var gone []string
	s.chosen = slices.DeleteFunc(s.chosen, func(p string) bool {
		for _, d := range disks {
			if d.Path == p && s.refusal(d) == nil {
				return false
			}
		}
		gone = append(gone, p)
		return true
	})
	if len(gone) > 0 {
		s.dropped = strings.Join(gone, ", ") + " is gone (card removed?) or can no longer be written: no longer selected."
	}
	// talosflash gui --device, until it shows up; once: "Flash another
	// card" starts with no card.
	s.preset = slices.DeleteFunc(s.preset, func(want string) bool {
		for _, d := range disks {
			if d.Path == want && s.refusal(d) == nil {
				if !s.isChosen(want) {
					s.chosen = append(s.chosen, want)
				}
				return true
			}
		}
		return false
	})
	s.publish()
	switch {
	case errors.Is(err, devices.ErrUnsupported):
		s.status.SetText(errString(err))
	case err != nil:
		s.status.SetText("Cannot list disks: " + errString(err))
	case len(disks) == 0:
		s.status.SetText("No disks found. Insert the SD card (a USB card reader works).")
	}
}

// selectPath toggles the disk with this path on (tests, demo) and says
// whether it is chosen.
func (s *targetStep) selectPath(path string) bool {
	for i, d := range s.disks {
		if d.Path == path && !s.isChosen(path) {
			s.list.Select(i) // as a click: a refused card says why
		}
	}
	return s.isChosen(path)
}

// cardReadTimeout bounds reading what a card holds: a card or reader that
// hangs in I/O must not stop the device list (the read is left behind).
const cardReadTimeout = 3 * time.Second

// readCardBounded is read(path), or "" once it took longer than d.
func readCardBounded(read func(string) string, path string, d time.Duration) string {
	done := make(chan string, 1) // buffered: a late answer does not block its goroutine
	go func() { done <- read(path) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case h := <-done:
		return h
	case <-t.C:
		return ""
	}
}
