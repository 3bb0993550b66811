//go:build linux

package devices

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/talosflash/talosflash/internal/printable"

	"golang.org/x/sys/unix"
)

// The UDisks2 D-Bus API (storaged-project/udisks, data/org.freedesktop.UDisks2.xml;
// Block.OpenDevice since 2.7.3, Debian 12 ships 2.9.4).
const (
	udisksBus       = "org.freedesktop.UDisks2"
	udisksRoot      = dbus.ObjectPath("/org/freedesktop/UDisks2")
	udisksBlock     = udisksBus + ".Block"
	udisksFS        = udisksBus + ".Filesystem"
	udisksPartition = udisksBus + ".Partition"
	udisksDrive     = udisksBus + ".Drive"
)

// UDisksOpenFlags are the flags a card is opened with for the flash: the
// same O_EXCL the root path uses (the kernel refuses a mounted or held
// device) and O_DIRECT (the pipeline turns it off for an unaligned tail).
// UDisks2 passes options.flags to open(2) as they are, refusing only
// O_RDWR and O_WRONLY there (the mode argument says "rw"); it adds no
// flag itself (src/udiskslinuxblock.c open_device, 2.9.4 to main). The
// descriptor arrives close-on-exec all the same: Go receives SCM_RIGHTS
// with MSG_CMSG_CLOEXEC.
const UDisksOpenFlags = unix.O_EXCL | unix.O_DIRECT

// udisksObjects is GetManagedObjects' answer: object -> interface -> property.
type udisksObjects map[dbus.ObjectPath]map[string]map[string]dbus.Variant

// Open checks path with the safety rules, unmounts the card's removable-media
// mounts through UDisks2 (Filesystem.Unmount, the ones Lister.Open would
// unmount itself), and opens it through Block.OpenDevice("rw") with
// UDisksOpenFlags. The descriptor must be the block device that was checked
// (its st_rdev), else it is refused before anything is written. Image files
// are refused: they need no UDisks2.
func (u *UDisks) Open(ctx context.Context, path string, imageSize int64, opts Options) (*Device, error) {
	d, err := u.check(path, imageSize, opts)
	if err != nil {
		return nil, err
	}
	conn, objs, err := u.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close() // the descriptor outlives the connection
	unmounted, err := udisksUnmount(ctx, conn, objs, d)
	if err != nil {
		return nil, err
	}
	f, err := udisksOpen(ctx, conn, objs, d, UDisksOpenFlags)
	if err != nil {
		return nil, err
	}
	dev, err := adoptBlock(f, d, imageSize, opts)
	if err != nil {
		return nil, err
	}
	dev.Unmounted = unmounted
	// BLKRRPART needs CAP_SYS_ADMIN: the daemon re-reads the new partition
	// table instead (Block.Rescan; polkit allows it to the active session).
	dev.block = false
	dev.afterClose = func() string {
		if err := u.rescan(d); err != nil {
			return fmt.Sprintf("the new partition table of %s was not re-read (%v); replug the card before using it", d.Path, err)
		}
		return ""
	}
	return dev, nil
}

// rescan asks UDisks2 to re-read the partition table of the disk.
func (u *UDisks) rescan(d *Disk) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, objs, err := u.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	obj, err := objs.diskBlock(d)
	if err != nil {
		return err
	}
	if err := conn.Object(udisksBus, obj).CallWithContext(ctx, udisksBlock+".Rescan", 0, map[string]dbus.Variant{}).Err; err != nil {
		return udisksErr("rescan "+d.Path, err)
	}
	return nil
}

// OpenFile opens a checked card read-write through UDisks2 with no flags
// (buffered, not exclusive: what meta.WriteTagsPath does as root), for the
// node's META written after the flash. The same identity check applies.
func (u *UDisks) OpenFile(ctx context.Context, path string, opts Options) (*os.File, error) {
	d, err := u.check(path, 0, opts)
	if err != nil {
		return nil, err
	}
	conn, objs, err := u.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return udisksOpen(ctx, conn, objs, d, 0)
}

// check runs the safety rules; only block devices go through UDisks2.
func (u *UDisks) check(path string, imageSize int64, opts Options) (*Disk, error) {
	l := u.Lister
	if l == nil {
		l = DefaultLister()
	}
	d, err := l.Check(path, imageSize, opts)
	if err != nil {
		return nil, err
	}
	if d.Transport == TransportFile || d.Dev == "" {
		return nil, fmt.Errorf("%s is not a block device: UDisks2 opens only disks", d.Path)
	}
	return d, nil
}

