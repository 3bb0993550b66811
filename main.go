// Command talosflash flashes Talos Linux for Raspberry Pi onto SD cards and
// applies machine configs to nodes in maintenance mode. With no command (no
// arguments, `gui`, or only the app's flags) it starts the desktop app; any
// other command is the CLI (README.md, docs/CLI.md).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/talosflash/talosflash/app/cli"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/fynelocale"
)

func main() {
	args := os.Args[1:]
	// Under pkexec only the CLI's elevated write runs (cli.Main refuses
	// the rest): never the app as root.
	if opensApp(args) && !cli.UnderPkexec() {
		if len(args) > 0 && args[0] == "gui" {
			args = args[1:]
		}
		os.Exit(runGUI(args))
	}
	// The locale was only rewritten for Fyne (see fynelocale): the CLI and
	// the processes it starts get the user's.
	fynelocale.Restore()
	os.Exit(cli.Main(args, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}

// opensApp says whether a command line is the desktop app's: no arguments
// (a double-click), `gui [flags]`, or flags without a command
// (`talosflash --factory URL --allow-loop`), as `talosflash gui -h` writes
// it: `talosflash [gui] [flags]`. A command, the CLI's own top-level words
// (--help, --version) and a flash written as `--flash` among its flags
// (`talosflash --role worker --device D --flash`) are the CLI's.
func opensApp(args []string) bool {
	if len(args) == 0 || args[0] == "gui" {
		return true
	}
	if !strings.HasPrefix(args[0], "-") || args[0] == "-" {
		return false // a command (or a stray argument the CLI names)
	}
	switch args[0] {
	case "-h", "--help", "-version", "--version":
		return false
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--flash" || a == "-flash" {
			return false
		}
	}
	return true
}

// appOptions are the desktop app's flags, parsed the same in every build
// (the nogui build parses none: it has no app).
type appOptions struct {
	factoryURL, profiles, inventory string
	devices                         []string
	allowLoop                       bool
	subnets                         []netip.Prefix
}

// errAppUsage is a usage error of the app's command line, already worded
// for stderr (after "talosflash: ").
type errAppUsage struct{ msg string }

func (e errAppUsage) Error() string { return e.msg }

// parseAppArgs parses the app's flags (args without `gui`). It returns
// flag.ErrHelp for -h, an errAppUsage for a mistake (exit 2).
func parseAppArgs(args []string) (appOptions, error) {
	var o appOptions
	fs := flag.NewFlagSet("gui", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&o.factoryURL, "factory", factory.DefaultBaseURL, "Image Factory base URL")
	fs.StringVar(&o.profiles, "profiles", "", "YAML file with custom profiles")
	var devices stringList
	fs.Var(&devices, "device", "preselect this card (repeat it for several)")
	fs.BoolVar(&o.allowLoop, "allow-loop", false, "make loop devices selectable")
	subnet := fs.String("subnet", "", "what Scan scans")
	fs.StringVar(&o.inventory, "inventory", "", "talosflash.yaml whose nodes the Nodes step waits for")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errAppUsage{cli.FlagError(fs, err).Error()}
	}
	if fs.NArg() > 0 {
		return o, errAppUsage{fmt.Sprintf("unknown command %q; run `talosflash --help`", fs.Arg(0))}
	}
	o.devices = devices
	for _, c := range strings.Split(*subnet, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return o, errAppUsage{fmt.Sprintf("gui: --subnet %q: want a CIDR such as 192.168.1.0/24", c)}
		}
		o.subnets = append(o.subnets, p.Masked())
	}
	return o, nil
}

// stringList is a flag that may be repeated (--device A --device B).
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
