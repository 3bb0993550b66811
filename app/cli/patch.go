package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/node"
)

func init() {
	commandHelp["patch"] = help{
		synopsis: "talosflash patch (--node IP | --inventory FILE [--hostname NAME]) --talosconfig FILE (--patch @FILE | --replace-document KIND/NAME FILE)... [flags]",
		about: "Change a running node's config as talosctl patch mc does: read its config\n" +
			"over mTLS, apply the patches (strategic merge or JSON patch, in order) with\n" +
			"Talos' configpatcher, show the diff (redacted: only public fields show\n" +
			"values) and every existing list the patch APPENDS to (Talos merges lists\n" +
			"by appending) with the form that replaces it; then the node's own dry run,\n" +
			"then the apply. A patch that appends is not sent without --append.\n" +
			"--replace-document KIND/NAME FILE swaps one whole document in one apply\n" +
			"(e.g. Newt's ExtensionServiceConfig: never a moment without it). A change\n" +
			"that leaves an extension the node runs without its ExtensionServiceConfig\n" +
			"is refused. With --inventory and no --hostname, every node, one at a time;\n" +
			"each must say it is the inventory's hostname (another node there is refused).",
		example: "talosflash patch --inventory talosflash.yaml --hostname cp-1 --talosconfig talos/talosconfig --patch @newt.yaml --dry-run\n" +
			"talosflash patch --node 192.168.1.20 --talosconfig talos/talosconfig --replace-document ExtensionServiceConfig/newt newt.yaml",
		order: []string{"node", "inventory", "hostname", "talosconfig", "patch", "replace-document", "append", "dry-run", "mode", "json"},
	}
	placeholders["patch"] = "@FILE"
	placeholders["replace-document"] = "KIND/NAME FILE" // two words (splitReplaceArgs); KIND/NAME=FILE works too
}

// replaceList collects --replace-document KIND/NAME=FILE (the CLI also
// takes KIND/NAME FILE: splitReplaceArgs joins them).
type replaceList []string

func (r *replaceList) String() string     { return strings.Join(*r, ",") }
func (r *replaceList) Set(v string) error { *r = append(*r, v); return nil }

// splitReplaceArgs turns "--replace-document KIND/NAME FILE" into
// "--replace-document=KIND/NAME=FILE" so the flag package takes it.
func splitReplaceArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if (a == "--replace-document" || a == "-replace-document") && i+2 < len(args) && !strings.Contains(args[i+1], "=") && !strings.HasPrefix(args[i+2], "-") {
			out = append(out, a+"="+args[i+1]+"="+args[i+2])
			i += 2
			continue
		}
		out = append(out, a)
	}
	return out
}

