package gui

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// idleUI builds the window with a counting device lister.
func idleUI(t *testing.T, events <-chan struct{}) (*UI, *atomic.Int64) {
	var lists atomic.Int64
	deps := Deps{
		Factory:        factory.NewClient("http://127.0.0.1:1", nil), // loopback, nothing listens
		Cache:          &imaging.Cache{Dir: t.TempDir()},
		ListDevices:    func() ([]devices.Disk, error) { lists.Add(1); return nil, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return events },
		RefreshEvery:   time.Millisecond, // would be hundreds of lists in the waits below
	}
	a := test.NewTempApp(t)
	ui := New(a, deps)
	t.Cleanup(ui.Close)
	waitCount(t, &lists, 1)
	return ui, &lists
}

func waitCount(t *testing.T, n *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d device lists, want %d", n.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// quiet is how long a count must stay put to show nothing polls.
const quiet = 150 * time.Millisecond

// With device events the list is read once, then only after an event
// (once settled, once more for what came later) and when step 2 is shown:
// never polled, whatever step shows.
func TestDeviceListOnEventsOnly(t *testing.T) {
	events := make(chan struct{}, 1)
	ui, lists := idleUI(t, events)
	time.Sleep(quiet)
	if n := lists.Load(); n != 1 {
		t.Fatalf("%d lists while idle with device events, want 1", n)
	}
	ui.uiMu.Lock()
	ui.tabs.SelectIndex(tabTarget) // shown: listed again (a card may have been swapped)
	ui.uiMu.Unlock()
	waitCount(t, lists, 2)
	time.Sleep(quiet)
	if n := lists.Load(); n != 2 {
		t.Fatalf("step 2 shown with device events: %d lists, want 2 (no polling)", n)
	}
	events <- struct{}{}
	waitCount(t, lists, 4) // settled, then the re-check
	time.Sleep(eventRecheck + quiet)
	if n := lists.Load(); n != 4 {
		t.Fatalf("one event: %d lists, want 4", n)
	}
}

// Without device events the list is polled only while step 2 is shown.
func TestDeviceListPolledOnlyOnCardStep(t *testing.T) {
	ui, lists := idleUI(t, nil)
	time.Sleep(quiet)
	if n := lists.Load(); n != 1 {
		t.Fatalf("%d lists while step 1 shows, want 1", n)
	}
	ui.uiMu.Lock()
	ui.tabs.SelectIndex(tabTarget)
	ui.uiMu.Unlock()
	waitCount(t, lists, 10) // polled
	ui.uiMu.Lock()
	ui.tabs.SelectIndex(tabFlash)
	ui.uiMu.Unlock()
	waitQuiet(t, lists, "step 3 shown")
}

// waitQuiet waits until the count stays put for quiet: the lister has taken
// a change of step and stopped polling (a fixed sleep flaked under load).
func waitQuiet(t *testing.T, n *atomic.Int64, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		before := n.Load()
		time.Sleep(quiet)
		if n.Load() == before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the device list is still polled", what)
		}
	}
}

// An event source that fails for good (its channel closed) is replaced by
// polling while step 2 shows: the list is not left stale (a persistent read
// error used to spin in a loop, the list never read again).
func TestDeviceListPolledOnceEventsFail(t *testing.T) {
	events := make(chan struct{}, 1)
	ui, lists := idleUI(t, events)
	ui.uiMu.Lock()
	ui.tabs.SelectIndex(tabTarget)
	ui.uiMu.Unlock()
	waitCount(t, lists, 2)
	waitQuiet(t, lists, "step 2 with device events")
	close(events)
	n := lists.Load()
	waitCount(t, lists, n+10) // polled now
	ui.uiMu.Lock()
	ui.tabs.SelectIndex(tabFlash)
	ui.uiMu.Unlock()
	waitQuiet(t, lists, "step 3 shown after the events failed")
}
