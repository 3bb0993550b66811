package plan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
)

// ApplyJob is one machine config for one node in maintenance mode: the CLI
// and the GUI fill it in and call Apply (or CheckApply, then Send on the
// review, when the user confirms in between).
type ApplyJob struct {
	Endpoint string // node address as typed (host or host:port)
	Name     string // the config's file name, for messages
	// ConfigPath is where the config lies on disk ("" when it came from
	// elsewhere): the user's talos/installer-<role>.yaml is looked for
	// beside it, so installer fixes name the patch to change. With no
	// Config, CheckApply reads it (node.ReadConfigFile: bounded).
	ConfigPath string
	Config     []byte // the file, sent byte for byte
	Mode       string // talosctl's apply mode; "" = auto
	// DryRun asks only for the node's dry run: nothing is applied.
	DryRun bool
	// Force sends a config the incident checks block (CLI --force, the
	// GUI's override tick); Apply uses it, ApplyReview.Send takes its own.
	Force bool
	// Timeout bounds the probe and each call to the node (0: node's default).
	Timeout time.Duration
	// Check is how the config is checked: profiles, factory, cached
	// images, the declared role. Node and Endpoint are filled from the probe.
	Check NodeCheck

	// Probe and ApplyConfig reach the node (nil: node.Probe, node.Apply).
	Probe       func(ctx context.Context, addr string) (*node.Node, error)
	ApplyConfig func(ctx context.Context, opts node.ApplyOptions) (*node.ApplyResult, error)
	// Event gets what happens, in order, as it happens (may be nil).
	Event func(ApplyEvent)
	// Expect, when set, is the inventory node that should answer at
	// Endpoint: CheckApply refuses another one (its hostname or booted
	// profile differ: a swapped card) with an *IdentityError, which no
	// force overrides. The CLI's apply --inventory and the GUI's inventory
	// rows both set it.
	Expect *Member
}

// ApplyEventKind says what an ApplyEvent carries.
type ApplyEventKind string

const (
	// EventPhase: a step starts (Phase).
	EventPhase ApplyEventKind = "phase"
	// EventNote: something the user should know that is not a finding
	// (Severity info or warning, Text): kinds not checked locally, the
	// loader's warnings (Config: said of the file, once the node is found
	// waiting for it), the declared role against what the node booted,
	// try mode on Talos >= 1.13.
	EventNote ApplyEventKind = "note"
	// EventNode: the node as probed (Node, Match).
	EventNode ApplyEventKind = "node"
	// EventFinding: one incident-check finding (Finding).
	EventFinding ApplyEventKind = "finding"
	// EventVerdict: the node's dry run accepted the config (Result).
	EventVerdict ApplyEventKind = "verdict"
)

// ApplyPhase is a step of the apply sequence.
type ApplyPhase string

const (
	PhaseProbe  ApplyPhase = "probe"   // reading what the node booted
	PhaseCheck  ApplyPhase = "check"   // the config against it
	PhaseDryRun ApplyPhase = "dry-run" // the node validates it (Talos >= 1.13, or DryRun)
	PhaseSend   ApplyPhase = "send"    // the node applies it
)

// ApplyEvent is one thing that happened during an apply.
type ApplyEvent struct {
	Kind     ApplyEventKind
	Phase    ApplyPhase
	Severity node.Severity // EventNote
	Text     string        // EventNote
	// Config (EventNote): the note is the config file's, the same for
	// every node it goes to (ApplyAll says it once per run).
	Config  bool
	Node    *node.Node   // EventNode
	Match   Match        // EventNode: the profile or cached image it booted
	Finding node.Finding // EventFinding
	Result  *node.ApplyResult
}

// ApplyReview is a checked job, before anything is sent: what the node
// booted, the config and the findings. Send sends it.
type ApplyReview struct {
	Job      ApplyJob
	Endpoint string     // normalized host:port
	Node     *node.Node // as probed
	Match    Match      // what it booted, as a profile or cached image
	Config   *node.Config
	Findings []node.Finding
	// DeclaredNote says how the declared role relates to what the node
	// booted ("" when there is nothing to say).
	DeclaredNote string
	checked      bool // CheckApply got to the end: Send may send
}

// Blocking counts the findings that stop the send unless forced.
func (rv *ApplyReview) Blocking() int {
	n := 0
	for _, f := range rv.Findings {
		if f.Severity == node.SeverityError {
			n++
		}
	}
	return n
}

