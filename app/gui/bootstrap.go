package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/node"
)

// The bootstrap step of a control plane row: with the user's talosconfig
// (mTLS), wait for the node to come back with its config, bootstrap etcd
// once (node.Bootstrap refuses a node whose etcd already runs), and wait for
// etcd to be healthy. The talosconfig holds the cluster's admin key: it is
// only ever named (path and context), never shown or logged.

// Phases of a bootstrap, shown on the row.
const (
	phaseWait      = "1/3 waiting for the node to come back with its config"
	phaseBootstrap = "2/3 bootstrapping etcd"
	phaseHealthy   = "3/3 waiting for etcd to be healthy"
)

// bootstrapPrompt is the dialog that picks the talosconfig and confirms.
type bootstrapPrompt struct {
	modal  *modal
	row    *nodeRow
	tc     *node.Talosconfig
	file   *widget.Label
	warn   *widget.Label
	choose *keyButton
	first  *widget.Check // "first control plane" mark; nil after a control plane config from this session
	start  *keyButton
}

// bootstrapEligible: the row shows "Bootstrap etcd…" (plan's
// Cluster.MayBootstrap: a control plane, or a configured node of unknown
// role, whose etcd does not run): the node bootstrapped in this session
// keeps it ("etcd bootstrapped"), the others are shown disabled once one
// was (bootstrapBlocked).
func (s *nodesStep) bootstrapEligible(r *nodeRow) bool {
	if r.member == s.cluster.Bootstrapped {
		return true
	}
	ref := s.cluster.MayBootstrap(r.member)
	return ref == nil || ref.Code == plan.RefusalBootstrapped && !r.member.EtcdRunning
}

// bootstrapBlocked says why no bootstrap may start now ("" when one may).
func (s *nodesStep) bootstrapBlocked() string {
	switch {
	case s.cluster.Bootstrapped != nil:
		return "etcd was already bootstrapped on " + s.cluster.Bootstrapped.Endpoint.String() + " in this session: a cluster is bootstrapped once, on one node"
	case s.bootRunning != nil:
		return "a bootstrap of " + s.bootRunning.node.Addr + " is running"
	}
	return ""
}

// refreshBootstrapButtons shows each row's "Bootstrap etcd…" where it
// applies, enabled only while no bootstrap runs or has succeeded.
func (s *nodesStep) refreshBootstrapButtons() {
	blocked := s.bootstrapBlocked() != ""
	for _, r := range s.rows {
		if !s.bootstrapEligible(r) || r.kubeBtn != nil && r.kubeBtn.Visible() { // one action: the kubeconfig's after the bootstrap
			r.bootBtn.Hide()
			continue
		}
		r.bootBtn.Show()
		if r.member == s.cluster.Bootstrapped {
			r.bootBtn.SetText("etcd bootstrapped")
			r.bootBtn.SetIcon(theme.ConfirmIcon())
		}
		if blocked {
			r.bootBtn.Disable()
		} else {
			r.bootBtn.Enable()
		}
	}
}

// ensureBootstrapBox adds the row's bootstrap lines once.
func (s *nodesStep) ensureBootstrapBox(r *nodeRow) {
	if r.bootstrapBox != nil {
		return
	}
	r.bootstrap = widget.NewEntry() // selectable: the command is copied into a terminal
	r.bootNote = wrapLabel("")
	r.bootState = wrapLabel("")
	r.bootCancel = newKeyButton(s.ui, "Cancel bootstrap", theme.CancelIcon(), func() { s.cancelBootstrap(r) })
	r.bootCancel.Hide()
	// The state (progress, outcome) with Cancel on its right is the row's
	// verdict while it is shown (render hides the other); the words and
	// the talosctl command are its Details.
	r.bootStateBox = container.NewBorder(nil, nil, nil, container.NewVBox(r.bootCancel, layout.NewSpacer()), r.bootState)
	r.bootStateBox.Hide()
	r.content.Objects = slices.Insert(r.content.Objects, slices.Index(r.content.Objects, fyne.CanvasObject(r.reply))+1, fyne.CanvasObject(r.bootStateBox))
	r.bootstrapBox = container.NewVBox(r.bootNote, r.bootstrap)
	r.more.Add(r.bootstrapBox)
}

// relayout lays the rows out again after lines were shown, hidden or
// rewrapped: Fyne re-lays a container out only when it is refreshed, and a
// row's height changes the list's.
func (s *nodesStep) relayout() {
	for _, r := range s.rows { // a bootstrap state shown or hidden: the row's verdict
		showIf(r.reply, r.bootStateBox == nil || !r.bootStateBox.Visible())
	}
	s.content.Refresh()
}

