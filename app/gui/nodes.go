package gui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/node"
)

// unknownFlash is the "flashed with" choice when the card's image is unknown.
const unknownFlash = "unknown / other"

// nodesStep is step 4: Talos nodes waiting in maintenance mode, and
// applying a machine config to one by drag and drop or a file picker.
type nodesStep struct {
	ui      *UI
	content fyne.CanvasObject

	rows   []*nodeRow
	rowBox *fyne.Container
	empty  *widget.Label
	status *widget.Label
	scan   *keyButton
	manual *escEntry
	shown  *applyPrompt // the findings dialog shown last
	// the last scan: where, and the nodes it found (the summary counts
	// their rows as they are now, so an apply updates it)
	scannedWhere string
	scanned      map[string]bool

	// cluster is plan's model of the nodes: the inventory's members, and
	// a member for each node found at another address (its rows').
	cluster *plan.Cluster

	// Bootstrap (bootstrap.go): one at a time, and none after a success
	// (cluster.Bootstrapped).
	bootPrompt  *bootstrapPrompt  // the bootstrap dialog shown last
	bootRunning *nodeRow          // the row bootstrapping now
	talosconfig *node.Talosconfig // the one used last, offered again
	bootWait    node.WaitOptions  // zero: node's defaults (tests shorten them)

	// Following the configured nodes (status.go): how often, the clock
	// and BootTimeout the diagnoses use (tests scale them), the
	// Kubernetes view once there is a kubeconfig, and the control plane's
	// CNI from the config it took.
	statusEvery    time.Duration
	bootTimeout    time.Duration
	clock          func() time.Time
	kube           *plan.KubeView
	kubeFollowing  bool
	kubeconfigPath string // "": the default (~/.kube/config)

	invRows        []*inventoryRow // the inventory's nodes (inventory.go)
	applyAll       *keyButton      // "Apply all": each waiting inventory node its config
	applyAllNote   *widget.Label
	applyingAll    bool
	applyAllPrompt *modal          // Apply all's confirmation shown last
	appliedAll     bool            // Apply all ran: its note counts the rows' outcomes
	strays         *fyne.Container // nodes at addresses the inventory does not list
	straysHead     *widget.Label
}

// nodeRow is one node in the list, a card (viewNodeRow): its name, role
// and address, a state badge and its one primary action on the first
// line; one verdict line (what happened, what to do next); the rest
// folded under "Details". box is what a drop is hit-tested against.
type nodeRow struct {
	node       node.Node
	member     *plan.Member // the cluster's member at its address
	box        *fyne.Container
	title      *widget.Label // its name
	sub        *widget.Label // role · address · Talos version
	state      *stateBadge   // plan.Member.State, in a word
	actions    *fyne.Container
	badge      *breakLabel // Details: what the node booted (role/profile, schematic)
	flashed    *widget.Select
	flashedBox *fyne.Container // "Card flashed as": only when the node does not say what it booted
	reply      *widget.Label   // the verdict
	detail     *widget.Label   // Details: the node's answer, its warnings, what it does now in full
	content    *fyne.Container // the row's lines
	more       *fyne.Container // what "Details" unfolds
	details    *widget.Accordion
	applied    *node.Config // the config the node took in this session (nil: none)
	// What the row says is rendered from these (viewNodeRow): what runs
	// on it now, and the last apply's outcome.
	act       rowAct
	actName   string             // the config being checked or sent
	applyName string             // the config of the last apply ("": none)
	applyOut  *plan.ApplyOutcome // its outcome, nil when it failed
	applyErr  error
	// Its status once followed (status.go): the last read, and its part
	// of the row.
	following    bool
	status       *plan.NodeStatus
	statusErr    error
	statusBox    *fyne.Container
	statusHead   *widget.Label
	statusDetail *breakLabel
	statusDiag   *fyne.Container
	statusKey    string
	kubeBtn      *keyButton
	bootBtn      *keyButton    // "Bootstrap etcd…"
	bootstrap    *widget.Entry // the talosctl command (bootstrap, then kubeconfig)
	bootNote     *widget.Label
	bootState    *widget.Label // progress, outcome
	bootStateBox *fyne.Container
	bootCancel   *keyButton
	bootCancelFn context.CancelFunc
	bootstrapBox *fyne.Container
	pick         *keyButton
}

