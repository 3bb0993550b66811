package imaging

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// assertRefusedInUse flashes to targets and checks the flash is refused
// as a target in use, naming want, with every existing target unchanged.
func assertRefusedInUse(t *testing.T, targets []string, want string) {
	t.Helper()
	img := testImage(t)
	before := map[string]string{}
	for _, p := range targets {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			before[p] = sha256File(t, p)
		}
	}
	_, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img.xz", img.XZ)}, Targets: targets, Verify: true})
	if !errors.Is(err, ErrTargetInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("targets %q: got %v, want a target in use naming %s", targets, err, want)
	}
	for p, sum := range before {
		if sha256File(t, p) != sum {
			t.Fatalf("%s was written", p)
		}
	}
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Skipf("%s %v: %v: %s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// One card named twice is refused, whatever the two names.
func TestOneCardNamedTwiceRefused(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.img")
	if err := os.WriteFile(a, []byte("the card before"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.img")
	if err := os.Link(a, link); err != nil {
		t.Fatal(err)
	}
	assertRefusedInUse(t, []string{a, link}, "same card")
	sym := filepath.Join(dir, "sym.img")
	os.Symlink(a, sym)
	assertRefusedInUse(t, []string{filepath.Join(dir, "other.img"), sym, a}, "same card")
	// A card still to be created, named through a symlinked directory.
	os.Symlink(dir, filepath.Join(dir, "via"))
	assertRefusedInUse(t, []string{filepath.Join(dir, "new.img"), filepath.Join(dir, "via", "new.img")}, "same card")
	if _, err := os.Stat(filepath.Join(dir, "new.img")); err == nil {
		t.Fatal("the new card was created")
	}

	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	bind := filepath.Join(t.TempDir(), "bind")
	os.Mkdir(bind, 0o755)
	mustRun(t, "mount", "--bind", dir, bind)
	t.Cleanup(func() { exec.Command("umount", bind).Run() })
	assertRefusedInUse(t, []string{a, filepath.Join(bind, "a.img")}, "same card")
}

// An attached loop device's backing file is not a target (a file system
// may be mounted from it), nor is a second loop device over that file.
func TestLoopBackingFileRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	dir := t.TempDir()
	lp := filepath.Join(dir, "lp.img")
	if err := os.WriteFile(lp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(lp, 32<<20); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "mkfs.ext4", "-q", "-F", lp)
	first := mustRun(t, "losetup", "-f", "--show", lp)
	t.Cleanup(func() { exec.Command("losetup", "-d", first).Run() })
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	mustRun(t, "mount", first, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	name := filepath.Base(first)

	assertRefusedInUse(t, []string{lp}, "backing file of the attached loop device /dev/"+name)
	link := filepath.Join(dir, "hard.img")
	os.Link(lp, link)
	assertRefusedInUse(t, []string{link}, "/dev/"+name)

	second := mustRun(t, "losetup", "-f", "--show", lp)
	t.Cleanup(func() { exec.Command("losetup", "-d", second).Run() })
	assertRefusedInUse(t, []string{second}, "loop device /dev/"+name+" also uses")
	// The same block device through two names.
	other := filepath.Join(dir, "other.img")
	os.WriteFile(other, make([]byte, 16<<20), 0o644)
	third := mustRun(t, "losetup", "-f", "--show", other)
	t.Cleanup(func() { exec.Command("losetup", "-d", third).Run() })
	sym := filepath.Join(dir, "dev-link")
	os.Symlink(third, sym)
	assertRefusedInUse(t, []string{third, sym}, "same card")
}
