//go:build darwin

package devices

// macOS backend: diskutil lists and judges (diskutil.go does the parsing
// and the decisions), the raw node /dev/rdiskN is written, `diskutil
// unmountDisk` runs before and `diskutil eject` after. Compiled and vetted
// on Linux only; never run on a Mac by its authors (see docs/PLATFORMS.md).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// devicesSupported stays false: it gates the sysfs code paths, which macOS
// does not have. Disks are handled by nativeList/nativeCheck.
const devicesSupported = false

func deviceNumber(fs.FileInfo) (string, bool) { return "", false }

const (
	diskutilPath    = "/usr/sbin/diskutil" // absolute: never whatever "diskutil" is first in PATH
	diskutilTimeout = 60 * time.Second
	diskutilMaxOut  = 16 << 20 // bytes kept of one diskutil answer
)

// diskutil runs diskutil with a timeout, keeping at most diskutilMaxOut
// bytes of its output.
func diskutil(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), diskutilTimeout)
	defer cancel()
	var out, errOut limitedBuffer
	out.max, errOut.max = diskutilMaxOut, 4096
	cmd := exec.CommandContext(ctx, diskutilPath, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(firstLine(errOut.String() + "\n" + out.String()))
		if msg != "" {
			return nil, fmt.Errorf("diskutil %s: %w: %s", strings.Join(args, " "), err, msg)
		}
		return nil, fmt.Errorf("diskutil %s: %w", strings.Join(args, " "), err)
	}
	if out.truncated {
		return nil, fmt.Errorf("diskutil %s: more than %d bytes of output", strings.Join(args, " "), diskutilMaxOut)
	}
	return out.Bytes(), nil
}

type limitedBuffer struct {
	bytes.Buffer
	max       int
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.truncated = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

func darwinList() ([]Disk, error) {
	list, err := diskutil("list", "-plist")
	if err != nil {
		return nil, fmt.Errorf("list disks: %w", err)
	}
	return diskutilDisks(list, func(id string) ([]byte, error) { return diskutil("info", "-plist", id) })
}

func (l *Lister) nativeList() ([]Disk, bool, error) {
	if l != nil && l.SysRoot != "" {
		return nil, false, nil // a fake sysfs tree (tests)
	}
	disks, err := darwinList()
	return disks, true, err
}

func (l *Lister) nativeCheck(path string, imageSize int64, opts Options) (*Disk, bool, error) {
	name, ok := darwinDiskName(path)
	if !ok {
		return nil, false, nil
	}
	disks, err := darwinList()
	if err != nil {
		return nil, true, err
	}
	d, err := judgeListed(disks, name, path, imageSize, opts)
	return d, true, err
}

func (p Lister) openBlock(d *Disk, imageSize int64, opts Options) (*Device, error) {
	refuse := func(code Code, format string, args ...any) *RefusedError {
		return refusal(d.Path, code, format, args...)
	}
	if d.rules != darwinRules {
		return nil, refuse(CodeUnsupported, "%s was not listed by diskutil; only disks diskutil lists are written on macOS", d.Path)
	}
	var unmounted []string
	for _, m := range d.AllMounts() {
		unmounted = append(unmounted, m.Point)
	}
	if len(unmounted) > 0 {
		// Assess let through only mounts under /Volumes. unmountDisk
		// takes them all or fails (a file open on the card).
		if _, err := diskutil("unmountDisk", d.Path); err != nil {
			return nil, refuse(CodeBusy, "could not unmount %s (%v); close programs using the card and retry", d.Path, err)
		}
	}
	raw := rawDiskPath(d.Name)
	// O_EXLOCK: no other program that asks for a lock gets the device
	// while we write; O_NOFOLLOW: the node itself, never a link.
	f, err := os.OpenFile(raw, os.O_RDWR|unix.O_EXLOCK|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		// O_NONBLOCK only so that taking the lock cannot hang; I/O blocks.
		err = unix.SetNonblock(int(f.Fd()), false)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EWOULDBLOCK):
			return nil, refuse(CodeBusy, "%s is busy: mounted or held open by another program (Disk Utility, another flasher)", d.Path)
		case errors.Is(err, unix.EROFS):
			return nil, refuse(CodeReadOnly, "%s is read-only (check the write-protect switch on the card)", d.Path)
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENXIO), errors.Is(err, unix.ENODEV):
			return nil, refuse(CodeNotFound, "%s disappeared (was the card removed?)", d.Path)
		case errors.Is(err, fs.ErrPermission):
			return nil, fmt.Errorf("open %s for writing: %w (needs administrator rights: run with sudo, or let talosflash ask for them)", raw, err)
		}
		return nil, fmt.Errorf("open %s for writing: %w", raw, err)
	}
	// The number may now name another disk (card swapped): confirm model
	// and size while the node is open.
	if raw, err := diskutil("info", "-plist", d.Name); err != nil {
		f.Close()
		return nil, fmt.Errorf("check %s after opening it: %w", d.Path, err)
	} else if in, err := parseDiskutilInfo(raw); err != nil || strings.TrimSpace(in.MediaName) != d.Model || int64(in.Size) != d.Size {
		f.Close()
		return nil, refuse(CodeBusy, "%s changed while it was being opened; check the target again", d.Path)
	}
	dev := newDevice(f, d, true, opts)
	dev.Unmounted = unmounted
	// Raw nodes take whole blocks only: the image's tail is padded.
	dev.sector = 4096
	dev.afterClose = func() string {
		if _, err := diskutil("eject", d.Path); err != nil {
			return fmt.Sprintf("could not eject %s (%v); eject it in Finder before removing the card", d.Path, err)
		}
		return ""
	}
	return dev, nil
}

// rereadPartitions: macOS re-reads the partition table when the disk is
// ejected and reinserted; afterClose ejects it.
func rereadPartitions(*os.File) string { return "" }

// NeedsElevation reports whether the raw node of path needs administrator
// rights to be written (it does for everyone but root: /dev/rdisk* is
// root:operator 0640).
func NeedsElevation(path string) bool {
	if os.Geteuid() == 0 {
		return false
	}
	name, ok := darwinDiskName(path)
	if !ok {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			path = parentDir(path) // a file target still to be created
		}
		return unix.Access(path, unix.W_OK) != nil
	}
	return unix.Access(rawDiskPath(name), unix.W_OK) != nil
}

func parentDir(path string) string {
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		return path[:i]
	}
	return "."
}

// IsDeviceGone reports whether err means the device disappeared or failed.
func IsDeviceGone(err error) bool {
	return errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENXIO) || errors.Is(err, syscall.EIO)
}

const noFollow = unix.O_NOFOLLOW

func isLoop(err error) bool { return errors.Is(err, unix.ELOOP) }

// macOS asks for the administrator's password with its own dialog through
// osascript's "with administrator privileges", for the write step only.
// Limits: the elevated child's output (progress, result) arrives when it
// exits, and closing its stdin does not cancel it.
func init() {
	platformElevate = func(exe string, args []string) (*exec.Cmd, error) {
		if os.Geteuid() == 0 {
			return exec.Command(exe, args...), nil
		}
		script := "do shell script " + appleScriptString(ShellJoin(append([]string{exe}, args...))) + " with administrator privileges"
		return exec.Command("/usr/bin/osascript", "-e", script), nil
	}
}

// appleScriptString quotes s as an AppleScript string literal.
func appleScriptString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