// applyPrompt is the dialog between a dropped file and the node.
type applyPrompt struct {
	modal    *modal
	apply    *keyButton
	override *widget.Check // nil when nothing blocks
	findings []node.Finding
}

func newNodesStep(ui *UI) *nodesStep {
	s := &nodesStep{ui: ui, cluster: newCluster(ui.deps)}
	s.rowBox = container.NewVBox()
	s.empty = wrapLabel(fmt.Sprintf("No nodes yet. Boot a Pi from a fresh card (it waits in maintenance mode on port %d), then press Scan or type its IP address.", node.DefaultPort))
	s.status = wrapLabel("")
	s.status.Hide()
	s.scan = primaryButton(ui, "Scan this network", theme.SearchIcon(), s.Scan)
	s.manual = newEscEntry(ui)
	s.manual.SetPlaceHolder("node IP, e.g. 192.168.1.50")
	s.manual.OnSubmitted = func(string) { s.addManual() }
	add := newKeyButton(ui, "Add", theme.ContentAddIcon(), s.addManual)

	top := container.NewVBox(
		heading("Give each booted node its machine config"),
		wrapLabel("Drag worker.yaml or controlplane.yaml from the file manager onto a node, or use its \"Choose config…\" button. The file is checked before it is sent."),
		container.NewBorder(nil, nil, nil, add, s.manual),
		s.status,
	)
	// The primary action bottom-right, as in every step (Enter with
	// nothing focused; Esc releases the address field).
	inv := inventoryBox()
	s.content = container.NewBorder(top, container.NewHBox(layout.NewSpacer(), s.scan), nil, nil,
		container.NewVScroll(container.NewVBox(inv, s.empty, s.rowBox, s.newStrays())))
	s.showInventory(inv)
	ui.session.AddListener(func(c Change) {
		if c == ChangeFlashed {
			s.flashedChanged()
		}
	})
	return s
}

// Scan runs node.Discover on the local networks.
func (s *nodesStep) Scan() {
	s.scan.Disable()
	s.setStatus("Looking for local networks…")
	go func() {
		defer s.ui.do(func() { s.scan.Enable() })
		prefixes, err := s.ui.deps.LocalPrefixes()
		if err == nil && len(prefixes) == 0 {
			err = errf("no local IPv4 network found (is this computer connected?)")
		}
		if err != nil {
			s.ui.do(func() { s.setStatus(""); s.ui.showError("Cannot scan", err) })
			return
		}
		names := make([]string, len(prefixes))
		for i, p := range prefixes {
			names[i] = p.String()
		}
		where := strings.Join(names, ", ")
		s.ui.do(func() { s.setStatus("Scanning " + where + "…") })
		ctx, cancel := context.WithTimeout(s.ui.ctx, 2*time.Minute)
		defer cancel()
		found, err := s.ui.deps.Discover(ctx, node.DiscoverOptions{
			Prefixes: prefixes,
			Progress: func(done, total int) {
				s.ui.do(func() { s.setStatus(fmt.Sprintf("Scanning %s… %d of %d addresses", where, done, total)) })
			},
		})
		s.ui.do(func() {
			if err != nil {
				s.setStatus("")
				s.ui.showError("Scan failed", err)
				return
			}
			s.scanned, s.scannedWhere = map[string]bool{}, where
			for _, n := range found {
				s.addNode(n)
				s.scanned[n.Addr] = true
			}
			s.showScanSummary()
		})
	}()
}

// setStatus says text under the address field; an empty line is hidden,
// not a blank gap above the nodes (UI goroutine).
func (s *nodesStep) setStatus(text string) {
	s.status.SetText(text)
	showIf(s.status, text != "")
}

// showScanSummary says what the last scan found, counted from the rows as
// they are now (a node given its config no longer waits for one).
func (s *nodesStep) showScanSummary() {
	if s.scanned == nil {
		return
	}
	found, waiting := 0, 0
	for _, r := range s.rows {
		if s.scanned[r.node.Addr] {
			found++
			if r.node.Maintenance {
				waiting++
			}
		}
	}
	s.setStatus(fmt.Sprintf("Scanned %s: %d Talos node(s), %d waiting for a config.", s.scannedWhere, found, waiting))
}

