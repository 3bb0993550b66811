//go:build !unix

package cli

import (
	"errors"
	"os"
	"syscall"
)

// Windows: no FIFOs, no signals to oneself, no mounts, no uid/gid; the
// tests that need them skip (posix_unix_test.go).

var errNotPOSIX = errors.New("not on this platform")

func mkfifo(string) error { return errNotPOSIX }

const canSignalSelf = false

func signalSelf(syscall.Signal) {}

func unmount(string) error { return errNotPOSIX }

func ownerOf(os.FileInfo) (uid, gid uint32) { return 0, 0 }
