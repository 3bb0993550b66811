//go:build linux || darwin

package imaging

import (
	"os"
	"syscall"
)

// sameDevice says whether two device nodes are one block (or character)
// device: /dev/sdb and a copy of its node elsewhere have different inodes.
func sameDevice(a, b os.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 || a.Mode()&os.ModeDevice == 0 || b.Mode()&os.ModeDevice == 0 {
		return false
	}
	return uint64(sa.Rdev) == uint64(sb.Rdev) && a.Mode()&os.ModeCharDevice == b.Mode()&os.ModeCharDevice
}
