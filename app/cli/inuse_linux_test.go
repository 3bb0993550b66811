package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
)

// A target in use (named twice, the backing file of a mounted loop device,
// a second loop device over that file) is refused with exit 5, naming
// what uses it, before anything is written.
func TestTargetInUseExitsDevice(t *testing.T) {
	fx := fakeFixture(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "src.img") // xz inside: the content decides
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(dir, "a.img")
	os.WriteFile(a, []byte("before"), 0o644)
	link := filepath.Join(dir, "link.img")
	if err := os.Link(a, link); err != nil {
		t.Fatal(err)
	}
	check := func(want string, args ...string) {
		t.Helper()
		code, _, stderr := cliRun(t, append([]string{"--flash", "--image", img, "--yes"}, args...)...)
		if code != contract.ExitDevice || !strings.Contains(stderr, want) {
			t.Fatalf("%v: exit %d, want %d naming %q: %s", args, code, contract.ExitDevice, want, stderr)
		}
	}
	check("same card", "--device", a, "--device", link)
	if b, _ := os.ReadFile(a); string(b) != "before" {
		t.Fatal("the card was written")
	}
	check("is the image file being flashed", "--device", img)

	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	lp := filepath.Join(dir, "lp.img")
	os.WriteFile(lp, make([]byte, 32<<20), 0o644)
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Skipf("%s: %v: %s", name, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("mkfs.ext4", "-q", "-F", lp)
	first := run("losetup", "-f", "--show", lp)
	t.Cleanup(func() { exec.Command("losetup", "-d", first).Run() })
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	run("mount", first, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	check("backing file of the attached loop device "+first, "--device", lp)
	second := run("losetup", "-f", "--show", lp)
	t.Cleanup(func() { exec.Command("losetup", "-d", second).Run() })
	check("which the loop device "+first+" also uses", "--device", second, "--allow-loop")
}
