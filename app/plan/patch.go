package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/talosflash/talosflash/node"
)

// PatchJob is a patch of a configured node's config (talosflash patch):
// read the node's config over mTLS, patch it as talosctl patch mc does
// (node.PatchConfig), show the redacted diff and every list the patch
// grows by appending, refuse a change that leaves an extension the node
// runs without its ExtensionServiceConfig, then the node's own dry run,
// then (unless DryRun) the apply.
type PatchJob struct {
	// Node is the member patched: when it has a hostname (an inventory's),
	// the node at its endpoint must say it is that host (node.CheckHost),
	// else nothing is patched or sent.
	Node        *Member
	Talosconfig *node.Talosconfig
	Patches     [][]byte
	Replace     []node.Replacement
	Mode        string // apply mode; "" auto (a configured 1.14 node answers no-reboot)
	DryRun      bool   // the node's dry run only: nothing is applied
	// AllowAppend sends a patch that grows existing lists (the user means
	// it); without it such a patch is refused with an *AppendError.
	AllowAppend bool
	Wait        node.WaitOptions
	// Event gets what happens, in order (may be nil).
	Event func(PatchEvent)
}

// PatchEvent kinds.
const (
	PatchEventPhase   = "phase"   // Phase starts
	PatchEventDiff    = "diff"    // Text: the redacted diff
	PatchEventAppend  = "append"  // Append: a list grown by appending
	PatchEventFinding = "finding" // Finding: what the patched config does on this node
	PatchEventVerdict = "verdict" // Result: the node's dry run
)

// Patch phases.
const (
	PatchPhaseRead   = "read"    // the node's config and what it booted
	PatchPhasePatch  = "patch"   // the patch applied locally
	PatchPhaseDryRun = "dry-run" // the node's dry run
	PatchPhaseSend   = "send"    // the apply
)

// PatchEvent is one thing that happened during a patch.
type PatchEvent struct {
	Kind    string
	Phase   string
	Text    string
	Append  *node.ListAppend
	Finding *node.Finding
	Result  *node.ApplyResult
}

// PatchOutcome is a finished (or refused) patch.
type PatchOutcome struct {
	Endpoint string
	Name     string
	Version  string // the node's Talos
	Patched  *node.Patched
	Findings []node.Finding
	Verdict  *node.ApplyResult // the node's dry run
	Result   *node.ApplyResult // the apply's answer (nil: not applied)
	// NoChange: the patched config is the node's: nothing was sent.
	NoChange bool
}

// ObligationError is a change that would leave an extension the node runs
// without the ExtensionServiceConfig it waits for: at its next restart
// (the next reboot at the latest) it waits, the node stays booting and
// reboots every BootTimeout. Nothing was sent; no force overrides it.
// errors.Is(err, node.ErrInvalidConfig) (exit 7).
type ObligationError struct {
	Name     string
	Findings []node.Finding
}

func (e *ObligationError) Error() string {
	var what []string
	for _, f := range e.Findings {
		what = append(what, f.Message)
	}
	return fmt.Sprintf("%s: refused, nothing was sent: %s. Put the replacement document in the same change: talosflash patch --replace-document ExtensionServiceConfig/NAME FILE (one apply, no moment without it)",
		e.Name, strings.Join(what, "; "))
}

func (e *ObligationError) Is(target error) bool { return target == node.ErrInvalidConfig }

// AppendError is a patch that grows existing lists, sent without
// AllowAppend: nothing was sent. errors.Is(err, node.ErrInvalidConfig).
type AppendError struct {
	Name    string
	Appends []node.ListAppend
}

func (e *AppendError) Error() string {
	var what []string
	for _, a := range e.Appends {
		what = append(what, a.Document()+" "+a.Path)
	}
	return fmt.Sprintf("%s: not sent: the patch appends to %s (see the replace form above; --append if appending is what you mean)", e.Name, strings.Join(what, ", "))
}

func (e *AppendError) Is(target error) bool { return target == node.ErrInvalidConfig }

