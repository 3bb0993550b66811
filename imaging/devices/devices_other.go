//go:build !linux && !darwin && !windows

package devices

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Raw block devices are only supported on Linux so far. On other systems
// List reports that, Check/Open refuse device nodes with CodeUnsupported,
// and regular image files work as everywhere.
const devicesSupported = false

func deviceNumber(fs.FileInfo) (string, bool) { return "", false }

func (p Lister) openBlock(d *Disk, _ int64, _ Options) (*Device, error) {
	return nil, &RefusedError{Device: d.Path, Reason: CodeUnsupported,
		Msg: fmt.Sprintf("writing to %s is not supported on this operating system yet", d.Path)}
}

func rereadPartitions(*os.File) string { return "" }

// NeedsElevation is false: raw devices are not supported here.
func NeedsElevation(string) bool { return false }

// IsDeviceGone reports whether err means the device disappeared or failed.
func IsDeviceGone(err error) bool {
	return errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENXIO) || errors.Is(err, syscall.EIO)
}

// noFollow: no portable O_NOFOLLOW here; the device/inode comparison after
// the open still catches a swapped target.
const noFollow = 0

func isLoop(error) bool { return false }
