//go:build unix

package imaging

import (
	"fmt"
	"os"
	"syscall"
)

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
