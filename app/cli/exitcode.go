package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
)

// Exit codes are part of the scripting interface (docs/JSON.md): app/contract
// owns them; the elevated child and the desktop app exit with the same ones.
const (
	ExitOK          = contract.ExitOK
	ExitFailure     = contract.ExitFailure
	ExitUsage       = contract.ExitUsage
	ExitNetwork     = contract.ExitNetwork
	ExitVerify      = contract.ExitVerify
	ExitDevice      = contract.ExitDevice
	ExitWrite       = contract.ExitWrite
	ExitConfig      = contract.ExitConfig
	ExitApply       = contract.ExitApply
	ExitImage       = contract.ExitImage
	ExitStorage     = contract.ExitStorage
	ExitInterrupted = contract.ExitInterrupted
)

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
	return withCode(ExitUsage, fmt.Errorf(format, args...))
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, context.Canceled) {
		return ExitInterrupted
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
		return ExitDevice
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
