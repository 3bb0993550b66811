package gui

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

func storageProfile(exts ...string) []factory.Profile {
	p := factory.BuiltinProfiles()
	return append(p, factory.Profile{Name: "storage", Description: "Pi worker with iSCSI",
		Overlay: p[0].Overlay, Extensions: exts})
}

// The image step checks the choice against the factory's lists as it is
// made: a typo in an extension is named, with the close match, and Next is
// blocked before anything is downloaded.
func TestImageStepChecksExtensionsAsYouChoose(t *testing.T) {
	h := newHarness(t, storageProfile("siderolabs/iscsi-tools", "siderolabs/util-linux-tool"))
	h.onUI(func() { h.ui.image.selectProfile("storage") })
	h.waitFor("the factory's verdict", func() bool { return h.ui.image.problem.Visible() })
	h.onUI(func() {
		msg := h.ui.image.problem.Text
		if !strings.Contains(msg, `"siderolabs/util-linux-tool"`) || !strings.Contains(msg, "did you mean siderolabs/util-linux-tools") {
			t.Errorf("problem %q does not name the typo and its match", msg)
		}
		if !h.ui.image.next.Disabled() {
			t.Error("Next enabled for an image the factory cannot build")
		}
		if !strings.HasPrefix(h.ui.image.profile.Selected, "storage  ·  Pi worker with iSCSI") {
			t.Errorf("profile shown as %q, want its description too", h.ui.image.profile.Selected)
		}
		// A correct profile: the check says what the factory offers.
		h.ui.image.selectProfile("controlplane")
	})
	h.waitFor("check of controlplane", func() bool { return strings.HasPrefix(h.ui.image.check.Text, "✓") })
	h.onUI(func() {
		if s := h.ui.image.check.Text; !strings.Contains(s, "siderolabs/newt") || !strings.Contains(s, "rpi_generic") || h.ui.image.next.Disabled() || h.ui.image.problem.Visible() {
			t.Errorf("valid choice: check %q, next disabled %v", s, h.ui.image.next.Disabled())
		}
	})
}

func TestImageStepChecksVersion(t *testing.T) {
	h := newHarness(t, nil)
	h.onUI(func() { h.ui.image.version.SetText("v1.99.0") })
	h.waitFor("the factory's verdict", func() bool { return h.ui.image.problem.Visible() })
	h.onUI(func() {
		if msg := h.ui.image.problem.Text; !strings.Contains(msg, "v1.99.0") || !strings.Contains(msg, "unknown Talos version") {
			t.Errorf("problem %q", msg)
		}
		if !h.ui.image.next.Disabled() || h.ui.image.check.Text != "" {
			t.Errorf("unknown version: next disabled %v, check %q", h.ui.image.next.Disabled(), h.ui.image.check.Text)
		}
	})
}

// With the factory down, a banner says so and what still works; an image
// that needs a download cannot go on: Next and Flash are off, saying why
// (before, Next stayed on and the flash failed after the erase
// confirmation); a cached image stays usable (it flashes offline).
func TestImageStepFactoryUnreachableBanner(t *testing.T) {
	h := newHarness(t, nil)
	h.flash() // the first role's (controlplane's) image is cached now
	h.factory.Close()
	h.onUI(func() { h.ui.image.selectProfile("worker") }) // not cached
	h.waitFor("banner", func() bool { return h.ui.image.offline.Visible() })
	h.onUI(func() {
		s := h.ui.image.offline.Text
		for _, want := range []string{"cannot be reached", h.factory.URL, "local image files", "cache"} {
			if !strings.Contains(s, want) {
				t.Errorf("banner %q lacks %q", s, want)
			}
		}
		if !h.ui.image.next.Disabled() || !h.ui.image.problem.Visible() || !strings.Contains(h.ui.image.problem.Text, "must be downloaded") {
			t.Errorf("uncached, factory down: next disabled %v, reason %q", h.ui.image.next.Disabled(), h.ui.image.problem.Text)
		}
		h.ui.tabs.SelectIndex(tabFlash)
		if !h.ui.flash.start.Disabled() || !strings.Contains(h.ui.flash.summary.Text, "cannot be reached") {
			t.Errorf("flash step: start disabled %v, summary %q", h.ui.flash.start.Disabled(), h.ui.flash.summary.Text)
		}
		for _, size := range layoutSizes { // the reason, whole, in both steps
			h.ui.Window.Resize(size)
			for _, tab := range []int{tabImage, tabFlash} {
				h.ui.tabs.SelectIndex(tab)
				for range 3 {
					h.ui.Window.Content().Refresh()
				}
				assertObjectTextFits(t, h.ui, h.ui.Window.Content(), fmt.Sprintf("offline, tab %d at %v", tab, size))
			}
		}
		h.ui.tabs.SelectIndex(tabImage)
		h.ui.image.selectProfile("controlplane")
	})
	h.waitFor("cached image checked", func() bool {
		return h.ui.image.offline.Visible() && strings.Contains(h.ui.image.offline.Text, "is cached")
	})
	h.onUI(func() {
		if h.ui.image.next.Disabled() || h.ui.image.problem.Visible() {
			t.Errorf("a cached image is blocked offline: %q", h.ui.image.problem.Text)
		}
	})
}

