//go:build linux

package devices

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"

	"golang.org/x/sys/unix"
)

// Tests on real loop devices. They need root (losetup, mount) and skip with
// a message otherwise; every device and mount is released in t.Cleanup.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates loop devices and mounts")
	}
}

// newLoop attaches a sparse file of size bytes in dir (t.TempDir() when "")
// and returns the loop device path.
func newLoop(t *testing.T, dir string, size int64, partScan bool) string {
	t.Helper()
	requireRoot(t)
	return imagetest.LoopDeviceIn(t, dir, size, partScan)
}

func mount(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Skipf("mount %v failed: %v: %s", args, err, out)
	}
	point := args[len(args)-1]
	t.Cleanup(func() {
		if isMounted(t, point) {
			// A loop device just detached (over a file in point) releases
			// its file asynchronously: EBUSY for a moment on a busy
			// machine. Retry, bounded, then detach the mount lazily.
			err := unix.Unmount(point, 0)
			for i := 0; errors.Is(err, unix.EBUSY) && i < 50; i++ {
				time.Sleep(20 * time.Millisecond)
				err = unix.Unmount(point, 0)
			}
			if errors.Is(err, unix.EBUSY) {
				err = unix.Unmount(point, unix.MNT_DETACH)
			}
			if err != nil {
				t.Errorf("unmount %s: %v", point, err)
			}
		}
	})
}

func isMounted(t *testing.T, point string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := parseMountInfo(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.point == point {
			return true
		}
	}
	return false
}

func mkfsExt4(t *testing.T, dev string) {
	t.Helper()
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 not installed: cannot make a filesystem to mount")
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
}

func wantRefusal(t *testing.T, err error, code Code, msg string) *RefusedError {
	t.Helper()
	var r *RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("want refusal %s, got %v", code, err)
	}
	if r.Reason != code || !strings.Contains(r.Msg, msg) {
		t.Fatalf("got %s %q, want %s containing %q", r.Reason, r.Msg, code, msg)
	}
	return r
}

// mbrImage is size bytes of random data with an MBR holding one partition
// at LBA 2048 of 4096 sectors.
func mbrImage(t *testing.T, size int) []byte {
	img := make([]byte, size)
	if _, err := rand.Read(img); err != nil {
		t.Fatal(err)
	}
	clear(img[:512])
	entry := img[446:462]
	entry[4] = 0x0c // FAT32 LBA
	binary.LittleEndian.PutUint32(entry[8:], 2048)
	binary.LittleEndian.PutUint32(entry[12:], 4096)
	img[510], img[511] = 0x55, 0xaa
	return img
}

func TestRealLoopRefusedUnlessAllowed(t *testing.T) {
	loop := newLoop(t, "", 16<<20, false)
	_, err := Check(loop, 0, Options{})
	wantRefusal(t, err, CodeVirtual, "loop device")

	// Through a symlink, as /dev/disk/by-id paths are.
	link := filepath.Join(t.TempDir(), "by-id-link")
	if err := os.Symlink(loop, link); err != nil {
		t.Fatal(err)
	}
	d, err := Check(link, 1<<20, Options{AllowLoop: true})
	if err != nil {
		t.Fatalf("Check with AllowLoop: %v", err)
	}
	if d.Path != loop || d.Transport != TransportLoop || d.Size != 16<<20 || !strings.Contains(d.Model, "loop-") {
		t.Errorf("loop disk: %+v", d)
	}
	_, err = Check(loop, 32<<20, Options{AllowLoop: true})
	wantRefusal(t, err, CodeTooSmall, "the image needs 32.0 MiB")
}