// Expected is what the node will do once it takes the config (mode auto
// unless the job says otherwise), for the confirmation.
func (rv *ApplyReview) Expected() NextStep {
	return nextStep(rv.Node, rv.Config.Role(), expectedReply(rv.Node, rv.Job.Mode), rv.Job.DryRun)
}

// ApplyOutcome is a finished apply: what the node did and does next.
type ApplyOutcome struct {
	*ApplyReview
	Result *node.ApplyResult // the node's answer (its dry run's with DryRun)
	Next   NextStep
}

// Errors of the apply sequence (besides node's and ctx's).
var (
	// ErrConfigured: the node already has a config; talosctl with its
	// talosconfig manages it. errors.Is(err, node.ErrRefused) too.
	ErrConfigured = errors.New("the node already has a config")
	// ErrNoFingerprint: the probe saw no certificate to pin, so the config
	// could reach another machine at the address. Nothing is sent.
	ErrNoFingerprint = errors.New("no certificate fingerprint to pin")
)

// ConfiguredError is a node that already has a config (exit 8 in the CLI).
type ConfiguredError struct{ Addr string }

func (e *ConfiguredError) Error() string {
	return e.Addr + " already has a config (it asks for a client certificate): change it with talosflash patch --node " + BootstrapHost(e.Addr) + " --talosconfig FILE --patch @FILE"
}

func (e *ConfiguredError) Is(target error) bool {
	return target == ErrConfigured || target == node.ErrRefused
}

// BlockedError is a config the incident checks block; nothing was sent.
// errors.Is(err, node.ErrInvalidConfig) (exit 7 in the CLI).
type BlockedError struct {
	Name     string
	Findings []node.Finding // the blocking ones
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("%s fails %d incident check(s); nothing was sent", e.Name, len(e.Findings))
}

func (e *BlockedError) Is(target error) bool { return target == node.ErrInvalidConfig }

// RoleMismatchError is a config whose machine.type is not the node's
// role, where the role is known: the inventory's role for the node, or
// the role of the built-in profile it booted when the config is also
// not one that image can run (it lacks the document an extension of the
// image waits for: a worker config on the control plane's Newt image).
// Nothing is sent and no force overrides it: applied, the config would
// make a control plane a worker, or a worker that reboots every
// BootTimeout. errors.Is(err, node.ErrInvalidConfig) (exit 7 in the CLI).
type RoleMismatchError struct {
	Name string    // the node
	Role node.Role // what it is
	From string    // how that is known
	// Config is the config's name, Type its role as Talos reads its
	// machine.type, Says how the config says it when that is another word
	// (node.Config.RoleNote).
	Config string
	Type   node.Role
	Says   string
	// Want is the config to apply instead ("" when not known).
	Want string
	// Otherwise is the fix when the node really is Type's machine (the
	// booted image's role only: "flash its card with the worker image").
	Otherwise string
}

func (e *RoleMismatchError) Error() string {
	says := e.Says
	if says == "" {
		says = "machine.type: " + string(e.Type)
	}
	return fmt.Sprintf("%s is a %s (%s), but %s is a %s config (%s): applied, it would make %s a %s. Nothing was sent; %s",
		e.Name, roleWords(e.Role), e.From, e.Config, e.Type, says, e.Name, roleWords(e.Type), e.Fix())
}

// Fix names the right file.
func (e *RoleMismatchError) Fix() string {
	fix := fmt.Sprintf("apply the %s.yaml that talosctl gen config wrote", e.Role)
	if e.Want != "" {
		fix = fmt.Sprintf("apply %s's own config, %s", e.Name, e.Want)
	}
	if e.Otherwise != "" {
		fix += "; " + e.Otherwise
	}
	return fix
}

func (e *RoleMismatchError) Is(target error) bool { return target == node.ErrInvalidConfig }

func roleWords(r node.Role) string {
	if r.IsControlPlane() {
		return "control plane"
	}
	return string(r)
}

