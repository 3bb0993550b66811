package gui

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// tapWindowButton taps the window's button labelled text.
func (h *harness) tapWindowButton(text string) {
	h.t.Helper()
	var btn *keyButton
	h.onUI(func() {
		for _, o := range test.LaidOutObjects(h.ui.Window.Content()) {
			if b, ok := o.(*keyButton); ok && b.Text == text && b.Visible() {
				btn = b
			}
		}
	})
	if btn == nil {
		h.t.Fatalf("no %q button in the window", text)
	}
	h.onUI(func() { test.Tap(btn) })
}

// cardIs checks that card holds fx byte for byte outside its META, and in
// META (read as a booting node does) hostname and talosflash's record of
// schematic id.
func cardIs(t *testing.T, card string, fx *imagetest.Fixture, hostname, id string) {
	t.Helper()
	booted, err := nodetest.ReadCardAtBoot(card)
	if err != nil || booted.Hostname != hostname || booted.Record == nil || booted.Record.Schematic != id {
		t.Fatalf("%s boots as %+v (%v), want %s from schematic %s", card, booted, err, hostname, id)
	}
	got, err := os.ReadFile(card)
	if err != nil || int64(len(got)) < fx.Size {
		t.Fatalf("%s: %d bytes, %v", card, len(got), err)
	}
	tab, err := gpt.Read(bytes.NewReader(fx.Raw), fx.Size)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := tab.Find("META")
	if !bytes.Equal(got[:m.Offset], fx.Raw[:m.Offset]) || !bytes.Equal(got[m.Offset+m.Size:fx.Size], fx.Raw[m.Offset+m.Size:]) {
		t.Fatalf("%s: outside META the card is not its image", card)
	}
}

// "Flash all cards" with an inventory: the two cards chosen in step 2 go
// one to each node (cp-1, worker-1, paired in order), in one job: each
// card its node's image (the control plane's, with Newt, only on cp-1's)
// and META, each image downloaded once; the finish screen names each node
// and the session records each card with its own image. The Flash step
// shows that attempt (gui29's Attempt): the summary, the Download row and
// the finish screen name each image, and the finish screen stays when the
// written cards are unticked while step 1 holds another role (the worker
// here: the attempt is about the choice it started with, not its first
// card's image; it was forgotten at once).
func TestFlashAllCards(t *testing.T) {
	h, paths := nodePickHarness(t)
	wFx := h.image
	cpFx := imagetest.NewTalos(t, 8<<20, 6, 1<<20)
	cpID, wID := mustID(t, "controlplane"), mustID(t, "worker")
	h.factory.AddImage(cpID, factory.DefaultTalosVersion, "metal-arm64.raw.zst", cpFx.Zstd(t))
	h.onUI(func() {
		h.ui.image.selectProfile("worker")
		h.ui.tabs.SelectIndex(tabTarget)
		h.ui.target.list.Select(0)
		h.ui.target.list.Select(1)
		h.ui.tabs.SelectIndex(tabFlash)
	})
	h.onUI(func() { h.ui.Window.Resize(fyne.NewSize(MinWidth, MinHeight)) }) // both dialogs fit the smallest window
	h.tapWindowButton("Flash all cards…")
	h.onUI(func() { assertTextFits(t, h.ui, "flash all cards") })
	h.tapDialogButton("Next")
	h.onUI(func() {
		assertTextFits(t, h.ui, "erase the cards")
		text := h.overlayLabels()
		for _, want := range []string{"Erase 2 cards?", paths[0] + "  (", "→  cp-1, 192.168.1.11/24 (profile controlplane)", "→  worker-1, 192.168.1.21/24 (profile worker)"} {
			if !strings.Contains(text, want) {
				t.Fatalf("the confirmation lacks %q:\n%s", want, text)
			}
		}
	})
	h.tapDialogButton("Erase and flash")
	h.waitFor("finish", func() bool { return h.ui.flash.finished() })
	cardIs(t, paths[0], cpFx, "cp-1", cpID)
	cardIs(t, paths[1], wFx, "worker-1", wID)
	for _, c := range []struct{ id string }{{cpID}, {wID}} {
		if n := len(h.factory.RequestsTo(factorytest.ImagePath(c.id, factory.DefaultTalosVersion, "metal-arm64.raw.zst"))); n != 1 {
			t.Errorf("image %s requested %d times, want once", c.id, n)
		}
	}
	h.onUI(func() {
		title := h.ui.flash.doneTitle.Text
		if !strings.Contains(title, "Card ready: cp-1, 192.168.1.11/24 (label it cp-1)") || !strings.Contains(title, "Card ready: worker-1, 192.168.1.21/24 (label it worker-1)") {
			t.Fatalf("finish title %q (status %q)", title, h.ui.flash.status.Text)
		}
		f := h.ui.session.Flashed()
		if len(f) != 2 || f[0].Image.ProfileName() != "controlplane" || f[1].Image.ProfileName() != "worker" || f[0].CachePath == f[1].CachePath {
			t.Fatalf("session flashed %+v", f)
		}
		fs := h.ui.flash
		if !fs.done.Visible() || len(h.ui.session.Cards()) != 0 {
			t.Fatalf("finish screen shown %v with cards %v ticked: the attempt was forgotten", fs.done.Visible(), h.ui.session.Cards())
		}
		for _, id := range []string{cpID, wID} {
			if !strings.Contains(fs.doneBody.Text, "schematic "+id) || !strings.Contains(fs.summary.Text, factory.ShortID(id)) {
				t.Errorf("image %s missing from the finish screen %q or the summary %q", id, fs.doneBody.Text, fs.summary.Text)
			}
		}
		if d := fs.download.detail.Text; !strings.Contains(d, "profile controlplane: ") || !strings.Contains(d, "profile worker: ") || fs.download.bar.Value != 1 {
			t.Errorf("the Download row says %q at %v: not each image's download", d, fs.download.bar.Value)
		}
		if !strings.Contains(fs.summary.Text, "(downloaded from the Image Factory for this flash; cached now)") {
			t.Errorf("summary %q", fs.summary.Text)
		}
	})
}