// addManual probes the typed address and lists it.
func (s *nodesStep) addManual() {
	addr := strings.TrimSpace(s.manual.Text)
	if addr == "" {
		return
	}
	if _, err := plan.ClusterAt(nil, addr); err != nil { // a typo is said here, never looked up as a name
		s.ui.showError(addr+" is not an address", err)
		return
	}
	s.setStatus("Contacting " + addr + "…")
	go func() {
		ctx, cancel := context.WithTimeout(s.ui.ctx, 10*time.Second)
		defer cancel()
		n, err := s.ui.deps.Probe(ctx, addr)
		s.ui.do(func() {
			if err != nil {
				s.setStatus("")
				s.ui.showError("No Talos node at "+addr, err)
				return
			}
			s.manual.SetText("")
			s.addNode(*n)
			s.setStatus("Added " + n.Addr + ".")
		})
	}()
}

// addNode adds or updates a row (UI goroutine).
func (s *nodesStep) addNode(n node.Node) *nodeRow {
	for _, r := range s.rows {
		if r.node.Addr == n.Addr {
			r.node = n
			r.member.ObserveProbe(&n, nil)
			s.render(r)
			s.refreshBootstrapButtons()
			return r
		}
	}
	r := &nodeRow{node: n, member: s.track(n)}
	r.member.ObserveProbe(&n, nil)
	r.title = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	r.sub = wrapLabel("") // wraps at its spaces: the badge and the action keep their room at 820 px
	r.state = newStateBadge()
	r.badge = newBreakLabel("") // long extension lists must not widen the window
	r.reply = wrapLabel("")
	r.detail = wrapLabel("")
	r.flashed = widget.NewSelect(s.flashOptions(), nil)
	r.flashed.SetSelected(s.defaultFlash())
	r.pick = newKeyButton(s.ui, "Choose config…", theme.FolderOpenIcon(), func() { s.pickFile(r) })
	if n.Configured {
		r.pick.Disable()
	}
	r.bootBtn = newKeyButton(s.ui, "Bootstrap etcd…", theme.UploadIcon(), func() { s.openBootstrap(r, nil) })
	r.flashedBox = container.NewBorder(nil, nil, widget.NewLabel("Card flashed as (the node does not say)"), nil, container.NewHBox(wideSelect(r.flashed)))
	// One action at a time on the right (render shows the one that
	// applies): Choose config…, Bootstrap etcd…, Get kubeconfig.
	r.actions = container.NewHBox(r.pick, r.bootBtn)
	r.more = container.NewVBox(r.badge, r.detail)
	r.details = widget.NewAccordion(widget.NewAccordionItem("Details", r.more))
	bg := canvasCard()
	r.content = container.NewVBox(
		container.NewBorder(nil, nil, container.NewHBox(widget.NewIcon(theme.ComputerIcon()), r.title),
			container.NewHBox(container.NewCenter(r.state.Container), r.actions), r.sub), // the badge's Container: the drivers walk containers, not types embedding one
		r.reply,
		r.flashedBox,
		r.details,
	)
	r.box = container.NewStack(bg, container.NewPadded(r.content))
	s.render(r)
	s.rows = append(s.rows, r)
	box := s.rowBoxFor(n) // apart when an inventory does not list its address
	box.Add(r.box)
	s.sortRows(box)
	s.empty.Hide()
	s.refreshBootstrapButtons()
	s.follow(r)
	return r
}

// nodeCheck is the shared config-check input for a row (app/plan).
func (s *nodesStep) nodeCheck(r *nodeRow) plan.NodeCheck {
	n := r.node
	nc := plan.NodeCheck{Profiles: s.ui.deps.Profiles, Factory: s.ui.deps.Factory, CachedIDs: plan.CachedSchematicIDs(s.ui.deps.Cache), Node: &n}
	if n.Booted == nil && r.flashed.Selected != unknownFlash {
		nc.Declared = r.flashed.Selected
	}
	return nc
}

