// Package cli is talosflash's headless front end: the same library calls the
// GUI makes, driven by flags, with documented exit codes and JSON progress.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/editdistance"
	"github.com/talosflash/talosflash/internal/printable"
)

// Version is set by the build (-ldflags) and shown by `talosflash version`.
var Version = "0.1.0-dev"

// Env is what a command may touch: streams and the environment.
// Tests build one with buffers.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

var usageText = `talosflash: flash Talos Linux for Raspberry Pi onto SD cards, then configure the nodes.

Usage:
  talosflash [gui] [--factory URL] [--profiles FILE]   start the desktop app
  talosflash <command> [flags]

Commands:
  gui         start the desktop app (the default without a command)
  flash       write a role's Talos image to a card and verify it (also: --flash)
  schematic   print a role's schematic YAML, ID, image URL and installer
  profiles    list the roles and custom profiles with their schematic IDs
  devices     list disks and whether they are safe targets
  nodes       find Talos nodes in maintenance mode on the local network
  apply       check a machine config and send it to a node in maintenance mode
  bootstrap   wait for the configured control plane node, then bootstrap etcd once
  status      how each configured node is: stage, services, etcd; why it is stuck (--watch)
  kubeconfig  fetch the cluster's admin kubeconfig and merge it into ~/.kube/config
  patch       patch a running node's config: diff, appended lists flagged, its dry run, apply
  upgrade     upgrade nodes one by one with their own schematic's installer (--inventory: the cluster, drained)
  etcd        etcd snapshot FILE: save the cluster's etcd (bootstrap --recover-from brings it back)
  outdated    list newer Talos/extension versions for installer files (--write)
  inventory   init or check the cluster inventory (talosflash.yaml)
  card        read a card back: Talos image, META keys, the node written on it
  version     print the version
  help [cmd]  this text, or a command's flags

Examples:
  talosflash --flash --role controlplane --device /dev/sdb
  talosflash apply --node 192.168.1.50 --file controlplane.yaml

Run "talosflash <command> -h" for a command's flags.
` + exitCodesText

// HasApp is false in a build without the desktop app (-tags nogui, the
// talosflash-cli beside the app): the usage then says gui is not there.
var HasApp = true

// usage is the top-level usage text of this build.
func usage() string {
	if HasApp {
		return usageText
	}
	t := strings.Replace(usageText, "  talosflash [gui] [--factory URL] [--profiles FILE]   start the desktop app\n", "", 1)
	return strings.Replace(t, "  gui         start the desktop app (the default without a command)\n",
		"  gui         not in this build (the CLI only: -tags nogui); the desktop app is talosflash\n", 1)
}

// exitCodesText is contract.ExitCodes in a few lines (docs/JSON.md has
// what each means).
var exitCodesText = strings.Join(wrapWords("Exit codes: "+contract.ExitSummary()+" (143 SIGTERM, 129 SIGHUP).", 72), "\n") + "\n"

// Main runs the CLI with args (without the program name) and returns the
// process exit code.
func Main(args []string, env Env) int {
	ctx, caught, stop := signalContext()
	defer stop()
	err := run(ctx, args, env)
	if err == nil {
		return contract.ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return contract.ExitOK
	}
	code := exitCode(err)
	if s, ok := caught().(syscall.Signal); ok && code == contract.ExitInterrupted {
		code = 128 + int(s) // 130 SIGINT, 143 SIGTERM, 129 SIGHUP, as shells report them
	}
	fmt.Fprintf(env.Stderr, "talosflash: %s\n", oneLine(err.Error()))
	var done reportedError
	if wantsJSON(args) && !errors.As(err, &done) {
		// Scripts read the failure on stdout too: the last line is an "error".
		contract.NewWriter(env.Stdout).Error(code, oneLine(err.Error()))
	}
	return code
}

// signalContext is cancelled by SIGINT, SIGTERM or SIGHUP alike (the flash
// syncs and reports the card incomplete); caught tells which one came.
func signalContext() (ctx context.Context, caught func() os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	var got atomic.Value
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			got.Store(s)
			cancel()
		case <-done:
		}
	}()
	caught = func() os.Signal {
		s, _ := got.Load().(os.Signal)
		return s
	}
	stop = func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
	return ctx, caught, stop
}

