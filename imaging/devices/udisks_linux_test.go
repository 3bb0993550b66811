//go:build linux

package devices_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/devices/udiskstest"
)

const cardObj = dbus.ObjectPath("/org/freedesktop/UDisks2/block_devices/sdz")

// fileOpener hands out a descriptor of a temp file holding "untouched".
func fileOpener(t *testing.T) (func(string, int32) (*os.File, *dbus.Error), string) {
	p := filepath.Join(t.TempDir(), "other.img")
	if err := os.WriteFile(p, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(string, int32) (*os.File, *dbus.Error) {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return nil, dbus.MakeFailedError(err)
		}
		return f, nil
	}, p
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// UDisks2 answering with a descriptor that is not the checked card (here a
// regular file) is refused before anything is written; the request was
// "rw" with O_EXCL|O_DIRECT, after the card's /media mount was unmounted
// through its Filesystem object.
func TestUDisksRefusesAnotherDescriptor(t *testing.T) {
	lister, card, num := udiskstest.FakeCard(t, 64<<20, "/media/u/BOOT")
	open, other := fileOpener(t)
	addr := udiskstest.Bus(t)
	part := dbus.ObjectPath("/org/freedesktop/UDisks2/block_devices/sdz1")
	fake := udiskstest.Start(t, addr,
		&udiskstest.Block{Object: cardObj, Device: "/dev/sdz", Number: num, Size: 64 << 20, Open: open},
		&udiskstest.Block{Object: part, Device: "/dev/sdz1", Number: num + 1, Table: cardObj, MountPoints: []string{"/media/u/BOOT"}})
	u := &devices.UDisks{Address: addr, Lister: lister}
	d, err := u.Open(ctx(t), card, 0, devices.Options{})
	var ref *devices.RefusedError
	if !errors.As(err, &ref) || !strings.Contains(ref.Msg, "another device") {
		if d != nil {
			d.Close()
		}
		t.Fatalf("Open = %v, want a refusal of the descriptor", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "untouched" {
		t.Fatalf("the refused descriptor was written: %q", b)
	}
	calls := fake.Calls()
	if len(calls) != 2 || calls[0].Method != "Unmount" || calls[0].Object != part || calls[1].Method != "OpenDevice" {
		t.Fatalf("calls %+v, want Unmount of sdz1 then OpenDevice", calls)
	}
	if c := calls[1]; c.Object != cardObj || c.Mode != "rw" || c.Flags != unix.O_EXCL|unix.O_DIRECT {
		t.Fatalf("OpenDevice %+v, want rw with O_EXCL|O_DIRECT", c)
	}
}

// polkit's refusal and a dismissed prompt come back as UDisksError, told
// apart; a device UDisks2 does not list is a UDisksError too.
func TestUDisksRefusals(t *testing.T) {
	lister, card, num := udiskstest.FakeCard(t, 64<<20)
	addr := udiskstest.Bus(t)
	deny := udiskstest.NotAuthorized()
	udiskstest.Start(t, addr,
		&udiskstest.Block{Object: cardObj, Device: "/dev/sdz", Number: num, Open: func(string, int32) (*os.File, *dbus.Error) { return nil, deny }})
	u := &devices.UDisks{Address: addr, Lister: lister}

	_, err := u.Open(ctx(t), card, 0, devices.Options{})
	var ue *devices.UDisksError
	if !errors.As(err, &ue) || !ue.NotAuthorized() || ue.Dismissed() || errors.Is(err, devices.ErrUDisksDismissed) {
		t.Fatalf("NotAuthorized: %v", err)
	}
	deny = udiskstest.Dismissed()
	if _, err = u.Open(ctx(t), card, 0, devices.Options{}); !errors.Is(err, devices.ErrUDisksDismissed) {
		t.Fatalf("dismissed: %v", err)
	}

	// Another daemon that lists no such device.
	addr2 := udiskstest.Bus(t)
	udiskstest.Start(t, addr2, &udiskstest.Block{Object: cardObj, Device: "/dev/sdy", Number: num + 16})
	_, err = (&devices.UDisks{Address: addr2, Lister: lister}).Open(ctx(t), card, 0, devices.Options{})
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "lists no block device") {
		t.Fatalf("unknown device: %v", err)
	}
}

// No daemon on the bus, and no bus at all: ErrNoUDisks.
func TestUDisksAbsent(t *testing.T) {
	lister, card, _ := udiskstest.FakeCard(t, 64<<20)
	addr := udiskstest.Bus(t)
	for _, a := range []string{addr, "unix:path=" + filepath.Join(t.TempDir(), "no-bus")} {
		_, err := (&devices.UDisks{Address: a, Lister: lister}).Open(ctx(t), card, 0, devices.Options{})
		if !errors.Is(err, devices.ErrNoUDisks) {
			t.Fatalf("%s: %v, want ErrNoUDisks", a, err)
		}
	}
	// DBUS_SYSTEM_BUS_ADDRESS is where an empty Address goes.
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", addr)
	if _, err := (&devices.UDisks{Lister: lister}).Open(ctx(t), card, 0, devices.Options{}); !errors.Is(err, devices.ErrNoUDisks) || !strings.Contains(err.Error(), "ServiceUnknown") && !strings.Contains(err.Error(), "not provided") {
		t.Fatalf("system bus from the environment: %v", err)
	}
}

// The safety rules run before UDisks2 is asked: a refused disk never
// reaches the daemon.
func TestUDisksChecksFirst(t *testing.T) {
	lister, _, num := udiskstest.FakeCard(t, 64<<20)
	addr := udiskstest.Bus(t)
	open, _ := fileOpener(t)
	fake := udiskstest.Start(t, addr, &udiskstest.Block{Object: cardObj, Device: "/dev/sdz", Number: num, Open: open})
	u := &devices.UDisks{Address: addr, Lister: lister}
	partPath := filepath.Join(lister.DevRoot, "sdz1")
	if err := os.WriteFile(partPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := u.Open(ctx(t), partPath, 0, devices.Options{}) // a partition
	var ref *devices.RefusedError
	if !errors.As(err, &ref) || ref.Reason != devices.CodePartition {
		t.Fatalf("partition: %v", err)
	}
	if c := fake.Calls(); len(c) != 0 {
		t.Fatalf("UDisks2 was asked: %+v", c)
	}
}

// Eject powers the drive off through Drive.PowerOff without a prompt, and
// says so when UDisks2 refuses.
func TestEjectPowerOff(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Stat("/dev/null", &st); err != nil {
		t.Fatal(err)
	}
	addr := udiskstest.Bus(t)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", addr)
	drive := dbus.ObjectPath("/org/freedesktop/UDisks2/drives/Generic_SD")
	fake := udiskstest.Start(t, addr, &udiskstest.Block{Object: cardObj, Device: "/dev/null", Number: st.Rdev, Drive: drive})
	e := devices.Eject(ctx(t), "/dev/null") // a device node that is not a loop device
	if !e.PoweredOff || e.PowerOffFailed || !strings.Contains(e.Note, "safe to remove") {
		t.Fatalf("%+v", e)
	}
	c := fake.Calls()
	if len(c) != 1 || c[0].Method != "PowerOff" || c[0].Object != drive || c[0].Opts["auth.no_user_interaction"].Value() != true {
		t.Fatalf("calls %+v", c)
	}
	fake.PowerOffErr = dbus.NewError("org.freedesktop.UDisks2.Error.Failed", []any{"Error powering off drive: device is mounted"})
	e = devices.Eject(ctx(t), "/dev/null")
	if !e.PowerOffFailed || e.PoweredOff || !strings.Contains(e.Note, "device is mounted") {
		t.Fatalf("%+v", e)
	}
}
