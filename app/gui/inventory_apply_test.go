package gui

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"

	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// invHarness is the app with the test kit's inventory: cp-1 (127.0.0.21),
// worker-1 (.22) and worker-2 (.23), each with its config in the
// inventory's folder, waited for on one free port.
type invHarness struct {
	*harness
	port int
	dir  string
}

// inventoryWindow is the app with inv, its nodes waited for on port
// (every 10 ms), no cards, no portal: the Nodes step's harness.
func inventoryWindow(t *testing.T, inv *inventory.Inventory, port int) *harness {
	t.Helper()
	deps := Deps{
		ListDevices:    func() ([]devices.Disk, error) { return nil, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return nil },
		RefreshEvery:   -1,
		Inventory:      inv, InventoryPort: port, InventoryEvery: 10 * time.Millisecond,
	}
	ui := New(test.NewTempApp(t), deps)
	t.Cleanup(ui.Close)
	ui.Window.Resize(fyne.NewSize(1000, 700))
	return &harness{t: t, ui: ui}
}

func newInvHarness(t *testing.T) *invHarness {
	t.Helper()
	dir := t.TempDir()
	kit := testkit.Inventory{Configs: true}
	inv, err := inventory.Load(kit.Write(t, dir), inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ips := kit.IPs()
	port := testkit.FreePort(t, ips[:]...)
	h := inventoryWindow(t, inv, port)
	h.onUI(func() { h.ui.tabs.SelectIndex(tabNodes) })
	return &invHarness{harness: h, port: port, dir: dir}
}

func (h *invHarness) addr(ip string) string { return ip + ":" + strconv.Itoa(h.port) }

// start boots a fake node at ip (booted from a card of profile, named host).
func (h *invHarness) start(ip, profile, host string, configured bool) *nodetest.Server {
	return nodetest.Start(h.t, nodetest.Options{Addr: h.addr(ip), Hostname: host, Schematic: builtin(h.t, profile).Schematic(), Configured: configured})
}

func (h *invHarness) invText(i int) string {
	var s string
	h.onUI(func() { s = h.ui.nodes.invRows[i].label.Text })
	return s
}

func (h *invHarness) rowOf(addr string) *nodeRow {
	var row *nodeRow
	h.waitFor("row of "+addr, func() bool {
		for _, r := range h.ui.nodes.rows {
			if r.node.Addr == addr {
				row = r
				return true
			}
		}
		return false
	})
	return row
}

// A config dropped on an inventory node's row goes through the CLI's
// identity gate (plan.ApplyJob.Expect): at cp-1's address worker-2's card
// answers, controlplane.yaml is refused naming both, there is no "Send
// anyway", nothing reaches the node; the inventory row says it too.
func TestInventoryDropOnSwappedCardIsRefused(t *testing.T) {
	h := newInvHarness(t)
	srv := h.start("127.0.0.21", "worker", "worker-2", false)
	row := h.rowOf(h.addr("127.0.0.21"))
	h.onUI(func() {
		h.ui.Window.Content().Refresh()
	})
	h.onUI(func() {
		pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(row.box).Add(fyne.NewPos(20, row.box.Size().Height/2))
		h.ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(filepath.Join(h.dir, "talos", "controlplane.yaml"))})
	})
	var shown string
	h.waitFor("refusal", func() bool { shown = h.overlayLabels(); return strings.Contains(shown, "not cp-1") })
	for _, want := range []string{"cp-1", `"worker-2"`, "booted the worker image", "Nothing was sent"} {
		if !strings.Contains(shown, want) {
			t.Errorf("refusal %q does not say %q", shown, want)
		}
	}
	h.onUI(func() {
		if h.ui.nodes.openPrompt() != nil {
			t.Fatal("the apply prompt (with its override) was shown for another node's card")
		}
		if got := h.ui.nodes.invRows[0].label.Text; !strings.HasPrefix(got, "cp-1 · blocked: ") || !strings.Contains(got, "worker-2") {
			t.Fatalf("inventory row: %q", got)
		}
	})
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests reached the swapped node", n)
	}
}