func run(ctx context.Context, args []string, env Env) error {
	if err := pkexecGate(args); err != nil {
		return err
	}
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage())
		return usageErrorf("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "--flash", "-flash", "flash":
		return runFlash(ctx, rest, env)
	case "schematic":
		return runSchematic(ctx, rest, env)
	case "profiles":
		return runProfiles(ctx, rest, env)
	case "devices":
		return runDevices(ctx, rest, env)
	case "nodes":
		return runNodes(ctx, rest, env)
	case "apply":
		return runApply(ctx, rest, env)
	case "bootstrap":
		return runBootstrap(ctx, rest, env)
	case "status":
		return runStatus(ctx, rest, env)
	case "kubeconfig":
		return runKubeconfig(ctx, rest, env)
	case "upgrade":
		return runUpgrade(ctx, rest, env)
	case "etcd":
		return runEtcd(ctx, rest, env)
	case "patch":
		return runPatch(ctx, rest, env)
	case "outdated":
		return runOutdated(ctx, rest, env)
	case "inventory":
		return runInventory(ctx, rest, env)
	case "card":
		return runCard(ctx, rest, env)
	case "version", "--version", "-version":
		return runVersion(rest, env)
	case "help", "-h", "--help":
		if len(rest) > 0 && rest[0] != "help" && commandHelp[rest[0]].synopsis != "" {
			return run(ctx, []string{rest[0], "-h"}, env) // "help flash" = "flash -h"
		}
		fmt.Fprint(env.Stdout, usage())
		return nil
	}
	// `talosflash --role worker --device X --flash` style: --flash anywhere.
	for i, a := range args {
		if a == "--flash" || a == "-flash" {
			return runFlash(ctx, append(append([]string{}, args[:i]...), args[i+1:]...), env)
		}
	}
	var names []string
	for name := range commandHelp {
		names = append(names, name)
	}
	return usageErrorf("unknown command %q%s (see: talosflash --help)", cmd, didYouMean(cmd, names))
}

// runVersion prints talosflash's version (--json: the version line).
func runVersion(args []string, env Env) error {
	var jsonOut bool
	fs := newFlagSet("version", env)
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return newAnswerPrinter(jsonOut, env).Answer(contract.TypeVersion, map[string]string{"version": Version}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "talosflash %s\n", Version)
		return err
	})
}

// Flag errors of the flag package, which names a flag with one dash
// whatever was typed ("-hostnme").
var (
	flagUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	flagBadBool   = regexp.MustCompile(`^invalid boolean value (".*") for -+(\S+): `)
	flagBadValue  = regexp.MustCompile(`^invalid value (".*") for flag -+(\S+): (.*)$`)
	flagNoValue   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// FlagError is a parse error of fs (the CLI's, the app's) the way the docs
// write flags, --name, with what a value should be and the closest flag to
// an unknown one: "flash: unknown flag --hostnme; did you mean --hostname?
// (see: talosflash flash -h)".
func FlagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if m := flagUndefined.FindStringSubmatch(msg); m != nil {
		msg = "unknown flag --" + m[1] + flagSuggestion(fs, m[1])
	} else if m := flagBadBool.FindStringSubmatch(msg); m != nil {
		msg = "--" + m[2] + " " + m[1] + ": want true or false"
	} else if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		msg = "--" + m[2] + " " + m[1] + ": " + valueWant(fs.Lookup(m[2]), m[3])
	} else if m := flagNoValue.FindStringSubmatch(msg); m != nil {
		msg = "--" + m[1] + " needs a value"
	}
	return fmt.Errorf("%s: %s (see: talosflash %s -h)", fs.Name(), msg, fs.Name())
}

// valueWant says what f's value should be, for the flag package's "parse
// error" (its own words otherwise: a flag.Value's Set error).
func valueWant(f *flag.Flag, detail string) string {
	if f == nil || !strings.HasSuffix(detail, "parse error") && !strings.HasSuffix(detail, "value out of range") {
		return detail
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return detail
	}
	switch g.Get().(type) {
	case time.Duration:
		return "want a duration such as 30s, 2m or 1h"
	case int, int64, uint, uint64:
		return "want a whole number"
	case float64:
		return "want a number"
	}
	return detail
}

// flagSuggestion names the shown flag closest to an undefined one ("" when
// none is close): `--rol` -> "; did you mean --role?".
func flagSuggestion(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if !hiddenFlags[f.Name] {
			names = append(names, f.Name)
		}
	})
	if s := closest(name, names); s != "" {
		return "; did you mean --" + s + "?"
	}
	return ""
}

// didYouMean is "; did you mean NAME?" for the candidate closest to word.
func didYouMean(word string, candidates []string) string {
	if s := closest(word, candidates); s != "" {
		return "; did you mean " + s + "?"
	}
	return ""
}