// checkRole: the config's machine type is the node's role (see
// RoleMismatchError). The config's role is Talos' reading of machine.type
// (node.Config.Role: "join" and a left-out type are a worker); a config
// of no role (a patch alone) is the incident checks' finding, not this.
func checkRole(job ApplyJob, rv *ApplyReview) error {
	have := rv.Config.Role()
	if !have.Known() {
		return nil
	}
	e := &RoleMismatchError{Name: rv.Endpoint, Config: job.Name, Type: have, Says: rv.Config.RoleNote()}
	switch {
	case job.Expect != nil && job.Expect.Role.Known():
		e.Name, e.Role, e.From, e.Want = job.Expect.Name(), job.Expect.Role, "the inventory's role", job.Expect.Config
	case rv.Match.Role.Known() && rv.Match.Source == "profile":
		if p, err := factory.FindProfile(job.Check.Profiles, job.Check.Declared); err == nil && job.Check.Declared != "" && RoleOf(p).Same(have) {
			return nil // the user says the card is this role's: the findings decide
		}
		e.Role, e.From = rv.Match.Role, "it booted the "+rv.Match.Profile+" image"
		var docs []string
		if booted, err := factory.FindProfile(job.Check.Profiles, rv.Match.Profile); err == nil {
			for _, se := range node.MissingServiceConfigs(booted.Extensions, rv.Config) {
				docs = append(docs, se.Extension)
			}
		}
		if len(docs) == 0 {
			return nil // a worker may run the control plane's image, with what it needs
		}
		image := "an image without " + strings.Join(docs, ", ")
		if alt, err := factory.FindProfile(job.Check.Profiles, have.String()); err == nil && !slices.ContainsFunc(alt.Extensions, func(x string) bool { return slices.Contains(docs, x) }) {
			image = "the " + alt.Name + " image"
		}
		e.Otherwise = fmt.Sprintf("if it is a %s: flash its card with %s, or, to run %s on it, give %s the ExtensionServiceConfig the image waits for",
			roleWords(have), image, strings.Join(docs, ", "), job.Name)
	}
	if e.Role.Same(have) {
		return nil
	}
	return e
}

// InputError is a job the user must change (a bad address, mode or
// declared role): nothing was sent (exit 2 in the CLI).
type InputError struct {
	// Setting is the job's field at fault ("mode", "endpoint"); Value its
	// value when the message does not name it ("staged").
	Setting, Value string
	Err            error
}

func (e *InputError) Error() string {
	if e.Setting != "" && e.Value != "" {
		return e.Setting + " " + e.Value + ": " + e.Err.Error()
	}
	return e.Err.Error()
}
func (e *InputError) Unwrap() error { return e.Err }

// interrupted is ctx ending an apply to endpoint: a node.InterruptedError
// whose state says what was and was not sent; it unwraps to ctx's error
// (context.Canceled: exit 130 in the CLI).
func interrupted(ctx context.Context, endpoint, state string) error {
	return &node.InterruptedError{Op: "apply", Endpoint: endpoint, State: state, Err: ctx.Err()}
}

// Apply runs the whole sequence: CheckApply, then Send with job.Force.
// The outcome's review and findings are returned with a check failure too.
func Apply(ctx context.Context, job ApplyJob) (*ApplyOutcome, error) {
	rv, err := CheckApply(ctx, job)
	if err != nil {
		return outcomeOf(rv), err
	}
	return rv.Send(ctx, job.Force)
}

func outcomeOf(rv *ApplyReview) *ApplyOutcome {
	if rv == nil {
		return nil
	}
	return &ApplyOutcome{ApplyReview: rv}
}

// CheckMode parses an apply mode as every apply does ("" is auto): the
// one parser of it, for a front end that checks it before anything else
// (apply --inventory, before waiting for the first node).
func CheckMode(mode string) error {
	if _, err := node.ParseMode(mode); err != nil {
		return &InputError{Err: err}
	}
	return nil
}

// CheckInput parses what the user typed, the node's address and the mode,
// once: CheckApply starts with it, and a front end may call it first to
// refuse a typo before it reads anything. It normalizes both in the job.
func (job *ApplyJob) CheckInput() error {
	endpoint, err := node.NormalizeEndpoint(job.Endpoint)
	if err != nil {
		return &InputError{Setting: "endpoint", Err: err}
	}
	if err := CheckMode(job.Mode); err != nil {
		return err
	}
	job.Endpoint = endpoint
	job.Mode = strings.ToLower(strings.TrimSpace(job.Mode))
	if job.Mode == "" {
		job.Mode = node.ModeAuto
	}
	return nil
}

