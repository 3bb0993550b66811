package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/node"
)

// The printers of apply's jobs (restic's ui/backup shape): each job's
// events go to one interface with a text and a JSON implementation,
// chosen once by --json; the command's code never asks which it is.

// applyPrinter shows `apply --node` (plan.Apply).
type applyPrinter interface {
	// Event is what the job reports as it goes (stderr in both).
	Event(ev plan.ApplyEvent)
	// Applied is the node's answer and what it does next.
	Applied(out *plan.ApplyOutcome) error
	// Failed is the command's failure (out: the findings, when the node
	// was checked); it returns the command's error.
	Failed(out *plan.ApplyOutcome, err error) error
}

func newApplyPrinter(f *applyFlags, env Env) applyPrinter {
	text := &applyText{env: env, file: f.file, dryRun: f.dryRun}
	if f.jsonOut {
		return &applyJSONPrinter{applyText: text}
	}
	return text
}

// applyText is apply's text printer: the result on stdout, the next step
// on stderr.
type applyText struct {
	env    Env
	file   string
	dryRun bool
}

func (p *applyText) Event(ev plan.ApplyEvent) { renderApplyEvent(p.env.Stderr, p.file, ev) }

// Applied leads with the verdict, one line: what happened and the next
// step; then the details, indented, each said once: the node's answer,
// its warnings (a success with a warning is still a success), what the
// node does now in full.
func (p *applyText) Applied(out *plan.ApplyOutcome) error {
	res, w := out.Result, p.env.Stdout
	fmt.Fprintln(w, applyVerdict(p.file, out, p.dryRun))
	answer := fmt.Sprintf("the node answered %s (mode %s requested)", plan.ReplyModes(res), res.Mode)
	details := strings.TrimSpace(res.ModeDetails)
	if details != "" && !strings.Contains(details, "\n") {
		answer, details = answer+": "+details, ""
	}
	fmt.Fprintln(w, "  "+answer)
	if details != "" { // the dry run's summary and its config diff, as the node wrote them
		fmt.Fprintln(w, details)
	}
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "  the node warns: %s\n", warn)
	}
	if !p.dryRun {
		fmt.Fprintln(w, "  "+out.Next.Node)
	}
	return nil
}

// applyVerdict is apply's one line: what happened to the node and what to
// do next.
func applyVerdict(file string, out *plan.ApplyOutcome, dryRun bool) string {
	res := out.Result
	if dryRun {
		return fmt.Sprintf("validated %s on %s: the node's dry run accepts it; nothing was applied", file, res.Endpoint)
	}
	line := fmt.Sprintf("applied %s to %s: %s", file, res.Endpoint, out.Next.Verdict)
	switch {
	case out.Next.Bootstrap:
		line += fmt.Sprintf("; next, once per cluster: `talosflash bootstrap --node %s --talosconfig ./talosconfig`", plan.BootstrapHost(res.Endpoint))
	case out.Next.Then != "":
		line += "; next: " + out.Next.Then
	}
	return line
}

func (p *applyText) Failed(_ *plan.ApplyOutcome, err error) error { return err }

// applyJSONPrinter is apply's JSON printer: one object on stdout, the
// answer or the error with the findings.
type applyJSONPrinter struct{ *applyText }

func (p *applyJSONPrinter) Applied(res *plan.ApplyOutcome) error {
	out := applyResultJSON(res.Result)
	out.Findings = findingsJSON(res.Findings)
	if !res.Result.DryRun {
		out.Next = nextJSON(res.Next)
	}
	return contract.WriteAnswer(p.env.Stdout, contract.TypeApply, out)
}

func (p *applyJSONPrinter) Failed(out *plan.ApplyOutcome, err error) error {
	var findings []node.Finding
	if out != nil && out.ApplyReview != nil {
		findings = out.Findings
	}
	// Scripts get one JSON object either way; the message also goes to stderr.
	_ = contract.WriteAnswer(p.env.Stdout, contract.TypeError, applyErrorJSON{Code: exitCode(err), Message: oneLine(err.Error()), Findings: findingsJSON(findings)})
	return reported(err)
}

func nextJSON(n plan.NextStep) *applyNextJSON {
	return &applyNextJSON{Node: n.Node, LeavesMaintenance: n.LeavesMaintenance, Bootstrap: n.Bootstrap, Then: n.Then}
}

