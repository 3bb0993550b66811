package devices

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// List returns the disks of the running system (see Lister.List).
func List() ([]Disk, error) { return DefaultLister().List() }

// Check decides whether path may be written with an image of imageSize bytes
// (<= 0: unknown) on the running system (see Lister.Check).
func Check(path string, imageSize int64, opts Options) (*Disk, error) {
	return DefaultLister().Check(path, imageSize, opts)
}

// Check resolves path (symlinks such as /dev/disk/by-id/... included) and
// applies the safety rules. It returns the disk it assessed (also with a
// refusal, when there is one, so callers can show it) and a *RefusedError
// when the target is refused; other errors mean the check itself failed.
// A regular file outside DevRoot is accepted as an image-file target; a
// path that does not exist only with Options.CreateFile, and never when it
// names a disk under DevRoot the way `sdb` names /dev/sdb (refused with
// that disk as the Suggestion; "./sdb" is the file).
func (l *Lister) Check(path string, imageSize int64, opts Options) (*Disk, error) {
	p := l.paths()
	refuse := func(dev string, code Code, format string, args ...any) *RefusedError {
		return refusal(dev, code, format, args...)
	}
	if path == "" {
		return nil, refuse("", CodeNotFound, "no target given")
	}
	// macOS and Windows name their disks themselves (/dev/disk4,
	// \\.\PhysicalDrive2): their backends judge those paths.
	if d, ok, err := l.nativeCheck(path, imageSize, opts); ok {
		return d, err
	}
	resolved, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) && opts.BlockOnly {
		return nil, refuse(path, CodeNotFound, "%s does not exist (is the card inserted? `talosflash devices` lists the disks)", path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		// `--device sdb` for /dev/sdb: never a new ./sdb. A path written
		// with a directory ("./sdb") may still be created as a file.
		if disk := p.diskNamed(path); disk != "" && (isBareName(path) || !opts.CreateFile) {
			msg := fmt.Sprintf("%s does not exist", path)
			if isBareName(path) && opts.CreateFile {
				msg += "; a new image file of that name is written as ./" + path
			}
			return nil, &RefusedError{Device: path, Reason: CodeNotFound, Msg: msg, Suggestion: disk}
		}
		abs, aerr := filepath.Abs(path)
		// Where the new file would really be created: through a symlinked
		// parent directory, never through a dangling symlink (both could
		// put a regular file into DevRoot).
		target := ""
		if aerr == nil {
			if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
				if dir, err = filepath.Abs(dir); err == nil {
					target = filepath.Join(dir, filepath.Base(abs))
				}
			}
		}
		if target != "" && inDir(target, p.DevRoot) {
			abs = target
		}
		if target != "" && opts.CreateFile && !inDir(abs, p.DevRoot) {
			if fi, err := os.Stat(filepath.Dir(target)); err == nil && fi.IsDir() {
				if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
					return &Disk{Name: filepath.Base(target), Path: target, Transport: TransportFile, SizeHuman: humanSize(0), Safe: true}, nil
				}
			}
		}
		if aerr == nil && inDir(abs, p.DevRoot) {
			return nil, refuse(path, CodeNotFound, "%s does not exist (is the card inserted? `talosflash devices` lists the disks)", path)
		}
		if !opts.CreateFile {
			return nil, refuse(path, CodeNotFound, "%s does not exist; an image is written onto an existing disk or file, and into a new file only when asked (flash --create-file)", path)
		}
		return nil, refuse(path, CodeNotFound, "%s does not exist", path)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", path, err)
	}
	if resolved, err = filepath.Abs(resolved); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", path, err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, refuse(resolved, CodeDirectory, "%s is a directory, not a disk or image file", resolved)
	}

	isBlock := fi.Mode()&fs.ModeDevice != 0 && fi.Mode()&fs.ModeCharDevice == 0
	if opts.BlockOnly && !isBlock {
		return nil, refuse(resolved, CodeNotBlockDevice, "%s is not a block device (%v): only a disk is written here", resolved, fi.Mode().Type())
	}
	if isBlock && !devicesSupported {
		return nil, refuse(resolved, CodeUnsupported, "writing to raw devices is not supported on this operating system yet; write to an image file instead")
	}
	// A name directly under DevRoot is looked up in sysfs even when it is not
	// a device node: that is how the fake trees in tests stand in for /dev.
	name := ""
	if filepath.Dir(resolved) == p.DevRoot {
		name = filepath.Base(resolved)
	}
	if isBlock || name != "" {
		s, err := p.snapshot()
		if err != nil && isBlock {
			return nil, err
		}
		if err == nil {
			if num, ok := deviceNumber(fi); ok && isBlock {
				if n := s.devByNum[num]; n != "" {
					name = n
				}
			}
			if name != "" && s.known(name) {
				if parent := s.parent[name]; parent != "" {
					return nil, p.partitionRefusal(resolved, parent, s, imageSize, opts)
				}
				d := p.readDisk(name, s)
				if r := d.Assess(imageSize, opts); r != nil {
					return &d, r
				}
				return &d, nil
			}
		}
		if isBlock {
			return nil, refuse(resolved, CodeUnknownDevice, "%s is a block device the kernel does not list in %s/block", resolved, p.SysRoot)
		}
	}

	if fi.Mode().IsRegular() {
		if disk := p.diskNamed(path); disk != "" && isBareName(path) {
			return nil, &RefusedError{Device: path, Reason: CodeAmbiguous, Suggestion: disk,
				Msg: fmt.Sprintf("%s names both the file ./%s here and the disk %s: give the disk's path for the card, or ./%s for the file", path, path, disk, path)}
		}
		if inDir(resolved, p.DevRoot) {
			return nil, refuse(resolved, CodeNotBlockDevice, "%s is a regular file inside %s, not a device (is the card inserted?)", resolved, p.DevRoot)
		}
		// Swap in use, as on a disk: the kernel would refuse the truncate
		// ("text file busy"), and the memory swapped out is in it.
		if sw, err := p.swapFileAt(fi); err != nil {
			return nil, err
		} else if sw != "" {
			return nil, refuse(resolved, CodeSwap, "%s is an active swap file: the memory swapped out to it would be lost (swapoff %s first, or choose another file)", resolved, sw)
		}
		if fi.Size() > 0 && !isImageFileName(resolved) {
			return nil, refuse(resolved, CodeNotImageFile, "%s is an existing file that does not look like a disk image (.img, .raw, .bin, .iso); it would be overwritten: delete it or choose another name", resolved)
		}
		return &Disk{Name: filepath.Base(resolved), Path: resolved, Size: fi.Size(), SizeHuman: humanSize(fi.Size()),
			Model: "image file", Transport: TransportFile, Safe: true, checked: fi}, nil
	}
	return nil, refuse(resolved, CodeNotBlockDevice, "%s is not a block device or a regular file", resolved)
}

