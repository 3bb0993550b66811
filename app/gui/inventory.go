package gui

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// inventoryWait bounds how long the Nodes step waits for an inventory
// node at its address before it says so (Scan and the address field stay).
const inventoryWait = 30 * time.Minute

// inventoryRow is one node of the inventory in the Nodes step, shown from
// the start ("worker-1 · waiting at 192.168.1.21 …") until the node
// answers at its address; then its node row is added below.
type inventoryRow struct {
	node  inventory.Node
	label *widget.Label
}

// showInventory lists the inventory's nodes and waits for each at its
// address (UI goroutine, at start).
func (s *nodesStep) showInventory(box *fyne.Container) {
	inv := s.ui.deps.Inventory
	if inv == nil || len(inv.Nodes) == 0 {
		return
	}
	name := filepath.Base(inv.Path)
	if name == "." || name == "" {
		name = inventory.DefaultFile
	}
	box.Add(heading("Nodes of " + name))
	for _, n := range inv.Nodes {
		r := &inventoryRow{node: n, label: wrapLabel(fmt.Sprintf("%s · waiting at %s …", n.Hostname, n.Address.Addr()))}
		s.invRows = append(s.invRows, r)
		box.Add(r.label)
		go s.waitInventoryNode(r)
	}
}

// waitInventoryNode probes the node's address until it answers (or the
// app closes, or inventoryWait passes), then shows what it booted and
// whether it is that node, and adds its row.
func (s *nodesStep) waitInventoryNode(r *inventoryRow) {
	port := s.ui.deps.InventoryPort
	if port == 0 {
		port = node.DefaultPort
	}
	every := s.ui.deps.InventoryEvery
	if every <= 0 {
		every = 3 * time.Second
	}
	endpoint := net.JoinHostPort(r.node.Address.Addr().String(), strconv.Itoa(port))
	deadline := time.Now().Add(inventoryWait)
	for {
		ctx, cancel := context.WithTimeout(s.ui.ctx, 5*time.Second)
		n, err := s.ui.deps.Probe(ctx, endpoint)
		cancel()
		if err == nil {
			s.ui.do(func() { s.inventoryNodeFound(r, n) })
			return
		}
		if s.ui.ctx.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			s.ui.do(func() {
				r.label.SetText(fmt.Sprintf("%s · nothing answered at %s for %s: is the Pi on and booted from its card? (Scan, or type its address)", r.node.Hostname, r.node.Address.Addr(), inventoryWait))
			})
			return
		}
		t := time.NewTimer(every)
		select {
		case <-s.ui.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// inventoryNodeFound says what answered at the node's address (UI goroutine).
func (s *nodesStep) inventoryNodeFound(r *inventoryRow, n *node.Node) {
	r.label.SetText(inventoryNodeText(r.node, n, plan.NodeCheck{Profiles: s.ui.deps.Profiles, Node: n}.MatchBooted()))
	s.addNode(*n)
}

// inventoryNodeText is the inventory row once the node answered.
func inventoryNodeText(want inventory.Node, n *node.Node, m plan.Match) string {
	addr := want.Address.Addr().String()
	if n.Configured {
		return fmt.Sprintf("%s · at %s, already configured", want.Hostname, addr)
	}
	var wrong []string
	if m.Profile != "" && !strings.EqualFold(m.Profile, want.Profile) {
		wrong = append(wrong, "booted the "+m.Profile+" image")
	}
	if !strings.EqualFold(n.Hostname, want.Hostname) {
		wrong = append(wrong, fmt.Sprintf("says it is %q", n.Hostname))
	}
	if len(wrong) > 0 {
		return fmt.Sprintf("%s · the node at %s %s: not %s's card (cards swapped?)", want.Hostname, addr, strings.Join(wrong, " and "), want.Hostname)
	}
	booted := m.Profile
	if booted == "" {
		booted = "an image that does not say (checked as " + want.Profile + ")"
	}
	cfg := "its config"
	if want.Config != "" {
		cfg = filepath.Base(want.Config)
	}
	return fmt.Sprintf("%s · booted %s · ready for %s", want.Hostname, booted, cfg)
}

// inventoryBox is the step's area for the inventory's rows.
func inventoryBox() *fyne.Container { return container.NewVBox() }