// connect dials the system bus and lists UDisks2's objects (which starts
// the daemon where it is D-Bus-activated).
func (u *UDisks) connect(ctx context.Context) (*dbus.Conn, udisksObjects, error) {
	var conn *dbus.Conn
	var err error
	if u.Address != "" {
		conn, err = dbus.Connect(u.Address, dbus.WithContext(ctx))
	} else {
		conn, err = dbus.ConnectSystemBus(dbus.WithContext(ctx))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: no system bus (%v)", ErrNoUDisks, err)
	}
	if !conn.SupportsUnixFDs() {
		conn.Close()
		return nil, nil, fmt.Errorf("%w: the system bus does not pass file descriptors", ErrNoUDisks)
	}
	var objs udisksObjects
	err = conn.Object(udisksBus, udisksRoot).CallWithContext(ctx, "org.freedesktop.DBus.ObjectManager.GetManagedObjects", 0).Store(&objs)
	if err != nil {
		conn.Close()
		return nil, nil, udisksErr("list the disks", err)
	}
	return conn, objs, nil
}

// udisksErr sorts a failed call: the daemon absent (ErrNoUDisks), a
// refusal of its own (*UDisksError), or the call itself failing.
func udisksErr(op string, err error) error {
	var de dbus.Error
	if pe := (*dbus.Error)(nil); errors.As(err, &pe) {
		de = *pe
	} else if !errors.As(err, &de) {
		return fmt.Errorf("UDisks2: %s: %w", op, err)
	}
	switch {
	case de.Name == "org.freedesktop.DBus.Error.ServiceUnknown", de.Name == "org.freedesktop.DBus.Error.NameHasNoOwner",
		strings.HasPrefix(de.Name, "org.freedesktop.DBus.Error.Spawn."):
		return fmt.Errorf("%w: %s", ErrNoUDisks, de.Error())
	}
	return &UDisksError{Op: op, Name: de.Name, Msg: de.Error()}
}

// devNum is Disk.Dev ("8:16") as a dev_t, how UDisks2 keeps DeviceNumber.
func devNum(dev string) (uint64, bool) {
	var maj, min uint32
	if _, err := fmt.Sscanf(dev, "%d:%d", &maj, &min); err != nil {
		return 0, false
	}
	return unix.Mkdev(maj, min), true
}

// block is the object of the block device numbered num.
func (o udisksObjects) block(num uint64) (dbus.ObjectPath, bool) {
	for path, ifaces := range o {
		if b, ok := ifaces[udisksBlock]; ok {
			if n, ok := b["DeviceNumber"].Value().(uint64); ok && n == num {
				return path, true
			}
		}
	}
	return "", false
}

func (o udisksObjects) diskBlock(d *Disk) (dbus.ObjectPath, error) {
	num, ok := devNum(d.Dev)
	if ok {
		if p, ok := o.block(num); ok {
			return p, nil
		}
	}
	return "", &UDisksError{Op: "open " + d.Path, Msg: fmt.Sprintf("UDisks2 lists no block device %s (device number %s)", d.Path, d.Dev)}
}

// mountPoints are a Filesystem's MountPoints (NUL-terminated byte strings).
func mountPoints(v dbus.Variant) []string {
	raw, _ := v.Value().([][]byte)
	var pts []string
	for _, b := range raw {
		pts = append(pts, strings.TrimRight(string(b), "\x00"))
	}
	return pts
}

// udisksUnmount unmounts what Lister.Open would (removableMounts), each
// through the Filesystem object of the disk or of one of its partitions
// that has it mounted. UDisks2 unmounts without force, like the root path.
func udisksUnmount(ctx context.Context, conn *dbus.Conn, objs udisksObjects, d *Disk) ([]string, error) {
	points := removableMounts(d)
	if len(points) == 0 {
		return nil, nil
	}
	disk, err := objs.diskBlock(d)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, pt := range points {
		obj, ok := objs.filesystemAt(disk, pt)
		if !ok {
			continue // not mounted any more
		}
		err := conn.Object(udisksBus, obj).CallWithContext(ctx, udisksFS+".Unmount", dbus.FlagAllowInteractiveAuthorization, map[string]dbus.Variant{}).Err
		if err == nil {
			done = append(done, pt)
			continue
		}
		var ue *UDisksError
		switch err := udisksErr("unmount "+pt, err); {
		case errors.As(err, &ue) && ue.Name == udisksBus+".Error.NotMounted":
		case errors.As(err, &ue) && ue.Name == udisksBus+".Error.DeviceBusy":
			return done, &RefusedError{Device: d.Path, Reason: CodeBusy,
				Msg: fmt.Sprintf("could not unmount %s: files on it are in use; close programs using the card and retry", printable.String(pt))}
		default:
			return done, err
		}
	}
	return done, nil
}

