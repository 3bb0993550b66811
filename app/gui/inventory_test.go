package gui

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The Nodes step with an inventory: its nodes are rows from the start,
// waiting at their addresses; a node that answers shows what it booted and
// the config it is ready for, and gets its node row; one at a node's
// address that is another node (a swapped card) is said so.
func TestNodesStepInventoryRows(t *testing.T) {
	kit := testkit.Inventory{Configs: true}
	inv, err := inventory.Parse([]byte(kit.YAML()), "talosflash.yaml", t.TempDir(), inventory.Options{SkipFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	ips := kit.IPs()
	port := testkit.FreePort(t, ips[:]...)

	deps := Deps{
		ListDevices:    func() ([]devices.Disk, error) { return nil, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return nil },
		RefreshEvery:   -1,
		Inventory:      inv, InventoryPort: port, InventoryEvery: 10 * time.Millisecond,
	}
	a := test.NewTempApp(t)
	ui := New(a, deps)
	t.Cleanup(ui.Close)
	ui.Window.Resize(fyne.NewSize(1000, 700))
	h := &harness{t: t, ui: ui}

	texts := func() []string {
		var out []string
		for _, r := range ui.nodes.invRows {
			out = append(out, r.label.Text)
		}
		return out
	}
	h.onUI(func() {
		got := texts()
		if len(got) != 3 || got[0] != "cp-1 · waiting at 127.0.0.21 …" || got[1] != "worker-1 · waiting at 127.0.0.22 …" || got[2] != "worker-2 · waiting at 127.0.0.23 …" || len(ui.nodes.rows) != 0 {
			t.Fatalf("at start: %q, %d node rows", got, len(ui.nodes.rows))
		}
	})

	addr := func(ip string) string { return ip + ":" + strconv.Itoa(port) }
	nodetest.Start(t, nodetest.Options{Addr: addr("127.0.0.22"), Hostname: "worker-1", Schematic: builtin(t, "worker").Schematic()})
	h.waitFor("worker-1 found", func() bool { return texts()[1] == "worker-1 · booted worker · ready for worker.yaml" })
	h.onUI(func() {
		if len(ui.nodes.rows) != 1 || ui.nodes.rows[0].node.Addr != addr("127.0.0.22") || !strings.HasPrefix(texts()[0], "cp-1 · waiting") {
			t.Fatalf("rows %d, texts %q", len(ui.nodes.rows), texts())
		}
	})

	// cp-1's address answers with worker-2's card.
	nodetest.Start(t, nodetest.Options{Addr: addr("127.0.0.21"), Hostname: "worker-2", Schematic: builtin(t, "worker").Schematic()})
	h.waitFor("cp-1's address answered", func() bool { return !strings.HasPrefix(texts()[0], "cp-1 · waiting") })
	h.onUI(func() {
		if got := texts()[0]; got != `cp-1 · the node at 127.0.0.21 booted the worker image and says it is "worker-2": not cp-1's card (cards swapped?)` {
			t.Fatalf("swapped: %q", got)
		}
	})
}
