package gui

import (
	"image/color"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
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
// node's last answer, its member's state, the last apply and the last
// status read (viewNodeRow). The verdict leads; the rest is Details.
type nodeRowView struct {
	Title      string   // its name: the inventory's hostname, the node's, else its address
	Sub        string   // its role · address · Talos version
	State      textView // the badge: plan.Member.State in a word
	Reply      textView // the verdict: what happened, what to do next (one line)
	AskFlashed bool     // "Card flashed as": the node does not say what it booted
	Badge      textView // Details: what the node booted and what it needs ("" hides it)
	Detail     string   // Details: the apply's answer and warnings, the node's MAC and notes
}

// viewNodeRow renders r; label is the profile its booted schematic is
// ("" unknown), invHost the inventory's name for its address ("" none),
// boot what the verdict says of the bootstrap after a control plane's
// config (bootstrapNext), kn its Kubernetes node (nil: none known).
func viewNodeRow(r *nodeRow, label, invHost, boot string, kn *plan.KubeNode) nodeRowView {
	n := r.node
	if n.Hostname == "" { // a configured node does not say it before mTLS: the inventory does
		n.Hostname = invHost
	}
	if st := r.status; n.TalosVersion == "" && st != nil && st.Status != nil {
		n.TalosVersion = st.Status.TalosVersion
	}
	v := nodeRowView{Title: printable.String(rowName(n)), Sub: printable.String(rowSub(r.member, n, label)), State: stateView(r)}
	b := n.Booted
	switch {
	case n.Configured:
	case b == nil:
		v.Badge = textView{Text: "Booted image unknown (no extension statuses: Talos <= 1.12 or not an Image Factory image); the checks use \"Card flashed as\" as a fallback"}
		v.AskFlashed = true
	default:
		if label == "" {
			label = "unknown profile"
		}
		v.Badge = textView{Text: "Booted: " + label + "  ·  " + b.String()}
		for _, se := range node.ServiceExtensions() {
			switch {
			case !b.HasExtension(se.Extension):
			case r.applied != nil && r.applied.HasExtensionService(se.ConfigName):
				v.Badge.Text += "  ·  its ExtensionServiceConfig " + se.ConfigName + " was sent"
			default:
				v.Badge.Text += "  ·  needs an ExtensionServiceConfig " + se.ConfigName
			}
		}
	}
	var details []string
	switch {
	case r.act == rowChecking:
		v.Reply = textView{Text: "Checking " + r.actName + "…"}
	case r.act == rowSending:
		v.Reply = textView{Text: "Sending " + r.actName + "…"}
	case r.act == rowDryRun:
		v.Reply = textView{Text: "Sending " + r.actName + ": the node checks it first (its dry run)…"}
	case r.applyErr != nil:
		v.Reply = textView{Text: "Not applied: " + errString(r.applyErr), Importance: widget.DangerImportance}
	case r.status != nil && r.status.Status != nil:
		v.Reply = statusVerdict(*r.status, kn)
	case r.applyOut != nil:
		v.Reply = applyVerdict(r.applyName, r.applyOut, boot)
	case n.Configured:
		v.Reply = textView{Text: "Configured. Drop your talosconfig here to follow it."}
	case n.Maintenance:
		v.Reply = textView{Text: "Waiting for its config: drop " + configWord(r.member) + " here, or choose it."}
	case n.Stage != "":
		v.Reply = textView{Text: "Stage " + n.Stage + "."}
	default:
		v.Reply = textView{Text: "Answered at " + n.Addr + "."}
	}
	if r.applyOut != nil && r.applyErr == nil {
		details = append(details, applyDetails(r.applyOut))
	}
	if n.MAC != "" {
		details = append(details, "MAC "+n.MAC)
	}
	if n.Note != "" && !n.Configured {
		details = append(details, n.Note)
	}
	v.Detail = printable.Lines(strings.Join(details, "\n"))
	v.Reply.Text = printable.Lines(v.Reply.Text)
	return v
}

// rowName is how a row names its node: its hostname, else its address.
func rowName(n node.Node) string {
	if n.Hostname != "" {
		return n.Hostname
	}
	return n.Addr
}

// rowSub is the row's second word: its role (the inventory's, the
// config's it took, else the image it booted), its address (when the name
// is not it) and its Talos version.
func rowSub(m *plan.Member, n node.Node, label string) string {
	var parts []string
	switch {
	case m != nil && m.Role.Known():
		parts = append(parts, m.Role.String())
	case label != "":
		parts = append(parts, label+" image")
	}
	if n.Hostname != "" {
		parts = append(parts, n.Addr)
	}
	if n.TalosVersion != "" {
		t := "Talos " + n.TalosVersion
		if n.Arch != "" {
			t += " " + n.Arch
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, " · ")
}

// configWord is the config a waiting node is to take, for its verdict.
func configWord(m *plan.Member) string {
	if m != nil && m.Config != "" {
		return filepath.Base(m.Config)
	}
	if m != nil && m.Role.Known() {
		return m.Role.String() + ".yaml"
	}
	return "its machine config"
}

// stateView is the row's badge: its member's state (plan's model), in a
// word and a colour: red stuck or failing, green applied or ready, blue a
// step of the user's to come (its config, the bootstrap).
func stateView(r *nodeRow) textView {
	st := plan.StateUnknown
	if r.member != nil {
		st = r.member.State
	}
	switch {
	case r.applyErr != nil && !r.node.Configured && st == plan.StateMaintenance:
	case st == plan.StateUnknown && r.node.Configured:
		st = plan.StateConfigured
	case st == plan.StateUnknown && r.node.Maintenance:
		st = plan.StateMaintenance
	}
	t := textView{Text: string(st)}
	switch st {
	case plan.StateStuck, plan.StateFailing:
		t.Importance = widget.DangerImportance
	case plan.StateApplied, plan.StateReady:
		t.Importance = widget.SuccessImportance
	case plan.StateMaintenance, plan.StateAwaitingBoot:
		t.Importance = widget.HighImportance
	case plan.StateAbsent:
		t.Importance = widget.WarningImportance
	case plan.StateUnknown:
		t.Text = "unknown"
	}
	return t
}

// applyVerdict is the row's line after an apply: what the node does now
// and the one next step (the bootstrap of the first control plane).
func applyVerdict(name string, out *plan.ApplyOutcome, boot string) textView {
	if out.Result != nil && out.Result.DryRun {
		return textView{Text: "Checked " + name + ": the node's dry run accepts it; nothing was applied."}
	}
	t := textView{Text: "Applied " + name + ": " + out.Next.Verdict + ".", Importance: widget.SuccessImportance}
	switch {
	case boot == "bootstrap":
		t.Text += " Next, once per cluster: Bootstrap etcd…"
	case strings.HasPrefix(boot, "joins "):
		t.Text += " It joins the cluster bootstrapped on " + strings.TrimPrefix(boot, "joins ") + "."
	}
	return t
}

// statusVerdict is a followed node's line: what is wrong, when
// something is (the diagnosis, or its Kubernetes node's), with its fix
// in Details; else where it is now.
func statusVerdict(ns plan.NodeStatus, kn *plan.KubeNode) textView {
	for _, d := range ns.Diagnoses {
		if d.Code == "unreachable" || d.Severity != "error" && d.Severity != "warning" {
			continue
		}
		t := textView{Text: strings.TrimSuffix(d.Message, ".") + ".", Importance: widget.WarningImportance} // it starts with the node's name: not capitalised
		if d.Severity == "error" {
			t.Importance = widget.DangerImportance
		}
		if d.Fix != "" {
			t.Text += " The fix is under Details."
		}
		return t
	}
	t := statusLine(ns)
	t.Text = sentence(strings.TrimSuffix(t.Text, ".")) + "."
	if ns.Status != nil && kn != nil && kn.Ready != "True" && kn.Diagnosis != nil {
		// Talos runs it; Kubernetes says what is missing (a CNI).
		t = textView{Text: sentence(ns.Status.Stage) + "; Kubernetes: " + strings.TrimSuffix(kn.Diagnosis.Message, ".") + "."}
	}
	return t
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

// stateBadge is a row's state in a word, on a rounded tint of its colour.
type stateBadge struct {
	*fyne.Container
	bg    *canvas.Rectangle
	label *widget.Label
	now   textView
}

func newStateBadge() *stateBadge {
	b := &stateBadge{bg: canvas.NewRectangle(color.Transparent), label: widget.NewLabelWithStyle("", fyne.TextAlignCenter, fyne.TextStyle{Bold: true})}
	b.bg.CornerRadius = theme.Size(theme.SizeNameInputRadius) * 2
	b.bg.StrokeWidth = 1
	b.label.SizeName = theme.SizeNameCaptionText
	b.Container = container.NewStack(b.bg, b.label)
	return b
}

// set shows t (UI goroutine).
func (b *stateBadge) set(t textView) {
	if b.now == t {
		return
	}
	b.now = t
	c := importanceColor(t.Importance)
	r, g, bl, _ := c.RGBA()
	b.bg.StrokeColor = c
	b.bg.FillColor = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(bl >> 8), A: 0x30}
	b.bg.Refresh()
	setText(b.label, t)
	showIf(b.Container, t.Text != "")
}

// importanceColor is the theme's colour of an importance.
func importanceColor(imp widget.Importance) color.Color {
	v := fyne.CurrentApp().Settings().ThemeVariant()
	th := fyne.CurrentApp().Settings().Theme()
	switch imp {
	case widget.SuccessImportance:
		return th.Color(theme.ColorNameSuccess, v)
	case widget.DangerImportance:
		return th.Color(theme.ColorNameError, v)
	case widget.WarningImportance:
		return th.Color(theme.ColorNameWarning, v)
	case widget.HighImportance:
		return th.Color(theme.ColorNamePrimary, v)
	}
	return th.Color(theme.ColorNameDisabled, v)
}
