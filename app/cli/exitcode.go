package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
)

// The exit codes are app/contract's Exit* (docs/JSON.md), the same for the
// elevated child and the desktop app.

// exitError carries the exit code chosen where the failure was understood.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

func usageErrorf(format string, args ...any) error {
	return withCode(contract.ExitUsage, fmt.Errorf(format, args...))
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	if err == nil {
		return contract.ExitOK
	}
	if errors.Is(err, context.Canceled) {
		return contract.ExitInterrupted
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// The elevated child's failure ends the parent with the child's code.
	var child *elevate.Error
	if errors.As(err, &child) {
		return child.ExitCode()
	}
	if errors.Is(err, elevate.ErrStart) {
		return contract.ExitDevice
	}
	return classify(err)
}

// reportedError is a failure the command already wrote as its JSON "error"
// line; Main writes that line for every other failure of a --json run.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

func reported(err error) error {
	if err == nil {
		return nil
	}
	return reportedError{err}
}

// wantsJSON tells whether args ask for --json (before a "--").
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}
