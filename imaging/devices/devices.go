// Package devices finds block devices that can take a Talos image (SD cards,
// USB sticks), refuses anything that looks like a system or data disk, and
// opens the chosen target exclusively for writing.
//
// Safety rules (Assess), checked in this order; the first that fires is the
// refusal reported:
//
//  1. virtual devices (loop, dm, md, ram, zram) are refused; loop devices
//     are allowed only with Options.AllowLoop;
//  2. a disk holding /, /boot, /boot/efi, /usr, /home or /var (directly, or
//     through a dm/LVM/md holder) is a system disk;
//  3. a disk with active swap on it;
//  4. a disk with holders (dm, LVM, LUKS, md RAID on it or its partitions):
//     something else owns it, unmounting is not enough;
//  5. a disk with a mount outside the removable-media directories /media/
//     and /run/media/ (where desktop automounters put cards). /mnt/ is not
//     one of them on purpose: it is where admins mount data disks by hand,
//     so a card mounted there must be unmounted by the user first;
//  6. read-only devices (write-protect switch on SD cards);
//  7. devices without medium (size 0, an empty card reader);
//  8. non-removable disks, unless Options.ForceNonRemovable. A disk counts
//     as removable when sysfs says removable=1, or it sits on USB (USB card
//     readers and sticks), or it is an mmc device whose card type is SD
//     (laptop readers report removable=0 for mmcblk). Internal eMMC (mmc
//     type "MMC") and its boot areas count as non-removable;
//  9. a disk smaller than the image (when the image size is known).
//
// Check additionally refuses paths that don't exist, directories,
// partitions (suggesting the whole disk), character devices and regular
// files inside /dev (a leftover of `dd of=/dev/sdX` without a card). A
// regular file elsewhere is accepted as an image-file target.
//
// Every refusal is a *RefusedError; the CLI maps all of them to exit code 5
// (see RefusedError.ExitCode).
//
// The rules are the same on macOS and Windows, with each system's
// conventions (platform.go): on macOS the disks come from `diskutil list`
// and `diskutil info` (diskutil.go), the system disk is the one under "/"
// and /System/Volumes (through its APFS container, a holder), APFS
// containers and disk images are virtual, Finder's /Volumes is where media
// are mounted, and /dev/rdiskN is written; on Windows the physical drives
// and volumes come from DeviceIoControl (winstorage.go), the system disk
// holds the Windows directory's volume, a volume spanning disks is a
// holder, virtual disks are virtual, drive letters are dismounted. A disk
// those backends cannot describe is refused (CodeUnknownDevice).
package devices

import (
	"fmt"
	"os"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/talosflash/talosflash/internal/printable"
)

// Transport says how a disk is attached.
type Transport string

const (
	TransportUSB     Transport = "usb"
	TransportMMC     Transport = "mmc"
	TransportNVMe    Transport = "nvme"
	TransportSATA    Transport = "sata"
	TransportSCSI    Transport = "scsi"
	TransportVirtio  Transport = "virtio"
	TransportLoop    Transport = "loop"
	TransportDM      Transport = "dm"
	TransportMD      Transport = "md"
	TransportRAM     Transport = "ram"
	TransportZRAM    Transport = "zram"
	TransportAPFS    Transport = "apfs"       // macOS: an APFS container (synthesized disk)
	TransportImage   Transport = "disk-image" // macOS: an attached disk image
	TransportVHD     Transport = "vhd"        // Windows: a virtual or file-backed disk
	TransportSpaces  Transport = "storage-spaces"
	TransportFile    Transport = "file" // a regular file used as target
	TransportUnknown Transport = ""
)

// Virtual reports whether the transport is a kernel-made device, not hardware.
func (t Transport) Virtual() bool {
	switch t {
	case TransportLoop, TransportDM, TransportMD, TransportRAM, TransportZRAM,
		TransportAPFS, TransportImage, TransportVHD, TransportSpaces:
		return true
	}
	return false
}

// Mount is one mount of a filesystem that lives on a disk or partition.
type Mount struct {
	Point  string // "/media/user/boot"
	FSType string // "vfat"
	Via    string // holder device the filesystem sits on ("dm-0"), "" when direct
}

// Partition is a partition of a Disk, as listed in sysfs.
type Partition struct {
	Name    string // "sdb1"
	Path    string // "/dev/sdb1"
	Number  int
	Size    int64
	Mounts  []Mount
	Swap    bool     // active swap (directly or via a holder)
	Holders []string // devices stacked on it: "dm-0", "md127"
}

