//go:build unix

package cli

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// What the tests need of POSIX, apart so that every test file also
// builds (and is vetted) for Windows, where posix_other_test.go stands in.

// mkfifo makes a FIFO at path.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// canSignalSelf: signalSelf delivers the signal (a real Ctrl-C, SIGTERM).
const canSignalSelf = true

// signalSelf sends sig to this process.
func signalSelf(sig syscall.Signal) { _ = syscall.Kill(os.Getpid(), sig) }

// unmount detaches the file system mounted at dir.
func unmount(dir string) error { return unix.Unmount(dir, 0) }

// ownerOf is the uid and gid of what fi describes.
func ownerOf(fi os.FileInfo) (uid, gid uint32) {
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}
