package cli

import (
	"context"
	"errors"
	"fmt"
)

// Exit codes are part of the scripting interface; README documents them.
const (
	ExitOK          = 0
	ExitFailure     = 1 // unexpected internal failure
	ExitUsage       = 2 // bad flags, unknown role/profile, bad input file
	ExitNetwork     = 3 // Image Factory or node unreachable, HTTP errors
	ExitVerify      = 4 // read-back hash differs from the image
	ExitDevice      = 5 // target refused by the safety rules
	ExitWrite       = 6 // I/O error while writing (card removed, EIO)
	ExitConfig      = 7 // machine config invalid or fails the incident checks
	ExitApply       = 8 // the node refused the config
	ExitImage       = 9 // the image is corrupt or not an image at all
	ExitInterrupted = 130
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
	return classify(err)
}