// A pasted installer reference of a built-in role is that role, offline.
func TestInstallerRefOfBuiltinRoleRecognisedOffline(t *testing.T) {
	h := newHarness(t, nil)
	id := mustID(t, "controlplane")
	h.factory.Close() // nothing to ask
	h.onUI(func() {
		h.ui.image.ref.SetText("factory.talos.dev/metal-installer/" + id + ":v1.14.5")
		h.ui.image.useRef()
		c := h.ui.session.Choice()
		if c == nil || c.ProfileName() != "controlplane" || c.Schematic == nil {
			t.Fatalf("choice %+v: not recognised as controlplane", c)
		}
		if !strings.Contains(h.ui.image.yaml.Text, "siderolabs/newt") || !strings.Contains(h.ui.image.notes.Text, "ExtensionServiceConfig") {
			t.Errorf("recognised role shows no schematic/notes: %q / %q", h.ui.image.yaml.Text, h.ui.image.notes.Text)
		}
	})
}

// A local image is written as it is, with no factory at all.
func TestLocalImageFileFlashes(t *testing.T) {
	h := newHarness(t, nil)
	img := filepath.Join(t.TempDir(), "custom.raw.xz")
	if err := os.WriteFile(img, h.image.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	h.factory.Close()
	h.onUI(func() {
		h.ui.HandleDrop(fyne.NewPos(10, 10), []fyne.URI{storage.NewFileURI(img)}) // dropped on step 1
		c := h.ui.session.Choice()
		if c == nil || c.LocalPath != img || h.ui.image.next.Disabled() {
			t.Fatalf("local image not chosen: %+v", c)
		}
		if !strings.Contains(h.ui.image.check.Text, "needs no Image Factory") || h.ui.image.offline.Visible() {
			t.Errorf("local image: check %q, banner %v", h.ui.image.check.Text, h.ui.image.offline.Visible())
		}
	})
	h.waitFor("size from the xz index", func() bool { return strings.Contains(h.ui.image.size.Text, "on the card") })
	h.flash()
	h.onUI(func() {
		if !h.ui.flash.succeeded() || !strings.Contains(h.ui.flash.doneTitle.Text, "custom.raw.xz") {
			t.Fatalf("local flash: %q / %q", h.ui.flash.status.Text, h.ui.flash.doneTitle.Text)
		}
	})
	assertTargetIs(t, h.target, h.image.Raw)
}

// --allow-loop makes a loop device selectable; without it the refusal
// names the flag.
func TestAllowLoopMakesLoopSelectable(t *testing.T) {
	for _, allow := range []bool{false, true} {
		h := newHarness(t, nil)
		loop := devices.Disk{Name: "loop7", Path: "/dev/loop7", Size: 64 << 20, SizeHuman: "64 MiB", Transport: devices.TransportLoop,
			Refusal: &devices.RefusedError{Device: "/dev/loop7", Reason: devices.CodeVirtual, Msg: "/dev/loop7 is a loop device, not a card (allowed with --allow-loop, for testing)"}}
		h.onUI(func() {
			h.ui.deps.Safety.AllowLoop = allow
			h.ui.target.setDisks([]devices.Disk{loop}, nil)
			got := h.ui.target.selectPath("/dev/loop7")
			if got != allow {
				t.Fatalf("allow-loop %v: selectable %v (status %q)", allow, got, h.ui.target.status.Text)
			}
			if !allow && !strings.Contains(h.ui.target.status.Text, "--allow-loop") {
				t.Errorf("refusal %q does not name --allow-loop", h.ui.target.status.Text)
			}
		})
	}
}

// Enter is the step's primary action and confirms a dialog; Esc closes it.
func TestKeyboardFlowEnterAndEsc(t *testing.T) {
	h := newHarness(t, nil)
	enter := &fyne.KeyEvent{Name: fyne.KeyReturn}
	h.onUI(func() {
		h.ui.image.selectProfile("worker")
		h.ui.typedKey(enter)
		if h.ui.tabs.SelectedIndex() != tabTarget {
			t.Fatalf("Enter on step 1: tab %d", h.ui.tabs.SelectedIndex())
		}
		h.ui.typedKey(enter) // no card yet: Next is disabled
		if h.ui.tabs.SelectedIndex() != tabTarget {
			t.Fatal("Enter moved on without a card")
		}
		h.ui.target.selectPath(h.target)
		h.ui.typedKey(enter)
		if h.ui.tabs.SelectedIndex() != tabFlash {
			t.Fatalf("Enter on step 2: tab %d", h.ui.tabs.SelectedIndex())
		}
		h.ui.typedKey(enter) // Flash: the confirmation
		if h.ui.modal == nil {
			t.Fatal("Enter on step 3 shows no confirmation")
		}
		h.ui.typedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		if h.ui.modal != nil || h.ui.flash.running != nil {
			t.Fatal("Esc did not close the confirmation, or it started")
		}
		h.ui.typedKey(enter)
		h.ui.typedKey(enter) // "Erase and flash"
	})
	h.waitFor("flash", func() bool { return h.ui.flash.finished() })
	assertTargetIs(t, h.target, h.image.Raw)
	h.onUI(func() {
		// A focused button takes Enter too (Fyne's takes only Space).
		b := h.ui.flash.toNodes
		test.FocusNext(h.ui.Window.Canvas())
		b.TypedKey(enter)
		if h.ui.tabs.SelectedIndex() != tabNodes {
			t.Fatalf("Enter on the focused Next: tab %d", h.ui.tabs.SelectedIndex())
		}
	})
}

// Esc closes the file chooser too.
func TestEscClosesFileDialog(t *testing.T) {
	h := newHarness(t, nil)
	c := h.openChooser(h.ui.image.openImageFile)
	h.onUI(func() {
		c.path.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape}) // from the focused path field
		if h.ui.modal != nil || h.ui.Window.Canvas().Overlays().Top() != nil {
			t.Fatal("Esc did not close the file chooser")
		}
	})
}