// Disk is a whole block device (or, for TransportFile, a regular file).
type Disk struct {
	Name      string // "sdb"
	Path      string // "/dev/sdb"
	Size      int64  // bytes
	SizeHuman string // "29.7 GiB"
	Vendor    string
	Model     string
	Transport Transport
	MMCType   string // mmc only: "SD", "MMC" (eMMC), "SDIO"
	Removable bool   // sysfs removable flag as reported by the kernel
	ReadOnly  bool
	Dev       string // "major:minor"

	Partitions []Partition
	Mounts     []Mount // filesystems on the whole disk (no partition table)
	Swap       bool    // swap on the whole disk
	Holders    []string

	// Safe and Refusal are Assess(0, Options{}): whether the disk may be
	// chosen with default options and no known image size. A GUI shows
	// unsafe disks disabled with Refusal.Msg.
	Safe    bool
	Refusal *RefusedError

	// checked is what Check saw of an existing image-file target: Open
	// only writes the very same file (no check-then-open race).
	checked os.FileInfo
	// rules are the operating system's mount and holder conventions
	// (nil: Linux). Set by the macOS and Windows backends' parsers.
	rules *platform
	// system, when set, names why the backend knows this is a system disk
	// without a mount showing it (macOS "OSInternal" disks).
	system string
	// unknown, when set, is why the backend could not describe the disk
	// well enough to judge it: Assess refuses it whatever the options.
	unknown string
}

// Options relax the safety rules. The zero value is the safe default.
type Options struct {
	// ForceNonRemovable allows disks that are neither removable, USB nor SD.
	ForceNonRemovable bool
	// AllowLoop allows loop devices (tests, building images into files).
	AllowLoop bool
	// CreateFile lets Check/Open accept a path that does not exist yet
	// (outside /dev) and create it as an image-file target.
	CreateFile bool
	// BlockOnly accepts existing block devices only: no image file, no new
	// file (CreateFile is ignored). The elevated child runs as root on a
	// path its caller names: a file target would plant or overwrite any
	// file. Open judges the path it opens, so a symlink swapped after the
	// caller's own check still opens no file.
	BlockOnly bool
	// SyncEvery makes Device.Write fsync after this many bytes so that write
	// errors surface close to where they happened (and dirty page cache stays
	// bounded). 0 means DefaultSyncEvery; negative disables periodic syncs.
	SyncEvery int64
}

// RemovableLike reports whether the disk counts as removable for rule 8.
func (d *Disk) RemovableLike() bool {
	switch {
	case d.Removable, d.Transport == TransportUSB:
		return true
	case d.Transport == TransportMMC:
		return d.MMCType == "SD" && !isMMCHardwarePart(d.Name)
	}
	return false
}

// AllMounts lists the mounts on the whole disk and on all its partitions.
func (d *Disk) AllMounts() []Mount {
	all := append([]Mount(nil), d.Mounts...)
	for _, p := range d.Partitions {
		all = append(all, p.Mounts...)
	}
	return all
}

// Description is vendor and model joined ("Generic SD/MMC"), escaped
// (printable.String): what a card reader reports (its SCSI INQUIRY strings
// in sysfs, diskutil's media name) or a loop device's backing file name.
// Vendor and Model keep the data as it is (JSON).
func (d *Disk) Description() string {
	desc := strings.TrimSpace(d.Vendor + " " + d.Model)
	if desc == "" {
		return "unknown model"
	}
	return printable.String(desc)
}

// String is a one-line summary: "sdb  29.7 GiB  Generic SD/MMC (usb, removable)".
func (d *Disk) String() string {
	var flags []string
	if d.Transport != TransportUnknown {
		flags = append(flags, string(d.Transport))
	}
	if d.Transport != TransportFile {
		if d.RemovableLike() {
			flags = append(flags, "removable")
		} else {
			flags = append(flags, "fixed")
		}
	}
	if d.ReadOnly {
		flags = append(flags, "read-only")
	}
	s := fmt.Sprintf("%s  %s  %s", d.Name, d.SizeHuman, d.Description())
	if len(flags) > 0 {
		s += " (" + strings.Join(flags, ", ") + ")"
	}
	return s
}

func humanSize(n int64) string {
	if n < 0 {
		n = 0
	}
	return humanize.IBytesN(uint64(n), 3)
}

// systemMounts are mount points whose disk must never be overwritten.
var systemMounts = []string{"/", "/boot", "/boot/efi", "/usr", "/home", "/var"}

