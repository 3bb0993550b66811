//go:build !nogui

package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/talosflash/talosflash/app/gui"
	"github.com/talosflash/talosflash/factory"
)

// runGUI starts the desktop app: `talosflash` or `talosflash gui [flags]`.
func runGUI(args []string) int {
	fs := flag.NewFlagSet("gui", flag.ContinueOnError)
	factoryURL := fs.String("factory", factory.DefaultBaseURL, "Image Factory base URL")
	profiles := fs.String("profiles", "", "YAML file with custom profiles")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if err := gui.Run(gui.Options{FactoryURL: *factoryURL, ProfilesFile: *profiles}); err != nil {
		fmt.Fprintf(os.Stderr, "talosflash: %v\n", err)
		return 1
	}
	return 0
}