// CheckApply loads the config (reading ConfigPath when Config is not
// given), probes the node, refuses a configured one and runs the incident
// checks against what the node booted. Nothing is sent. The review is
// returned with the error once the config is loaded.
func CheckApply(ctx context.Context, job ApplyJob) (*ApplyReview, error) {
	if err := job.CheckInput(); err != nil {
		return nil, err
	}
	endpoint := job.Endpoint
	if job.Name == "" {
		job.Name = "the config"
	}
	if job.Config == nil && job.ConfigPath != "" {
		data, err := node.ReadConfigFile(job.ConfigPath)
		if err != nil {
			return nil, err
		}
		job.Config = data
	}
	cfg, err := node.LoadConfig(job.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", job.Name, err)
	}
	rv := &ApplyReview{Job: job, Endpoint: endpoint, Config: cfg}

	// What did the node boot? The checks use its answer, not the user's word.
	job.phase(PhaseProbe)
	probe := job.Probe
	if probe == nil {
		probe = node.Probe
	}
	pctx, cancel := job.callContext(ctx)
	n, err := probe(pctx, endpoint)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return rv, interrupted(ctx, endpoint, "while reading what it booted; nothing was sent")
		}
		return rv, err
	}
	rv.Node = n
	if n.Configured {
		return rv, &ConfiguredError{Addr: n.Addr} // the config is not for it: nothing to say about it
	}
	if u := UncheckedNote(cfg); u != "" { // one line, not the list of kinds: the node checks them anyway
		job.emit(ApplyEvent{Kind: EventNote, Severity: node.SeverityInfo, Text: u, Config: true})
	}
	for _, w := range cfg.Warnings {
		job.emit(ApplyEvent{Kind: EventNote, Severity: node.SeverityWarning, Text: w, Config: true})
	}
	nc := job.Check
	nc.Node, nc.Endpoint = n, endpoint
	rv.Match = nc.MatchBooted()
	job.emit(ApplyEvent{Kind: EventNode, Node: n, Match: rv.Match})

	job.phase(PhaseCheck)
	opts, err := nc.Options(ctx)
	if err != nil {
		return rv, &InputError{Err: err}
	}
	if rv.DeclaredNote = nc.DeclaredNote(); rv.DeclaredNote != "" {
		job.note(node.SeverityInfo, rv.DeclaredNote)
	}
	opts.InstallerPatch = node.FindInstallerPatch(job.ConfigPath, cfg.Role())
	rv.Findings = node.InspectWith(cfg, opts)
	for _, f := range rv.Findings {
		job.emit(ApplyEvent{Kind: EventFinding, Finding: f})
	}
	if job.Expect != nil {
		if err := checkIdentity(job.Expect, rv); err != nil {
			return rv, err // not checked: Send refuses it, forced or not
		}
	}
	if err := checkRole(job, rv); err != nil {
		return rv, err // the same: no force turns a control plane into a worker
	}
	rv.checked = true
	return rv, nil
}