// closest is the candidate within two edits of word (and closer than half
// its length), the first in sorted order on a tie; "" when none is.
func closest(word string, candidates []string) string {
	slices.Sort(candidates)
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editdistance.Levenshtein(word, c); d < bestD && d*2 < max(len(word), 2) {
			best, bestD = c, d
		}
	}
	return best
}

// newFlagSet builds a FlagSet whose parse errors become usage errors (exit
// 2) and whose -h prints the command's usage (printUsage) on stdout.
func newFlagSet(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package's own messages are dropped: parseFlags reports the
	// error once, and prints the usage itself.
	fs.SetOutput(flagOutput{help: env.Stdout})
	fs.Usage = func() {}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	return parseFlagsGated(fs, args, nil)
}

// parseFlagsGated is parseFlags with gate (when not nil) run right after
// parsing, before checkFlags reads or judges anything.
func parseFlagsGated(fs *flag.FlagSet, args []string, gate func() error) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if out, ok := fs.Output().(flagOutput); ok {
				printUsage(out.help, fs)
			}
			return err
		}
		return withCode(contract.ExitUsage, FlagError(fs, err))
	}
	if gate != nil {
		if err := gate(); err != nil {
			return err
		}
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return checkFlags(fs) // validate.go: before anything is touched
}

// flagOutput swallows the flag package's output and carries where a
// command's -h usage goes.
type flagOutput struct{ help io.Writer }

func (flagOutput) Write(p []byte) (int, error) { return len(p), nil }

// oneLine keeps error output to one line so scripts can log it verbatim.
// oneLine is a message on one line, shown escaped (printable.String): an
// error may quote what a card, an image, an inventory or a node said.
func oneLine(s string) string {
	return printable.String(strings.Join(strings.Fields(s), " "))
}

// help is one command's usage text; flags are listed from its FlagSet.
type help struct {
	synopsis, about, example string
	order                    []string // flags shown first, in this order; the rest sorted
	// more is another form of the command (upgrade --inventory) whose
	// flags the usage lists too, under moreTitle, where fs lacks them.
	more      func() *flag.FlagSet
	moreTitle string
}

var commandHelp = map[string]help{
	"flash": {
		synopsis: "talosflash --flash (--role R | --installer REF | --installer-file F | --image F) --device D [flags]",
		about: "Download the Talos image for a role or profile (cached, resumed when\n" +
			"interrupted), write it to a card, then verify it by reading the card back.\n" +
			"Asks you to type the device name unless --yes. A loop device is refused\n" +
			"unless --allow-loop.",
		example: "talosflash --flash --role controlplane --device /dev/sdb\n" +
			"talosflash --flash --installer-file talos/installer-worker.yaml --device /dev/sdb\n" +
			"talosflash --flash --role worker --device /dev/sdb --yes --json   # in a script",
		order: []string{"role", "installer", "installer-file", "image", "device", "yes", "json", "profiles", "version"},
	},
	"schematic": {
		synopsis: "talosflash schematic (--role R | --installer REF | --installer-file F) [flags]",
		about:    "Print the schematic YAML and ID (computed offline), the image URL and the\ninstaller reference.",
		example:  "talosflash schematic --role controlplane\ntalosflash schematic --role worker --register --json",
		order:    []string{"role", "installer", "installer-file", "register", "json"},
	},
	"profiles": {
		synopsis: "talosflash profiles [--profiles FILE] [--json]",
		about:    "List the built-in roles and your custom profiles with their Talos version,\nextensions and schematic ID.",
		example:  "talosflash profiles --profiles profiles.yaml\ntalosflash profiles --json",
	},
	"devices": {
		synopsis: "talosflash devices [--allow-loop] [--json]",
		about:    "List the disks of this machine and whether each is a safe target (and why not).",
		example:  "talosflash devices\ntalosflash devices --allow-loop   # loop devices as flash --allow-loop judges them",
	},
	"nodes": {
		synopsis: "talosflash nodes [--subnet CIDR] [flags]",
		about: "Scan for Talos nodes (TCP port 50000) and show which are in maintenance\n" +
			"mode, waiting for a config. Without --subnet: this machine's IPv4 subnets\n" +
			"of /22 or smaller.",
		example: "talosflash nodes\ntalosflash nodes --subnet 192.168.1.0/24 --json",
		order:   []string{"subnet", "json"},
	},
	"version": {
		synopsis: "talosflash version [--json]",
		about:    "Print talosflash's version.",
		example:  "talosflash version\ntalosflash version --json",
	},
	"apply": {
		synopsis: "talosflash apply --node IP --file CONFIG [flags]",
		about: "Check a machine config against what the node booted (the incident checks,\n" +
			"e.g. Newt without its ExtensionServiceConfig; --role only as a fallback for\n" +
			"a node that does not say), then send it to a node in maintenance mode, like\n" +
			"talosctl apply-config --insecure.",
		example: "talosflash apply --node 192.168.1.50 --file controlplane.yaml\n" +
			"talosflash apply --node 192.168.1.51 --file worker.yaml --dry-run\n" +
			"talosflash apply --node 192.168.1.52 --file worker.yaml --role worker   # a node that does not report what it booted",
		order: []string{"node", "file", "role", "dry-run", "mode", "json"},
	},
}