func runPatch(ctx context.Context, args []string, env Env) error {
	var (
		endpoint, inv, profiles, mode string
		hostnames                     nodeList
		patches                       nodeListRaw
		replaces                      replaceList
		port                          int
		tcf                           talosconfigFlags
		timeout                       time.Duration
		dryRun, allowAppend, jsonOut  bool
	)
	fs := newFlagSet("patch", env)
	fs.StringVar(&endpoint, "node", "", "the node's address (IP or IP:port)")
	fs.StringVar(&endpoint, "n", "", "shorthand for --node")
	fs.StringVar(&inv, "inventory", "", "cluster inventory (talosflash.yaml): patch its nodes (or --hostname's)")
	fs.Var(&hostnames, "hostname", "with --inventory: the node to patch (repeat, or separate with commas)")
	fs.StringVar(&profiles, "profiles", "", "custom profiles YAML (as the inventory uses)")
	fs.IntVar(&port, "port", node.DefaultPort, "the nodes' Talos API port (with --inventory)")
	tcf.register(fs)
	fs.Var(&patches, "patch", "a patch: @FILE, a file name, or inline YAML/JSON, as talosctl --patch (repeat: applied in order)")
	fs.Var(&replaces, "replace-document", "replace that whole document with FILE's in the same apply (repeat; also KIND/NAME=FILE)")
	fs.BoolVar(&allowAppend, "append", false, "send a patch that appends to existing lists (it is what you mean)")
	fs.BoolVar(&dryRun, "dry-run", false, "show the diff and the node's dry run; apply nothing")
	fs.StringVar(&mode, "mode", "auto", "apply mode: auto, no-reboot, staged or try")
	fs.DurationVar(&timeout, "timeout", node.DefaultApplyTimeout, "bound of each call to the node")
	fs.BoolVar(&jsonOut, "json", false, "print each node's patch as JSON on stdout (progress on stderr)")
	if err := parseFlags(fs, splitReplaceArgs(args)); err != nil {
		return err
	}
	switch {
	case endpoint == "" && inv == "":
		return usageErrorf("patch: give --node IP or --inventory FILE")
	case endpoint != "" && inv != "":
		return usageErrorf("patch: --node and --inventory exclude each other")
	case len(hostnames) > 0 && inv == "":
		return usageErrorf("patch: --hostname needs --inventory FILE")
	case len(patches) == 0 && len(replaces) == 0:
		return usageErrorf("patch: give --patch @FILE or --replace-document KIND/NAME FILE")
	case port <= 0 || port > 65535:
		return usageErrorf("patch: --port %d: want 1-65535", port)
	}
	if err := plan.CheckMode(mode); err != nil {
		return usageErrorf("patch: --mode: %v", err)
	}
	var data [][]byte
	for _, p := range patches {
		b, err := plan.ReadPatch(p)
		if err != nil {
			return withCode(contract.ExitUsage, fmt.Errorf("patch: --patch %s: %w", strings.TrimPrefix(p, "@"), err))
		}
		data = append(data, b)
	}
	var repl []node.Replacement
	given := replacedFiles{} // ExtensionServiceConfig name -> the file given for it
	for _, r := range replaces {
		ref, file, ok := strings.Cut(r, "=")
		kind, name, _ := strings.Cut(ref, "/")
		if !ok || kind == "" || file == "" {
			return usageErrorf("patch: --replace-document %q: want KIND/NAME FILE (e.g. ExtensionServiceConfig/newt newt.yaml)", r)
		}
		b, err := plan.ReadPatch("@" + file)
		if err != nil {
			return withCode(contract.ExitUsage, fmt.Errorf("patch: --replace-document %s: %w", ref, err))
		}
		repl = append(repl, node.Replacement{Kind: kind, Name: name, Document: b})
		if kind == "ExtensionServiceConfig" {
			given[name] = file
		}
	}
	tc, err := tcf.load("patch")
	if err != nil {
		return err
	}
	warnNotAdmin(env, tc)
	_, c, err := loadCluster(plan.Defaults{Inventory: inv, ProfilesFile: profiles}, port, endpoint)
	if err != nil {
		return err
	}
	targets, err := c.Select(hostnames) // an inventory's node must say it is that host
	if err != nil {
		return fmt.Errorf("patch: %w", err)
	}
	p := newPatchPrinter(jsonOut, dryRun, given, env)
	for _, t := range targets {
		job := plan.PatchJob{Node: t, Talosconfig: tc, Patches: data, Replace: repl, Mode: mode,
			DryRun: dryRun, AllowAppend: allowAppend, Wait: node.WaitOptions{CallTimeout: timeout, Timeout: timeout},
			Event: p.Event}
		res, err := plan.Patch(ctx, job)
		p.Patched(res, err)
		if err != nil {
			return waitExit(ctx, given.refusal(err))
		}
	}
	return nil
}

// patchPrinter shows `patch` (plan.Patch), one node after the other.
type patchPrinter interface {
	// Event is what the job reports as it goes: the read, the diff, the
	// appends, the findings, the node's dry run.
	Event(ev plan.PatchEvent)
	// Patched is one node's outcome (res nil: nothing was read).
	Patched(res *plan.PatchOutcome, err error)
}