// openBootstrap shows the bootstrap dialog for r (UI goroutine). tc, when
// set, is a talosconfig just dropped on the row; otherwise the one used
// last in this session is offered.
func (s *nodesStep) openBootstrap(r *nodeRow, tc *node.Talosconfig) {
	if why := s.bootstrapBlocked(); why != "" {
		s.refuseBootstrap(r, why)
		return
	}
	if tc == nil {
		tc = s.talosconfig
	}
	if tc == nil {
		tc = s.inventoryTalosconfig(r)
	}
	p := &bootstrapPrompt{row: r}
	p.file = wrapLabel("")
	p.warn = wrapLabel("")
	p.warn.Importance = widget.WarningImportance
	p.choose = newKeyButton(s.ui, "Choose talosconfig…", theme.FolderOpenIcon(), func() { s.pickTalosconfig(p) })
	p.start = primaryButton(s.ui, "Bootstrap "+r.node.Addr, theme.ConfirmIcon(), func() {
		if p.tc != nil {
			s.startBootstrap(r, p.tc)
		}
	})
	items := container.NewVBox(
		wrapLabel("Bootstrap creates the cluster: it starts etcd on this control plane node. Do it once per cluster, on one control plane node only. "+
			"talosflash waits for the node to come back with its config (up to "+waitText(s.bootWait.Timeout)+"), sends the bootstrap request once, and waits for etcd to be healthy. "+
			"A node whose etcd already runs is refused and nothing is sent."),
		heading("talosconfig (written by talosctl gen config next to controlplane.yaml)"),
		container.NewBorder(nil, nil, nil, p.choose, p.file),
		wrapLabel("Or drop the talosconfig file on this window. Its keys are only used to connect: never shown, logged or saved."),
		p.warn,
	)
	if !r.member.Took.IsControlPlane() {
		p.first = widget.NewCheck("This is the first control plane node of its cluster (no other node was bootstrapped)", func(bool) { s.updatePrompt(p) })
		items.Add(p.first)
	}
	s.setPromptTalosconfig(p, tc)
	s.bootPrompt = p
	p.modal = s.ui.showModal("Bootstrap etcd on "+r.node.Addr+"?", container.NewVScroll(items), "Cancel", p.start, fyne.NewSize(720, 420))
}

// inventoryTalosconfig is the talosconfig that talosctl gen config wrote
// beside the inventory's configs (the file talosconfig in r's config
// folder), offered by the bootstrap dialog; nil when there is none, or it
// is no regular file or no talosconfig (the user chooses one then).
func (s *nodesStep) inventoryTalosconfig(r *nodeRow) *node.Talosconfig {
	dir := s.configFolder(r)
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, "talosconfig")
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	tc, err := node.LoadTalosconfig(path, "") // bounded; its errors never quote it
	if err != nil {
		return nil
	}
	return tc
}

// setPromptTalosconfig shows which talosconfig the prompt will use.
func (s *nodesStep) setPromptTalosconfig(p *bootstrapPrompt, tc *node.Talosconfig) {
	p.tc = tc
	p.warn.SetText("")
	p.warn.Hide()
	if tc == nil {
		p.file.SetText("No talosconfig chosen yet.")
	} else {
		p.file.SetText(tc.String())
		if !tc.IsAdmin() {
			p.warn.SetText(fmt.Sprintf("Its client certificate has the roles %v, not os:admin: the node will refuse the bootstrap.", tc.Roles))
			p.warn.Show()
		}
	}
	s.updatePrompt(p)
}

func (s *nodesStep) updatePrompt(p *bootstrapPrompt) {
	if p.tc != nil && (p.first == nil || p.first.Checked) {
		p.start.Enable()
	} else {
		p.start.Disable()
	}
}

// openBootstrapPrompt is the bootstrap dialog shown now, nil when none.
func (s *nodesStep) openBootstrapPrompt() *bootstrapPrompt {
	if p := s.bootPrompt; p != nil && p.modal != nil && s.ui.modal == p.modal {
		return p
	}
	return nil
}

// pickTalosconfig opens a file chooser over the prompt; the prompt keeps
// Enter and Esc once it closes.
func (s *nodesStep) pickTalosconfig(p *bootstrapPrompt) {
	s.ui.chooseFile(kindConfig, FileRequest{Title: "Choose your talosconfig", Accept: "Use", Folder: s.configFolder(p.row)},
		func(u fyne.URI) { s.loadTalosconfigInto(p, u) })
}

// loadTalosconfigInto reads u in the background and sets it on p.
func (s *nodesStep) loadTalosconfigInto(p *bootstrapPrompt, u fyne.URI) {
	p.file.SetText("Reading " + u.Name() + "…")
	go func() {
		tc, err := loadTalosconfigURI(u)
		s.ui.do(func() {
			if err != nil {
				p.tc = nil
				p.file.SetText("")
				p.warn.SetText("Cannot use " + u.Name() + ": " + errString(err))
				p.warn.Show()
				s.updatePrompt(p)
				return
			}
			s.setPromptTalosconfig(p, tc)
		})
	}()
}