// Send sends the checked config: refused while a finding blocks (unless
// force), in a mode the node's Talos does not take, or without a probed
// certificate to pin; then, on Talos >= 1.13, the node's dry run first
// (its verdict), then the apply pinned to the certificate the node showed
// when it was probed. With DryRun only the node's dry run is asked for.
func (rv *ApplyReview) Send(ctx context.Context, force bool) (*ApplyOutcome, error) {
	job, n := rv.Job, rv.Node
	out := &ApplyOutcome{ApplyReview: rv}
	if !rv.checked {
		return out, errors.New("apply: the config was not checked against the node (CheckApply failed); nothing was sent")
	}
	if b := rv.Blocking(); b > 0 && !force {
		var blocking []node.Finding
		for _, f := range rv.Findings {
			if f.Severity == node.SeverityError {
				blocking = append(blocking, f)
			}
		}
		return out, &BlockedError{Name: job.Name, Findings: blocking}
	}
	if modes := node.ModesFor(n.TalosVersion); !slices.Contains(modes, job.Mode) {
		return out, &InputError{Setting: "mode", Value: job.Mode, Err: errors.New("Talos <= 1.12 in maintenance mode only accepts " + strings.Join(modes, ", ") + " (node reports " + versionLabel(n) + ")")}
	}
	if n.CertFingerprint == "" {
		return out, fmt.Errorf("%w: %s showed no TLS certificate when it was probed, so %s could reach another machine at this address; nothing was sent (scan or add the node again)", ErrNoFingerprint, n.Addr, job.Name)
	}
	if job.Mode == node.ModeTry && n.Unified() && !job.DryRun {
		job.note(node.SeverityWarning, fmt.Sprintf("--mode try on Talos >= 1.13 applies the config without persisting it and rolls back after %s: the node will not keep it", node.DefaultTryTimeout))
	}
	send := job.ApplyConfig
	if send == nil {
		send = node.Apply
	}
	// The node we probed and checked, not another one at the same address.
	opts := node.ApplyOptions{Endpoint: rv.Endpoint, Config: job.Config, Mode: job.Mode, Timeout: job.Timeout, CertFingerprints: []string{n.CertFingerprint}}

	// A Ctrl-C that came before a call: that call is not made.
	notSent := func(before string) error {
		return interrupted(ctx, rv.Endpoint, "before "+before+": "+job.Name+" was not sent, nothing was applied: the node still waits for a config")
	}
	// Talos >= 1.13 validates in maintenance mode: ask it first and show its verdict.
	if n.Unified() && !job.DryRun {
		job.phase(PhaseDryRun)
		if ctx.Err() != nil {
			return out, notSent("the dry run")
		}
		check := opts
		check.DryRun = true
		res, err := send(ctx, check)
		if err != nil {
			if ctx.Err() != nil {
				return out, interrupted(ctx, rv.Endpoint, "during the node's dry run of "+job.Name+"; nothing was applied")
			}
			return out, fmt.Errorf("the node's dry run refused %s, nothing was applied: %w", job.Name, err)
		}
		job.emit(ApplyEvent{Kind: EventVerdict, Result: res})
	}
	if job.DryRun {
		job.phase(PhaseDryRun)
	} else {
		job.phase(PhaseSend)
	}
	opts.DryRun = job.DryRun
	if ctx.Err() != nil {
		return out, notSent("sending it")
	}
	res, err := send(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			if job.DryRun {
				return out, interrupted(ctx, rv.Endpoint, "during the node's dry run of "+job.Name+"; nothing was applied")
			}
			return out, interrupted(ctx, rv.Endpoint, "while waiting for the node's answer: "+job.Name+" was sent and the node may have applied it (scan for it again: a configured node asks for a client certificate)")
		}
		return out, err
	}
	out.Result = res
	out.Next = AfterApply(n, rv.Config.Role(), res)
	return out, nil
}

func (job *ApplyJob) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if job.Timeout > 0 {
		return context.WithTimeout(ctx, job.Timeout)
	}
	return context.WithCancel(ctx)
}

func (job *ApplyJob) emit(ev ApplyEvent) {
	if job.Event != nil {
		job.Event(ev)
	}
}

func (job *ApplyJob) phase(p ApplyPhase) { job.emit(ApplyEvent{Kind: EventPhase, Phase: p}) }

func (job *ApplyJob) note(sev node.Severity, text string) {
	job.emit(ApplyEvent{Kind: EventNote, Severity: sev, Text: text})
}

func versionLabel(n *node.Node) string {
	switch {
	case n.InvalidVersion != "":
		return "invalid (" + n.InvalidVersion + ")"
	case n.TalosVersion == "":
		return "-"
	}
	return n.TalosVersion
}

// NextStep is what the node does after an apply, and what the user does next.
type NextStep struct {
	// Verdict is what the node does now in a few words, for the one line
	// a front end leads with ("the node boots with this config now").
	Verdict string
	// Node is what the node does now, from its answer and its Talos
	// version, in full (the details under the verdict).
	Node string
	// LeavesMaintenance: the node boots with the config now (it no longer
	// waits for one).
	LeavesMaintenance bool
	// Bootstrap: a control plane config the node keeps: etcd must be
	// bootstrapped once per cluster, on one control plane node (Then says
	// so; the front end adds its command or button).
	Bootstrap bool
	// Then is the user's next step ("" none).
	Then string
}

// AfterApply says what the node does after its answer res to a config of
// machineType. Talos >= 1.13 in maintenance mode answers auto and reboot as
// no-reboot: it leaves maintenance mode and boots with the config
// (SetPersistedConfig + SetConfig); a card flashed with the raw image is
// installed already (its META partition), so nothing installs or reboots.
// Talos <= 1.12 answers no mode: the config goes to the boot sequence,
// which installs and reboots only a node that is not installed yet.
func AfterApply(n *node.Node, role node.Role, res *node.ApplyResult) NextStep {
	reply := ""
	if res != nil && len(res.Messages) > 0 {
		reply = res.Messages[0].Mode
	}
	return nextStep(n, role, reply, res != nil && res.DryRun)
}

