//go:build unix

package imaging

import (
	"fmt"
	"os"
	"syscall"
)

// openNoFollow opens path without following a symlink in its last element
// (ELOOP instead): a link planted in the cache cannot redirect a write.
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
}

// tryLockFile takes an exclusive advisory lock on f without waiting: false
// when another open file holds it. The lock ends when f is closed (also
// when the process dies).
func tryLockFile(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == syscall.EWOULDBLOCK {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return true, nil
}