// loadTalosconfigURI reads a talosconfig bounded; its errors never quote it.
func loadTalosconfigURI(u fyne.URI) (*node.Talosconfig, error) {
	if u.Scheme() == "file" {
		return node.LoadTalosconfig(u.Path(), "")
	}
	rc, err := storage.Reader(u)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, node.MaxTalosconfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > node.MaxTalosconfigSize {
		return nil, errf("%s is larger than %d bytes: not a talosconfig", u.Name(), node.MaxTalosconfigSize)
	}
	tc, err := node.ParseTalosconfig(data, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Name(), err)
	}
	tc.Path = u.Name()
	return tc, nil
}

// isTalosconfig tells a dropped talosconfig from a machine config: it has
// contexts and no machine section.
func isTalosconfig(data []byte) bool {
	var doc struct {
		Contexts map[string]any `yaml:"contexts"`
		Machine  any            `yaml:"machine"`
	}
	if yaml.Unmarshal(data, &doc) != nil { // the error may quote the file: dropped
		return false
	}
	return len(doc.Contexts) > 0 && doc.Machine == nil
}

// droppedTalosconfig handles a talosconfig dropped on row r (UI goroutine):
// it goes to the bootstrap dialog open now, or opens one for r.
func (s *nodesStep) droppedTalosconfig(r *nodeRow, u fyne.URI, data []byte) {
	tc, err := node.ParseTalosconfig(data, "")
	if err == nil {
		tc.Path = u.Name()
		if u.Scheme() == "file" {
			tc.Path = u.Path()
		}
	}
	if p := s.openBootstrapPrompt(); p != nil {
		if err != nil {
			p.warn.SetText("Cannot use " + u.Name() + ": " + errString(err))
			p.warn.Show()
			return
		}
		s.setPromptTalosconfig(p, tc)
		return
	}
	if err != nil {
		s.ui.showError("Cannot use "+u.Name()+" as a talosconfig", err)
		return
	}
	if r == nil {
		s.setStatus("Drop the talosconfig onto the control plane node to bootstrap, or onto any configured node to follow it.")
		return
	}
	if !s.bootstrapEligible(r) || s.cluster.Bootstrapped != nil || s.bootRunning != nil {
		s.useTalosconfig(tc) // no bootstrap here: follow the configured nodes with it
		return
	}
	s.openBootstrap(r, tc)
}

// refuseBootstrap says on the row why no bootstrap was started.
func (s *nodesStep) refuseBootstrap(r *nodeRow, why string) {
	if r.member == s.cluster.Bootstrapped {
		return // the row already says it is bootstrapped
	}
	s.ensureBootstrapBox(r)
	r.bootstrapBox.Show()
	r.bootState.Importance = widget.DangerImportance
	r.bootState.SetText("Bootstrap refused, nothing was sent: " + why + ".")
	r.bootStateBox.Show()
	s.relayout()
}

// startBootstrap runs node.Bootstrap on r in the background (UI goroutine).
func (s *nodesStep) startBootstrap(r *nodeRow, tc *node.Talosconfig) {
	if why := s.bootstrapBlocked(); why != "" {
		s.refuseBootstrap(r, why)
		return
	}
	s.talosconfig = tc
	s.ensureBootstrapBox(r)
	r.bootNote.SetText("The same in a terminal, from the folder with your talosconfig:")
	r.bootstrap.SetText(bootstrapCommand(r.node))
	r.bootstrapBox.Show()
	ctx, cancel := context.WithCancel(s.ui.ctx)
	r.bootCancelFn = cancel
	s.bootRunning = r
	s.refreshBootstrapButtons()
	r.bootState.Importance = widget.MediumImportance
	r.bootState.SetText(phaseWait + "…")
	r.bootStateBox.Show()
	r.bootCancel.Enable()
	r.bootCancel.Show()
	s.relayout()

	opts := s.bootWait
	phase := phaseWait
	also := opts.Progress // tests record the lines
	opts.Progress = func(line string) {
		if also != nil {
			also(line)
		}
		switch {
		case strings.HasPrefix(line, "bootstrapping etcd"):
			phase = phaseBootstrap
		case strings.HasPrefix(line, "bootstrap accepted"):
			phase = phaseHealthy
		}
		text := phase + ": " + line
		s.ui.do(func() {
			if s.bootRunning == r {
				r.bootState.SetText(text)
				s.relayout() // the text may wrap onto more lines
			}
		})
	}
	go func() {
		out, err := plan.Bootstrap(ctx, plan.BootstrapJob{Node: r.member, Talosconfig: tc, Wait: opts})
		res := out.BootstrapResult
		cancelled := ctx.Err() != nil // before our own cancel below
		cancel()
		if s.ui.ctx.Err() != nil {
			return // the window closed
		}
		s.ui.do(func() { s.bootstrapDone(r, tc, res, err, cancelled) })
	}()
}