// render shows the row as viewNodeRow makes it of its state (UI goroutine).
func (s *nodesStep) render(r *nodeRow) {
	label := ""
	if r.node.Booted != nil {
		label = s.nodeCheck(r).MatchBooted().Label()
	}
	invHost := ""
	if m := s.inventoryMemberAt(r.node); m != nil {
		invHost = m.Hostname
	}
	v := viewNodeRow(r, label, invHost, s.bootstrapNext(r), s.kubeNodeOf(r))
	if ir := s.inventoryRowOf(r.member); ir != nil {
		// Once its node answered, an inventory node is this card: its
		// line at the top is not said again, and what Apply all or a
		// refusal made of it is the card's verdict.
		showIf(ir.label, false)
		if t, ok := inventoryVerdict(ir); ok && r.act == rowIdle {
			v.Reply = t
		}
	}
	if r.title.Text != v.Title {
		r.title.SetText(v.Title)
	}
	if r.sub.Text != v.Sub {
		r.sub.SetText(v.Sub)
	}
	r.state.set(v.State)
	if r.badge.Text != v.Badge.Text || r.badge.Importance != v.Badge.Importance {
		r.badge.Importance = v.Badge.Importance
		r.badge.SetText(v.Badge.Text)
	}
	showIf(r.badge, v.Badge.Text != "")
	showIf(r.flashedBox, v.AskFlashed)
	setText(r.reply, v.Reply)
	setText(r.detail, textView{Text: v.Detail})
	showIf(r.detail, v.Detail != "")
	// The bootstrap's progress and outcome are the row's verdict while
	// they are shown (bootstrap.go): one line, not two.
	showIf(r.reply, r.bootStateBox == nil || !r.bootStateBox.Visible())
	if r.node.Configured || r.act != rowIdle || r.applyOut != nil && r.applyOut.Next.LeavesMaintenance && r.applyErr == nil {
		r.pick.Disable()
		r.pick.Hide() // not this row's action any more
	} else {
		r.pick.Enable()
		r.pick.Show()
	}
}

// bootstrapNext is what the row's verdict says of the bootstrap after a
// control plane's config: "" (nothing), "bootstrap" (its next step) or
// the member bootstrapped in this session, which it joins.
func (s *nodesStep) bootstrapNext(r *nodeRow) string {
	if r.applyOut == nil || !r.applyOut.Next.Bootstrap {
		return ""
	}
	switch on := s.cluster.Bootstrapped; {
	case on == nil:
		return "bootstrap"
	case on != r.member:
		return "joins " + on.Name()
	}
	return ""
}

// flashOptions are the profiles a card may have been flashed with.
func (s *nodesStep) flashOptions() []string {
	opts := make([]string, 0, len(s.ui.deps.Profiles)+1)
	for _, p := range s.ui.deps.Profiles {
		opts = append(opts, p.Name)
	}
	return append(opts, unknownFlash)
}

// defaultFlash is the profile of the latest flash this session.
func (s *nodesStep) defaultFlash() string {
	f := s.ui.session.Flashed()
	if len(f) > 0 && f[len(f)-1].Image.Profile != nil {
		return f[len(f)-1].Image.Profile.Name
	}
	return unknownFlash
}

// flashedChanged presets rows still on "unknown" after a successful flash.
func (s *nodesStep) flashedChanged() {
	def := s.defaultFlash()
	for _, r := range s.rows {
		if r.flashed.Selected == unknownFlash {
			r.flashed.SetSelected(def)
		}
	}
}

// HandleDrop is the window's drop callback: a config file dropped on a node
// row is applied to that node (after the checks). Positions are canvas
// coordinates, hit-tested against each row's absolute position.
func (ui *UI) HandleDrop(pos fyne.Position, uris []fyne.URI) {
	if len(uris) == 0 {
		return
	}
	if ui.tabs.SelectedIndex() == tabImage {
		ui.image.dropInstallerFile(uris[0])
		return
	}
	s := ui.nodes
	if s.openBootstrapPrompt() != nil { // the talosconfig for the dialog shown
		s.applyURI(nil, uris[0])
		return
	}
	if ui.tabs.SelectedIndex() != tabNodes {
		ui.tabs.SelectIndex(tabNodes)
		s.setStatus("Drop the config onto one of the nodes below.")
		return
	}
	if r := s.rowAt(pos); r != nil {
		s.applyURI(r, uris[0])
		return
	}
	s.setStatus("Drop the file onto a node row (scan or add the node first).")
}

// rowAt returns the node row under pos, if any.
func (s *nodesStep) rowAt(pos fyne.Position) *nodeRow {
	drv := fyne.CurrentApp().Driver()
	for _, r := range s.rows {
		if !r.box.Visible() {
			continue
		}
		p, size := drv.AbsolutePositionForObject(r.box), r.box.Size()
		if pos.X >= p.X && pos.X < p.X+size.Width && pos.Y >= p.Y && pos.Y < p.Y+size.Height {
			return r
		}
	}
	return nil
}

