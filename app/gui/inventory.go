package gui

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/internal/printable"
	"github.com/talosflash/talosflash/node"
)

// inventoryWait bounds how long the Nodes step waits for an inventory
// node at its address before it says so (Scan and the address field stay).
const inventoryWait = 30 * time.Minute

// inventoryRow is one node of the inventory in the Nodes step, shown from
// the start ("worker-1 · waiting at 192.168.1.21 …") until the node
// answers at its address; then its node row is added below.
type inventoryRow struct {
	node  *plan.Member // an inventory member (Entry set)
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
	if s.ui.deps.Inventory == nil || len(s.cluster.Members) == 0 {
		return
	}
	name := s.inventoryName()
	box.Add(heading("Nodes of " + name))
	s.applyAll = primaryButton(s.ui, "Apply all", theme.ConfirmIcon(), s.ApplyAll)
	s.applyAll.Disable()
	s.applyAllNote = wrapLabel("Apply all sends each waiting node its own config from " + name + ", once its checks pass.")
	box.Add(container.NewBorder(nil, nil, nil, s.applyAll, s.applyAllNote))
	for _, n := range s.cluster.Members {
		r := &inventoryRow{node: n, label: wrapLabel(""), state: invWaiting}
		s.setInv(r, invWaiting, "")
		s.invRows = append(s.invRows, r)
		box.Add(r.label)
		go s.waitInventoryNode(r)
	}
}

