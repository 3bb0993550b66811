package gui

import (
	"context"
	"os/exec"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging"
)

// ElevatedArgs is the CLI invocation that writes an already downloaded image
// as root and reports JSON lines on stdout (see runElevated).
func ElevatedArgs(imagePath, device string) []string {
	return []string{"--flash", "--elevated", "--image", imagePath, "--device", device, "--yes", "--json"}
}

// ElevatedError is a failure the elevated child reported (or its exit); it
// matches the library's sentinel errors for the CLI's exit codes.
type ElevatedError = elevate.Error

// runElevated re-runs talosflash as root to write imagePath to device and
// translates its JSON progress lines. Cancelling ctx interrupts the child
// (SIGINT, then a kill after a grace period).
func runElevated(ctx context.Context, command func([]string) (*exec.Cmd, error), imagePath, device string, progress imaging.ProgressFunc) (*imaging.Result, error) {
	cmd, err := command(ElevatedArgs(imagePath, device))
	if err != nil {
		return nil, err
	}
	var res *imaging.Result
	err = elevate.Run(ctx, cmd, func(ev elevate.Event) {
		switch ev.Event {
		case "progress":
			if progress != nil {
				progress(ev.Progress())
			}
		case "result":
			res = &imaging.Result{Bytes: ev.Bytes, SHA256: ev.SHA256, Verified: ev.Verified, VerifyMode: ev.VerifyMode, Path: imagePath}
		}
	})
	return res, err
}
