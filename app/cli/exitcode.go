package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/talosflash/talosflash/app/elevate"
)

// Exit codes are part of the scripting interface; README documents them.
// app/elevate owns them: the elevated child exits with the same ones.
const (
	ExitOK          = elevate.ExitOK
	ExitFailure     = elevate.ExitFailure
	ExitUsage       = elevate.ExitUsage
	ExitNetwork     = elevate.ExitNetwork
	ExitVerify      = elevate.ExitVerify
	ExitDevice      = elevate.ExitDevice
	ExitWrite       = elevate.ExitWrite
	ExitConfig      = elevate.ExitConfig
	ExitApply       = elevate.ExitApply
	ExitImage       = elevate.ExitImage
	ExitStorage     = elevate.ExitStorage
	ExitInterrupted = elevate.ExitInterrupted
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