// `talosflash gui --subnet` is all that "Scan this network" scans.
func TestSubnetsReplaceLocalPrefixes(t *testing.T) {
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.131/32")}
	d, err := DefaultDeps(Options{Subnets: want, Cache: &imaging.Cache{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.LocalPrefixes()
	if err != nil || len(got) != 1 || got[0] != want[0] {
		t.Fatalf("LocalPrefixes() = %v, %v; want %v", got, err, want)
	}
}

// A local image fills step 1 with what the file says (name, size, format,
// size on the card) and "unknown" for what it does not say; no field turns
// red that the user did not touch, and Next is never enabled beside a red
// field. A file that is no image is named and blocks Next. Choosing a role
// afterwards makes the version a checked field again. The Flash step has no
// Download row for it.
func TestLocalImageFillsStepOne(t *testing.T) {
	h := newHarness(t, nil)
	dir := t.TempDir()
	img := filepath.Join(dir, "my-talos.raw.xz")
	if err := os.WriteFile(img, h.image.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	h.onUI(func() { h.ui.image.useLocal(img) })
	h.waitFor("the file's size", func() bool { return strings.Contains(h.ui.image.size.Text, "on the card") })
	h.onUI(func() {
		s := h.ui.image
		if t1 := s.size.Text; !strings.Contains(t1, "my-talos.raw.xz") || !strings.Contains(t1, "xz") {
			t.Errorf("size line %q does not name the file and its format", t1)
		}
		if s.version.Validate() != nil || !strings.Contains(s.version.PlaceHolder, "unknown") || s.version.Text != "" {
			t.Errorf("version field: text %q placeholder %q error %v", s.version.Text, s.version.PlaceHolder, s.version.Validate())
		}
		if !strings.HasPrefix(s.id.Text, "unknown") || s.problem.Visible() || s.next.Disabled() {
			t.Errorf("schematic %q, problem %q (shown %v), next disabled %v", s.id.Text, s.problem.Text, s.problem.Visible(), s.next.Disabled())
		}
		h.ui.tabs.SelectIndex(tabFlash)
		if h.ui.flash.dlRow[0].Visible() {
			t.Error("a local file shows a Download row")
		}
	})
	bz := filepath.Join(dir, "old.raw.bz2")
	if err := os.WriteFile(bz, []byte("BZh91AY&SY....................."), 0o600); err != nil {
		t.Fatal(err)
	}
	h.onUI(func() { h.ui.image.useLocal(bz) })
	h.waitFor("the refusal", func() bool { return h.ui.image.problem.Visible() })
	h.onUI(func() {
		if !strings.Contains(h.ui.image.problem.Text, "bzip2") || !h.ui.image.next.Disabled() {
			t.Errorf("bzip2 file: problem %q, next disabled %v", h.ui.image.problem.Text, h.ui.image.next.Disabled())
		}
		h.ui.image.selectProfile("worker")
		v := h.ui.image.version
		if v.Disabled() || v.Text != factory.DefaultTalosVersion || h.ui.image.next.Disabled() {
			t.Fatalf("back to a role: version %q disabled %v", v.Text, v.Disabled())
		}
		v.SetText("banana")
		if v.Validate() == nil || !h.ui.image.next.Disabled() {
			t.Fatal("a bad version is not red, or Next stays enabled beside it")
		}
		h.ui.tabs.SelectIndex(tabFlash)
		if !h.ui.flash.dlRow[0].Visible() {
			t.Error("a factory image shows no Download row")
		}
	})
}
