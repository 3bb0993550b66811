//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
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

// The programs of the real stack (Debian 12: udisks2 2.9.4, polkitd 122,
// systemd 252).
const (
	udisksdBin = "/usr/libexec/udisks2/udisksd"
	polkitdBin = "/usr/lib/polkit-1/polkitd"
	udevdBin   = "/lib/systemd/systemd-udevd"
)

// systemBusPolicy is the default policy of Debian's system bus
// (/usr/share/dbus-1/system.conf): services may not be called unless their
// own files in system.d allow it, as on a real system.
const systemBusPolicy = `<type>system</type>
<policy context="default"><allow user="*"/><deny own="*"/><deny send_type="method_call"/>
<allow send_type="signal"/><allow send_requested_reply="true" send_type="method_return"/><allow send_requested_reply="true" send_type="error"/>
<allow receive_type="method_call"/><allow receive_type="method_return"/><allow receive_type="error"/><allow receive_type="signal"/>
<allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
<allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
<allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/></policy>
<policy user="root"><allow own="*"/></policy>
<includedir>/usr/share/dbus-1/system.d</includedir>`

// A flash run as a non-root user (nobody) writes a loop device through the
// real UDisks2 daemon: first refused (no polkit authority: the CLI says
// "UDisks2 refused" and falls back to pkexec, absent here, so nothing is
// written), then, with polkitd and a rule granting nobody open-device,
// written and verified through Block.OpenDevice, the partition table
// re-read through Block.Rescan (allowed to an active desktop session; the
// rule grants it to nobody, who has no session here): the loop device
// holds the image. Root only (loop devices, daemons, the rule file); every daemon
// started here is stopped, the rule removed, the loop device detached.
func TestFlashAsUserThroughRealUDisks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a loop device, udevd, udisksd, polkitd and a polkit rule in /etc/polkit-1/rules.d")
	}
	for _, p := range []string{udisksdBin, polkitdBin, udevdBin, "/usr/bin/udevadm"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s not installed (apt-get install udisks2 polkitd udev): %v", p, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	fx := imagetest.New(t, 4<<20, 27, 1<<20)
	w := newAsNobody(t)
	img := filepath.Join(w.Dir, "talos.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o644); err != nil {
		t.Fatal(err)
	}

	loop := imagetest.LoopDevice(t, 8<<20, false)
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}

	addr := udiskstest.StartBus(t, systemBusPolicy)
	env := []string{"DBUS_SYSTEM_BUS_ADDRESS=" + addr, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}

	// udisks lists no device without the udev database: a udevd of ours
	// unless one runs, and the loop device's "add" replayed.
	udevPing := func() bool {
		return exec.CommandContext(ctx, "udevadm", "control", "--ping", "--timeout=2").Run() == nil
	}
	if !udevPing() {
		start(t, env, udevdBin)
		waitFor(t, ctx, "udevd answering", udevPing)
	}
	run(t, "udevadm", "trigger", "--action=add", "/sys/class/block/"+filepath.Base(loop))
	run(t, "udevadm", "settle", "--timeout=20")

	flash := func() (int, string) {
		return w.Run(t, ctx, addr, "flash", "--image", img, "--device", loop, "--allow-loop", "--yes", "--cache-dir", w.CacheDir)
	}

	// Without a polkit authority UDisks2 refuses a non-root caller.
	udisksd := startUDisks(t, ctx, env, addr, st.Rdev)
	code, out := flash()
	if code == 0 || !strings.Contains(out, "UDisks2 refused") || !strings.Contains(out, "NotAuthorized") {
		t.Fatalf("without polkitd: exit %d, want a refusal said and no write:\n%s", code, out)
	}
	if got := imagetest.FileSHA256(t, loop, int64(len(fx.Raw))); got == fx.SHA256 {
		t.Fatal("refused, yet the loop device holds the image")
	}
	t.Logf("without polkitd:\n%s", out)
	udisksd() // its polkit authority is looked up at start: restart it once polkitd runs

	rule := fmt.Sprintf("/etc/polkit-1/rules.d/10-talosflash-test-%d.rules", os.Getpid())
	if err := os.WriteFile(rule, []byte(`polkit.addRule(function(action, subject) {
  if ((action.id == "org.freedesktop.udisks2.open-device" || action.id == "org.freedesktop.udisks2.open-device-system" ||
       action.id == "org.freedesktop.udisks2.rescan") && subject.user == "nobody") {
    return polkit.Result.YES;
  }
});
`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(rule) })
	start(t, env, polkitdBin, "--no-debug")
	waitForName(t, ctx, addr, "org.freedesktop.PolicyKit1")
	startUDisks(t, ctx, env, addr, st.Rdev)

	code, out = flash()
	if code != 0 || !strings.Contains(out, "through UDisks2") || strings.Contains(out, "warning") {
		t.Fatalf("with the rule: exit %d, want a write through UDisks2:\n%s", code, out)
	}
	if got := imagetest.FileSHA256(t, loop, int64(len(fx.Raw))); got != fx.SHA256 {
		t.Fatalf("the loop device holds %s, want the image %s:\n%s", got, fx.SHA256, out)
	}
	t.Logf("with polkitd and the rule:\n%s", out)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// start runs a daemon in its own process group and returns a stop that
// kills the group (also run when the test ends).
func start(t *testing.T, env []string, name string, args ...string) func() {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.CreateTemp(t.TempDir(), "daemon-*.log") // a file: Wait never waits on a pipe a forked worker holds
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		t0 := time.Now()
		defer func() { t.Logf("stopped %s in %v", filepath.Base(name), time.Since(t0).Round(time.Millisecond)) }()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if b, _ := os.ReadFile(log.Name()); t.Failed() {
			t.Logf("%s:\n%s", name, b)
		}
		log.Close()
	}
	t.Cleanup(stop)
	return stop
}

// startUDisks starts udisksd and waits until it lists the block device rdev.
func startUDisks(t *testing.T, ctx context.Context, env []string, addr string, rdev uint64) func() {
	t.Helper()
	stop := start(t, env, udisksdBin)
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, ctx, "udisksd listing the loop device", func() bool {
		var objs map[dbus.ObjectPath]map[string]map[string]dbus.Variant
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if conn.Object("org.freedesktop.UDisks2", "/org/freedesktop/UDisks2").CallWithContext(c,
			"org.freedesktop.DBus.ObjectManager.GetManagedObjects", 0).Store(&objs) != nil {
			return false
		}
		for _, o := range objs {
			if n, _ := o["org.freedesktop.UDisks2.Block"]["DeviceNumber"].Value().(uint64); n == rdev {
				return true
			}
		}
		return false
	})
	return stop
}

func waitForName(t *testing.T, ctx context.Context, addr, name string) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, ctx, name+" on the bus", func() bool {
		var has bool
		return conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, name).Store(&has) == nil && has
	})
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
