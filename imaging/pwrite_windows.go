package imaging

import "syscall"

// pwriteFd writes p at off on the target's handle (an OVERLAPPED offset on
// a synchronous handle): the first MiB, written last.
func pwriteFd(fd uintptr, p []byte, off int64) (int, error) {
	var done uint32
	ov := syscall.Overlapped{Offset: uint32(off), OffsetHigh: uint32(off >> 32)}
	err := syscall.WriteFile(syscall.Handle(fd), p, &done, &ov)
	return int(done), err
}

const havePwriteFd = true