// "Flash all cards" judges the inventory's files as they are when it is
// pressed, not as they were when the app opened: a custom worker profile
// with Newt added to profiles.yaml meanwhile (issue 37's incident, the
// worker config has no Newt document) refuses the run with the problem
// named, before the erase confirmation, and no card is written.
func TestFlashAllRechecksTheFilesEditedSinceTheAppOpened(t *testing.T) {
	h, paths := nodePickHarness(t)
	dir := t.TempDir()
	kit := testkit.Inventory{Configs: true}
	path := kit.Write(t, dir)
	settings, err := plan.LoadSettings(plan.Defaults{Inventory: path})
	if err != nil {
		t.Fatalf("the inventory as the app opened it: %v", err)
	}
	testkit.WriteFile(t, dir, "profiles.yaml", "profiles:\n  - name: worker\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}\n    extensions: [siderolabs/newt]\n")
	testkit.WriteFile(t, dir, "talosflash.yaml", "profiles: profiles.yaml\n"+kit.YAML())
	h.onUI(func() {
		h.ui.deps.Recheck = settings.Recheck
		h.ui.image.selectProfile("worker")
		h.ui.tabs.SelectIndex(tabTarget)
		h.ui.target.list.Select(0)
		h.ui.target.list.Select(1)
		h.ui.tabs.SelectIndex(tabFlash)
	})
	h.tapWindowButton("Flash all cards…")
	h.tapDialogButton("Next")
	h.onUI(func() {
		text := h.overlayLabels()
		if strings.Contains(text, "Erase 2 cards?") || !strings.Contains(text, "has changed since the app opened: nothing was written") ||
			!strings.Contains(text, "siderolabs/newt") || !strings.Contains(text, "profiles.yaml") {
			t.Fatalf("Flash all with an edited inventory:\n%s", text)
		}
	})
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.Size() != 0 {
			t.Errorf("%s written (%v, %v)", p, st.Size(), err)
		}
	}
}