// removableMountPrefixes are where desktop automounters (udisks) mount
// removable media; only mounts there are unmounted automatically.
var removableMountPrefixes = []string{"/media/", "/run/media/"}

func isSystemMount(point string) bool {
	for _, s := range systemMounts {
		if point == s {
			return true
		}
	}
	return false
}

func isRemovableMediaMount(point string) bool {
	for _, p := range removableMountPrefixes {
		if strings.HasPrefix(point, p) && len(point) > len(p) {
			return true
		}
	}
	return false
}

// Assess applies the safety rules (see the package doc) to the disk for an
// image of imageSize bytes (<= 0: unknown) and returns the first refusal, or
// nil when the disk may be written.
func (d *Disk) Assess(imageSize int64, opts Options) *RefusedError {
	refuse := func(code Code, format string, args ...any) *RefusedError {
		return refusal(d.Path, code, format, args...)
	}
	if d.Transport == TransportFile {
		return nil // a regular file: nothing to protect beyond what the user named
	}
	if d.unknown != "" {
		return refuse(CodeUnknownDevice, "%s cannot be judged safe: %s", d.Path, d.unknown)
	}
	rules := d.platform()
	if d.Transport.Virtual() && !(d.Transport == TransportLoop && opts.AllowLoop) {
		if d.Transport == TransportLoop {
			return refuse(CodeVirtual, "%s is a loop device, not a card (allowed with --allow-loop, for testing)", d.Path)
		}
		return refuse(CodeVirtual, "%s is a virtual %s device, not a card", d.Path, d.Transport)
	}
	if d.system != "" {
		return refuse(CodeSystemDisk, "%s holds the system filesystem %s", d.Path, d.system)
	}
	for _, m := range d.AllMounts() {
		if rules.systemMount(m.Point) {
			return refuse(CodeSystemDisk, "%s holds the system filesystem %s%s", d.Path, m.Point, via(m.Via))
		}
	}
	if d.Swap {
		return refuse(CodeSwap, "%s is in use as swap", d.Path)
	}
	for _, p := range d.Partitions {
		if p.Swap {
			return refuse(CodeSwap, "%s has swap in use on %s", d.Path, p.Path)
		}
	}
	if len(d.Holders) > 0 {
		return refuse(CodeHolders, "%s is in use by %s (%s); release it first", d.Path, strings.Join(d.Holders, ", "), rules.holderKinds)
	}
	for _, p := range d.Partitions {
		if len(p.Holders) > 0 {
			return refuse(CodeHolders, "%s is in use by %s on %s (%s); release it first", d.Path, strings.Join(p.Holders, ", "), p.Path, rules.holderKinds)
		}
	}
	for _, m := range d.AllMounts() {
		if !rules.mediaMount(m.Point) {
			return refuse(CodeMounted, "%s is mounted at %s, outside %s; unmount it yourself if it really is the card", d.Path, m.Point, rules.mediaDirs)
		}
	}
	if d.ReadOnly {
		return refuse(CodeReadOnly, "%s is read-only (check the write-protect switch on the card)", d.Path)
	}
	if d.Size <= 0 {
		return refuse(CodeNoMedium, "%s has no medium (is the card inserted?)", d.Path)
	}
	explicitLoop := d.Transport == TransportLoop && opts.AllowLoop // the user named it: removability is moot
	if !d.RemovableLike() && !opts.ForceNonRemovable && !explicitLoop {
		return refuse(CodeNotRemovable, "%s (%s) is not a removable disk; force non-removable disks explicitly if you are sure", d.Path, strings.TrimPrefix(d.String(), d.Name+"  "))
	}
	if imageSize > 0 && d.Size < imageSize {
		return refuse(CodeTooSmall, "%s", tooSmallMsg(d.Path, d.Size, imageSize))
	}
	return nil
}

// tooSmallMsg says by how much a target is too small, in exact bytes when
// the rounded sizes read the same ("64.0 MiB, the image needs 64.0 MiB").
func tooSmallMsg(path string, have, need int64) string {
	h, n := humanSize(have), humanSize(need)
	if h == n {
		h, n = fmt.Sprintf("%s (%d bytes)", h, have), fmt.Sprintf("%s (%d bytes)", n, need)
	}
	return fmt.Sprintf("%s is too small: %s, the image needs %s", path, h, n)
}

func via(holder string) string {
	if holder == "" {
		return ""
	}
	return " (via " + holder + ")"
}

func (d *Disk) assessDefault() {
	d.Refusal = d.Assess(0, Options{})
	d.Safe = d.Refusal == nil
}
