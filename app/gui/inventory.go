package gui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/internal/printable"
	"github.com/talosflash/talosflash/internal/userfile"
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
	// once the node answered: its row, and whether it is this node
	// waiting for a config (the address's node is not another card's)
	row   *nodeRow
	ready bool
	// What its line says (viewInventoryRow), and the Apply all summary
	// counts from the same states.
	state  invState
	detail string
}

// showInventory lists the inventory's nodes and waits for each at its
// address (UI goroutine, at start).
func (s *nodesStep) showInventory(box *fyne.Container) {
	inv := s.ui.deps.Inventory
	if inv == nil || len(inv.Nodes) == 0 {
		return
	}
	name := s.inventoryName()
	box.Add(heading("Nodes of " + name))
	s.applyAll = primaryButton(s.ui, "Apply all", theme.ConfirmIcon(), s.ApplyAll)
	s.applyAll.Disable()
	s.applyAllNote = wrapLabel("Apply all sends each waiting node its own config from " + name + ", once its checks pass.")
	box.Add(container.NewBorder(nil, nil, nil, s.applyAll, s.applyAllNote))
	for _, n := range inv.Nodes {
		r := &inventoryRow{node: n, label: wrapLabel(""), state: invWaiting}
		s.setInv(r, invWaiting, "")
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
			s.ui.do(func() { s.setInv(r, invSilent, "") })
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
	m := plan.NodeCheck{Profiles: s.ui.deps.Profiles, Node: n}.MatchBooted()
	r.ready = !n.Configured && n.Maintenance && isNode(r.node, n, m)
	state := invFound
	if !isNode(r.node, n, m) && !n.Configured {
		state = invWrongNode
	}
	s.setInv(r, state, inventoryNodeText(r.node, n, m))
	r.row = s.addNode(*n)
	s.refreshApplyAll()
}

// isNode: what answered is the inventory's node (the label's test; the
// apply itself is gated by plan.CheckApply with ApplyJob.Expect).
func isNode(want inventory.Node, n *node.Node, m plan.Match) bool {
	return (m.Profile == "" || strings.EqualFold(m.Profile, want.Profile)) && strings.EqualFold(n.Hostname, want.Hostname)
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
	switch {
	case len(wrong) == 1 && strings.EqualFold(n.Hostname, want.Hostname):
		// Its own card, flashed with another role's image.
		return fmt.Sprintf("%s · booted the %s image, not its %s image: flash %s's card again with the %s image", want.Hostname, m.Profile, want.Profile, want.Hostname, want.Profile)
	case len(wrong) > 0:
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

// inventoryNodeAt is the inventory's node at n's address (nil: none, or
// no inventory): the apply to that row must reach that node.
func (s *nodesStep) inventoryNodeAt(n node.Node) *inventory.Node {
	inv := s.ui.deps.Inventory
	if inv == nil {
		return nil
	}
	ip := n.IP
	if !ip.IsValid() {
		ip, _ = netip.ParseAddr(hostOf(n.Addr))
	}
	for i := range inv.Nodes {
		if inv.Nodes[i].Address.Addr() == ip.Unmap() {
			want := inv.Nodes[i]
			return &want
		}
	}
	return nil
}

// inventoryRowFor is the inventory row whose node row is r (nil: none).
func (s *nodesStep) inventoryRowFor(r *nodeRow) *inventoryRow {
	for _, ir := range s.invRows {
		if ir.row == r {
			return ir
		}
	}
	return nil
}

// identityRefused shows a swapped card's refusal: on the inventory row too.
func (s *nodesStep) identityRefused(r *nodeRow, id *plan.IdentityError) {
	if ir := s.inventoryRowFor(r); ir != nil {
		ir.ready = false
		s.setInv(ir, invBlocked, id.Error())
		s.refreshApplyAll()
	}
	title := "Not " + id.Want.Hostname + "'s node: nothing was sent"
	if id.WrongImage() {
		title = id.Want.Hostname + " booted the wrong image: nothing was sent"
	}
	s.ui.showError(title, id)
}

// refreshApplyAll enables Apply all while a node waits for its config.
func (s *nodesStep) refreshApplyAll() {
	if s.applyAll == nil {
		return
	}
	if s.applyingAll {
		s.applyAll.Disable()
		return
	}
	for _, r := range s.invRows {
		if r.ready {
			s.applyAll.Enable()
			return
		}
	}
	s.applyAll.Disable()
}

// ApplyAll sends each waiting inventory node its own config (the
// inventory's config: path), one after the other, each through the same
// checks as a drop (plan.CheckApply with the node expected, then Send): a
// node that fails a check or is another node's card is blocked alone and
// said so on its row; configured nodes are skipped and said so.
func (s *nodesStep) ApplyAll() {
	type item struct {
		ir  *inventoryRow
		job plan.ApplyJob
	}
	var todo []item
	for _, ir := range s.invRows {
		switch {
		case ir.row == nil:
			s.setInv(ir, invNotAnswering, "")
			continue
		case ir.row.node.Configured:
			s.setInv(ir, invSkipped, "")
			continue
		case !ir.ready:
			continue // its line says why (another node's card, or applied)
		case ir.node.Config == "":
			s.setInv(ir, invNoConfig, "")
			continue
		}
		s.setInv(ir, invQueued, "")
		todo = append(todo, item{ir: ir, job: s.applyJob(ir.row, filepath.Base(ir.node.Config), ir.node.Config, nil)})
	}
	if len(todo) == 0 {
		return
	}
	s.applyingAll = true
	s.showApplyAllNote()
	s.refreshApplyAll()
	ctx := s.ui.ctx
	go func() {
		for _, it := range todo {
			ir, job := it.ir, it.job
			s.ui.do(func() { s.setInv(ir, invChecking, job.Name) })
			state, detail := s.applyInventoryNode(ctx, ir, job)
			s.ui.do(func() {
				s.setInv(ir, state, detail)
				if state == invApplied {
					ir.ready = false
				}
			})
		}
		s.ui.do(func() {
			s.applyingAll, s.appliedAll = false, true
			s.showApplyAllNote()
			s.refreshApplyAll()
			s.showScanSummary()
		})
	}()
}

// applyInventoryNode checks and sends one node's config (background):
// the row's state and its words.
func (s *nodesStep) applyInventoryNode(ctx context.Context, ir *inventoryRow, job plan.ApplyJob) (invState, string) {
	data, err := userfile.Read(job.ConfigPath, node.MaxConfigSize)
	if err != nil {
		return invNotApplied, err.Error()
	}
	job.Config = data
	rv, err := plan.CheckApply(ctx, job)
	var id *plan.IdentityError
	switch {
	case errors.Is(err, plan.ErrConfigured):
		return invSkipped, ""
	case errors.As(err, &id):
		return invBlocked, id.Error()
	case err != nil:
		return invNotApplied, err.Error()
	case rv.Blocking() > 0:
		return invBlocked, fmt.Sprintf("%s fails %d incident check(s), nothing was sent (drop it on its row to see them)", job.Name, rv.Blocking())
	}
	out, err := rv.Send(ctx, false)
	if err != nil {
		return invNotApplied, err.Error()
	}
	r := ir.row
	s.ui.do(func() { s.applied(r, job.Name, job.Config, out, nil, false) })
	return invApplied, job.Name + ": " + out.Next.Node
}

// inventoryApplied marks r's inventory node as given its config (a drop
// or Apply all): Apply all does not send it again.
func (s *nodesStep) inventoryApplied(r *nodeRow, name string, out *plan.ApplyOutcome) {
	ir := s.inventoryRowFor(r)
	if ir == nil {
		return
	}
	ir.ready = false
	s.setInv(ir, invApplied, name+": "+out.Next.Node)
	s.refreshApplyAll()
}

// configFolder is where a chooser for r's config (or the talosconfig,
// which talosctl gen config writes beside the configs) opens: the folder
// of r's inventory config, else of the inventory's first config, else the
// inventory's own ("": no inventory).
func (s *nodesStep) configFolder(r *nodeRow) string {
	inv := s.ui.deps.Inventory
	if inv == nil {
		return ""
	}
	if r != nil {
		if n := s.inventoryNodeAt(r.node); n != nil && n.Config != "" {
			return filepath.Dir(n.Config)
		}
	}
	for _, n := range inv.Nodes {
		if n.Config != "" {
			return filepath.Dir(n.Config)
		}
	}
	if inv.Path == "" {
		return ""
	}
	return filepath.Dir(inv.Path)
}

// inventoryName is the inventory's file name, for the texts.
func (s *nodesStep) inventoryName() string { return inventoryFileName(s.ui.deps.Inventory) }

// newStrays is the area for nodes found at an address the inventory does
// not list (a scan, a typed address): shown apart, under its heading.
func (s *nodesStep) newStrays() fyne.CanvasObject {
	s.strays = container.NewVBox()
	s.straysHead = heading("")
	s.straysHead.Hide()
	return container.NewVBox(s.straysHead, s.strays)
}

// rowBoxFor is where n's row goes: apart when there is an inventory that
// does not list n's address.
func (s *nodesStep) rowBoxFor(n node.Node) *fyne.Container {
	if s.ui.deps.Inventory == nil || s.strays == nil || s.inventoryNodeAt(n) != nil {
		return s.rowBox
	}
	s.straysHead.SetText(printable.String("Not in " + s.inventoryName() + " (found at an address it does not list)"))
	s.straysHead.Show()
	return s.strays
}
