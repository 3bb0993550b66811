//go:build !nogui

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/talosflash/talosflash/app/cli"
	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/gui"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
)

const guiUsage = `Usage: talosflash [gui] [--factory URL] [--profiles FILE] [--device D] [--allow-loop] [--subnet CIDR] [--inventory FILE]

Start the desktop app: pick a role, a card, flash it, then configure the
booted Pi. Without a display, use the CLI: talosflash --help.

Flags:
  --factory URL     Image Factory base URL (default %s)
  --profiles FILE   YAML file with custom profiles
  --device D        preselect this card in step 2 once it is listed; repeat
                    it to write several cards at once
  --allow-loop      make loop devices selectable, to try the whole flow
                    without a card (losetup -f --show disk.img)
  --subnet CIDR     what "Scan this network" scans (comma-separated list;
                    default: this machine's IPv4 networks of /22 or smaller)
  --inventory FILE  talosflash.yaml: the Nodes step lists its nodes from the
                    start and waits for each at its address

Example:
  talosflash gui --profiles profiles.yaml
`

// noDisplayHint is the one line printed instead of the app when there is no
// display to open a window on.
const noDisplayHint = "the desktop app needs a graphical session; for the CLI run `talosflash --help` (or build it without the app: `make build-cli`)"

// runGUI starts the desktop app: `talosflash` or `talosflash gui [flags]`.
func runGUI(args []string) int {
	return runGUIWith(args, os.Stdout, os.Stderr, os.Getenv, func(o gui.Options) error { return gui.Run(o) })
}

func runGUIWith(args []string, stdout, stderr io.Writer, getenv func(string) string, run func(gui.Options) error) (code int) {
	o, err := parseAppArgs(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, guiUsage, factory.DefaultBaseURL)
			return contract.ExitOK
		}
		fmt.Fprintf(stderr, "talosflash: %v\n", err)
		return contract.ExitUsage
	}
	if missing := missingDisplay(runtime.GOOS, getenv); missing != "" {
		fmt.Fprintf(stderr, "talosflash: no display (%s): %s\n", missing, noDisplayHint)
		return contract.ExitUsage
	}
	// A display that cannot be opened (DISPLAY pointing nowhere, Wayland
	// only) makes GLFW panic on the main goroutine while the first window
	// is created: one line instead of a stack trace.
	defer func() {
		if r := recover(); r != nil {
			if !isDisplayPanic(r) {
				panic(r) // a bug, not the display: keep its trace
			}
			fmt.Fprintf(stderr, "talosflash: cannot open the display (%v): %s\n", r, noDisplayHint)
			code = contract.ExitUsage
		}
	}()
	if err := run(gui.Options{FactoryURL: o.factoryURL, ProfilesFile: o.profiles, Devices: o.devices, AllowLoop: o.allowLoop, Subnets: o.subnets, Inventory: o.inventory, Version: cli.Version}); err != nil {
		// An inventory or profiles file that cannot be used: the CLI's words
		// and exit codes (7 for an inventory's problems, 2 for a bad file).
		var (
			inv  *plan.InventoryError
			prof *plan.ProfilesError
		)
		if errors.As(err, &inv) || errors.As(err, &prof) {
			err = cli.SettingsError(err, o.inventory)
		}
		fmt.Fprintf(stderr, "talosflash: %v\n", err)
		return cli.ExitCode(err)
	}
	return contract.ExitOK
}

// missingDisplay says why no window can be opened on goos, or "" when a
// display is configured. Fyne's default Linux/BSD build speaks X11 (Wayland
// needs -tags wayland); a Wayland session normally sets DISPLAY for XWayland.
func missingDisplay(goos string, getenv func(string) string) string {
	switch goos {
	case "darwin", "windows", "android", "ios", "js":
		return ""
	}
	if getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
		return "DISPLAY and WAYLAND_DISPLAY are not set"
	}
	return ""
}

// isDisplayPanic recognises the panic of go-gl/glfw when glfw.Init failed
// ("NotInitialized: The GLFW library is not initialized").
func isDisplayPanic(r any) bool {
	msg := fmt.Sprint(r)
	return strings.Contains(msg, "GLFW") || strings.Contains(msg, "NotInitialized")
}