// Apply all: worker-1 waits at its address and gets its own worker.yaml
// byte for byte; cp-1's address answers with worker-2's card: blocked
// alone, nothing sent there; worker-2 is configured: skipped, said so.
func TestInventoryApplyAll(t *testing.T) {
	h := newInvHarness(t)
	swapped := h.start("127.0.0.21", "worker", "worker-2", false)
	w1 := h.start("127.0.0.22", "worker", "worker-1", false)
	h.start("127.0.0.23", "worker", "worker-2", true)
	h.waitFor("all three answered", func() bool {
		for _, r := range h.ui.nodes.invRows {
			if strings.Contains(r.label.Text, "waiting at") {
				return false
			}
		}
		return true
	})
	h.onUI(func() {
		if h.ui.nodes.applyAll.Disabled() {
			t.Fatal("Apply all disabled with worker-1 waiting")
		}
		tapApplyAll(h.ui)
	})
	h.waitFor("apply all done", func() bool { return strings.HasPrefix(h.ui.nodes.applyAllNote.Text, "Apply all: ") })
	if got := h.invText(1); !strings.HasPrefix(got, "worker-1 · applied worker.yaml") {
		t.Errorf("worker-1: %q", got)
	}
	if got := h.invText(0); !strings.HasPrefix(got, "cp-1 · ") || !strings.Contains(got, "not cp-1") {
		t.Errorf("cp-1: %q", got)
	}
	if got := h.invText(2); got != "worker-2 · already configured: skipped" {
		t.Errorf("worker-2: %q", got)
	}
	want, _ := os.ReadFile(filepath.Join(h.dir, "talos", "worker.yaml"))
	reqs := w1.Requests()
	if len(reqs) == 0 || !bytes.Equal(reqs[len(reqs)-1].Config, want) || reqs[len(reqs)-1].DryRun {
		t.Fatalf("worker-1 got %d requests, not its worker.yaml", len(reqs))
	}
	if n := len(swapped.Requests()); n != 0 {
		t.Fatalf("%d requests reached cp-1's address (worker-2's card)", n)
	}
	h.onUI(func() { // no value of the config (its tokens) in any text of the window
		for _, b := range drawnTexts(h.ui.Window.Content()) {
			for _, secret := range []string{"fakeaa.fakeplaceholder00", "fakebb.fakeplaceholder00"} {
				if strings.Contains(b.text, secret) || strings.Contains(h.overlayLabels(), secret) {
					t.Fatalf("a config token is shown: %q", b.text)
				}
			}
		}
	})
	h.onUI(func() {
		if !h.ui.nodes.applyAll.Disabled() || !strings.Contains(h.ui.nodes.applyAllNote.Text, "1 applied") {
			t.Fatalf("after: enabled %v, %q", !h.ui.nodes.applyAll.Disabled(), h.ui.nodes.applyAllNote.Text)
		}
	})
}

// Apply all ends at a config it cannot read (plan.ApplyAll, as apply
// --inventory): that node's row says why and the nodes after it say they
// had no turn, each counted as not applied; none stays "waiting for its
// turn" (they did, uncounted) and nothing reaches a node.
func TestInventoryApplyAllStopsAtAnUnreadableConfig(t *testing.T) {
	h := newInvHarness(t)
	w1 := h.start("127.0.0.22", "worker", "worker-1", false)
	w2 := h.start("127.0.0.23", "worker", "worker-2", false)
	h.waitFor("both workers answered", func() bool {
		return h.ui.nodes.invRows[1].row != nil && h.ui.nodes.invRows[2].row != nil
	})
	cfg := filepath.Join(h.dir, "talos", "worker.yaml")
	if err := os.Remove(cfg); err != nil { // moved away after the app started
		t.Fatal(err)
	}
	h.onUI(func() { tapApplyAll(h.ui) })
	h.waitFor("apply all done", func() bool { return strings.HasPrefix(h.ui.nodes.applyAllNote.Text, "Apply all: ") })
	if got := h.invText(1); !strings.HasPrefix(got, "worker-1 · not applied: ") || !strings.Contains(got, cfg) {
		t.Errorf("worker-1: %q", got)
	}
	if got := h.invText(2); !strings.HasPrefix(got, "worker-2 · not applied: Apply all stopped before its turn (") {
		t.Errorf("worker-2: %q", got)
	}
	h.onUI(func() {
		if note := h.ui.nodes.applyAllNote.Text; note != "Apply all: 3 not applied. Each row says why." {
			t.Errorf("note %q", note)
		}
	})
	if n := len(w1.Requests()) + len(w2.Requests()); n != 0 {
		t.Fatalf("%d requests reached the workers", n)
	}
}