// renderApplyEvent prints what the apply job reports (stderr).
func renderApplyEvent(w io.Writer, file string, ev plan.ApplyEvent) {
	switch ev.Kind {
	case plan.EventNote:
		word := "note"
		if ev.Severity == node.SeverityWarning {
			word = "warning"
		}
		fmt.Fprintf(w, "%s: %s\n", word, ev.Text)
	case plan.EventNode:
		fmt.Fprintf(w, "node %s: Talos %s, booted %s\n", ev.Node.Addr, talosLabel(ev.Node), describeBooted(ev.Node, ev.Match))
	case plan.EventFinding:
		fmt.Fprintf(w, "%s: %s\n", ev.Finding.Severity, ev.Finding.Message)
		if ev.Finding.Fix != "" {
			fmt.Fprintf(w, "  fix: %s\n", ev.Finding.Fix)
		}
	case plan.EventVerdict:
		fmt.Fprintf(w, "node's dry run: %s accepted\n", file)
	}
}

// applyAllPrinter shows `apply --inventory` (plan.ApplyAll): each node's
// turn and result, the follow, the bootstrap.
type applyAllPrinter interface {
	NodeStart(ev plan.AllEvent)
	Waiting(ev plan.AllEvent)
	Apply(ev plan.AllEvent)
	Result(ev plan.AllEvent)
	Follow(ev plan.AllEvent)
	Status(ev plan.AllEvent)
	Followed(ev plan.AllEvent)
	NextStep(ev plan.AllEvent)
	Bootstrap(ev plan.AllEvent)
	BootstrapWait(ev plan.AllEvent)
	Bootstrapped(ev plan.AllEvent)
	// Notes are the configs' notes, once per run.
	Notes(ev plan.AllEvent)
	KubeconfigNext()
	// Err is the first JSON line that could not be written (the job was
	// stopped there), nil when none.
	Err() error
}

// printAll hands a job's event to p.
func printAll(p applyAllPrinter, ev plan.AllEvent) {
	switch ev.Kind {
	case plan.AllNode:
		p.NodeStart(ev)
	case plan.AllWaiting:
		p.Waiting(ev)
	case plan.AllApply:
		p.Apply(ev)
	case plan.AllResult:
		p.Result(ev)
	case plan.AllFollow:
		p.Follow(ev)
	case plan.AllStatus:
		p.Status(ev)
	case plan.AllFollowed:
		p.Followed(ev)
	case plan.AllNextStep:
		p.NextStep(ev)
	case plan.AllBootstrap:
		p.Bootstrap(ev)
	case plan.AllBootstrapWait:
		p.BootstrapWait(ev)
	case plan.AllBootstrapped:
		p.Bootstrapped(ev)
	case plan.AllNotes:
		p.Notes(ev)
	}
}

// newApplyAllPrinter chooses the printer; stop ends the job when a JSON
// line cannot be written.
func newApplyAllPrinter(f *applyFlags, inf *applyInventoryFlags, env Env, stop context.CancelFunc) applyAllPrinter {
	text := &applyAllText{env: env, f: f, inf: inf}
	if f.jsonOut {
		return &applyAllJSON{applyAllText: text, out: contract.NewWriter(env.Stdout), stop: stop}
	}
	return text
}

// applyAllText is apply --inventory's text printer: each node's line and
// the follow's results on stdout, the rest on stderr.
type applyAllText struct {
	env Env
	f   *applyFlags
	inf *applyInventoryFlags
}

func (p *applyAllText) say(format string, args ...any) {
	fmt.Fprintf(p.env.Stderr, format+"\n", args...)
}

func (p *applyAllText) NodeStart(ev plan.AllEvent) {
	n := ev.Node
	p.say("%s · %s at %s, config %s", n.Hostname, n.ProfileName(), n.Endpoint.Host, n.Config)
}

func (p *applyAllText) Waiting(ev plan.AllEvent) { p.say("%s", ev.Text) }

func (p *applyAllText) Apply(ev plan.AllEvent) {
	renderApplyEvent(p.env.Stderr, ev.Node.Config, ev.Apply)
}

func (p *applyAllText) Result(ev plan.AllEvent) {
	fmt.Fprintln(p.env.Stdout, nodeLine(ev.Result, applyError(ev.Err, ""), p.f.dryRun))
	p.warnings(p.env.Stdout, ev)
}

// warnings are the node's own warnings, under its line: a detail of a
// success (apply --node's words), not a "warning:" that reads as a failure.
func (p *applyAllText) warnings(w io.Writer, ev plan.AllEvent) {
	for _, warn := range nodeWarnings(ev.Result) {
		fmt.Fprintf(w, "  %s: the node warns: %s\n", ev.Node.Hostname, warn)
	}
}

func (p *applyAllText) Follow(ev plan.AllEvent) {
	what := "following each node until it runs its config"
	if ev.AfterBootstrap {
		what = "following the control plane until it runs after the bootstrap"
	}
	p.say("%s (at most %s; Ctrl-C stops following, not the nodes)", what, plan.Minutes(ev.Wait))
}

func (p *applyAllText) Status(ev plan.AllEvent) { p.say("%s", followLine(ev.Status, time.Now())) }

