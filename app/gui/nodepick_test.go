package gui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

var (
	talosImageOnce sync.Once
	talosImage     *imagetest.Fixture
)

// nodePickHarness is the app with an inventory (cp-1, worker-1) against a
// fake factory serving a Talos-shaped image (a META partition to write the
// node into) and two card files.
func nodePickHarness(t *testing.T) (*harness, []string) {
	t.Helper()
	return nodePickHarnessWith(t, `gateway: 192.168.1.1
nodes:
  - hostname: cp-1
    role: controlplane
    address: 192.168.1.11/24
  - hostname: worker-1
    role: worker
    address: 192.168.1.21/24
`)
}

// nodePickHarnessWith is nodePickHarness with this inventory.
func nodePickHarnessWith(t *testing.T, inventoryYAML string) (*harness, []string) {
	t.Helper()
	talosImageOnce.Do(func() { talosImage = imagetest.NewTalos(t, 8<<20, 5, 1<<20) })
	fx := talosImage
	srv := factorytest.New(t)
	for _, p := range factory.BuiltinProfiles() {
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		srv.AddImage(id, p.Version(), "metal-arm64.raw.xz", fx.XZ)
		srv.AddImage(id, p.Version(), "metal-arm64.raw.zst", fx.Zstd(t))
	}
	dir := t.TempDir()
	inv, err := inventory.Parse([]byte(inventoryYAML), filepath.Join(dir, "talosflash.yaml"), dir, inventory.Options{SkipFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var disks []devices.Disk
	for _, n := range []string{"card1.img", "card2.img"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		disks = append(disks, devices.Disk{Name: n, Path: p, Size: 64 << 20, SizeHuman: "64 MiB", Model: "Test card", Transport: devices.TransportFile, Safe: true})
	}
	deps := Deps{
		Factory:        factory.NewClient(srv.URL, srv.Client()),
		Cache:          &imaging.Cache{Dir: filepath.Join(dir, "cache")},
		Profiles:       factory.BuiltinProfiles(),
		ListDevices:    func() ([]devices.Disk, error) { return disks, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return nil },
		RefreshEvery:   -1,
		Inventory:      inv, InventoryPort: 1, InventoryEvery: time.Hour,
		Probe: func(context.Context, string) (*node.Node, error) { return nil, context.Canceled },
	}
	ui := New(test.NewTempApp(t), deps)
	t.Cleanup(ui.Close)
	ui.Window.Resize(fyne.NewSize(1000, 700))
	h := &harness{t: t, ui: ui, factory: srv, image: fx, target: paths[0]}
	h.waitFor("device list", func() bool { return len(ui.target.disks) == 2 })
	return h, paths
}

// Step 1 with an inventory: picking worker-1 chooses its role's image, the
// flash writes the image and then worker-1's address and hostname onto
// the card's META (read back here by the META reader), and the finish
// screen says "Card ready: worker-1, 192.168.1.21/24 (label it worker-1)".
// A node goes on one card: with two cards Flash is disabled, saying why.
func TestImageStepNodePick(t *testing.T) {
	h, paths := nodePickHarness(t)
	h.onUI(func() {
		sel := h.ui.image.nodes.sel
		for _, o := range sel.Options {
			if strings.HasPrefix(o, "worker-1 ") {
				sel.SetSelected(o)
			}
		}
		if c := h.ui.session.Choice(); c == nil || c.ProfileName() != "worker" || h.ui.image.pickedNode() == nil {
			t.Fatalf("after picking worker-1: choice %+v", c)
		}
		h.ui.tabs.SelectIndex(tabTarget)
		h.ui.target.list.Select(0)
		h.ui.target.list.Select(1)
		h.ui.tabs.SelectIndex(tabFlash)
		if len(h.ui.session.Cards()) != 2 {
			t.Fatalf("%d cards chosen", len(h.ui.session.Cards()))
		}
		if !h.ui.flash.start.Disabled() || !strings.Contains(h.ui.flash.summary.Text, "worker-1 is one node, so it goes on one card") {
			t.Fatalf("two cards for one node: start enabled %v, summary %q", !h.ui.flash.start.Disabled(), h.ui.flash.summary.Text)
		}
		h.ui.tabs.SelectIndex(tabTarget)
		h.ui.target.list.Select(1) // a second click unchooses
		h.ui.tabs.SelectIndex(tabFlash)
		if h.ui.flash.start.Disabled() || !strings.Contains(h.ui.flash.summary.Text, "Node:  worker-1, 192.168.1.21/24") {
			t.Fatalf("one card: start enabled %v, summary %q", !h.ui.flash.start.Disabled(), h.ui.flash.summary.Text)
		}
		test.Tap(h.ui.flash.start)
	})
	h.tapDialogButton("Erase and flash")
	h.waitFor("finish", func() bool { return h.ui.flash.finished() })
	h.onUI(func() {
		if got := h.ui.flash.doneTitle.Text; got != "✓ Card ready: worker-1, 192.168.1.21/24 (label it worker-1)" {
			t.Fatalf("finish title %q (status %q)", got, h.ui.flash.status.Text)
		}
	})
	card, err := meta.ReadStorePath(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	v, ok := card.ADV.Get(meta.MetalNetworkPlatformConfig)
	if !ok {
		t.Fatal("no 0x0a on the card")
	}
	info, err := inventory.ParseNetworkConfig(v)
	if err != nil || info.Hostname != "worker-1" || info.Address.String() != "192.168.1.21/24" {
		t.Fatalf("card's network config: %+v, %v", info, err)
	}

	// Another role for worker-1: never a silent drop of the node (issue
	// 28). Both picks stay, the conflict shows, Next and Flash are off;
	// Node "none" (the user's own choice: the refusal never offers it)
	// then flashes the role as a plain card.
	h.onUI(func() {
		h.ui.image.selectProfile("controlplane")
		if n := h.ui.image.pickedNode(); n == nil || n.Hostname != "worker-1" || !strings.HasPrefix(h.ui.image.nodes.sel.Selected, "worker-1 ") {
			t.Fatalf("a role chosen dropped the node: %q", h.ui.image.nodes.sel.Selected)
		}
		if h.ui.session.Choice() != nil || !h.ui.image.next.Disabled() || !h.ui.image.problem.Visible() ||
			!strings.Contains(h.ui.image.problem.Text, "the inventory says worker-1 is a worker") {
			t.Fatalf("conflict not shown: choice %+v, problem %q", h.ui.session.Choice(), h.ui.image.problem.Text)
		}
		h.ui.image.nodes.sel.SetSelected(noNodeOption)
		if c := h.ui.session.Choice(); c == nil || c.ProfileName() != "controlplane" || h.ui.image.problem.Visible() {
			t.Fatalf("node none: choice %+v, problem %q", c, h.ui.image.problem.Text)
		}
	})
}

// Step 1 with the node select, the Flash step naming the node (and why two
// cards cannot take it) and the finish screen, at both window sizes.
func TestNodePickLayout(t *testing.T) {
	for _, size := range layoutSizes {
		t.Run(fmt.Sprintf("%.0fx%.0f", size.Width, size.Height), func(t *testing.T) {
			h, _ := nodePickHarness(t)
			ui := h.ui
			settle := func(name string) {
				t.Helper()
				for range 3 {
					ui.Window.Content().Refresh()
				}
				assertObjectTextFits(t, ui, ui.Window.Content(), name)
			}
			h.onUI(func() {
				ui.Window.Resize(size)
				sel := ui.image.nodes.sel
				sel.SetSelected(sel.Options[2])
				settle("image step with a node")
				ui.tabs.SelectIndex(tabTarget)
				ui.target.list.Select(0)
				ui.target.list.Select(1)
				ui.tabs.SelectIndex(tabFlash)
				settle("flash step, a node on two cards")
				ui.tabs.SelectIndex(tabTarget)
				ui.target.list.Select(1)
				ui.tabs.SelectIndex(tabFlash)
				test.Tap(ui.flash.start)
			})
			h.tapDialogButton("Erase and flash")
			h.waitFor("finish", func() bool { return ui.flash.finished() })
			h.waitFor("eject", func() bool { return (ui.session.Attempt() != nil && ui.session.Attempt().Ejected != nil) })
			h.onUI(func() {
				ui.escape()
				settle("finish screen for a node")
			})
		})
	}
}

// pickNode selects the inventory node with this hostname in step 1.
func (h *harness) pickNode(hostname string) {
	h.t.Helper()
	sel := h.ui.image.nodes.sel
	for _, o := range sel.Options {
		if strings.HasPrefix(o, hostname+" ") {
			sel.SetSelected(o)
			return
		}
	}
	h.t.Fatalf("no node %s", hostname)
}

// flashNode flashes card for the node picked now (UI work done here).
func (h *harness) flashNode(card string) string {
	h.t.Helper()
	h.onUI(func() {
		h.ui.tabs.SelectIndex(tabTarget)
		if !h.ui.target.selectPath(card) {
			h.t.Fatalf("%s not selectable", card)
		}
		h.ui.tabs.SelectIndex(tabFlash)
		test.Tap(h.ui.flash.start)
	})
	text := ""
	h.onUI(func() { text = h.overlayLabels() })
	h.tapDialogButton("Erase and flash")
	h.waitFor("finish", func() bool { return h.ui.flash.finished() })
	return text
}

// "Flash another card" keeps Node = worker-1; a card for worker-1 from
// this session and the chosen card's contents (cp-1's card) are said in
// the confirmation (it said only "Then node worker-1 is written onto the
// card", issue 29), and in the Flash step's summary.
func TestSecondCardForANodeIsSaid(t *testing.T) {
	h, paths := nodePickHarness(t)
	h.onUI(func() { h.pickNode("cp-1") })
	h.flashNode(paths[1])
	h.onUI(func() { test.Tap(h.ui.flash.another); h.pickNode("worker-1") })
	if msg := h.flashNode(paths[0]); strings.Contains(msg, "already written") {
		t.Fatalf("the first card for worker-1 is called a second one:\n%s", msg)
	}
	h.waitFor("step 2 reads what the cards hold", func() bool {
		return strings.Contains(h.ui.target.holds[paths[1]], "cp-1") && strings.Contains(h.ui.target.holds[paths[0]], "worker-1")
	})
	h.onUI(func() {
		test.Tap(h.ui.flash.another)
		if n := h.ui.image.pickedNode(); n == nil || n.Hostname != "worker-1" {
			t.Fatalf("flash another dropped the node: %v", n)
		}
		h.ui.tabs.SelectIndex(tabTarget)
		h.ui.target.selectPath(paths[1])
		h.ui.tabs.SelectIndex(tabFlash)
		if s := h.ui.flash.summary.Text; !strings.Contains(s, "A card for worker-1 was already written in this session ("+paths[0]+" at ") {
			t.Errorf("summary %q", s)
		}
		test.Tap(h.ui.flash.start)
		msg := h.overlayLabels()
		for _, want := range []string{"A card for worker-1 was already written in this session (" + paths[0], "another card for worker-1", "now holds", "cp-1"} {
			if !strings.Contains(msg, want) {
				t.Errorf("confirmation lacks %q:\n%s", want, msg)
			}
		}
		h.ui.escape()
		// worker-1's own card again: it is replaced, no other card is made.
		h.ui.tabs.SelectIndex(tabTarget)
		h.ui.target.list.Select(1) // a click unticks paths[1]
		h.ui.target.selectPath(paths[0])
		h.ui.tabs.SelectIndex(tabFlash)
		test.Tap(h.ui.flash.start)
		if msg := h.overlayLabels(); strings.Contains(msg, "already written") || !strings.Contains(msg, "now holds") {
			t.Errorf("rewriting worker-1's own card:\n%s", msg)
		}
		h.ui.escape()
	})
}