// A node found at an address the inventory does not list is shown apart,
// under "Not in talosflash.yaml"; the inventory's nodes stay in the list.
func TestInventoryStrayNodeShownApart(t *testing.T) {
	h := newInvHarness(t)
	h.start("127.0.0.22", "worker", "worker-1", false)
	listed := h.rowOf(h.addr("127.0.0.22"))
	h.onUI(func() {
		if h.ui.nodes.straysHead.Visible() {
			t.Fatal("stray heading shown with no stray node")
		}
		stray := h.ui.nodes.addNode(node.Node{Addr: "127.0.0.99:50000", Maintenance: true})
		if !slicesContains(h.ui.nodes.strays.Objects, stray.box) || slicesContains(h.ui.nodes.rowBox.Objects, stray.box) {
			t.Fatal("the unlisted node is not shown apart")
		}
		if !slicesContains(h.ui.nodes.rowBox.Objects, listed.box) {
			t.Fatal("worker-1's row is not with the inventory's")
		}
		if !h.ui.nodes.straysHead.Visible() || !strings.HasPrefix(h.ui.nodes.straysHead.Text, "Not in talosflash.yaml") {
			t.Fatalf("heading %q", h.ui.nodes.straysHead.Text)
		}
	})
}

func slicesContains(objs []fyne.CanvasObject, o fyne.CanvasObject) bool {
	for _, x := range objs {
		if x == o {
			return true
		}
	}
	return false
}

// The Nodes step with an inventory after Apply all (applied, blocked,
// skipped, a stray node apart) and the swapped-card refusal, at both
// window sizes: text whole inside its widget, nothing overlapping.
func TestInventoryNodesLayout(t *testing.T) {
	for _, size := range layoutSizes {
		t.Run(fmt.Sprintf("%.0fx%.0f", size.Width, size.Height), func(t *testing.T) {
			h := newInvHarness(t)
			h.start("127.0.0.21", "worker", "worker-2", false)
			h.start("127.0.0.22", "worker", "worker-1", false)
			h.start("127.0.0.23", "worker", "worker-2", true)
			h.waitFor("all answered", func() bool {
				for _, r := range h.ui.nodes.invRows {
					if r.row == nil {
						return false
					}
				}
				return true
			})
			h.onUI(func() {
				h.ui.Window.Resize(size)
				h.ui.nodes.addNode(node.Node{Addr: "127.0.0.99:50000", Maintenance: true, Hostname: "talos-abc-def"})
				test.Tap(h.ui.nodes.applyAll) // its confirmation, then Apply all
				assertTextFits(t, h.ui, "apply all confirmation")
				h.ui.escape()
				tapApplyAll(h.ui)
			})
			h.waitFor("apply all done", func() bool { return strings.HasPrefix(h.ui.nodes.applyAllNote.Text, "Apply all: ") })
			h.onUI(func() {
				for range 3 {
					h.ui.Window.Content().Refresh()
				}
				assertObjectTextFits(t, h.ui, h.ui.Window.Content(), "nodes step with inventory")
				assertNoMidWordBreaks(t, h.ui.Window.Content(), "nodes step with inventory")
			})
			row := h.rowOf(h.addr("127.0.0.21"))
			cp := filepath.Join(h.dir, "talos", "controlplane.yaml")
			data, err := os.ReadFile(cp)
			if err != nil {
				t.Fatal(err)
			}
			h.onUI(func() { h.ui.nodes.checkAndPrompt(row, "controlplane.yaml", cp, data) })
			h.waitFor("refusal", func() bool { return strings.Contains(h.overlayLabels(), "Nothing was sent") })
			h.onUI(func() { assertTextFits(t, h.ui, "swapped-card refusal") })
		})
	}
}

// With an inventory, a node's "Choose config…" opens in its config's
// folder and the bootstrap's talosconfig chooser beside the configs, not
// in the home folder (issue 29); once a file was chosen, that folder.
func TestInventoryChoosersOpenInItsFolder(t *testing.T) {
	h := newInvHarness(t)
	t.Setenv("HOME", t.TempDir())
	h.start("127.0.0.22", "worker", "worker-1", false)
	row := h.rowOf(h.addr("127.0.0.22"))
	talos := filepath.Join(h.dir, "talos") + "/"
	c := h.openChooser(func() { h.ui.nodes.pickFile(row) })
	h.onUI(func() {
		if got := c.path.Text; got != talos {
			t.Fatalf("config chooser starts at %q, want the inventory's configs %q", got, talos)
		}
		if l := c.modal.dialog; l == nil {
			t.Fatal("no dialog")
		}
		h.ui.escape()
	})
	c = h.openChooser(func() { h.ui.nodes.pickTalosconfig(&bootstrapPrompt{row: row}) })
	h.onUI(func() {
		if got := c.path.Text; got != talos {
			t.Fatalf("talosconfig chooser starts at %q, want %q", got, talos)
		}
		h.ui.escape()
	})
}

