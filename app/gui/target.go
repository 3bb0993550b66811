package gui

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/imaging/devices"
)

// targetStep is step 2: the detected disks, unsafe ones disabled with the
// reason, refreshed every couple of seconds to catch a card being plugged in.
type targetStep struct {
	ui      *UI
	content fyne.CanvasObject

	list     *widget.List
	status   *widget.Label
	next     *keyButton
	disks    []devices.Disk
	sig      string
	selected *devices.Disk
	refresh  chan struct{}
	preset   string // Deps.Preselect until it was selected once
}

func newTargetStep(ui *UI) *targetStep {
	s := &targetStep{ui: ui, refresh: make(chan struct{}, 1), preset: ui.deps.Preselect}
	s.list = widget.NewList(
		func() int { return len(s.disks) },
		func() fyne.CanvasObject {
			icon := widget.NewIcon(theme.StorageIcon())
			title := widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
			detail := widget.NewLabel("")
			detail.Truncation = fyne.TextTruncateEllipsis
			return container.NewBorder(nil, nil, icon, nil, container.NewVBox(title, detail))
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			if i >= len(s.disks) {
				return
			}
			d := s.disks[i]
			row := o.(*fyne.Container)
			box := row.Objects[0].(*fyne.Container)
			title, detail := box.Objects[0].(*widget.Label), box.Objects[1].(*widget.Label)
			title.SetText(fmt.Sprintf("%s   %s   %s", d.Path, d.SizeHuman, d.Description()))
			if r := s.refusal(d); r != nil {
				title.Importance = widget.LowImportance
				detail.Importance = widget.DangerImportance
				detail.SetText("Not selectable: " + r.Msg)
			} else {
				title.Importance = widget.MediumImportance
				detail.Importance = widget.MediumImportance
				detail.SetText(transportText(d))
			}
			title.Refresh()
			detail.Refresh()
		})
	s.list.OnSelected = func(i widget.ListItemID) {
		if i >= len(s.disks) {
			return
		}
		d := s.disks[i]
		if r := s.refusal(d); r != nil {
			s.list.Unselect(i)
			s.choose(nil)
			s.status.SetText("Cannot use " + d.Path + ": " + r.Msg)
			return
		}
		s.choose(&d)
		s.status.SetText("Selected " + d.String())
	}
	s.status = wrapLabel("Looking for disks…")
	s.next = primaryButton(ui, "Next: flash  →", nil, func() { ui.tabs.SelectIndex(tabFlash) })
	s.next.Disable()
	refresh := newKeyButton(ui, "Refresh", theme.ViewRefreshIcon(), s.Refresh)

	s.content = container.NewBorder(
		container.NewVBox(heading("Which card should be written? Insert it now; the list updates by itself."),
			wrapLabel("Only removable cards and USB disks can be chosen. Everything on the card will be erased.")),
		container.NewVBox(s.status, container.NewHBox(refresh, layout.NewSpacer(), s.next)),
		nil, nil, s.list)
	ui.session.AddListener(func(c Change) {
		switch {
		case c == ChangeImageSize:
			s.list.Refresh() // a card too small for the image is now known
		case c == ChangeDisk && ui.session.Disk() == nil && s.selected != nil:
			s.list.UnselectAll() // "Flash another card": choose again
			s.choose(nil)
			s.status.SetText("Insert the next card and select it.")
		}
	})
	return s
}

// choose makes d (nil: none) the card to write.
func (s *targetStep) choose(d *devices.Disk) {
	s.selected = d
	if d == nil {
		s.next.Disable()
	} else {
		s.next.Enable()
	}
	s.ui.session.SetDisk(d)
}

// refusal is why d may not be written, given the image size once known.
func (s *targetStep) refusal(d devices.Disk) *devices.RefusedError {
	if d.Transport == devices.TransportLoop && s.ui.deps.Safety.AllowLoop {
		return d.Assess(s.ui.session.ImageSize(), s.ui.deps.Safety) // --allow-loop
	}
	if !d.Safe {
		if d.Refusal != nil {
			return d.Refusal
		}
		return &devices.RefusedError{Device: d.Path, Msg: d.Path + " is not a safe target"}
	}
	if raw := s.ui.session.ImageSize(); raw > 0 {
		return d.Assess(raw, devices.Options{})
	}
	return nil
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

// start polls the device list until the window closes. Listing reads sysfs
// and the mount table: cheap enough for every 2 s.
func (s *targetStep) start() {
	go func() {
		var tick <-chan time.Time
		if every := s.ui.deps.RefreshEvery; every > 0 {
			t := time.NewTicker(every)
			defer t.Stop()
			tick = t.C
		}
		for {
			s.poll()
			select {
			case <-s.ui.ctx.Done():
				return
			case <-tick:
			case <-s.refresh:
			}
		}
	}()
}

func (s *targetStep) poll() {
	disks, err := s.ui.deps.ListDevices()
	sig := signature(disks, err)
	s.ui.do(func() {
		if sig == s.sig {
			return
		}
		s.sig = sig
		s.setDisks(disks, err)
	})
}

// signature changes when anything shown in the list changes.
func signature(disks []devices.Disk, err error) string {
	var b strings.Builder
	if err != nil {
		b.WriteString(err.Error())
	}
	for _, d := range disks {
		fmt.Fprintf(&b, "%s|%d|%s|%v|%d\n", d.Path, d.Size, d.Model, d.Safe, len(d.AllMounts()))
	}
	return b.String()
}

func (s *targetStep) setDisks(disks []devices.Disk, err error) {
	prev := s.selected
	s.disks = disks
	s.ui.session.SetDisks(disks)
	s.list.UnselectAll()
	s.choose(nil)
	switch {
	case errors.Is(err, devices.ErrUnsupported):
		s.status.SetText(err.Error())
	case err != nil:
		s.status.SetText("Cannot list disks: " + err.Error())
	case len(disks) == 0:
		s.status.SetText("No disks found. Insert the SD card (a USB card reader works).")
	default:
		s.status.SetText("Select the card to write.")
	}
	s.list.Refresh()
	want := s.preset // talosflash gui --device, until it shows up
	if prev != nil {
		want = prev.Path
	}
	if want == "" {
		return
	}
	for i, d := range disks {
		if d.Path == want && s.refusal(d) == nil {
			s.list.Select(i) // keeps the choice across refreshes
			s.preset = ""    // once: "Flash another card" starts with no card
			return
		}
	}
	if prev != nil {
		s.status.SetText(prev.Path + " is gone (card removed?). Select the card to write.")
	}
}

// selectPath selects the disk with this path (tests, demo).
func (s *targetStep) selectPath(path string) bool {
	for i, d := range s.disks {
		if d.Path == path {
			s.list.Select(i)
			return s.selected != nil && s.selected.Path == path
		}
	}
	return false
}
