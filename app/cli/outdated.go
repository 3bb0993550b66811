package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
)

func init() {
	commandHelp["outdated"] = help{
		synopsis: "talosflash outdated [DIR] [--write] [--to patch|latest|VERSION] [flags]",
		about: "Find the Image Factory installer references in DIR (default .):\n" +
			"talos/installer-*.yaml and any YAML, JSON or Markdown file. Compare each\n" +
			"version with the factory's releases and each extension of its schematic\n" +
			"with the factory's list for the newer version. --write rewrites the\n" +
			"references in place, every other byte (comments included) unchanged, so\n" +
			"the GitOps repo gets a clean diff. A version that drops an extension is\n" +
			"never written, nor one whose extensions could not be compared. --write is\n" +
			"all or nothing, keeps owner, group and mode, and refuses read-only and\n" +
			"hard-linked files. Stock installers (ghcr.io/siderolabs/installer) are flagged.",
		example: "talosflash outdated talos/\ntalosflash outdated . --write\ntalosflash outdated --to latest --json",
		order:   []string{"write", "to", "factory", "json"},
	}
	placeholders["to"] = "VERSION"
}

func runOutdated(ctx context.Context, args []string, env Env) error {
	var (
		write, jsonOut bool
		to, factoryURL string
	)
	fs := newFlagSet("outdated", env)
	fs.BoolVar(&write, "write", false, "rewrite the files in place to the target version")
	fs.StringVar(&to, "to", "patch", "target: patch (newest of the same minor), latest, or a version such as v1.15.0")
	fs.StringVar(&factoryURL, "factory", factory.DefaultBaseURL, "Image Factory to compare with")
	fs.BoolVar(&jsonOut, "json", false, "print the findings as JSON")
	// DIR may come before or after the flags.
	dir := "."
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return parseFlags(fs, args)
	}
	if fs.NArg() > 0 {
		if dir != "." {
			return usageErrorf("outdated: one directory at most")
		}
		dir = fs.Arg(0)
		if err := parseFlags(fs, fs.Args()[1:]); err != nil {
			return err
		}
	}
	if err := checkFlags(fs); err != nil {
		return err
	}
	if to != "patch" && to != "latest" && !strings.HasPrefix(to, "v") {
		return usageErrorf("outdated: --to %q: want patch, latest or a version such as v1.15.0", to)
	}
	uses, generic, err := factory.FindInstallerRefs(dir)
	if err != nil {
		return withCode(contract.ExitUsage, err)
	}
	for _, g := range generic {
		fmt.Fprintf(env.Stderr, "warning: %s:%d uses the stock installer %s: no Raspberry Pi overlay, no extensions; use the factory installer of the node's schematic\n", g.File, g.Line, g.Raw)
	}
	p := newOutdatedPrinter(jsonOut, env)
	if len(uses) == 0 {
		return p.Answer(contract.TypeOutdated, []outdatedJSON{}, func(w io.Writer) error {
			fmt.Fprintf(w, "no Image Factory installer references under %s\n", dir)
			return nil
		})
	}
	settings, err := loadSettings(plan.Defaults{FactoryURL: factoryURL})
	if err != nil {
		return err
	}
	fc := settings.Factory
	ups, err := fc.CheckUpdates(ctx, uses, factory.Policy(to))
	if err != nil {
		return err
	}
	if err := reportVersions(ctx, env, dir, ups, fc, p); err != nil { // outdated_versions.go
		return err
	}
	var (
		results  []factory.FileResult
		writeErr error
		changed  []string
	)
	if write {
		// All or nothing: on an error every file is as it was (the error says
		// otherwise), and the findings and each file's outcome still print.
		results, writeErr = factory.WriteUpdates(ups)
		for _, r := range results {
			if r.Outcome == factory.OutcomeWritten {
				changed = append(changed, r.File)
			}
		}
	}
	if err := p.Answer(contract.TypeOutdated, outdatedToJSON(ups, results), func(w io.Writer) error {
		printOutdated(w, ups, results, writeErr, write, changed)
		return nil
	}); err != nil {
		return err
	}
	if err := outdatedWriteErr(writeErr); err != nil || !write {
		return err
	}
	// A blocked reference is not written: --write did not do what it was
	// asked (exit 7, classify.go), whatever else it wrote.
	if err := factory.Blocked(ups); err != nil {
		return fmt.Errorf("outdated --write: %w", err)
	}
	return nil
}