func (s *nodesStep) pickFile(r *nodeRow) {
	s.ui.chooseFile(kindConfig, FileRequest{Title: "Choose the machine config for " + r.node.Addr, Accept: "Check",
		FilterName: "Machine configs", Exts: []string{".yaml", ".yml"}, Folder: s.configFolder(r)}, func(u fyne.URI) {
		go func() {
			data, err := readConfigURI(u)
			s.ui.do(func() {
				if err != nil {
					s.ui.showError("Cannot read the config", err)
					return
				}
				s.checkAndPrompt(r, u.Name(), localPath(u), data)
			})
		}()
	})
}

// applyURI reads a file dropped on row r (nil: on the bootstrap dialog): a
// machine config is checked and applied, a talosconfig goes to bootstrap.
func (s *nodesStep) applyURI(r *nodeRow, u fyne.URI) {
	go func() {
		data, err := readConfigURI(u)
		s.ui.do(func() {
			if err != nil {
				s.ui.showError("Cannot read "+u.Name(), err)
				return
			}
			if r == nil || isTalosconfig(data) {
				s.droppedTalosconfig(r, u, data)
				return
			}
			s.checkAndPrompt(r, u.Name(), localPath(u), data)
		})
	}()
}

// readConfigURI reads a dropped or chosen machine config (or talosconfig)
// through the one bounded read of a config (node.ReadConfigFile; a FIFO
// or a device is refused, never read endlessly); one that is no local
// file, at most as many bytes.
func readConfigURI(u fyne.URI) ([]byte, error) {
	if u.Scheme() == "file" {
		return node.ReadConfigFile(u.Path())
	}
	rc, err := storage.Reader(u)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return node.ReadConfig(rc, u.Name())
}

// applyJob is the apply job for row r (app/plan runs it; the GUI renders
// it): mode auto, the row's fallback choice as the declared role.
// localPath is the file behind a file:// URI ("" for any other).
func localPath(u fyne.URI) string {
	if u.Scheme() != "file" {
		return ""
	}
	return u.Path()
}

func (s *nodesStep) applyJob(r *nodeRow, name, path string, data []byte) plan.ApplyJob {
	return plan.ApplyJob{Endpoint: r.node.Addr, Name: name, ConfigPath: path, Config: data, Mode: node.ModeAuto,
		Check: s.nodeCheck(r), Probe: s.ui.deps.Probe, ApplyConfig: s.ui.deps.Apply,
		Expect: s.inventoryMemberAt(r.node)} // an inventory address: that node, not a swapped card
}

// checkAndPrompt checks the config against what the node booted (probed
// again, in the background), then shows the findings with the
// confirmation (UI goroutine).
func (s *nodesStep) checkAndPrompt(r *nodeRow, name, path string, data []byte) {
	job := s.applyJob(r, name, path, data)
	r.act, r.actName = rowChecking, name
	s.render(r)
	ctx := s.ui.ctx
	go func() {
		rv, err := plan.CheckApply(ctx, job)
		s.ui.do(func() {
			r.act = rowIdle
			if rv != nil && rv.Node != nil && rv.Node.Addr == r.node.Addr {
				r.node = *rv.Node // the row shows the node as it is now
			}
			s.render(r)
			s.refreshBootstrapButtons()
			var id *plan.IdentityError
			if errors.As(err, &id) {
				s.identityRefused(r, id)
				return
			}
			var role *plan.RoleMismatchError
			if err != nil {
				title := "Cannot check " + name
				switch {
				case errors.As(err, &role):
					title = name + " is a " + string(role.Type) + " config: not for " + role.Name
				case errors.Is(err, node.ErrInvalidConfig):
					title = name + " is not a valid machine config"
				}
				s.ui.showError(title, err)
				return
			}
			s.prompt(r, rv)
		})
	}()
}