// tapApplyAll presses Apply all and confirms its dialog, as a user does
// (UI goroutine); a refusal shows no confirmation.
func tapApplyAll(ui *UI) {
	ui.nodes.applyAllPrompt = nil
	test.Tap(ui.nodes.applyAll)
	if p := ui.nodes.applyAllPrompt; p != nil && ui.modal == p {
		test.Tap(p.primary)
	}
}

// The wrong role's config dropped on an inventory node's row (issue 37):
// worker.yaml on cp-1 is named as a role mismatch with cp-1's own file,
// with no "Send anyway", and nothing reaches the node.
func TestInventoryDropOfAnotherRolesConfigIsRefused(t *testing.T) {
	h := newInvHarness(t)
	srv := h.start("127.0.0.21", "controlplane", "cp-1", false)
	row := h.rowOf(h.addr("127.0.0.21"))
	h.onUI(func() { h.ui.Window.Content().Refresh() })
	h.onUI(func() {
		pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(row.box).Add(fyne.NewPos(20, row.box.Size().Height/2))
		h.ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(filepath.Join(h.dir, "talos", "worker.yaml"))})
	})
	var shown string
	h.waitFor("refusal", func() bool { shown = h.overlayLabels(); return strings.Contains(shown, "is a control plane") })
	for _, want := range []string{"is a control plane (the inventory's role)", "worker config", filepath.Join(h.dir, "talos", "controlplane.yaml"), "Nothing was sent"} {
		if !strings.Contains(shown, want) {
			t.Errorf("refusal %q does not say %q", shown, want)
		}
	}
	h.onUI(func() {
		if h.ui.nodes.openPrompt() != nil {
			t.Fatal("the apply prompt (with its override) was shown for another role's config")
		}
	})
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests reached cp-1", n)
	}
}

// Apply all with a node the inventory gives no config (issue 37: one
// behaviour for the CLI and the app, plan's): refused whole before
// anything is sent, naming the node and the line to add; no confirmation
// is asked, no node gets a config.
func TestInventoryApplyAllRefusesANodeWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	kit := testkit.Inventory{Configs: true}
	path := kit.Write(t, dir)
	yaml := strings.Replace(kit.YAML(), "    config: talos/worker.yaml\n", "", 1) // worker-1 has none
	testkit.WriteFile(t, dir, "talosflash.yaml", yaml)
	inv, err := inventory.Load(path, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ips := kit.IPs()
	port := testkit.FreePort(t, ips[:]...)
	h := &invHarness{harness: inventoryWindow(t, inv, port), port: port, dir: dir}
	h.onUI(func() { h.ui.tabs.SelectIndex(tabNodes) })
	cp := h.start(ips[0], "controlplane", "cp-1", false)
	w2 := h.start(ips[2], "worker", "worker-2", false)
	h.waitFor("cp-1 and worker-2 answered", func() bool {
		return h.ui.nodes.invRows[0].row != nil && h.ui.nodes.invRows[2].row != nil
	})
	h.onUI(func() { tapApplyAll(h.ui) })
	var shown string
	h.waitFor("refusal", func() bool { shown = h.overlayLabels(); return strings.Contains(shown, "o config for worker-1") })
	if !strings.Contains(shown, "add config: talos/worker.yaml to worker-1") || !strings.Contains(shown, "nothing was sent to any node") ||
		strings.Contains(shown, "Fix the file") {
		t.Errorf("refusal %q", shown)
	}
	if got := h.invText(1); !strings.HasPrefix(got, "worker-1 · ") || !strings.Contains(got, "no config") {
		t.Errorf("worker-1: %q", got)
	}
	if n := len(cp.Requests()) + len(w2.Requests()); n != 0 {
		t.Fatalf("%d requests reached the nodes", n)
	}
}