// isBareName reports whether path is a name without any directory, the way
// a disk is named under /dev ("sdb", "loop2", "mmcblk0").
func isBareName(path string) bool {
	return path != "" && path != "." && path != ".." && !strings.ContainsRune(path, '/') && !strings.ContainsRune(path, filepath.Separator)
}

// diskNamed is the path under DevRoot that a relative target path names
// ("sdb" -> /dev/sdb, "disk/by-id/usb-..." -> /dev/disk/by-id/usb-...),
// when something other than a directory is there; "" otherwise.
func (p Lister) diskNamed(path string) string {
	if path == "" || filepath.IsAbs(path) || filepath.VolumeName(path) != "" {
		return ""
	}
	dev := filepath.Join(p.DevRoot, path)
	if dev == filepath.Clean(p.DevRoot) || !inDir(dev, p.DevRoot) {
		return ""
	}
	if fi, err := os.Stat(dev); err != nil || fi.IsDir() {
		return ""
	}
	return dev
}

// isImageFileName reports whether a file target's name says it is a disk
// image: only those are overwritten when they already hold data, so a typo
// like --device /etc/fstab (as root) cannot truncate a real file.
func isImageFileName(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".img", ".raw", ".bin", ".iso":
		return true
	}
	return false
}

// partitionRefusal refuses a partition path and suggests its disk, but only
// when that disk would itself be accepted: never point users at a system disk.
func (p Lister) partitionRefusal(partPath, parent string, s *snapshot, imageSize int64, opts Options) *RefusedError {
	disk := p.readDisk(parent, s)
	r := &RefusedError{Device: partPath, Reason: CodePartition,
		Msg: fmt.Sprintf("%s is a partition; images are written to the whole disk", partPath)}
	if dr := disk.Assess(imageSize, opts); dr != nil {
		r.Msg += fmt.Sprintf(", and its disk %s is refused too: %s", disk.Path, dr.Msg)
	} else {
		r.Suggestion = disk.Path
	}
	return r
}

