package plan

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/talosflash/talosflash/imaging/devices"
)

// The cards of a flash are checked before anything is downloaded: each by
// the safety rules (a path that does not exist is refused, never created
// without CreateFile), and a card named twice, under another name too (a
// symlink), is refused naming it.
func TestCheckCards(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.img")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	disks, err := CheckCards([]string{a, b}, devices.Options{})
	if err != nil || len(disks) != 2 || disks[0].Path != a || disks[1].Path != b {
		t.Fatalf("two files: %+v, %v", disks, err)
	}
	_, err = CheckCards([]string{a, link}, devices.Options{})
	var twice *CardTwiceError
	if !errors.As(err, &twice) || twice.Path != a {
		t.Fatalf("a card and a symlink to it: %v", err)
	}
	missing := filepath.Join(dir, "missing.img")
	_, err = CheckCards([]string{a, missing}, devices.Options{})
	var refused *devices.RefusedError
	if !errors.As(err, &refused) || refused.Reason != devices.CodeNotFound {
		t.Fatalf("a missing target: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the missing target was created")
	}
}
