package gui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

var (
	imageOnce sync.Once
	imageFx   *imagetest.Fixture
)

// sharedImage is generated once per test binary: xz compression is the slow part.
func sharedImage(t *testing.T) *imagetest.Fixture {
	imageOnce.Do(func() { imageFx = imagetest.New(t, 3<<20+4096, 42, 1<<20) })
	return imageFx
}

type harness struct {
	t       *testing.T
	ui      *UI
	factory *factorytest.Server
	image   *imagetest.Fixture
	target  string
}

// newHarness builds the UI against a fake factory serving a generated image
// for every profile, and a regular file offered as the only safe disk.
func newHarness(t *testing.T, profiles []factory.Profile) *harness {
	t.Helper()
	srv := factorytest.New(t)
	fx := sharedImage(t)
	if profiles == nil {
		profiles = factory.BuiltinProfiles()
	}
	for _, p := range profiles {
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		srv.AddImage(id, p.Version(), "metal-arm64.raw.xz", fx.XZ)
		srv.AddImage(id, p.Version(), "metal-arm64.raw.zst", fx.Zstd(t))
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "card.img")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	disks := []devices.Disk{
		{Name: "card.img", Path: target, Size: 64 << 20, SizeHuman: "64 MiB", Model: "Test card", Transport: devices.TransportFile, Safe: true},
		{Name: "sda", Path: "/dev/sda", Size: 500 << 30, SizeHuman: "500 GiB", Model: "System SSD", Transport: devices.TransportSATA,
			Refusal: &devices.RefusedError{Device: "/dev/sda", Reason: devices.CodeSystemDisk, Msg: "/dev/sda holds the system filesystem /"}},
	}
	deps := Deps{
		Factory:        factory.NewClient(srv.URL, srv.Client()),
		Cache:          &imaging.Cache{Dir: filepath.Join(dir, "cache")},
		Profiles:       profiles,
		ListDevices:    func() ([]devices.Disk, error) { return disks, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal, // the app's own chooser (filechooser_test.go has the portal)
		DeviceEvents:   func(context.Context) <-chan struct{} { return nil },
		RefreshEvery:   -1,
	}
	a := test.NewTempApp(t)
	ui := New(a, deps)
	t.Cleanup(ui.Close)
	ui.Window.Resize(fyne.NewSize(1000, 700))
	h := &harness{t: t, ui: ui, factory: srv, image: fx, target: target}
	h.waitFor("device list", func() bool { return len(ui.target.disks) == 2 })
	return h
}

// onUI runs fn serialized with the UI's background updates.
func (h *harness) onUI(fn func()) {
	h.ui.uiMu.Lock()
	defer h.ui.uiMu.Unlock()
	fn()
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ok bool
		h.onUI(func() { ok = cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tapDialogButton taps the button labelled text in the top overlay.
func (h *harness) tapDialogButton(text string) {
	h.t.Helper()
	var btn fyne.Tappable
	h.onUI(func() {
		top := h.ui.Window.Canvas().Overlays().Top()
		if top == nil {
			return
		}
		for _, o := range test.LaidOutObjects(top) {
			if b, ok := o.(*widget.Button); ok && b.Text == text {
				btn = b
			}
			if b, ok := o.(*keyButton); ok && b.Text == text {
				btn = b
			}
		}
	})
	if btn == nil {
		h.t.Fatalf("no %q button in the dialog", text)
	}
	h.onUI(func() { test.Tap(btn) })
}

// flash runs steps 2-3: select the card, press Flash, confirm, wait.
func (h *harness) flash() {
	h.t.Helper()
	h.onUI(func() {
		if !h.ui.target.selectPath(h.target) {
			h.t.Fatal("target not selectable")
		}
		h.ui.tabs.SelectIndex(tabFlash)
		if h.ui.flash.start.Disabled() {
			h.t.Fatal("Flash button disabled with image and card chosen")
		}
		test.Tap(h.ui.flash.start)
	})
	h.tapDialogButton("Erase and flash") // fails without the confirmation
	h.onUI(func() {
		if h.ui.flash.running == nil && !h.ui.flash.finished() {
			h.t.Fatal("flash did not start")
		}
	})
	h.waitFor("finish", func() bool { return h.ui.flash.finished() })
}

func TestFlashFlowAndFlashAnotherHitsCache(t *testing.T) {
	h := newHarness(t, nil)
	ui := h.ui

	worker, _ := factory.FindProfile(factory.BuiltinProfiles(), "worker")
	wantID, _ := worker.SchematicID()
	h.onUI(func() {
		ui.image.selectProfile("worker")
		if got := ui.image.id.Text; got != wantID {
			t.Fatalf("schematic ID shown %q, want %q", got, wantID)
		}
		if !strings.Contains(ui.image.yaml.Text, "rpi_generic") || strings.Contains(ui.image.yaml.Text, "newt") {
			t.Fatalf("worker schematic YAML wrong:\n%s", ui.image.yaml.Text)
		}
		// The system disk is listed but cannot be chosen.
		ui.target.list.Select(1)
		if len(ui.target.chosen) != 0 || !strings.Contains(ui.target.status.Text, "system filesystem") {
			t.Fatalf("unsafe disk selectable: chosen=%v status=%q", ui.target.chosen, ui.target.status.Text)
		}
	})

	h.flash()
	h.onUI(func() {
		if f := ui.session.Flashed(); len(f) != 1 || f[0].Card.Target != h.target || f[0].Card.SHA256 != h.image.SHA256 || f[0].CachePath == "" {
			t.Fatalf("flash failed (%q): session has %+v", ui.flash.status.Text, f)
		}
		for _, b := range []*stageBar{ui.flash.download, ui.flash.cards[0].write, ui.flash.cards[0].verify} {
			if b.bar.Value != 1 {
				t.Errorf("bar %q at %v, want 1", b.detail.Text, b.bar.Value)
			}
		}
		if s := ui.flash.doneBody.Text; !strings.Contains(s, "written and verified") || !strings.Contains(s, wantID) {
			t.Errorf("finish screen %q does not say verified with the full schematic ID", s)
		}
		if s := ui.flash.doneTitle.Text; !ui.flash.done.Visible() || !strings.Contains(s, "Label it: worker") {
			t.Errorf("finish title %q (shown %v) does not name the role", s, ui.flash.done.Visible())
		}
		if !strings.Contains(ui.image.size.Text, "on the card") {
			t.Errorf("image size not shown after download: %q", ui.image.size.Text)
		}
		// The summary describes this flash: it downloaded (the image is
		// cached now, which the next flash will say).
		if s := ui.flash.summary.Text; !strings.Contains(s, "downloaded from the Image Factory for this flash") || strings.Contains(s, "no download") {
			t.Errorf("summary after a downloading flash: %q", s)
		}
	})
	h.waitFor("eject", func() bool { return ui.session.Attempt() != nil && ui.session.Attempt().Ejected != nil })
	h.onUI(func() {
		if s := ui.flash.eject.Text; !strings.Contains(s, "Safe to remove") || !strings.Contains(s, "image file") {
			t.Errorf("eject line %q", s)
		}
	})
	assertTargetIs(t, h.target, h.image.Raw)
	// The device list refreshing (partitions appear on the new card) keeps
	// the finish screen.
	h.onUI(func() {
		ui.target.setDisks(append([]devices.Disk(nil), ui.target.disks...), nil)
		if !ui.flash.done.Visible() || ui.flash.start.Visible() {
			t.Fatal("a device list refresh cleared the finish screen")
		}
	})
	served := h.factory.BytesServed()
	if served < int64(len(h.image.XZ)) {
		t.Fatalf("factory served %d bytes, image is %d", served, len(h.image.XZ))
	}

	// Second card: same role, image from the cache.
	if err := os.WriteFile(h.target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.onUI(func() {
		test.Tap(ui.flash.another)
		if ui.tabs.SelectedIndex() != tabImage || !strings.HasPrefix(ui.image.profile.Selected, "worker") {
			t.Fatalf("flash another: tab %d, profile %q", ui.tabs.SelectedIndex(), ui.image.profile.Selected)
		}
		// Nothing of the last card is left: no card chosen, no result shown.
		if ui.session.Disk() != nil || len(ui.target.chosen) != 0 || ui.target.next.Disabled() == false {
			t.Fatalf("flash another kept the card: session %v, step 2 %v", ui.session.Disk(), ui.target.chosen)
		}
		if ui.flash.done.Visible() || ui.flash.status.Text != "" || ui.flash.cards[0].write.bar.Value != 0 || !ui.flash.start.Disabled() {
			t.Fatalf("flash another left the last result: done %v, status %q", ui.flash.done.Visible(), ui.flash.status.Text)
		}
		// Another role is not cached: step 3 must not claim it is.
		ui.image.selectProfile("controlplane")
		if s := ui.flash.summary.Text; strings.Contains(s, "cached") || !strings.Contains(s, "downloaded") {
			t.Fatalf("controlplane (not cached) summary: %q", s)
		}
		ui.image.selectProfile("worker")
	})
	h.waitFor("worker shown as cached", func() bool { return strings.Contains(ui.flash.summary.Text, "(cached: no download)") })
	h.flash()
	h.onUI(func() {
		if f := ui.session.Flashed(); len(f) != 2 || f[1].Image.ProfileName() != "worker" {
			t.Fatalf("second flash failed (%q): session has %+v", ui.flash.status.Text, f)
		}
	})
	assertTargetIs(t, h.target, h.image.Raw)
	if got := h.factory.BytesServed(); got != served {
		t.Fatalf("second flash downloaded again: %d bytes served, was %d", got, served)
	}
	// Another image chosen without "Flash another card": the finish screen
	// goes; the card just written is no longer ticked (step 2 said so), so
	// Flash waits for a card instead of erasing it again.
	h.onUI(func() {
		ui.image.selectProfile("controlplane")
		if ui.flash.done.Visible() || !ui.flash.start.Visible() || !ui.flash.start.Disabled() {
			t.Fatalf("another image chosen: finish shown %v, Flash shown %v enabled %v", ui.flash.done.Visible(), ui.flash.start.Visible(), !ui.flash.start.Disabled())
		}
		if s := ui.flash.summary.Text; !strings.Contains(s, "no card chosen") {
			t.Fatalf("summary %q", s)
		}
		if s := ui.target.status.Text; !strings.HasPrefix(s, h.target+" written: no longer selected") {
			t.Fatalf("step 2 does not say why the card is no longer ticked: %q", s)
		}
		if !ui.target.selectPath(h.target) || ui.flash.start.Disabled() {
			t.Fatal("the card cannot be chosen again")
		}
	})
}

func assertTargetIs(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("target holds %d bytes, not the %d-byte raw image", len(got), len(want))
	}
}

func TestCancelReportsIncomplete(t *testing.T) {
	h := newHarness(t, nil)
	path := factorytest.ImagePath(mustID(t, "controlplane"), factory.DefaultTalosVersion, "metal-arm64.raw.zst")
	h.factory.StallAfter(path, 1000)
	h.onUI(func() {
		h.ui.image.selectProfile("controlplane")
		h.ui.target.selectPath(h.target)
		h.ui.tabs.SelectIndex(tabFlash)
		test.Tap(h.ui.flash.start)
	})
	h.tapDialogButton("Erase and flash")
	h.waitFor("download to start", func() bool { return h.factory.BytesServed() > 0 })
	h.onUI(func() { test.Tap(h.ui.flash.cancel) })
	h.waitFor("cancel", func() bool { return h.ui.flash.finished() })
	h.onUI(func() {
		// Cancelled during the download: nothing was written, and the
		// status says so (it used to call the card incomplete).
		if s := h.ui.flash.status.Text; !strings.Contains(s, "was not changed") {
			t.Fatalf("status after cancel %q", s)
		}
		// A new attempt starts clean: no "Cancelled: ..." and no old bar
		// under its confirmation.
		h.ui.flash.download.bar.SetValue(0.13) // as the cancelled run left it
		test.Tap(h.ui.flash.start)
		if s := h.ui.flash.status.Text; s != "" || h.ui.flash.download.bar.Value != 0 {
			t.Fatalf("before a new flash: status %q, download bar %v", s, h.ui.flash.download.bar.Value)
		}
	})
	// Nothing under its final name in the cache.
	p, _ := h.ui.deps.Cache.Path(imaging.FactoryCacheKey(h.ui.deps.Factory.BaseURL(), mustID(t, "controlplane"), factory.DefaultTalosVersion, "metal-arm64.raw.zst"))
	if _, err := os.Stat(p); err == nil {
		t.Fatal("cancelled download left a cache entry")
	}
}

func mustID(t *testing.T, profile string) string {
	p, err := factory.FindProfile(factory.BuiltinProfiles(), profile)
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// dropOnNode adds the node, drops file onto its row, and returns the prompt.
func (h *harness) dropOnNode(addr, flashedAs, file string) (*nodeRow, *applyPrompt) {
	h.t.Helper()
	var row *nodeRow
	h.onUI(func() {
		h.ui.tabs.SelectIndex(tabNodes)
		row = h.ui.nodes.addNode(node.Node{Addr: addr, Maintenance: true})
		row.flashed.SetSelected(flashedAs)
		h.ui.nodes.addNode(node.Node{Addr: "127.0.0.2:50000", Maintenance: true}) // a second row to miss
		h.ui.Window.Content().Refresh()
	})
	var pos fyne.Position
	h.onUI(func() {
		p := fyne.CurrentApp().Driver().AbsolutePositionForObject(row.box)
		if row.box.Size().Height <= 0 {
			h.t.Fatal("node row not laid out")
		}
		pos = p.Add(fyne.NewPos(20, row.box.Size().Height/2))
		h.ui.escape()
		h.ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(file)})
	})
	var p *applyPrompt
	h.waitFor("findings dialog", func() bool { p = h.ui.nodes.openPrompt(); return p != nil })
	return row, p
}

func TestDropConfigOnNodeApplies(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{})
	file, _ := filepath.Abs("testdata/worker.yaml")
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	row, p := h.dropOnNode(srv.Addr(), "worker", file)
	h.onUI(func() {
		for _, f := range p.findings {
			if f.Severity == node.SeverityError {
				t.Fatalf("unexpected blocking finding for a correct worker config: %+v", f)
			}
		}
		if p.apply.Disabled() {
			t.Fatal("Apply disabled without errors")
		}
		test.Tap(p.apply)
	})
	h.waitFor("apply", func() bool { return !h.ui.nodes.applying() })
	// The apply job probes the node again: a v1.14 node gets its dry run first.
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[0].DryRun || reqs[1].DryRun || !bytes.Equal(reqs[1].Config, want) {
		t.Fatalf("node received %d requests; want its dry run, then exactly the bytes of worker.yaml", len(reqs))
	}
	h.onUI(func() {
		if !strings.HasPrefix(row.reply.Text, "Applied worker.yaml") {
			t.Fatalf("row shows %q", row.reply.Text)
		}
	})
}

// The incident: a worker card flashed with Newt but a config without the
// ExtensionServiceConfig. The finding blocks Apply until overridden.
func TestNewtWithoutServiceConfigBlocksApply(t *testing.T) {
	profiles := []factory.Profile{{
		Name:    "worker",
		Overlay: factory.BuiltinProfiles()[1].Overlay,
		// the mistake: Newt on a worker
		Extensions: []string{factory.NewtExtension},
	}}
	h := newHarness(t, profiles)
	srv := nodetest.Start(t, nodetest.Options{})
	file, _ := filepath.Abs("testdata/worker.yaml")
	_, p := h.dropOnNode(srv.Addr(), "worker", file)
	h.onUI(func() {
		found := false
		for _, f := range p.findings {
			if f.Code == node.CodeExtensionConfigMissing && f.Severity == node.SeverityError {
				found = true
			}
		}
		if !found {
			t.Fatalf("no blocking extension-config-missing finding: %+v", p.findings)
		}
		if !p.apply.Disabled() || p.override == nil {
			t.Fatal("Apply not blocked by the error")
		}
		test.Tap(p.apply) // disabled: must do nothing
	})
	time.Sleep(100 * time.Millisecond)
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("blocked config was sent (%d requests)", n)
	}
	h.onUI(func() {
		p.override.SetChecked(true)
		if p.apply.Disabled() {
			t.Fatal("explicit override did not enable Apply")
		}
	})
}

func TestDropOutsideRowsSendsNothing(t *testing.T) {
	h := newHarness(t, nil)
	file, _ := filepath.Abs("testdata/worker.yaml")
	h.onUI(func() {
		h.ui.tabs.SelectIndex(tabNodes)
		h.ui.nodes.addNode(node.Node{Addr: "127.0.0.1:1", Maintenance: true})
		h.ui.HandleDrop(fyne.NewPos(5, 5), []fyne.URI{storage.NewFileURI(file)})
		if h.ui.nodes.openPrompt() != nil || !strings.Contains(h.ui.nodes.status.Text, "onto a node") {
			t.Fatalf("drop outside rows: pending=%v status=%q", h.ui.nodes.openPrompt(), h.ui.nodes.status.Text)
		}
	})
}

func TestInstallerRefChoice(t *testing.T) {
	h := newHarness(t, nil)
	id := mustID(t, "controlplane")
	h.onUI(func() {
		h.ui.image.ref.SetText("factory.talos.dev/metal-installer/" + id + ":v1.14.4")
		h.ui.image.useRef()
		c := h.ui.image.choice
		if c == nil || c.SchematicID != id || c.Version != "v1.14.4" {
			t.Fatalf("choice from ref: %+v", c)
		}
		h.ui.image.ref.SetText("not a ref")
		h.ui.image.useRef()
		if h.ui.image.choice != nil || !h.ui.image.problem.Visible() {
			t.Fatal("bad ref accepted")
		}
		h.ui.image.selectProfile("worker")
		h.ui.image.version.SetText("1.14")
		if h.ui.image.choice != nil || h.ui.image.next.Disabled() == false {
			t.Fatal("invalid version accepted")
		}
	})
}

func TestImageStepWarnsAboutNewt(t *testing.T) {
	h := newHarness(t, nil)
	h.onUI(func() {
		h.ui.image.selectProfile("controlplane")
		if !h.ui.image.notes.Visible() || !strings.Contains(h.ui.image.notes.Text, "ExtensionServiceConfig") {
			t.Fatalf("controlplane (Newt) image: notes %q visible=%v, want the ESC warning", h.ui.image.notes.Text, h.ui.image.notes.Visible())
		}
		h.ui.image.selectProfile("worker")
		if h.ui.image.notes.Visible() {
			t.Fatalf("worker image shows notes %q; want none", h.ui.image.notes.Text)
		}
	})
}

func TestInstallerRefLooksUpSchematic(t *testing.T) {
	h := newHarness(t, nil)
	cp, _ := factory.FindProfile(factory.BuiltinProfiles(), "controlplane")
	id, err := h.factory.AddSchematic(cp.Schematic())
	if err != nil {
		t.Fatal(err)
	}
	h.onUI(func() {
		h.ui.image.ref.SetText("factory.talos.dev/metal-installer/" + id + ":v1.14.5")
		h.ui.image.useRef()
	})
	h.waitFor("the schematic YAML and the Newt note", func() bool {
		return strings.Contains(h.ui.image.yaml.Text, "siderolabs/newt") && strings.Contains(h.ui.image.notes.Text, "ExtensionServiceConfig")
	})
}

// A card that needs root is written by the elevated child on the cached
// image; its result lands in the session like an in-process flash.
func TestFlashThroughElevatedChild(t *testing.T) {
	h := newHarness(t, nil)
	var args []string
	h.onUI(func() {
		h.ui.deps.NeedsElevation = func(p string) bool { return p == h.target }
		h.ui.deps.ElevatedCommand = func(a []string) (*exec.Cmd, error) {
			args = a
			// Reads the image sent on its stdin, then reports it written.
			return exec.Command("sh", "-c", fmt.Sprintf(`head -c %d >/dev/null
echo '{"event":"progress","stage":"write","done":4096,"total":4096}'
echo '{"event":"result","device":"x","bytes":%d,"sha256":"%s","verified":true,"verify_mode":"O_DIRECT"}'`, elevate.StreamLength(h.image.Size), h.image.Size, h.image.SHA256)), nil
		}
		h.ui.image.selectProfile("worker")
	})
	h.flash()
	var cached string
	h.onUI(func() {
		f := h.ui.session.Flashed()
		if len(f) != 1 || f[0].Card.SHA256 != h.image.SHA256 || !f[0].Card.Verified || f[0].CachePath == "" {
			t.Fatalf("flash through the child (%q): session has %+v", h.ui.flash.status.Text, f)
		}
		cached = f[0].CachePath
		if !strings.Contains(h.ui.flash.doneBody.Text, "written and verified") {
			t.Errorf("finish screen %q", h.ui.flash.doneBody.Text)
		}
	})
	// The child is told no path: the image came on its stdin.
	if want := (elevate.Args{Devices: []string{h.target}}).List(); !slices.Equal(args, want) {
		t.Fatalf("child args %q, want %q", args, want)
	}
	if data, err := os.ReadFile(cached); err != nil || !bytes.Equal(data, h.image.Zstd(t)) {
		t.Fatalf("the download is not in the cache: %v", err)
	}
}

// What the status line says a failure left on the card.
func TestCardState(t *testing.T) {
	for _, c := range []struct {
		err     error
		touched bool
		want    string
	}{
		{fmt.Errorf("too small: %w", imaging.ErrTargetTooSmall), false, "was not changed"},
		{&devices.RefusedError{Device: "/dev/sdb", Reason: devices.CodeSystemDisk, Msg: "system disk"}, false, "was not changed"},
		{fmt.Errorf("download: %w", context.Canceled), false, "was not changed"},
		{fmt.Errorf("flash interrupted after 4 bytes: %w", imaging.ErrIncomplete), true, "incomplete"},
		{&imaging.WriteError{Offset: 4096, Err: errors.New("EIO")}, true, "incomplete"},
		{&imaging.VerifyError{Offset: 4096}, true, "does not read back"},
		{fmt.Errorf("verify interrupted (%w); the image was written completely", context.Canceled), true, "not verified"},
	} {
		if got := cardState(c.err, c.touched); !strings.Contains(got, c.want) {
			t.Errorf("cardState(%v, %v) = %q, want %q", c.err, c.touched, got, c.want)
		}
	}
}