func inDir(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Open checks path, unmounts the disk's removable-media mounts, and opens it
// exclusively for writing on the running system (see Lister.Open).
func Open(path string, imageSize int64, opts Options) (*Device, error) {
	return DefaultLister().Open(path, imageSize, opts)
}

// Opener adapts Open to imaging.FlashOptions.Open. The app wraps it to
// return imaging.Target (take care not to return a typed nil *Device as a
// non-nil interface on error).
func Opener(opts Options) func(path string, size int64) (*Device, error) {
	return func(path string, size int64) (*Device, error) { return Open(path, size, opts) }
}

// Open runs Check, then for a block device unmounts its partitions mounted
// under /media or /run/media (listed in Device.Unmounted) and opens it with
// O_EXCL so the kernel refuses a device still mounted or in use. A regular
// file target is opened and truncated (created with Options.CreateFile).
func (l *Lister) Open(path string, imageSize int64, opts Options) (*Device, error) {
	d, err := l.Check(path, imageSize, opts)
	if err != nil {
		return nil, err
	}
	if d.Transport == TransportFile {
		if opts.BlockOnly { // Check refused it already: never a file here
			return nil, &RefusedError{Device: d.Path, Reason: CodeNotBlockDevice, Msg: fmt.Sprintf("%s is not a block device: only a disk is written here", d.Path)}
		}
		f, err := openImageFile(d, opts)
		if err != nil {
			return nil, err
		}
		return newDevice(f, d, false, opts), nil
	}
	return l.paths().openBlock(d, imageSize, opts)
}

// beforeFileOpen runs between Check and the open of an image file (tests
// swap the file there).
var beforeFileOpen = func() {}

// openImageFile opens the file Check approved without a check-then-open
// race: never through a symlink (O_NOFOLLOW), never truncating on open; a
// new file is created exclusively, an existing one must be the same file
// (device and inode) Check saw, and is truncated only then.
func openImageFile(d *Disk, opts Options) (*os.File, error) {
	beforeFileOpen()
	changed := func() error {
		return &RefusedError{Device: d.Path, Reason: CodeNotImageFile,
			Msg: fmt.Sprintf("%s changed between the check and the open (replaced or linked elsewhere); nothing was written, check the target again", d.Path)}
	}
	flags := os.O_RDWR | noFollow
	if d.checked == nil {
		if !opts.CreateFile {
			return nil, fmt.Errorf("open image file %s: %w", d.Path, fs.ErrNotExist)
		}
		flags |= os.O_CREATE | os.O_EXCL
	}
	// The kernel's "text file busy": a swap file swapped on after Check,
	// a program running from the file. The safety rules' refusal.
	busy := func() error {
		return &RefusedError{Device: d.Path, Reason: CodeBusy,
			Msg: fmt.Sprintf("%s is in use (an active swap file, or a program running from it); nothing was written", d.Path)}
	}
	f, err := os.OpenFile(d.Path, flags, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) || isLoop(err) {
			return nil, changed()
		}
		if errors.Is(err, syscall.ETXTBSY) {
			return nil, busy()
		}
		return nil, fmt.Errorf("open image file: %w", err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("open image file: %w", err)
	case !fi.Mode().IsRegular(), d.checked != nil && !os.SameFile(fi, d.checked):
		f.Close()
		return nil, changed()
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		if errors.Is(err, syscall.ETXTBSY) {
			return nil, busy()
		}
		return nil, fmt.Errorf("truncate image file %s: %w", d.Path, err)
	}
	return f, nil
}
