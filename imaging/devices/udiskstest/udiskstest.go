//go:build linux

// Package udiskstest is a fake UDisks2 daemon for tests: a private D-Bus
// daemon started on a socket in a temp dir, and UDisks2's objects exported
// on it with godbus (the subset talosflash calls: ObjectManager, Block
// with OpenDevice, Filesystem.Unmount, Drive.PowerOff). Also a fake sysfs
// card the safety rules accept, so refusals can be tested without root.
package udiskstest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/godbus/dbus/v5"
	"github.com/talosflash/talosflash/imaging/devices"
)

// Bus starts a private dbus-daemon (no service activation: only the test's
// own names) and returns its address. The test skips without dbus-daemon.
func Bus(t testing.TB) string {
	t.Helper()
	return StartBus(t, `<type>session</type>`)
}

// StartBus starts dbus-daemon with a config made of extra (e.g. a type, or
// an includedir with the system bus policies) and a listen on a socket in a
// temp dir, with a permissive default policy unless extra brings its own.
// It is killed (its process group) when the test ends.
func StartBus(t testing.TB, extra string) string {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Skip("dbus-daemon not installed (scripts/setup.sh installs the dbus package)")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // a non-root client reaches the socket
		t.Fatal(err)
	}
	if !strings.Contains(extra, "<policy") {
		extra += `<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/><allow user="*"/></policy>`
	}
	conf := filepath.Join(dir, "bus.conf")
	cfg := `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><listen>unix:path=` + filepath.Join(dir, "bus") + `</listen><auth>EXTERNAL</auth>` + extra + `</busconfig>`
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--print-address=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	return strings.TrimSpace(line)
}

// Block is a block device the fake daemon lists.
type Block struct {
	Object dbus.ObjectPath // "/org/freedesktop/UDisks2/block_devices/sdz"
	Device string          // "/dev/sdz"
	Number uint64          // DeviceNumber, a dev_t (unix.Mkdev)
	Size   uint64
	Drive  dbus.ObjectPath // "/" none
	// Table, for a partition, is its disk's object.
	Table dbus.ObjectPath
	// MountPoints, when set, make it a Filesystem.
	MountPoints []string
	// Open answers OpenDevice: the file handed out, or the error.
	Open func(mode string, flags int32) (*os.File, *dbus.Error)
}

// Call is a method the fake was called with.
type Call struct {
	Object dbus.ObjectPath
	Method string // "OpenDevice", "Rescan", "Unmount", "PowerOff"
	Mode   string // OpenDevice's mode
	Flags  int32  // OpenDevice's options.flags
	Opts   map[string]dbus.Variant
}

// Fake is the fake UDisks2 daemon.
type Fake struct {
	conn *dbus.Conn

	mu     sync.Mutex
	blocks []*Block
	calls  []Call
	// PowerOffErr, when set, is Drive.PowerOff's answer.
	PowerOffErr *dbus.Error
	// UnmountErr, when set, is Filesystem.Unmount's answer.
	UnmountErr *dbus.Error
	open       []*os.File // descriptors handed out, closed at the end
}

