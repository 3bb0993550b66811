//go:build linux || darwin

package imaging

import "syscall"

// freeSpace is the space an unprivileged user may still use in dir's file system.
func freeSpace(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// fileTargetFree is the free space under an image-file target (a regular
// file behind Fd()); false for devices and targets without a descriptor.
func fileTargetFree(t Target) (int64, bool) {
	f, ok := t.(fdTarget)
	if !ok {
		return 0, false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, false
	}
	var fs syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &fs); err != nil {
		return 0, false
	}
	return int64(fs.Bavail) * int64(fs.Bsize), true
}

// isRegularFile says whether t is a regular file (behind Fd()).
func isRegularFile(t Target) bool {
	f, ok := t.(fdTarget)
	if !ok {
		return false
	}
	var st syscall.Stat_t
	return syscall.Fstat(int(f.Fd()), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG
}

// presizeFile grows a regular-file target to size (holes, which read as
// zeros), so the image's zero chunks need not be written.
func presizeFile(t Target, size int64) {
	f, ok := t.(fdTarget)
	if !ok {
		return
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size >= size {
		return
	}
	_ = syscall.Ftruncate(int(f.Fd()), size)
}
