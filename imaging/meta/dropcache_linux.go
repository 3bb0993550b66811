package meta

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCache asks the kernel to forget the (already synced) cached pages, so
// the read-back comes from the medium.
func dropCache(d Disk, off, n int64) {
	if f, ok := d.(*os.File); ok {
		_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
	}
}
