package gui

import (
	"net/netip"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/internal/printable"
	"github.com/talosflash/talosflash/node"
)

// rowAct is what runs on a node row now.
type rowAct int

const (
	rowIdle     rowAct = iota
	rowChecking        // the config is checked against the node (plan.CheckApply)
	rowSending         // the config is sent
	rowDryRun          // ... and the node checks it first
)

// nodeRowView is what a node row shows, a function of its state: the
// node's last answer and the last apply (viewNodeRow).
type nodeRowView struct {
	Title      string
	Badge      textView // what the node booted and what it needs ("" hides it)
	AskFlashed bool     // "Card flashed as": the node does not say what it booted
	Reply      textView
}

// viewNodeRow renders r; label is the profile its booted schematic is
// ("" unknown), invHost the inventory's name for its address ("" none).
func viewNodeRow(r *nodeRow, label, invHost string) nodeRowView {
	n := r.node
	if n.Hostname == "" { // a configured node does not say it before mTLS: the inventory does
		n.Hostname = invHost
	}
	if st := r.status; n.TalosVersion == "" && st != nil && st.Status != nil {
		n.TalosVersion = st.Status.TalosVersion
	}
	v := nodeRowView{Title: nodeTitle(n)}
	b := n.Booted
	switch {
	case n.Configured:
	case b == nil:
		v.Badge = textView{Text: "Booted image unknown (no extension statuses: Talos <= 1.12 or not an Image Factory image); the checks use the choice on the right as a fallback",
			Importance: widget.WarningImportance}
		v.AskFlashed = true
	default:
		if label == "" {
			label = "unknown profile"
		}
		v.Badge = textView{Text: "Booted: " + label + "  ·  " + b.String(), Importance: widget.HighImportance}
		for _, se := range node.ServiceExtensions() {
			switch {
			case !b.HasExtension(se.Extension):
			case r.applied != nil && r.applied.HasExtensionService(se.ConfigName):
				v.Badge.Text += "  ·  its ExtensionServiceConfig " + se.ConfigName + " was sent"
			default:
				v.Badge.Importance = widget.WarningImportance
				v.Badge.Text += "  ·  needs an ExtensionServiceConfig " + se.ConfigName
			}
		}
	}
	switch {
	case r.act == rowChecking:
		v.Reply = textView{Text: "Checking " + r.actName + "…"}
	case r.act == rowSending:
		v.Reply = textView{Text: "Sending " + r.actName + "…"}
	case r.act == rowDryRun:
		v.Reply = textView{Text: "Sending " + r.actName + ": the node checks it first (its dry run)…"}
	case r.applyErr != nil:
		v.Reply = textView{Text: "Not applied: " + errString(r.applyErr), Importance: widget.DangerImportance}
	case r.applyOut != nil:
		v.Reply = textView{Text: applyText(r.applyName, r.applyOut), Importance: widget.SuccessImportance}
		if len(r.applyOut.Result.Warnings) > 0 {
			v.Reply.Importance = widget.WarningImportance // the node's warnings are not a success colour
		}
	case n.Configured && r.status != nil:
		v.Reply = textView{Text: "configured; followed with your talosconfig (below)"}
	default:
		v.Reply = textView{Text: nodeNote(n)}
	}
	v.Reply.Text = printable.Lines(v.Reply.Text)
	return v
}

// sortRows keeps box's node rows in the inventory's order, then by
// address (a scan finds them in any order; a new row used to go last).
func (s *nodesStep) sortRows(box *fyne.Container) {
	rank := func(o fyne.CanvasObject) (int, netip.Addr, string) {
		for _, r := range s.rows {
			if r.box != o {
				continue
			}
			idx := len(s.invRows) + 1
			if want := s.inventoryMemberAt(r.node); want != nil {
				idx = slices.Index(s.cluster.Members, want)
			}
			ip, _ := netip.ParseAddrPort(r.node.Addr)
			return idx, ip.Addr(), r.node.Addr
		}
		return 1 << 30, netip.Addr{}, ""
	}
	slices.SortStableFunc(box.Objects, func(a, b fyne.CanvasObject) int {
		ia, aa, sa := rank(a)
		ib, ab, sb := rank(b)
		switch {
		case ia != ib:
			return ia - ib
		case aa != ab:
			return aa.Compare(ab)
		}
		return strings.Compare(sa, sb)
	})
	box.Refresh()
}
