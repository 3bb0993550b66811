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
	"strings"
	"sync/atomic"
	"syscall"
)

// Version is set by the build (-ldflags) and shown by `talosflash version`.
var Version = "0.1.0-dev"

// Env is what a command may touch: streams and the environment.
// Tests build one with buffers.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

const usageText = `talosflash: flash Talos Linux for Raspberry Pi onto SD cards, then configure the nodes.

Usage:
  talosflash                          start the desktop app
  talosflash --flash [flags]          flash a card (same as: talosflash flash)
  talosflash schematic [flags]        print a role's schematic YAML and ID
  talosflash profiles [--profiles F]  list roles/profiles
  talosflash devices [--json]         list disks and whether they are safe targets
  talosflash nodes [--subnet CIDR]    find Talos nodes in maintenance mode
  talosflash apply --node IP --file worker.yaml [--dry-run]
  talosflash version

Run "talosflash <command> -h" for a command's flags.
Exit codes: 0 ok, 1 internal, 2 usage, 3 network, 4 verify mismatch,
5 device refused, 6 write I/O error, 7 config invalid, 8 node refused,
9 image corrupt or not an image, 10 cache/storage unusable,
130 interrupted (143 SIGTERM, 129 SIGHUP).
`

// Main runs the CLI with args (without the program name) and returns the
// process exit code.
func Main(args []string, env Env) int {
	ctx, caught, stop := signalContext()
	defer stop()
	err := run(ctx, args, env)
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	code := exitCode(err)
	if s, ok := caught().(syscall.Signal); ok && code == ExitInterrupted {
		code = 128 + int(s) // 130 SIGINT, 143 SIGTERM, 129 SIGHUP, as shells report them
	}
	fmt.Fprintf(env.Stderr, "talosflash: %s\n", oneLine(err.Error()))
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
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usageText)
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
	case "version", "--version", "-version":
		fmt.Fprintf(env.Stdout, "talosflash %s\n", Version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(env.Stdout, usageText)
		return nil
	}
	// `talosflash --role worker --device X --flash` style: --flash anywhere.
	for i, a := range args {
		if a == "--flash" || a == "-flash" {
			return runFlash(ctx, append(append([]string{}, args[:i]...), args[i+1:]...), env)
		}
	}
	fmt.Fprint(env.Stderr, usageText)
	return usageErrorf("unknown command %q", cmd)
}

// newFlagSet builds a FlagSet whose parse errors become usage errors (exit 2).
func newFlagSet(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return withCode(ExitUsage, err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// oneLine keeps error output to one line so scripts can log it verbatim.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
