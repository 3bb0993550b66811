//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody runs the binary in it
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	blob := make([]byte, 3<<20)
	for i := range blob {
		blob[i] = byte(i*31 + i>>9) // not a disk: no MBR signature, no GPT
	}
	img := filepath.Join(dir, "blob.bin")
	if err := os.WriteFile(img, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "talosflash")
	copyFile(t, os.Args[0], bin, 0o755)
	cacheDir := filepath.Join(dir, "cache")
	if err := os.Mkdir(cacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(cacheDir, 65534, 65534); err != nil {
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
		cmd := exec.CommandContext(ctx, bin, "flash", "--image", img, "--force-raw", "--device", loop, "--allow-loop", "--yes", "--cache-dir", cacheDir)
		// No pkexec on the path: a fallback fails instead of prompting.
		cmd.Env = []string{"TALOSFLASH_TEST_RUN_MAIN=1", "HOME=" + cacheDir, "DBUS_SYSTEM_BUS_ADDRESS=" + addr, "PATH=" + t.TempDir()}
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		} else if err != nil {
			t.Fatalf("run the flash as nobody: %v", err)
		}
		return 0, out.String()
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
