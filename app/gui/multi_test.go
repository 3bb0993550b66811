package gui

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// multiHarness lists three safe file-backed cards; the third fails to open
// (a card that refuses the write).
func multiHarness(t *testing.T) (*harness, []string) {
	h := newHarness(t, nil)
	dir := t.TempDir()
	paths := []string{h.target, filepath.Join(dir, "card2.img"), filepath.Join(dir, "bad.img")}
	var disks []devices.Disk
	for i, p := range paths {
		if i > 0 {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		disks = append(disks, devices.Disk{Name: filepath.Base(p), Path: p, Size: 64 << 20, SizeHuman: "64 MiB", Model: "Test card", Transport: devices.TransportFile, Safe: true})
	}
	h.onUI(func() {
		open := h.ui.deps.Open
		h.ui.deps.Open = func(path string, size int64) (imaging.Target, error) {
			if path == paths[2] {
				return nil, errors.New("the card is write-protected")
			}
			return open(path, size)
		}
		h.ui.target.setDisks(disks, nil)
	})
	return h, paths
}

// Several cards chosen in step 2 are written at once: one confirmation
// naming each, per-card bars and results, the good ones verified byte for
// byte and recorded, the failing one reported alone.
func TestFlashSeveralCardsOneFailing(t *testing.T) {
	h, paths := multiHarness(t)
	h.onUI(func() {
		h.ui.image.selectProfile("worker")
		h.ui.tabs.SelectIndex(tabTarget)
		for i := range paths {
			h.ui.target.list.Select(i) // a click each
		}
		h.ui.target.list.Select(1) // a second click unchooses
		h.ui.target.list.Select(1) // ... and a third chooses again
		if got := len(h.ui.session.Cards()); got != 3 || !strings.Contains(h.ui.target.status.Text, "3 cards") {
			t.Fatalf("chosen %d cards, status %q", got, h.ui.target.status.Text)
		}
		h.ui.tabs.SelectIndex(tabFlash)
		if s := h.ui.flash.summary.Text; !strings.Contains(s, "Cards: 3") || !strings.Contains(s, paths[2]) {
			t.Fatalf("summary %q", s)
		}
		test.Tap(h.ui.flash.start)
		var text string
		for _, o := range test.LaidOutObjects(h.ui.Window.Canvas().Overlays().Top()) {
			if l, ok := o.(*widget.Label); ok {
				text += l.Text + "\n"
			}
		}
		for _, p := range paths {
			if !strings.Contains(text, p) || !strings.Contains(text, "Erase 3 cards?") {
				t.Fatalf("the confirmation does not name %s:\n%s", p, text)
			}
		}
	})
	h.tapDialogButton("Erase and flash")
	h.waitFor("finish", func() bool { return h.ui.flash.finished() })
	for _, p := range paths[:2] {
		assertTargetIs(t, p, h.image.Raw)
	}
	if st, err := os.Stat(paths[2]); err != nil || st.Size() != 0 {
		t.Fatalf("the failing card was written: %v", err)
	}
	h.onUI(func() {
		f := h.ui.flash
		if len(f.cards) != 3 {
			t.Fatalf("%d card rows", len(f.cards))
		}
		for i, cp := range f.cards[:2] {
			if cp.write.bar.Value != 1 || cp.verify.bar.Value != 1 || !strings.Contains(cp.result.Text, "written and verified") {
				t.Errorf("card %d: write %v verify %v result %q", i, cp.write.bar.Value, cp.verify.bar.Value, cp.result.Text)
			}
		}
		bad := f.cards[2]
		if !bad.result.Visible() || !strings.Contains(bad.result.Text, "Failed: "+paths[2]+" was not changed") || !strings.Contains(bad.result.Text, "write-protected") {
			t.Errorf("failing card's result %q", bad.result.Text)
		}
		if !strings.Contains(f.doneTitle.Text, "2 of 3 cards ready") || f.doneTitle.Importance != widget.WarningImportance || !strings.Contains(f.status.Text, "1 of 3 cards failed") {
			t.Errorf("finish %q / status %q", f.doneTitle.Text, f.status.Text)
		}
		var got []string
		for _, fl := range h.ui.session.Flashed() {
			got = append(got, fl.Card.Target)
		}
		if !slices.Equal(got, paths[:2]) {
			t.Errorf("session flashed %v, want %v", got, paths[:2])
		}
	})
	// One download for all: the factory served the image once.
	if n := len(h.factory.RequestsTo(factorytest.ImagePath(mustID(t, "worker"), factory.DefaultTalosVersion, "metal-arm64.raw.zst"))); n != 1 {
		t.Errorf("%d image requests for one multi-card flash", n)
	}
}

// Cards that need root go to one elevated child with every --device: one
// password prompt; its per-card results land on each card.
func TestSeveralCardsOneElevatedChild(t *testing.T) {
	h, paths := multiHarness(t)
	var calls [][]string
	h.onUI(func() {
		h.ui.deps.NeedsElevation = func(p string) bool { return true }
		h.ui.deps.ElevatedCommand = func(a []string) (*exec.Cmd, error) {
			calls = append(calls, a)
			// Reads the image sent on its stdin, then reports the cards.
			ok := fmt.Sprintf(`"bytes":%d,"sha256":"%s"`, h.image.Size, h.image.SHA256)
			return exec.Command("sh", "-c", fmt.Sprintf("head -c %d >/dev/null", elevate.StreamLength(h.image.Size))+`
echo '{"event":"progress","stage":"write","done":4096,"total":4096,"device":"`+paths[0]+`"}'
echo '{"event":"result","device":"`+paths[0]+`",`+ok+`,"verified":true,"verify_mode":"O_DIRECT"}'
echo '{"event":"result","device":"`+paths[1]+`",`+ok+`,"verified":true,"verify_mode":"O_DIRECT"}'
echo '{"event":"error","device":"`+paths[2]+`","code":6,"message":"write: input/output error"}'
echo '{"event":"error","code":6,"message":"1 of 3 cards failed"}'
exit 6`), nil
		}
		h.ui.image.selectProfile("worker")
		for i := range paths {
			h.ui.target.list.Select(i)
		}
		h.ui.tabs.SelectIndex(tabFlash)
		test.Tap(h.ui.flash.start)
	})
	h.tapDialogButton("Erase and flash")
	h.waitFor("finish", func() bool { return h.ui.flash.finished() })
	if len(calls) != 1 {
		t.Fatalf("%d elevated children, want one for every card", len(calls))
	}
	h.onUI(func() {
		f := h.ui.session.Flashed()
		if len(f) != 2 || f[0].CachePath == "" {
			t.Fatalf("flashed %+v (status %q)", f, h.ui.flash.status.Text)
		}
		if r := h.ui.flash.cards[2].result.Text; !strings.Contains(r, "Failed: "+paths[2]) || !strings.Contains(r, "incomplete") {
			t.Errorf("failing card %q", r)
		}
	})
	if want := (elevate.Args{Devices: paths}).List(); !slices.Equal(calls[0], want) {
		t.Fatalf("child args %q, want %q", calls[0], want)
	}
}
