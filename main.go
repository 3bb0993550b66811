// Command talosflash flashes Talos Linux for Raspberry Pi onto SD cards and
// applies machine configs to nodes in maintenance mode. With no arguments
// it starts the desktop app; see README.md for the CLI.
package main

import (
	"os"

	"github.com/talosflash/talosflash/app/cli"
)

func main() {
	if len(os.Args) == 1 {
		os.Exit(runGUI())
	}
	os.Exit(cli.Main(os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