func (p *applyAllText) Followed(ev plan.AllEvent) {
	fmt.Fprintln(p.env.Stdout, followResultLine(ev.Follow))
}

func (p *applyAllText) NextStep(ev plan.AllEvent) {
	cp := ev.Result
	tcPath := p.inf.tc.path
	if tcPath == "" {
		tcPath = "talos/talosconfig"
	}
	cmd := fmt.Sprintf("talosflash bootstrap --node %s --talosconfig %s", cp.Node.Endpoint.Host, devices.ShellJoin([]string{tcPath}))
	if cp.Configured {
		p.say("next: if etcd is not bootstrapped yet on %s: `%s`", cp.Node.Hostname, cmd)
	} else {
		p.say("next: bootstrap etcd once per cluster, on %s once it runs with its config: `%s` (or add --bootstrap --talosconfig FILE to this command)", cp.Node.Hostname, cmd)
	}
}

func (p *applyAllText) Bootstrap(ev plan.AllEvent) {
	p.say("%s: bootstrapping etcd (waits for the node to run with its config)", ev.Node.Hostname)
}

func (p *applyAllText) BootstrapWait(ev plan.AllEvent) {
	p.say("%s %s: %s", time.Now().Format("15:04:05"), ev.Node.Hostname, ev.Text)
}

func (p *applyAllText) Bootstrapped(ev plan.AllEvent) {
	if ev.Already {
		p.say("%s: etcd is bootstrapped already: nothing to do", ev.Node.Hostname)
		return
	}
	fmt.Fprintln(p.env.Stdout, bootstrappedLine(ev))
}

// Notes: each config's notes, naming the nodes it went to (stderr).
func (p *applyAllText) Notes(ev plan.AllEvent) {
	for _, g := range ev.Notes {
		for _, n := range g.Notes {
			word := "note"
			if n.Severity == node.SeverityWarning {
				word = "warning"
			}
			p.say("%s: %s (%s): %s", word, g.Config, strings.Join(g.Hostnames, ", "), n.Text)
		}
	}
}

func (p *applyAllText) KubeconfigNext() { kubeconfigNext(p.env.Stderr, p.inf) }

func (p *applyAllText) Err() error { return nil }

func bootstrappedLine(ev plan.AllEvent) string {
	return fmt.Sprintf("%s: bootstrapped etcd (Talos %s) at %s", ev.Node.Hostname, ev.Bootstrap.TalosVersion, ev.Node.Endpoint.Host)
}

func followResultLine(r plan.FollowResult) string {
	return fmt.Sprintf("%s: %s", r.Status.Target.Name(), r.Message)
}

// applyAllJSON is apply --inventory's JSON printer: a JSON line per node
// (apply_node), per followed change (node_status) and result (follow) and
// for the bootstrap on stdout; the human lines all on stderr.
type applyAllJSON struct {
	*applyAllText
	out  *contract.Writer
	stop context.CancelFunc

	mu  sync.Mutex
	err error
}

func (p *applyAllJSON) Result(ev plan.AllEvent) {
	err := applyError(ev.Err, "")
	p.say("%s", nodeLine(ev.Result, err, p.f.dryRun)) // for the human; scripts read the JSON line
	if jerr := contract.WriteAnswer(p.env.Stdout, contract.TypeApplyNode, inventoryNodeJSON(ev.Result, err, p.f.dryRun)); jerr != nil {
		p.failed(jerr)
	}
	p.warnings(p.env.Stderr, ev)
}

func (p *applyAllJSON) Status(ev plan.AllEvent) {
	now := time.Now()
	p.say("%s", followLine(ev.Status, now))
	_ = p.out.Answer(contract.TypeNodeStatus, nodeStatusJSON(ev.Status, now)) // write errors are dropped (Writer)
}

func (p *applyAllJSON) Followed(ev plan.AllEvent) {
	p.say("%s", followResultLine(ev.Follow))
	_ = p.out.Answer(contract.TypeFollow, followJSON(ev.Follow, ev.AfterBootstrap))
}

func (p *applyAllJSON) Bootstrapped(ev plan.AllEvent) {
	if ev.Already {
		p.applyAllText.Bootstrapped(ev)
		return
	}
	p.say("%s", bootstrappedLine(ev))
	res := ev.Bootstrap
	if err := contract.WriteAnswer(p.env.Stdout, contract.TypeBootstrap, map[string]any{
		"node": res.Endpoint, "talos_version": res.TalosVersion, "attempts": res.Attempts, "etcd_healthy": res.EtcdHealthy,
		"bootstrap_sent": res.Attempts > 0, "accepted": res.Accepted,
	}); err != nil {
		p.failed(err)
	}
}

// failed keeps the first write error and stops the job.
func (p *applyAllJSON) failed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
		p.stop()
	}
}

func (p *applyAllJSON) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