// prompt shows the checked config: the verdict first (blocked, warned
// or ready, and what the node will do), then each error and warning with
// its fix; the notes (INFO: what this machinery cannot check, how the
// declared role relates to what the node booted), the config's summary
// and what the node does in full are folded under "Details". Errors
// block Apply until overridden.
func (s *nodesStep) prompt(r *nodeRow, rv *plan.ApplyReview) {
	name, cfg := rv.Job.Name, rv.Config
	p := &applyPrompt{findings: rv.Findings}
	items := container.NewVBox()
	var shown, notes []node.Finding
	for _, f := range rv.Findings {
		if f.Severity == node.SeverityInfo {
			notes = append(notes, f)
		} else {
			shown = append(shown, f)
		}
	}
	for _, w := range cfg.Warnings {
		shown = append(shown, node.Finding{Severity: node.SeverityWarning, Message: w})
	}
	slices.SortStableFunc(shown, func(a, b node.Finding) int { return severityRank(a.Severity) - severityRank(b.Severity) })
	next := rv.Expected()
	blocking := rv.Blocking()
	verdict := textView{Text: "The incident checks found nothing wrong. Once sent, " + next.Verdict + ".", Importance: widget.SuccessImportance}
	switch warned := len(shown) - blocking; {
	case blocking > 0:
		verdict = textView{Text: fmt.Sprintf("Not sent: %d error(s) below, each with its fix.", blocking), Importance: widget.DangerImportance}
	case warned > 0:
		verdict = textView{Text: fmt.Sprintf("The incident checks found nothing wrong; %d warning(s) below. Once sent, %s.", warned, next.Verdict)}
	}
	head := wrapLabel(verdict.Text)
	head.Importance, head.TextStyle = verdict.Importance, fyne.TextStyle{Bold: true}
	items.Add(head)
	for _, f := range shown {
		items.Add(findingView(f))
	}

	// Details: said once, folded.
	what := fmt.Sprintf("%s: %s config, %d document(s)", name, orUnknown(cfg.MachineType), len(cfg.Kinds))
	if cfg.InstallImage != "" {
		what += ", installs " + cfg.InstallImage
	}
	if cfg.InstallDisk != "" {
		what += " to " + cfg.InstallDisk
	}
	more := container.NewVBox(newBreakLabel(what)) // the installer reference breaks at "/" or ":" only
	if rv.DeclaredNote != "" {
		notes = append(notes, node.Finding{Severity: node.SeverityInfo, Message: rv.DeclaredNote})
	}
	if u := plan.UncheckedNote(cfg); u != "" { // one line, not the 11-24 kinds the node checks anyway
		notes = append(notes, node.Finding{Severity: node.SeverityInfo, Message: u})
	}
	for _, f := range notes {
		more.Add(findingView(f))
	}
	more.Add(wrapLabel(next.Node))
	items.Add(widget.NewAccordion(widget.NewAccordionItem("Details", more)))

	p.apply = primaryButton(s.ui, "Apply to "+r.node.Addr, theme.ConfirmIcon(), func() {
		s.send(r, rv, p.override != nil && p.override.Checked)
	})
	if blocking > 0 {
		p.apply.Disable()
		p.override = widget.NewCheck(fmt.Sprintf("Send anyway: I know about the %d error(s) above", blocking), func(on bool) {
			if on {
				p.apply.Enable()
			} else {
				p.apply.Disable()
			}
		})
		items.Add(p.override)
	}
	items.Add(wrapLabel("Machine configs hold the cluster's secrets: send them only to your own nodes."))
	s.shown = p
	p.modal = s.ui.showModal("Apply "+name+" to "+r.node.Addr+"?", container.NewVScroll(items), "Cancel", p.apply, fyne.NewSize(780, 560))
}

