//go:build !linux

package cli

import (
	"os"
	"syscall"
)

const nonBlock = syscall.O_NONBLOCK

// openAsInvoker opens the image (the check as the invoking user is Linux
// only, where the child runs under pkexec).
func openAsInvoker(path string) (*os.File, error) { return openImage(path) }

// fdPath keeps the image's path where no /proc/self/fd names the open file.
func fdPath(f *os.File) string { return f.Name() }