// Patch runs the job (see PatchJob).
func Patch(ctx context.Context, job PatchJob) (*PatchOutcome, error) {
	emit := func(ev PatchEvent) {
		if job.Event != nil {
			job.Event(ev)
		}
	}
	phase := func(p string) { emit(PatchEvent{Kind: PatchEventPhase, Phase: p}) }
	if len(job.Patches) == 0 && len(job.Replace) == 0 {
		return nil, &InputError{Err: errors.New("patch: nothing to change (give --patch @FILE or --replace-document KIND/NAME FILE)")}
	}
	endpoint := job.Node.Endpoint.String()
	out := &PatchOutcome{Endpoint: endpoint, Name: job.Node.Name()}
	if job.Node.Hostname == "" {
		out.Name = endpoint
	}
	phase(PatchPhaseRead)
	run, err := node.ReadRunning(ctx, endpoint, job.Talosconfig, job.Wait)
	if err != nil {
		return out, err
	}
	out.Version = run.Version
	if job.Node.Hostname != "" {
		if err := node.CheckHost(endpoint, job.Node.Hostname, run.Hostname, run.Domainname); err != nil {
			return out, err
		}
	}
	phase(PatchPhasePatch)
	p, err := node.PatchConfig(run.Config, job.Patches, job.Replace)
	if err != nil {
		return out, err
	}
	out.Patched = p
	emit(PatchEvent{Kind: PatchEventDiff, Text: p.Diff})
	for i := range p.Appends {
		emit(PatchEvent{Kind: PatchEventAppend, Append: &p.Appends[i]})
	}
	if !p.Changed {
		out.NoChange = true
		return out, nil
	}

	// Never a window without an obligation: what the node runs keeps its
	// ExtensionServiceConfig, or the change holds its replacement.
	before, err := node.LoadConfig(run.Config)
	if err != nil {
		return out, fmt.Errorf("the node's config: %w", err)
	}
	after, err := node.LoadConfig(p.Config)
	if err != nil {
		return out, fmt.Errorf("the patched config: %w", err)
	}
	opts := node.InspectOptions{Booted: run.Booted, TalosVersion: run.Version, Node: endpoint}
	was := map[string]bool{}
	for _, f := range node.InspectWith(before, opts) {
		was[f.Code+"\x00"+f.Message] = true
	}
	var lost []node.Finding
	for _, f := range node.InspectWith(after, opts) {
		// Not this change's doing, or a note of no consequence; a document
		// this change gives an extension the image lacks is said (it does
		// nothing there, and may carry the extension's secrets).
		if was[f.Code+"\x00"+f.Message] || f.Severity == node.SeverityInfo && f.Code != node.CodeExtensionConfigUnused {
			continue
		}
		out.Findings = append(out.Findings, f)
		emit(PatchEvent{Kind: PatchEventFinding, Finding: &out.Findings[len(out.Findings)-1]})
		// The document gone, or cut of what its extension needs: both
		// are its delete.
		if f.Code == node.CodeExtensionConfigMissing || f.Code == node.CodeExtensionConfigIncomplete {
			lost = append(lost, f)
		}
	}
	if len(lost) > 0 {
		return out, &ObligationError{Name: out.Name, Findings: lost}
	}

	if len(p.Appends) > 0 && !job.AllowAppend && !job.DryRun {
		return out, &AppendError{Name: out.Name, Appends: p.Appends}
	}

	send := node.ApplyOptions{Endpoint: endpoint, Config: p.Config, Mode: job.Mode, Talosconfig: job.Talosconfig, Timeout: job.Wait.Timeout}
	phase(PatchPhaseDryRun)
	check := send
	check.DryRun = true
	out.Verdict, err = node.Apply(ctx, check)
	if err != nil {
		if ctx.Err() != nil {
			return out, &node.InterruptedError{Op: "patch", Endpoint: endpoint, State: "during the node's dry run; nothing was applied", Err: ctx.Err()}
		}
		return out, fmt.Errorf("the node's dry run refused the patched config, nothing was applied: %w", err)
	}
	emit(PatchEvent{Kind: PatchEventVerdict, Result: out.Verdict})
	if job.DryRun {
		return out, nil
	}
	phase(PatchPhaseSend)
	if ctx.Err() != nil {
		return out, &node.InterruptedError{Op: "patch", Endpoint: endpoint, State: "before the apply: nothing was applied", Err: ctx.Err()}
	}
	out.Result, err = node.Apply(ctx, send)
	if err != nil {
		if ctx.Err() != nil {
			return out, &node.InterruptedError{Op: "patch", Endpoint: endpoint, State: "while waiting for the node's answer: the config was sent and may be applied (talosflash status)", Err: ctx.Err()}
		}
		return out, err
	}
	return out, nil
}

// AppendSummary is one line per list grown by appending.
func AppendSummary(a node.ListAppend) string {
	return fmt.Sprintf("%s: %s grows from %d to %d items: a patch APPENDS to an existing list (Talos' strategic merge), it does not replace it", a.Document(), a.Path, a.Before, a.After)
}

// ReadPatch reads a --patch value as talosctl's LoadPatches takes it:
// @FILE, a bare file name (no space or newline, not starting with [ or {),
// else the patch itself. A file is read as a machine config is: a regular
// file, bounded (node.ReadConfigFile).
func ReadPatch(v string) ([]byte, error) {
	file, isFile := strings.CutPrefix(v, "@")
	if !isFile && !strings.ContainsAny(v, "\n ") && !strings.HasPrefix(v, "[") && !strings.HasPrefix(v, "{") {
		file, isFile = v, true
	}
	if !isFile {
		return []byte(v), nil
	}
	return node.ReadConfigFile(file)
}
