//go:build linux || darwin

package imaging

import "golang.org/x/sys/unix"

// pwriteFd writes p at off on a descriptor the target exposes (a
// devices.Device has no WriteAt of its own): the first MiB, written last.
func pwriteFd(fd uintptr, p []byte, off int64) (int, error) { return unix.Pwrite(int(fd), p, off) }

const havePwriteFd = true