// severityRank orders findings: errors, warnings, the rest.
func severityRank(s node.Severity) int {
	switch s {
	case node.SeverityError:
		return 0
	case node.SeverityWarning:
		return 1
	}
	return 2
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// findingView shows one finding; the fix is a selectable field so commands
// such as `talosctl upgrade --image ...` can be copied.
func findingView(f node.Finding) fyne.CanvasObject {
	icon := theme.InfoIcon()
	imp := widget.MediumImportance
	switch f.Severity {
	case node.SeverityError:
		icon, imp = theme.ErrorIcon(), widget.DangerImportance
	case node.SeverityWarning:
		icon, imp = theme.WarningIcon(), widget.WarningImportance
	}
	msg := newBreakLabel(strings.ToUpper(string(f.Severity)) + ": " + f.Message)
	msg.Importance = imp
	box := container.NewVBox(msg)
	if f.Fix != "" {
		box.Add(fixBox(nil, f.Fix, 360)) // whole, scrolling only past 360 px; Copy takes the exact text
	}
	return container.NewBorder(nil, nil, container.NewVBox(widget.NewIcon(icon), layout.NewSpacer()), nil, box)
}

// send sends the checked config (background; force: the override tick)
// and shows the node's reply and what it does next.
func (s *nodesStep) send(r *nodeRow, rv *plan.ApplyReview, force bool) {
	name := rv.Job.Name
	r.act, r.actName = rowSending, name
	s.render(r)
	rv.Job.Event = func(ev plan.ApplyEvent) {
		if ev.Kind == plan.EventPhase && ev.Phase == plan.PhaseDryRun {
			s.ui.do(func() {
				if r.act == rowSending && r.actName == name { // phase texts after the outcome are dropped
					r.act = rowDryRun
					s.render(r)
				}
			})
		}
	}
	go func() {
		out, err := rv.Send(s.ui.ctx, force)
		s.ui.do(func() {
			s.applied(r, name, rv.Job.Config, out, err, rv.Job.DryRun)
			if err != nil {
				s.ui.showError("The node did not take "+name, err)
			}
		})
	}()
}

// applied records an apply's outcome on r (a drop, or Apply all) and
// renders what follows from it (UI goroutine).
func (s *nodesStep) applied(r *nodeRow, name string, data []byte, out *plan.ApplyOutcome, err error, dryRun bool) {
	r.act = rowIdle
	r.applyName, r.applyOut, r.applyErr = name, out, err
	if err != nil {
		r.applyOut = nil
		s.render(r)
		return
	}
	if !dryRun {
		r.applied = out.Config
		s.cluster.ObserveConfig(r.member, out.Config.Role(), data) // a control plane's: what the Kubernetes view says of a missing CNI
	}
	if out.Next.LeavesMaintenance && !dryRun {
		r.node.Maintenance = false
	}
	s.render(r)
	if !dryRun {
		s.inventoryApplied(r, name, out)
	}
	s.showScanSummary()
	if out.Next.Bootstrap {
		s.showBootstrap(r)
	}
	s.follow(r)
}

// showBootstrap shows the step after a control plane's config: etcd is
// bootstrapped once, on one control plane node, with the talosconfig that
// `talosctl gen config` wrote next to controlplane.yaml.
func (s *nodesStep) showBootstrap(r *nodeRow) {
	s.ensureBootstrapBox(r)
	if on := s.cluster.Bootstrapped; on == nil && s.bootRunning != r {
		r.bootNote.SetText("Next, once per cluster (on one control plane node only): press \"Bootstrap etcd…\" (or drop your talosconfig on this row); it waits for the node to come up with its config. Or in a terminal, from the folder with your talosconfig:")
		r.bootstrap.SetText(bootstrapCommand(r.node))
		r.bootstrap.Show()
	} else if on != nil && on != r.member {
		r.bootNote.SetText("etcd was bootstrapped on " + on.Endpoint.String() + " in this session: this control plane node joins that cluster, no bootstrap here.")
		r.bootstrap.Hide()
	}
	r.bootstrapBox.Show()
	s.relayout()
	s.refreshBootstrapButtons()
}

// bootstrapCommand is the talosctl command that bootstraps etcd on n.
func bootstrapCommand(n node.Node) string {
	ip := n.IP
	if !ip.IsValid() {
		return fmt.Sprintf("talosctl bootstrap --nodes %[1]s --endpoints %[1]s --talosconfig ./talosconfig", hostOf(n.Addr))
	}
	return fmt.Sprintf("talosctl bootstrap --nodes %[1]s --endpoints %[1]s --talosconfig ./talosconfig", ip)
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// applyDetails is what the row's Details say of an apply, each once: what
// the node answered, its warnings (a success with a warning is still a
// success: they are not the verdict's colour), what it does now in full
// (plan.AfterApply, the CLI's words too).
func applyDetails(out *plan.ApplyOutcome) string {
	res := out.Result
	t := "The node answered mode " + plan.ReplyModes(res)
	if res.ModeDetails != "" {
		t += ": " + strings.Join(strings.Fields(res.ModeDetails), " ")
	}
	t += "."
	for _, w := range res.Warnings {
		t += "\nThe node warns: " + w
	}
	t += "\n" + out.Next.Node
	if out.Next.Then != "" && !out.Next.Bootstrap { // the bootstrap step has its own words
		t += "\nNext: " + out.Next.Then + "."
	}
	return t
}