// hiddenFlags are accepted but not shown: internal plumbing and
// compatibility no-ops.
var hiddenFlags = map[string]bool{
	"elevated": true, // the privileged child of a flash (pkexec)
	"follow":   true, // that child, reading an image its parent still downloads
	"insecure": true, // apply: talosctl compatibility, always insecure
}

// placeholders name flag values in usage texts.
var placeholders = map[string]string{
	"role": "NAME", "profiles": "FILE", "version": "VERSION", "factory": "URL", "arch": "ARCH",
	"installer": "REF", "installer-file": "FILE", "image": "FILE", "device": "DEVICE", "cache-dir": "DIR",
	"subnet": "CIDR", "timeout": "DURATION", "port": "PORT", "node": "IP", "file": "FILE", "mode": "MODE",
	"flashed-installer": "REF",
}

// printUsage writes fs's command usage: synopsis, description, public flags
// and an example.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	h := commandHelp[fs.Name()]
	if h.synopsis == "" {
		h.synopsis = "talosflash " + fs.Name() + " [flags]"
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", h.synopsis, h.about)
	printFlags(w, fs, h.order, nil)
	if h.more != nil {
		fmt.Fprintf(w, "\n%s\n", h.moreTitle)
		printFlags(w, h.more(), h.order, fs)
	}
	fmt.Fprintf(w, "\nExample:\n  %s\n", strings.ReplaceAll(h.example, "\n", "\n  "))
}

// printFlags writes fs's public flags as usage rows, those named in order
// first; flags that except also has are left out.
func printFlags(w io.Writer, fs *flag.FlagSet, order []string, except *flag.FlagSet) {
	type row struct{ names, usage string }
	var rows []row
	width := 0
	for _, f := range orderedFlags(fs, order) {
		if hiddenFlags[f.Name] || strings.HasPrefix(f.Usage, "shorthand for --") || except != nil && except.Lookup(f.Name) != nil {
			continue
		}
		names := "--" + f.Name
		if short := shorthandFor(fs, f.Name); short != "" {
			names = "-" + short + ", " + names
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			ph := placeholders[f.Name]
			if ph == "" {
				ph, _ = flag.UnquoteUsage(f)
				ph = strings.ToUpper(ph)
			}
			names += " " + ph
		}
		usage := f.Usage
		// A usage that says its default in words keeps them alone.
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" && !strings.Contains(usage, "(default") {
			usage += " (default " + f.DefValue + ")"
		}
		rows = append(rows, row{names, usage})
		width = max(width, len(names))
	}
	for _, r := range rows {
		for i, line := range wrapWords(r.usage, max(30, 80-width-6)) {
			first := ""
			if i == 0 {
				first = r.names
			}
			fmt.Fprintf(w, "  %-*s  %s\n", width, first, line)
		}
	}
}

// orderedFlags lists fs's flags: those named in first, in that order, then
// the others by name.
func orderedFlags(fs *flag.FlagSet, first []string) []*flag.Flag {
	var out []*flag.Flag
	seen := map[string]bool{}
	for _, name := range first {
		if f := fs.Lookup(name); f != nil {
			out = append(out, f)
			seen[name] = true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] {
			out = append(out, f)
		}
	})
	return out
}

// shorthandFor finds the one-letter alias of long ("shorthand for --long").
func shorthandFor(fs *flag.FlagSet, long string) string {
	short := ""
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 && f.Usage == "shorthand for --"+long {
			short = f.Name
		}
	})
	return short
}

// wrapWords breaks s into lines of at most width bytes, at spaces.
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}