func newPatchPrinter(jsonOut, dryRun bool, given replacedFiles, env Env) patchPrinter {
	if jsonOut {
		return patchJSONPrinter{patchText{w: env.Stderr, dryRun: dryRun, given: given}, env.Stdout}
	}
	return patchText{w: env.Stdout, dryRun: dryRun, given: given}
}

// patchText is patch's text printer: everything on stdout.
type patchText struct {
	w      io.Writer
	dryRun bool
	given  replacedFiles
}

func (p patchText) Event(ev plan.PatchEvent) { printPatchEvent(p.w, ev, p.given) }

// replacedFiles are the ExtensionServiceConfig documents given with
// --replace-document: their name, and the file each came from.
type replacedFiles map[string]string

// refuses: the finding refuses the change (plan.Patch's ObligationError:
// an extension the node runs left without its config, or cut of what it
// needs), so it is said as an error, whatever its severity on a first
// apply.
func refuses(f *node.Finding) bool {
	return f.Code == node.CodeExtensionConfigMissing || f.Code == node.CodeExtensionConfigIncomplete
}

// fileFor is the file given for the document f names ("" none).
func (g replacedFiles) fileFor(f *node.Finding) string {
	for name, file := range g {
		if strings.Contains(f.Message, fmt.Sprintf("%q", name)) {
			return file
		}
	}
	return ""
}

// fixFor is f's fix as this command's user can act on it: a document
// given with --replace-document is completed in its file (the finding's
// own fix names --replace-document, which was just used).
func (g replacedFiles) fixFor(f *node.Finding) string {
	if file := g.fileFor(f); file != "" && refuses(f) {
		return "complete " + file + " (it replaces the whole document: every variable the extension needs) and run the same command again"
	}
	return f.Fix
}

// refusal is err in the words of what was given: plan's refusal of a
// change that leaves an extension without its config ends by suggesting
// --replace-document, which the user gave; its file is what to fix.
func (g replacedFiles) refusal(err error) error {
	var ob *plan.ObligationError
	if !errors.As(err, &ob) {
		return err
	}
	var what, files []string
	for i := range ob.Findings {
		what = append(what, ob.Findings[i].Message)
		if file := g.fileFor(&ob.Findings[i]); file != "" && !slices.Contains(files, file) {
			files = append(files, file)
		}
	}
	if len(files) == 0 {
		return err
	}
	return &replaceRefusedError{ObligationError: ob, msg: fmt.Sprintf("%s: refused, nothing was sent: %s; complete %s (it replaces the whole document) and run the same command again",
		ob.Name, strings.Join(what, "; "), strings.Join(files, " and "))}
}

// replaceRefusedError is plan's ObligationError (exit 7) in other words.
type replaceRefusedError struct {
	*plan.ObligationError
	msg string
}

func (e *replaceRefusedError) Error() string { return e.msg }
func (e *replaceRefusedError) Unwrap() error { return e.ObligationError }

func (p patchText) Patched(res *plan.PatchOutcome, err error) {
	if res != nil && err == nil {
		printPatchOutcome(p.w, res, p.dryRun)
	}
}

// patchJSONPrinter is patch's JSON printer: a patch line per node on
// stdout (also when it was refused), the text on stderr.
type patchJSONPrinter struct {
	patchText
	out io.Writer
}

func (p patchJSONPrinter) Patched(res *plan.PatchOutcome, err error) {
	if res != nil {
		_ = contract.WriteAnswer(p.out, contract.TypePatch, patchJSON(res, p.dryRun, err))
	}
	p.patchText.Patched(res, err)
}

// nodeListRaw collects repeated values as given (a patch may hold commas).
type nodeListRaw []string

func (n *nodeListRaw) String() string     { return strings.Join(*n, ",") }
func (n *nodeListRaw) Set(v string) error { *n = append(*n, v); return nil }

