package devices

import (
	"errors"
	"fmt"

	"github.com/talosflash/talosflash/internal/printable"
)

// Code names the rule that refused a target. Values are stable strings so
// they can be shown, logged and compared by the GUI and CLI.
type Code string

const (
	CodeSystemDisk     Code = "system-disk"      // holds /, /boot, /usr, ...
	CodeSwap           Code = "swap"             // active swap on it
	CodeHolders        Code = "in-use"           // dm/LVM/LUKS/md stacked on it
	CodeMounted        Code = "mounted"          // mounted outside removable-media dirs
	CodeReadOnly       Code = "read-only"        // ro flag / write-protect
	CodeNoMedium       Code = "no-medium"        // size 0: empty reader
	CodeNotRemovable   Code = "not-removable"    // fixed disk without ForceNonRemovable
	CodeTooSmall       Code = "too-small"        // smaller than the image
	CodeVirtual        Code = "virtual"          // loop/dm/md/ram/zram
	CodePartition      Code = "partition"        // a partition, not the whole disk
	CodeNotFound       Code = "not-found"        // path does not exist
	CodeAmbiguous      Code = "ambiguous"        // a bare name that is both a file here and a disk under /dev
	CodeDirectory      Code = "directory"        // path is a directory
	CodeNotBlockDevice Code = "not-block-device" // char device, socket, file in /dev
	CodeNotImageFile   Code = "not-image-file"   // an existing non-empty file not named like an image
	CodeUnknownDevice  Code = "unknown-device"   // block device not found in sysfs
	CodeBusy           Code = "busy"             // EBUSY on exclusive open / unmount failed
	CodeUnsupported    Code = "unsupported"      // raw devices on this OS
)

// ErrUnsupported is returned by List on systems without device enumeration.
var ErrUnsupported = errors.New("listing block devices is not supported on this operating system yet")

// refusal is a RefusedError whose message is shown escaped
// (printable.String): it may quote a card reader's model, a mount point
// named after a card's filesystem label, a path the user typed.
func refusal(dev string, code Code, format string, args ...any) *RefusedError {
	return &RefusedError{Device: dev, Reason: code, Msg: printable.String(fmt.Sprintf(format, args...))}
}

// RefusedError says why a target may not be written.
type RefusedError struct {
	Device string // the path as resolved ("/dev/sdb")
	Reason Code
	Msg    string // one line for users, already names the device
	// Suggestion is a better target when there is one: the whole disk for a
	// partition path.
	Suggestion string
}

func (e *RefusedError) Error() string {
	msg := "refusing to write: " + e.Msg
	if e.Suggestion != "" {
		msg += " (did you mean " + e.Suggestion + "?)"
	}
	return msg
}

// IOError is a failed read, write or sync on a target with the byte region
// it concerns. For "sync" the region is everything written since the last
// successful sync: the kernel only tells us that some of it failed.
type IOError struct {
	Op     string // "write", "read", "sync"
	Path   string
	Offset int64 // first byte of the failed region
	Len    int64 // length of the region
	Err    error // the errno (EIO, ENODEV, ...)
}

func (e *IOError) Error() string {
	region := fmt.Sprintf("bytes %d-%d (at %s)", e.Offset, e.Offset+e.Len-1, humanSize(e.Offset))
	if e.Len <= 0 {
		region = fmt.Sprintf("offset %d (at %s)", e.Offset, humanSize(e.Offset))
	}
	hint := ""
	if IsDeviceGone(e.Err) {
		hint = "; was the card removed or is it faulty?"
	}
	return fmt.Sprintf("%s %s failed in %s: %v%s", e.Op, e.Path, region, e.Err, hint)
}

func (e *IOError) Unwrap() error { return e.Err }
