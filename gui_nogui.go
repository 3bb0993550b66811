//go:build nogui

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/talosflash/talosflash/app/cli"
	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/fynelocale"
)

// noAppMessage is what a headless build says for the app's command line.
const noAppMessage = "talosflash: this build has no desktop app (built with -tags nogui); for the CLI run `talosflash --help`"

// runGUI in a headless build (make build-cli: no cgo, no X11/GL libraries
// needed at run time, no Fyne start-up messages): the app's command line
// (none, `gui`, the app's flags) is told there is no app here; flags the app
// does not take either go to the CLI, which names what it makes of them
// (`talosflash-cli --role worker`: unknown command "--role").
func runGUI(args []string) int {
	if _, err := parseAppArgs(args); err != nil && !errors.Is(err, flag.ErrHelp) {
		fynelocale.Restore() // as main does before the CLI
		return cli.Main(args, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	}
	fmt.Fprintln(os.Stderr, noAppMessage)
	return contract.ExitUsage
}

// The CLI's usage says this build has no app.
func init() { cli.HasApp = false }
