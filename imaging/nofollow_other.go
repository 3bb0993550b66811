//go:build !unix

package imaging

import (
	"fmt"
	"os"
)

// openNoFollow refuses a symlink (checked before opening: no O_NOFOLLOW here).
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("open %s: is a symbolic link", path)
	}
	return os.OpenFile(path, flag, perm)
}

// tryLockFile always succeeds where flock is missing (untested platforms).
func tryLockFile(*os.File) (bool, error) { return true, nil }