// ReplyModes is the mode(s) the node says it used, truthfully: Talos <=
// 1.12 does not say.
func ReplyModes(res *node.ApplyResult) string {
	var modes []string
	for _, m := range res.Messages {
		if m.Mode == "" {
			modes = append(modes, "no mode (Talos <= 1.12 does not report it)")
		} else {
			modes = append(modes, m.Mode)
		}
	}
	if len(modes) == 0 {
		return "nothing"
	}
	return strings.Join(modes, ", ")
}

// expectedReply is the mode a node answers to an apply in mode.
func expectedReply(n *node.Node, mode string) string {
	if !n.Unified() {
		return ""
	}
	switch mode {
	case node.ModeTry, node.ModeStaged:
		return mode
	}
	return node.ModeNoReboot
}

func nextStep(n *node.Node, role node.Role, reply string, dryRun bool) NextStep {
	if dryRun {
		return NextStep{Verdict: "nothing applied (dry run): the node still waits for a config", Node: "Nothing was applied (dry run): the node still waits for a config."}
	}
	version := versionLabel(n)
	var s NextStep
	keeps := true
	switch reply {
	case node.ModeNoReboot:
		s.Verdict = "the node boots with it now, no reboot"
		s.Node = "The node leaves maintenance mode and boots with this config now, without a reboot (Talos " + version + " answers no-reboot in maintenance mode; a card flashed with the raw image is already installed)."
		s.LeavesMaintenance = true
	case node.ModeStaged:
		s.Verdict = "kept for the node's next boot (staged)"
		s.Node = "The node keeps this config for its next boot and stays in maintenance mode until it reboots (staged)."
	case node.ModeTry:
		s.Verdict = "the node runs it for " + node.DefaultTryTimeout.String() + " without keeping it (try)"
		s.Node = fmt.Sprintf("The node runs this config without keeping it: Talos reverts it after %s (try mode) and a reboot brings back maintenance mode.", node.DefaultTryTimeout)
		keeps = false
	case "":
		s.Verdict = "the node boots with it now"
		s.Node = "The node leaves maintenance mode and boots with this config (Talos " + version + " does not say how: booted from a card flashed with the raw image, which is installed already, it boots on without a reboot; booted from an installer medium it first installs Talos to machine.install.disk and reboots)."
		s.LeavesMaintenance = true
	default:
		s.Verdict = "the node answered mode " + reply
		s.Node = "The node answered mode " + reply + "."
	}
	if keeps && s.LeavesMaintenance {
		s.Node += " From then on it answers only talosctl with your talosconfig."
	}
	switch {
	case !keeps:
	case role == node.RoleControlPlane:
		s.Bootstrap = true
		s.Then = "once this node runs with its config, bootstrap etcd once per cluster, on one control plane node"
	case role == node.RoleInit:
		s.Then = "an init config starts etcd as the cluster's first member by itself: no bootstrap call"
	}
	return s
}

// UncheckedNote is cfg.Unchecked in one line ("" when nothing was left
// unchecked): how many documents this build's machinery is too old to
// check. Their list (11 to 24 Talos 1.14 kinds) is not said: the node
// validates them anyway, in its dry run before the apply.
func UncheckedNote(cfg *node.Config) string {
	if cfg == nil || len(cfg.Unchecked) == 0 {
		return ""
	}
	n := 0
	for _, u := range cfg.Unchecked {
		n += uncheckedDocs(u)
	}
	what := "some documents are"
	switch {
	case n == 1:
		what = "1 document is"
	case n > 1:
		what = fmt.Sprintf("%d documents are", n)
	}
	return what + " newer than Talos machinery " + node.MachineryVersion + ": not checked here; the node checks them in its dry run"
}

// uncheckedDocs counts the documents of one of node.Config's Unchecked
// lines ("document 5 (...)", "documents 2, 3, 4 (...)"; 0: not known).
func uncheckedDocs(u string) int {
	list, _, _ := strings.Cut(u, " (")
	switch {
	case strings.HasPrefix(list, "documents "):
		return strings.Count(list, ",") + 1
	case strings.HasPrefix(list, "document "):
		return 1
	}
	return 0
}

// BootstrapHost is the bare address of the node for a bootstrap command.
func BootstrapHost(endpoint string) string {
	if h, _, err := net.SplitHostPort(endpoint); err == nil {
		return h
	}
	return endpoint
}
