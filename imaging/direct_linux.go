package imaging

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setDirect turns O_DIRECT on or off for an open descriptor (Linux allows
// this through F_SETFL). It fails with EINVAL where the file system does
// not support direct I/O (e.g. tmpfs on older kernels).
func setDirect(fd uintptr, on bool) error {
	flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= unix.O_DIRECT
	} else {
		flags &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, flags)
	return err
}

// dropCache evicts the (clean, already synced) cached pages of the file so
// the next reads come from the device.
func dropCache(fd uintptr) error {
	return unix.Fadvise(int(fd), 0, 0, unix.FADV_DONTNEED)
}

// blockDeviceSize returns the size of a block device, ok=false for other
// file types.
func blockDeviceSize(fd uintptr) (int64, bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return 0, false, fmt.Errorf("stat target: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, false, nil
	}
	var size uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); errno != 0 {
		return 0, false, fmt.Errorf("target size (BLKGETSIZE64): %w", errno)
	}
	return int64(size), true, nil
}

// nextData is where t's next data starts at or after off (lseek
// SEEK_DATA; past the last data: the largest offset), so a hole of a
// regular file is known to read zeros without reading it. false: not known
// (no descriptor, or a file system without SEEK_DATA answers as all data).
func nextData(t Target, off int64) (int64, bool) {
	f, ok := t.(fdTarget)
	if !ok {
		return 0, false
	}
	next, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return math.MaxInt64, true
	}
	return next, err == nil
}