// filesystemAt is the Filesystem object mounted at pt that is the disk
// object or one of its partitions.
func (o udisksObjects) filesystemAt(disk dbus.ObjectPath, pt string) (dbus.ObjectPath, bool) {
	for path, ifaces := range o {
		fs, ok := ifaces[udisksFS]
		if !ok {
			continue
		}
		if table, _ := ifaces[udisksPartition]["Table"].Value().(dbus.ObjectPath); path != disk && table != disk {
			continue
		}
		for _, m := range mountPoints(fs["MountPoints"]) {
			if m == pt {
				return path, true
			}
		}
	}
	return "", false
}

// udisksOpen asks UDisks2 for a read-write descriptor of the checked disk
// (polkit may show a password prompt: the call waits for it, ctx cancels)
// and refuses one that is not that block device.
func udisksOpen(ctx context.Context, conn *dbus.Conn, objs udisksObjects, d *Disk, flags int) (*os.File, error) {
	obj, err := objs.diskBlock(d)
	if err != nil {
		return nil, err
	}
	var fd dbus.UnixFD
	err = conn.Object(udisksBus, obj).CallWithContext(ctx, udisksBlock+".OpenDevice", dbus.FlagAllowInteractiveAuthorization,
		"rw", map[string]dbus.Variant{"flags": dbus.MakeVariant(int32(flags))}).Store(&fd)
	if err != nil {
		err = udisksErr("open "+d.Path, err)
		if ue := (*UDisksError)(nil); errors.As(err, &ue) && strings.Contains(ue.Msg, "busy") {
			return nil, &RefusedError{Device: d.Path, Reason: CodeBusy,
				Msg: fmt.Sprintf("%s is busy: mounted or held open by another program (a file manager, disk utility or another flasher)", d.Path)}
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), d.Path)
	if f == nil {
		return nil, fmt.Errorf("UDisks2: open %s: no valid descriptor in the reply", d.Path)
	}
	if err := sameBlockDevice(f, d); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sameBlockDevice refuses a descriptor that is not the block device d
// names (Disk.Dev): UDisks2 must not hand us another disk than the one the
// safety rules judged, nor a file.
func sameBlockDevice(f *os.File, d *Disk) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("UDisks2: stat the descriptor of %s: %w", d.Path, err)
	}
	want, ok := devNum(d.Dev)
	got := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		got = "not a block device"
	}
	if !ok || st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != want {
		return &RefusedError{Device: d.Path, Reason: CodeBusy,
			Msg: fmt.Sprintf("UDisks2 opened another device than %s (%s, expected %s); nothing was written", d.Path, got, d.Dev)}
	}
	return nil
}

// PowerOff powers the drive of the block device at path off through
// UDisks2 (Drive.PowerOff), never with a prompt: polkit allows it to the
// active session, and a flushed card is safe to pull anyway.
func (u *UDisks) PowerOff(ctx context.Context, path string) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("power off %s: %w", path, err)
	}
	conn, objs, err := u.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	blk, ok := objs.block(st.Rdev)
	if !ok {
		return &UDisksError{Op: "power off " + path, Msg: "UDisks2 lists no block device " + path}
	}
	drive, _ := objs[blk][udisksBlock]["Drive"].Value().(dbus.ObjectPath)
	if _, ok := objs[drive][udisksDrive]; !ok {
		return &UDisksError{Op: "power off " + path, Msg: "UDisks2 knows no drive for " + path}
	}
	err = conn.Object(udisksBus, drive).CallWithContext(ctx, udisksDrive+".PowerOff", 0,
		map[string]dbus.Variant{"auth.no_user_interaction": dbus.MakeVariant(true)}).Err
	if err != nil {
		return udisksErr("power off "+path, err)
	}
	return nil
}
