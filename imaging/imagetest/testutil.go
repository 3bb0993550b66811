package imagetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FileSHA256 is the hex SHA-256 of the first n bytes of path (a file or a
// block device: tests compare what landed on a target with an image).
func FileSHA256(t testing.TB, path string, n int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, n); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// LoopDevice attaches a sparse file of size bytes to a free loop device
// (with partition scanning when partScan) and detaches it when the test
// ends. It skips the test, saying why, where loop devices can't be had
// (not root, no loop driver).
func LoopDevice(t testing.TB, size int64, partScan bool) string {
	t.Helper()
	return LoopDeviceIn(t, "", size, partScan)
}

// LoopDeviceIn is LoopDevice with the backing file in dir ("" for a
// t.TempDir()), e.g. on a small tmpfs to make the device fail with EIO.
func LoopDeviceIn(t testing.TB, dir string, size int64, partScan bool) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	if dir == "" {
		dir = t.TempDir()
	}
	f, err := os.CreateTemp(dir, "loop-*.img")
	if err != nil {
		t.Fatal(err)
	}
	backing := f.Name()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	args := []string{"-f", "--show"}
	if partScan {
		args = append(args, "-P")
	}
	out, err := exec.Command("losetup", append(args, backing)...).CombinedOutput()
	if err != nil {
		t.Skipf("loop devices unavailable (losetup -f --show: %v: %s)", err, bytes.TrimSpace(out))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// DeviceWrites is how many writes the kernel has completed on the block
// device dev (the fifth field of /sys/block/NAME/stat): a test asserts
// that a refused flash wrote nothing, not even what it would have put
// back. Linux only; the test fails where it cannot be read.
func DeviceWrites(t testing.TB, dev string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "stat"))
	if err != nil {
		t.Fatalf("write count of %s: %v", dev, err)
	}
	f := strings.Fields(string(b))
	if len(f) < 5 {
		t.Fatalf("write count of %s: %q", dev, b)
	}
	n, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		t.Fatalf("write count of %s: %v", dev, err)
	}
	return n
}
