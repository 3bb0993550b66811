package devices

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
)

// A --device never creates a path by accident: a path that does not exist
// is refused (naming the disk under DevRoot when the name is one there), a
// new image file is created only with CreateFile, and a bare name that is
// also a disk under DevRoot is never taken for a file in the current
// directory (`--device loop2` once created ./loop2 and wrote the image into it).
func TestCheckTargetPathRules(t *testing.T) {
	l := buildFakeSystem(t, fakeSystem)
	dev := l.DevRoot
	cwd := t.TempDir()
	t.Chdir(cwd)
	if err := os.Mkdir(filepath.Join(cwd, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	existing := testkit.WriteFile(t, cwd, "old.img", "x")
	// ./mmcblk0 is a file here and mmcblk0 a disk under DevRoot.
	testkit.WriteFile(t, cwd, "mmcblk0", "")

	create := Options{CreateFile: true}
	cases := []struct {
		name, path string
		opts       Options
		code       Code
		msg        string
		suggestion string
		disk       string // Disk.Path of an accepted target
	}{
		{name: "missing file", path: "card.img", code: CodeNotFound, msg: "card.img does not exist"},
		{name: "missing file says how to create one", path: filepath.Join(cwd, "card.img"), code: CodeNotFound, msg: "--create-file"},
		{name: "missing in a missing directory", path: filepath.Join(cwd, "nope", "card.img"), opts: create, code: CodeNotFound, msg: "does not exist"},
		{name: "bare disk name", path: "sdb", code: CodeNotFound, msg: "sdb does not exist", suggestion: filepath.Join(dev, "sdb")},
		{name: "bare disk name, even with CreateFile", path: "sdb", opts: create, code: CodeNotFound, msg: "./sdb", suggestion: filepath.Join(dev, "sdb")},
		{name: "bare loop name", path: "loop0", opts: Options{AllowLoop: true}, code: CodeNotFound, suggestion: filepath.Join(dev, "loop0")},
		{name: "relative path under the disk root", path: "disk/by-id/usb-Generic_SD_MMC_20120501030900000-0:0", code: CodeNotFound,
			suggestion: filepath.Join(dev, "disk/by-id/usb-Generic_SD_MMC_20120501030900000-0:0")},
		{name: "bare name that is a file here and a disk there", path: "mmcblk0", code: CodeAmbiguous,
			msg: "./mmcblk0", suggestion: filepath.Join(dev, "mmcblk0")},
		{name: "./name is the file", path: "./mmcblk0", disk: filepath.Join(cwd, "mmcblk0")},
		{name: "./name of a disk, new file with CreateFile", path: "./sdb", opts: create, disk: filepath.Join(cwd, "sdb")},
		{name: "./name of a disk without CreateFile", path: "./sdb", code: CodeNotFound, suggestion: filepath.Join(dev, "sdb")},
		{name: "existing file", path: existing, disk: existing},
		{name: "existing file by bare name", path: "old.img", disk: existing},
		{name: "new file with CreateFile", path: filepath.Join("images", "new.img"), opts: create, disk: filepath.Join(cwd, "images", "new.img")},
		{name: "new bare file with CreateFile", path: "new.img", opts: create, disk: filepath.Join(cwd, "new.img")},
		{name: "directory", path: "images", opts: create, code: CodeDirectory, msg: "is a directory"},
		{name: "bare name of a directory under the disk root", path: "disk", code: CodeNotFound, msg: "disk does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := l.Check(c.path, 0, c.opts)
			if c.code == "" {
				if err != nil {
					t.Fatalf("Check(%s): %v", c.path, err)
				}
				if d.Path != c.disk || d.Transport != TransportFile {
					t.Fatalf("Check(%s) = %s (%s), want the file %s", c.path, d.Path, d.Transport, c.disk)
				}
				return
			}
			var r *RefusedError
			if !errors.As(err, &r) {
				t.Fatalf("Check(%s) = %+v, %v; want refusal %s", c.path, d, err, c.code)
			}
			if r.Reason != c.code || !strings.Contains(r.Msg, c.msg) || r.Suggestion != c.suggestion {
				t.Fatalf("Check(%s): %s %q suggestion %q; want %s containing %q suggestion %q", c.path, r.Reason, r.Msg, r.Suggestion, c.code, c.msg, c.suggestion)
			}
			if c.suggestion != "" && !strings.Contains(err.Error(), "did you mean "+c.suggestion+"?") {
				t.Fatalf("error text %q does not ask about %s", err, c.suggestion)
			}
		})
	}
	// Nothing was created by a refusal or a check.
	for _, name := range []string{"card.img", "sdb", "loop0", "new.img", filepath.Join("images", "new.img")} {
		if _, err := os.Lstat(filepath.Join(cwd, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after Check: %v", name, err)
		}
	}
	// Open follows the same rules: it writes the file it was given only.
	if _, err := l.Open("sdb", 0, create); err == nil {
		t.Fatal("Open(sdb) succeeded")
	}
	if _, err := os.Lstat(filepath.Join(cwd, "sdb")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open(sdb) created ./sdb: %v", err)
	}
	d, err := l.Open("./sdb", 0, create)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fi, err := os.Stat(filepath.Join(cwd, "sdb")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("Open(./sdb) with CreateFile: %v %v", fi, err)
	}
}
