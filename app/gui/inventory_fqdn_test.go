package gui

import (
	"strconv"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// An inventory that names its nodes by FQDN (worker-1.lan): Talos reports
// the name split (hostname worker-1, domain lan), and the app's inventory
// row compares it as plan does (issue 28): worker-1.lan is ready for its
// config, not "another node's card"; a node of another domain is not it.
func TestNodesStepInventoryFQDN(t *testing.T) {
	kit := testkit.Inventory{}
	y := strings.Replace(kit.YAML(), "hostname: worker-1\n", "hostname: worker-1.lan\n", 1)
	y = strings.Replace(y, "hostname: worker-2\n", "hostname: worker-2.lan\n", 1)
	inv, err := inventory.Parse([]byte(y), "talosflash.yaml", t.TempDir(), inventory.Options{SkipFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	ips := kit.IPs()
	port := testkit.FreePort(t, ips[:]...)
	h := inventoryWindow(t, inv, port)
	ui := h.ui
	text := func(i int) string { return ui.nodes.invRows[i].label.Text } // on the UI goroutine
	addr := func(ip string) string { return ip + ":" + strconv.Itoa(port) }

	nodetest.Start(t, nodetest.Options{Addr: addr(ips[1]), Hostname: "worker-1.lan", Schematic: builtin(t, "worker").Schematic()})
	nodetest.Start(t, nodetest.Options{Addr: addr(ips[2]), Hostname: "worker-2.example", Schematic: builtin(t, "worker").Schematic()})
	h.waitFor("both answered", func() bool {
		return !strings.Contains(text(1), "waiting at") && !strings.Contains(text(2), "waiting at")
	})
	h.onUI(func() {
		if got := text(1); got != "worker-1.lan · booted worker · ready for its config" {
			t.Errorf("worker-1.lan: %q", got)
		}
		if got := text(2); got != `worker-2.lan · the node at `+ips[2]+` says it is "worker-2.example": not worker-2.lan's card (cards swapped?)` {
			t.Errorf("worker-2.lan with another domain: %q", got)
		}
		if !ui.nodes.invRows[1].ready || ui.nodes.invRows[2].ready {
			t.Fatalf("ready: worker-1.lan %v, worker-2.lan %v", ui.nodes.invRows[1].ready, ui.nodes.invRows[2].ready)
		}
	})
}
