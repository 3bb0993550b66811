//go:build nogui

package main

import (
	"fmt"
	"os"

	"github.com/talosflash/talosflash/app/cli"
	"github.com/talosflash/talosflash/app/contract"
)

// runGUI in a headless build (make build-cli: no cgo, no X11/GL libraries
// needed at run time, no Fyne start-up messages).
func runGUI([]string) int {
	fmt.Fprintln(os.Stderr, "talosflash: this build has no desktop app (built with -tags nogui); for the CLI run `talosflash --help`")
	return contract.ExitUsage
}

// The CLI's usage says this build has no app.
func init() { cli.HasApp = false }
