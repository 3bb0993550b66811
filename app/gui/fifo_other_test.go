//go:build !unix

package gui

import "errors"

// mkfifo: no FIFOs on Windows; the test that drops one skips.
func mkfifo(string) error { return errors.New("no FIFOs on this platform") }
