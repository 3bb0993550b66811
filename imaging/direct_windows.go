package imaging

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/windows"
)

var errNoDirect = errors.New("direct I/O cannot be switched on an open handle on Windows")

// fileModeInformation is FILE_INFORMATION_CLASS FileModeInformation.
const fileModeInformation = 16

// setDirect cannot change an open handle on Windows; it reports success
// for turning direct I/O on when the handle already bypasses the cache
// (imaging/devices opens physical drives with FILE_FLAG_NO_BUFFERING), so
// the read-back is labelled for what it is.
func setDirect(fd uintptr, on bool) error {
	if !on {
		return errNoDirect
	}
	var mode uint32
	var iosb windows.IO_STATUS_BLOCK
	if err := windows.NtQueryInformationFile(windows.Handle(fd), &iosb, (*byte)(unsafe.Pointer(&mode)), 4, fileModeInformation); err != nil {
		return err
	}
	if mode&windows.FILE_NO_INTERMEDIATE_BUFFERING == 0 {
		return errNoDirect
	}
	return nil
}

func dropCache(fd uintptr) error { return errNoDirect }

func blockDeviceSize(fd uintptr) (int64, bool, error) { return 0, false, nil }

// nextData: holes are not asked for here; a regular file is read.
func nextData(Target, int64) (int64, bool) { return 0, false }