// cancelBootstrap stops the running bootstrap of r.
func (s *nodesStep) cancelBootstrap(r *nodeRow) {
	if r.bootCancelFn != nil {
		r.bootCancelFn()
		r.bootCancel.Disable()
		r.bootState.SetText("Cancelling…")
		s.relayout()
	}
}

// bootstrapDone shows the outcome (UI goroutine).
func (s *nodesStep) bootstrapDone(r *nodeRow, tc *node.Talosconfig, res *node.BootstrapResult, err error, cancelled bool) {
	r.bootCancelFn = nil
	r.bootCancel.Hide()
	defer s.relayout()
	s.bootRunning = nil
	if err == nil {
		s.cluster.ObserveBootstrapped(r.member)
		s.refreshBootstrapButtons()
		r.bootState.Importance = widget.SuccessImportance
		version := ""
		if res.TalosVersion != "" {
			version = " (Talos " + res.TalosVersion + ")"
		}
		r.bootState.SetText("etcd bootstrapped on " + res.Endpoint + version + ", running and healthy. The cluster is starting Kubernetes.")
		r.bootNote.SetText("Next, get the cluster's kubeconfig (merged into your ~/.kube/config), or in a terminal:")
		r.bootstrap.SetText(kubeconfigCommand(r.node, tc))
		s.showKubeconfigButton(r)
		s.followAll()
		return
	}
	s.followAll()
	s.refreshBootstrapButtons()
	r.bootState.Importance = widget.DangerImportance
	r.bootState.SetText(bootstrapErrorText(err, res, cancelled))
	if !cancelled {
		s.ui.showModal("etcd was not bootstrapped on "+r.node.Addr, container.NewVScroll(wrapLabel(r.bootState.Text)), "Close", nil, fyne.NewSize(620, 260))
	}
}

// bootstrapErrorText says in plain words what happened and whether
// anything reached the node.
func bootstrapErrorText(err error, res *node.BootstrapResult, cancelled bool) string {
	sent := res != nil && res.Attempts > 0
	switch {
	case cancelled && !sent:
		return "Cancelled: no bootstrap request was sent."
	case cancelled:
		return "Cancelled after the bootstrap request was sent: etcd may be starting. Check with talosctl service etcd before trying again (a second bootstrap is refused)."
	case errors.Is(err, node.ErrAlreadyBootstrapped) && !sent:
		return "Refused: etcd is already bootstrapped on this node, so nothing was sent. A second bootstrap would split the cluster; the cluster exists, get its kubeconfig with talosctl kubeconfig."
	case errors.Is(err, node.ErrAlreadyBootstrapped):
		return "Refused by the node: etcd already has data on it (" + errString(err) + "). A second bootstrap would split the cluster; the cluster exists, get its kubeconfig with talosctl kubeconfig."
	case errors.Is(err, node.ErrNotControlPlane):
		return "Refused: this node is not a control plane node. Bootstrap the control plane node instead."
	case errors.Is(err, node.ErrTalosconfig):
		return "The talosconfig cannot be used: " + errString(err)
	case errors.Is(err, context.DeadlineExceeded):
		return "The node did not get ready in time, nothing was bootstrapped: " + errString(err) + ". Check that it booted with its config and is on this network, then try again."
	case errors.Is(err, node.ErrRefused):
		return "The node refused: " + errString(err) + ". Bootstrap needs the admin talosconfig of this cluster (role os:admin)."
	case errors.Is(err, node.ErrNetwork):
		return "Cannot talk to the node: " + errString(err)
	}
	return "Bootstrap failed: " + errString(err)
}

// kubeconfigCommand is the step after a bootstrap.
func kubeconfigCommand(n node.Node, tc *node.Talosconfig) string {
	ip := hostOf(n.Addr)
	if n.IP.IsValid() {
		ip = n.IP.String()
	}
	return fmt.Sprintf("talosctl --talosconfig %s kubeconfig --nodes %s --endpoints %s", shellQuote(tc.Path), ip, ip)
}

// shellQuote quotes a path for a POSIX shell when it needs it.
func shellQuote(p string) string {
	if p != "" && !strings.ContainsAny(p, " \t\n'\"\\$`!*?[](){}<>|&;#~") {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// waitText is the bootstrap's wait bound for the dialog.
func waitText(d time.Duration) string {
	if d <= 0 {
		d = node.DefaultWaitTimeout
	}
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.Round(time.Second).String()
}
