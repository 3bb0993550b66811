//go:build unix

package devices

import (
	"os"
	"syscall"
)

// fileOwner is the uid owning the file fi describes.
func fileOwner(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