func TestRealOpenWriteCloseRereadsPartitions(t *testing.T) {
	loop := newLoop(t, "", 16<<20, true)
	img := mbrImage(t, 4<<20+123) // odd size: the tail is a partial sector
	dev, err := Open(loop, int64(len(img)), Options{AllowLoop: true, SyncEvery: 1 << 20})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if dev.Name() != loop || dev.Disk.Path != loop || len(dev.Unmounted) != 0 {
		t.Errorf("device %s disk %+v unmounted %v", dev.Name(), dev.Disk, dev.Unmounted)
	}
	for rest := img; len(rest) > 0; {
		n := min(len(rest), 256<<10)
		if _, err := dev.Write(rest[:n]); err != nil {
			t.Fatalf("Write: %v", err)
		}
		rest = rest[n:]
	}
	back := make([]byte, 1<<20)
	if _, err := dev.ReadAt(back, 3<<20); err != nil || !bytes.Equal(back, img[3<<20:4<<20]) {
		t.Errorf("ReadAt through the device: %v, equal %v", err, bytes.Equal(back, img[3<<20:4<<20]))
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if w := dev.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	if err := dev.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	got := make([]byte, len(img))
	f, err := os.Open(loop)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(got, 0)
	f.Close()
	if err != nil || !bytes.Equal(got, img) {
		t.Fatalf("read back from %s: %v, bytes equal: %v", loop, err, bytes.Equal(got, img))
	}

	// BLKRRPART on Close made the kernel see the image's partition table.
	part := loop + "p1"
	name := filepath.Base(loop)
	if size := readInt("/sys/block", name, name+"p1", "size"); size != 4096 {
		if !kernelHasMBRParser() {
			t.Skip("this kernel has no MBR partition parser (CONFIG_MSDOS_PARTITION): cannot see the re-read partitions; data and BLKRRPART without warnings were checked")
		}
		t.Fatalf("partition %s after Close: size %d sectors, want 4096", part, size)
	}
	_, err = Check(part, 0, Options{AllowLoop: true})
	r := wantRefusal(t, err, CodePartition, "is a partition")
	if r.Suggestion != loop {
		t.Errorf("suggestion %q, want %q", r.Suggestion, loop)
	}
}

func TestRealOpenBusy(t *testing.T) {
	loop := newLoop(t, "", 8<<20, false)
	holder, err := os.OpenFile(loop, os.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	_, err = Open(loop, 0, Options{AllowLoop: true})
	wantRefusal(t, err, CodeBusy, "is busy: mounted or held open by another program")
}

func TestRealMountedRefused(t *testing.T) {
	loop := newLoop(t, "", 16<<20, false)
	mkfsExt4(t, loop)
	point := filepath.Join(t.TempDir(), "mnt point") // a space: escaped in mountinfo
	if err := os.Mkdir(point, 0o755); err != nil {
		t.Fatal(err)
	}
	mount(t, loop, point)
	_, err := Open(loop, 0, Options{AllowLoop: true, ForceNonRemovable: true})
	wantRefusal(t, err, CodeMounted, "is mounted at "+point+", outside /media")
	if !isMounted(t, point) {
		t.Error("a mount outside /media must not be unmounted")
	}
}

func TestRealUnmountsRemovableMedia(t *testing.T) {
	requireRoot(t)
	loop := newLoop(t, "", 16<<20, false)
	mkfsExt4(t, loop)
	if _, err := os.Stat("/run/media"); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir("/run/media", 0o755); err != nil {
			t.Skipf("cannot create /run/media: %v", err)
		}
		t.Cleanup(func() { os.Remove("/run/media") })
	}
	point, err := os.MkdirTemp("/run/media", "talosflash-test-")
	if err != nil {
		t.Skipf("cannot create a mount point under /run/media: %v", err)
	}
	t.Cleanup(func() { os.Remove(point) })
	mount(t, loop, point)

	// A file open on the card: unmount fails, Open refuses, nothing forced.
	busy, err := os.Create(filepath.Join(point, "open-file"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(loop, 0, Options{AllowLoop: true})
	busy.Close()
	wantRefusal(t, err, CodeBusy, "could not unmount "+point)
	if !isMounted(t, point) {
		t.Fatal("busy mount was unmounted anyway")
	}

	dev, err := Open(loop, 0, Options{AllowLoop: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if len(dev.Unmounted) != 1 || dev.Unmounted[0] != point {
		t.Errorf("Unmounted = %v, want [%s]", dev.Unmounted, point)
	}
	if isMounted(t, point) {
		t.Error("still mounted after Open")
	}
	if _, err := dev.Write(make([]byte, 4096)); err != nil {
		t.Errorf("write after unmount: %v", err)
	}
	// Without partition scanning the loop driver answers BLKRRPART with
	// EINVAL, which is expected and not worth a warning.
	if err := dev.Close(); err != nil || len(dev.Warnings()) != 0 {
		t.Errorf("Close: %v, warnings %v", err, dev.Warnings())
	}
}

// kernelHasMBRParser reads /proc/config.gz; true when it cannot tell.
func kernelHasMBRParser() bool {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return true
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return true
	}
	cfg, err := io.ReadAll(zr)
	return err != nil || bytes.Contains(cfg, []byte("\nCONFIG_MSDOS_PARTITION=y"))
}

// A loop device over a file on a 2 MiB tmpfs fails writeback past ~2 MiB
// with EIO: a real kernel I/O error part-way through the image.
func TestRealWriteErrorRegion(t *testing.T) {
	requireRoot(t)
	small := t.TempDir()
	mount(t, "-t", "tmpfs", "-o", "size=2m", "tmpfs", small)
	loop := newLoop(t, small, 8<<20, false)
	const syncEvery = 256 << 10
	dev, err := Open(loop, 6<<20, Options{AllowLoop: true, SyncEvery: syncEvery})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	chunk := make([]byte, 64<<10)
	rand.Read(chunk)
	var werr error
	var written int64
	for written < 6<<20 && werr == nil {
		var n int
		n, werr = dev.Write(chunk)
		written += int64(n)
	}
	if werr == nil {
		werr = dev.Sync()
	}
	var ioe *IOError
	if !errors.As(werr, &ioe) {
		t.Fatalf("want *IOError writing past the tmpfs size, got %v", werr)
	}
	t.Logf("error after %d bytes: %v", written, ioe)
	// tmpfs holds 2 MiB: the failed region starts before and reaches beyond
	// ~2 MiB, and is at most one sync step (plus one chunk) long.
	if ioe.Offset > 2<<20 || ioe.Offset+ioe.Len < 1<<20 || ioe.Len > syncEvery+int64(len(chunk)) || ioe.Path != loop {
		t.Errorf("region %d+%d does not locate the failure near 2 MiB", ioe.Offset, ioe.Len)
	}
	if !IsDeviceGone(werr) {
		t.Errorf("EIO should count as a dead device: %v", werr)
	}
	if !strings.Contains(werr.Error(), fmt.Sprintf("bytes %d-", ioe.Offset)) {
		t.Errorf("message lacks the region: %v", werr)
	}
	// Sticky: nothing is retried on a failed device.
	if _, err := dev.Write(chunk); err != werr {
		t.Errorf("write after failure: %v", err)
	}
	if err := dev.Close(); err != werr {
		t.Errorf("Close after failure: %v", err)
	}
}

// A regular file target on a full filesystem fails in write() itself: the
// region starts exactly where the data stopped.
func TestRealFileTargetWriteError(t *testing.T) {
	requireRoot(t)
	small := t.TempDir()
	mount(t, "-t", "tmpfs", "-o", "size=1m", "tmpfs", small)
	dev, err := Open(filepath.Join(small, "out.raw"), 0, Options{CreateFile: true, SyncEvery: -1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer dev.Close()
	chunk := make([]byte, 100_000)
	var written int64
	for i := 0; i < 20; i++ {
		n, err := dev.Write(chunk)
		written += int64(n)
		if err != nil {
			var ioe *IOError
			if !errors.As(err, &ioe) || !errors.Is(err, unix.ENOSPC) {
				t.Fatalf("want IOError(ENOSPC), got %v", err)
			}
			if ioe.Op != "write" || ioe.Offset != written || ioe.Offset+ioe.Len != int64(i+1)*int64(len(chunk)) {
				t.Errorf("region %d+%d, want start %d end %d", ioe.Offset, ioe.Len, written, (i+1)*len(chunk))
			}
			return
		}
	}
	t.Fatal("writing 2 MB to a 1 MiB tmpfs did not fail")
}

// device-mapper: a linear target with an "error" target spliced in at
// 2-3 MiB, when dmsetup and the kernel driver are available.
func TestRealDeviceMapperErrorTarget(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("dmsetup"); err != nil {
		t.Skip("dmsetup not installed: skipping the device-mapper error-target test")
	}
	if out, err := exec.Command("dmsetup", "version").CombinedOutput(); err != nil {
		t.Skipf("device-mapper not usable here (no dm driver?): %s", strings.TrimSpace(string(out)))
	}
	loop := newLoop(t, "", 8<<20, false)
	name := fmt.Sprintf("talosflash-test-%d", os.Getpid())
	table := fmt.Sprintf("0 4096 linear %s 0\n4096 2048 error\n6144 10240 linear %s 6144\n", loop, loop)
	cmd := exec.Command("dmsetup", "create", name)
	cmd.Stdin = strings.NewReader(table)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("dmsetup create failed: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("dmsetup", "remove", "--retry", name).CombinedOutput(); err != nil {
			t.Errorf("dmsetup remove %s: %v: %s", name, err, out)
		}
	})
	path := "/dev/mapper/" + name
	_, err := Check(path, 0, Options{AllowLoop: true, ForceNonRemovable: true})
	wantRefusal(t, err, CodeVirtual, "virtual dm device")

	// The refusal is right for users; the error reporting is what is tested
	// here, so open the dm device directly.
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	dev := newDevice(f, &Disk{Path: path}, true, Options{SyncEvery: 512 << 10})
	chunk := make([]byte, 128<<10)
	var werr error
	for i := 0; i < 48 && werr == nil; i++ {
		_, werr = dev.Write(chunk)
	}
	if werr == nil {
		werr = dev.Sync()
	}
	var ioe *IOError
	if !errors.As(werr, &ioe) || !IsDeviceGone(werr) {
		t.Fatalf("want IOError(EIO), got %v", werr)
	}
	if ioe.Offset > 3<<20 || ioe.Offset+ioe.Len <= 2<<20 {
		t.Errorf("region %d+%d does not overlap the error target at 2-3 MiB", ioe.Offset, ioe.Len)
	}
	dev.Close()
}

func TestRealListMarksSystemDisk(t *testing.T) {
	disks, err := List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, d := range disks {
		t.Logf("%s  safe=%v  %v", d.String(), d.Safe, d.Refusal)
		for _, m := range d.AllMounts() {
			if m.Point == "/" {
				if d.Safe || d.Refusal.Reason != CodeSystemDisk {
					t.Errorf("disk holding / is not refused as system disk: %+v", d)
				}
				return
			}
		}
	}
	t.Skip("no block device holds / here (overlay or network root)")
}

func TestElevation(t *testing.T) {
	if os.Geteuid() == 0 {
		if NeedsElevation("/dev/null") {
			t.Error("root never needs elevation")
		}
		cmd, err := ElevatedCommand([]string{"--flash", "--image", "/home/u/.cache/talos.raw"})
		if err != nil {
			t.Fatal(err)
		}
		exe, _ := os.Executable()
		if cmd.Path != exe || strings.Join(cmd.Args[1:], " ") != "--flash --image /home/u/.cache/talos.raw" {
			t.Errorf("elevated command %q %q", cmd.Path, cmd.Args)
		}
	} else if !NeedsElevation("/etc/shadow") {
		t.Error("non-root writing /etc/shadow needs elevation")
	}
	if got, want := ShellJoin([]string{"sudo", "/usr/bin/talosflash", "--image", "/tmp/my image.raw", "it's"}), `sudo /usr/bin/talosflash --image '/tmp/my image.raw' 'it'\''s'`; got != want {
		t.Errorf("ShellJoin = %s, want %s", got, want)
	}
}

// The card's write-protect is flipped (or the reader reports it late) after
// Check: the open-time BLKROGET check refuses it before any write.
func TestRealOpenRefusesReadOnlyAfterCheck(t *testing.T) {
	loop := newLoop(t, "", 16<<20, false)
	l := DefaultLister()
	d, err := l.Check(loop, 1<<20, Options{AllowLoop: true})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if out, err := exec.Command("blockdev", "--setro", loop).CombinedOutput(); err != nil {
		t.Skipf("blockdev --setro: %v: %s", err, out)
	}
	// The flag outlives the loop attachment: clear it before detaching.
	t.Cleanup(func() { exec.Command("blockdev", "--setrw", loop).Run() })
	dev, err := l.openBlock(d, 1<<20, Options{AllowLoop: true})
	if err == nil {
		dev.Close()
		t.Fatal("a read-only device was opened for writing")
	}
	wantRefusal(t, err, CodeReadOnly, "read-only")
}
