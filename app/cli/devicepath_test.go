package cli

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
)

// aBlockDevice is a block device of this machine's /dev by its bare name
// ("loop0"), for the test of `--device NAME`; the test skips without one.
func aBlockDevice(t *testing.T) string {
	t.Helper()
	for _, pattern := range []string{"/dev/loop[0-9]*", "/dev/sd[a-z]", "/dev/vd[a-z]", "/dev/nvme[0-9]n[0-9]", "/dev/mmcblk[0-9]"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.Mode()&fs.ModeDevice != 0 && fi.Mode()&fs.ModeCharDevice == 0 {
				return filepath.Base(m)
			}
		}
	}
	t.Skip("no block device in /dev to name")
	return ""
}

// --device never creates a path: a missing one is refused (exit 2), naming
// /dev/NAME for a bare disk name; an image file is written when it exists
// or, new, with --create-file; a directory is refused.
func TestFlashDeviceNeverCreatesAPath(t *testing.T) {
	fx := fakeFixture(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "talos.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(dir, "cwd")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	flash := func(device string, extra ...string) (int, string) {
		t.Helper()
		code, _, stderr := cliRun(t, append([]string{"--flash", "--image", img, "--device", device, "--yes"}, extra...)...)
		return code, stderr
	}
	absent := func(path string) {
		t.Helper()
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s was created: %v", path, err)
		}
	}
	holdsImage := func(path string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, fx.Raw) {
			t.Fatalf("%s holds %d bytes (%v), want the %d-byte image", path, len(got), err, len(fx.Raw))
		}
	}

	t.Run("missing path", func(t *testing.T) {
		card := filepath.Join(dir, "card.img")
		code, stderr := flash(card)
		if code != contract.ExitUsage || !strings.Contains(stderr, card+" does not exist") || !strings.Contains(stderr, "--create-file") {
			t.Fatalf("exit %d, want %d naming the path and --create-file: %s", code, contract.ExitUsage, stderr)
		}
		absent(card)
	})
	t.Run("bare name of a disk", func(t *testing.T) {
		name := aBlockDevice(t)
		for _, extra := range [][]string{nil, {"--create-file"}, {"--allow-loop", "--create-file"}} {
			code, stderr := flash(name, extra...)
			if code != contract.ExitUsage || !strings.Contains(stderr, "did you mean /dev/"+name+"?") {
				t.Fatalf("--device %s %v: exit %d, want %d asking about /dev/%s: %s", name, extra, code, contract.ExitUsage, name, stderr)
			}
			absent(filepath.Join(cwd, name))
		}
		// A file of that name here is not taken for the disk either.
		if err := os.WriteFile(filepath.Join(cwd, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		code, stderr := flash(name)
		if code != contract.ExitUsage || !strings.Contains(stderr, "did you mean /dev/"+name+"?") || !strings.Contains(stderr, "./"+name) {
			t.Fatalf("--device %s with ./%s present: exit %d: %s", name, name, code, stderr)
		}
		if fi, err := os.Stat(filepath.Join(cwd, name)); err != nil || fi.Size() != 0 {
			t.Fatalf("./%s was written: %v %v", name, fi, err)
		}
	})
	t.Run("existing file", func(t *testing.T) {
		card := filepath.Join(dir, "old-card.img")
		if err := os.WriteFile(card, []byte("an earlier card"), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, stderr := flash(card); code != contract.ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		holdsImage(card)
	})
	t.Run("new file with --create-file", func(t *testing.T) {
		card := filepath.Join(dir, "new-card.img")
		if code, stderr := flash(card, "--create-file"); code != contract.ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		holdsImage(card)
		// Relative, in the current directory.
		if code, stderr := flash("rel.img", "--create-file"); code != contract.ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		holdsImage(filepath.Join(cwd, "rel.img"))
	})
	t.Run("directory", func(t *testing.T) {
		code, stderr := flash(dir, "--create-file")
		if code != contract.ExitDevice || !strings.Contains(stderr, "is a directory") {
			t.Fatalf("exit %d, want %d: %s", code, contract.ExitDevice, stderr)
		}
	})
}
