package gui

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// fullCard is a card that runs out of space after limit bytes.
type fullCard struct {
	imaging.Target
	limit, n int64
}

func (c *fullCard) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		return 0, &os.PathError{Op: "write", Path: "card", Err: syscall.ENOSPC}
	}
	c.n += int64(len(p))
	return c.Target.Write(p)
}

// twoCardsOneFull lists two file cards; the second runs out of space
// after 1 MiB (the user's "one of two cards failed").
func twoCardsOneFull(t *testing.T) (*harness, []string) {
	h := newHarness(t, nil)
	full := filepath.Join(t.TempDir(), "full.img")
	if err := os.WriteFile(full, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{h.target, full}
	var disks []devices.Disk
	for _, p := range paths {
		disks = append(disks, devices.Disk{Name: filepath.Base(p), Path: p, Size: 64 << 20, SizeHuman: "64 MiB", Model: "Test card", Transport: devices.TransportFile, Safe: true})
	}
	h.onUI(func() {
		open := h.ui.deps.Open
		h.ui.deps.Open = func(path string, size int64) (imaging.Target, error) {
			tg, err := open(path, size)
			if err != nil || path != full {
				return tg, err
			}
			return &fullCard{Target: tg, limit: 1 << 20}, nil
		}
		h.ui.target.setDisks(disks, nil)
		h.ui.image.selectProfile("controlplane")
		for _, p := range paths {
			h.ui.target.selectPath(p)
		}
		h.ui.tabs.SelectIndex(tabFlash)
		test.Tap(h.ui.flash.start)
	})
	h.tapDialogButton("Erase and flash")
	h.waitFor("finish", func() bool { return h.ui.flash.finished() })
	return h, paths
}

// One of two cards out of space: the headline is not green and counts the
// failure, the failed card's bars say "failed", not "42 % · 2 seconds
// left" and "waiting" (issue 29: a green "✓ Card ready" above it).
func TestFlashHeadlineNotGreenWhenACardFailed(t *testing.T) {
	h, paths := twoCardsOneFull(t)
	h.onUI(func() {
		f := h.ui.flash
		if !f.done.Visible() || f.doneTitle.Importance == widget.SuccessImportance || strings.HasPrefix(f.doneTitle.Text, "✓") {
			t.Errorf("headline %q (importance %v): green with a failed card", f.doneTitle.Text, f.doneTitle.Importance)
		}
		if want := "⚠ 1 of 2 cards ready. Label it: controlplane. " + paths[1] + " failed: see below."; f.doneTitle.Text != want {
			t.Errorf("headline %q does not count the failure", f.doneTitle.Text)
		}
		bad := f.card(paths[1])
		if w := bad.write.detail.Text; !(strings.HasPrefix(w, "failed at ") || strings.HasPrefix(w, "failed after ") || w == "failed: nothing written") || strings.Contains(w, "left") || bad.write.detail.Importance != widget.DangerImportance {
			t.Errorf("failed card's write bar: %q", w)
		}
		if v := bad.verify.detail.Text; v != "not verified" {
			t.Errorf("failed card's verify bar: %q", v)
		}
		if r := bad.result.Text; !bad.result.Visible() || !strings.Contains(r, "Failed: "+paths[1]) || !strings.Contains(r, "no space left") {
			t.Errorf("failed card's result: %q", r)
		}
		good := f.card(paths[0])
		if good.verify.bar.Value != 1 || !strings.Contains(good.result.Text, "written and verified") {
			t.Errorf("good card: verify %v, %q", good.verify.bar.Value, good.result.Text)
		}
		if f.status.Importance != widget.WarningImportance || !strings.Contains(f.status.Text, "1 of 2 cards failed") {
			t.Errorf("status %q", f.status.Text)
		}
	})
}

// A flash from the cache: the header's "cached: no download" and the
// Download row agree (the cache hit's one report used to show as a
// download "3.4 MiB of 3.4 MiB · done").
func TestFlashFromCacheIsNotADownload(t *testing.T) {
	h := newHarness(t, nil)
	h.onUI(func() { h.ui.image.selectProfile("worker") })
	h.flash()
	served := h.factory.BytesServed()
	h.onUI(func() {
		if d := h.ui.flash.download.detail.Text; !strings.Contains(d, "done") {
			t.Errorf("first flash's Download row: %q", d)
		}
		test.Tap(h.ui.flash.another)
		h.ui.image.selectProfile("worker")
	})
	h.waitFor("cached", func() bool { return h.ui.session.ImageCached() })
	h.flash()
	if h.factory.BytesServed() != served {
		t.Fatal("the second flash downloaded")
	}
	h.onUI(func() {
		f := h.ui.flash
		if s := f.summary.Text; !strings.Contains(s, "(cached: no download)") {
			t.Errorf("summary %q", s)
		}
		if d := f.download.detail.Text; d != "cached: no download" {
			t.Errorf("Download row %q under a header that says cached", d)
		}
	})
}

// The write row counts the image's decoded bytes when the pipeline can
// only count the compressed ones (the size is not known until the end):
// "448 MiB written (18 % of the image read)", not "56 MiB of 109 MiB".
func TestFlashWriteCountsDecodedBytes(t *testing.T) {
	a := &Attempt{Image: plan.Image{Version: "v1.14.5"}, Cards: []devices.Disk{{Path: "/dev/loop5"}}}
	s := NewSession(nil, nil)
	s.StartAttempt(a)
	s.AttemptProgress(a.Seq, imaging.Progress{Stage: imaging.StageWrite, Done: 20 << 20, Total: 109 << 20, Compressed: true, Decoded: 448 << 20})
	v := viewFlash(s.flashInputs(""))
	if got := v.Cards[0].Write.Detail; !strings.HasPrefix(got, "448 MiB written (18 % of the image read)") {
		t.Fatalf("write row %q", got)
	}
	s.EndAttempt(a.Seq, &plan.Outcome{Cards: []imaging.CardResult{{Target: "/dev/loop5", Err: &imaging.WriteError{Offset: 469762047, Err: syscall.ENOSPC}}}}, nil, time.Now())
	v = viewFlash(s.flashInputs(""))
	if got := v.Cards[0].Write.Detail; got != "failed after 448 MiB written" {
		t.Fatalf("failed write row %q", got)
	}
}

// A cached image shows no Download row (it showed "waiting" at 0 % under
// a summary that says "cached: no download"), before and during its
// flash; a card that already held the image says so, not "written"
// (issue 39).
func TestFlashCachedShowsNoDownloadRow(t *testing.T) {
	im := plan.Image{Version: "v1.14.5", Label: "worker"}
	cards := []devices.Disk{{Path: "/dev/loop5", Name: "loop5"}}
	s := NewSession(nil, nil)
	s.choice, s.cards, s.cached = &im, cards, true
	if v := viewFlash(s.flashInputs("")); v.ShowDownload {
		t.Errorf("a cached choice shows the Download row %+v", v.Download)
	}
	s.cached = false
	if v := viewFlash(s.flashInputs("")); !v.ShowDownload {
		t.Error("an image to download shows no Download row")
	}
	a := &Attempt{Image: im, Cards: cards, Cached: true}
	s.StartAttempt(a)
	if v := viewFlash(s.flashInputs("")); v.ShowDownload {
		t.Errorf("a flash from the cache shows the Download row %+v", v.Download)
	}
	held := imaging.CardResult{Target: "/dev/loop5", Bytes: 16 << 20, SHA256: "ab", Skipped: 16 << 20, Verified: true}
	s.EndAttempt(a.Seq, &plan.Outcome{Cards: []imaging.CardResult{held}}, nil, time.Now())
	v := viewFlash(s.flashInputs(""))
	if !strings.Contains(v.Body, "/dev/loop5 already held the image, verified") || strings.Contains(v.Body, "written") {
		t.Errorf("finish body %q", v.Body)
	}
	if w := v.Cards[0].Write.Detail; strings.Contains(w, "16 MiB written") {
		t.Errorf("write row %q for a card that already held the image", w)
	}
}
