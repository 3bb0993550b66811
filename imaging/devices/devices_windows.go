//go:build windows

package devices

// Windows backend: physical drives and volumes are read with DeviceIoControl
// (winstorage.go decodes the structures and makes the decisions); before a
// write every volume on the disk is locked and dismounted, and the disk is
// opened unbuffered and write-through, written and read back in whole
// sectors. Compiled and vetted on Linux, its unit tests run under Wine; the
// IOCTLs have never met a real disk (see docs/PLATFORMS.md).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

const devicesSupported = false // gates the sysfs code paths only

func deviceNumber(fs.FileInfo) (string, bool) { return "", false }

// IOCTL codes (winioctl.h; CTL_CODE(type, function, METHOD_BUFFERED, FILE_ANY_ACCESS)).
const (
	ioctlStorageQueryProperty       = 0x002D1400
	ioctlDiskGetDriveGeometryEx     = 0x000700A0
	ioctlDiskIsWritable             = 0x00070024
	ioctlDiskUpdateProperties       = 0x00070140
	ioctlVolumeGetVolumeDiskExtents = 0x00560000
	fsctlLockVolume                 = 0x00090018
	fsctlUnlockVolume               = 0x0009001C
	fsctlDismountVolume             = 0x00090020
)

// maxDrives bounds the \\.\PhysicalDriveN probe (numbers can have gaps).
const maxDrives = 64

func openQuery(path string, access uint32, flags uint32) (windows.Handle, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return windows.InvalidHandle, err
	}
	return windows.CreateFile(p, access, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, flags, 0)
}

// ioctl runs one buffered IOCTL and returns the bytes the driver wrote,
// growing the output buffer (up to 64 KiB) when it is too small.
func ioctl(h windows.Handle, code uint32, in []byte, outSize int) ([]byte, error) {
	for {
		out := make([]byte, outSize)
		var n uint32
		var inPtr *byte
		if len(in) > 0 {
			inPtr = &in[0]
		}
		err := windows.DeviceIoControl(h, code, inPtr, uint32(len(in)), &out[0], uint32(len(out)), &n, nil)
		if (errors.Is(err, windows.ERROR_MORE_DATA) || errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER)) && outSize < 64<<10 {
			outSize *= 4
			continue
		}
		if err != nil {
			return nil, err
		}
		return out[:n], nil
	}
}

// storagePropertyQuery is STORAGE_PROPERTY_QUERY{StorageDeviceProperty,
// PropertyStandardQuery}.
var storagePropertyQuery = make([]byte, 12)

func readDrive(n int) (winDrive, bool) {
	dr := winDrive{Number: n}
	h, err := openQuery(`\\.\PhysicalDrive`+strconv.Itoa(n), 0, 0)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
		return dr, false
	}
	if err != nil {
		dr.Err = err
		return dr, true
	}
	defer windows.CloseHandle(h)
	if dr.Descriptor, err = ioctl(h, ioctlStorageQueryProperty, storagePropertyQuery, 1024); err != nil {
		dr.Err = fmt.Errorf("storage property query: %w", err)
		return dr, true
	}
	dr.Geometry, err = ioctl(h, ioctlDiskGetDriveGeometryEx, nil, 256)
	switch {
	case errors.Is(err, windows.ERROR_NOT_READY), errors.Is(err, windows.ERROR_NO_MEDIA_IN_DRIVE):
		dr.NoMedium, dr.Geometry = true, nil
	case err != nil:
		dr.Err = fmt.Errorf("drive geometry: %w", err)
		return dr, true
	}
	if _, err := ioctl(h, ioctlDiskIsWritable, nil, 1); errors.Is(err, windows.ERROR_WRITE_PROTECT) {
		dr.ReadOnly = true
	}
	return dr, true
}

