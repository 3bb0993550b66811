//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/talosflash/talosflash/imaging/devices/udiskstest"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"golang.org/x/sys/unix"
)

// `talosflash flash --force-raw` run as a user (nobody) writes a loop
// device through UDisks2 (the fake daemon, which opens it as root and
// hands out the descriptor): it used to be refused before UDisks2 was
// tried. UDisks2 refusing, it is refused with exit 2 and nothing written,
// no pkexec asked (the elevated child refuses --force-raw). Root only (a
// loop device, a process as nobody); the loop device is detached after.
func TestForceRawAsUserThroughUDisks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a loop device and a process run as nobody")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := newAsNobody(t)
	blob := make([]byte, 3<<20)
	for i := range blob {
		blob[i] = byte(i*31 + i>>9) // not a disk: no MBR signature, no GPT
	}
	img := filepath.Join(w.Dir, "blob.bin")
	if err := os.WriteFile(img, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	loop := imagetest.LoopDevice(t, 8<<20, false)
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}
	obj := dbus.ObjectPath("/org/freedesktop/UDisks2/block_devices/" + filepath.Base(loop))
	opens := func(mode string, flags int32) (*os.File, *dbus.Error) {
		f, err := os.OpenFile(loop, os.O_RDWR|int(flags), 0)
		if err != nil {
			return nil, dbus.MakeFailedError(err)
		}
		return f, nil
	}
	refuses := func(string, int32) (*os.File, *dbus.Error) { return nil, udiskstest.NotAuthorized() }
	flash := func(open func(string, int32) (*os.File, *dbus.Error)) (int, string) {
		addr := udiskstest.Bus(t)
		udiskstest.Start(t, addr, &udiskstest.Block{Object: obj, Device: loop, Number: st.Rdev, Size: 8 << 20, Open: open})
		return w.Run(t, ctx, addr, "flash", "--image", img, "--force-raw", "--device", loop, "--allow-loop", "--yes", "--cache-dir", w.CacheDir)
	}
	holds := func() bool {
		got := make([]byte, len(blob))
		f, err := os.Open(loop)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_, err = f.ReadAt(got, 0)
		return err == nil && bytes.Equal(got, blob)
	}

	code, out := flash(refuses)
	if code != 2 || !strings.Contains(out, "UDisks2 refused") || !strings.Contains(out, "--force-raw") || strings.Contains(out, "asking for the administrator password") {
		t.Fatalf("UDisks2 refusing: exit %d, want 2 and why:\n%s", code, out)
	}
	if holds() {
		t.Fatal("refused, yet the loop device holds the blob")
	}
	code, out = flash(opens)
	if code != 0 || !strings.Contains(out, "through UDisks2") || !holds() {
		t.Fatalf("through UDisks2: exit %d, the loop device holds the blob: %v:\n%s", code, holds(), out)
	}
}
