//go:build linux

package devices

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/talosflash/talosflash/internal/printable"

	"golang.org/x/sys/unix"
)

const devicesSupported = true

// deviceNumber returns "major:minor" of a device node, as in sysfs "dev".
func deviceNumber(fi fs.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	rdev := uint64(st.Rdev)
	return fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev)), true
}

func (p Lister) openBlock(d *Disk, imageSize int64, opts Options) (*Device, error) {
	refuse := func(code Code, format string, args ...any) *RefusedError {
		return refusal(d.Path, code, format, args...)
	}
	unmounted, err := unmountRemovable(d)
	if err != nil {
		return nil, err
	}
	// O_EXCL on a block device: the kernel refuses (EBUSY) when the disk or
	// any of its partitions is mounted, swapped on, or held by dm/md, and
	// keeps automounters off it while we write.
	f, err := os.OpenFile(d.Path, os.O_RDWR|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.EBUSY):
			return nil, refuse(CodeBusy, "%s is busy: mounted or held open by another program (a file manager, disk utility or another flasher)", d.Path)
		case errors.Is(err, unix.EROFS):
			return nil, refuse(CodeReadOnly, "%s is read-only (check the write-protect switch on the card)", d.Path)
		case errors.Is(err, unix.ENOMEDIUM):
			return nil, refuse(CodeNoMedium, "%s has no medium (is the card inserted?)", d.Path)
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENXIO), errors.Is(err, unix.ENODEV):
			return nil, refuse(CodeNotFound, "%s disappeared (was the card removed?)", d.Path)
		case errors.Is(err, fs.ErrPermission):
			return nil, fmt.Errorf("open %s for writing: %w (needs root: run with sudo, or let talosflash ask for elevation)", d.Path, err)
		}
		return nil, fmt.Errorf("open %s for writing: %w", d.Path, err)
	}
	dev, err := adoptBlock(f, d, imageSize, opts)
	if err != nil {
		return nil, err
	}
	dev.Unmounted = unmounted
	return dev, nil
}

// adoptBlock makes an open block device a Device once it passes the checks
// that need the open descriptor: it is the device Check judged, it is not
// read-only, the image fits. It closes f on refusal. (The UDisks2 path
// shares it: a descriptor from the daemon passes the same checks.)
func adoptBlock(f *os.File, d *Disk, imageSize int64, opts Options) (*Device, error) {
	refuse := func(code Code, format string, args ...any) *RefusedError {
		return refusal(d.Path, code, format, args...)
	}
	// The path may now name another device than the one checked (card
	// swapped, names reassigned): confirm identity and size on the open fd.
	// It must be a block device at all: a file put where the path was
	// (a DevRoot that is not the kernel's) is never written as a disk.
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", d.Path, err)
	}
	if fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
		f.Close()
		return nil, refuse(CodeNotBlockDevice, "%s is not a block device any more (%v); check the target again", d.Path, fi.Mode().Type())
	}
	if num, ok := deviceNumber(fi); ok && d.Dev != "" && num != d.Dev {
		f.Close()
		return nil, refuse(CodeBusy, "%s changed while it was being opened (device %s, expected %s); check the target again", d.Path, num, d.Dev)
	}
	// A write-protected card opens read-write on many readers; the kernel's
	// read-only flag is the truth (sysfs may have been read before the
	// switch was flipped). Refuse now rather than fail with EPERM mid-write.
	if ro, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKROGET); err == nil && ro != 0 {
		f.Close()
		return nil, refuse(CodeReadOnly, "%s is read-only (check the write-protect switch on the card)", d.Path)
	}
	if size, err := f.Seek(0, io.SeekEnd); err == nil {
		if imageSize > 0 && size < imageSize {
			f.Close()
			return nil, refuse(CodeTooSmall, "%s", tooSmallMsg(d.Path, size, imageSize))
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("open %s: %w", d.Path, err)
		}
	}
	return newDevice(f, d, true, opts), nil
}

// unmountRemovable unmounts the disk's filesystems mounted under /media or
// /run/media (Assess refused every other mount already). No lazy unmount:
// a detached filesystem would keep writing to the card under the image.
func unmountRemovable(d *Disk) ([]string, error) {
	var done []string
	for _, pt := range removableMounts(d) {
		err := unix.Unmount(pt, 0)
		switch {
		case err == nil:
			done = append(done, pt)
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			// not mounted any more (someone else unmounted it)
		case errors.Is(err, unix.EBUSY):
			return done, &RefusedError{Device: d.Path, Reason: CodeBusy,
				Msg: fmt.Sprintf("could not unmount %s: files on it are in use; close programs using the card and retry", printable.String(pt))}
		default:
			return done, fmt.Errorf("unmount %s: %w", pt, err)
		}
	}
	return done, nil
}

// removableMounts are the mount points of the disk's filesystems under
// /media or /run/media that Open unmounts, deepest first (in case one is
// mounted inside another).
func removableMounts(d *Disk) []string {
	var points []string
	seen := map[string]bool{}
	for _, m := range d.AllMounts() {
		if m.Via != "" || !isRemovableMediaMount(m.Point) || seen[m.Point] {
			continue
		}
		seen[m.Point] = true
		points = append(points, m.Point)
	}
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points
}

// rereadPartitions issues BLKRRPART so the kernel sees the image's partition
// table. Loop devices without partition scanning answer EINVAL: not a
// problem. Anything else is returned as a warning.
func rereadPartitions(f *os.File) string {
	sc, err := f.SyscallConn()
	if err != nil {
		return fmt.Sprintf("re-read partition table of %s: %v", f.Name(), err)
	}
	var ioErr error
	if err := sc.Control(func(fd uintptr) { _, ioErr = unix.IoctlRetInt(int(fd), unix.BLKRRPART) }); err != nil {
		ioErr = err
	}
	if ioErr == nil || errors.Is(ioErr, unix.EINVAL) {
		return ""
	}
	return fmt.Sprintf("the kernel could not re-read the partition table of %s (%v); replug the card before using it", f.Name(), ioErr)
}

// NeedsElevation reports whether the current user must become root to write
// path: not root and no write permission. (A non-root user with write access,
// e.g. in group "disk", can write but not unmount or re-read partitions;
// those then fail with clear errors or warnings.)
func NeedsElevation(path string) bool {
	if os.Geteuid() == 0 {
		return false
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		path = filepath.Dir(path) // a file target still to be created
	}
	return unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS) != nil
}

// IsDeviceGone reports whether err means the device disappeared or failed
// (unplugged reader, removed card, dead medium): retrying is pointless.
func IsDeviceGone(err error) bool {
	for _, e := range []error{unix.ENODEV, unix.ENXIO, unix.EIO, unix.ENOMEDIUM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// noFollow makes an open fail (ELOOP) on a symlink in the last element.
const noFollow = unix.O_NOFOLLOW

func isLoop(err error) bool { return errors.Is(err, unix.ELOOP) }
