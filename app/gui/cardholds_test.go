package gui

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// The card list says what each card holds (the node talosflash wrote on
// it), reads a card once while it stays listed, again after a flash, and
// never reads a refused disk.
func TestCardListShowsWhatACardHolds(t *testing.T) {
	card := devices.Disk{Name: "sdb", Path: "/dev/sdb", Size: 32 << 30, SizeHuman: "32 GiB", Model: "SD", Transport: devices.TransportUSB, Removable: true, Safe: true}
	system := devices.Disk{Name: "sda", Path: "/dev/sda", Size: 512 << 30, SizeHuman: "512 GiB", Model: "SSD", Transport: devices.TransportSATA,
		Refusal: &devices.RefusedError{Device: "/dev/sda", Msg: "system disk"}}
	var reads atomic.Int64
	var readSystem atomic.Bool
	events := make(chan struct{}, 1)
	deps := Deps{
		Factory:        factory.NewClient("http://127.0.0.1:1", nil),
		Cache:          &imaging.Cache{Dir: t.TempDir()},
		ListDevices:    func() ([]devices.Disk, error) { return []devices.Disk{system, card}, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return events },
		CardHolds: func(p string) string {
			if p == system.Path {
				readSystem.Store(true)
			}
			reads.Add(1)
			return "Talos for worker-1, 192.168.1.21/24 · worker"
		},
	}
	a := test.NewTempApp(t)
	ui := New(a, deps)
	t.Cleanup(ui.Close)
	waitCount(t, &reads, 1)
	detail := func() string {
		var text string
		ui.uiMu.Lock()
		defer ui.uiMu.Unlock()
		o := ui.target.list.CreateItem()
		ui.target.list.UpdateItem(1, o)
		box := o.(*fyne.Container).Objects[0].(*fyne.Container)
		text = box.Objects[1].(*widget.Label).Text
		return text
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(detail(), "holds Talos for worker-1, 192.168.1.21/24") {
		if time.Now().After(deadline) {
			t.Fatalf("card row %q does not say what the card holds", detail())
		}
		time.Sleep(5 * time.Millisecond)
	}
	events <- struct{}{} // the list is read again: the card is not
	time.Sleep(eventRecheck + quiet)
	if n := reads.Load(); n != 1 {
		t.Fatalf("the card was read %d times while it stayed listed, want 1", n)
	}
	ui.uiMu.Lock()
	ui.session.AddFlashed(Flashed{Card: imaging.CardResult{Target: card.Path}})
	ui.uiMu.Unlock()
	events <- struct{}{}
	waitCount(t, &reads, 2) // after a flash: read again
	if readSystem.Load() {
		t.Error("a refused (system) disk was read")
	}
}

// A flash ends with the list saying what the card holds now (its node,
// written last) without waiting for a device event: the card's events
// come while it is written, before the node is on it, and there may be
// none after (a card whose partition count did not change, no events).
func TestCardListReadsAgainAfterAFlashWithoutAnEvent(t *testing.T) {
	card := devices.Disk{Name: "sdb", Path: "/dev/sdb", Size: 32 << 30, SizeHuman: "32 GiB", Model: "SD", Transport: devices.TransportUSB, Removable: true, Safe: true}
	var reads atomic.Int64
	deps := Deps{
		Factory:        factory.NewClient("http://127.0.0.1:1", nil),
		Cache:          &imaging.Cache{Dir: t.TempDir()},
		ListDevices:    func() ([]devices.Disk, error) { return []devices.Disk{card}, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return make(chan struct{}) },
		CardHolds:      func(string) string { reads.Add(1); return "a Talos image" },
	}
	a := test.NewTempApp(t)
	ui := New(a, deps)
	t.Cleanup(ui.Close)
	waitCount(t, &reads, 1)
	ui.uiMu.Lock()
	ui.session.AddFlashed(Flashed{Card: imaging.CardResult{Target: card.Path}})
	ui.uiMu.Unlock()
	waitCount(t, &reads, 2) // no event: the flash itself has the card read again
}

// A card whose read hangs (a failing card or reader stuck in I/O) does not
// stop the device list: the read is given up after its bound, and the row
// is listed without what the card holds.
func TestCardListNotStoppedByAHungCard(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	if got := readCardBounded(func(string) string { <-release; return "late" }, "/dev/sdb", 50*time.Millisecond); got != "" {
		t.Fatalf("a hung read gave %q", got)
	}
	if got := readCardBounded(func(string) string { return "Talos for cp-1" }, "/dev/sdb", time.Second); got != "Talos for cp-1" {
		t.Fatalf("a prompt read gave %q", got)
	}
}