// waitInventoryNode probes the node's address until it answers (or the
// app closes, or inventoryWait passes: plan's wait, apply --inventory's),
// then shows what it booted and whether it is that node, and adds its row.
func (s *nodesStep) waitInventoryNode(r *inventoryRow) {
	every := s.ui.deps.InventoryEvery
	if every <= 0 {
		every = 3 * time.Second
	}
	j := plan.NodeApplyJob{Node: r.node, Port: s.ui.deps.InventoryPort, Wait: inventoryWait, Every: every,
		Apply: plan.ApplyJob{Probe: s.ui.deps.Probe}}
	n, err := j.WaitFor(s.ui.ctx)
	switch {
	case err == nil:
		s.ui.do(func() { s.inventoryNodeFound(r, n) })
	case s.ui.ctx.Err() != nil: // the app closed
	default:
		s.ui.do(func() { s.setInv(r, invSilent, "") })
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

// isNode: what answered is the inventory's node (plan.Identify, the rule
// plan.CheckApply gates the apply with: ApplyJob.Expect).
func isNode(want *plan.Member, n *node.Node, m plan.Match) bool {
	return plan.Identify(want, n, m) == nil
}

// inventoryNodeText is the inventory row once the node answered.
func inventoryNodeText(want *plan.Member, n *node.Node, m plan.Match) string {
	addr := want.Endpoint.Host
	if n.Configured {
		return fmt.Sprintf("%s · at %s, already configured", want.Hostname, addr)
	}
	if id := plan.Identify(want, n, m); id != nil {
		if id.WrongImage() {
			// Its own card, flashed with another role's image.
			return fmt.Sprintf("%s · booted the %s image, not its %s image: flash %s's card again with the %s image", want.Hostname, m.Profile, want.ProfileName(), want.Hostname, want.ProfileName())
		}
		var wrong []string
		if id.OtherImage() {
			wrong = append(wrong, "booted the "+m.Profile+" image")
		}
		if id.OtherHost() {
			wrong = append(wrong, fmt.Sprintf("says it is %q", id.Hostname))
		}
		return fmt.Sprintf("%s · the node at %s %s: not %s's card (cards swapped?)", want.Hostname, addr, strings.Join(wrong, " and "), want.Hostname)
	}
	booted := m.Profile
	if booted == "" {
		booted = "an image that does not say (checked as " + want.ProfileName() + ")"
	}
	cfg := "its config"
	if want.Config != "" {
		cfg = filepath.Base(want.Config)
	}
	return fmt.Sprintf("%s · booted %s · ready for %s", want.Hostname, booted, cfg)
}

// inventoryBox is the step's area for the inventory's rows.
func inventoryBox() *fyne.Container { return container.NewVBox() }

// newCluster is plan's model of the app's nodes: the inventory's
// members (at the inventory's port), and those of other addresses as
// they are found (track).
func newCluster(d Deps) *plan.Cluster {
	if d.Inventory == nil {
		return &plan.Cluster{Profiles: d.Profiles}
	}
	return plan.NewCluster(d.Inventory, d.Profiles, d.InventoryPort)
}

// track is the member of n's address: the inventory's node there, else
// one of its own.
func (s *nodesStep) track(n node.Node) *plan.Member {
	ep, err := node.ParseEndpoint(n.Addr)
	if err != nil {
		ep = node.Endpoint{Host: n.Addr}
	}
	if m := s.inventoryMemberAt(n); m != nil {
		return m
	}
	return s.cluster.Track(ep)
}

// inventoryMemberAt is the inventory's member at n's address (nil: none,
// or no inventory): the apply to that row must reach that node.
func (s *nodesStep) inventoryMemberAt(n node.Node) *plan.Member {
	ip := n.IP
	if !ip.IsValid() {
		ip, _ = netip.ParseAddr(hostOf(n.Addr))
	}
	if m := s.cluster.At(ip); m != nil && m.Entry != nil {
		return m
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
		s.setInv(ir, invBlocked, errString(id))
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

// ApplyAll sends each inventory node its own config (the inventory's
// config: path), one after the other, through plan.ApplyAll, the CLI's
// apply --inventory: plan decides first (an inventory node without a
// config refuses the whole run, nothing sent), the user confirms, then
// the same checks as a drop for each node (the node expected at its
// address, its config checked against what it booted); a node that fails
// a check or is another node's card is blocked alone and said so on its
// row; configured nodes are skipped and said so.
func (s *nodesStep) ApplyAll() {
	job := s.applyAllJob()
	members, err := job.CheckApplyAll()
	if err != nil {
		var nc *plan.NoConfigError
		if errors.As(err, &nc) {
			for _, r := range nc.Refusals {
				if ir := s.inventoryRowOf(r.Member); ir != nil {
					s.setInv(ir, invNoConfig, "")
				}
			}
		}
		s.ui.showError("Apply all: nothing was sent", err)
		return
	}
	list := container.NewVBox()
	for _, m := range members {
		line := m.Name() + " ← " + filepath.Base(m.Config)
		switch {
		case m.Configured():
			line = m.Name() + ": configured already, skipped"
		case m.State == plan.StateAbsent:
			line = m.Name() + ": not answering at " + m.Endpoint.Host + ", skipped"
		}
		list.Add(wrapLabel(printable.String(line)))
	}
	items := container.NewVBox(
		wrapLabel("Each node is sent its own config from "+s.inventoryName()+", one after the other, once it answers at its address and its checks pass (the same checks as a drop). A node that fails them is left alone and its row says why."),
		list)
	start := primaryButton(s.ui, "Apply all", theme.ConfirmIcon(), func() { s.runApplyAll(job, members) })
	s.applyAllPrompt = s.ui.showModal("Apply each node its config?", items, "Cancel", start, fyne.NewSize(640, 360))
}

// applyAllJob is Apply all's job: the cluster's inventory members, mode
// auto, the app's checks.
func (s *nodesStep) applyAllJob() plan.ApplyAllJob {
	var members []*plan.Member
	for _, ir := range s.invRows {
		if ir.row == nil && ir.node.State == plan.StateUnknown {
			ir.node.ObserveProbe(nil, errNotAnswered) // looked for since the app started: not waited for again
		}
		members = append(members, ir.node)
	}
	check := plan.NodeCheck{Profiles: s.ui.deps.Profiles, Factory: s.ui.deps.Factory, CachedIDs: plan.CachedSchematicIDs(s.ui.deps.Cache)}
	return plan.ApplyAllJob{
		Cluster: s.cluster, Nodes: members,
		Node: plan.NodeApplyJob{Port: s.ui.deps.InventoryPort, Wait: inventoryApplyWait, Every: s.ui.deps.InventoryEvery,
			Apply: plan.ApplyJob{Mode: node.ModeAuto, Check: check, Probe: s.ui.deps.Probe, ApplyConfig: s.ui.deps.Apply}},
	}
}

// inventoryRowOf is m's inventory row (nil: none).
func (s *nodesStep) inventoryRowOf(m *plan.Member) *inventoryRow {
	for _, ir := range s.invRows {
		if ir.node == m {
			return ir
		}
	}
	return nil
}

// runApplyAll runs the confirmed job (UI goroutine); each row says its
// node's outcome as it comes.
func (s *nodesStep) runApplyAll(job plan.ApplyAllJob, members []*plan.Member) {
	for _, m := range members {
		if ir := s.inventoryRowOf(m); ir != nil {
			s.setInv(ir, invQueued, "")
		}
	}
	s.applyingAll = true
	s.showApplyAllNote()
	s.refreshApplyAll()
	job.Event = func(ev plan.AllEvent) {
		ir := s.inventoryRowOf(ev.Node)
		if ir == nil {
			return
		}
		name := filepath.Base(ir.node.Config)
		switch ev.Kind {
		case plan.AllNode:
			s.ui.do(func() { s.setInv(ir, invChecking, name) })
		case plan.AllResult:
			res, err := ev.Result, ev.Err
			s.ui.do(func() { s.inventoryResult(ir, name, res, err) })
		}
	}
	ctx := s.ui.ctx
	go func() {
		_, err := plan.ApplyAll(ctx, job) // each row says its node's outcome
		s.ui.do(func() {
			// A node left without an outcome: the run ended at its turn or
			// before it (plan.ApplyAll stops at a config it cannot read).
			stopped := false
			for _, ir := range s.invRows {
				if ir.state != invQueued && ir.state != invChecking {
					continue
				}
				why := "Apply all stopped before its turn"
				switch {
				case err != nil && !stopped:
					why = errString(err)
				case err != nil:
					why += " (" + errString(err) + ")"
				}
				stopped = true
				s.setInv(ir, invNotApplied, why)
			}
			s.applyingAll, s.appliedAll = false, true
			s.showApplyAllNote()
			s.refreshApplyAll()
			s.showScanSummary()
		})
	}()
}

// errNotAnswered: an inventory node the app has looked for since it
// started, in vain.
var errNotAnswered = errors.New("not answered since the app started")

// inventoryApplyWait bounds how long Apply all waits for a node that
// answered before (its row is there) and does not now.
const inventoryApplyWait = 15 * time.Second

// inventoryResult records one node's outcome of Apply all on its rows (UI
// goroutine): the inventory row's state and words, the node row's apply.
func (s *nodesStep) inventoryResult(ir *inventoryRow, name string, res *plan.NodeApplyOutcome, err error) {
	var (
		id       *plan.IdentityError
		blocked  *plan.BlockedError
		notThere *plan.NotThereError
	)
	switch {
	case err == nil && res.Configured:
		s.setInv(ir, invSkipped, "")
	case errors.As(err, &notThere):
		s.setInv(ir, invNotAnswering, "")
	case errors.As(err, &id):
		s.setInv(ir, invBlocked, errString(id))
	case errors.As(err, &blocked):
		s.setInv(ir, invBlocked, fmt.Sprintf("%s fails %d incident check(s), nothing was sent (drop it on its row to see them)", name, len(blocked.Findings)))
	case err != nil:
		s.setInv(ir, invNotApplied, errString(err))
	default:
		ir.ready = false
		out := res.ApplyOutcome
		s.applied(ir.row, name, out.Job.Config, out, nil, false) // the inventory row says applied (inventoryApplied)
	}
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
		if m := s.inventoryMemberAt(r.node); m != nil && m.Config != "" {
			return filepath.Dir(m.Config)
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
	if s.ui.deps.Inventory == nil || s.strays == nil || s.inventoryMemberAt(n) != nil {
		return s.rowBox
	}
	s.straysHead.SetText(printable.String("Not in " + s.inventoryName() + " (found at an address it does not list)"))
	s.straysHead.Show()
	return s.strays
}