func readVolumes() ([]winVolume, error) {
	buf := make([]uint16, windows.MAX_PATH+1)
	find, err := windows.FindFirstVolume(&buf[0], uint32(len(buf)))
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	defer windows.FindVolumeClose(find)
	var vols []winVolume
	for {
		guid := windows.UTF16ToString(buf)
		vols = append(vols, readVolume(guid))
		if err := windows.FindNextVolume(find, &buf[0], uint32(len(buf))); err != nil {
			if errors.Is(err, windows.ERROR_NO_MORE_FILES) {
				return vols, nil
			}
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		if len(vols) > 4096 {
			return nil, errors.New("list volumes: more than 4096 volumes")
		}
	}
}

func readVolume(guid string) winVolume {
	v := winVolume{GUIDPath: guid}
	g, _ := windows.UTF16PtrFromString(guid)
	names := make([]uint16, 1024)
	var n uint32
	err := windows.GetVolumePathNamesForVolumeName(g, &names[0], uint32(len(names)), &n)
	if errors.Is(err, windows.ERROR_MORE_DATA) && n > 0 && n < 1<<20 {
		names = make([]uint16, n)
		err = windows.GetVolumePathNamesForVolumeName(g, &names[0], uint32(len(names)), &n)
	}
	if err != nil {
		v.Err = fmt.Errorf("mount points: %w", err)
		return v
	}
	v.Paths = multiSZ(names[:min(int(n), len(names))])
	h, err := openQuery(strings.TrimSuffix(guid, `\`), 0, 0)
	if err != nil {
		v.Err = err
		return v
	}
	defer windows.CloseHandle(h)
	v.Extents, v.Err = ioctl(h, ioctlVolumeGetVolumeDiskExtents, nil, 8+24*4)
	return v
}

// multiSZ splits a list of NUL-terminated strings.
func multiSZ(s []uint16) []string {
	var out []string
	start := 0
	for i, c := range s {
		if c == 0 {
			if i > start {
				out = append(out, windows.UTF16ToString(s[start:i]))
			}
			start = i + 1
		}
	}
	return out
}

func windowsList() ([]Disk, error) {
	vols, err := readVolumes()
	if err != nil {
		return nil, err
	}
	sysDir, err := windows.GetWindowsDirectory()
	if err != nil {
		return nil, fmt.Errorf("find the Windows directory: %w", err)
	}
	var drives []winDrive
	for n := 0; n < maxDrives; n++ {
		if dr, ok := readDrive(n); ok {
			drives = append(drives, dr)
		}
	}
	return windowsDisks(drives, vols, sysDir), nil
}

func (l *Lister) nativeList() ([]Disk, bool, error) {
	if l != nil && l.SysRoot != "" {
		return nil, false, nil
	}
	disks, err := windowsList()
	return disks, true, err
}

func (l *Lister) nativeCheck(path string, imageSize int64, opts Options) (*Disk, bool, error) {
	name, ok := windowsDiskName(path)
	if !ok {
		return nil, false, nil
	}
	disks, err := windowsList()
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
	if d.rules == nil || !strings.HasPrefix(d.Name, "PhysicalDrive") {
		return nil, refuse(CodeUnsupported, "%s is not a physical drive listed by Windows", d.Path)
	}
	var locked []windows.Handle
	release := func() {
		for _, h := range locked {
			var n uint32
			windows.DeviceIoControl(h, fsctlUnlockVolume, nil, 0, nil, 0, &n, nil)
			windows.CloseHandle(h)
		}
		locked = nil
	}
	var unmounted []string
	for _, part := range d.Partitions {
		h, err := lockVolume(part.Path)
		if err != nil {
			release()
			if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
				return nil, fmt.Errorf("lock %s: %w (needs administrator rights: run talosflash as administrator)", part.Path, err)
			}
			return nil, refuse(CodeBusy, "could not lock and dismount %s (%v): files on it are in use; close programs using the card and retry", part.Name, err)
		}
		locked = append(locked, h)
		for _, m := range part.Mounts {
			unmounted = append(unmounted, m.Point)
		}
	}
	h, err := openQuery(d.Path, windows.GENERIC_READ|windows.GENERIC_WRITE, windows.FILE_FLAG_NO_BUFFERING|windows.FILE_FLAG_WRITE_THROUGH)
	if err != nil {
		release()
		switch {
		case errors.Is(err, windows.ERROR_ACCESS_DENIED):
			return nil, fmt.Errorf("open %s for writing: %w (needs administrator rights: run talosflash as administrator)", d.Path, err)
		case errors.Is(err, windows.ERROR_WRITE_PROTECT):
			return nil, refuse(CodeReadOnly, "%s is read-only (check the write-protect switch on the card)", d.Path)
		case errors.Is(err, windows.ERROR_NOT_READY), errors.Is(err, windows.ERROR_NO_MEDIA_IN_DRIVE):
			return nil, refuse(CodeNoMedium, "%s has no medium (is the card inserted?)", d.Path)
		case errors.Is(err, windows.ERROR_FILE_NOT_FOUND), errors.Is(err, windows.ERROR_PATH_NOT_FOUND):
			return nil, refuse(CodeNotFound, "%s disappeared (was the card removed?)", d.Path)
		case errors.Is(err, windows.ERROR_SHARING_VIOLATION):
			return nil, refuse(CodeBusy, "%s is busy: held open by another program (a disk utility or another flasher)", d.Path)
		}
		return nil, fmt.Errorf("open %s for writing: %w", d.Path, err)
	}
	fail := func(err error) (*Device, error) {
		windows.CloseHandle(h)
		release()
		return nil, err
	}
	// The number may now name another disk (card reader replugged):
	// confirm model and size on the open handle.
	raw, err := ioctl(h, ioctlStorageQueryProperty, storagePropertyQuery, 1024)
	if err != nil {
		return fail(fmt.Errorf("query %s: %w", d.Path, err))
	}
	desc, err := decodeStorageDescriptor(raw)
	if err != nil {
		return fail(fmt.Errorf("query %s: %w", d.Path, err))
	}
	raw, err = ioctl(h, ioctlDiskGetDriveGeometryEx, nil, 256)
	if err != nil {
		return fail(refuse(CodeNoMedium, "%s has no medium (is the card inserted?)", d.Path))
	}
	geo, err := decodeDiskGeometryEx(raw)
	if err != nil {
		return fail(fmt.Errorf("query %s: %w", d.Path, err))
	}
	if desc.Product != d.Model || desc.Vendor != d.Vendor || geo.DiskSize != d.Size {
		return fail(refuse(CodeBusy, "%s changed while it was being opened (now %s %s, %s); check the target again", d.Path, desc.Vendor, desc.Product, humanSize(geo.DiskSize)))
	}
	if _, err := ioctl(h, ioctlDiskIsWritable, nil, 1); errors.Is(err, windows.ERROR_WRITE_PROTECT) {
		return fail(refuse(CodeReadOnly, "%s is read-only (check the write-protect switch on the card)", d.Path))
	}
	if imageSize > 0 && geo.DiskSize < imageSize {
		return fail(refuse(CodeTooSmall, "%s", tooSmallMsg(d.Path, geo.DiskSize, imageSize)))
	}
	dev := newDevice(os.NewFile(uintptr(h), d.Path), d, true, opts)
	dev.Unmounted = unmounted
	dev.sector = int(geo.BytesPerSector)
	dev.afterClose = func() string { release(); return "" }
	return dev, nil
}

// lockVolume opens a volume, locks it (a few tries: Explorer and antivirus
// scanners hold volumes briefly) and dismounts it. The handle keeps the
// lock until it is closed.
func lockVolume(path string) (windows.Handle, error) {
	h, err := openQuery(path, windows.GENERIC_READ|windows.GENERIC_WRITE, 0)
	if err != nil {
		return windows.InvalidHandle, err
	}
	var n uint32
	for try := 0; ; try++ {
		err = windows.DeviceIoControl(h, fsctlLockVolume, nil, 0, nil, 0, &n, nil)
		if err == nil || try == 4 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err == nil {
		err = windows.DeviceIoControl(h, fsctlDismountVolume, nil, 0, nil, 0, &n, nil)
	}
	if err != nil {
		windows.CloseHandle(h)
		return windows.InvalidHandle, err
	}
	return h, nil
}

// rereadPartitions tells Windows the disk's layout changed so the image's
// partitions appear.
func rereadPartitions(f *os.File) string {
	var n uint32
	if err := windows.DeviceIoControl(windows.Handle(f.Fd()), ioctlDiskUpdateProperties, nil, 0, nil, 0, &n, nil); err != nil {
		return fmt.Sprintf("Windows could not re-read the partition table of %s (%v); replug the card before using it", f.Name(), err)
	}
	return ""
}

func isElevated() bool { return windows.GetCurrentProcessToken().IsElevated() }

// NeedsElevation: raw disks need an elevated (administrator) process.
func NeedsElevation(path string) bool {
	if _, ok := windowsDiskName(path); ok {
		return !isElevated()
	}
	return false
}

// IsDeviceGone reports whether err means the device disappeared or failed.
func IsDeviceGone(err error) bool {
	for _, e := range []error{windows.ERROR_NOT_READY, windows.ERROR_DEVICE_NOT_CONNECTED, windows.ERROR_NO_SUCH_DEVICE,
		windows.ERROR_DEV_NOT_EXIST, windows.ERROR_IO_DEVICE, windows.ERROR_CRC, windows.ERROR_MEDIA_CHANGED, windows.ERROR_NO_MEDIA_IN_DRIVE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return errors.Is(err, syscall.EIO)
}

const noFollow = 0

func isLoop(error) bool { return false }

// Windows cannot pipe a child's output through the UAC prompt, so the
// write step is not re-launched: an elevated process (the packaged app asks
// for it in its manifest, or "Run as administrator") writes itself, any
// other gets the command to run in an administrator terminal.
func init() {
	platformElevate = func(exe string, args []string) (*exec.Cmd, error) {
		if isElevated() {
			return exec.Command(exe, args...), nil
		}
		return nil, &ElevationError{Command: windowsCommandLine(append([]string{exe}, args...)),
			Reason: "writing to a disk needs administrator rights (start talosflash with \"Run as administrator\")"}
	}
}

func windowsCommandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = windows.EscapeArg(a)
	}
	return strings.Join(q, " ")
}