// Start owns org.freedesktop.UDisks2 on the bus at addr and serves blocks.
func Start(t testing.TB, addr string, blocks ...*Block) *Fake {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fake{conn: conn, blocks: blocks}
	t.Cleanup(func() {
		conn.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, o := range f.open {
			o.Close()
		}
	})
	if err := conn.Export(objectManager{f}, "/org/freedesktop/UDisks2", "org.freedesktop.DBus.ObjectManager"); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		o := &blockObject{f: f, b: b}
		if err := conn.Export(o, b.Object, "org.freedesktop.UDisks2.Block"); err != nil {
			t.Fatal(err)
		}
		if err := conn.Export(o, b.Object, "org.freedesktop.UDisks2.Filesystem"); err != nil {
			t.Fatal(err)
		}
		if b.Drive != "" && b.Drive != "/" {
			if err := conn.Export(&driveObject{f: f, path: b.Drive}, b.Drive, "org.freedesktop.UDisks2.Drive"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if reply, err := conn.RequestName("org.freedesktop.UDisks2", dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own org.freedesktop.UDisks2: %v %v", reply, err)
	}
	return f
}

// Calls are the methods called so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

func (f *Fake) record(c Call) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

type objectManager struct{ f *Fake }

func (m objectManager) GetManagedObjects() (map[dbus.ObjectPath]map[string]map[string]dbus.Variant, *dbus.Error) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	out := map[dbus.ObjectPath]map[string]map[string]dbus.Variant{}
	drives := map[dbus.ObjectPath]bool{}
	for _, b := range m.f.blocks {
		drive := b.Drive
		if drive == "" {
			drive = "/"
		}
		ifaces := map[string]map[string]dbus.Variant{
			"org.freedesktop.UDisks2.Block": {
				"Device":       dbus.MakeVariant(append([]byte(b.Device), 0)),
				"DeviceNumber": dbus.MakeVariant(b.Number),
				"Size":         dbus.MakeVariant(b.Size),
				"Drive":        dbus.MakeVariant(drive),
				"HintSystem":   dbus.MakeVariant(false),
			},
		}
		if b.Table != "" {
			ifaces["org.freedesktop.UDisks2.Partition"] = map[string]dbus.Variant{"Table": dbus.MakeVariant(b.Table)}
		}
		if b.MountPoints != nil {
			var pts [][]byte
			for _, p := range b.MountPoints {
				pts = append(pts, append([]byte(p), 0))
			}
			ifaces["org.freedesktop.UDisks2.Filesystem"] = map[string]dbus.Variant{"MountPoints": dbus.MakeVariant(pts)}
		}
		out[b.Object] = ifaces
		if drive != "/" && !drives[drive] {
			drives[drive] = true
			out[drive] = map[string]map[string]dbus.Variant{"org.freedesktop.UDisks2.Drive": {"Removable": dbus.MakeVariant(true)}}
		}
	}
	return out, nil
}

type blockObject struct {
	f *Fake
	b *Block
}

func (o *blockObject) OpenDevice(mode string, opts map[string]dbus.Variant) (dbus.UnixFD, *dbus.Error) {
	flags, _ := opts["flags"].Value().(int32)
	o.f.record(Call{Object: o.b.Object, Method: "OpenDevice", Mode: mode, Flags: flags, Opts: opts})
	if o.b.Open == nil {
		return -1, dbus.NewError("org.freedesktop.UDisks2.Error.Failed", []any{"no descriptor configured"})
	}
	file, derr := o.b.Open(mode, flags)
	if derr != nil {
		return -1, derr
	}
	o.f.mu.Lock()
	o.f.open = append(o.f.open, file) // open until the reply is sent: closed at the end
	o.f.mu.Unlock()
	return dbus.UnixFD(file.Fd()), nil
}

func (o *blockObject) Rescan(opts map[string]dbus.Variant) *dbus.Error {
	o.f.record(Call{Object: o.b.Object, Method: "Rescan", Opts: opts})
	return nil
}

func (o *blockObject) Unmount(opts map[string]dbus.Variant) *dbus.Error {
	o.f.record(Call{Object: o.b.Object, Method: "Unmount", Opts: opts})
	o.f.mu.Lock()
	defer o.f.mu.Unlock()
	if o.f.UnmountErr != nil {
		return o.f.UnmountErr
	}
	o.b.MountPoints = []string{}
	return nil
}

type driveObject struct {
	f    *Fake
	path dbus.ObjectPath
}

func (o *driveObject) PowerOff(opts map[string]dbus.Variant) *dbus.Error {
	o.f.record(Call{Object: o.path, Method: "PowerOff", Opts: opts})
	o.f.mu.Lock()
	defer o.f.mu.Unlock()
	return o.f.PowerOffErr
}

// NotAuthorized is polkit's refusal as UDisks2 answers it.
func NotAuthorized() *dbus.Error {
	return dbus.NewError("org.freedesktop.UDisks2.Error.NotAuthorized", []any{"Not authorized to perform operation"})
}

// Dismissed is the answer when the user dismissed the password prompt.
func Dismissed() *dbus.Error {
	return dbus.NewError("org.freedesktop.UDisks2.Error.NotAuthorizedDismissed", []any{"The authentication dialog was dismissed"})
}

// FakeCard is a USB card reader "sdz" (8:240) in a fake sysfs tree that the
// safety rules accept (removable, nothing mounted but under mounts, the
// mount points of its partition sdz1, 8:241), with a regular file standing
// in for /dev/sdz: Lister, the card's path, its dev_t as UDisks2 gives it.
func FakeCard(t testing.TB, size int64, mounts ...string) (*devices.Lister, string, uint64) {
	t.Helper()
	root := t.TempDir()
	diskDir := filepath.Join(root, "sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdz")
	for name, content := range map[string]string{"dev": "8:240", "size": fmt.Sprint(size / 512), "removable": "1", "ro": "0",
		"device/vendor": "Generic", "device/model": "SD/MMC",
		"sdz1/dev": "8:241", "sdz1/partition": "1", "sdz1/size": fmt.Sprint(size / 1024)} {
		p := filepath.Join(diskDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/block"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(diskDir, filepath.Join(root, "sys/block/sdz")); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(root, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dev, "sdz"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mi := filepath.Join(root, "mountinfo")
	table := "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
	for i, m := range mounts {
		table += fmt.Sprintf("%d 22 8:241 / %s rw,relatime shared:%d - vfat /dev/sdz1 rw\n", 30+i, m, 2+i)
	}
	if err := os.WriteFile(mi, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	swaps := filepath.Join(root, "swaps")
	if err := os.WriteFile(swaps, []byte("Filename\tType\tSize\tUsed\tPriority\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &devices.Lister{SysRoot: filepath.Join(root, "sys"), MountInfo: mi, ProcSwaps: swaps, DevRoot: dev},
		filepath.Join(dev, "sdz"), 8<<8 | 240
}