func printPatchEvent(w io.Writer, ev plan.PatchEvent, given replacedFiles) {
	switch ev.Kind {
	case plan.PatchEventDiff:
		fmt.Fprintf(w, "diff (values redacted but public fields):\n%s\n", indent(ev.Text, "  "))
	case plan.PatchEventAppend:
		fmt.Fprintf(w, "warning: %s\n%s", plan.AppendSummary(*ev.Append), indent(ev.Append.Replace, "  "))
	case plan.PatchEventFinding:
		sev := string(ev.Finding.Severity)
		if refuses(ev.Finding) {
			sev = string(node.SeverityError)
		}
		fmt.Fprintf(w, "%s: %s\n", sev, ev.Finding.Message)
		if fix := given.fixFor(ev.Finding); fix != "" {
			fmt.Fprintf(w, "  fix: %s\n", fix)
		}
	case plan.PatchEventVerdict:
		fmt.Fprintf(w, "the node's dry run accepts it:\n%s\n", indent(ev.Result.ModeDetails, "  "))
	case plan.PatchEventPhase:
		if ev.Phase == plan.PatchPhaseRead {
			fmt.Fprintln(w, "reading the node's config (mTLS)")
		}
	}
}

func printPatchOutcome(w io.Writer, res *plan.PatchOutcome, dryRun bool) {
	switch {
	case res.NoChange:
		fmt.Fprintf(w, "%s: no change: the patched config is the node's; nothing was sent\n", res.Name)
	case dryRun:
		fmt.Fprintf(w, "%s: dry run: nothing was applied\n", res.Name)
	case res.Result != nil:
		fmt.Fprintf(w, "%s: applied (the node answered %s): %s\n", res.Name, plan.ReplyModes(res.Result), oneLine(res.Result.ModeDetails))
	}
}

func indent(s, pad string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad) + "\n"
}

type appendJSON struct {
	Document string `json:"document"`
	Path     string `json:"path"`
	Before   int    `json:"before"`
	After    int    `json:"after"`
	Replace  string `json:"replace"`
}

type patchAnswer struct {
	Endpoint     string        `json:"endpoint"`
	Hostname     string        `json:"hostname,omitempty"`
	TalosVersion string        `json:"talos_version"`
	Changed      bool          `json:"changed"`
	Diff         string        `json:"diff"`
	Appends      []appendJSON  `json:"appends"`
	Findings     []findingJSON `json:"findings"`
	DryRun       bool          `json:"dry_run"`
	Verdict      string        `json:"verdict,omitempty"`
	Applied      bool          `json:"applied"`
	Mode         string        `json:"mode,omitempty"`
	ModeDetails  string        `json:"mode_details,omitempty"`
	Refused      string        `json:"refused,omitempty"`
}

func patchJSON(res *plan.PatchOutcome, dryRun bool, err error) patchAnswer {
	a := patchAnswer{Endpoint: res.Endpoint, TalosVersion: res.Version, DryRun: dryRun, Appends: []appendJSON{}, Findings: []findingJSON{}}
	if res.Name != res.Endpoint {
		a.Hostname = res.Name
	}
	if p := res.Patched; p != nil {
		a.Changed, a.Diff = p.Changed, p.Diff
		for _, ap := range p.Appends {
			a.Appends = append(a.Appends, appendJSON{Document: ap.Document(), Path: ap.Path, Before: ap.Before, After: ap.After, Replace: ap.Replace})
		}
	}
	for _, f := range res.Findings {
		a.Findings = append(a.Findings, findingJSON{string(f.Severity), f.Code, f.Message, f.Fix})
	}
	if res.Verdict != nil {
		a.Verdict = res.Verdict.ModeDetails
	}
	if r := res.Result; r != nil {
		a.Applied, a.ModeDetails = true, r.ModeDetails
		if len(r.Messages) > 0 {
			a.Mode = r.Messages[0].Mode
		}
	}
	var ob *plan.ObligationError
	var ap *plan.AppendError
	switch {
	case errors.As(err, &ob):
		a.Refused = "extension-config-missing"
	case errors.As(err, &ap):
		a.Refused = "appends"
	}
	return a
}