// printOutdated is `outdated` as text: each reference, then what was or
// can be written (each file's outcome when the write failed).
func printOutdated(w io.Writer, ups []factory.Update, results []factory.FileResult, writeErr error, write bool, changed []string) {
	pending := 0
	for _, u := range ups {
		describeUpdate(w, u)
		if u.Target != "" && u.Blocked == "" {
			pending++
		}
	}
	if writeErr != nil {
		for _, r := range results {
			if r.Outcome != factory.OutcomeUnchanged {
				fmt.Fprintf(w, "%s: %s (%s)\n", r.File, r.Outcome, r.Reason)
			}
		}
		return
	}
	blocked := ""
	if b := new(factory.BlockedError); errors.As(factory.Blocked(ups), &b) {
		blocked = fmt.Sprintf("%d reference(s) blocked (BLOCKED above): not written", len(b.Updates))
	}
	switch {
	case write && len(changed) > 0 && blocked != "":
		fmt.Fprintf(w, "updated %d file(s): %s; %s\n", len(changed), strings.Join(changed, ", "), blocked)
	case write && len(changed) > 0:
		fmt.Fprintf(w, "updated %d file(s): %s\n", len(changed), strings.Join(changed, ", "))
	case write && blocked != "":
		fmt.Fprintf(w, "nothing written: %s\n", blocked)
	case write:
		fmt.Fprintln(w, "nothing to update")
	case pending > 0:
		fmt.Fprintf(w, "%d reference(s) can be updated: run with --write\n", pending)
	default:
		fmt.Fprintln(w, "everything is up to date")
	}
}

func describeUpdate(w io.Writer, u factory.Update) {
	ref := u.Use.Ref
	name := ref.Repository + "/" + ref.SchematicID[:12] + "…:" + ref.Version
	where := fmt.Sprintf("%s:%d", filepath.Clean(u.Use.File), u.Use.Line)
	newest := ""
	if u.Latest != "" && u.Latest != u.Target {
		newest = " (latest " + u.Latest + ")"
	}
	switch {
	case u.Target == "" && u.Latest != "":
		fmt.Fprintf(w, "%s  %s: newest of its minor; latest %s (--to latest)\n", where, name, u.Latest)
	case u.Target == "":
		fmt.Fprintf(w, "%s  %s: up to date\n", where, name)
	default:
		fmt.Fprintf(w, "%s  %s -> %s%s\n", where, name, u.Target, newest)
	}
	for _, e := range u.Extensions {
		switch {
		case e.Missing:
			fmt.Fprintf(w, "    %s %s -> MISSING in %s\n", e.Name, dash(e.From), u.Target)
		case e.From != e.To:
			fmt.Fprintf(w, "    %s %s -> %s\n", e.Name, dash(e.From), dash(e.To))
		default:
			fmt.Fprintf(w, "    %s %s (unchanged)\n", e.Name, dash(e.To))
		}
	}
	if u.Blocked != "" {
		fmt.Fprintf(w, "    BLOCKED: %s\n", u.Blocked)
	}
	if u.Note != "" {
		fmt.Fprintf(w, "    note: %s\n", u.Note)
	}
}

type outdatedJSON struct {
	File       string          `json:"file"`
	Line       int             `json:"line"`
	Reference  string          `json:"reference"`
	Current    string          `json:"current"`
	Patch      string          `json:"patch,omitempty"`
	Latest     string          `json:"latest,omitempty"`
	Target     string          `json:"target,omitempty"`
	New        string          `json:"new_reference,omitempty"`
	Extensions []extensionJSON `json:"extensions"`
	Blocked    string          `json:"blocked,omitempty"`
	Note       string          `json:"note,omitempty"`
	Written    bool            `json:"written"`
	// Outcome is what --write did with the file: written, unchanged,
	// refused, failed, not-written (another file failed or was refused:
	// nothing was changed) or restored.
	Outcome       string `json:"outcome,omitempty"`
	OutcomeReason string `json:"outcome_reason,omitempty"`
}

type extensionJSON struct {
	Name    string `json:"name"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Missing bool   `json:"missing"`
}

// outdatedWriteErr: a refused file is the user's to fix, like a storage error.
func outdatedWriteErr(err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("outdated --write: %w", err)
	if errors.Is(err, factory.ErrFileRefused) {
		return withCode(contract.ExitStorage, err)
	}
	return err
}

func outdatedToJSON(ups []factory.Update, results []factory.FileResult) []outdatedJSON {
	out := []outdatedJSON{}
	for _, u := range ups {
		j := outdatedJSON{File: u.Use.File, Line: u.Use.Line, Reference: u.Use.Raw, Current: u.Current, Patch: u.Patch, Latest: u.Latest,
			Target: u.Target, New: u.NewRaw, Blocked: u.Blocked, Note: u.Note, Extensions: []extensionJSON{}}
		for _, e := range u.Extensions {
			j.Extensions = append(j.Extensions, extensionJSON{e.Name, e.From, e.To, e.Missing})
		}
		for _, r := range results {
			if r.File == u.Use.File {
				j.Outcome, j.OutcomeReason = r.Outcome, r.Reason
				j.Written = r.Outcome == factory.OutcomeWritten && u.Target != "" && u.Blocked == ""
			}
		}
		out = append(out, j)
	}
	return out
}
