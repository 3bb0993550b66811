package gui

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

// Following the nodes after their config (issue 30): once the window
// has the cluster's talosconfig (dropped on a row, or used for the
// bootstrap), each node that has its config is read as `talosflash
// status --watch` reads it (plan.Watch with plan.StatusCheck: stage,
// readiness and unmet conditions, services with ext-newt, the booted
// image against the inventory's role, the incident's diagnosis with its
// countdown and fix); once the kubeconfig is fetched ("Get kubeconfig"
// after the bootstrap: plan.Kubeconfig, as `talosflash kubeconfig`), each
// node's Kubernetes Ready condition with why it is not (plan.ReadKube).
// The rows render these models (viewNodeStatus); nothing here decides.

// statusEvery is how often a followed node is read (tests shorten it).
const statusEvery = 5 * time.Second

// canFollow: r has its config and the window has a talosconfig.
func (s *nodesStep) canFollow(r *nodeRow) bool {
	return s.talosconfig != nil && (r.node.Configured || r.applied != nil)
}

// followAll follows every row that can be (UI goroutine).
func (s *nodesStep) followAll() {
	for _, r := range s.rows {
		s.follow(r)
	}
}

// follow reads r in the background until the window closes, showing each
// read on the row (UI goroutine; once per row).
func (s *nodesStep) follow(r *nodeRow) {
	if r.following || !s.canFollow(r) {
		return
	}
	r.following = true
	target, tc := r.member, s.talosconfig
	every := s.statusEvery
	if every <= 0 {
		every = statusEvery
	}
	opts := plan.WatchOptions{
		Check: plan.StatusCheck{Profiles: s.ui.deps.Profiles, BootTimeout: s.bootTimeout}, Watch: true, Interval: every,
		Talosconfig: tc, Now: s.now,
		// Every read, not only the changes: the countdown to the
		// BootTimeout reboot moves on between them.
		Until: func(ns plan.NodeStatus) bool {
			s.ui.do(func() { r.status = &ns; r.member.ObserveStatus(ns); s.renderStatus(r) })
			return false
		},
	}
	s.renderStatus(r)
	go func() {
		_, err := plan.Watch(s.ui.ctx, []*plan.Member{target}, opts, func(plan.NodeStatus) {})
		if err != nil && s.ui.ctx.Err() == nil {
			s.ui.do(func() { r.following, r.statusErr = false, err; s.renderStatus(r) })
		}
	}()
}

// useTalosconfig keeps tc for following the nodes and starts following
// every node that has its config (UI goroutine).
func (s *nodesStep) useTalosconfig(tc *node.Talosconfig) {
	s.talosconfig = tc
	s.followAll()
	s.setStatus("Following each configured node with " + tc.String() + " (its keys are only used to connect).")
}

// statusView is the status part of a node row.
type statusView struct {
	Head      textView
	Detail    string
	Diagnoses []plan.Diagnosis
	Kube      textView
	KubeFix   string
}

