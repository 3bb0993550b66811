// Command talosflash flashes Talos Linux for Raspberry Pi onto SD cards and
// applies machine configs to nodes in maintenance mode. With no arguments
// (or `gui`) it starts the desktop app; see README.md for the CLI.
package main

import (
	"os"

	"github.com/talosflash/talosflash/app/cli"
	"github.com/talosflash/talosflash/internal/fynelocale"
)

func main() {
	args := os.Args[1:]
	// Under pkexec only the CLI's elevated write runs (cli.Main refuses
	// the rest): never the app as root.
	if (len(args) == 0 || args[0] == "gui") && !cli.UnderPkexec() {
		if len(args) > 0 {
			args = args[1:]
		}
		os.Exit(runGUI(args))
	}
	// The locale was only rewritten for Fyne (see fynelocale): the CLI and
	// the processes it starts get the user's.
	fynelocale.Restore()
	os.Exit(cli.Main(args, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