// viewNodeStatus renders a node's last read (ns) and its Kubernetes node
// (kn, nil: no Kubernetes view) at now: the states `talosflash status`
// prints, in the app's words.
func viewNodeStatus(ns *plan.NodeStatus, kn *plan.KubeNode, now time.Time) statusView {
	var v statusView
	if ns == nil {
		return v
	}
	st := ns.Status
	if st == nil {
		v.Head = textView{Text: "Not answering (leaving maintenance mode, or rebooting)", Importance: widget.WarningImportance}
		if ns.Reboots > 0 {
			v.Head.Text += fmt.Sprintf(" · %d reboot(s) seen", ns.Reboots)
		}
	} else {
		head := []string{st.Stage}
		if st.Ready {
			head = append(head, "ready")
		} else {
			head = append(head, "not ready")
		}
		if d := ns.StageFor(now); d > 0 {
			head = append(head, "in "+st.Stage+" for "+plan.Minutes(d))
		}
		v.Head = textView{Text: strings.Join(head, ", ") + " · Talos " + orDash(st.TalosVersion)}
		if st.Uptime > 0 {
			v.Head.Text += " · up " + plan.Minutes(st.Uptime)
		}
		if ns.Reboots > 0 {
			v.Head.Text += fmt.Sprintf(" · %d reboot(s) seen", ns.Reboots)
		}
		switch {
		case ns.Healthy():
			v.Head.Importance = widget.SuccessImportance
		case st.Stage == "running":
		default:
			v.Head.Importance = widget.WarningImportance
		}
		var lines []string
		for _, u := range st.Unmet {
			lines = append(lines, "Not ready: "+u.Name+": "+u.Reason)
		}
		lines = append(lines, "Image: "+ns.ImageText())
		lines = append(lines, "Services: "+strings.Join(ns.ServiceTexts(), ", "))
		if st.EtcdMembers != nil {
			var ms []string
			for _, m := range st.EtcdMembers {
				ms = append(ms, m.Hostname)
			}
			lines = append(lines, "etcd members: "+strings.Join(ms, ", "))
		}
		for _, p := range st.Problems {
			lines = append(lines, "Not read: "+p)
		}
		v.Detail = strings.Join(lines, "\n")
	}
	for _, d := range ns.Diagnoses {
		if d.Code == "unreachable" {
			continue // the headline says it
		}
		v.Diagnoses = append(v.Diagnoses, d)
	}
	if kn != nil {
		v.Kube = textView{Text: "Kubernetes: Ready", Importance: widget.SuccessImportance}
		if kn.Ready != "True" {
			v.Kube = textView{Text: "Kubernetes: NotReady", Importance: widget.WarningImportance}
			if kn.Diagnosis != nil {
				v.Kube.Text = "Kubernetes: " + kn.Diagnosis.Message
				v.KubeFix = kn.Diagnosis.Fix
			}
		}
	}
	return v
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// kubeNodeOf is r's node in the Kubernetes view (nil: none, or no view).
func (s *nodesStep) kubeNodeOf(r *nodeRow) *plan.KubeNode {
	if s.kube == nil || s.kube.Err != nil {
		return nil
	}
	t := r.member
	ip := hostOf(r.node.Addr)
	for i := range s.kube.Nodes {
		kn := &s.kube.Nodes[i]
		if t.Hostname != "" && strings.EqualFold(kn.Hostname, t.Hostname) || kn.InternalIP != "" && kn.InternalIP == ip {
			return kn
		}
	}
	return nil
}

// renderStatus shows r's status part (UI goroutine).
func (s *nodesStep) renderStatus(r *nodeRow) {
	if r.statusBox == nil {
		if r.status == nil && r.statusErr == nil && !r.following {
			return
		}
		r.statusHead = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		r.statusHead.Wrapping = fyne.TextWrapWord
		r.statusDetail = newBreakLabel("")
		r.statusDiag = container.NewVBox()
		r.statusBox = container.NewVBox(widget.NewSeparator(), r.statusHead, r.statusDetail, r.statusDiag)
		r.more.Add(r.statusBox) // the verdict line says where it is (statusVerdict); this is its Details
	}
	v := viewNodeStatus(r.status, s.kubeNodeOf(r), s.now())
	switch {
	case r.statusErr != nil:
		v.Head = textView{Text: "Cannot follow this node: " + errString(r.statusErr), Importance: widget.DangerImportance}
	case r.status == nil:
		v.Head = textView{Text: "Reading the node's status…"}
	}
	setText(r.statusHead, v.Head)
	if ir := s.inventoryRowFor(r); ir != nil {
		setText(ir.label, viewInventoryRow(ir)) // its line says where the node is now
	}
	if r.status != nil {
		s.render(r) // the title and line take what the status says
		s.refreshBootstrapButtons()
	}
	if r.statusDetail.Text != v.Detail {
		r.statusDetail.SetText(v.Detail)
	}
	showIf(r.statusDetail, v.Detail != "")
	key := fmt.Sprint(v.Diagnoses, v.Kube, v.KubeFix)
	if key != r.statusKey {
		r.statusKey = key
		r.statusDiag.RemoveAll()
		for _, d := range v.Diagnoses {
			r.statusDiag.Add(findingView(node.Finding{Severity: node.Severity(d.Severity), Message: d.Message, Fix: d.Fix}))
		}
		if v.Kube.Text != "" {
			sev := node.SeverityInfo
			if v.Kube.Importance == widget.WarningImportance {
				sev = node.SeverityWarning
			}
			r.statusDiag.Add(findingView(node.Finding{Severity: sev, Message: v.Kube.Text, Fix: v.KubeFix}))
		}
		s.relayout()
	}
}

// now is the clock the status is rendered and diagnosed at.
func (s *nodesStep) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// showKubeconfigButton offers the kubeconfig after a bootstrap.
func (s *nodesStep) showKubeconfigButton(r *nodeRow) {
	if r.kubeBtn == nil {
		r.kubeBtn = primaryButton(s.ui, "Get kubeconfig", theme.DownloadIcon(), func() { s.getKubeconfig(r) })
		r.actions.Add(r.kubeBtn) // the row's one action now
	}
	r.kubeBtn.Show()
	s.refreshBootstrapButtons()
	s.relayout()
}

// getKubeconfig fetches the admin kubeconfig from r (a control plane) and
// merges it into the user's kubeconfig (plan.Kubeconfig, as `talosflash
// kubeconfig`), then follows the Kubernetes nodes through it.
func (s *nodesStep) getKubeconfig(r *nodeRow) {
	tc := s.talosconfig
	if tc == nil {
		return
	}
	r.kubeBtn.Disable()
	r.bootNote.SetText("Getting the kubeconfig from " + r.node.Addr + "…")
	job := plan.KubeconfigJob{Node: r.member.Name(), Endpoint: r.node.Addr, Talosconfig: tc, Path: s.kubeconfigPath,
		ControlPlanes: s.cluster.ControlPlaneAddrs()}
	if a := r.member.Endpoint.Addr(); a.IsValid() && len(job.ControlPlanes) == 0 {
		job.ControlPlanes = []netip.Addr{a}
	}
	go func() {
		out, err := plan.Kubeconfig(s.ui.ctx, job)
		s.ui.do(func() {
			r.kubeBtn.Enable()
			if err != nil {
				r.bootNote.Importance = widget.DangerImportance
				r.bootNote.SetText("No kubeconfig: " + errString(err))
				setText(r.bootState, textView{Text: r.bootNote.Text, Importance: widget.DangerImportance}) // the row's verdict
				s.relayout()
				return
			}
			verb := "Wrote a new kubeconfig"
			if out.Merged {
				verb = "Merged the cluster's admin kubeconfig into"
			}
			r.bootNote.Importance = widget.MediumImportance
			r.bootNote.SetText(fmt.Sprintf("%s %s: context %s (now the current one), server %s. kubectl uses it now; the rows show each Kubernetes node.", verb, out.Path, out.Context, out.Server))
			setText(r.bootState, textView{Text: "etcd bootstrapped; kubeconfig in " + out.Path + " (context " + out.Context + "): kubectl uses it now.", Importance: widget.SuccessImportance})
			r.bootstrap.Hide()
			s.relayout()
			s.followKube(out.Path, out.Context)
		})
	}()
}

// followKube reads the Kubernetes nodes through the kubeconfig's context
// every statusEvery until the window closes (UI goroutine; once).
func (s *nodesStep) followKube(path, context string) {
	if s.kubeFollowing {
		return
	}
	cfg, _, err := kube.LoadFile(path)
	var a *kube.Access
	if err == nil {
		a, err = kube.Open(path, cfg, context, node.DefaultCallTimeout)
	}
	if err != nil {
		s.setStatus("Cannot read the Kubernetes nodes: " + errString(err))
		return
	}
	s.kubeFollowing = true
	var targets []*plan.Member
	for _, r := range s.rows {
		targets = append(targets, r.member)
	}
	cni := s.cluster.CNI()
	every := s.statusEvery
	if every <= 0 {
		every = statusEvery
	}
	go func() {
		for {
			v := plan.ReadKube(s.ui.ctx, a, cni, targets)
			s.ui.do(func() {
				s.kube = &v
				for _, r := range s.rows {
					if r.statusBox != nil {
						s.renderStatus(r)
					}
				}
			})
			t := time.NewTimer(every)
			select {
			case <-s.ui.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}
